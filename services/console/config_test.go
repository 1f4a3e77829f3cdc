package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/internal/localenv"
	"github.com/spanmart/spanmart/internal/topology"
	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/platform/platformtest"
)

func TestLoadConfigReportsEveryMissingVariable(t *testing.T) {
	_, err := loadConfig(platformtest.Getenv(nil))
	if err == nil {
		t.Fatal("loadConfig with no environment succeeded")
	}
	for _, name := range []string{"OIDC_AUDIENCE", "CONSOLE_ALLOWED_EMAILS", "RELAY_URL", "ORDERS_URL", "FULFILLMENT_URL", "GATEWAY_URL", "NOTIFICATIONS_URL"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("the error does not name %s: %v", name, err)
		}
	}
}

// TestLoadConfigTakesTheLocalStacksEnvironment: the environment internal/localenv gives the
// console on the dev stack and in the e2e harness is a complete configuration.
func TestLoadConfigTakesTheLocalStacksEnvironment(t *testing.T) {
	svc, _ := topology.Lookup(topology.Console)
	url := func(name string) string {
		s, _ := topology.Lookup(name)
		return fmt.Sprintf("http://127.0.0.1:%d", s.DevPort)
	}
	st := localenv.Stack{
		Instance: "projects/" + localenv.Project + "/instances/dev", TasksHTTP: "http://127.0.0.1:8124", LogLevel: "info",
		URL: url, Port: func(name string) int { s, _ := topology.Lookup(name); return s.DevPort },
	}
	vars := map[string]string{}
	for _, kv := range st.Env(topology.Console, svc) {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	cfg, err := loadConfig(platformtest.Getenv(vars))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, s := range topology.Services() {
		if s.Name != topology.Console {
			want[s.Name] = url(s.Name)
		}
	}
	if diff := cmp.Diff(want, cfg.URLs); diff != "" {
		t.Errorf("URLs (-want +got):\n%s", diff)
	}
	if cfg.Issuer != st.TasksHTTP || cfg.Audience != url(topology.Console) || cfg.ServiceAccount != localenv.Account(topology.Console) ||
		!cmp.Equal(cfg.Operators, []string{localenv.Operator}) || cfg.Refresh != 5*time.Second {
		t.Errorf("config = %+v", cfg)
	}
	// In production the issuer is Google's.
	delete(vars, "OIDC_ISSUER")
	if cfg, err := loadConfig(platformtest.Getenv(vars)); err != nil || cfg.Issuer != outboxlib.GoogleIssuer {
		t.Errorf("default issuer = %q, %v", cfg.Issuer, err)
	}
}
