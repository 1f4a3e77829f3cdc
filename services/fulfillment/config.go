package main

import (
	"errors"
	"net/url"
	"strings"

	"github.com/spanmart/spanmart/pkg/platform"
)

// serviceName is the default of K_SERVICE.
const serviceName = "fulfillment"

// defaultOIDCIssuer is the issuer of the ID tokens Cloud Tasks attaches in production.
const defaultOIDCIssuer = "https://accounts.google.com"

// config is the service's configuration: what every database-owning service reads
// (platform.ServiceConfig) plus the verification of event deliveries (POST /events):
//
//	OIDC_ISSUER          issuer of the deliveries' ID tokens, default https://accounts.google.com
//	                     (locally the Cloud Tasks emulator's issuer URL)
//	OIDC_AUDIENCE        required; the audience the tokens must carry (this service's own URL)
//	OIDC_ALLOWED_EMAILS  required; comma-separated service accounts allowed to deliver events (the relay's)
//
// Fulfillment does not nudge the relay (RELAY_URL is not read): its events are appended inside the
// consumer's transaction, and the relay's polling publishes them.
type config struct {
	platform.ServiceConfig
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
		OIDCIssuer:    env.String("OIDC_ISSUER", defaultOIDCIssuer),
		OIDCAudience:  env.Required("OIDC_AUDIENCE"),
	}
	if u, err := url.Parse(cfg.OIDCIssuer); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		env.Invalid("OIDC_ISSUER", cfg.OIDCIssuer, errNotURL)
	}
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

var errNotURL = errors.New("want an absolute http(s) URL")
