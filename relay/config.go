package main

import (
	"fmt"
	"time"

	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/platform"
)

// serviceName is the default of K_SERVICE.
const serviceName = "relay"

type config struct {
	platform.Config
	// Sources are the service databases whose outboxes the relay delivers (RELAY_SOURCES,
	// comma-separated full database names, required), each with the service that owns it (from
	// the routes file's sources).
	Sources []platform.DatabaseName
	// Services maps each source's database id to its service name (the routes file's sources).
	Services map[string]string
	// Routing is the routes file (RELAY_ROUTES, default the embedded routes.yaml) with the
	// environment applied: TASKS_LOCATION and the consumers' URLs (ORDERS_URL, FULFILLMENT_URL,
	// GATEWAY_URL, NOTIFICATIONS_URL), or whatever variables a custom file references.
	Routing routing
	// ServiceAccount is the e-mail the tasks' OIDC tokens are minted for (RELAY_SERVICE_ACCOUNT,
	// required): the relay's own service account in production.
	ServiceAccount string
	// TasksEmulator is CLOUD_TASKS_EMULATOR_HOST (host:port): when set, the Cloud Tasks client
	// talks plaintext gRPC without credentials to the emulator.
	TasksEmulator string
	// Ledger configures the delivery ledger: RELAY_LEDGER (default true), RELAY_LEDGER_INTERVAL
	// between audits (default 1m), RELAY_LEDGER_MIN_AGE before a delivery is asked about (default
	// 1m) and RELAY_LEDGER_GRACE past a queue's retry horizon before it is missing (default 10m).
	// Its ID tokens come from the metadata server (locally GCE_METADATA_HOST: the Tasks emulator).
	Ledger                                    bool
	LedgerInterval, LedgerMinAge, LedgerGrace time.Duration
	// Access to the relay's own endpoints, which take Google ID tokens for the relay's URL
	// (OIDC_AUDIENCE, required) from OIDC_ISSUER (default Google's): the operators'
	// (ADMIN_ALLOWED_EMAILS: status, replays, the ledger; ADMIN_DELEGATE_EMAILS may act for one)
	// and the services' own accounts for POST /nudge (NUDGE_ALLOWED_EMAILS). Either list empty:
	// nobody may.
	Issuer, Audience     string
	Operators, Delegates []string
	Nudgers              []string
}

// loadConfig reads the environment through getenv and reports every missing or invalid
// variable in one error.
func loadConfig(getenv func(string) string) (config, error) {
	env := platform.NewEnv(getenv)
	sources := env.Databases("RELAY_SOURCES")
	var project string
	if len(sources) > 0 {
		project = sources[0].Project
	}
	cfg := config{Config: platform.LoadConfig(env, serviceName, project), Sources: sources}
	cfg.ServiceAccount = env.Required("RELAY_SERVICE_ACCOUNT")
	cfg.TasksEmulator = env.Lookup("CLOUD_TASKS_EMULATOR_HOST")
	cfg.Routing = loadRouting(env)
	cfg.Ledger = env.Bool("RELAY_LEDGER", true)
	cfg.LedgerInterval = env.Duration("RELAY_LEDGER_INTERVAL", time.Minute, 10*time.Millisecond, 24*time.Hour)
	cfg.LedgerMinAge = env.Duration("RELAY_LEDGER_MIN_AGE", time.Minute, time.Millisecond, 24*time.Hour)
	cfg.LedgerGrace = env.Duration("RELAY_LEDGER_GRACE", 10*time.Minute, time.Millisecond, 24*time.Hour)
	cfg.Issuer = env.URL("OIDC_ISSUER", outboxlib.GoogleIssuer)
	cfg.Audience = env.Required("OIDC_AUDIENCE")
	cfg.Operators = env.List("ADMIN_ALLOWED_EMAILS", false)
	cfg.Delegates = env.List("ADMIN_DELEGATE_EMAILS", false)
	cfg.Nudgers = env.List("NUDGE_ALLOWED_EMAILS", false)
	cfg.Services = map[string]string{}
	for _, db := range sources {
		svc, ok := cfg.Routing.Services[db.Database]
		if !ok && cfg.Routing.Services != nil {
			env.Invalid("RELAY_SOURCES", db.String(), fmt.Errorf("database %s is not among the routes file's sources", db.Database))
			continue
		}
		cfg.Services[db.Database] = svc
	}
	return cfg, env.Err()
}
