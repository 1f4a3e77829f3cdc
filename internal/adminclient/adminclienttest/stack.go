// Package adminclienttest fakes the services' operator APIs for the tests of adminclient and of
// the programs built on it (tools/spanmartctl, services/console): one httptest server per roster
// service answering canned JSON in the shapes the services write, recording every request, and a
// Tokens that says which audience each token was minted for. Scenario installs a coherent set of
// answers (an order traced across the services, an outbox with a quarantined event, a consumer
// with dead letters); tests replace single routes with Reply or Handle.
package adminclienttest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/spanmart/spanmart/internal/topology"
)

// Request is a request a fake service received.
type Request struct {
	Service string
	Method  string
	Path    string
	Query   url.Values
	Header  http.Header
	Body    string
}

// Stack is the fake services, one per roster service (the console included, which has no
// routes). Create it with Start; it is closed when the test ends.
type Stack struct {
	mu       sync.Mutex
	servers  map[string]*httptest.Server
	routes   map[string]map[string]http.HandlerFunc // service → "METHOD /path" → handler
	requests []Request
}

// Start starts a fake of every roster service.
func Start(t testing.TB) *Stack {
	t.Helper()
	s := &Stack{servers: map[string]*httptest.Server{}, routes: map[string]map[string]http.HandlerFunc{}}
	for _, name := range topology.Names() {
		s.routes[name] = map[string]http.HandlerFunc{}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serve(name, w, r) }))
		s.servers[name] = srv
		t.Cleanup(srv.Close)
	}
	return s
}

// URLs are the base URLs of every fake, by roster name (adminclient.Config.URLs).
func (s *Stack) URLs() map[string]string {
	out := map[string]string{}
	for name, srv := range s.servers {
		out[name] = srv.URL
	}
	return out
}

// URL is the base URL of service's fake.
func (s *Stack) URL(service string) string { return s.servers[service].URL }

// Handle makes service answer route ("GET /admin/status": a method, a space and an exact path;
// the query is the handler's) with h, replacing an earlier handler of the route.
func (s *Stack) Handle(service, route string, h http.HandlerFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.routes[service][route] = h
}

// Reply makes service answer route with status and body (JSON, or problem+json for a status of
// 400 and above).
func (s *Stack) Reply(service, route string, status int, body string) {
	s.Handle(service, route, func(w http.ResponseWriter, r *http.Request) { write(w, status, body) })
}

// Refuse makes service answer route as the operators' guard does: 401 or 403, problem+json.
func (s *Stack) Refuse(service, route string, status int) {
	detail := "the caller is not an operator of this service"
	if status == http.StatusUnauthorized {
		detail = "a valid ID token of an operator is required"
	}
	s.Handle(service, route, func(w http.ResponseWriter, r *http.Request) {
		if status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		}
		write(w, status, Problem(status, detail, r.URL.Path))
	})
}

// Down closes service's fake: its requests are refused at the TCP level, as for a service that is
// not running.
func (s *Stack) Down(service string) { s.servers[service].Close() }

// Requests returns what service received, in order ("" for every service).
func (s *Stack) Requests(service string) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for _, r := range s.requests {
		if service == "" || r.Service == service {
			out = append(out, r)
		}
	}
	return out
}

// Posts returns the POST requests service received to path.
func (s *Stack) Posts(service, path string) []Request {
	var out []Request
	for _, r := range s.Requests(service) {
		if r.Method == http.MethodPost && r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

func (s *Stack) serve(service string, w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.requests = append(s.requests, Request{Service: service, Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(),
		Header: r.Header.Clone(), Body: string(body)})
	h := s.routes[service][r.Method+" "+r.URL.Path]
	s.mu.Unlock()
	if h == nil {
		write(w, http.StatusNotFound, Problem(http.StatusNotFound, "no route "+r.Method+" "+r.URL.Path+" in the fake "+service, r.URL.Path))
		return
	}
	r.Body = io.NopCloser(strings.NewReader(string(body)))
	h(w, r)
}

// write answers status and body, as application/json, or application/problem+json from 400 on.
func write(w http.ResponseWriter, status int, body string) {
	ct := "application/json"
	if status >= 400 {
		ct = "application/problem+json"
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// Problem is the problem+json body pkg/platform writes for status and detail.
func Problem(status int, detail, instance string) string {
	m := map[string]any{"type": "about:blank", "title": http.StatusText(status), "status": status}
	if detail != "" {
		m["detail"] = detail
	}
	if instance != "" {
		m["instance"] = instance
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// TokenPrefix starts every token Tokens mints: the token for audience A is TokenPrefix + A.
const TokenPrefix = "test-token-for:"

// Tokens is an adminclient.Tokens that mints TokenPrefix + audience and records the audiences
// asked for.
type Tokens struct {
	mu        sync.Mutex
	audiences []string
}

// Token implements adminclient.Tokens.
func (t *Tokens) Token(_ context.Context, audience string) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.audiences = append(t.audiences, audience)
	return TokenPrefix + audience, nil
}

// Audiences returns the distinct audiences asked for, sorted.
func (t *Tokens) Audiences() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := slices.Clone(t.audiences)
	slices.Sort(out)
	return slices.Compact(out)
}

// TokenClaims decodes the e-mail and the audience of a JWT (an Authorization header's, with or
// without "Bearer ") without verifying it: the services verify, a test of the client only checks
// whose token went where.
func TokenClaims(t testing.TB, token string) (email, audience string) {
	t.Helper()
	parts := strings.Split(strings.TrimPrefix(token, "Bearer "), ".")
	if len(parts) != 3 {
		t.Fatalf("token %q is not a JWT", token)
	}
	data, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Email string `json:"email"`
		Aud   string `json:"aud"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	return c.Email, c.Aud
}
