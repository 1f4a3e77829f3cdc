package main

import (
	"errors"
	"net"
	"net/mail"
	"time"

	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/services/notifications/internal/app"
	"github.com/spanmart/spanmart/services/notifications/internal/mailer"
)

// serviceName is the default of K_SERVICE.
const serviceName = "notifications"

// config is the service's configuration: what every database-owning service reads
// (platform.ServiceConfig), how event deliveries are verified (outboxlib.ConsumerEnv), the mail
// server and how sending is retried. The SMTP password comes from the environment, which Cloud Run
// fills from Secret Manager; it is never logged.
//
//	SMTP_ADDR                  required; host:port of the mail server (relay), e.g. smtp-relay.gmail.com:587
//	SMTP_FROM                  required; the From address, e.g. "Spanmart <no-reply@spanmart.example>"
//	SMTP_USERNAME, SMTP_PASSWORD  optional, both or neither; PLAIN authentication, sent only over TLS
//	                           or to localhost
//	SMTP_STARTTLS              auto (upgrade when the server offers it), always (refuse a server
//	                           that does not) or never; default auto
//	SMTP_TIMEOUT               one e-mail's send, connecting included when no kept session is
//	                           free (and recording its answer); an attempt holds
//	                           its e-mail for NOTIFICATIONS_RESUME_AFTER plus twice this; default 30s
//	NOTIFICATIONS_MAX_ATTEMPTS attempts at one e-mail before it is FAILED; default 8
//	NOTIFICATIONS_RESUME_AFTER how long an unsent e-mail waits before the sweep takes it over, and
//	                           the back-off after the first failed attempt (doubling, at most 1h); default 1m
type config struct {
	platform.ServiceConfig
	Events outboxlib.ConsumerEnv

	SMTP        mailer.Config
	MaxAttempts int
	ResumeAfter time.Duration
}

// loadConfig reads the environment through getenv and reports every missing or invalid
// variable in one error.
func loadConfig(getenv func(string) string) (config, error) {
	env := platform.NewEnv(getenv)
	cfg := config{
		ServiceConfig: platform.LoadServiceConfig(env, serviceName),
		Events:        outboxlib.LoadConsumerEnv(env),
		MaxAttempts:   env.Int("NOTIFICATIONS_MAX_ATTEMPTS", app.DefaultMaxAttempts, 1, 100),
		ResumeAfter:   env.Duration("NOTIFICATIONS_RESUME_AFTER", app.DefaultResumeAfter, time.Millisecond, 24*time.Hour),
	}
	cfg.SMTP = mailer.Config{
		Addr:     env.Required("SMTP_ADDR"),
		Username: env.Lookup("SMTP_USERNAME"),
		Password: env.Lookup("SMTP_PASSWORD"),
		StartTLS: mailer.StartTLS(env.Enum("SMTP_STARTTLS", string(mailer.StartTLSAuto),
			string(mailer.StartTLSAuto), string(mailer.StartTLSAlways), string(mailer.StartTLSNever))),
		Timeout: env.Duration("SMTP_TIMEOUT", 30*time.Second, 100*time.Millisecond, 10*time.Minute),
	}
	if a := cfg.SMTP.Addr; a != "" {
		if host, _, err := net.SplitHostPort(a); err != nil || host == "" {
			env.Invalid("SMTP_ADDR", a, errors.New("want host:port"))
		}
	}
	if from := env.Required("SMTP_FROM"); from != "" {
		addr, err := mail.ParseAddress(from)
		if err != nil {
			env.Invalid("SMTP_FROM", from, errors.New(`want an address like "Spanmart <no-reply@spanmart.example>"`))
		} else {
			cfg.SMTP.From = addr
			// Cloud Run instances have no name of their own worth announcing: EHLO with the
			// sender's domain.
			cfg.SMTP.LocalName = domainOf(addr.Address)
		}
	}
	// Never echo the password: name the variable that is missing, not the value that is set.
	switch {
	case cfg.SMTP.Username != "" && cfg.SMTP.Password == "":
		env.Missing("SMTP_PASSWORD")
	case cfg.SMTP.Username == "" && cfg.SMTP.Password != "":
		env.Missing("SMTP_USERNAME")
	}
	return cfg, env.Err()
}

func domainOf(addr string) string {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == '@' {
			return addr[i+1:]
		}
	}
	return ""
}
