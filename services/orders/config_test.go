package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/pkg/platform/platformtest"
)

func TestLoadConfigReportsEveryMissingVariable(t *testing.T) {
	_, err := loadConfig(platformtest.Getenv(map[string]string{"RELAY_URL": "not a url"}))
	if err == nil {
		t.Fatal("loadConfig accepted an empty environment")
	}
	for _, want := range []string{"SPANNER_DATABASE", "OIDC_AUDIENCE", "OIDC_ALLOWED_EMAILS", "CUSTOMER_ISSUER", "CUSTOMER_AUDIENCE", `invalid RELAY_URL "not a url"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

func TestLoadConfig(t *testing.T) {
	cfg, err := loadConfig(platformtest.Getenv(map[string]string{
		"SPANNER_DATABASE":    "projects/test-project/instances/test-instance/databases/orders",
		"OIDC_AUDIENCE":       "https://orders.example",
		"OIDC_ALLOWED_EMAILS": " relay@p.iam.gserviceaccount.com, ops@p.iam.gserviceaccount.com ,",
		"RELAY_URL":           "http://127.0.0.1:8090",
		"CUSTOMER_ISSUER":     "https://securetoken.google.com/spanmart-prod",
		"CUSTOMER_AUDIENCE":   "spanmart-prod",
		"CUSTOMER_JWKS_URL":   "https://www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := customerConfig{
		Issuer: "https://securetoken.google.com/spanmart-prod", Audience: "spanmart-prod",
		JWKSURL: "https://www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com",
	}
	if diff := cmp.Diff(want, cfg.Customers); diff != "" {
		t.Errorf("customers (-want +got):\n%s", diff)
	}
	if _, err := loadConfig(platformtest.Getenv(map[string]string{
		"SPANNER_DATABASE": "projects/p/instances/i/databases/orders", "OIDC_AUDIENCE": "https://orders.example",
		"OIDC_ALLOWED_EMAILS": "relay@p.iam.gserviceaccount.com", "CUSTOMER_ISSUER": "securetoken.google.com", "CUSTOMER_AUDIENCE": "p",
	})); err == nil || !strings.Contains(err.Error(), `invalid CUSTOMER_ISSUER "securetoken.google.com"`) {
		t.Errorf("an issuer that is no URL: %v", err)
	}
	if cfg.Events.Issuer != "https://accounts.google.com" || cfg.Events.Audience != "https://orders.example" || cfg.Events.RelayURL != "http://127.0.0.1:8090" {
		t.Errorf("config = %+v", cfg)
	}
	if diff := cmp.Diff([]string{"relay@p.iam.gserviceaccount.com", "ops@p.iam.gserviceaccount.com"}, cfg.Events.AllowedEmails); diff != "" {
		t.Errorf("allowed e-mails (-want +got):\n%s", diff)
	}
}
