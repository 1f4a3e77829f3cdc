package main

import (
	"errors"
	"strings"
	"time"

	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/services/orders/internal/app"
)

// serviceName is the default of K_SERVICE.
const serviceName = "orders"

// config is the service's configuration: what every database-owning service reads
// (platform.ServiceConfig), how event deliveries are verified and dead-lettered
// (outboxlib.ConsumerEnv: OIDC_ISSUER, OIDC_AUDIENCE, OIDC_ALLOWED_EMAILS, EVENTS_MAX_ATTEMPTS,
// EVENTS_EARLY_PATIENCE, ADMIN_ALLOWED_EMAILS, and RELAY_URL: the relay, nudged after an order is
// placed and after its event handlers appended events), who its customers are (customerConfig)
// and the audit's settings (auditConfig).
type config struct {
	platform.ServiceConfig
	Events    outboxlib.ConsumerEnv
	Customers customerConfig
	Audit     auditConfig
}

// customerConfig is how the order API authenticates its customers (README, "Customer
// authentication"): the ID tokens of Identity Platform (Firebase Auth) in production, of the local
// issuer (emulator/authemu) on the local stacks.
//
//	CUSTOMER_ISSUER    required; the iss of the customers' ID tokens: for Identity Platform
//	                   https://securetoken.google.com/PROJECT_ID
//	CUSTOMER_AUDIENCE  required; their aud: for Identity Platform the project id
//	CUSTOMER_JWKS_URL  optional; where the issuer's keys are (a JWK set); default the jwks_uri of
//	                   the issuer's discovery document (CUSTOMER_ISSUER/.well-known/openid-configuration)
type customerConfig struct {
	Issuer   string
	Audience string
	JWKSURL  string
}

// auditConfig configures the stuck-order detector and the reconciliation (README, "Stuck orders
// and reconciliation"):
//
//	STUCK_AFTER      thresholds per non-terminal status, e.g. "PENDING=5m,CONFIRMED=72h" (a
//	                 status left out keeps its default, app.DefaultStuckAfter)
//	RECONCILE_SETTLE how long after its last change an order is compared; default 2m
//	RECONCILE_WINDOW how far back orders are compared; default 24h; longer than RECONCILE_SETTLE
//	FULFILLMENT_URL  fulfillment's base URL (the audience of its ID tokens)
//	GATEWAY_URL      the gateway's base URL (likewise); both or neither: without them the
//	                 reconciliation is reported as not configured
//	SERVICE_ACCOUNT  the account whose ID tokens are sent to them; default the metadata server's
//	                 default account (Cloud Run's service account); set locally, where one
//	                 emulator answers for every service
type auditConfig struct {
	StuckAfter     app.StuckAfter
	Settle, Window time.Duration
	FulfillmentURL string
	GatewayURL     string
	ServiceAccount string
}

// loadConfig reads the environment through getenv and reports every missing or invalid
// variable in one error.
func loadConfig(getenv func(string) string) (config, error) {
	env := platform.NewEnv(getenv)
	cfg := config{
		ServiceConfig: platform.LoadServiceConfig(env, serviceName),
		Events:        outboxlib.LoadConsumerEnv(env),
		Customers: customerConfig{
			Issuer:   env.URL("CUSTOMER_ISSUER", ""),
			Audience: env.Required("CUSTOMER_AUDIENCE"),
			JWKSURL:  env.URL("CUSTOMER_JWKS_URL", ""),
		},
		Audit: loadAuditConfig(env),
	}
	if env.Lookup("CUSTOMER_ISSUER") == "" {
		env.Missing("CUSTOMER_ISSUER")
	}
	return cfg, env.Err()
}

// verifier returns the verifier of the customers' ID tokens.
func (c customerConfig) verifier() (*platform.IDTokenVerifier, error) {
	return platform.NewIDTokenVerifier(platform.IDTokenVerifierConfig{
		Issuer: c.Issuer, Audiences: []string{c.Audience}, JWKSURL: c.JWKSURL,
	})
}

func loadAuditConfig(env *platform.Env) auditConfig {
	a := auditConfig{
		Settle: env.Duration("RECONCILE_SETTLE", app.DefaultReconcileSettle, time.Second, 24*time.Hour),
		Window: env.Duration("RECONCILE_WINDOW", app.DefaultReconcileWindow, time.Minute, 30*24*time.Hour),
		// Without a trailing slash: each is also the audience of the ID tokens sent to it, which
		// Cloud Run compares with the service's URL as it is.
		FulfillmentURL: strings.TrimSuffix(env.URL("FULFILLMENT_URL", ""), "/"),
		GatewayURL:     strings.TrimSuffix(env.URL("GATEWAY_URL", ""), "/"),
		ServiceAccount: env.Lookup("SERVICE_ACCOUNT"),
	}
	var err error
	if a.StuckAfter, err = app.ParseStuckAfter(env.Lookup("STUCK_AFTER")); err != nil {
		env.Invalid("STUCK_AFTER", env.Lookup("STUCK_AFTER"), err)
	}
	if a.Settle >= a.Window {
		env.Invalid("RECONCILE_WINDOW", a.Window.String(), errors.New("must be longer than RECONCILE_SETTLE ("+a.Settle.String()+")"))
	}
	switch {
	case a.FulfillmentURL != "" && a.GatewayURL == "":
		env.Missing("GATEWAY_URL (FULFILLMENT_URL is set: the reconciliation needs both)")
	case a.GatewayURL != "" && a.FulfillmentURL == "":
		env.Missing("FULFILLMENT_URL (GATEWAY_URL is set: the reconciliation needs both)")
	}
	if a.ServiceAccount != "" && !strings.Contains(a.ServiceAccount, "@") {
		env.Invalid("SERVICE_ACCOUNT", a.ServiceAccount, errors.New("want a service account's e-mail"))
	}
	return a
}

// reconciles reports whether the peers are configured.
func (a auditConfig) reconciles() bool { return a.FulfillmentURL != "" && a.GatewayURL != "" }
