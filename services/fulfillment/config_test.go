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
	for _, want := range []string{"SPANNER_DATABASE", "OIDC_AUDIENCE", "OIDC_ALLOWED_EMAILS", "WAREHOUSE_ALLOWED_EMAILS", `invalid OIDC_ISSUER "accounts.google.com"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

func TestLoadConfig(t *testing.T) {
	cfg, err := loadConfig(platformtest.Getenv(map[string]string{
		"SPANNER_DATABASE":         "projects/test-project/instances/test-instance/databases/fulfillment",
		"OIDC_AUDIENCE":            "https://fulfillment.example",
		"OIDC_ALLOWED_EMAILS":      " relay@p.iam.gserviceaccount.com, ops@p.iam.gserviceaccount.com ,",
		"WAREHOUSE_ALLOWED_EMAILS": "warehouse@p.iam.gserviceaccount.com, ,osaka@partner.iam.gserviceaccount.com",
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
	if diff := cmp.Diff([]string{"warehouse@p.iam.gserviceaccount.com", "osaka@partner.iam.gserviceaccount.com"}, cfg.Warehouses); diff != "" {
		t.Errorf("warehouses (-want +got):\n%s", diff)
	}
}

// TestWarehouseCallers: the warehouse's actions take the warehouses and the operators, not the
// delegates (the console acts for an operator, which those routes do not take), each account once.
func TestWarehouseCallers(t *testing.T) {
	cfg, err := loadConfig(platformtest.Getenv(map[string]string{
		"SPANNER_DATABASE":         "projects/test-project/instances/test-instance/databases/fulfillment",
		"OIDC_AUDIENCE":            "https://fulfillment.example",
		"OIDC_ALLOWED_EMAILS":      "relay@p.iam.gserviceaccount.com",
		"WAREHOUSE_ALLOWED_EMAILS": "warehouse@p.iam.gserviceaccount.com,oncall@p.iam.gserviceaccount.com",
		"ADMIN_ALLOWED_EMAILS":     "oncall@p.iam.gserviceaccount.com,alice@example.com,console@p.iam.gserviceaccount.com",
		"ADMIN_DELEGATE_EMAILS":    "console@p.iam.gserviceaccount.com",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"warehouse@p.iam.gserviceaccount.com", "oncall@p.iam.gserviceaccount.com", "alice@example.com"}
	if diff := cmp.Diff(want, cfg.warehouseCallers()); diff != "" {
		t.Errorf("warehouseCallers (-want +got):\n%s", diff)
	}
}

// TestLoadConfigWarehouses: WAREHOUSE_ALLOWED_EMAILS is required and takes plain e-mail addresses
// only, each reported by itself.
func TestLoadConfigWarehouses(t *testing.T) {
	base := map[string]string{
		"SPANNER_DATABASE":    "projects/test-project/instances/test-instance/databases/fulfillment",
		"OIDC_AUDIENCE":       "https://fulfillment.example",
		"OIDC_ALLOWED_EMAILS": "relay@p.iam.gserviceaccount.com",
	}
	for _, tt := range []struct {
		name, value string
		want        []string
		fine        string // a value of the list that must not be reported
	}{
		{"unset", "", []string{"missing WAREHOUSE_ALLOWED_EMAILS"}, ""},
		{"only commas", " , ,", []string{"missing WAREHOUSE_ALLOWED_EMAILS"}, ""},
		{"a name, not an address", "warehouse", []string{`invalid WAREHOUSE_ALLOWED_EMAILS "warehouse": not one e-mail address`}, ""},
		{"the simulated carrier", "carrier-simulator", []string{`invalid WAREHOUSE_ALLOWED_EMAILS "carrier-simulator"`}, ""},
		{"a display name", "Warehouse <warehouse@p.iam.gserviceaccount.com>", []string{`invalid WAREHOUSE_ALLOWED_EMAILS "Warehouse <warehouse@p.iam.gserviceaccount.com>"`}, ""},
		{"two bad of three", "a b@c.d,warehouse@p.iam.gserviceaccount.com,@p", []string{`invalid WAREHOUSE_ALLOWED_EMAILS "a b@c.d"`, `invalid WAREHOUSE_ALLOWED_EMAILS "@p"`},
			`"warehouse@p.iam.gserviceaccount.com"`},
		{"too long", strings.Repeat("w", 310) + "@example.com", []string{"longer than 320 characters"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"WAREHOUSE_ALLOWED_EMAILS": tt.value}
			for k, v := range base {
				env[k] = v
			}
			_, err := loadConfig(platformtest.Getenv(env))
			for _, want := range tt.want {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("loadConfig = %v, want an error with %s", err, want)
				}
			}
			if tt.fine != "" && err != nil && strings.Contains(err.Error(), tt.fine) {
				t.Errorf("loadConfig = %v: %s is reported, but is an address", err, tt.fine)
			}
		})
	}
}

func TestLoadConfigCarrier(t *testing.T) {
	base := map[string]string{
		"SPANNER_DATABASE":         "projects/test-project/instances/test-instance/databases/fulfillment",
		"OIDC_AUDIENCE":            "https://fulfillment.example",
		"OIDC_ALLOWED_EMAILS":      "relay@p.iam.gserviceaccount.com",
		"WAREHOUSE_ALLOWED_EMAILS": "warehouse@p.iam.gserviceaccount.com",
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
