package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/spanmart/spanmart/emulator/authemu"
	"github.com/spanmart/spanmart/emulator/oidc"
	"github.com/spanmart/spanmart/gen/dao/outboxdb"
	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/platform/platformtest"
	"github.com/spanmart/spanmart/services/orders/internal/orderstest"
)

const (
	audience   = "http://orders.test"
	relayEmail = "relay@spanmart.test"
)

type system struct {
	url    string
	client *spanner.Client
	issuer *oidc.Issuer
	nudges *nudgeLog
	// customers is the customers' identity provider (the local stand-in of Identity Platform).
	customers *authemu.Server
}

// nudgeLog is the shards the relay stub was nudged for.
type nudgeLog struct {
	mu     sync.Mutex
	shards map[string]bool
}

func (l *nudgeLog) has(shard int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.shards[strconv.FormatInt(shard, 10)]
}

// customer is the customer the tests' orders are placed by.
const customer = "cust-1"

// startCustomers starts the customers' identity provider; its URL and audience are orders'
// CUSTOMER_ISSUER and CUSTOMER_AUDIENCE.
func startCustomers(t *testing.T) *authemu.Server {
	t.Helper()
	a, err := authemu.Start(context.Background(), authemu.Options{Audience: "spanmart-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// customerAuth is the Authorization header of customer, signed in.
func (s *system) customerAuth(t *testing.T) string {
	t.Helper()
	tok, err := s.customers.Token(customer, "")
	if err != nil {
		t.Fatal(err)
	}
	return "Bearer " + tok
}

// get GETs path as the customer.
func (s *system) get(t *testing.T, path string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", s.customerAuth(t))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// startSystem runs the service (run, PORT=0) against a fresh seeded database, with the Tasks
// emulator's OIDC issuer served over HTTP for discovery and JWKS, and a fake relay.
func startSystem(t *testing.T) *system {
	t.Helper()
	client, name := env.NewDatabase(t, dbschema.Orders)
	orderstest.Seed(t, client)

	var issuerHandler atomic.Pointer[http.Handler]
	iss := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*issuerHandler.Load()).ServeHTTP(w, r) }))
	t.Cleanup(iss.Close)
	issuer, err := oidc.NewIssuer(iss.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := issuer.Handler()
	issuerHandler.Store(&h)

	nudges := &nudgeLog{shards: map[string]bool{}}
	relay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/nudge" && r.URL.Query().Get("source") == serviceName {
			nudges.mu.Lock()
			for _, shard := range r.URL.Query()["shard"] {
				nudges.shards[shard] = true
			}
			nudges.mu.Unlock()
		}
	}))
	t.Cleanup(relay.Close)
	customers := startCustomers(t)

	cfg, err := loadConfig(platformtest.Getenv(map[string]string{
		"SPANNER_DATABASE": name, "PORT": "0", "RELAY_URL": relay.URL,
		"OIDC_ISSUER": iss.URL, "OIDC_AUDIENCE": audience, "OIDC_ALLOWED_EMAILS": relayEmail,
		"CUSTOMER_ISSUER": customers.URL(), "CUSTOMER_AUDIENCE": customers.Audience(),
	}))
	if err != nil {
		t.Fatal(err)
	}
	log, logs := platformtest.NewLogger(t, serviceName)
	platformtest.Start(t, func(ctx context.Context) error { return run(ctx, cfg, log) })
	return &system{url: platformtest.StartedURL(t, logs), client: client, issuer: issuer, nudges: nudges, customers: customers}
}

