package adminclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/internal/adminclient"
	"github.com/spanmart/spanmart/internal/adminclient/adminclienttest"
	"github.com/spanmart/spanmart/internal/topology"
)

const operator = "operator@spanmart-local.iam.gserviceaccount.com"

// newClient returns a client of a fake stack with the scenario installed, and the stack and the
// tokens it minted.
func newClient(t *testing.T, cfg adminclient.Config) (*adminclient.Client, *adminclienttest.Stack, *adminclienttest.Tokens) {
	t.Helper()
	stack := adminclienttest.Start(t)
	stack.Scenario()
	tokens := &adminclienttest.Tokens{}
	if cfg.URLs == nil {
		cfg.URLs = stack.URLs()
	}
	if cfg.Tokens == nil {
		cfg.Tokens = tokens
	}
	c, err := adminclient.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, stack, tokens
}

// Every call carries a bearer token minted for the called service's base URL, the on-behalf-of
// header when one is configured (or set on the context), Accept: application/json, and a replay's
// reason as its JSON body.
func TestRequestHeaders(t *testing.T) {
	ctx := context.Background()
	c, stack, tokens := newClient(t, adminclient.Config{OnBehalfOf: operator})
	calls := []struct {
		service string
		call    func(ctx context.Context) error
	}{
		{topology.Relay, func(ctx context.Context) error { _, err := c.OutboxStatus(ctx); return err }},
		{topology.Relay, func(ctx context.Context) error { _, err := c.Quarantined(ctx); return err }},
		{topology.Relay, func(ctx context.Context) error {
			_, err := c.AggregateEvents(ctx, "order", adminclienttest.OrderID)
			return err
		}},
		{topology.Relay, func(ctx context.Context) error {
			_, err := c.ReplayOutboxEvent(ctx, topology.Gateway, adminclienttest.EventQuarantined, "task size fixed")
			return err
		}},
		{topology.Relay, func(ctx context.Context) error { _, err := c.Ledger(ctx, true); return err }},
		{topology.Relay, func(ctx context.Context) error { _, err := c.AuditLedger(ctx); return err }},
		{topology.Fulfillment, func(ctx context.Context) error { _, err := c.ConsumerStatus(ctx, topology.Fulfillment); return err }},
		{topology.Fulfillment, func(ctx context.Context) error {
			_, err := c.DeadLetters(ctx, topology.Fulfillment, adminclient.DeadLetterQuery{})
			return err
		}},
		{topology.Fulfillment, func(ctx context.Context) error {
			_, err := c.ReplayDeadLetter(ctx, topology.Fulfillment, adminclienttest.DeadLetterSKU1, "catalog fixed")
			return err
		}},
		{topology.Notifications, func(ctx context.Context) error {
			_, err := c.Processed(ctx, topology.Notifications, []string{adminclienttest.EventOrderCreated})
			return err
		}},
		{topology.Orders, func(ctx context.Context) error { _, err := c.Order(ctx, adminclienttest.OrderID); return err }},
		{topology.Orders, func(ctx context.Context) error { _, err := c.StuckOrders(ctx); return err }},
		{topology.Orders, func(ctx context.Context) error { _, err := c.Reconciliation(ctx); return err }},
		{topology.Orders, func(ctx context.Context) error { _, err := c.Audit(ctx); return err }},
		{topology.Gateway, func(ctx context.Context) error { _, err := c.Payments(ctx, adminclienttest.OrderID); return err }},
		{topology.Gateway, func(ctx context.Context) error { _, err := c.SweepPayments(ctx); return err }},
		{topology.Notifications, func(ctx context.Context) error {
			_, err := c.Notifications(ctx, adminclienttest.OrderID)
			return err
		}},
		{topology.Notifications, func(ctx context.Context) error { _, err := c.SweepNotifications(ctx); return err }},
		{topology.Fulfillment, func(ctx context.Context) error { _, err := c.Shipments(ctx, adminclienttest.OrderID); return err }},
		{topology.Fulfillment, func(ctx context.Context) error {
			_, err := c.Reservation(ctx, adminclienttest.OrderID)
			return err
		}},
	}
	for i, call := range calls {
		for _, who := range []string{operator, "another@example.com"} {
			callCtx := ctx
			if who != operator {
				callCtx = adminclient.WithOnBehalfOf(ctx, who)
			}
			before := len(stack.Requests(""))
			if err := call.call(callCtx); err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
			reqs := stack.Requests("")[before:]
			if len(reqs) != 1 || reqs[0].Service != call.service {
				t.Fatalf("call %d: requests %+v, want one to %s", i, reqs, call.service)
			}
			r := reqs[0]
			if got, want := r.Header.Get("Authorization"), "Bearer "+adminclienttest.TokenPrefix+stack.URL(call.service); got != want {
				t.Errorf("call %d (%s %s): Authorization %q, want %q", i, r.Method, r.Path, got, want)
			}
			if got := r.Header.Get(adminclient.HeaderOnBehalfOf); got != who {
				t.Errorf("call %d (%s %s): %s %q, want %q", i, r.Method, r.Path, adminclient.HeaderOnBehalfOf, got, who)
			}
			if got := r.Header.Get("Accept"); got != "application/json" {
				t.Errorf("call %d: Accept %q", i, got)
			}
			if strings.HasSuffix(r.Path, "/replay") {
				var body map[string]string
				if err := json.Unmarshal([]byte(r.Body), &body); err != nil || body["reason"] == "" || len(body) != 1 {
					t.Errorf("call %d: replay body %q, want {\"reason\": ...}", i, r.Body)
				}
				if ct := r.Header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("call %d: Content-Type %q", i, ct)
				}
			}
		}
	}
	var want []string
	for _, name := range []string{topology.Orders, topology.Fulfillment, topology.Gateway, topology.Notifications, topology.Relay} {
		want = append(want, stack.URL(name))
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, tokens.Audiences()); diff != "" {
		t.Errorf("audiences asked for (-want +got):\n%s", diff)
	}
}

