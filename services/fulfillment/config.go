package main

import (
	"errors"
	"strings"
	"time"

	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/platform"
)

// serviceName is the default of K_SERVICE.
const serviceName = "fulfillment"

// config is the service's configuration: what every database-owning service reads
// (platform.ServiceConfig), how event deliveries are verified and dead-lettered
// (outboxlib.ConsumerEnv: OIDC_ISSUER, OIDC_AUDIENCE, OIDC_ALLOWED_EMAILS, EVENTS_MAX_ATTEMPTS,
// EVENTS_EARLY_PATIENCE, and RELAY_URL: the relay, nudged after a commit that appended events,
// by the consumer for its handlers' and by the warehouse's actions for theirs), and the simulated
// carrier of the dev stack:
//
//	CARRIER_SIMULATE_AFTER      optional Go duration (e.g. 5s); unset or 0, the production default,
//	                            is off. When set, the service itself ships PENDING shipments older
//	                            than that (carrier "spanmart-sim"), as the warehouse would.
//	CARRIER_SIMULATE_FAIL_SKUS  optional, comma-separated SKUs: a shipment with one of them fails
//	                            (carrier_rejected) instead; only with CARRIER_SIMULATE_AFTER.
type config struct {
	platform.ServiceConfig
	Events  outboxlib.ConsumerEnv
	Carrier carrierConfig
}

// carrierConfig configures the simulated carrier; After 0 is off.
type carrierConfig struct {
	After    time.Duration
	FailSKUs []string
}

// maxCarrierSimulateAfter bounds CARRIER_SIMULATE_AFTER.
const maxCarrierSimulateAfter = 24 * time.Hour

// loadConfig reads the environment through getenv and reports every missing or invalid
// variable in one error.
func loadConfig(getenv func(string) string) (config, error) {
	env := platform.NewEnv(getenv)
	cfg := config{
		ServiceConfig: platform.LoadServiceConfig(env, serviceName),
		Events:        outboxlib.LoadConsumerEnv(env),
		Carrier: carrierConfig{
			After:    env.Duration("CARRIER_SIMULATE_AFTER", 0, 0, maxCarrierSimulateAfter),
			FailSKUs: env.List("CARRIER_SIMULATE_FAIL_SKUS", false),
		},
	}
	if len(cfg.Carrier.FailSKUs) > 0 && carrierOff(env.Lookup("CARRIER_SIMULATE_AFTER")) {
		env.Invalid("CARRIER_SIMULATE_FAIL_SKUS", strings.Join(cfg.Carrier.FailSKUs, ","),
			errors.New("the simulated carrier is off: set CARRIER_SIMULATE_AFTER too"))
	}
	return cfg, env.Err()
}

// carrierOff reports whether CARRIER_SIMULATE_AFTER's value v turns the simulated carrier off
// (unset or a zero duration; an invalid value is reported as such).
func carrierOff(v string) bool {
	d, err := time.ParseDuration(v)
	return v == "" || (err == nil && d == 0)
}