func (s *system) post(t *testing.T, path string, header map[string]string, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (s *system) placeOrder(t *testing.T) string {
	t.Helper()
	return s.placeOrderWith(t, `"payment": {"method": "card", "payment_method": "pm_card_visa"}`)
}

// placeOrderWith places an order of 2 × A1 (300 JPY) with the given members (payment, email).
func (s *system) placeOrderWith(t *testing.T, members string) string {
	t.Helper()
	status, body := s.post(t, "/v1/orders", map[string]string{"Idempotency-Key": uuid.NewString(), "Content-Type": "application/json", "Authorization": s.customerAuth(t)},
		`{"customer_id": "`+customer+`", "lines": [{"sku": "A1", "quantity": 2}], `+members+`}`)
	if status != http.StatusCreated {
		t.Fatalf("POST /v1/orders = %d %s", status, body)
	}
	var o struct{ ID string }
	if err := json.Unmarshal(body, &o); err != nil {
		t.Fatal(err)
	}
	return o.ID
}

// deliver posts an event the way Cloud Tasks does: CloudEvents binary mode with an OIDC token.
func (s *system) deliver(t *testing.T, e outboxlib.Event, email string) (int, string) {
	t.Helper()
	token, err := s.issuer.Mint(audience, email, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	h := e.Headers()
	h["Authorization"] = "Bearer " + token
	status, body := s.post(t, "/events", h, string(e.Payload))
	var r struct{ Outcome string }
	json.Unmarshal(body, &r)
	return status, r.Outcome
}

func inventoryEvent(typ, orderID string, payload string) outboxlib.Event {
	return outboxlib.Event{
		ID: uuid.NewString(), Type: typ, Source: "//spanmart/fulfillment", AggregateType: "reservation",
		AggregateID: orderID, AggregateVersion: 1, SchemaVersion: 1, OccurredAt: time.Now().UTC(),
		Payload: json.RawMessage(payload),
	}
}

// TestEventsThroughConsumer drives the inventory.* handlers through the real outboxlib consumer on
// POST /events, as wired by run.
func TestEventsThroughConsumer(t *testing.T) {
	s := startSystem(t)
	reserved, rejected := s.placeOrder(t), s.placeOrder(t)
	platformtest.Eventually(t, "the relay nudged for both orders' shards", func() bool {
		return s.nudges.has(outboxlib.ShardOf(reserved)) && s.nudges.has(outboxlib.ShardOf(rejected))
	})

	ev := inventoryEvent("inventory.reserved", reserved, `{"order_id": "`+reserved+`", "lines": [{"sku": "A1", "quantity": 2}]}`)
	if status, _ := s.deliver(t, ev, "intruder@spanmart.test"); status != http.StatusUnauthorized {
		t.Errorf("delivery from a caller not allowed = %d, want 401", status)
	}
	if status, outcome := s.deliver(t, ev, relayEmail); status != 200 || outcome != outboxlib.OutcomeApplied {
		t.Fatalf("inventory.reserved = %d %s, want 200 applied", status, outcome)
	}
	if status, outcome := s.deliver(t, ev, relayEmail); status != 200 || outcome != outboxlib.OutcomeDuplicate {
		t.Errorf("redelivery = %d %s, want 200 duplicate", status, outcome)
	}
	rej := inventoryEvent("inventory.rejected", rejected, `{"order_id": "`+rejected+`", "reason": "out_of_stock"}`)
	if status, outcome := s.deliver(t, rej, relayEmail); status != 200 || outcome != outboxlib.OutcomeApplied {
		t.Fatalf("inventory.rejected = %d %s, want 200 applied", status, outcome)
	}
	unknown := uuid.NewString()
	lost := inventoryEvent("inventory.reserved", unknown, `{"order_id": "`+unknown+`"}`)
	if status, outcome := s.deliver(t, lost, relayEmail); status != 200 || outcome != outboxlib.OutcomeDeadLettered {
		t.Errorf("event for an unknown order = %d %s, want 200 dead_lettered", status, outcome)
	}

	st := orderstest.Read(t, s.client)
	status := map[string]string{}
	for _, o := range st.Orders {
		status[o.OrderId] = o.Status + " " + o.CancelReason.StringVal
	}
	if status[reserved] != "AWAITING_PAYMENT " || status[rejected] != "CANCELLED out_of_stock" {
		t.Errorf("orders = %v", status)
	}
	types := map[string][]string{}
	for _, e := range st.Outbox {
		types[e.AggregateId] = append(types[e.AggregateId], e.EventType)
	}
	if got := strings.Join(types[reserved], ","); got != "order.created,order.awaiting_payment" {
		t.Errorf("events of the reserved order = %s", got)
	}
	if got := strings.Join(types[rejected], ","); got != "order.created,order.cancelled" {
		t.Errorf("events of the rejected order = %s", got)
	}
	if len(st.Processed) != 3 {
		t.Errorf("%d ProcessedEvents rows, want 3 (two applied, one dead-lettered)", len(st.Processed))
	}
	if _, err := outboxdb.ReadDeadLetter(context.Background(), s.client.Single(), lost.ID, "orders"); err != nil {
		t.Errorf("dead letter of the unknown order's event: %v", err)
	}

	// GET shows the new state and the timeline, consumed events included.
	resp := s.get(t, "/v1/orders/"+reserved)
	defer resp.Body.Close()
	var o struct {
		Status   string
		Version  int64
		Timeline []struct {
			Direction string `json:"direction"`
			EventType string `json:"event_type"`
			EventID   string `json:"event_id"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
		t.Fatal(err)
	}
	if o.Status != "AWAITING_PAYMENT" || o.Version != 2 || len(o.Timeline) != 3 || o.Timeline[1].Direction != "consumed" || o.Timeline[1].EventID != ev.ID || o.Timeline[2].EventType != "order.awaiting_payment" {
		t.Errorf("GET = %+v", o)
	}
}

// paymentEvent is a gateway event of the payment paymentID (aggregate "payment").
func paymentEvent(typ, paymentID string, version int64, payload string) outboxlib.Event {
	return outboxlib.Event{
		ID: uuid.NewString(), Type: typ, Source: "//spanmart/gateway-abstraction", AggregateType: "payment",
		AggregateID: paymentID, AggregateVersion: version, SchemaVersion: 1, OccurredAt: time.Now().UTC(),
		Payload: json.RawMessage(payload),
	}
}

// TestPaymentEventsThroughConsumer drives a konbini order through the real consumer as run wires
// it: reserved, the slip (payment.pending, which GET then shows), the payment
// (payment.authorized); and a card order through a decline and the release of its stock.
func TestPaymentEventsThroughConsumer(t *testing.T) {
	s := startSystem(t)
	get := func(id string) (o struct {
		Status       string
		Version      int64
		CancelReason *string `json:"cancel_reason"`
		Email        string
		Payment      map[string]any
		Timeline     []struct {
			EventType string `json:"event_type"`
		}
	}) {
		t.Helper()
		resp := s.get(t, "/v1/orders/"+id)
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	deliver := func(e outboxlib.Event) {
		t.Helper()
		if status, outcome := s.deliver(t, e, relayEmail); status != 200 || outcome != outboxlib.OutcomeApplied {
			t.Fatalf("%s = %d %s, want 200 applied", e.Type, status, outcome)
		}
	}

	id := s.placeOrderWith(t, `"email": "ali@example.com", "payment": {"method": "konbini", "store": "family-mart"}`)
	deliver(inventoryEvent("inventory.reserved", id, `{"order_id": "`+id+`"}`))
	pid := uuid.NewString()
	pending := paymentEvent("payment.pending", pid, 1, `{"payment_id": "`+pid+`", "order_id": "`+id+`", "method": "konbini", "provider": "komoju",
		"status": "PENDING", "amount_minor": 300, "currency": "JPY",
		"slip": {"method": "konbini", "store": "family-mart", "payment_code": "FM-1", "confirmation_code": "C-2",
			"instructions_url": "https://komoju.test/slips/1", "expires_at": "2026-12-09T15:00:00Z"}}`)
	deliver(pending)
	if status, outcome := s.deliver(t, pending, relayEmail); status != 200 || outcome != outboxlib.OutcomeDuplicate {
		t.Errorf("redelivered payment.pending = %d %s, want 200 duplicate", status, outcome)
	}
	o := get(id)
	wantPayment := map[string]any{
		"method": "konbini", "store": "family-mart",
		"instructions": map[string]any{
			"method": "konbini", "store": "family-mart", "payment_code": "FM-1", "confirmation_code": "C-2",
			"instructions_url": "https://komoju.test/slips/1", "expires_at": "2026-12-09T15:00:00Z",
		},
	}
	if o.Status != "AWAITING_PAYMENT" || o.Version != 2 || o.Email != "ali@example.com" || len(o.Timeline) != 4 || o.Timeline[3].EventType != "payment.pending" {
		t.Errorf("GET after the slip = %+v", o)
	}
	if diff := cmp.Diff(wantPayment, o.Payment); diff != "" {
		t.Errorf("GET payment (-want +got):\n%s", diff)
	}
	deliver(paymentEvent("payment.authorized", pid, 2, `{"payment_id": "`+pid+`", "order_id": "`+id+`", "method": "konbini", "provider": "komoju",
		"status": "AUTHORIZED", "amount_minor": 300, "currency": "JPY"}`))
	if o := get(id); o.Status != "CONFIRMED" || o.Version != 3 || o.Timeline[len(o.Timeline)-1].EventType != "order.confirmed" {
		t.Errorf("GET after the payment = %+v", o)
	}

	declined := s.placeOrder(t)
	deliver(inventoryEvent("inventory.reserved", declined, `{"order_id": "`+declined+`"}`))
	cid := uuid.NewString()
	deliver(paymentEvent("payment.failed", cid, 1, `{"payment_id": "`+cid+`", "order_id": "`+declined+`", "method": "card", "provider": "stripe",
		"status": "FAILED", "amount_minor": 300, "currency": "JPY", "reason": "declined"}`))
	if o := get(declined); o.Status != "CANCELLING" || o.CancelReason == nil || *o.CancelReason != "payment_declined" {
		t.Errorf("GET after the decline = %+v", o)
	}
	released := inventoryEvent("inventory.released", declined, `{"order_id": "`+declined+`", "lines": [{"sku": "A1", "quantity": 2}]}`)
	released.AggregateVersion = 2
	deliver(released)
	if o := get(declined); o.Status != "CANCELLED" || o.Version != 4 {
		t.Errorf("GET after the release = %+v", o)
	}
}