// Without OnBehalfOf no header is sent.
func TestNoOnBehalfOf(t *testing.T) {
	c, stack, _ := newClient(t, adminclient.Config{})
	if _, err := c.StuckOrders(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := stack.Requests(topology.Orders)[0].Header[adminclient.HeaderOnBehalfOf]; ok {
		t.Errorf("%s sent without OnBehalfOf", adminclient.HeaderOnBehalfOf)
	}
}

// An answer other than 2xx is an *Error with the status and the problem's detail, matching the
// sentinel of its status; a body that is no problem is kept as Body.
func TestErrors(t *testing.T) {
	ctx := context.Background()
	c, stack, _ := newClient(t, adminclient.Config{})
	stack.Refuse(topology.Orders, "GET /admin/stuck-orders", 401)
	stack.Refuse(topology.Orders, "GET /admin/reconciliation", 403)
	stack.Reply(topology.Gateway, "GET /admin/payments", 502, "<html>Bad Gateway</html>")

	tests := []struct {
		name   string
		call   func() error
		status int
		is     error
		detail string
		body   string
	}{
		{"401", func() error { _, err := c.StuckOrders(ctx); return err }, 401, adminclient.ErrUnauthenticated, "a valid ID token of an operator is required", ""},
		{"403", func() error { _, err := c.Reconciliation(ctx); return err }, 403, adminclient.ErrForbidden, "the caller is not an operator of this service", ""},
		{"404", func() error { _, err := c.Order(ctx, "no-such-order"); return err }, 404, adminclient.ErrNotFound, "no route GET /admin/orders/no-such-order in the fake orders", ""},
		{"409", func() error {
			_, err := c.ReplayDeadLetter(ctx, topology.Fulfillment, adminclienttest.DeadLetterReplayed, "again")
			return err
		}, 409, adminclient.ErrConflict, "outboxlib: dead letter already replayed: " + adminclienttest.DeadLetterReplayed + " at 2026-03-02T09:30:00Z by operator@spanmart-local.iam.gserviceaccount.com", ""},
		{"not problem+json", func() error { _, err := c.Payments(ctx, adminclienttest.OrderID); return err }, 502, nil, "", "<html>Bad Gateway</html>"},
	}
	sentinels := []error{adminclient.ErrUnauthenticated, adminclient.ErrForbidden, adminclient.ErrNotFound, adminclient.ErrConflict}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var e *adminclient.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T), want an *Error", err, err)
			}
			if e.StatusCode != tt.status || e.Detail != tt.detail || e.Body != tt.body {
				t.Errorf("got status %d detail %q body %q, want %d %q %q", e.StatusCode, e.Detail, e.Body, tt.status, tt.detail, tt.body)
			}
			for _, s := range sentinels {
				if got, want := errors.Is(err, s), s == tt.is; got != want {
					t.Errorf("errors.Is(err, %v) = %v, want %v", s, got, want)
				}
			}
		})
	}

	t.Run("problem members", func(t *testing.T) {
		stack.Reply(topology.Orders, "POST /admin/audit", 400, `{"type":"about:blank","title":"Bad Request","status":400,"detail":"the request is invalid","instance":"/x","errors":["a","b"]}`)
		_, err := c.Audit(ctx)
		var e *adminclient.Error
		if !errors.As(err, &e) {
			t.Fatal(err)
		}
		want := &adminclient.Error{Service: topology.Orders, Method: "POST", Path: "/admin/audit", StatusCode: 400, Type: "about:blank",
			Title: "Bad Request", Detail: "the request is invalid", Extensions: map[string]any{"errors": []any{"a", "b"}}}
		if diff := cmp.Diff(want, e); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if got, want := e.Error(), "orders: POST /admin/audit: 400 Bad Request: the request is invalid"; got != want {
			t.Errorf("Error() = %q, want %q", got, want)
		}
	})

	t.Run("unreachable", func(t *testing.T) {
		stack.Down(topology.Notifications)
		_, err := c.Notifications(ctx, adminclienttest.OrderID)
		var e *adminclient.Error
		if err == nil || errors.As(err, &e) {
			t.Fatalf("error %v, want a transport error", err)
		}
		if !strings.HasPrefix(err.Error(), "notifications: GET /admin/notifications?order_id=") {
			t.Errorf("error %q does not name the service and the request", err)
		}
	})

	t.Run("answer that does not decode", func(t *testing.T) {
		stack.Reply(topology.Relay, "GET /v1/outbox", 200, `{"sources": 3}`)
		_, err := c.OutboxStatus(ctx)
		if err == nil || !strings.Contains(err.Error(), "relay: GET /v1/outbox: the answer does not decode") {
			t.Errorf("error %v", err)
		}
	})
}

