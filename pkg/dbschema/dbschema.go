// Package dbschema lists Spanmart's Spanner databases and the migration streams that build each one:
// the outbox stream shared by all of them first, then the service's own. The migration runner
// (pkg/migrate), the dev stack, tests and tools/daogen all take the list from here, so a new database
// or stream is added in one place.
package dbschema

import (
	"fmt"
	"slices"
	"strings"

	fulfillmentschema "github.com/spanmart/spanmart/services/fulfillment/schema"
	paymentsschema "github.com/spanmart/spanmart/services/gateway-abstraction/schema"
	notificationsschema "github.com/spanmart/spanmart/services/notifications/schema"
	ordersschema "github.com/spanmart/spanmart/services/orders/schema"

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

// databases in the order the services that own them start (internal/topology's roster, whose
// Database fields name these constants; its test checks that the two agree): each is the outbox
// stream followed by the service's own.
var databases = []migrate.Database{
	{Name: Orders, Streams: []migrate.Stream{Outbox, {Name: Orders, Dir: "services/orders/schema", FS: ordersschema.Migrations}}},
	{Name: Fulfillment, Streams: []migrate.Stream{Outbox, {Name: Fulfillment, Dir: "services/fulfillment/schema", FS: fulfillmentschema.Migrations}}},
	{Name: Payments, Streams: []migrate.Stream{Outbox, {Name: Payments, Dir: "services/gateway-abstraction/schema", FS: paymentsschema.Migrations}}},
	{Name: Notifications, Streams: []migrate.Stream{Outbox, {Name: Notifications, Dir: "services/notifications/schema", FS: notificationsschema.Migrations}}},
}

// Databases returns every service database.
func Databases() []migrate.Database { return slices.Clone(databases) }

// Names returns the name of every service database.
func Names() []string {
	out := make([]string, len(databases))
	for i, d := range databases {
		out[i] = d.Name
	}
	return out
}

// Lookup returns the database called name.
func Lookup(name string) (migrate.Database, error) {
	for _, d := range databases {
		if d.Name == name {
			return d, nil
		}
	}
	return migrate.Database{}, fmt.Errorf("unknown database %q (want one of %s)", name, strings.Join(Names(), ", "))
}
