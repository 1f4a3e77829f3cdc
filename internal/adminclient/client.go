package adminclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spanmart/spanmart/internal/topology"
	"github.com/spanmart/spanmart/pkg/outboxlib"
)

// HeaderOnBehalfOf names the operator a delegate acts for (pkg/outboxlib, the services' guard).
const HeaderOnBehalfOf = outboxlib.HeaderOnBehalfOf

// DefaultTimeout bounds one request when Config.HTTPClient is nil. The reconciliation asks the
// peers about up to a thousand orders, so it is generous; callers bound their calls with ctx.
const DefaultTimeout = time.Minute

// maxBody bounds an answer: a thousand dead letters with their bodies fit.
const maxBody = 32 << 20

var (
	// ErrUnauthenticated matches an *Error with status 401: no valid ID token (expired, another
	// audience, another issuer).
	ErrUnauthenticated = errors.New("adminclient: 401 unauthenticated")
	// ErrForbidden matches an *Error with status 403: the account is not an operator of the
	// service (or sent X-Spanmart-On-Behalf-Of without being a delegate).
	ErrForbidden = errors.New("adminclient: 403 forbidden")
	// ErrNotFound matches an *Error with status 404, and is returned by DeadLetter for an event
	// the consumer has no dead letter of.
	ErrNotFound = errors.New("adminclient: 404 not found")
	// ErrConflict matches an *Error with status 409: a replay the service refused as things stand
	// (already replayed, its predecessor not applied yet, no handler for its type).
	ErrConflict = errors.New("adminclient: 409 conflict")
	// ErrNoURL is returned for a service Config.URLs has no URL for.
	ErrNoURL = errors.New("adminclient: no URL configured for the service")
	// ErrUnknownService is returned for a name that is not a roster service, or not a consumer
	// where a consumer is needed.
	ErrUnknownService = errors.New("adminclient: unknown service")
	// ErrNoReason is returned by the replays for a blank reason; nothing is sent.
	ErrNoReason = errors.New("adminclient: a replay needs a reason")
)

// Error is an answer other than 2xx. The services answer problem+json (RFC 9457); Type, Title,
// Detail and Extensions are its members when the body is one, Body is the start of the body
// otherwise.
type Error struct {
	Service    string         `json:"service"`
	Method     string         `json:"method"`
	Path       string         `json:"path"` // path and query of the request
	StatusCode int            `json:"status"`
	Type       string         `json:"type,omitempty"`
	Title      string         `json:"title,omitempty"`
	Detail     string         `json:"detail,omitempty"`
	Extensions map[string]any `json:"extensions,omitempty"` // other members, e.g. "errors"
	Body       string         `json:"body,omitempty"`
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%s: %s %s: %d %s", e.Service, e.Method, e.Path, e.StatusCode, http.StatusText(e.StatusCode))
	switch {
	case e.Detail != "":
		msg += ": " + e.Detail
	case e.Body != "":
		msg += ": " + e.Body
	}
	return msg
}

// Is matches the sentinel of the status: ErrUnauthenticated, ErrForbidden, ErrNotFound,
// ErrConflict.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrUnauthenticated:
		return e.StatusCode == http.StatusUnauthorized
	case ErrForbidden:
		return e.StatusCode == http.StatusForbidden
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	case ErrConflict:
		return e.StatusCode == http.StatusConflict
	}
	return false
}

// Config configures a Client.
type Config struct {
	// URLs are the services' base URLs by roster name (topology.Orders, ..., topology.Relay),
	// e.g. "http://127.0.0.1:8082" or "https://fulfillment-123.asia-northeast1.run.app". Each is
	// also the audience of the ID tokens sent to it. A service left out is not called: its
	// methods return ErrNoURL, and Overview and Trace report it as a gap.
	URLs map[string]string
	// Tokens mints the ID tokens (required).
	Tokens Tokens
	// OnBehalfOf, when set, is sent as X-Spanmart-On-Behalf-Of on every request: the operator a
	// delegate (the console) acts for. WithOnBehalfOf overrides it per request.
	OnBehalfOf string
	// HTTPClient sends the requests; nil means a client with DefaultTimeout.
	HTTPClient *http.Client
}

// Client calls the operator APIs. Create one with New; it is safe for concurrent use.
type Client struct {
	urls       map[string]string
	tokens     Tokens
	onBehalfOf string
	hc         *http.Client
}

