package main

import (
	"errors"
	"fmt"
	"net/mail"
	"slices"
	"strings"
	"time"

	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/services/fulfillment/internal/shipment"
)

// serviceName is the default of K_SERVICE.
const serviceName = "fulfillment"

// config is the service's configuration: what every database-owning service reads
// (platform.ServiceConfig), how event deliveries are verified and dead-lettered
// (outboxlib.ConsumerEnv: OIDC_ISSUER, OIDC_AUDIENCE, OIDC_ALLOWED_EMAILS, EVENTS_MAX_ATTEMPTS,
// EVENTS_EARLY_PATIENCE, and RELAY_URL: the relay, nudged after a commit that appended events,
// by the consumer for its handlers' and by the warehouse's actions for theirs), who may take the
// warehouse's actions, and the simulated carrier of the dev stack:
//
//	WAREHOUSE_ALLOWED_EMAILS    required; comma-separated e-mail addresses of the accounts allowed to
//	                            ship and fail shipments (POST /v1/shipments/{id}/ship, /fail): the
//	                            warehouses' service accounts, whose Google ID tokens for the
//	                            service's URL (OIDC_AUDIENCE, from OIDC_ISSUER) they present. The
//	                            operators (ADMIN_ALLOWED_EMAILS other than the delegates) may too,
//	                            acting for a warehouse; the shipment records the account either way.
//	CARRIER_SIMULATE_AFTER      optional Go duration (e.g. 5s); unset or 0, the production default,
//	                            is off. When set, the service itself ships PENDING shipments older
//	                            than that (carrier "spanmart-sim"), as the warehouse would.
//	CARRIER_SIMULATE_FAIL_SKUS  optional, comma-separated SKUs: a shipment with one of them fails
//	                            (carrier_rejected) instead; only with CARRIER_SIMULATE_AFTER.
type config struct {
	platform.ServiceConfig
	Events     outboxlib.ConsumerEnv
	Warehouses []string
	Carrier    carrierConfig
}

// warehouseCallers are the accounts allowed to ship and fail shipments: the warehouses, and the
// operators acting for one (an operator records a shipment a warehouse reported another way, or
// one the warehouse's system cannot). Not the delegates (the console): they act for an operator
// on the operator endpoints, which the warehouse's actions do not take, so as themselves they
// would be recorded instead of the person.
func (c config) warehouseCallers() []string {
	out := slices.Clone(c.Warehouses)
	for _, op := range c.Events.Operators {
		if !slices.Contains(out, op) && !slices.Contains(c.Events.Delegates, op) {
			out = append(out, op)
		}
	}
	return out
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
		Warehouses:    env.List("WAREHOUSE_ALLOWED_EMAILS", true),
		Carrier: carrierConfig{
			After:    env.Duration("CARRIER_SIMULATE_AFTER", 0, 0, maxCarrierSimulateAfter),
			FailSKUs: env.List("CARRIER_SIMULATE_FAIL_SKUS", false),
		},
	}
	for _, w := range cfg.Warehouses {
		if err := accountAddress(w); err != nil {
			env.Invalid("WAREHOUSE_ALLOWED_EMAILS", w, err)
		}
	}
	if len(cfg.Carrier.FailSKUs) > 0 && carrierOff(env.Lookup("CARRIER_SIMULATE_AFTER")) {
		env.Invalid("CARRIER_SIMULATE_FAIL_SKUS", strings.Join(cfg.Carrier.FailSKUs, ","),
			errors.New("the simulated carrier is off: set CARRIER_SIMULATE_AFTER too"))
	}
	return cfg, env.Err()
}

// accountAddress checks that an allowed account is one plain e-mail address (what a verified ID
// token carries), short enough to be recorded as who shipped (shipment.MaxActorLen). Nothing else
// could ever match a token, and a name that is no address, like the simulated carrier's, stays
// unforgeable.
func accountAddress(s string) error {
	if a, err := mail.ParseAddress(s); err != nil || a.Address != s {
		return errors.New("not one e-mail address (the account's, as in its ID tokens)")
	}
	if len(s) > shipment.MaxActorLen {
		return fmt.Errorf("longer than %d characters", shipment.MaxActorLen)
	}
	return nil
}

// carrierOff reports whether CARRIER_SIMULATE_AFTER's value v turns the simulated carrier off
// (unset or a zero duration; an invalid value is reported as such).
func carrierOff(v string) bool {
	d, err := time.ParseDuration(v)
	return v == "" || (err == nil && d == 0)
}
