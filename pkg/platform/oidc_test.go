package platform_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/spanmart/spanmart/emulator/authemu"
	"github.com/spanmart/spanmart/emulator/oidc"
	"github.com/spanmart/spanmart/pkg/platform"
)

func startAuthemu(t testing.TB) *authemu.Server {
	t.Helper()
	s, err := authemu.Start(context.Background(), authemu.Options{Audience: "spanmart-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func customerVerifier(t testing.TB, s *authemu.Server, cfg platform.IDTokenVerifierConfig) *platform.IDTokenVerifier {
	t.Helper()
	if cfg.Issuer == "" {
		cfg.Issuer = s.URL()
	}
	if cfg.Audiences == nil {
		cfg.Audiences = []string{s.Audience()}
	}
	v, err := platform.NewIDTokenVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestIDTokenVerifierCustomers: a customer's token of the local Identity Platform stand-in is
// verified and read (sub, email, auth_time), and each way a token can be wrong is refused as the
// caller's fault. The checks shared with the Google tokens (rotation, the fetch rate limit, the
// issuer down) are pkg/outboxlib's TestVerifier, which runs through this verifier.
func TestIDTokenVerifierCustomers(t *testing.T) {
	ctx := context.Background()
	s := startAuthemu(t)
	v := customerVerifier(t, s, platform.IDTokenVerifierConfig{})
	signedIn := time.Now().Add(-20 * time.Minute).Truncate(time.Second)
	good, err := s.Mint(authemu.Claims{Subject: "uid-ali", Email: "ali@example.com", EmailVerified: true, AuthTime: signedIn})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := v.Verify(ctx, "Bearer "+good)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Subject != "uid-ali" || tok.Email != "ali@example.com" || !tok.EmailVerified || !tok.AuthTime.Equal(signedIn) || tok.Issuer != s.URL() {
		t.Errorf("token = %+v", tok)
	}

	mint := func(c authemu.Claims) string {
		t.Helper()
		tok, err := s.Mint(c)
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + tok
	}
	forged, err := s.Forge(authemu.Claims{Subject: "uid-ali"})
	if err != nil {
		t.Fatal(err)
	}
	for name, header := range map[string]string{
		"none":               "",
		"another scheme":     "Basic YWxpOnB3",
		"bearer alone":       "Bearer ",
		"not a JWT":          "Bearer abc.def",
		"huge":               "Bearer " + strings.Repeat("a", 17<<10),
		"forged":             "Bearer " + forged,
		"expired":            mint(authemu.Claims{Subject: "uid-ali", IssuedAt: time.Now().Add(-61*time.Minute - time.Minute)}),
		"another audience":   mint(authemu.Claims{Subject: "uid-ali", Audience: "another-project"}),
		"another issuer":     mint(authemu.Claims{Subject: "uid-ali", Issuer: "https://securetoken.google.com/spanmart-test"}),
		"two hours long":     mint(authemu.Claims{Subject: "uid-ali", Lifetime: 2 * time.Hour}),
		"signed in later":    mint(authemu.Claims{Subject: "uid-ali", AuthTime: time.Now().Add(5 * time.Minute)}),
		"issued in future":   mint(authemu.Claims{Subject: "uid-ali", IssuedAt: time.Now().Add(5 * time.Minute)}),
		"header and garbage": "Bearer " + good[:strings.LastIndex(good, ".")] + ".AAAA",
	} {
		if got, err := v.Verify(ctx, header); !errors.Is(err, platform.ErrUnauthenticated) {
			t.Errorf("%s: Verify = %+v, %v; want ErrUnauthenticated", name, got, err)
		} else if strings.Contains(err.Error(), good) || (len(header) > 40 && strings.Contains(err.Error(), header[7:])) {
			t.Errorf("%s: the error %q quotes the token", name, err)
		}
	}

	// Within the minute of skew is fine.
	if _, err := v.Verify(ctx, mint(authemu.Claims{Subject: "uid-ali", IssuedAt: time.Now().Add(-time.Hour - 30*time.Second)})); err != nil {
		t.Errorf("expired 30 s ago: %v, want accepted (skew)", err)
	}
	// A longer lifetime is a configuration.
	long := customerVerifier(t, s, platform.IDTokenVerifierConfig{MaxLifetime: 3 * time.Hour})
	if _, err := long.Verify(ctx, mint(authemu.Claims{Subject: "uid-ali", Lifetime: 2 * time.Hour})); err != nil {
		t.Errorf("two hours with MaxLifetime 3h: %v", err)
	}
}

// TestIDTokenVerifierRemembersUntilExpiry: a token verified once is not checked again, but it
// still expires: past its exp (and the minute of skew) the same text is refused.
func TestIDTokenVerifierRemembersUntilExpiry(t *testing.T) {
	ctx := context.Background()
	s := startAuthemu(t)
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	v := customerVerifier(t, s, platform.IDTokenVerifierConfig{Now: func() time.Time { return time.Unix(0, now.Load()) }})
	good, err := s.Mint(authemu.Claims{Subject: "uid-ali"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		tok, err := v.Verify(ctx, "Bearer "+good)
		if err != nil || tok.Subject != "uid-ali" {
			t.Fatalf("verification %d: %+v, %v", i+1, tok, err)
		}
		tok.Audience[0] = "changed by the caller"
	}
	if tok, err := v.Verify(ctx, "Bearer "+good); err != nil || tok.Audience[0] != s.Audience() {
		t.Errorf("after the caller changed its copy: %+v, %v", tok, err)
	}
	now.Store(time.Now().Add(time.Hour + 2*time.Minute).UnixNano())
	if tok, err := v.Verify(ctx, "Bearer "+good); !errors.Is(err, platform.ErrUnauthenticated) {
		t.Errorf("an hour and two minutes later: %+v, %v; want ErrUnauthenticated (expired)", tok, err)
	}
}

// TestIDTokenVerifierJWKSURL: with JWKSURL the keys are read there and no discovery document is
// asked for (Identity Platform's keys are published at a fixed URL).
func TestIDTokenVerifierJWKSURL(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	const issuer = "https://securetoken.google.com/spanmart-test"
	iss, err := oidc.NewIssuer(issuer, key)
	if err != nil {
		t.Fatal(err)
	}
	var discovery, jwks atomic.Int64
	keys := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/jwks":
			jwks.Add(1)
		default:
			discovery.Add(1)
		}
		iss.Handler().ServeHTTP(w, r)
	}))
	defer keys.Close()
	v, err := platform.NewIDTokenVerifier(platform.IDTokenVerifierConfig{Issuer: issuer, Audiences: []string{"spanmart-test"}, JWKSURL: keys.URL + "/jwks"})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := iss.Mint("spanmart-test", "ali@example.com", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(context.Background(), "Bearer "+tok); err != nil {
		t.Fatal(err)
	}
	if discovery.Load() != 0 || jwks.Load() != 1 {
		t.Errorf("%d discovery and %d JWKS fetches, want 0 and 1", discovery.Load(), jwks.Load())
	}
}

// TestIDTokenVerifierAlgorithms: a verifier takes the algorithms it is configured with and no
// other. Identity-Aware Proxy's ES256 assertion (authemu's stand-in for it, given bare as its
// header carries it) verifies with Algorithms ES256 and the key set's URL; the RS256 default
// refuses it, and the ES256 verifier refuses an RS256 token and an unsigned one, whatever they say.
func TestIDTokenVerifierAlgorithms(t *testing.T) {
	ctx := context.Background()
	s := startAuthemu(t)
	es256 := customerVerifier(t, s, platform.IDTokenVerifierConfig{
		Issuer: s.IAPIssuer(), Audiences: []string{s.IAPAudience()}, JWKSURL: s.IAPJWKSURL(),
		Algorithms: []jose.SignatureAlgorithm{jose.ES256}, MaxLifetime: authemu.IAPLifetime,
	})
	rs256 := customerVerifier(t, s, platform.IDTokenVerifierConfig{
		Issuer: s.IAPIssuer(), Audiences: []string{s.IAPAudience()}, JWKSURL: s.IAPJWKSURL(),
	})
	assertion, err := s.IAPAssertion("operator@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := es256.VerifyToken(ctx, assertion); err != nil || got.Email != "operator@example.com" {
		t.Errorf("ES256 verifier, IAP assertion: %+v, %v", got, err)
	}
	if got, err := es256.Verify(ctx, "Bearer "+assertion); err != nil || got.Email != "operator@example.com" {
		t.Errorf("ES256 verifier, the assertion as a bearer: %+v, %v", got, err)
	}
	if _, err := rs256.VerifyToken(ctx, assertion); !errors.Is(err, platform.ErrUnauthenticated) {
		t.Errorf("RS256 verifier, ES256 assertion: %v, want ErrUnauthenticated", err)
	}
	rsToken, err := s.Mint(authemu.Claims{Subject: "op", Email: "operator@example.com", EmailVerified: true, Issuer: s.IAPIssuer(), Audience: s.IAPAudience()})
	if err != nil {
		t.Fatal(err)
	}
	_, payload, _ := strings.Cut(assertion, ".")
	payload, _, _ = strings.Cut(payload, ".")
	for name, tok := range map[string]string{
		"RS256":    rsToken,
		"unsigned": "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0." + payload + ".", // {"alg":"none","typ":"JWT"}
		"empty":    " ",
	} {
		if _, err := es256.VerifyToken(ctx, tok); !errors.Is(err, platform.ErrUnauthenticated) {
			t.Errorf("ES256 verifier, %s token: %v, want ErrUnauthenticated", name, err)
		}
	}
}

func TestNewIDTokenVerifierConfig(t *testing.T) {
	for name, cfg := range map[string]platform.IDTokenVerifierConfig{
		"no issuer":         {Audiences: []string{"a"}},
		"no audience":       {Issuer: "https://x"},
		"an empty audience": {Issuer: "https://x", Audiences: []string{"a", ""}},
		"negative lifetime": {Issuer: "https://x", Audiences: []string{"a"}, MaxLifetime: -time.Second},
		"a shared secret":   {Issuer: "https://x", Audiences: []string{"a"}, Algorithms: []jose.SignatureAlgorithm{jose.ES256, jose.HS256}},
		"no signature":      {Issuer: "https://x", Audiences: []string{"a"}, Algorithms: []jose.SignatureAlgorithm{"none"}},
	} {
		if _, err := platform.NewIDTokenVerifier(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzVerifyToken: whatever arrives in the Authorization header, Verify never panics and never
// blames the issuer (the issuer is up: every refusal is ErrUnauthenticated), and what it accepts
// is a token of this issuer for this audience, current, with a subject. The seeds are in
// testdata/fuzz/FuzzVerifyToken; a fresh good token and a forgery are added here (tokens expire).
func FuzzVerifyToken(f *testing.F) {
	s := startAuthemu(f)
	v := customerVerifier(f, s, platform.IDTokenVerifierConfig{})
	good, err := s.Token("uid-ali", "ali@example.com")
	if err != nil {
		f.Fatal(err)
	}
	forged, err := s.Forge(authemu.Claims{Subject: "uid-ali"})
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{"Bearer " + good, "bearer " + good, "Bearer " + forged, "Bearer  " + good + " ", "Bearer " + good + good} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, header string) {
		tok, err := v.Verify(context.Background(), header)
		if err != nil {
			if !errors.Is(err, platform.ErrUnauthenticated) {
				t.Fatalf("Verify(%q) = %v: not the caller's fault?", header, err)
			}
			return
		}
		checkAccepted(t, s, tok)
	})
}

// FuzzVerifyClaims: whatever payload the issuer's own key signs, Verify never panics, and what it
// accepts satisfies every claim check. The seeds are in testdata/fuzz/FuzzVerifyClaims.
func FuzzVerifyClaims(f *testing.F) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		f.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	iss, err := oidc.NewIssuer("http://"+srv.Listener.Addr().String(), key)
	if err != nil {
		f.Fatal(err)
	}
	srv.Config.Handler = iss.Handler()
	srv.Start()
	f.Cleanup(srv.Close)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: iss.KeyID()}}, nil)
	if err != nil {
		f.Fatal(err)
	}
	now := time.Now().Unix()
	f.Add([]byte(`{"iss":"` + srv.URL + `","aud":"spanmart-test","sub":"uid-ali","iat":` + strconv.FormatInt(now, 10) + `,"exp":` + strconv.FormatInt(now+3600, 10) + `}`))
	v, err := platform.NewIDTokenVerifier(platform.IDTokenVerifierConfig{Issuer: srv.URL, Audiences: []string{"spanmart-test"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		jws, err := signer.Sign(payload)
		if err != nil {
			t.Fatal(err)
		}
		compact, err := jws.CompactSerialize()
		if err != nil {
			t.Fatal(err)
		}
		tok, err := v.Verify(context.Background(), "Bearer "+compact)
		if err != nil {
			if !errors.Is(err, platform.ErrUnauthenticated) {
				t.Fatalf("Verify(%s) = %v: not the caller's fault?", payload, err)
			}
			return
		}
		if tok.Issuer != srv.URL || !slices.Contains(tok.Audience, "spanmart-test") || tok.Subject == "" {
			t.Fatalf("accepted %s as %+v", payload, tok)
		}
		checkTimes(t, tok)
	})
}

func checkAccepted(t *testing.T, s *authemu.Server, tok platform.IDToken) {
	t.Helper()
	if tok.Issuer != s.URL() || !slices.Contains(tok.Audience, s.Audience()) || tok.Subject == "" {
		t.Fatalf("accepted %+v", tok)
	}
	checkTimes(t, tok)
}

// checkTimes: an accepted token is current (a minute of skew), lives at most an hour (plus the
// skew) and was not signed in to in the future.
func checkTimes(t *testing.T, tok platform.IDToken) {
	t.Helper()
	now := time.Now()
	if tok.Expiry.Before(now.Add(-2*time.Minute)) || tok.IssuedAt.After(now.Add(2*time.Minute)) ||
		tok.Expiry.Sub(tok.IssuedAt) > time.Hour+time.Minute || tok.AuthTime.After(now.Add(2*time.Minute)) {
		t.Fatalf("accepted a token out of time: %+v", tok)
	}
}
