package oidc

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/google/go-cmp/cmp"
)

const (
	testIssuer = "http://127.0.0.1:8124"
	testAud    = "https://orders.example.com/tasks/confirm"
	testEmail  = "tasks@spanmart-dev.iam.gserviceaccount.com"
)

var testNow = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// RSA key generation takes a noticeable fraction of a second, so the tests share two keys.
var (
	keysOnce   sync.Once
	key1, key2 *rsa.PrivateKey
	keysErr    error
)

func testKeys(t *testing.T) (*rsa.PrivateKey, *rsa.PrivateKey) {
	t.Helper()
	keysOnce.Do(func() {
		if key1, keysErr = rsa.GenerateKey(rand.Reader, 2048); keysErr != nil {
			return
		}
		key2, keysErr = rsa.GenerateKey(rand.Reader, 2048)
	})
	if keysErr != nil {
		t.Fatalf("generate keys: %v", keysErr)
	}
	return key1, key2
}

func newTestIssuer(t *testing.T, url string, key *rsa.PrivateKey) *Issuer {
	t.Helper()
	iss, err := NewIssuer(url, key)
	if err != nil {
		t.Fatalf("NewIssuer(%q): %v", url, err)
	}
	return iss
}

func mint(t *testing.T, iss *Issuer, aud, email string, now time.Time) string {
	t.Helper()
	tok, err := iss.Mint(aud, email, now)
	if err != nil {
		t.Fatalf("Mint: %v", err)
	}
	return tok
}

// segment decodes part n (0 header, 1 claims) of a compact JWT into a JSON map.
func segment(t *testing.T, tok string, n int) map[string]any {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("token has %d parts, want 3", len(parts))
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[n])
	if err != nil {
		t.Fatalf("decode part %d: %v", n, err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("unmarshal part %d: %v", n, err)
	}
	return m
}

func TestMintVerify(t *testing.T) {
	k, _ := testKeys(t)
	iss := newTestIssuer(t, testIssuer, k)
	now := testNow.Add(123 * time.Millisecond) // tokens carry whole seconds
	tok := mint(t, iss, testAud, testEmail, now)

	got, err := iss.Verify(tok, testAud, now)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	want := Claims{
		Issuer:        testIssuer,
		Subject:       subject(testEmail),
		Email:         testEmail,
		EmailVerified: true,
		Audience:      []string{testAud},
		IssuedAt:      testNow,
		Expiry:        testNow.Add(time.Hour),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Verify claims mismatch (-want +got):\n%s", diff)
	}

	// The wire form matters to consumers that read the JSON themselves: aud is a string as in
	// Google's tokens, numbers are epoch seconds, and the header names the key.
	wantHeader := map[string]any{"alg": "RS256", "kid": iss.KeyID(), "typ": "JWT"}
	if diff := cmp.Diff(wantHeader, segment(t, tok, 0)); diff != "" {
		t.Errorf("header mismatch (-want +got):\n%s", diff)
	}
	wantClaims := map[string]any{
		"iss":            testIssuer,
		"aud":            testAud,
		"sub":            subject(testEmail),
		"email":          testEmail,
		"email_verified": true,
		"azp":            testEmail,
		"iat":            float64(testNow.Unix()),
		"exp":            float64(testNow.Add(time.Hour).Unix()),
	}
	if diff := cmp.Diff(wantClaims, segment(t, tok, 1)); diff != "" {
		t.Errorf("claims mismatch (-want +got):\n%s", diff)
	}
}

func TestSubject(t *testing.T) {
	a, b := subject("a@example.com"), subject("b@example.com")
	if !regexp.MustCompile(`^1[0-9]{20}$`).MatchString(a) {
		t.Errorf("subject = %q, want 21 decimal digits", a)
	}
	if a != subject("a@example.com") {
		t.Error("subject is not stable for one email")
	}
	if a == b {
		t.Errorf("two emails share subject %q", a)
	}
}

