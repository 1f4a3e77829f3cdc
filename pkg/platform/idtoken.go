package platform

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/compute/metadata"
)

// idTokenRefreshMargin is how long before its exp a cached ID token is replaced. Google's ID
// tokens live an hour; sending one with minutes left keeps it valid across the receiver's clock
// skew and a request that waits in a queue or is retried.
const idTokenRefreshMargin = 5 * time.Minute

// IDTokenSource gets Google ID tokens for the service's own (default) service account from the
// metadata server, for calling another Cloud Run service that requires authentication; the
// audience is that service's URL. Tokens are cached per audience until five minutes before they
// expire. Locally, GCE_METADATA_HOST pointed at the Cloud Tasks emulator's HTTP port makes it
// fetch tokens that emulator signs (see emulator/tasksemu/README.md); WithServiceAccount names
// the account, since there every service shares the one emulator and its default account.
//
// Create one with NewIDTokenSource. It is safe for concurrent use; concurrent callers for one
// audience share one fetch. It keeps one token per audience it was asked for, so use it for a
// fixed set of peers.
type IDTokenSource struct {
	md      *metadata.Client
	now     func() time.Time
	account string // the metadata path segment: "default" or an account's e-mail

	mu     sync.Mutex
	tokens map[string]*cachedIDToken // by audience
}

type cachedIDToken struct {
	// lock is held (a value is in it) while the token is read or fetched; a channel rather than
	// a mutex so that a caller whose context ends stops waiting for another caller's fetch.
	lock      chan struct{}
	token     string
	refreshAt time.Time
}

// IDTokenOption configures an IDTokenSource.
type IDTokenOption func(*IDTokenSource)

// WithServiceAccount makes the source ask for the tokens of account (a service account's e-mail)
// rather than of the instance's default account; "" keeps the default. On Cloud Run the metadata
// server knows only the service's own account (by e-mail too), so this is for the local stack,
// where one emulator answers for every account and each service names its own.
func WithServiceAccount(account string) IDTokenOption {
	return func(s *IDTokenSource) {
		if account != "" {
			s.account = account
		}
	}
}

// NewIDTokenSource returns a source that asks the metadata server through hc; nil means the
// metadata client's own HTTP client (with its timeouts).
func NewIDTokenSource(hc *http.Client, opts ...IDTokenOption) *IDTokenSource {
	s := &IDTokenSource{md: metadata.NewClient(hc), now: time.Now, account: "default", tokens: map[string]*cachedIDToken{}}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Token returns an ID token whose aud is audience, fetching a new one when none is cached or
// the cached one expires within five minutes. The token is not verified here: the
// service it is sent to verifies it.
func (s *IDTokenSource) Token(ctx context.Context, audience string) (string, error) {
	if audience == "" {
		return "", errors.New("id token: empty audience")
	}
	s.mu.Lock()
	c, ok := s.tokens[audience]
	if !ok {
		c = &cachedIDToken{lock: make(chan struct{}, 1)}
		s.tokens[audience] = c
	}
	s.mu.Unlock()

	select {
	case c.lock <- struct{}{}:
	case <-ctx.Done():
		return "", fmt.Errorf("id token for %s: %w", audience, ctx.Err())
	}
	defer func() { <-c.lock }()
	if c.token != "" && s.now().Before(c.refreshAt) {
		return c.token, nil
	}
	tok, err := s.md.GetWithContext(ctx, "instance/service-accounts/"+url.PathEscape(s.account)+"/identity?audience="+url.QueryEscape(audience)+"&format=full")
	if err != nil {
		return "", fmt.Errorf("id token for %s: %w", audience, err)
	}
	tok = strings.TrimSpace(tok)
	exp, err := jwtExpiry(tok)
	if err != nil {
		return "", fmt.Errorf("id token for %s: token from the metadata server: %w", audience, err)
	}
	c.token, c.refreshAt = tok, exp.Add(-idTokenRefreshMargin)
	return tok, nil
}

// jwtExpiry returns the exp claim of a JWT without verifying its signature.
func jwtExpiry(token string) (time.Time, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, errors.New("not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, fmt.Errorf("JWT payload: %w", err)
	}
	var claims struct {
		Exp *float64 `json:"exp"` // NumericDate: seconds, which RFC 7519 allows to be fractional
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return time.Time{}, fmt.Errorf("JWT payload: %w", err)
	}
	if claims.Exp == nil {
		return time.Time{}, errors.New("JWT has no exp claim")
	}
	return time.Unix(0, int64(*claims.Exp*float64(time.Second))), nil
}

// Transport returns a RoundTripper that sends each request through base (nil means
// http.DefaultTransport) with Authorization: Bearer and an ID token for audience.
func (s *IDTokenSource) Transport(base http.RoundTripper, audience string) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &idTokenTransport{src: s, audience: audience, base: base}
}

// Client returns an HTTP client for calling the service at audience:
//
//	orders := tokens.Client(cfg.OrdersURL)
//	resp, err := orders.Do(req) // req's context bounds the token fetch too
func (s *IDTokenSource) Client(audience string) *http.Client {
	return &http.Client{Transport: s.Transport(nil, audience)}
}

type idTokenTransport struct {
	src      *IDTokenSource
	audience string
	base     http.RoundTripper
}

func (t *idTokenTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := t.src.Token(req.Context(), t.audience)
	if err != nil {
		// A RoundTripper closes the request body even when it fails.
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	// A RoundTripper must not modify the caller's request.
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+tok)
	return t.base.RoundTrip(req)
}
