// Package localenv is what the two local stacks (emulator/devstack, e2e/harness) share about the
// system they bring up: the environment each deployable gets (the variables it reads on Cloud
// Run, pointed at the emulators and the payment sandbox), the subscriber queues and the catalog.
// Both stacks build every process's environment and create the queues and the catalog here, so
// that a variable a service starts to read, or a consumer that joins the roster, is handled once,
// for both. How they run the processes differs on purpose: the dev stack on fixed ports with
// persistent state and one console, the harness on free ports with everything in-process that can
// be, killable and restartable by a test.
package localenv

import (
	"strconv"
	"strings"

	"github.com/spanmart/spanmart/internal/localcloud"
	"github.com/spanmart/spanmart/internal/topology"
	"github.com/spanmart/spanmart/pkg/dbschema"
)

// MailFrom is the sender of the customers' e-mails on a local stack.
const MailFrom = "Spanmart <no-reply@spanmart.example>"

// The payment sandbox's keys and webhook secrets on a local stack: test values of the sandbox's
// own, never a provider's.
const (
	StripeAPIKey        = "sk_test_spanmart_local"
	StripeWebhookSecret = "whsec_spanmart_local"
	KomojuSecretKey     = "sk_test_komoju_spanmart_local"
	KomojuWebhookSecret = "komoju_whsec_spanmart_local"
)

// StripeWebhookEvents are the event types the local Stripe webhook endpoint is subscribed to,
// comma-separated, as the production endpoint is (services/gateway-abstraction/README.md): the
// gateway reads payments from payment_intent.* and refunds from refund.*; charge.* is not sent.
const StripeWebhookEvents = "payment_intent.*,refund.*"

// Stack is what the environment points at.
type Stack struct {
	Instance    string // "projects/spanmart-local/instances/dev"
	SpannerAddr string // host:port of the Spanner emulator
	TasksAddr   string // host:port of the Tasks emulator's gRPC API
	TasksHTTP   string // http://host:port of the Tasks emulator's OIDC issuer and metadata server
	PaysimURL   string // http://host:port of the payment sandbox
	// AuthURL is http://host:port of the customers' identity provider (emulator/authemu): the
	// issuer of the customers' ID tokens, as Identity Platform is in production.
	AuthURL  string
	SMTPAddr string // host:port of the mail server the notifications service sends to
	LogLevel string
	// CarrierAfter, when set (a Go duration), makes fulfillment's simulated carrier ship a
	// shipment that long after it was created (CARRIER_SIMULATE_AFTER); the dev stack sets it so
	// that orders complete on their own, the e2e tests ship through the warehouse API instead.
	CarrierAfter string
	// URL is the base URL of the process called name (a roster name, or a second instance).
	URL func(name string) string
	// Port is the port the process called name listens on.
	Port func(name string) int
}

// Database is the full name of a service database of the stack.
func (st Stack) Database(db string) string { return st.Instance + "/databases/" + db }