func TestKeyID(t *testing.T) {
	k1, k2 := testKeys(t)
	a := newTestIssuer(t, testIssuer, k1)
	b := newTestIssuer(t, "https://other.example.com", k1)
	c := newTestIssuer(t, testIssuer, k2)
	if a.KeyID() != b.KeyID() {
		t.Errorf("same key, kids %q and %q; want equal", a.KeyID(), b.KeyID())
	}
	if a.KeyID() == c.KeyID() {
		t.Errorf("different keys share kid %q", a.KeyID())
	}
	if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(a.KeyID()) {
		t.Errorf("kid = %q, want 40 hex digits", a.KeyID())
	}
}

func TestVerifyErrors(t *testing.T) {
	k1, k2 := testKeys(t)
	iss := newTestIssuer(t, testIssuer, k1)
	good := mint(t, iss, testAud, testEmail, testNow)
	otherKey := mint(t, newTestIssuer(t, testIssuer, k2), testAud, testEmail, testNow)
	otherIssuer := mint(t, newTestIssuer(t, "http://127.0.0.1:9999", k1), testAud, testEmail, testNow)

	parts := strings.Split(good, ".")
	sig := []byte(parts[2])
	if mid := len(sig) / 2; sig[mid] == 'A' { // another base64url character, so only the signature is wrong
		sig[mid] = 'B'
	} else {
		sig[mid] = 'A'
	}
	tamperedSig := parts[0] + "." + parts[1] + "." + string(sig)
	payload := segment(t, good, 1)
	payload["email"] = "attacker@example.com"
	raw, _ := json.Marshal(payload)
	tamperedClaims := parts[0] + "." + base64.RawURLEncoding.EncodeToString(raw) + "." + parts[2]

	// A token signed with a shared secret (alg confusion) must not pass for an RS256 one.
	hsSigner, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte("0123456789abcdef0123456789abcdef")},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", iss.KeyID()))
	if err != nil {
		t.Fatal(err)
	}
	hs, err := jwt.Signed(hsSigner).Claims(payload).Serialize()
	if err != nil {
		t.Fatal(err)
	}

	// Signed by another key that claims the issuer's kid: only the signature check can catch it.
	forgedSigner, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: k2, KeyID: iss.KeyID()}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	forged, err := jwt.Signed(forgedSigner).Claims(payload).Serialize()
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		token   string
		aud     string
		now     time.Time
		wantErr error // nil: any error
	}{
		{name: "wrong audience", token: good, aud: "https://other.example.com", now: testNow, wantErr: jwt.ErrInvalidAudience},
		{name: "empty audience", token: good, aud: "", now: testNow},
		{name: "expired", token: good, aud: testAud, now: testNow.Add(time.Hour + time.Minute + time.Second), wantErr: jwt.ErrExpired},
		{name: "issued in the future", token: good, aud: testAud, now: testNow.Add(-2 * time.Minute), wantErr: jwt.ErrIssuedInTheFuture},
		{name: "tampered signature", token: tamperedSig, aud: testAud, now: testNow, wantErr: jose.ErrCryptoFailure},
		{name: "tampered claims", token: tamperedClaims, aud: testAud, now: testNow, wantErr: jose.ErrCryptoFailure},
		{name: "other key", token: otherKey, aud: testAud, now: testNow},
		{name: "other key claiming our kid", token: forged, aud: testAud, now: testNow, wantErr: jose.ErrCryptoFailure},
		{name: "other issuer", token: otherIssuer, aud: testAud, now: testNow, wantErr: jwt.ErrInvalidIssuer},
		{name: "HS256", token: hs, aud: testAud, now: testNow},
		{name: "garbage", token: "not.a.jwt", aud: testAud, now: testNow},
		{name: "empty", token: "", aud: testAud, now: testNow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := iss.Verify(tt.token, tt.aud, tt.now)
			if err == nil {
				t.Fatal("Verify succeeded, want an error")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Verify error = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestVerifyLeeway(t *testing.T) {
	k, _ := testKeys(t)
	iss := newTestIssuer(t, testIssuer, k)
	tok := mint(t, iss, testAud, testEmail, testNow)
	for _, now := range []time.Time{
		testNow.Add(-time.Minute),               // consumer clock a minute behind
		testNow.Add(time.Hour - time.Second),    // just before exp
		testNow.Add(time.Hour + 59*time.Second), // after exp, within leeway
	} {
		if _, err := iss.Verify(tok, testAud, now); err != nil {
			t.Errorf("Verify at iat%+v: %v", now.Sub(testNow), err)
		}
	}
}

func TestMintErrors(t *testing.T) {
	k, _ := testKeys(t)
	iss := newTestIssuer(t, testIssuer, k)
	for _, tt := range []struct{ aud, email string }{{"", testEmail}, {testAud, ""}} {
		if tok, err := iss.Mint(tt.aud, tt.email, testNow); err == nil {
			t.Errorf("Mint(%q, %q) = %q, want an error", tt.aud, tt.email, tok)
		}
	}
}

func TestNewIssuer(t *testing.T) {
	k, _ := testKeys(t)
	for _, url := range []string{"", "127.0.0.1:8124", "/relative", "ftp://example.com", "http://", "http://[::1"} {
		if _, err := NewIssuer(url, k); err == nil {
			t.Errorf("NewIssuer(%q) succeeded, want an error", url)
		}
	}
	broken, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	broken.Primes[0].SetInt64(15) // an inconsistent key must be refused, not used to sign
	if _, err := NewIssuer(testIssuer, broken); err == nil {
		t.Error("NewIssuer with an invalid key succeeded")
	}
}

func TestNewIssuerGeneratesKey(t *testing.T) {
	iss, err := NewIssuer(testIssuer, nil)
	if err != nil {
		t.Fatalf("NewIssuer: %v", err)
	}
	if got := iss.key.N.BitLen(); got != 2048 {
		t.Errorf("generated key has %d bits, want 2048", got)
	}
	tok := mint(t, iss, testAud, testEmail, testNow)
	if _, err := iss.Verify(tok, testAud, testNow); err != nil {
		t.Errorf("Verify: %v", err)
	}
}

func get(t *testing.T, url string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", url, err)
	}
	return resp.StatusCode, resp.Header, body
}

// TestHandlerVerifiesWithGoJose verifies a minted token the way a consumer does: discover the
// JWKS from the issuer, pick the key by kid, and check signature and claims with go-jose alone.
func TestHandlerVerifiesWithGoJose(t *testing.T) {
	k, _ := testKeys(t)
	var handler http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	defer srv.Close()
	iss := newTestIssuer(t, srv.URL, k)
	handler = iss.Handler()

	status, hdr, body := get(t, srv.URL+"/.well-known/openid-configuration")
	if status != http.StatusOK || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("discovery: status %d, Content-Type %q", status, hdr.Get("Content-Type"))
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("discovery: %v", err)
	}
	wantDoc := map[string]any{
		"issuer":                                srv.URL,
		"jwks_uri":                              srv.URL + "/jwks",
		"id_token_signing_alg_values_supported": []any{"RS256"},
		"response_types_supported":              []any{"id_token"},
		"subject_types_supported":               []any{"public"},
		"claims_supported":                      []any{"aud", "azp", "email", "email_verified", "exp", "iat", "iss", "sub"},
	}
	if diff := cmp.Diff(wantDoc, doc); diff != "" {
		t.Errorf("discovery document mismatch (-want +got):\n%s", diff)
	}

	status, hdr, body = get(t, doc["jwks_uri"].(string))
	if status != http.StatusOK || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("jwks: status %d, Content-Type %q", status, hdr.Get("Content-Type"))
	}
	var rawSet struct{ Keys []map[string]any }
	if err := json.Unmarshal(body, &rawSet); err != nil {
		t.Fatalf("jwks: %v", err)
	}
	if len(rawSet.Keys) != 1 {
		t.Fatalf("jwks has %d keys, want 1", len(rawSet.Keys))
	}
	for _, f := range []string{"n", "e"} {
		if _, ok := rawSet.Keys[0][f].(string); !ok {
			t.Errorf("jwk field %q missing", f)
		}
	}
	gotFields := map[string]any{}
	for _, f := range []string{"kty", "alg", "use", "kid"} {
		gotFields[f] = rawSet.Keys[0][f]
	}
	wantFields := map[string]any{"kty": "RSA", "alg": "RS256", "use": "sig", "kid": iss.KeyID()}
	if diff := cmp.Diff(wantFields, gotFields); diff != "" {
		t.Errorf("jwk mismatch (-want +got):\n%s", diff)
	}
	if _, ok := rawSet.Keys[0]["d"]; ok {
		t.Error("jwks publishes the private exponent")
	}

	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		t.Fatalf("jwks as jose.JSONWebKeySet: %v", err)
	}
	now := time.Now()
	tok, err := jwt.ParseSigned(mint(t, iss, testAud, testEmail, now), []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		t.Fatalf("ParseSigned: %v", err)
	}
	keys := set.Key(tok.Headers[0].KeyID)
	if len(keys) != 1 {
		t.Fatalf("jwks has %d keys for kid %q, want 1", len(keys), tok.Headers[0].KeyID)
	}
	var std jwt.Claims
	var extra struct {
		Email         string `json:"email"`
		EmailVerified bool   `json:"email_verified"`
	}
	if err := tok.Claims(keys[0].Key, &std, &extra); err != nil {
		t.Fatalf("verify with JWKS key: %v", err)
	}
	if err := std.Validate(jwt.Expected{Issuer: doc["issuer"].(string), AnyAudience: jwt.Audience{testAud}, Time: now}); err != nil {
		t.Errorf("validate claims: %v", err)
	}
	if extra.Email != testEmail || !extra.EmailVerified {
		t.Errorf("email = %q, verified %v; want %q, true", extra.Email, extra.EmailVerified, testEmail)
	}
}

