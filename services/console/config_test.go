package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/emulator/authemu"
	"github.com/spanmart/spanmart/internal/localcloud"
	"github.com/spanmart/spanmart/internal/localenv"
	"github.com/spanmart/spanmart/internal/topology"
	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/platform/platformtest"
	"github.com/spanmart/spanmart/services/console/internal/auth"
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
		Instance: "projects/" + localcloud.Project + "/instances/dev", TasksHTTP: "http://127.0.0.1:8124", LogLevel: "info",
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
	if cfg.Issuer != st.TasksHTTP || cfg.Audience != url(topology.Console) || cfg.ServiceAccount != localcloud.Account(topology.Console) ||
		!cmp.Equal(cfg.Operators, []string{localcloud.Operator}) || cfg.Refresh != 5*time.Second {
		t.Errorf("config = %+v", cfg)
	}
	// In production the issuer is Google's.
	delete(vars, "OIDC_ISSUER")
	if cfg, err := loadConfig(platformtest.Getenv(vars)); err != nil || cfg.Issuer != outboxlib.GoogleIssuer {
		t.Errorf("default issuer = %q, %v", cfg.Issuer, err)
	}
}

// TestLoadConfigBehindIAP: CONSOLE_IAP_AUDIENCE puts the console behind Identity-Aware Proxy, with
// IAP's issuer and key set unless told otherwise (authemu's stand-in signs with the same issuer);
// every inconsistent configuration is refused, naming the variable: IAP's audience that is not one
// (the console's URL), the ID tokens' variables as well (IAP's assertion must be the only way in),
// IAP's issuer or key set without IAP, and a key set that is not a URL.
func TestLoadConfigBehindIAP(t *testing.T) {
	base := func(more ...string) map[string]string {
		env := map[string]string{"CONSOLE_ALLOWED_EMAILS": localcloud.Operator, "RELAY_URL": "https://relay.example.com"}
		for _, s := range topology.Consumers() {
			env[s.URLVar] = "https://" + s.Name + ".example.com"
		}
		for i := 0; i+1 < len(more); i += 2 {
			env[more[i]] = more[i+1]
		}
		return env
	}
	const aud = "/projects/123456789012/global/backendServices/4242"
	cfg, err := loadConfig(platformtest.Getenv(base("CONSOLE_IAP_AUDIENCE", aud)))
	if err != nil {
		t.Fatal(err)
	}
	want := auth.IAPConfig{Audience: aud, Issuer: "https://cloud.google.com/iap", JWKSURL: "https://www.gstatic.com/iap/verify/public_key-jwk"}
	if cfg.IAP != want || cfg.Audience != "" || cfg.Issuer != "" {
		t.Errorf("IAP %+v, OIDC audience %q, issuer %q; want %+v and no OIDC", cfg.IAP, cfg.Audience, cfg.Issuer, want)
	}
	if authemu.IAPIssuer != auth.IAPIssuer {
		t.Errorf("authemu signs as %q, the console expects IAP's %q", authemu.IAPIssuer, auth.IAPIssuer)
	}
	local := base("CONSOLE_IAP_AUDIENCE", aud, "CONSOLE_IAP_ISSUER", "http://127.0.0.1:8125/iap", "CONSOLE_IAP_JWKS_URL", "http://127.0.0.1:8125"+authemu.IAPJWKSPath)
	if cfg, err := loadConfig(platformtest.Getenv(local)); err != nil || cfg.IAP.Issuer != "http://127.0.0.1:8125/iap" || cfg.IAP.JWKSURL != "http://127.0.0.1:8125"+authemu.IAPJWKSPath {
		t.Errorf("local IAP = %+v, %v", cfg.IAP, err)
	}

	for name, tc := range map[string]struct {
		env  map[string]string
		name string
	}{
		"the console's URL as IAP's audience": {base("CONSOLE_IAP_AUDIENCE", "https://console-123.asia-northeast1.run.app"), "CONSOLE_IAP_AUDIENCE"},
		"two audiences":                       {base("CONSOLE_IAP_AUDIENCE", aud+","+aud), "CONSOLE_IAP_AUDIENCE"},
		"IAP and OIDC_AUDIENCE":               {base("CONSOLE_IAP_AUDIENCE", aud, "OIDC_AUDIENCE", "https://console.example.com"), "OIDC_AUDIENCE"},
		"IAP and OIDC_ISSUER":                 {base("CONSOLE_IAP_AUDIENCE", aud, "OIDC_ISSUER", "https://accounts.google.com"), "OIDC_ISSUER"},
		"IAP's key set that is not a URL":     {base("CONSOLE_IAP_AUDIENCE", aud, "CONSOLE_IAP_JWKS_URL", "public_key-jwk"), "CONSOLE_IAP_JWKS_URL"},
		"IAP's key set without IAP":           {base("OIDC_AUDIENCE", "https://console.example.com", "CONSOLE_IAP_JWKS_URL", "https://www.gstatic.com/iap/verify/public_key-jwk"), "CONSOLE_IAP_JWKS_URL"},
		"IAP's issuer without IAP":            {base("OIDC_AUDIENCE", "https://console.example.com", "CONSOLE_IAP_ISSUER", "https://cloud.google.com/iap"), "CONSOLE_IAP_ISSUER"},
		"neither sign-in":                     {base(), "OIDC_AUDIENCE"},
	} {
		if _, err := loadConfig(platformtest.Getenv(tc.env)); err == nil || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%s: err = %v, want one naming %s", name, err, tc.name)
		}
	}
}
