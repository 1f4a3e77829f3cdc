package main

import (
	"strings"
	"testing"
	"time"

	"github.com/spanmart/spanmart/pkg/platform/platformtest"
)

func TestLoadConfigReportsEveryProblem(t *testing.T) {
	_, err := loadConfig(platformtest.Getenv(map[string]string{
		"STRIPE_API_URL": "not a url", "PROVIDER_TIMEOUT": "soon", "PAYMENTS_GIVE_UP_AFTER": "48h",
	}))
	if err == nil {
		t.Fatal("loadConfig accepted an empty environment")
	}
	for _, want := range []string{"SPANNER_DATABASE", "OIDC_AUDIENCE", "STRIPE_API_KEY", "STRIPE_WEBHOOK_SECRET",
		"KOMOJU_SECRET_KEY", "KOMOJU_WEBHOOK_SECRET", "STRIPE_API_URL", "PROVIDER_TIMEOUT", "PAYMENTS_GIVE_UP_AFTER"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

func TestLoadConfig(t *testing.T) {
	const secret = "sk_live_do_not_print"
	cfg, err := loadConfig(platformtest.Getenv(map[string]string{
		"SPANNER_DATABASE":    "projects/test-project/instances/test-instance/databases/payments",
		"OIDC_AUDIENCE":       "https://gateway.example",
		"OIDC_ALLOWED_EMAILS": "relay@p.iam.gserviceaccount.com",
		"STRIPE_API_KEY":      secret, "STRIPE_WEBHOOK_SECRET": "whsec_x",
		"KOMOJU_SECRET_KEY": "sk_k", "KOMOJU_WEBHOOK_SECRET": "k_x",
		"PROVIDER_TIMEOUT": "3s", "PAYMENTS_RECONCILE_AFTER": "5m",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Stripe.APIKey != secret || cfg.Stripe.APIURL != "" || cfg.Komoju.APIURL != "https://komoju.com" {
		t.Errorf("providers = %+v %+v", cfg.Stripe, cfg.Komoju)
	}
	if cfg.Calls.Timeout != 3*time.Second || cfg.Calls.Attempts != 3 || cfg.ReconcileAfter != 5*time.Minute || cfg.GiveUpAfter != 23*time.Hour {
		t.Errorf("calls = %+v, reconcile after %s, give up after %s", cfg.Calls, cfg.ReconcileAfter, cfg.GiveUpAfter)
	}
	// A bad value elsewhere must not echo the secrets in the error.
	_, err = loadConfig(platformtest.Getenv(map[string]string{"STRIPE_API_KEY": secret, "PROVIDER_ATTEMPTS": "x"}))
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("error %v: want an error that does not contain the API key", err)
	}
}
