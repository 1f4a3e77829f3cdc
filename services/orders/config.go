package main

import (
	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/platform"
)

// serviceName is the default of K_SERVICE.
const serviceName = "orders"

// config is the service's configuration: what every database-owning service reads
// (platform.ServiceConfig), how event deliveries are verified and dead-lettered
// (outboxlib.ConsumerEnv: OIDC_ISSUER, OIDC_AUDIENCE, OIDC_ALLOWED_EMAILS, EVENTS_MAX_ATTEMPTS),
// and its own:
//
//	RELAY_URL  optional; base URL of the outbox relay, nudged (POST /nudge) after an order is placed
type config struct {
	platform.ServiceConfig
	Events   outboxlib.ConsumerEnv
	RelayURL string
}

// loadConfig reads the environment through getenv and reports every missing or invalid
// variable in one error.
func loadConfig(getenv func(string) string) (config, error) {
	env := platform.NewEnv(getenv)
	cfg := config{
		ServiceConfig: platform.LoadServiceConfig(env, serviceName),
		Events:        outboxlib.LoadConsumerEnv(env),
		RelayURL:      env.URL("RELAY_URL", ""),
	}
	return cfg, env.Err()
}
