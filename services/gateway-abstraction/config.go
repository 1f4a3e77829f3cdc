package main

import (
	"time"

	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/app"
)

// serviceName is the default of K_SERVICE.
const serviceName = "gateway-abstraction"

// config is the service's configuration: what every database-owning service reads
// (platform.ServiceConfig), how event deliveries are verified (outboxlib.ConsumerEnv), the
// providers and how the gateway calls them. Secrets (the providers' keys) come from the
// environment, which Cloud Run fills from Secret Manager; they are never logged.
//
//	STRIPE_API_KEY          Stripe secret key (sk_live_... / sk_test_...)
//	STRIPE_API_URL          optional; Stripe's API base URL: empty for Stripe itself, the sandbox's URL locally
//	STRIPE_WEBHOOK_SECRET   the webhook endpoint's signing secret (whsec_...)
//	KOMOJU_SECRET_KEY       KOMOJU secret key
//	KOMOJU_API_URL          KOMOJU's API base URL; default https://komoju.com, the sandbox's URL locally
//	KOMOJU_WEBHOOK_SECRET   the webhook's secret token (X-Komoju-Signature)
//	PROVIDER_TIMEOUT        per try of a provider call; default 10s
//	PROVIDER_ATTEMPTS       tries per call on the request path; default 3
//	PROVIDER_BREAKER_THRESHOLD, PROVIDER_BREAKER_COOLDOWN  consecutive failures that open a
//	                        provider's circuit, and for how long; defaults 5 and 10s
//	PAYMENTS_RESUME_AFTER   how long an unfinished provider call waits before the sweep resumes it; default 1m
//	PAYMENTS_GIVE_UP_AFTER  how long a provider call may keep failing before its intent is given up;
//	                        default and most 23h (inside the providers' 24 h idempotency-key retention)
//	PAYMENTS_RECONCILE_AFTER how long a payment waits for a webhook before the sweep asks the provider; default 15m
type config struct {
	platform.ServiceConfig
	Events outboxlib.ConsumerEnv

	Stripe struct{ APIKey, APIURL, WebhookSecret string }
	Komoju struct{ SecretKey, APIURL, WebhookSecret string }

	Calls          app.CallPolicy
	ResumeAfter    time.Duration
	GiveUpAfter    time.Duration
	ReconcileAfter time.Duration
}

// loadConfig reads the environment through getenv and reports every missing or invalid
// variable in one error.
func loadConfig(getenv func(string) string) (config, error) {
	env := platform.NewEnv(getenv)
	cfg := config{
		ServiceConfig: platform.LoadServiceConfig(env, serviceName),
		Events:        outboxlib.LoadConsumerEnv(env),
		Calls: app.CallPolicy{
			Timeout:          env.Duration("PROVIDER_TIMEOUT", 10*time.Second, 10*time.Millisecond, time.Minute),
			Attempts:         env.Int("PROVIDER_ATTEMPTS", 3, 1, 10),
			BreakerThreshold: env.Int("PROVIDER_BREAKER_THRESHOLD", 5, 1, 1000),
			BreakerCooldown:  env.Duration("PROVIDER_BREAKER_COOLDOWN", 10*time.Second, 10*time.Millisecond, time.Hour),
		},
		ResumeAfter:    env.Duration("PAYMENTS_RESUME_AFTER", time.Minute, time.Millisecond, 24*time.Hour),
		GiveUpAfter:    env.Duration("PAYMENTS_GIVE_UP_AFTER", app.MaxGiveUpAfter, time.Millisecond, app.MaxGiveUpAfter),
		ReconcileAfter: env.Duration("PAYMENTS_RECONCILE_AFTER", 15*time.Minute, time.Millisecond, 7*24*time.Hour),
	}
	cfg.Stripe.APIKey = env.Required("STRIPE_API_KEY")
	cfg.Stripe.APIURL = env.URL("STRIPE_API_URL", "")
	cfg.Stripe.WebhookSecret = env.Required("STRIPE_WEBHOOK_SECRET")
	cfg.Komoju.SecretKey = env.Required("KOMOJU_SECRET_KEY")
	cfg.Komoju.APIURL = env.URL("KOMOJU_API_URL", "https://komoju.com")
	cfg.Komoju.WebhookSecret = env.Required("KOMOJU_WEBHOOK_SECRET")
	return cfg, env.Err()
}