// New returns a client for cfg. Every URL must be an absolute http or https URL of a roster
// service (a trailing slash is dropped); Tokens is required.
func New(cfg Config) (*Client, error) {
	if cfg.Tokens == nil {
		return nil, errors.New("adminclient: Config.Tokens is required")
	}
	c := &Client{urls: map[string]string{}, tokens: cfg.Tokens, onBehalfOf: cfg.OnBehalfOf, hc: cfg.HTTPClient}
	if c.hc == nil {
		c.hc = &http.Client{Timeout: DefaultTimeout}
	}
	var problems []string
	for name, raw := range cfg.URLs {
		if _, ok := topology.Lookup(name); !ok {
			problems = append(problems, fmt.Sprintf("%q is not a service (want one of %s)", name, strings.Join(topology.Names(), ", ")))
			continue
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			problems = append(problems, fmt.Sprintf("%s: %q is not an http(s) base URL", name, raw))
			continue
		}
		c.urls[name] = strings.TrimSuffix(raw, "/")
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("adminclient: %s", strings.Join(problems, "; "))
	}
	return c, nil
}

// URL returns the base URL configured for service.
func (c *Client) URL(service string) (string, bool) {
	u, ok := c.urls[service]
	return u, ok
}

// Services returns the configured services, in the roster's order.
func (c *Client) Services() []string {
	var out []string
	for _, name := range topology.Names() {
		if _, ok := c.urls[name]; ok {
			out = append(out, name)
		}
	}
	return out
}

// Consumers returns the configured consumers, in the roster's order.
func (c *Client) Consumers() []string {
	var out []string
	for _, s := range topology.Consumers() {
		if _, ok := c.urls[s.Name]; ok {
			out = append(out, s.Name)
		}
	}
	return out
}

type onBehalfOfKey struct{}

// WithOnBehalfOf returns a context whose requests name operator in X-Spanmart-On-Behalf-Of,
// instead of Config.OnBehalfOf: a delegate serving several operators names each one per request.
func WithOnBehalfOf(ctx context.Context, operator string) context.Context {
	return context.WithValue(ctx, onBehalfOfKey{}, operator)
}

func (c *Client) onBehalfOfFor(ctx context.Context) string {
	if v, ok := ctx.Value(onBehalfOfKey{}).(string); ok && v != "" {
		return v
	}
	return c.onBehalfOf
}

// request is one call.
type request struct {
	service string
	method  string
	path    string     // absolute path, already escaped
	query   url.Values // nil: none
	body    any        // JSON-encoded when not nil
}

// do sends r and decodes a 2xx answer into out (unless out is nil).
func (c *Client) do(ctx context.Context, r request, out any) error {
	base, ok := c.urls[r.service]
	if !ok {
		if _, known := topology.Lookup(r.service); !known {
			return fmt.Errorf("%w: %q", ErrUnknownService, r.service)
		}
		return fmt.Errorf("%s: %w", r.service, ErrNoURL)
	}
	target := r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	var body io.Reader
	if r.body != nil {
		data, err := json.Marshal(r.body)
		if err != nil {
			return fmt.Errorf("%s: %s %s: %w", r.service, r.method, target, err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, base+target, body)
	if err != nil {
		return fmt.Errorf("%s: %s %s: %w", r.service, r.method, target, err)
	}
	req.Header.Set("Accept", "application/json")
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	tok, err := c.tokens.Token(ctx, base)
	if err != nil {
		return fmt.Errorf("%s: %s %s: ID token for %s: %w", r.service, r.method, target, base, err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	if who := c.onBehalfOfFor(ctx); who != "" {
		req.Header.Set(HeaderOnBehalfOf, who)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %s %s: %w", r.service, r.method, target, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return fmt.Errorf("%s: %s %s: reading the answer: %w", r.service, r.method, target, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return errorOf(r.service, r.method, target, resp, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s: %s %s: the answer does not decode: %w", r.service, r.method, target, err)
	}
	return nil
}

// errorOf reads a problem+json answer (or any other) into an *Error.
func errorOf(service, method, target string, resp *http.Response, data []byte) *Error {
	e := &Error{Service: service, Method: method, Path: target, StatusCode: resp.StatusCode}
	var members map[string]any
	if json.Unmarshal(data, &members) == nil && members != nil {
		e.Type, _ = members["type"].(string)
		e.Title, _ = members["title"].(string)
		e.Detail, _ = members["detail"].(string)
		for k, v := range members {
			switch k {
			case "type", "title", "detail", "status", "instance":
				continue
			}
			if e.Extensions == nil {
				e.Extensions = map[string]any{}
			}
			e.Extensions[k] = v
		}
		if e.Type != "" || e.Title != "" || e.Detail != "" {
			return e
		}
	}
	e.Extensions = nil
	e.Body = snippet(data)
	return e
}

// snippet is the start of a body, for an error message.
func snippet(b []byte) string {
	const n = 300
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}

func checkReason(reason string) error {
	if strings.TrimSpace(reason) == "" {
		return ErrNoReason
	}
	return nil
}

// consumerName checks that name is a roster consumer.
func consumerName(name string) error {
	s, ok := topology.Lookup(name)
	if !ok || !s.Consumer() {
		var names []string
		for _, c := range topology.Consumers() {
			names = append(names, c.Name)
		}
		return fmt.Errorf("%w: %q is not a consumer (want one of %s)", ErrUnknownService, name, strings.Join(names, ", "))
	}
	return nil
}
