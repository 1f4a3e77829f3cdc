package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spanmart/spanmart/emulator/oidc"
	"github.com/spanmart/spanmart/pkg/dbschema"
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
	auth := func(v string) map[string]string { return map[string]string{"Authorization": v} }
	platformtest.RefuseAll(t, url, []platformtest.Hostile{
		{Name: "no token", Path: "/nudge", Status: 401, Detail: "a valid Google ID token of a service's account is required"},
		{Name: "an empty bearer token", Path: "/nudge", Header: auth("Bearer "), Status: 401},
		{Name: "basic credentials", Path: "/nudge", Header: auth("Basic b3JkZXJzOnB3"), Status: 401},
		{Name: "a token signed with another key", Path: "/nudge", Header: auth("Bearer " + forged), Status: 401},
		{Name: "an expired token", Path: "/nudge", Header: auth("Bearer " + mint(relayAudience, ordersSA, now.Add(-2*time.Hour))), Status: 401},
		{Name: "a token for another audience", Path: "/nudge", Header: auth("Bearer " + mint("https://orders.test", ordersSA, now)), Status: 401},
		{Name: "another service's token", Path: "/nudge", Header: auth("Bearer " + mint(relayAudience, "intruder@spanmart-test.iam.gserviceaccount.com", now)), Status: 403},
		{Name: "an operator's token", Path: "/nudge", Header: auth("Bearer " + mint(relayAudience, operatorSA, now)), Status: 403, Detail: "the caller is not a service allowed to nudge the relay"},
		{Name: "a negative shard", Path: "/nudge?source=orders&shard=-1", Header: auth("Bearer " + service), Status: 400, Detail: `shard "-1"`},
		{Name: "a bad shard after a good one", Path: "/nudge?source=orders&shard=1&shard=16", Header: auth("Bearer " + service), Status: 400, Detail: `shard "16"`},
		{Name: "an overflowing shard", Path: "/nudge?source=orders&shard=9223372036854775808", Header: auth("Bearer " + service), Status: 400, Detail: "shard"},
		{Name: "an escape sequence in the source", Path: "/nudge?source=%1b%5b2J&shard=1", Header: auth("Bearer " + service), Status: 400, Detail: `source "\x1b[2J"`},
		{Name: "a source of another service", Path: "/nudge?source=payments&shard=1", Header: auth("Bearer " + service), Status: 400, Detail: `source "payments"`},
	})
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