// Env is the environment of process name, an instance of roster service svc.
func (st Stack) Env(name string, svc topology.Service) []string {
	env := []string{
		"PORT=" + strconv.Itoa(st.Port(name)),
		"SPANNER_EMULATOR_HOST=" + st.SpannerAddr,
		"CLOUD_TASKS_EMULATOR_HOST=" + st.TasksAddr,
		"GOOGLE_CLOUD_PROJECT=" + localcloud.Project,
		"LOG_LEVEL=" + st.LogLevel,
		"K_SERVICE=" + name,
		// Every process has an identity of its own, as on Cloud Run: its ID tokens (a nudge of the
		// relay, the relay's ledger calls, orders' reconciliation, the console's reads) come from
		// the metadata server, which the Tasks emulator answers locally. It also makes Google's
		// libraries look for credentials there, which the emulators do not ask for.
		"GCE_METADATA_HOST=" + strings.TrimPrefix(st.TasksHTTP, "http://"),
		"SERVICE_ACCOUNT=" + localcloud.Account(svc.Name),
		// Who may call the operator endpoints (/admin/*, replays): the operator and the console,
		// which acts on behalf of the operator it verified (ADMIN_DELEGATE_EMAILS).
		"ADMIN_DELEGATE_EMAILS=" + localcloud.Account(topology.Console),
		// One processor, as each Cloud Run instance has (cloudbuild.yaml: --cpu=1, GOMAXPROCS=1):
		// Go would otherwise size its scheduler to every core of this machine, and its idle
		// processors would spin looking for work (a fifth of the services' CPU in the bench).
		"GOMAXPROCS=1",
		// The collector sized to the instance's memory, not to the heap: a service's live heap is
		// a few MB and it allocates tens of MB a second (protobuf, gRPC, JSON), so Go's default
		// (GOGC=100: collect whenever the heap doubles) collected several times a second, about
		// a tenth of each service's CPU. GOGC=400 lets the heap grow to five times the live heap
		// between collections, and GOMEMLIMIT (three quarters of the instance's 512 MiB) makes the
		// collector work harder before the instance would run out of memory.
		"GOGC=400",
		"GOMEMLIMIT=384MiB",
	}
	switch {
	case svc.Database != "":
		admins := localcloud.Operator + "," + localcloud.Account(topology.Console)
		if svc.Name == topology.Gateway {
			admins += "," + localcloud.OrdersAccount // orders' reconciliation reads payments
		}
		if topology.HasJob(svc.Name) {
			admins += "," + localcloud.Account(topology.Scheduler) // the local scheduler's jobs (internal/localscheduler)
		}
		// Consumers accept only tasks whose OIDC token the Tasks emulator signed for them, on the
		// relay's behalf: in production the issuer is Google and the e-mail the relay's account.
		env = append(env,
			"SPANNER_DATABASE="+st.Database(svc.Database),
			"OIDC_ISSUER="+st.TasksHTTP,
			"OIDC_AUDIENCE="+st.URL(name),
			"OIDC_ALLOWED_EMAILS="+localcloud.ServiceAccount,
			"ADMIN_ALLOWED_EMAILS="+admins,
			"RELAY_URL="+st.URL(topology.Relay))
		switch svc.Name {
		case topology.Gateway:
			env = append(env, st.gatewayEnv()...)
		case topology.Orders:
			env = append(env, st.ordersEnv()...)
		case topology.Fulfillment:
			env = append(env, "WAREHOUSE_ALLOWED_EMAILS="+localcloud.Warehouse)
			if st.CarrierAfter != "" {
				env = append(env, "CARRIER_SIMULATE_AFTER="+st.CarrierAfter)
			}
		case topology.Notifications:
			// The mail server is local: a session that takes 2 s is stuck. An attempt's lease is
			// 4 s plus twice that (services/notifications/README.md), so a resend after a crash
			// comes within seconds rather than production's minutes.
			env = append(env, "SMTP_ADDR="+st.SMTPAddr, "SMTP_FROM="+MailFrom, "SMTP_TIMEOUT=2s", "NOTIFICATIONS_RESUME_AFTER=4s")
		}
		return env
	case svc.Name == topology.Console:
		// The console verifies its users' ID tokens (the operator's, minted by the Tasks emulator
		// locally; Google's behind IAP in production) and reads every service as itself.
		env = append(env,
			"OIDC_ISSUER="+st.TasksHTTP,
			"OIDC_AUDIENCE="+st.URL(name),
			"CONSOLE_ALLOWED_EMAILS="+localcloud.Operator,
			"RELAY_URL="+st.URL(topology.Relay))
		return append(env, topology.RelayURLEnv(func(s topology.Service) string { return st.URL(s.Name) })...)
	}
	var sources, nudgers []string
	for _, db := range dbschema.Databases() {
		sources = append(sources, st.Database(db.Name))
	}
	for _, s := range topology.Services() {
		if s.Database != "" {
			nudgers = append(nudgers, localcloud.Account(s.Name))
		}
	}
	return append(append(env,
		"RELAY_SOURCES="+strings.Join(sources, ","),
		"RELAY_SERVICE_ACCOUNT="+localcloud.ServiceAccount,
		"TASKS_LOCATION="+localcloud.Location,
		// Its operator endpoints and the nudge take ID tokens the Tasks emulator signs, like the
		// consumers' deliveries: the operator's and the console's, and the services' own.
		"OIDC_ISSUER="+st.TasksHTTP,
		"OIDC_AUDIENCE="+st.URL(name),
		"ADMIN_ALLOWED_EMAILS="+localcloud.Operator+","+localcloud.Account(topology.Console),
		"NUDGE_ALLOWED_EMAILS="+strings.Join(nudgers, ",")),
		topology.RelayURLEnv(func(s topology.Service) string { return st.URL(s.Name) })...)
}

// ordersEnv lets orders' audit read fulfillment and the gateway (the reconciliation), with ID
// tokens for its own account, and names who signs its customers' ID tokens: the local stand-in of
// Identity Platform, whose iss is its URL and whose aud is the project id.
func (st Stack) ordersEnv() []string {
	return []string{
		"FULFILLMENT_URL=" + st.URL(topology.Fulfillment), "GATEWAY_URL=" + st.URL(topology.Gateway),
		"CUSTOMER_ISSUER=" + st.AuthURL, "CUSTOMER_AUDIENCE=" + localcloud.CustomerAudience,
	}
}

// gatewayEnv points both provider adapters at the sandbox.
func (st Stack) gatewayEnv() []string {
	return []string{
		"STRIPE_API_KEY=" + StripeAPIKey,
		"STRIPE_API_URL=" + st.PaysimURL,
		"STRIPE_WEBHOOK_SECRET=" + StripeWebhookSecret,
		"KOMOJU_SECRET_KEY=" + KomojuSecretKey,
		"KOMOJU_API_URL=" + st.PaysimURL,
		"KOMOJU_WEBHOOK_SECRET=" + KomojuWebhookSecret,
	}
}

// WebhookURLs are where the sandbox delivers each dialect's webhooks: the gateway's endpoints.
func (st Stack) WebhookURLs() (stripe, komoju string) {
	base := st.URL(topology.Gateway)
	return base + "/webhooks/stripe", base + "/webhooks/komoju"
}
