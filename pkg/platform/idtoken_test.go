package platform_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/compute/metadata"
	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/emulator/tasksemu"
	"github.com/spanmart/spanmart/pkg/platform"
)

const relayAccount = "relay@x.iam.gserviceaccount.com"

// metadataServer is the Cloud Tasks emulator acting as the metadata server, behind a proxy that
// counts identity requests, so tests see how often a source fetches.
type metadataServer struct {
	emu     *tasksemu.Server
	fetches atomic.Int64
}

// startMetadata starts the emulator with relayAccount as its default service account and points
// GCE_METADATA_HOST at the counting proxy in front of it.
func startMetadata(t *testing.T) *metadataServer {
	t.Helper()
	emu, err := tasksemu.Start(context.Background(), tasksemu.Options{ServiceAccount: relayAccount})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emu.Close() })
	m := &metadataServer{emu: emu}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: emu.HTTPAddr()})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/identity") {
			m.fetches.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	t.Setenv("GCE_METADATA_HOST", front.Listener.Addr().String())
	return m
}

// stubMetadata points GCE_METADATA_HOST at handler.
func stubMetadata(t *testing.T, handler http.HandlerFunc) {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	t.Setenv("GCE_METADATA_HOST", srv.Listener.Addr().String())
}

type verifiedClaims struct {
	Email         string
	EmailVerified bool
	Expiry        time.Time
}

// verifyIDToken checks token as the called service would: RS256 with the key the issuer's
// discovery document and JWKS publish, iss, aud and exp.
func verifyIDToken(t *testing.T, issuer, token, audience string) verifiedClaims {
	t.Helper()
	var disc struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(get(t, issuer+"/.well-known/openid-configuration", nil).body, &disc); err != nil {
		t.Fatal(err)
	}
	var keys jose.JSONWebKeySet
	if err := json.Unmarshal(get(t, disc.JWKSURI, nil).body, &keys); err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		t.Fatalf("token %q: %v", token, err)
	}
	key := keys.Key(tok.Headers[0].KeyID)
	if len(key) != 1 {
		t.Fatalf("the JWKS has no key %q", tok.Headers[0].KeyID)
	}
	var c struct {
		jwt.Claims
		Email         string `json:"email"`
		EmailVerified bool   `json:"email_verified"`
	}
	if err := tok.Claims(key[0].Key, &c); err != nil {
		t.Fatalf("signature: %v", err)
	}
	if err := c.ValidateWithLeeway(jwt.Expected{Issuer: issuer, AnyAudience: jwt.Audience{audience}, Time: time.Now()}, time.Minute); err != nil {
		t.Fatalf("claims for audience %q: %v", audience, err)
	}
	return verifiedClaims{Email: c.Email, EmailVerified: c.EmailVerified, Expiry: c.Expiry.Time()}
}

func TestIDTokenSource(t *testing.T) {
	m := startMetadata(t)
	src := platform.NewIDTokenSource(nil)
	ctx := context.Background()
	const orders, payments = "https://orders-abc-uc.a.run.app", "https://payments-abc-uc.a.run.app"

	tok, err := src.Token(ctx, orders)
	if err != nil {
		t.Fatal(err)
	}
	got := verifyIDToken(t, m.emu.Issuer(), tok, orders)
	want := verifiedClaims{Email: relayAccount, EmailVerified: true, Expiry: got.Expiry}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("claims (-want +got):\n%s", diff)
	}

	again, err := src.Token(ctx, orders)
	if err != nil {
		t.Fatal(err)
	}
	if again != tok {
		t.Errorf("second Token = %q, want the cached %q", again, tok)
	}
	if n := m.fetches.Load(); n != 1 {
		t.Errorf("%d identity requests for two calls, want 1", n)
	}

	// Each audience has its own token.
	other, err := src.Token(ctx, payments)
	if err != nil {
		t.Fatal(err)
	}
	verifyIDToken(t, m.emu.Issuer(), other, payments)
	if n := m.fetches.Load(); n != 2 {
		t.Errorf("%d identity requests after a second audience, want 2", n)
	}
}

// WithServiceAccount asks the metadata server for the named account's tokens (the local stack,
// where one emulator answers for every service); "" keeps the default account.
func TestIDTokenSourceWithServiceAccount(t *testing.T) {
	m := startMetadata(t)
	const aud, orders = "https://payments-abc-uc.a.run.app", "orders@x.iam.gserviceaccount.com"
	for _, tt := range []struct {
		account string
		want    string
	}{
		{orders, orders},
		{"", relayAccount},
	} {
		tok, err := platform.NewIDTokenSource(nil, platform.WithServiceAccount(tt.account)).Token(context.Background(), aud)
		if err != nil {
			t.Fatal(err)
		}
		if got := verifyIDToken(t, m.emu.Issuer(), tok, aud).Email; got != tt.want {
			t.Errorf("WithServiceAccount(%q): token of %q, want %q", tt.account, got, tt.want)
		}
	}
}

