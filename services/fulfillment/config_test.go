package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/pkg/platform/platformtest"
)

func TestLoadConfigReportsEveryProblem(t *testing.T) {
	_, err := loadConfig(platformtest.Getenv(map[string]string{"OIDC_ISSUER": "accounts.google.com", "OIDC_ALLOWED_EMAILS": " , "}))
	if err == nil {
		t.Fatal("loadConfig accepted an empty environment")
	}
	for _, want := range []string{"SPANNER_DATABASE", "OIDC_AUDIENCE", "OIDC_ALLOWED_EMAILS", `invalid OIDC_ISSUER "accounts.google.com"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

func TestLoadConfig(t *testing.T) {
	cfg, err := loadConfig(platformtest.Getenv(map[string]string{
		"SPANNER_DATABASE":    "projects/test-project/instances/test-instance/databases/fulfillment",
		"OIDC_AUDIENCE":       "https://fulfillment.example",
		"OIDC_ALLOWED_EMAILS": " relay@p.iam.gserviceaccount.com, ops@p.iam.gserviceaccount.com ,",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Events.Issuer != "https://accounts.google.com" || cfg.Events.Audience != "https://fulfillment.example" {
		t.Errorf("config = %+v", cfg)
	}
	if diff := cmp.Diff([]string{"relay@p.iam.gserviceaccount.com", "ops@p.iam.gserviceaccount.com"}, cfg.Events.AllowedEmails); diff != "" {
		t.Errorf("allowed e-mails (-want +got):\n%s", diff)
	}
}

func TestLoadConfigCarrier(t *testing.T) {
	base := map[string]string{
		"SPANNER_DATABASE":    "projects/test-project/instances/test-instance/databases/fulfillment",
		"OIDC_AUDIENCE":       "https://fulfillment.example",
		"OIDC_ALLOWED_EMAILS": "relay@p.iam.gserviceaccount.com",
	}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, tt := range []struct {
		name string
		env  map[string]string
		want carrierConfig
	}{
		{"off by default", base, carrierConfig{}},
		{"0 is off", with("CARRIER_SIMULATE_AFTER", "0"), carrierConfig{}},
		{"on", with("CARRIER_SIMULATE_AFTER", "5s"), carrierConfig{After: 5 * time.Second}},
		{"on, failing some SKUs", with("CARRIER_SIMULATE_AFTER", "250ms", "CARRIER_SIMULATE_FAIL_SKUS", " BAD-1, ,BAD-2,"),
			carrierConfig{After: 250 * time.Millisecond, FailSKUs: []string{"BAD-1", "BAD-2"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := loadConfig(platformtest.Getenv(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, cfg.Carrier); diff != "" {
				t.Errorf("carrier (-want +got):\n%s", diff)
			}
		})
	}
	for _, tt := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"not a duration", with("CARRIER_SIMULATE_AFTER", "soon"), `invalid CARRIER_SIMULATE_AFTER "soon"`},
		{"negative", with("CARRIER_SIMULATE_AFTER", "-1s"), `invalid CARRIER_SIMULATE_AFTER "-1s"`},
		{"too long", with("CARRIER_SIMULATE_AFTER", "48h"), `invalid CARRIER_SIMULATE_AFTER "48h"`},
		{"failing SKUs, carrier off", with("CARRIER_SIMULATE_FAIL_SKUS", "BAD"), `invalid CARRIER_SIMULATE_FAIL_SKUS "BAD"`},
		{"failing SKUs, carrier at 0", with("CARRIER_SIMULATE_AFTER", "0s", "CARRIER_SIMULATE_FAIL_SKUS", "BAD"), `invalid CARRIER_SIMULATE_FAIL_SKUS "BAD"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadConfig(platformtest.Getenv(tt.env))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("loadConfig = %v, want an error with %s", err, tt.want)
			}
		})
	}
	// An invalid delay is reported once, as itself, not also as "the carrier is off".
	_, err := loadConfig(platformtest.Getenv(with("CARRIER_SIMULATE_AFTER", "soon", "CARRIER_SIMULATE_FAIL_SKUS", "BAD")))
	if err == nil || strings.Contains(err.Error(), "CARRIER_SIMULATE_FAIL_SKUS") {
		t.Errorf("loadConfig = %v, want only CARRIER_SIMULATE_AFTER reported", err)
	}
}
