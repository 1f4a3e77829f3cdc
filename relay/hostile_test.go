package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spanmart/spanmart/emulator/oidc"
	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/pkg/platform/platformtest"
)

// TestHostileNudges: POST /nudge without a token a service may nudge with (none, forged with a key
// the issuer never published, expired, for another audience, another account's) is 401 or 403,
// and one with bad parameters 400, each a problem, none logged as an error. A nudge has no body and
// stores nothing: a refused one has only not woken the relay.
func TestHostileNudges(t *testing.T) {
	_, orders := env.NewDatabase(t, dbschema.Orders)
	tasks := startTasks(t)
	cons := newConsumers(t)
	issuer, issuerURL := startIssuer(t)
	vars := baseEnv(tasks.Addr(), cons.srv.URL)
	vars["RELAY_SOURCES"] = orders
	vars["RELAY_ROUTES"] = routesFor(t, []string{orders}, "orders")
	vars["PORT"] = "0"
	vars["OIDC_ISSUER"] = issuerURL
	cfg, err := loadConfig(platformtest.Getenv(vars))
	if err != nil {
		t.Fatal(err)
	}
	log, logs := platformtest.NewLogger(t, serviceName)
	platformtest.Start(t, func(ctx context.Context) error { return run(ctx, cfg, log) })
	url := platformtest.StartedURL(t, logs)

	now := time.Now()
	mint := func(audience, email string, at time.Time) string {
		t.Helper()
		tok, err := issuer.Mint(audience, email, at)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	// Another issuer at the same URL: the right claims, a key the relay's issuer never published.
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	forger, err := oidc.NewIssuer(issuerURL, key)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := forger.Mint(relayAudience, ordersSA, now)
	if err != nil {
		t.Fatal(err)
	}
	service := mint(relayAudience, ordersSA, now)
	for _, tt := range []struct {
		name, query, auth string
		status            int
		detail            string
	}{
		{"no token", "", "", 401, ""},
		{"an empty bearer token", "", "Bearer ", 401, ""},
		{"basic credentials", "", "Basic b3JkZXJzOnB3", 401, ""},
		{"a token signed with another key", "", "Bearer " + forged, 401, ""},
		{"an expired token", "", "Bearer " + mint(relayAudience, ordersSA, now.Add(-2*time.Hour)), 401, ""},
		{"a token for another audience", "", "Bearer " + mint("https://orders.test", ordersSA, now), 401, ""},
		{"another service's token", "", "Bearer " + mint(relayAudience, "intruder@spanmart-test.iam.gserviceaccount.com", now), 403, ""},
		{"an operator's token", "", "Bearer " + mint(relayAudience, operatorSA, now), 403, ""},
		{"a negative shard", "?source=orders&shard=-1", "Bearer " + service, 400, `shard "-1"`},
		{"an overflowing shard", "?source=orders&shard=9223372036854775808", "Bearer " + service, 400, "shard"},
		{"an escape sequence in the source", "?source=%1b%5b2J&shard=1", "Bearer " + service, 400, `source "\x1b[2J"`},
		{"a source of another service", "?source=payments&shard=1", "Bearer " + service, 400, `source "payments"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, url+"/nudge"+tt.query, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status || resp.Header.Get("Content-Type") != platform.ContentTypeProblem {
				t.Fatalf("POST /nudge%s: %d %s %s, want a %d problem", tt.query, resp.StatusCode, resp.Header.Get("Content-Type"), b, tt.status)
			}
			var p struct {
				Status int
				Title  string
				Detail string
			}
			if err := json.Unmarshal(b, &p); err != nil || p.Status != tt.status || p.Title == "" || !strings.Contains(p.Detail, tt.detail) {
				t.Errorf("problem %s (%v), want status %d and a detail mentioning %q", b, err, tt.status, tt.detail)
			}
		})
	}
	if code, body := post(t, url+"/nudge", "", service); code != http.StatusNoContent {
		t.Errorf("the service's own nudge: %d %v, want 204", code, body)
	}
	for _, e := range logs.Entries(t) {
		if e["severity"] == "ERROR" {
			t.Errorf("logged at ERROR: %v", e)
		}
	}
}

// startIssuer serves an OIDC issuer of ID tokens (discovery and keys) on a local URL.
func startIssuer(t *testing.T) (*oidc.Issuer, string) {
	t.Helper()
	var handler atomic.Pointer[http.Handler]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*handler.Load()).ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	issuer, err := oidc.NewIssuer(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := issuer.Handler()
	handler.Store(&h)
	return issuer, srv.URL
}