// A cached token is used until IDTokenRefreshMargin before its exp and fetched again from then
// on.
func TestIDTokenSourceRefreshesBeforeExpiry(t *testing.T) {
	m := startMetadata(t)
	src := platform.NewIDTokenSource(nil)
	var mu sync.Mutex
	now := time.Now()
	platform.SetIDTokenClock(src, func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	})
	setNow := func(t time.Time) {
		mu.Lock()
		now = t
		mu.Unlock()
	}
	ctx := context.Background()
	const aud = "https://orders-abc-uc.a.run.app"
	tok, err := src.Token(ctx, aud)
	if err != nil {
		t.Fatal(err)
	}
	exp := verifyIDToken(t, m.emu.Issuer(), tok, aud).Expiry
	refreshAt := exp.Add(-platform.IDTokenRefreshMargin)

	for _, step := range []struct {
		at      time.Time
		fetches int64
	}{
		{refreshAt.Add(-time.Second), 1}, // still cached
		{refreshAt, 2},                   // due: fetched again
	} {
		setNow(step.at)
		// The emulator itself hands out one token for a few minutes, so the string may be the
		// same; the identity requests show whether the source asked for a new one.
		if _, err := src.Token(ctx, aud); err != nil {
			t.Fatal(err)
		}
		if n := m.fetches.Load(); n != step.fetches {
			t.Errorf("at exp-%v: %d identity requests, want %d", exp.Sub(step.at), n, step.fetches)
		}
	}
}

// Concurrent callers for one audience share one fetch.
func TestIDTokenSourceConcurrent(t *testing.T) {
	m := startMetadata(t)
	src := platform.NewIDTokenSource(nil)
	const aud = "https://orders-abc-uc.a.run.app"
	const callers = 16
	tokens := make([]string, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() { tokens[i], errs[i] = src.Token(context.Background(), aud) })
	}
	wg.Wait()
	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if tokens[i] != tokens[0] {
			t.Errorf("caller %d got another token than caller 0", i)
		}
	}
	if n := m.fetches.Load(); n != 1 {
		t.Errorf("%d identity requests for %d concurrent callers, want 1", n, callers)
	}
}

func TestIDTokenSourceErrors(t *testing.T) {
	const aud = "https://orders-abc-uc.a.run.app"
	t.Run("empty audience", func(t *testing.T) {
		if _, err := platform.NewIDTokenSource(nil).Token(context.Background(), ""); err == nil {
			t.Error("Token with an empty audience succeeded")
		}
	})
	t.Run("metadata server refuses", func(t *testing.T) {
		stubMetadata(t, func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "no such account", http.StatusNotFound)
		})
		_, err := platform.NewIDTokenSource(nil).Token(context.Background(), aud)
		var notDefined metadata.NotDefinedError
		if !errors.As(err, &notDefined) || !strings.HasPrefix(err.Error(), "id token for "+aud+": ") {
			t.Errorf("err = %v, want a metadata.NotDefinedError prefixed with the audience", err)
		}
	})
	t.Run("not a JWT", func(t *testing.T) {
		stubMetadata(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "not-a-token") })
		_, err := platform.NewIDTokenSource(nil).Token(context.Background(), aud)
		if want := "id token for " + aud + ": token from the metadata server: not a JWT"; err == nil || err.Error() != want {
			t.Errorf("err = %v, want %q", err, want)
		}
	})
	// A caller whose context ends stops waiting for another caller's fetch.
	t.Run("context ends while another caller fetches", func(t *testing.T) {
		entered, release := make(chan struct{}), make(chan struct{})
		stubMetadata(t, func(w http.ResponseWriter, r *http.Request) {
			close(entered)
			<-release
			http.Error(w, "gone", http.StatusNotFound)
		})
		src := platform.NewIDTokenSource(nil)
		first := make(chan error, 1)
		go func() {
			_, err := src.Token(context.Background(), aud)
			first <- err
		}()
		<-entered
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := src.Token(ctx, aud); !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
		close(release)
		if err := <-first; err == nil {
			t.Error("the first caller got a token from a 404")
		}
	})
}

// Client sends each request with the source's token for the audience and leaves the caller's
// request unchanged.
func TestIDTokenClient(t *testing.T) {
	m := startMetadata(t)
	src := platform.NewIDTokenSource(nil)
	var gotAuth atomic.Value
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth.Store(r.Header.Get("Authorization"))
	}))
	defer peer.Close()

	req, err := http.NewRequest(http.MethodPost, peer.URL+"/v1/orders", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := src.Client(peer.URL).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	tok, ok := strings.CutPrefix(gotAuth.Load().(string), "Bearer ")
	if !ok {
		t.Fatalf("Authorization = %q, want a bearer token", gotAuth.Load())
	}
	if got := verifyIDToken(t, m.emu.Issuer(), tok, peer.URL); got.Email != relayAccount {
		t.Errorf("email = %q, want %q", got.Email, relayAccount)
	}
	if h := req.Header.Get("Authorization"); h != "" {
		t.Errorf("the caller's request was changed: Authorization = %q", h)
	}
}

// When no token can be had the request is not sent, and its body is closed.
func TestIDTokenClientWithoutToken(t *testing.T) {
	stubMetadata(t, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "gone", http.StatusNotFound) })
	var sent atomic.Bool
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { sent.Store(true) }))
	defer peer.Close()
	body := &closeRecorder{Reader: strings.NewReader("{}")}
	req, err := http.NewRequest(http.MethodPost, peer.URL, body)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := platform.NewIDTokenSource(nil).Client(peer.URL).Do(req); err == nil {
		t.Fatal("Do succeeded without a token")
	}
	if sent.Load() {
		t.Error("the request reached the peer without a token")
	}
	if !body.closed.Load() {
		t.Error("the request body was not closed")
	}
}

type closeRecorder struct {
	io.Reader
	closed atomic.Bool
}

func (c *closeRecorder) Close() error {
	c.closed.Store(true)
	return nil
}
