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
	for _, want := range []string{"SPANNER_DATABASE", "OIDC_AUDIENCE", "OIDC_ALLOWED_EMAILS", `invalid RELAY_URL "not a url"`} {
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
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Events.Issuer != "https://accounts.google.com" || cfg.Events.Audience != "https://orders.example" || cfg.Events.RelayURL != "http://127.0.0.1:8090" {
		t.Errorf("config = %+v", cfg)
	}
	if diff := cmp.Diff([]string{"relay@p.iam.gserviceaccount.com", "ops@p.iam.gserviceaccount.com"}, cfg.Events.AllowedEmails); diff != "" {
		t.Errorf("allowed e-mails (-want +got):\n%s", diff)
	}
}
