package main

import (
	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/platform"
)

// serviceName is the default of K_SERVICE.
const serviceName = "orders"

// config is the service's configuration: what every database-owning service reads
// (platform.ServiceConfig), how event deliveries are verified and dead-lettered
// (outboxlib.ConsumerEnv: OIDC_ISSUER, OIDC_AUDIENCE, OIDC_ALLOWED_EMAILS, EVENTS_MAX_ATTEMPTS,
// EVENTS_EARLY_PATIENCE, and RELAY_URL: the relay, nudged after an order is placed and after its
// event handlers appended events).
type config struct {
	platform.ServiceConfig
	Events outboxlib.ConsumerEnv
}

// loadConfig reads the environment through getenv and reports every missing or invalid
// variable in one error.
func loadConfig(getenv func(string) string) (config, error) {
	env := platform.NewEnv(getenv)
	cfg := config{
		ServiceConfig: platform.LoadServiceConfig(env, serviceName),
		Events:        outboxlib.LoadConsumerEnv(env),
	}
	return cfg, env.Err()
}
