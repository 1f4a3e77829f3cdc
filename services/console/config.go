package main

import (
	"errors"
	"strings"
	"time"

	"github.com/spanmart/spanmart/internal/topology"
	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/services/console/internal/web"
)

// serviceName is the default of K_SERVICE.
const serviceName = "console"

// config is the console's configuration: what every binary reads (platform.Config) and
//
//	OIDC_ISSUER            issuer of the operators' ID tokens; default https://accounts.google.com
//	                       (locally the Tasks emulator's)
//	OIDC_AUDIENCE          required; the audience they must carry: the console's own URL
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
	Issuer         string
	Audience       string
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
		Issuer:         env.URL("OIDC_ISSUER", outboxlib.GoogleIssuer),
		Audience:       strings.TrimSuffix(env.URL("OIDC_AUDIENCE", ""), "/"),
		Operators:      env.List("CONSOLE_ALLOWED_EMAILS", true),
		ServiceAccount: env.Lookup("SERVICE_ACCOUNT"),
		URLs:           map[string]string{},
		Refresh:        env.Duration("CONSOLE_REFRESH", web.DefaultRefresh, time.Second, time.Hour),
		Timeout:        env.Duration("CONSOLE_TIMEOUT", web.DefaultTimeout, time.Second, 5*time.Minute),
	}
	if cfg.Audience == "" {
		env.Missing("OIDC_AUDIENCE")
	}
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

// urlVar is the variable with a service's URL: the roster's (the relay's too, RELAY_URL, which
// the consumers read to nudge it).
func urlVar(s topology.Service) string {
	if s.Name == topology.Relay {
		return "RELAY_URL"
	}
	return s.URLVar
}
