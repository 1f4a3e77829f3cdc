package main

import (
	"errors"
	"strings"
	"time"

	"github.com/spanmart/spanmart/internal/topology"
	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/services/console/internal/auth"
	"github.com/spanmart/spanmart/services/console/internal/web"
)

// serviceName is the default of K_SERVICE.
const serviceName = "console"

// config is the console's configuration: what every binary reads (platform.Config) and
//
//	OIDC_ISSUER            issuer of the operators' ID tokens; default https://accounts.google.com
//	                       (locally the Tasks emulator's)
//	OIDC_AUDIENCE          required without CONSOLE_IAP_AUDIENCE; the audience they must carry:
//	                       the console's own URL
//	CONSOLE_IAP_AUDIENCE   the console behind Identity-Aware Proxy: the aud of IAP's signed header
//	                       (/projects/PROJECT_NUMBER/global/backendServices/SERVICE_ID, ...); set,
//	                       IAP's assertion is the only sign-in (OIDC_* must then be unset)
//	CONSOLE_IAP_ISSUER     iss of IAP's assertions; default https://cloud.google.com/iap (local tests)
//	CONSOLE_IAP_JWKS_URL   IAP's keys; default https://www.gstatic.com/iap/verify/public_key-jwk
//	                       (locally authemu's /iap/verify/public_key-jwk)
//	CONSOLE_ALLOWED_EMAILS required; comma-separated operator accounts allowed to use the console
//	SERVICE_ACCOUNT        the console's own account, whose ID tokens it presents to the services
//	                       (from the metadata server: GCE_METADATA_HOST locally); default the
//	                       metadata server's default account (Cloud Run's service account)
//	RELAY_URL, ORDERS_URL, FULFILLMENT_URL, GATEWAY_URL, NOTIFICATIONS_URL
//	                       required; the services' base URLs (each also the audience of the
//	                       tokens sent to it)
//	CONSOLE_REFRESH        how often the overview refreshes; default 5s
//	CONSOLE_TIMEOUT        how long a page waits for the services; default 15s
type config struct {
	platform.Config
	Issuer   string // of the ID tokens; "" behind IAP
	Audience string // of the ID tokens; "" behind IAP
	// IAP is Identity-Aware Proxy's signed header; its Audience is "" without IAP.
	IAP            auth.IAPConfig
	Operators      []string
	ServiceAccount string
	// URLs are the services' base URLs by roster name, without a trailing slash.
	URLs    map[string]string
	Refresh time.Duration
	Timeout time.Duration
}

// loadConfig reads the environment through getenv and reports every missing or invalid
// variable in one error.
func loadConfig(getenv func(string) string) (config, error) {
	env := platform.NewEnv(getenv)
	cfg := config{
		Config:         platform.LoadConfig(env, serviceName, env.Lookup("GOOGLE_CLOUD_PROJECT")),
		Operators:      env.List("CONSOLE_ALLOWED_EMAILS", true),
		ServiceAccount: env.Lookup("SERVICE_ACCOUNT"),
		URLs:           map[string]string{},
		Refresh:        env.Duration("CONSOLE_REFRESH", web.DefaultRefresh, time.Second, time.Hour),
		Timeout:        env.Duration("CONSOLE_TIMEOUT", web.DefaultTimeout, time.Second, 5*time.Minute),
	}
	loadSignIn(env, &cfg)
	if cfg.ServiceAccount != "" && !strings.Contains(cfg.ServiceAccount, "@") {
		env.Invalid("SERVICE_ACCOUNT", cfg.ServiceAccount, errors.New("want a service account's e-mail"))
	}
	for _, s := range topology.Services() {
		if s.Name == topology.Console {
			continue
		}
		name := urlVar(s)
		if u := strings.TrimSuffix(env.URL(name, ""), "/"); u != "" {
			cfg.URLs[s.Name] = u
		} else if env.Lookup(name) == "" {
			env.Missing(name)
		}
	}
	return cfg, env.Err()
}

// loadSignIn reads how the operators sign in: behind Identity-Aware Proxy (CONSOLE_IAP_*) or with
// an ID token (OIDC_*), never both. Behind IAP a way in that IAP never saw is what the console must
// refuse, so a configuration naming both is an error rather than a choice made silently.
func loadSignIn(env *platform.Env, cfg *config) {
	if aud := strings.TrimSpace(env.Lookup("CONSOLE_IAP_AUDIENCE")); aud != "" {
		// IAP's audiences are resource names, /projects/PROJECT_NUMBER/..., never the console's
		// URL (which is OIDC_AUDIENCE's kind of value).
		if !strings.HasPrefix(aud, "/projects/") || strings.ContainsAny(aud, " ,") {
			env.Invalid("CONSOLE_IAP_AUDIENCE", aud, errors.New(
				"want the audience of IAP's signed header, /projects/PROJECT_NUMBER/global/backendServices/SERVICE_ID behind a load balancer (services/console/README.md)"))
		}
		cfg.IAP = auth.IAPConfig{
			Audience: aud,
			Issuer:   env.URL("CONSOLE_IAP_ISSUER", auth.IAPIssuer),
			JWKSURL:  env.URL("CONSOLE_IAP_JWKS_URL", auth.IAPJWKSURL),
		}
		for _, name := range []string{"OIDC_AUDIENCE", "OIDC_ISSUER"} {
			if v := env.Lookup(name); v != "" {
				env.Invalid(name, v, errors.New("behind Identity-Aware Proxy (CONSOLE_IAP_AUDIENCE) IAP's assertion is the only sign-in: unset the ID tokens' variables"))
			}
		}
		return
	}
	for _, name := range []string{"CONSOLE_IAP_ISSUER", "CONSOLE_IAP_JWKS_URL"} {
		if v := env.Lookup(name); v != "" {
			env.Invalid(name, v, errors.New("set only with CONSOLE_IAP_AUDIENCE, the console behind Identity-Aware Proxy"))
		}
	}
	cfg.Issuer = env.URL("OIDC_ISSUER", outboxlib.GoogleIssuer)
	if cfg.Audience = strings.TrimSuffix(env.URL("OIDC_AUDIENCE", ""), "/"); cfg.Audience == "" && env.Lookup("OIDC_AUDIENCE") == "" {
		env.Missing("OIDC_AUDIENCE")
	}
}

// urlVar is the variable with a service's URL: the roster's (the relay's too, RELAY_URL, which
// the consumers read to nudge it).
func urlVar(s topology.Service) string {
	if s.Name == topology.Relay {
		return "RELAY_URL"
	}
	return s.URLVar
}
