// Package dbschema lists Spanmart's Spanner databases and the migration streams that build each one:
// the outbox stream shared by all of them first, then the service's own. The migration runner
// (pkg/migrate), the dev stack, tests and tools/daogen all take the list from here, so a new database
// or stream is added in one place.
package dbschema

import (
	"fmt"
	"strings"

	fulfillmentschema "github.com/spanmart/spanmart/services/fulfillment/schema"
	paymentsschema "github.com/spanmart/spanmart/services/gateway-abstraction/schema"
	notificationsschema "github.com/spanmart/spanmart/services/notifications/schema"
	ordersschema "github.com/spanmart/spanmart/services/orders/schema"

	"github.com/spanmart/spanmart/internal/topology"
	"github.com/spanmart/spanmart/pkg/migrate"
	outboxschema "github.com/spanmart/spanmart/pkg/outboxlib/schema"
)

// Outbox is the stream of the outbox and inbox tables every service database carries.
var Outbox = migrate.Stream{Name: "outbox", Dir: "pkg/outboxlib/schema", FS: outboxschema.Migrations}

// Database names (the last element of projects/P/instances/I/databases/D).
const (
	Orders        = "orders"
	Fulfillment   = "fulfillment"
	Payments      = "payments" // owned by services/gateway-abstraction
	Notifications = "notifications"
)

// own is the service's own migration stream of each database.
var own = map[string]migrate.Stream{
	Orders:        {Name: Orders, Dir: "services/orders/schema", FS: ordersschema.Migrations},
	Fulfillment:   {Name: Fulfillment, Dir: "services/fulfillment/schema", FS: fulfillmentschema.Migrations},
	Payments:      {Name: Payments, Dir: "services/gateway-abstraction/schema", FS: paymentsschema.Migrations},
	Notifications: {Name: Notifications, Dir: "services/notifications/schema", FS: notificationsschema.Migrations},
}

// Databases returns every service database, in the roster's order (internal/topology), each the
// outbox stream followed by its service's own.
func Databases() []migrate.Database {
	var out []migrate.Database
	for _, db := range topology.Databases() {
		stream, ok := own[db]
		if !ok {
			panic(fmt.Sprintf("dbschema: the roster's database %q has no migration stream", db))
		}
		out = append(out, migrate.Database{Name: db, Streams: []migrate.Stream{Outbox, stream}})
	}
	return out
}

// Lookup returns the database called name.
func Lookup(name string) (migrate.Database, error) {
	for _, d := range Databases() {
		if d.Name == name {
			return d, nil
		}
	}
	return migrate.Database{}, fmt.Errorf("unknown database %q (want one of %s)", name, strings.Join(topology.Databases(), ", "))
}
