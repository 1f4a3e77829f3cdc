package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/uuid"

	"github.com/spanmart/spanmart/emulator/oidc"
	"github.com/spanmart/spanmart/emulator/paysim"
	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/platform/platformtest"
)

const (
	audience      = "http://gateway.test"
	relayEmail    = "relay@spanmart.test"
	operatorEmail = "operator@spanmart.test"
	stripeKey     = "sk_test_gateway_run"
	stripeSecret  = "whsec_gateway_run"
	komojuKey     = "sk_test_komoju_gateway_run"
	komojuSecret  = "komoju_gateway_run"
)

// system is the gateway as run wires it (PORT=0, a fresh payments database), the sandbox
// in-process with its webhooks pointed at the gateway, and the Tasks emulator's OIDC issuer.
type system struct {
	url     string
	client  *spanner.Client
	issuer  *oidc.Issuer
	sandbox *paysim.Server
}

// startSystem starts the system; extra adds to (or overrides) the gateway's environment.
func startSystem(t *testing.T, extra map[string]string) *system {
	t.Helper()
	client, name := env.NewDatabase(t, dbschema.Payments)
	var issuerHandler atomic.Pointer[http.Handler]
	iss := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*issuerHandler.Load()).ServeHTTP(w, r) }))
	t.Cleanup(iss.Close)
	issuer, err := oidc.NewIssuer(iss.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := issuer.Handler()
	issuerHandler.Store(&h)

	// The gateway's URL is known only once it listens; the sandbox's webhooks go through this
	// forwarder, which learns it then.
	var gatewayURL atomic.Pointer[string]
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := gatewayURL.Load()
		if u == nil {
			http.Error(w, "not up yet", http.StatusServiceUnavailable)
			return
		}
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, *u+r.URL.Path, r.Body)
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	t.Cleanup(hooks.Close)
	sandbox, err := paysim.Start(context.Background(), paysim.Options{
		APIKey: stripeKey, WebhookURL: hooks.URL + "/webhooks/stripe", WebhookSecret: stripeSecret,
		KomojuSecretKey: komojuKey, KomojuWebhookURL: hooks.URL + "/webhooks/komoju", KomojuWebhookSecret: komojuSecret,
		WebhookRetry: paysim.RetryPolicy{MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sandbox.Close() })

	vars := map[string]string{
		"SPANNER_DATABASE": name, "PORT": "0",
		"OIDC_ISSUER": iss.URL, "OIDC_AUDIENCE": audience, "OIDC_ALLOWED_EMAILS": relayEmail, "ADMIN_ALLOWED_EMAILS": operatorEmail,
		"STRIPE_API_KEY": stripeKey, "STRIPE_API_URL": sandbox.URL(), "STRIPE_WEBHOOK_SECRET": stripeSecret,
		"KOMOJU_SECRET_KEY": komojuKey, "KOMOJU_API_URL": sandbox.URL(), "KOMOJU_WEBHOOK_SECRET": komojuSecret,
	}
	for k, v := range extra {
		vars[k] = v
	}
	cfg, err := loadConfig(platformtest.Getenv(vars))
	if err != nil {
		t.Fatal(err)
	}
	log, logs := platformtest.NewLogger(t, serviceName)
	platformtest.Start(t, func(ctx context.Context) error { return run(ctx, cfg, log) })
	s := &system{url: platformtest.StartedURL(t, logs), client: client, issuer: issuer, sandbox: sandbox}
	gatewayURL.Store(&s.url)
	return s
}

