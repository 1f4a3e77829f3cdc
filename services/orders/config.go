package main

import (
	"net/url"
	"strings"

	"github.com/spanmart/spanmart/pkg/platform"
)

// serviceName is the default of K_SERVICE.
const serviceName = "orders"

// defaultOIDCIssuer is the issuer of the ID tokens Cloud Tasks attaches in production.
const defaultOIDCIssuer = "https://accounts.google.com"

// config is the service's configuration: what every database-owning service reads
// (platform.ServiceConfig) plus its own variables:
//
//	RELAY_URL            optional; base URL of the outbox relay, nudged (POST /nudge) after an order is placed
//	OIDC_ISSUER          issuer of the event deliveries' ID tokens, default https://accounts.google.com
//	OIDC_AUDIENCE        required; the audience the tokens must carry (this service's own URL)
//	OIDC_ALLOWED_EMAILS  required; comma-separated service accounts allowed to deliver events (the relay's)
type config struct {
	platform.ServiceConfig
	RelayURL          string
	OIDCIssuer        string
	OIDCAudience      string
	OIDCAllowedEmails []string
}

// loadConfig reads the environment through getenv and reports every missing or invalid
// variable in one error.
func loadConfig(getenv func(string) string) (config, error) {
	env := platform.NewEnv(getenv)
	cfg := config{
		ServiceConfig: platform.LoadServiceConfig(env, serviceName),
		RelayURL:      env.String("RELAY_URL", ""),
		OIDCIssuer:    env.String("OIDC_ISSUER", defaultOIDCIssuer),
		OIDCAudience:  env.Required("OIDC_AUDIENCE"),
	}
	if cfg.RelayURL != "" {
		checkURL(env, "RELAY_URL", cfg.RelayURL)
	}
	checkURL(env, "OIDC_ISSUER", cfg.OIDCIssuer)
	if v := env.Required("OIDC_ALLOWED_EMAILS"); v != "" {
		for _, e := range strings.Split(v, ",") {
			if e = strings.TrimSpace(e); e != "" {
				cfg.OIDCAllowedEmails = append(cfg.OIDCAllowedEmails, e)
			}
		}
		if len(cfg.OIDCAllowedEmails) == 0 {
			env.Missing("OIDC_ALLOWED_EMAILS")
		}
	}
	return cfg, env.Err()
}

// checkURL records name as invalid unless v is an absolute http(s) URL.
func checkURL(env *platform.Env, name, v string) {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		env.Invalid(name, v, errNotURL)
	}
}

type configError string

func (e configError) Error() string { return string(e) }

const errNotURL = configError("want an absolute http(s) URL")
