// Package topology is the roster of Spanmart's deployables, written once: each service's name
// (binary, Cloud Run service, K_SERVICE, subscriber name in relay/routes.yaml), Go package, Spanner
// database, dev-stack port, inbox queues and the variable that carries its URL to the relay.
// Everything that lists services (the dev stack, the e2e harness, the bench and the demo,
// pkg/dbschema) derives its list from here; a root test checks relay/routes.yaml and
// cloudbuild.yaml against it.
//
// The payment gateway keeps the names it has in production resources: service
// gateway-abstraction, database payments, queue gateway-inbox, variable GATEWAY_URL. This is the
// one place that maps them.
package topology

import "strings"

// Service is one deployable.
type Service struct {
	Name     string // binary, Cloud Run service and subscriber name, e.g. "orders"
	Package  string // Go main package, relative to the repository root
	Database string // the service's own Spanner database; "" for the relay (which reads them all) and the console (which reads none)
	DevPort  int    // HTTP port in the dev stack (before -port-offset)
	// Queues are its inbox queue ids: one per consumer, or several when one queue's 500
	// dispatches/s are not enough (the relay spreads the consumer's tasks over them by aggregate
	// id: docs/capacity.md); none for the relay and the console.
	Queues []string
	URLVar string // the relay's environment variable with the service's URL; "" for the relay and the console
}

// Consumer reports whether the service consumes events (has an inbox queue).
func (s Service) Consumer() bool { return len(s.Queues) > 0 }

// Names the stacks refer to by role.
const (
	Orders        = "orders"
	Fulfillment   = "fulfillment"
	Gateway       = "gateway-abstraction" // the payment providers' webhooks reach it
	Notifications = "notifications"       // sends the customers' e-mails
	Relay         = "relay"               // reads every database's outbox
	Console       = "console"             // the operators' web console: reads the others' admin APIs
)

// services in start order: consumers first, the relay (which delivers to them), then the console
// (which reads them all).
var services = []Service{
	{Name: Orders, Package: "./services/orders", Database: "orders", DevPort: 8081, Queues: []string{"orders-inbox"}, URLVar: "ORDERS_URL"},
	{Name: Fulfillment, Package: "./services/fulfillment", Database: "fulfillment", DevPort: 8082, Queues: []string{"fulfillment-inbox"}, URLVar: "FULFILLMENT_URL"},
	{Name: Gateway, Package: "./services/gateway-abstraction", Database: "payments", DevPort: 8083, Queues: []string{"gateway-inbox"}, URLVar: "GATEWAY_URL"},
	{Name: Notifications, Package: "./services/notifications", Database: "notifications", DevPort: 8084, Queues: []string{"notifications-inbox"}, URLVar: "NOTIFICATIONS_URL"},
	{Name: Relay, Package: "./relay", DevPort: 8085},
	{Name: Console, Package: "./services/console", DevPort: 8086},
}

// Services returns every deployable, in start order (stop in reverse).
func Services() []Service { return append([]Service(nil), services...) }

// Names returns the names of every deployable, in start order.
func Names() []string {
	out := make([]string, len(services))
	for i, s := range services {
		out[i] = s.Name
	}
	return out
}

// Consumers returns the services that consume events, in start order.
func Consumers() []Service {
	var out []Service
	for _, s := range services {
		if s.Consumer() {
			out = append(out, s)
		}
	}
	return out
}

// Queues returns the inbox queue ids of every consumer.
func Queues() []string {
	var out []string
	for _, s := range Consumers() {
		out = append(out, s.Queues...)
	}
	return out
}

// Databases returns the service databases, in start order of their owners.
func Databases() []string {
	var out []string
	for _, s := range services {
		if s.Database != "" {
			out = append(out, s.Database)
		}
	}
	return out
}

// Lookup returns the service called name.
func Lookup(name string) (Service, bool) {
	for _, s := range services {
		if s.Name == name {
			return s, true
		}
	}
	return Service{}, false
}

// OwnerOf returns the service that owns database db.
func OwnerOf(db string) (Service, bool) {
	for _, s := range services {
		if s.Database == db && db != "" {
			return s, true
		}
	}
	return Service{}, false
}

// RelayURLEnv returns the relay's URL variables for the consumers, "NAME=" + url(service) each.
func RelayURLEnv(url func(Service) string) []string {
	var out []string
	for _, s := range Consumers() {
		out = append(out, s.URLVar+"="+url(s))
	}
	return out
}

// Binary returns the binary's file name: the last element of its package.
func (s Service) Binary() string { return s.Package[strings.LastIndex(s.Package, "/")+1:] }
