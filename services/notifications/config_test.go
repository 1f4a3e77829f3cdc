package main

import (
	"strings"
	"testing"
	"time"

	"github.com/spanmart/spanmart/pkg/platform/platformtest"
	"github.com/spanmart/spanmart/services/notifications/internal/mailer"
)

func TestLoadConfigReportsEveryProblem(t *testing.T) {
	_, err := loadConfig(platformtest.Getenv(map[string]string{
		"SMTP_STARTTLS": "sometimes", "NOTIFICATIONS_MAX_ATTEMPTS": "0", "SMTP_PASSWORD": "hunter2-secret",
	}))
	if err == nil {
		t.Fatal("loadConfig accepted an empty environment")
	}
	for _, want := range []string{"SPANNER_DATABASE", "OIDC_AUDIENCE", "OIDC_ALLOWED_EMAILS", "SMTP_ADDR", "SMTP_FROM",
		"SMTP_USERNAME", `invalid SMTP_STARTTLS "sometimes"`, `invalid NOTIFICATIONS_MAX_ATTEMPTS "0"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error %q shows the password", err)
	}
}

func TestLoadConfigRefusesBadSMTPValues(t *testing.T) {
	base := map[string]string{
		"SPANNER_DATABASE": "projects/test-project/instances/test-instance/databases/notifications", "OIDC_AUDIENCE": "https://n.example",
		"OIDC_ALLOWED_EMAILS": "relay@p.iam.gserviceaccount.com",
		"SMTP_ADDR":           "smtp.example:587", "SMTP_FROM": "Spanmart <no-reply@spanmart.example>",
	}
	for name, c := range map[string]struct{ variable, value, want string }{
		"address without a port": {"SMTP_ADDR", "smtp.example", `invalid SMTP_ADDR "smtp.example"`},
		"from is no address":     {"SMTP_FROM", "Spanmart", `invalid SMTP_FROM "Spanmart"`},
		"user without password":  {"SMTP_USERNAME", "apikey", "missing SMTP_PASSWORD"},
	} {
		vars := map[string]string{}
		for k, v := range base {
			vars[k] = v
		}
		vars[c.variable] = c.value
		if _, err := loadConfig(platformtest.Getenv(vars)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

func TestLoadConfig(t *testing.T) {
	cfg, err := loadConfig(platformtest.Getenv(map[string]string{
		"SPANNER_DATABASE": "projects/test-project/instances/test-instance/databases/notifications", "OIDC_AUDIENCE": "https://n.example",
		"OIDC_ALLOWED_EMAILS": "relay@p.iam.gserviceaccount.com",
		"SMTP_ADDR":           "smtp-relay.example:587", "SMTP_FROM": "Spanmart <no-reply@spanmart.example>",
		"SMTP_USERNAME": "apikey", "SMTP_PASSWORD": "s3cret", "SMTP_STARTTLS": "ALWAYS",
	}))
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.SMTP
	if s.Addr != "smtp-relay.example:587" || s.From.Name != "Spanmart" || s.From.Address != "no-reply@spanmart.example" ||
		s.Username != "apikey" || s.Password != "s3cret" || s.StartTLS != mailer.StartTLSAlways || s.LocalName != "spanmart.example" ||
		s.Timeout != 30*time.Second {
		t.Errorf("SMTP config %+v", s)
	}
	if cfg.MaxAttempts != 8 || cfg.ResumeAfter != time.Minute {
		t.Errorf("defaults: %d attempts, resume after %s; want 8 and 1m", cfg.MaxAttempts, cfg.ResumeAfter)
	}
}