// Refusals that need no request: a blank reason, a name that is no consumer, a service without a
// URL. Nothing is sent.
func TestRefusedBeforeSending(t *testing.T) {
	ctx := context.Background()
	stack := adminclienttest.Start(t)
	stack.Scenario()
	urls := stack.URLs()
	delete(urls, topology.Gateway)
	c, err := adminclient.New(adminclient.Config{URLs: urls, Tokens: adminclient.FixedToken("t")})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"blank dead letter reason", second(c.ReplayDeadLetter(ctx, topology.Fulfillment, adminclienttest.DeadLetterSKU1, "  ")), adminclient.ErrNoReason},
		{"blank outbox reason", second(c.ReplayOutboxEvent(ctx, topology.Gateway, adminclienttest.EventQuarantined, "")), adminclient.ErrNoReason},
		{"blank ledger reason", second(c.ReplayMissingDelivery(ctx, topology.Gateway, adminclienttest.EventQuarantined, "")), adminclient.ErrNoReason},
		{"relay is no consumer", second(c.ConsumerStatus(ctx, topology.Relay)), adminclient.ErrUnknownService},
		{"unknown consumer", second(c.DeadLetters(ctx, "warehouse", adminclient.DeadLetterQuery{})), adminclient.ErrUnknownService},
		{"no URL", second(c.Payments(ctx, adminclienttest.OrderID)), adminclient.ErrNoURL},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, tt.want) {
			t.Errorf("%s: error %v, want %v", tt.name, tt.err, tt.want)
		}
	}
	if reqs := stack.Requests(""); len(reqs) != 0 {
		t.Errorf("requests were sent: %+v", reqs)
	}
}

func second[T any](_ T, err error) error { return err }

func TestNewValidates(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  adminclient.Config
		err  string
	}{
		{"no tokens", adminclient.Config{}, "Config.Tokens is required"},
		{"unknown service", adminclient.Config{Tokens: adminclient.FixedToken("t"), URLs: map[string]string{"warehouse": "http://x"}}, `"warehouse" is not a service`},
		{"relative URL", adminclient.Config{Tokens: adminclient.FixedToken("t"), URLs: map[string]string{"orders": "127.0.0.1:8081"}}, `orders: "127.0.0.1:8081" is not an http(s) base URL`},
		{"query", adminclient.Config{Tokens: adminclient.FixedToken("t"), URLs: map[string]string{"relay": "http://x/?a=b"}}, "relay"},
	} {
		_, err := adminclient.New(tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.err)
		}
	}
	c, err := adminclient.New(adminclient.Config{Tokens: adminclient.FixedToken("t"), URLs: map[string]string{
		"relay": "https://relay-1.a.run.app/", "orders": "http://127.0.0.1:8081"}})
	if err != nil {
		t.Fatal(err)
	}
	if u, _ := c.URL("relay"); u != "https://relay-1.a.run.app" {
		t.Errorf("URL(relay) = %q: the trailing slash is kept (the audience would not match)", u)
	}
	if diff := cmp.Diff([]string{"orders", "relay"}, c.Services()); diff != "" {
		t.Errorf("Services (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"orders"}, c.Consumers()); diff != "" {
		t.Errorf("Consumers (-want +got):\n%s", diff)
	}
}

// A fixed token is sent as it was pasted, whatever the audience, without a "Bearer " prefix or
// the newline of a shell's output.
func TestFixedToken(t *testing.T) {
	c, stack, _ := newClient(t, adminclient.Config{Tokens: adminclient.FixedToken("Bearer eyJ.pasted.token\n")})
	if _, err := c.OutboxStatus(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StuckOrders(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, r := range stack.Requests("") {
		if got := r.Header.Get("Authorization"); got != "Bearer eyJ.pasted.token" {
			t.Errorf("%s: Authorization %q", r.Service, got)
		}
	}
	if _, err := adminclient.FixedToken(" ").Token(context.Background(), "x"); err == nil {
		t.Error("an empty fixed token was accepted")
	}
}
