package outboxlib_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/spanmart/spanmart/emulator/oidc"
	"github.com/spanmart/spanmart/pkg/outboxlib"
)

// rotatingIssuer serves the discovery document and JWKS of whichever issuer is current, as an
// identity provider rotating its key does, and counts the fetches.
type rotatingIssuer struct {
	*httptest.Server
	mu      sync.Mutex
	current *oidc.Issuer
	fetches atomic.Int64
	down    atomic.Bool
}

func newRotatingIssuer(t *testing.T) *rotatingIssuer {
	r := &rotatingIssuer{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		if strings.HasSuffix(req.URL.Path, "/jwks") {
			r.fetches.Add(1)
		}
		r.mu.Lock()
		h := r.current.Handler()
		r.mu.Unlock()
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(r.Close)
	r.rotate(t)
	return r
}

// rotate switches to a fresh key and returns the issuer that signs with it.
func (r *rotatingIssuer) rotate(t *testing.T) *oidc.Issuer {
	t.Helper()
	iss, err := oidc.NewIssuer(r.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.current = iss
	r.mu.Unlock()
	return iss
}

func TestVerifier(t *testing.T) {
	ctx := context.Background()
	const aud = "https://fulfillment.example.com/events"
	idp := newRotatingIssuer(t)
	key1 := idp.current
	v, err := outboxlib.NewVerifier(outboxlib.VerifierConfig{Issuer: idp.URL, Audiences: []string{"https://other", aud}, AllowedEmails: []string{relaySA}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	outboxlib.SetVerifierClock(v, func() time.Time { return time.Unix(0, clock.Load()) })
	advance := func(d time.Duration) { clock.Add(int64(d)) }

	mint := func(iss *oidc.Issuer, audience, email string, at time.Time) string {
		tok, err := iss.Mint(audience, email, at)
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + tok
	}
	verify := func(name, auth string, ok bool) {
		t.Helper()
		email, err := v.Verify(ctx, auth)
		if ok && (err != nil || email != relaySA) {
			t.Errorf("%s: Verify = %q, %v; want %s", name, email, err, relaySA)
		}
		if !ok && !errors.Is(err, outboxlib.ErrUnauthenticated) {
			t.Errorf("%s: Verify = %q, %v; want ErrUnauthenticated", name, email, err)
		}
	}

	verify("valid", mint(key1, aud, relaySA, now), true)
	verify("lower-case scheme", strings.Replace(mint(key1, aud, relaySA, now), "Bearer", "bearer", 1), true)
	verify("expired", mint(key1, aud, relaySA, now.Add(-2*time.Hour)), false)
	verify("within skew", mint(key1, aud, relaySA, now.Add(-time.Hour-30*time.Second)), true)
	verify("issued in the future", mint(key1, aud, relaySA, now.Add(10*time.Minute)), false)
	verify("wrong audience", mint(key1, "https://orders.example.com/events", relaySA, now), false)
	verify("wrong email", mint(key1, aud, "someone@example.com", now), false)
	other, err := oidc.NewIssuer("https://evil.example.com", nil)
	if err != nil {
		t.Fatal(err)
	}
	verify("other issuer", mint(other, aud, relaySA, now), false)
	if n := idp.fetches.Load(); n != 1 {
		t.Errorf("JWKS fetched %d times, want 1 (at first use; the other issuer's unknown key is within the rate limit)", n)
	}

	// Key rotation: a token signed with the new key is accepted once the set is fetched again,
	// but unknown key ids do not trigger a fetch more than every 30 s.
	fetches := idp.fetches.Load()
	key2 := idp.rotate(t)
	verify("new key, just after a fetch", mint(key2, aud, relaySA, now), false)
	if got := idp.fetches.Load(); got != fetches {
		t.Errorf("JWKS fetched %d times within the rate limit, want %d", got, fetches)
	}
	advance(31 * time.Second)
	verify("new key, after the rate limit", mint(key2, aud, relaySA, now), true)
	if got := idp.fetches.Load(); got != fetches+1 {
		t.Errorf("JWKS fetched %d times after rotation, want %d", got, fetches+1)
	}
	verify("retired key", mint(key1, aud, relaySA, now), false)

	// The issuer being unreachable is not the caller's fault: not ErrUnauthenticated.
	idp.down.Store(true)
	advance(7 * time.Hour) // the cached set is too old
	key3 := idp.rotate(t)
	later := time.Unix(0, clock.Load())
	if _, err := v.Verify(ctx, mint(key3, aud, relaySA, later)); err == nil || errors.Is(err, outboxlib.ErrUnauthenticated) {
		t.Errorf("Verify with the issuer down = %v, want a non-authentication error", err)
	}
	// A key from the last successful fetch still verifies while the issuer is down.
	advance(2 * time.Second)
	verify("known key, issuer down", mint(key2, aud, relaySA, later), true)
}

// TestVerifierClaims signs tokens with the test issuer's key but hand-picked claims, to check the
// claims Verify requires beyond signature, issuer and audience: email_verified true, iat and exp
// both present, and a lifetime (exp - iat) of at most an hour plus the minute of skew.
func TestVerifierClaims(t *testing.T) {
	ctx := context.Background()
	const aud = "https://fulfillment.example.com/events"
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	iss, err := oidc.NewIssuer("http://"+srv.Listener.Addr().String(), key)
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = iss.Handler()
	srv.Start()
	t.Cleanup(srv.Close)
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: iss.KeyID()}},
		(&jose.SignerOptions{}).WithType("JWT"),
	)
	if err != nil {
		t.Fatal(err)
	}
	v, err := outboxlib.NewVerifier(outboxlib.VerifierConfig{Issuer: srv.URL, Audiences: []string{aud}, AllowedEmails: []string{relaySA}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(time.Now().Unix(), 0)
	outboxlib.SetVerifierClock(v, func() time.Time { return now })

	// claims returns the claims the Tasks emulator (and Google) put in a token issued at iat
	// and valid for lifetime, with edit applied.
	claims := func(iat time.Time, lifetime time.Duration, edit func(map[string]any)) map[string]any {
		c := map[string]any{
			"iss": srv.URL, "aud": aud, "sub": "1234", "azp": relaySA,
			"email": relaySA, "email_verified": true,
			"iat": iat.Unix(), "exp": iat.Add(lifetime).Unix(),
		}
		if edit != nil {
			edit(c)
		}
		return c
	}
	minted, err := iss.Mint(aud, relaySA, now)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		claims map[string]any // signed by the issuer's key; nil: use minted
		ok     bool
	}{
		{name: "minted by the Tasks emulator", ok: true},
		{name: "same claims, signed here", claims: claims(now, time.Hour, nil), ok: true},
		{name: "email_verified absent", claims: claims(now, time.Hour, func(c map[string]any) { delete(c, "email_verified") })},
		{name: "email_verified false", claims: claims(now, time.Hour, func(c map[string]any) { c["email_verified"] = false })},
		{name: "email_verified a string", claims: claims(now, time.Hour, func(c map[string]any) { c["email_verified"] = "true" })},
		{name: "iat absent", claims: claims(now, time.Hour, func(c map[string]any) { delete(c, "iat") })},
		{name: "exp absent", claims: claims(now, time.Hour, func(c map[string]any) { delete(c, "exp") })},
		{name: "lifetime an hour plus the skew", claims: claims(now, time.Hour+time.Minute, nil), ok: true},
		{name: "lifetime a second beyond", claims: claims(now, time.Hour+time.Minute+time.Second, nil)},
		{name: "lifetime two hours, issued half an hour ago", claims: claims(now.Add(-30*time.Minute), 2*time.Hour, nil)},
		{name: "lifetime a year", claims: claims(now, 365*24*time.Hour, nil)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok := minted
			if tc.claims != nil {
				if tok, err = jwt.Signed(signer).Claims(tc.claims).Serialize(); err != nil {
					t.Fatal(err)
				}
			}
			email, err := v.Verify(ctx, "Bearer "+tok)
			if tc.ok && (err != nil || email != relaySA) {
				t.Errorf("Verify = %q, %v; want %s", email, err, relaySA)
			}
			if !tc.ok && !errors.Is(err, outboxlib.ErrUnauthenticated) {
				t.Errorf("Verify = %q, %v; want ErrUnauthenticated", email, err)
			}
		})
	}
}
