package authemu_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/spanmart/spanmart/emulator/authemu"
	"github.com/spanmart/spanmart/pkg/platform"
)

// iapVerifier is what the console runs behind Identity-Aware Proxy: ES256 only, IAP's issuer, the
// key set at a fixed URL (here authemu's), assertions of at most ten minutes.
func iapVerifier(t *testing.T, s *authemu.Server, audience string) *platform.IDTokenVerifier {
	t.Helper()
	v, err := platform.NewIDTokenVerifier(platform.IDTokenVerifierConfig{
		Issuer: authemu.IAPIssuer, Audiences: []string{audience}, JWKSURL: s.IAPJWKSURL(),
		Algorithms: []jose.SignatureAlgorithm{jose.ES256}, MaxLifetime: authemu.IAPLifetime,
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestIAPAssertionVerifies: POST /iap/assertion hands out an assertion shaped like IAP's signed
// header (ES256 with the kid of the key set, iss https://cloud.google.com/iap, the audience, the
// user's email and sub, ten minutes long), which the platform verifier accepts for that audience.
func TestIAPAssertionVerifies(t *testing.T) {
	const aud = "/projects/123456789012/global/backendServices/987654321"
	s := start(t, authemu.Options{IAPAudience: aud})
	if s.IAPIssuer() != authemu.IAPIssuer || s.IAPAudience() != aud {
		t.Errorf("issuer %q, audience %q", s.IAPIssuer(), s.IAPAudience())
	}
	resp, err := http.Post(s.URL()+authemu.IAPAssertionPath, "application/json", strings.NewReader(`{"email": "operator@example.com"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("POST %s = %d %q %s", authemu.IAPAssertionPath, resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	tok, err := iapVerifier(t, s, aud).VerifyToken(context.Background(), string(body))
	if err != nil {
		t.Fatalf("VerifyToken: %v", err)
	}
	if tok.Email != "operator@example.com" || !strings.HasPrefix(tok.Subject, "accounts.google.com:") || tok.Issuer != authemu.IAPIssuer ||
		len(tok.Audience) != 1 || tok.Audience[0] != aud || tok.Expiry.Sub(tok.IssuedAt) != authemu.IAPLifetime {
		t.Errorf("assertion = %+v", tok)
	}
	again, err := s.IAPAssertion("operator@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if tok2, err := iapVerifier(t, s, aud).VerifyToken(context.Background(), again); err != nil || tok2.Subject != tok.Subject {
		t.Errorf("the same user's sub changed: %q, then %+v %v", tok.Subject, tok2, err)
	}

	// The key set: one P-256 key for ES256 under the assertions' kid.
	parsed, err := jwt.ParseSigned(string(body), []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	resp, err = http.Get(s.IAPJWKSURL())
	if err != nil {
		t.Fatal(err)
	}
	var keys jose.JSONWebKeySet
	err = json.NewDecoder(resp.Body).Decode(&keys)
	resp.Body.Close()
	if err != nil || len(keys.Keys) != 1 {
		t.Fatalf("GET %s: %d keys, %v", authemu.IAPJWKSPath, len(keys.Keys), err)
	}
	k := keys.Keys[0]
	if k.KeyID != parsed.Headers[0].KeyID || k.Algorithm != "ES256" || k.Use != "sig" || !k.IsPublic() || !k.Valid() {
		t.Errorf("key %+v, want the public ES256 key %s", k, parsed.Headers[0].KeyID)
	}
}

// TestIAPAssertionRequests: POST /iap/assertion refuses what is not a user's address.
func TestIAPAssertionRequests(t *testing.T) {
	s := start(t, authemu.Options{})
	for _, body := range []string{``, `{}`, `{"email": ""}`, `{"email": "operator"}`, `{"email": "Op <op@example.com>"}`,
		`{"email": 1}`, `{"email": "op@example.com", "aud": "/projects/1/apps/x"}`} {
		resp, err := http.Post(s.URL()+authemu.IAPAssertionPath, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("POST %s %s = %d, want 400", authemu.IAPAssertionPath, body, resp.StatusCode)
		}
	}
	if _, err := s.MintIAP(authemu.IAPClaims{}); err == nil {
		t.Error("MintIAP without an e-mail succeeded")
	}
}

// TestIAPAssertionsThatMustFail: the assertions tests need refused are refused by the verifier, as
// the caller's fault (platform.ErrUnauthenticated): forged, expired, longer than IAP's ten minutes,
// issued in the future, for another audience, of another issuer, and the customers' RS256 token
// presented as an assertion.
func TestIAPAssertionsThatMustFail(t *testing.T) {
	s := start(t, authemu.Options{})
	v := iapVerifier(t, s, s.IAPAudience())
	mint := func(c authemu.IAPClaims) string {
		c.Email = "operator@example.com"
		tok, err := s.MintIAP(c)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	forged, err := s.ForgeIAP(authemu.IAPClaims{Email: "operator@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	rs256, err := s.Mint(authemu.Claims{Subject: "operator", Email: "operator@example.com", EmailVerified: true,
		Issuer: authemu.IAPIssuer, Audience: s.IAPAudience()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.VerifyToken(context.Background(), mint(authemu.IAPClaims{})); err != nil {
		t.Fatalf("a good assertion: %v", err)
	}
	for name, tok := range map[string]string{
		"forged":           forged,
		"expired":          mint(authemu.IAPClaims{IssuedAt: time.Now().Add(-time.Hour)}),
		"an hour long":     mint(authemu.IAPClaims{Lifetime: time.Hour}),
		"issued in future": mint(authemu.IAPClaims{IssuedAt: time.Now().Add(5 * time.Minute)}),
		"another audience": mint(authemu.IAPClaims{Audience: "/projects/1/global/backendServices/2"}),
		"another issuer":   mint(authemu.IAPClaims{Issuer: "https://accounts.google.com"}),
		"RS256":            rs256,
	} {
		if _, err := v.VerifyToken(context.Background(), tok); !errors.Is(err, platform.ErrUnauthenticated) {
			t.Errorf("%s: VerifyToken = %v, want ErrUnauthenticated", name, err)
		}
	}
}
