package authemu_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spanmart/spanmart/emulator/authemu"
	"github.com/spanmart/spanmart/pkg/platform"
)

func start(t *testing.T, opts authemu.Options) *authemu.Server {
	t.Helper()
	if opts.Audience == "" {
		opts.Audience = "spanmart-test"
	}
	s, err := authemu.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// verifier is what orders runs: discovery at the issuer's URL, then its JWKS.
func verifier(t *testing.T, s *authemu.Server) *platform.IDTokenVerifier {
	t.Helper()
	v, err := platform.NewIDTokenVerifier(platform.IDTokenVerifierConfig{Issuer: s.URL(), Audiences: []string{s.Audience()}})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestTokenVerifies: POST /token hands out a token the platform verifier accepts, for the customer
// asked for, shaped like Identity Platform's.
func TestTokenVerifies(t *testing.T) {
	s := start(t, authemu.Options{})
	resp, err := http.Post(s.URL()+"/token", "application/json", strings.NewReader(`{"sub": "ali", "email": "ali@example.com"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("POST /token = %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	before := time.Now().Add(-time.Second)
	tok, err := verifier(t, s).Verify(context.Background(), "Bearer "+string(body))
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if tok.Subject != "ali" || tok.Email != "ali@example.com" || !tok.EmailVerified || tok.Issuer != s.URL() ||
		len(tok.Audience) != 1 || tok.Audience[0] != "spanmart-test" || tok.AuthTime.IsZero() ||
		tok.Expiry.Sub(tok.IssuedAt) != authemu.TokenLifetime || tok.IssuedAt.Before(before.Truncate(time.Second)) {
		t.Errorf("token = %+v", tok)
	}
}

// TestTokenRequests: POST /token refuses what is not a customer.
func TestTokenRequests(t *testing.T) {
	s := start(t, authemu.Options{})
	for _, body := range []string{``, `{}`, `{"sub": ""}`, `{"sub": " "}`, `{"sub": 1}`, `{"sub": "a", "role": "admin"}`,
		`{"sub": "` + strings.Repeat("x", authemu.MaxSubjectLen+1) + `"}`} {
		resp, err := http.Post(s.URL()+"/token", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("POST /token %s = %d, want 400", body, resp.StatusCode)
		}
	}
	if resp, err := http.Get(s.URL() + "/token"); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /token = %v %v, want 405", resp, err)
	}
}

// TestMintedTokensThatMustFail: the tokens tests need to be refused are refused by the verifier,
// and refused as the caller's fault (platform.ErrUnauthenticated).
func TestMintedTokensThatMustFail(t *testing.T) {
	s := start(t, authemu.Options{})
	v := verifier(t, s)
	mint := func(c authemu.Claims) string {
		tok, err := s.Mint(c)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	forged, err := s.Forge(authemu.Claims{Subject: "ali"})
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{
		"forged":           forged,
		"expired":          mint(authemu.Claims{Subject: "ali", IssuedAt: time.Now().Add(-2 * time.Hour)}),
		"another audience": mint(authemu.Claims{Subject: "ali", Audience: "another-project"}),
		"another issuer":   mint(authemu.Claims{Subject: "ali", Issuer: "https://securetoken.google.com/another-project"}),
		"a day long":       mint(authemu.Claims{Subject: "ali", Lifetime: 24 * time.Hour}),
		"signed in later":  mint(authemu.Claims{Subject: "ali", AuthTime: time.Now().Add(time.Hour)}),
		"issued in future": mint(authemu.Claims{Subject: "ali", IssuedAt: time.Now().Add(10 * time.Minute)}),
	} {
		if _, err := v.Verify(context.Background(), "Bearer "+tok); !errors.Is(err, platform.ErrUnauthenticated) {
			t.Errorf("%s: Verify = %v, want ErrUnauthenticated", name, err)
		}
	}
	if _, err := s.Mint(authemu.Claims{}); err == nil {
		t.Error("Mint without a subject succeeded")
	}
}

// TestKeyKeptInDataDir: with a data dir, a restarted issuer (on the same port, as the dev stack
// restarts it) signs with the same keys, so tokens and IAP assertions minted before the restart
// still verify.
func TestKeyKeptInDataDir(t *testing.T) {
	dir := t.TempDir()
	first, err := authemu.Start(context.Background(), authemu.Options{Audience: "p", DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := first.Token("ali", "")
	if err != nil {
		t.Fatal(err)
	}
	assertion, err := first.IAPAssertion("operator@example.com")
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(first.URL()[strings.LastIndex(first.URL(), ":")+1:])
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	var second *authemu.Server
	for deadline := time.Now().Add(10 * time.Second); ; {
		second, err = authemu.Start(context.Background(), authemu.Options{Audience: "p", DataDir: dir, Port: port})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // the port may linger a moment after Close
	}
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if got, err := verifier(t, second).Verify(context.Background(), "Bearer "+tok); err != nil || got.Subject != "ali" {
		t.Errorf("a token of the first run after the restart: %+v, %v", got, err)
	}
	if got, err := iapVerifier(t, second, second.IAPAudience()).VerifyToken(context.Background(), assertion); err != nil || got.Email != "operator@example.com" {
		t.Errorf("an IAP assertion of the first run after the restart: %+v, %v", got, err)
	}
}