func TestHandlerPaths(t *testing.T) {
	k, _ := testKeys(t)
	h := newTestIssuer(t, testIssuer, k).Handler()
	tests := []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/.well-known/openid-configuration", http.StatusOK},
		{http.MethodGet, "/jwks", http.StatusOK},
		{http.MethodHead, "/jwks", http.StatusOK},
		{http.MethodGet, "/", http.StatusNotFound},
		{http.MethodGet, "/jwks/extra", http.StatusNotFound},
		{http.MethodGet, "/token", http.StatusNotFound},
		{http.MethodGet, "/.well-known/other", http.StatusNotFound},
		{http.MethodPost, "/jwks", http.StatusMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
			if rec.Code != tt.want {
				t.Errorf("status = %d, want %d", rec.Code, tt.want)
			}
		})
	}
}

func TestDiscoveryTrailingSlash(t *testing.T) {
	k, _ := testKeys(t)
	iss := newTestIssuer(t, "https://tasks.example.com/", k)
	rec := httptest.NewRecorder()
	iss.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/.well-known/openid-configuration", nil))
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	want := struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}{"https://tasks.example.com/", "https://tasks.example.com/jwks"}
	if doc != want {
		t.Errorf("discovery = %+v, want %+v", doc, want)
	}
}

func TestLoadOrCreateKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", "oidc-key.pem")
	created, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode = %v, want 0600", fi.Mode().Perm())
	}
	loaded, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if !created.Equal(loaded) {
		t.Fatal("loaded key differs from the created one")
	}

	// A token minted before a restart verifies after it.
	tok := mint(t, newTestIssuer(t, testIssuer, created), testAud, testEmail, testNow)
	if _, err := newTestIssuer(t, testIssuer, loaded).Verify(tok, testAud, testNow); err != nil {
		t.Errorf("verify after restart: %v", err)
	}
}