func (s *system) do(t *testing.T, method, path, token, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (s *system) token(t *testing.T, email string) string {
	t.Helper()
	tok, err := s.issuer.Mint(audience, email, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// deliver posts order.awaiting_payment the way Cloud Tasks does.
func (s *system) deliver(t *testing.T, orderID, payment string) int {
	t.Helper()
	return s.deliverEvent(t, orderEvent{id: uuid.NewString(), typ: "order.awaiting_payment", orderID: orderID, version: 2,
		payload: fmt.Sprintf(`{"order_id":%q,"customer_id":"ali","email":"ali@example.com","currency":"JPY","total_minor":1800,"payment":%s}`, orderID, payment)})
}

// orderEvent is an event of orders as the relay delivers it to the gateway; predecessor is the
// latest earlier version of the order routed to the gateway (0 for none).
type orderEvent struct {
	id, typ, orderID     string
	version, predecessor int64
	payload              string
}

func (s *system) deliverEvent(t *testing.T, ev orderEvent) int {
	t.Helper()
	e := outboxlib.Event{
		ID: ev.id, Type: ev.typ, Source: "//spanmart/orders", AggregateType: "order",
		AggregateID: ev.orderID, AggregateVersion: ev.version, SchemaVersion: 1, OccurredAt: time.Now().UTC(),
		Payload: json.RawMessage(ev.payload),
	}
	req, _ := http.NewRequest(http.MethodPost, s.url+"/events", strings.NewReader(string(e.Payload)))
	for k, v := range e.Headers() {
		req.Header.Set(k, v)
	}
	req.Header.Set("ce-predecessorversion", fmt.Sprint(ev.predecessor))
	req.Header.Set("Authorization", "Bearer "+s.token(t, relayEmail))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

type paymentView struct {
	ID, Status, Method, Provider, FailureReason string
	Slip                                        json.RawMessage
	CancelRequested                             bool
}

func (s *system) payments(t *testing.T, orderID string) []paymentView {
	t.Helper()
	status, body := s.do(t, http.MethodGet, "/admin/payments?order_id="+orderID, s.token(t, operatorEmail), "")
	if status != http.StatusOK {
		t.Fatalf("GET /admin/payments: %d %s", status, body)
	}
	var list struct {
		Payments []struct {
			ID              string          `json:"id"`
			Status          string          `json:"status"`
			Method          string          `json:"method"`
			Provider        string          `json:"provider"`
			FailureReason   string          `json:"failure_reason"`
			Slip            json.RawMessage `json:"slip"`
			CancelRequested bool            `json:"cancel_requested"`
		} `json:"payments"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	var out []paymentView
	for _, p := range list.Payments {
		out = append(out, paymentView{p.ID, p.Status, p.Method, p.Provider, p.FailureReason, p.Slip, p.CancelRequested})
	}
	return out
}

// The service as run wires it: order.awaiting_payment through the consumer calls the provider on
// the request path (card: authorized; wallet for ali: authorized; konbini: a slip); a redelivery
// changes nothing; the operator routes need an operator's token and read the payments back.
func TestPaymentsThroughTheService(t *testing.T) {
	s := startSystem(t, nil)
	card, wallet, konbini := uuid.NewString(), uuid.NewString(), uuid.NewString()
	for id, p := range map[string]string{
		card:    `{"method":"card","payment_method":"pm_card_visa"}`,
		wallet:  `{"method":"wallet"}`,
		konbini: `{"method":"konbini","store":"lawson"}`,
	} {
		if status := s.deliver(t, id, p); status != http.StatusOK {
			t.Fatalf("POST /events for %s: %d", p, status)
		}
	}
	for id, want := range map[string]string{card: "AUTHORIZED", wallet: "AUTHORIZED", konbini: "PENDING"} {
		ps := s.payments(t, id)
		if len(ps) != 1 || ps[0].Status != want {
			t.Errorf("payments of %s: %+v, want one %s (the call is made before the delivery is answered)", id, ps, want)
		}
	}
	if ps := s.payments(t, konbini); len(ps) == 1 && !strings.Contains(string(ps[0].Slip), `"store":"lawson"`) {
		t.Errorf("konbini slip %s, want the store", ps[0].Slip)
	}
	// A redelivery (another event id, the same order) finds the payment: no second one.
	if status := s.deliver(t, card, `{"method":"card","payment_method":"pm_card_visa"}`); status != http.StatusOK {
		t.Fatalf("redelivery: %d", status)
	}
	if ps := s.payments(t, card); len(ps) != 1 {
		t.Errorf("payments after a redelivery: %+v, want one", ps)
	}

	id := s.payments(t, card)[0].ID
	for _, c := range []struct {
		name, method, path, token string
		want                      int
	}{
		{"no token", http.MethodGet, "/admin/payments/" + id, "", http.StatusUnauthorized},
		{"a token of another account", http.MethodGet, "/admin/payments/" + id, s.token(t, relayEmail), http.StatusForbidden},
		{"sweep without a token", http.MethodPost, "/admin/sweep", "", http.StatusUnauthorized},
		{"operator", http.MethodGet, "/admin/payments/" + id, s.token(t, operatorEmail), http.StatusOK},
		{"not a payment id", http.MethodGet, "/admin/payments/nope", s.token(t, operatorEmail), http.StatusBadRequest},
		{"unknown payment", http.MethodGet, "/admin/payments/" + uuid.NewString(), s.token(t, operatorEmail), http.StatusNotFound},
		{"no order id", http.MethodGet, "/admin/payments", s.token(t, operatorEmail), http.StatusBadRequest},
		{"operator's sweep", http.MethodPost, "/admin/sweep", s.token(t, operatorEmail), http.StatusOK},
		{"unknown provider's webhook", http.MethodPost, "/webhooks/paypal", "", http.StatusNotFound},
		{"unsigned webhook", http.MethodPost, "/webhooks/stripe", "", http.StatusBadRequest},
	} {
		status, body := s.do(t, c.method, c.path, c.token, "{}")
		if status != c.want {
			t.Errorf("%s: %s %s = %d %s, want %d", c.name, c.method, c.path, status, body, c.want)
		}
	}
}

// order.shipped and order.cancelled through the consumer: the capture and the void are made
// before the delivery is answered, and a redelivery of either calls the provider no more; an
// order cancelled before it awaited payment has nothing to settle; order.shipped of an order
// without a payment is dead-lettered.
func TestCaptureAndVoidThroughTheService(t *testing.T) {
	s := startSystem(t, nil)
	shipped, cancelled := uuid.NewString(), uuid.NewString()
	for _, id := range []string{shipped, cancelled} {
		if status := s.deliver(t, id, `{"method":"card","payment_method":"pm_card_visa"}`); status != http.StatusOK {
			t.Fatalf("order.awaiting_payment: %d", status)
		}
	}
	ship := orderEvent{id: uuid.NewString(), typ: "order.shipped", orderID: shipped, version: 5, predecessor: 2,
		payload: fmt.Sprintf(`{"order_id":%q,"status":"SHIPPED","shipment":{"carrier":"yamato"}}`, shipped)}
	cancel := orderEvent{id: uuid.NewString(), typ: "order.cancelled", orderID: cancelled, version: 3, predecessor: 2,
		payload: fmt.Sprintf(`{"order_id":%q,"status":"CANCELLING","reason":"customer_request"}`, cancelled)}
	for _, ev := range []orderEvent{ship, ship, cancel, cancel} { // each delivered twice
		if status := s.deliverEvent(t, ev); status != http.StatusOK {
			t.Fatalf("%s: %d", ev.typ, status)
		}
	}
	for id, want := range map[string]string{shipped: "CAPTURED", cancelled: "VOIDED"} {
		if ps := s.payments(t, id); len(ps) != 1 || ps[0].Status != want {
			t.Errorf("payments of %s: %+v, want one %s", id, ps, want)
		}
	}
	for typ, want := range map[string]int{"payment_intent.succeeded": 1, "payment_intent.canceled": 1} {
		ids := map[string]bool{}
		for _, d := range s.sandbox.Deliveries() {
			if d.EventType == typ {
				ids[d.EventID] = true
			}
		}
		if len(ids) != want {
			t.Errorf("the sandbox sent %d %s, want %d: the provider acted once", len(ids), typ, want)
		}
	}

	early := uuid.NewString()
	if status := s.deliverEvent(t, orderEvent{id: uuid.NewString(), typ: "order.cancelled", orderID: early, version: 2,
		payload: fmt.Sprintf(`{"order_id":%q,"reason":"out_of_stock"}`, early)}); status != http.StatusOK {
		t.Errorf("order.cancelled before any payment: %d", status)
	}
	if status := s.deliverEvent(t, orderEvent{id: uuid.NewString(), typ: "order.shipped", orderID: early, version: 5, predecessor: 0,
		payload: fmt.Sprintf(`{"order_id":%q}`, early)}); status != http.StatusOK {
		t.Errorf("order.shipped without a payment: %d, want 200 (dead-lettered)", status)
	}
	if ps := s.payments(t, early); len(ps) != 0 {
		t.Errorf("payments of an order that never awaited payment: %+v", ps)
	}
	status, body := s.do(t, http.MethodGet, "/admin/deadletters", s.token(t, operatorEmail), "")
	if status != http.StatusOK || !strings.Contains(string(body), "order.shipped") {
		t.Errorf("GET /admin/deadletters = %d %s, want the order.shipped without a payment", status, body)
	}
}

// The order is cancelled while its authorization cannot be made (the provider answers 500s): the
// operator read shows the cancellation recorded on the REQUESTED payment; once the provider is
// back, a redelivery of order.cancelled authorizes and at once voids it.
func TestCancelDuringTheAuthorizationThroughTheService(t *testing.T) {
	s := startSystem(t, map[string]string{"PROVIDER_ATTEMPTS": "1"})
	order := uuid.NewString()
	if err := s.sandbox.SetAPIFault(paysim.APIFault{Mode: paysim.FaultError, Dialect: paysim.DialectStripe, Count: 2}); err != nil {
		t.Fatal(err)
	}
	if status := s.deliver(t, order, `{"method":"card","payment_method":"pm_card_visa"}`); status != http.StatusServiceUnavailable {
		t.Fatalf("order.awaiting_payment during the outage: %d, want 503", status)
	}
	cancel := orderEvent{id: uuid.NewString(), typ: "order.cancelled", orderID: order, version: 3, predecessor: 2,
		payload: fmt.Sprintf(`{"order_id":%q,"reason":"customer_request"}`, order)}
	if status := s.deliverEvent(t, cancel); status != http.StatusServiceUnavailable {
		t.Fatalf("order.cancelled during the outage: %d, want 503 (its effect, the authorization, is unfinished)", status)
	}
	if ps := s.payments(t, order); len(ps) != 1 || ps[0].Status != "REQUESTED" || !ps[0].CancelRequested {
		t.Fatalf("payments %+v, want one REQUESTED with cancel_requested", ps)
	}
	if status := s.deliverEvent(t, cancel); status != http.StatusOK {
		t.Fatalf("order.cancelled redelivered: %d", status)
	}
	if ps := s.payments(t, order); len(ps) != 1 || ps[0].Status != "VOIDED" {
		t.Errorf("payments %+v, want one VOIDED", ps)
	}
}
