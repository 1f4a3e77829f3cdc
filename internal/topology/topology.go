// Package topology is the roster of Spanmart's deployables, written once: each service's name
// (binary, Cloud Run service, K_SERVICE, subscriber name in relay/routes.yaml), Go package, Spanner
// database, dev-stack port, inbox queues and the variable that carries its URL to the relay.
// Everything that lists services (the dev stack, the e2e harness, the bench and the demo) derives
// its list from here; the databases are pkg/dbschema's; a root test checks relay/routes.yaml and
// cloudbuild.yaml against it.
//
// The payment gateway keeps the names it has in production resources: service
// gateway-abstraction, database payments, queue gateway-inbox, variable GATEWAY_URL. This is the
// one place that maps them.
package topology

import (
	"strings"
	"time"

	gatewayapi "github.com/spanmart/spanmart/services/gateway-abstraction/api"
	notificationsapi "github.com/spanmart/spanmart/services/notifications/api"
	ordersapi "github.com/spanmart/spanmart/services/orders/api"

	"github.com/spanmart/spanmart/pkg/dbschema"
)

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
	{Name: Orders, Package: "./services/orders", Database: dbschema.Orders, DevPort: 8081, Queues: []string{"orders-inbox"}, URLVar: "ORDERS_URL"},
	{Name: Fulfillment, Package: "./services/fulfillment", Database: dbschema.Fulfillment, DevPort: 8082, Queues: []string{"fulfillment-inbox"}, URLVar: "FULFILLMENT_URL"},
	{Name: Gateway, Package: "./services/gateway-abstraction", Database: dbschema.Payments, DevPort: 8083, Queues: []string{"gateway-inbox"}, URLVar: "GATEWAY_URL"},
	{Name: Notifications, Package: "./services/notifications", Database: dbschema.Notifications, DevPort: 8084, Queues: []string{"notifications-inbox"}, URLVar: "NOTIFICATIONS_URL"},
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

// Job is one of Cloud Scheduler's jobs: an operator endpoint of a service called with POST and an
// ID token of the scheduler's own account (Scheduler) on a schedule. cloudbuild.yaml creates them
// in production (a root test checks it against Jobs); internal/localscheduler calls them on the
// local stacks.
type Job struct {
	Name    string // the Cloud Scheduler job, e.g. "payments-sweep"
	Service string // the service called
	Path    string // its POST operator route
}

// Scheduler is the deployable-less account Cloud Scheduler calls the jobs as (scheduler@...):
// every service with a job admits it on its operator endpoints.
const Scheduler = "scheduler"

// JobEvery is how often every job runs in production; JobSchedule is the same as Cloud Scheduler's
// cron expression.
const (
	JobEvery    = 5 * time.Minute
	JobSchedule = "*/5 * * * *"
)

// jobs: the payment sweep (resume unfinished provider calls, ask about payments whose webhook is
// late), the e-mail sweep (send e-mails left unsent, or waiting out a back-off) and orders' audit
// (stuck orders, reconciliation). The paths are the services' own (their api packages, which
// import nothing of the repository).
var jobs = []Job{
	{Name: "payments-sweep", Service: Gateway, Path: gatewayapi.PathSweep},
	{Name: "notifications-sweep", Service: Notifications, Path: notificationsapi.PathSweep},
	{Name: "orders-audit", Service: Orders, Path: ordersapi.PathAudit},
}

// Jobs returns Cloud Scheduler's jobs.
func Jobs() []Job { return append([]Job(nil), jobs...) }

// HasJob reports whether Cloud Scheduler calls the service called name.
func HasJob(name string) bool {
	for _, j := range jobs {
		if j.Service == name {
			return true
		}
	}
	return false
}