func TestLoadOrCreateKeyDanglingSymlink(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "key.pem")
	if err := os.Symlink(filepath.Join(dir, "missing"), path); err != nil {
		t.Skipf("symlink: %v", err)
	}
	if _, err := LoadOrCreateKey(path); err == nil {
		t.Error("LoadOrCreateKey through a dangling symlink succeeded, want an error")
	}
}

func TestLoadKeyFormats(t *testing.T) {
	k, _ := testKeys(t)
	pkcs8, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, err := x509.MarshalPKCS8PrivateKey(ec)
	if err != nil {
		t.Fatal(err)
	}
	pemOf := func(typ string, der []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}) }
	tests := []struct {
		name    string
		data    []byte
		wantErr bool
	}{
		{name: "PKCS#1", data: pemOf("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(k))},
		{name: "PKCS#8", data: pemOf("PRIVATE KEY", pkcs8)},
		{name: "after a certificate block", data: append(pemOf("CERTIFICATE", []byte{1, 2, 3}), pemOf("PRIVATE KEY", pkcs8)...)},
		{name: "PKCS#8 EC key", data: pemOf("PRIVATE KEY", ecDER), wantErr: true},
		{name: "corrupt DER", data: pemOf("RSA PRIVATE KEY", []byte{1, 2, 3}), wantErr: true},
		{name: "not PEM", data: []byte("hello"), wantErr: true},
		{name: "empty", data: nil, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "key.pem")
			if err := os.WriteFile(path, tt.data, 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := LoadOrCreateKey(path)
			if tt.wantErr {
				if err == nil {
					t.Fatal("LoadOrCreateKey succeeded, want an error")
				}
				// An unreadable key must not be replaced: tokens in flight were signed with it.
				if after, _ := os.ReadFile(path); string(after) != string(tt.data) {
					t.Error("LoadOrCreateKey overwrote an unparsable key file")
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadOrCreateKey: %v", err)
			}
			if !got.Equal(k) {
				t.Error("loaded key differs")
			}
		})
	}
}

// TestConcurrentMint runs under the race detector: dispatch workers mint from one Issuer.
func TestConcurrentMint(t *testing.T) {
	k, _ := testKeys(t)
	iss := newTestIssuer(t, testIssuer, k)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for n := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			aud := testAud + "?n=" + string(rune('0'+n))
			for range 2 {
				tok, err := iss.Mint(aud, testEmail, testNow)
				if err == nil {
					_, err = iss.Verify(tok, aud, testNow)
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// Token reuses a token for the same audience and email within TokenReuse, and mints a new one
// after it, for another audience, or when the clock went back.
func TestTokenReuse(t *testing.T) {
	k, _ := testKeys(t)
	iss := newTestIssuer(t, testIssuer, k)
	tok := func(aud string, at time.Time) string {
		t.Helper()
		s, err := iss.Token(aud, testEmail, at)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := iss.Verify(s, aud, at); err != nil {
			t.Fatalf("token at %s does not verify: %v", at, err)
		}
		return s
	}
	first := tok(testAud, testNow)
	if got := tok(testAud, testNow.Add(TokenReuse-time.Second)); got != first {
		t.Error("token within TokenReuse was not reused")
	}
	if got := tok(testAud+"/other", testNow); got == first {
		t.Error("another audience got the same token")
	}
	if got := tok(testAud, testNow.Add(-time.Minute)); got == first {
		t.Error("a token issued in the future was reused")
	}
	later := testNow.Add(TokenReuse)
	fresh := tok(testAud, later)
	c, err := iss.Verify(fresh, testAud, later)
	if err != nil {
		t.Fatal(err)
	}
	if !c.IssuedAt.Equal(later) {
		t.Errorf("token after TokenReuse issued at %s, want %s", c.IssuedAt, later)
	}
}
