package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/spanmart/spanmart/gen/dao/ordersdb"
	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/pkg/platform/platformtest"
	"github.com/spanmart/spanmart/services/orders/api"
	"github.com/spanmart/spanmart/services/orders/internal/app"
	"github.com/spanmart/spanmart/services/orders/internal/httpapi"
	"github.com/spanmart/spanmart/services/orders/internal/order"
	"github.com/spanmart/spanmart/services/orders/internal/orderstest"
	"github.com/spanmart/spanmart/services/orders/internal/peers"
	"github.com/spanmart/spanmart/services/orders/internal/store"
)

// fakePeers stands in for fulfillment's GET /v1/reservations/{order_id} and the gateway's
// GET /admin/payments?order_id=. Their JSON is the real services' shapes, copied from
// services/fulfillment/internal/httpapi (Reservation) and services/gateway-abstraction/internal/
// httpapi (paymentList of Payment), which this module cannot import (internal packages); the e2e
// tests exercise the real services.
type fakePeers struct {
	mu           sync.Mutex
	reservations map[string]string   // order id → reservation status; absent: 404
	payments     map[string][]string // order id → payment statuses
	refuse       bool                // the gateway answers 403, as to an account it does not allow
	fulfillment  *httptest.Server
	gateway      *httptest.Server
}

func newFakePeers(t *testing.T) *fakePeers {
	t.Helper()
	p := &fakePeers{reservations: map[string]string{}, payments: map[string][]string{}}
	p.fulfillment = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := strings.CutPrefix(r.URL.Path, "/v1/reservations/")
		if r.Method != http.MethodGet || !ok {
			t.Errorf("fulfillment got %s %s", r.Method, r.URL)
			http.NotFound(w, r)
			return
		}
		p.mu.Lock()
		status, found := p.reservations[id]
		p.mu.Unlock()
		if !found {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"type":"about:blank","title":"Not Found","status":404,"detail":"reservation of ` + id + `: not found"}`))
			return
		}
		lines := `[{"sku":"A1","quantity":2,"status":"` + status + `"}]`
		if status == "REJECTED" {
			lines = `[]`
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"order_id":"` + id + `","status":"` + status + `","version":2,"lines":` + lines +
			`,"created_at":"2026-03-01T10:00:00Z","updated_at":"2026-03-01T10:05:00Z"}`))
	}))
	t.Cleanup(p.fulfillment.Close)
	p.gateway = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("order_id")
		if r.Method != http.MethodGet || r.URL.Path != "/admin/payments" || id == "" {
			t.Errorf("gateway got %s %s", r.Method, r.URL)
			http.NotFound(w, r)
			return
		}
		p.mu.Lock()
		statuses, refuse := p.payments[id], p.refuse
		p.mu.Unlock()
		if refuse {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"type":"about:blank","title":"Forbidden","status":403,"detail":"the caller is not an operator of this service"}`))
			return
		}
		type payment struct { // the gateway's api.Payment
			ID          string `json:"id"`
			OrderID     string `json:"order_id"`
			CustomerID  string `json:"customer_id"`
			Method      string `json:"method"`
			Provider    string `json:"provider"`
			Status      string `json:"status"`
			AmountMinor int64  `json:"amount_minor"`
			Currency    string `json:"currency"`
			Version     int64  `json:"version"`
		}
		list := struct {
			Payments []payment `json:"payments"`
		}{Payments: []payment{}}
		for i, s := range statuses {
			list.Payments = append(list.Payments, payment{
				ID: paymentID(id, i), OrderID: id, CustomerID: "cust-1", Method: "card", Provider: "stripe",
				Status: s, AmountMinor: 300, Currency: "JPY", Version: 2,
			})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(list)
	}))
	t.Cleanup(p.gateway.Close)
	return p
}

func paymentID(orderID string, i int) string {
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte(orderID+string(rune('0'+i)))).String()
}

// set records what the peers say about an order: a reservation status ("" for none) and payment
// statuses.
func (p *fakePeers) set(orderID, reservation string, payments ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if reservation != "" {
		p.reservations[orderID] = reservation
	}
	p.payments[orderID] = payments
}

type auditFixture struct {
	url    string
	client *spanner.Client
	svc    *app.Service
	now    time.Time // the audit's clock; orders are aged back from it
	peers  *fakePeers
	logs   *platformtest.Logs
}

type auditOptions struct {
	noPeers    bool
	stuckLimit int
}

// newAuditFixture serves the audit's routes on a real platform server over a fresh seeded
// database, with the fake peers. The routes are let through without a token here: the operator
// guard is the consumer's, tested as run wires it (services/orders/audit_test.go).
func newAuditFixture(t *testing.T, opts auditOptions) *auditFixture {
	t.Helper()
	client, _ := env.NewDatabase(t, dbschema.Orders)
	orderstest.Seed(t, client)
	log, logs := platformtest.NewLogger(t, "orders")
	srv := platform.NewServer(platform.ServerOptions{Service: "orders", ErrorMapper: httpapi.ErrorMapper, Logger: log})
	repo := store.New(client)
	f := &auditFixture{client: client, svc: app.New(repo, nil), now: time.Now().UTC().Truncate(time.Microsecond), logs: logs}
	cfg := app.AuditConfig{Repo: repo, StuckLimit: opts.stuckLimit, Metrics: app.NewAuditMetrics(srv.Registry), Now: func() time.Time { return f.now }}
	if !opts.noPeers {
		f.peers = newFakePeers(t)
		cfg.Peers = peers.New(peers.Config{FulfillmentURL: f.peers.fulfillment.URL, GatewayURL: f.peers.gateway.URL + "/"})
	}
	open := func(next echo.HandlerFunc) echo.HandlerFunc { return next }
	httpapi.RegisterAdmin(srv.Echo, f.svc, app.NewAudit(cfg), open)
	ts := httptest.NewServer(srv.Echo)
	t.Cleanup(ts.Close)
	f.url = ts.URL
	return f
}

var (
	cardPayment    = &app.PaymentRequest{Method: "card", Fields: map[string]string{"payment_method": "pm_card_visa"}}
	konbiniPayment = &app.PaymentRequest{Method: "konbini", Fields: map[string]string{"store": "lawson"}}
)

// place creates a PENDING order of 2 × A1 (300 JPY) through the use case.
func (f *auditFixture) place(t *testing.T, payment *app.PaymentRequest) string {
	t.Helper()
	resp, err := f.svc.PlaceOrder(context.Background(), "cust-1", uuid.NewString(), app.PlaceOrderRequest{
		CustomerID: "cust-1", Email: "ali@example.com", Lines: []app.LineRequest{{SKU: "A1", Quantity: 2}}, Payment: payment,
	}, func(*order.Order) (int, []byte, error) { return http.StatusCreated, []byte(`{}`), nil })
	if err != nil {
		t.Fatal(err)
	}
	return resp.OrderID
}

// step is an event use case applied to an order, as the consumer applies one.
type step func(s *app.Service, ctx context.Context, txn app.Txn, ev app.Consumed, id string) (app.Outcome, error)

var (
	reserve = func(s *app.Service, ctx context.Context, txn app.Txn, ev app.Consumed, id string) (app.Outcome, error) {
		return s.MarkStockReserved(ctx, txn, ev, id)
	}
	reject = func(s *app.Service, ctx context.Context, txn app.Txn, ev app.Consumed, id string) (app.Outcome, error) {
		return s.RejectForStock(ctx, txn, ev, id, "")
	}
	authorize = func(s *app.Service, ctx context.Context, txn app.Txn, ev app.Consumed, id string) (app.Outcome, error) {
		return s.ConfirmPayment(ctx, txn, ev, id, app.PaymentAuthorization{AmountMinor: 300, Currency: "JPY"})
	}
	ship = func(s *app.Service, ctx context.Context, txn app.Txn, ev app.Consumed, id string) (app.Outcome, error) {
		return s.ShipOrder(ctx, txn, ev, id, order.Shipment{ID: uuid.NewString(), Carrier: "yamato", TrackingNumber: "1234"})
	}
	capture = func(s *app.Service, ctx context.Context, txn app.Txn, ev app.Consumed, id string) (app.Outcome, error) {
		return s.CompleteOrder(ctx, txn, ev, id)
	}
	failCapture = func(s *app.Service, ctx context.Context, txn app.Txn, ev app.Consumed, id string) (app.Outcome, error) {
		return s.FailCapture(ctx, txn, ev, id, "declined")
	}
	releaseStock = func(s *app.Service, ctx context.Context, txn app.Txn, ev app.Consumed, id string) (app.Outcome, error) {
		return s.CompleteCancellation(ctx, txn, ev, id)
	}
	void = func(s *app.Service, ctx context.Context, txn app.Txn, ev app.Consumed, id string) (app.Outcome, error) {
		return s.ReleasePayment(ctx, txn, ev, id, order.PaymentVoided)
	}
)

// slip is payment.pending with a slip that expires at expires.
func slip(expires time.Time) step {
	return func(s *app.Service, ctx context.Context, txn app.Txn, ev app.Consumed, id string) (app.Outcome, error) {
		return s.RecordPaymentSlip(ctx, txn, ev, id, order.PaymentInstructions{Method: order.MethodKonbini, Store: "lawson", PaymentCode: "123", ExpiresAt: expires})
	}
}

// apply runs the steps on order id, each in its own read-write transaction.
func (f *auditFixture) apply(t *testing.T, id string, steps ...step) {
	t.Helper()
	for i, st := range steps {
		ev := app.Consumed{Type: "test.step", ID: uuid.NewString(), AggregateType: "test", AggregateVersion: int64(i + 1)}
		var out app.Outcome
		_, err := f.client.ReadWriteTransaction(context.Background(), func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
			var err error
			out, err = st(f.svc, ctx, txn, ev, id)
			return err
		})
		if err != nil || !out.Applied {
			t.Fatalf("step %d on order %s: %+v, %v", i, id, out, err)
		}
	}
}

// cancel is the customer's cancellation.
func (f *auditFixture) cancel(t *testing.T, id string) {
	t.Helper()
	if _, err := f.svc.CancelOrder(context.Background(), "cust-1", uuid.NewString(), id, func(*order.Order) (int, []byte, error) {
		return http.StatusAccepted, []byte(`{}`), nil
	}); err != nil {
		t.Fatal(err)
	}
}

// age makes order id's last change ago before the audit's clock.
func (f *auditFixture) age(t *testing.T, id string, ago time.Duration) time.Time {
	t.Helper()
	row := ordersdb.Order{OrderId: id, UpdatedAt: f.now.Add(-ago)}
	m, err := row.UpdateColumns(ordersdb.OrderColUpdatedAt)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.Apply(context.Background(), []*spanner.Mutation{m}); err != nil {
		t.Fatal(err)
	}
	return row.UpdatedAt
}

// order places an order, applies steps and ages it; it returns the id and the time of its last
// change.
func (f *auditFixture) order(t *testing.T, payment *app.PaymentRequest, ago time.Duration, steps ...step) (string, time.Time) {
	t.Helper()
	id := f.place(t, payment)
	f.apply(t, id, steps...)
	return id, f.age(t, id, ago)
}

// call requests path with the API fixture's request helper and wants a 200 JSON answer.
func (f *auditFixture) call(t *testing.T, method, path string) []byte {
	t.Helper()
	r := (&fixture{url: f.url}).do(t, method, path, "", "")
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		t.Fatalf("%s %s = %d %s: %s", method, path, r.status, r.header.Get("Content-Type"), r.body)
	}
	return r.body
}

// metrics returns the lines of /metrics of the audit's gauges whose name starts with prefix.
func (f *auditFixture) metrics(t *testing.T, prefix string) []string {
	t.Helper()
	b := (&fixture{url: f.url}).do(t, http.MethodGet, platform.PathMetrics, "", "").body
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// errorLines returns the order ids of the ERROR log lines with message.
func (f *auditFixture) errorLines(t *testing.T, message string) []string {
	t.Helper()
	var ids []string
	for _, e := range f.logs.Entries(t) {
		if e["message"] == message {
			if e["severity"] != "ERROR" {
				t.Errorf("%q logged at %v, want ERROR", message, e["severity"])
			}
			id, _ := e["order_id"].(string)
			ids = append(ids, id)
		}
	}
	return ids
}

var zeroCounts = map[string]int{"PENDING": 0, "AWAITING_PAYMENT": 0, "CONFIRMED": 0, "SHIPPED": 0, "CANCELLING": 0}

var defaultStuckAfter = map[string]string{"PENDING": "5m0s", "AWAITING_PAYMENT": "1h0m0s", "CONFIRMED": "48h0m0s", "SHIPPED": "1h0m0s", "CANCELLING": "30m0s"}

// TestAuditHealthy: orders in every state, none past its threshold, every settled one agreeing
// with the peers: nothing is reported.
func TestAuditHealthy(t *testing.T) {
	f := newAuditFixture(t, auditOptions{})
	f.order(t, cardPayment, time.Minute)
	f.order(t, cardPayment, 30*time.Minute, reserve)
	f.order(t, konbiniPayment, 72*time.Hour, reserve, slip(f.now.Add(24*time.Hour)))
	confirmed, _ := f.order(t, cardPayment, 10*time.Minute, reserve, authorize)
	f.peers.set(confirmed, "HELD", "AUTHORIZED")
	shipped, _ := f.order(t, cardPayment, 10*time.Minute, reserve, authorize, ship)
	f.peers.set(shipped, "SHIPPED", "CAPTURE_REQUESTED")
	completed, _ := f.order(t, cardPayment, 10*time.Minute, reserve, authorize, ship, capture)
	f.peers.set(completed, "SHIPPED", "CAPTURED")
	rejected, _ := f.order(t, cardPayment, 10*time.Minute, reject)
	f.peers.set(rejected, "REJECTED")
	cancelled := f.place(t, cardPayment)
	f.apply(t, cancelled, reserve, authorize)
	f.cancel(t, cancelled)
	f.apply(t, cancelled, releaseStock, void)
	f.age(t, cancelled, 10*time.Minute)
	f.peers.set(cancelled, "RELEASED", "VOIDED")
	cancelling := f.place(t, cardPayment)
	f.cancel(t, cancelling)
	f.age(t, cancelling, 5*time.Minute)

	stuck := decode[api.StuckReport](t, f.call(t, http.MethodGet, api.PathStuckOrders))
	want := api.StuckReport{CheckedAt: f.now, StuckAfter: defaultStuckAfter, Counts: zeroCounts, Truncated: []string{}, Orders: []api.StuckOrder{}}
	if diff := cmp.Diff(want, stuck); diff != "" {
		t.Errorf("stuck orders (-want +got):\n%s", diff)
	}
	rec := decode[api.Reconciliation](t, f.call(t, http.MethodGet, api.PathReconciliation))
	wantRec := api.Reconciliation{
		Configured: true, CheckedAt: f.now, Window: api.Window{From: f.now.Add(-24 * time.Hour), To: f.now.Add(-2 * time.Minute)},
		Checked: 5, Truncated: []string{}, Mismatches: []api.Mismatch{}, Flagged: []api.Flagged{},
	}
	if diff := cmp.Diff(wantRec, rec); diff != "" {
		t.Errorf("reconciliation (-want +got):\n%s", diff)
	}
}

// TestStuckOrders: each non-terminal state past its threshold, the slip rule, and what a
// cancelling order waits for. GET has no side effects; POST /admin/audit logs one ERROR line per
// stuck order and sets orders_stuck.
func TestStuckOrders(t *testing.T) {
	f := newAuditFixture(t, auditOptions{noPeers: true})
	pending, pendingAt := f.order(t, cardPayment, 10*time.Minute)
	awaiting, awaitingAt := f.order(t, cardPayment, 2*time.Hour, reserve)
	expired := f.now.Add(-2 * time.Hour).Truncate(time.Second)
	lapsed, lapsedAt := f.order(t, konbiniPayment, 72*time.Hour, reserve, slip(expired))
	f.order(t, konbiniPayment, 72*time.Hour, reserve, slip(f.now.Add(-30*time.Minute))) // expired, within the threshold
	f.order(t, konbiniPayment, 72*time.Hour, reserve, slip(f.now.Add(24*time.Hour)))    // open
	confirmed, confirmedAt := f.order(t, cardPayment, 49*time.Hour, reserve, authorize)
	f.order(t, cardPayment, 47*time.Hour, reserve, authorize) // within its 48 h
	shipped, shippedAt := f.order(t, cardPayment, 2*time.Hour, reserve, authorize, ship)
	f.order(t, cardPayment, 30*24*time.Hour, reserve, authorize, ship, capture) // terminal
	f.order(t, cardPayment, 30*24*time.Hour, reject)                            // terminal
	both := f.place(t, cardPayment)
	f.apply(t, both, reserve, authorize)
	f.cancel(t, both)
	bothAt := f.age(t, both, time.Hour)
	money := f.place(t, cardPayment)
	f.apply(t, money, reserve, authorize)
	f.cancel(t, money)
	f.apply(t, money, releaseStock)
	moneyAt := f.age(t, money, 45*time.Minute)

	want := api.StuckReport{
		CheckedAt: f.now, StuckAfter: defaultStuckAfter, Truncated: []string{},
		Counts: map[string]int{"PENDING": 1, "AWAITING_PAYMENT": 2, "CONFIRMED": 1, "SHIPPED": 1, "CANCELLING": 2},
		Orders: []api.StuckOrder{
			{OrderID: pending, CustomerID: "cust-1", Status: "PENDING", Since: pendingAt, For: "10m0s", ForSeconds: 600, WaitingFor: "inventory decision"},
			{OrderID: lapsed, CustomerID: "cust-1", Status: "AWAITING_PAYMENT", Since: lapsedAt, For: "72h0m0s", ForSeconds: 72 * 3600, WaitingFor: "payment authorization", SlipExpiresAt: &expired},
			{OrderID: awaiting, CustomerID: "cust-1", Status: "AWAITING_PAYMENT", Since: awaitingAt, For: "2h0m0s", ForSeconds: 7200, WaitingFor: "payment authorization"},
			{OrderID: confirmed, CustomerID: "cust-1", Status: "CONFIRMED", Since: confirmedAt, For: "49h0m0s", ForSeconds: 49 * 3600, WaitingFor: "shipment"},
			{OrderID: shipped, CustomerID: "cust-1", Status: "SHIPPED", Since: shippedAt, For: "2h0m0s", ForSeconds: 7200, WaitingFor: "capture"},
			{OrderID: both, CustomerID: "cust-1", Status: "CANCELLING", Since: bothAt, For: "1h0m0s", ForSeconds: 3600, WaitingFor: "stock release and payment void/refund",
				PendingCompensations: []string{"stock", "payment"}, CancelReason: "customer_request"},
			{OrderID: money, CustomerID: "cust-1", Status: "CANCELLING", Since: moneyAt, For: "45m0s", ForSeconds: 2700, WaitingFor: "payment void/refund",
				PendingCompensations: []string{"payment"}, CancelReason: "customer_request"},
		},
	}
	got := decode[api.StuckReport](t, f.call(t, http.MethodGet, api.PathStuckOrders))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GET %s (-want +got):\n%s", api.PathStuckOrders, diff)
	}
	if m := f.metrics(t, "orders_"); len(m) != 0 || len(f.errorLines(t, "stuck order")) != 0 {
		t.Errorf("GET had side effects: gauges %v, logs %v", m, f.logs.Entries(t))
	}

	audit := decode[api.AuditReport](t, f.call(t, http.MethodPost, api.PathAudit))
	if diff := cmp.Diff(want, audit.Stuck); diff != "" {
		t.Errorf("POST %s: stuck (-want +got):\n%s", api.PathAudit, diff)
	}
	if diff := cmp.Diff(api.Reconciliation{Detail: "no peers to compare with: FULFILLMENT_URL and GATEWAY_URL are not set"}, audit.Reconciliation); diff != "" {
		t.Errorf("POST %s: reconciliation (-want +got):\n%s", api.PathAudit, diff)
	}
	if diff := cmp.Diff([]string{pending, lapsed, awaiting, confirmed, shipped, both, money}, f.errorLines(t, "stuck order")); diff != "" {
		t.Errorf("ERROR lines (-want +got):\n%s", diff)
	}
	wantGauges := []string{
		`orders_stuck{status="AWAITING_PAYMENT"} 2`, `orders_stuck{status="CANCELLING"} 2`, `orders_stuck{status="CONFIRMED"} 1`,
		`orders_stuck{status="PENDING"} 1`, `orders_stuck{status="SHIPPED"} 1`,
	}
	if diff := cmp.Diff(wantGauges, f.metrics(t, "orders_")); diff != "" {
		t.Errorf("gauges (-want +got):\n%s", diff)
	}

	// A stuck order that moves on is no longer reported, and its gauge goes back to zero.
	f.apply(t, shipped, capture)
	f.call(t, http.MethodPost, api.PathAudit)
	if m := f.metrics(t, "orders_"); !cmp.Equal(m[len(m)-1], `orders_stuck{status="SHIPPED"} 0`) {
		t.Errorf("after the capture: %v", m)
	}
}

// TestStuckOrdersWaitingForAPayout: a cancelling order whose money is all it waits for, and
// whose refund the gateway says the provider accepted and has not paid out (REFUND_PENDING), is
// waiting, not stuck, for five days (DefaultRefundPayout); after that it is reported waiting for
// the payout. Its stock being late, another payment state, or a gateway that does not answer keep
// the plain rule.
func TestStuckOrdersWaitingForAPayout(t *testing.T) {
	f := newAuditFixture(t, auditOptions{})
	paidSlip := func(ago time.Duration, stockReleased bool, payment string) (string, time.Time) {
		t.Helper()
		id := f.place(t, konbiniPayment)
		f.apply(t, id, reserve, slip(f.now.Add(72*time.Hour)), authorize)
		f.cancel(t, id)
		if stockReleased {
			f.apply(t, id, releaseStock)
		}
		f.peers.set(id, "RELEASED", payment)
		return id, f.age(t, id, ago)
	}
	paidSlip(2*24*time.Hour, true, "REFUND_PENDING") // waiting for the payout
	late, lateAt := paidSlip(6*24*time.Hour, true, "REFUND_PENDING")
	stock, stockAt := paidSlip(time.Hour, false, "REFUND_PENDING")
	voiding, voidingAt := paidSlip(90*time.Minute, true, "REFUND_REQUESTED")
	payout := []string{"payment"}
	want := []api.StuckOrder{
		{OrderID: late, CustomerID: "cust-1", Status: "CANCELLING", Since: lateAt, For: "144h0m0s", ForSeconds: 144 * 3600,
			WaitingFor: "refund payout by the payment provider", PendingCompensations: payout, CancelReason: "customer_request"},
		{OrderID: voiding, CustomerID: "cust-1", Status: "CANCELLING", Since: voidingAt, For: "1h30m0s", ForSeconds: 5400,
			WaitingFor: "payment void/refund", PendingCompensations: payout, CancelReason: "customer_request"},
		{OrderID: stock, CustomerID: "cust-1", Status: "CANCELLING", Since: stockAt, For: "1h0m0s", ForSeconds: 3600,
			WaitingFor: "stock release and refund payout by the payment provider", PendingCompensations: []string{"stock", "payment"},
			CancelReason: "customer_request"},
	}
	got := decode[api.StuckReport](t, f.call(t, http.MethodGet, api.PathStuckOrders))
	if diff := cmp.Diff(want, got.Orders); diff != "" || got.Counts["CANCELLING"] != 3 { // oldest change first
		t.Errorf("stuck orders, %d cancelling (-want +got):\n%s", got.Counts["CANCELLING"], diff)
	}

	// The gateway does not answer: every cancelling order past its 30 minutes is reported.
	f.peers.mu.Lock()
	f.peers.refuse = true
	f.peers.mu.Unlock()
	got = decode[api.StuckReport](t, f.call(t, http.MethodGet, api.PathStuckOrders))
	if got.Counts["CANCELLING"] != 4 {
		t.Errorf("with the gateway refusing: %d cancelling orders stuck, want 4: %+v", got.Counts["CANCELLING"], got.Orders)
	}
	for _, o := range got.Orders {
		if strings.Contains(o.WaitingFor, "payout") {
			t.Errorf("order %s waits for %q although the gateway did not say so", o.OrderID, o.WaitingFor)
		}
	}
}

// TestStuckOrdersLimit: the list stops at the limit and says so; open slips are paged past, so
// they do not hide stuck card orders behind them in the index.
func TestStuckOrdersLimit(t *testing.T) {
	f := newAuditFixture(t, auditOptions{noPeers: true, stuckLimit: 2})
	for i := range 4 { // older than the card orders: first in the index
		f.order(t, konbiniPayment, 3*time.Hour+time.Duration(i)*time.Second, reserve, slip(f.now.Add(24*time.Hour)))
	}
	var cards []string
	for i := range 3 {
		id, _ := f.order(t, cardPayment, 2*time.Hour-time.Duration(i)*time.Second, reserve)
		cards = append(cards, id)
	}
	for range 2 { // exactly the limit: not truncated
		f.order(t, cardPayment, 10*time.Minute)
	}
	got := decode[api.StuckReport](t, f.call(t, http.MethodGet, api.PathStuckOrders))
	var awaiting []string
	for _, o := range got.Orders {
		if o.Status == "AWAITING_PAYMENT" {
			awaiting = append(awaiting, o.OrderID)
		}
	}
	if diff := cmp.Diff(cards[:2], awaiting); diff != "" {
		t.Errorf("stuck awaiting orders (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"AWAITING_PAYMENT"}, got.Truncated); diff != "" {
		t.Errorf("truncated (-want +got):\n%s", diff)
	}
	if got.Counts["PENDING"] != 2 || got.Counts["AWAITING_PAYMENT"] != 2 {
		t.Errorf("counts = %v", got.Counts)
	}
}

// TestReconciliationMismatches: every check, against peers that contradict the order; orders not
// yet settled or outside the window are not compared; NEEDS_ATTENTION is flagged. POST
// /admin/audit logs each mismatch and sets orders_reconciliation_mismatches.
func TestReconciliationMismatches(t *testing.T) {
	f := newAuditFixture(t, auditOptions{})
	const settled = 10 * time.Minute
	type wantMismatch struct {
		id       string
		status   string
		check    string
		problems []string
	}
	var wants []wantMismatch
	mismatch := func(id, status, check string, problems ...string) {
		wants = append(wants, wantMismatch{id, status, check, problems})
	}

	c1, _ := f.order(t, cardPayment, settled+time.Second, reserve, authorize)
	f.peers.set(c1, "RELEASED", "AUTHORIZED")
	mismatch(c1, "CONFIRMED", "confirmed", "fulfillment: reservation RELEASED, want HELD")
	c2, _ := f.order(t, cardPayment, settled, reserve, authorize)
	f.peers.set(c2, "HELD", "VOIDED")
	mismatch(c2, "CONFIRMED", "confirmed", "gateway: payment "+paymentID(c2, 0)+" is VOIDED, want AUTHORIZED or CAPTURE_REQUESTED")
	s1, _ := f.order(t, cardPayment, settled, reserve, authorize, ship)
	f.peers.set(s1, "HELD", "CAPTURE_REQUESTED")
	mismatch(s1, "SHIPPED", "shipped", "fulfillment: reservation HELD, want SHIPPED")
	done, _ := f.order(t, cardPayment, settled, reserve, authorize, ship, capture)
	f.peers.set(done, "SHIPPED", "CAPTURE_REQUESTED")
	mismatch(done, "COMPLETED", "completed", "gateway: payment "+paymentID(done, 0)+" is CAPTURE_REQUESTED, want CAPTURED")
	x1, _ := f.order(t, cardPayment, settled+3*time.Second, reject)
	f.peers.set(x1, "HELD")
	mismatch(x1, "CANCELLED", "cancelled", "fulfillment: reservation HELD, want no reservation or RELEASED or REJECTED")
	x2, _ := f.order(t, cardPayment, settled+2*time.Second, reject)
	f.peers.set(x2, "RELEASED", "AUTHORIZED")
	mismatch(x2, "CANCELLED", "cancelled", "gateway: payment "+paymentID(x2, 0)+" is AUTHORIZED: money may be held, want none or FAILED, EXPIRED, VOIDED, REFUNDED")
	x3, _ := f.order(t, cardPayment, settled+time.Second, reject)
	f.peers.set(x3, "", "PENDING")
	mismatch(x3, "CANCELLED", "cancelled", "gateway: payment "+paymentID(x3, 0)+" is PENDING: money may be held, want none or FAILED, EXPIRED, VOIDED, REFUNDED")
	fine, _ := f.order(t, cardPayment, settled, reject) // no reservation, no payment: nothing held
	f.peers.set(fine, "")
	flagged, flaggedAt := f.order(t, cardPayment, settled, reserve, authorize, ship, failCapture)
	f.peers.set(flagged, "SHIPPED", "CAPTURE_FAILED")
	fresh, _ := f.order(t, cardPayment, time.Minute, reserve, authorize) // not settled
	f.peers.set(fresh, "RELEASED", "VOIDED")
	old, _ := f.order(t, cardPayment, 25*time.Hour, reserve, authorize, ship, capture) // outside the window
	f.peers.set(old, "HELD", "AUTHORIZED")

	rec := decode[api.Reconciliation](t, f.call(t, http.MethodGet, api.PathReconciliation))
	if rec.Checked != 9 || rec.Partial {
		t.Errorf("checked %v, partial %v; want 9, false", rec.Checked, rec.Partial)
	}
	var got []wantMismatch
	for _, m := range rec.Mismatches {
		got = append(got, wantMismatch{m.OrderID, m.Status, m.Check, m.Problems})
	}
	if diff := cmp.Diff(wants, got, cmp.AllowUnexported(wantMismatch{})); diff != "" {
		t.Errorf("mismatches (-want +got):\n%s", diff)
	}
	// What the peers said is in the report, as they said it.
	released := "RELEASED"
	wantPeers := api.Mismatch{
		OrderID: x2, Status: "CANCELLED", Check: "cancelled", Since: rec.Mismatches[5].Since, Problems: wants[5].problems,
		Fulfillment: api.PeerFulfillment{Reservation: &released},
		Gateway:     api.PeerGateway{Payments: []api.PeerPayment{{ID: paymentID(x2, 0), Status: "AUTHORIZED"}}},
	}
	if diff := cmp.Diff(wantPeers, rec.Mismatches[5]); diff != "" {
		t.Errorf("mismatch of %s (-want +got):\n%s", x2, diff)
	}
	if m := rec.Mismatches[6]; m.Fulfillment.Reservation != nil || m.Fulfillment.Error != "" {
		t.Errorf("no reservation is shown as %+v, want null", m.Fulfillment)
	}
	shippedStatus := "SHIPPED"
	wantFlagged := []api.Flagged{{
		OrderID: flagged, Since: flaggedAt, AttentionReason: "capture_failed_declined",
		Fulfillment: api.PeerFulfillment{Reservation: &shippedStatus},
		Gateway:     api.PeerGateway{Payments: []api.PeerPayment{{ID: paymentID(flagged, 0), Status: "CAPTURE_FAILED"}}},
	}}
	if diff := cmp.Diff(wantFlagged, rec.Flagged); diff != "" {
		t.Errorf("flagged (-want +got):\n%s", diff)
	}
	if m := f.metrics(t, "orders_"); len(m) != 0 {
		t.Errorf("GET set gauges: %v", m)
	}

	f.call(t, http.MethodPost, api.PathAudit)
	var wantIDs []string
	for _, w := range wants {
		wantIDs = append(wantIDs, w.id)
	}
	if diff := cmp.Diff(wantIDs, f.errorLines(t, "reconciliation mismatch")); diff != "" {
		t.Errorf("ERROR lines (-want +got):\n%s", diff)
	}
	wantGauges := []string{
		`orders_reconciliation_mismatches{check="cancelled"} 3`, `orders_reconciliation_mismatches{check="completed"} 1`,
		`orders_reconciliation_mismatches{check="confirmed"} 2`, `orders_reconciliation_mismatches{check="shipped"} 1`,
		`orders_reconciliation_unchecked{peer="fulfillment"} 0`, `orders_reconciliation_unchecked{peer="gateway-abstraction"} 0`,
	}
	if diff := cmp.Diff(wantGauges, f.metrics(t, "orders_reconciliation_")); diff != "" {
		t.Errorf("gauges (-want +got):\n%s", diff)
	}
	// One order on its own: what it alone would report, without a whole run.
	one := decode[api.Reconciliation](t, f.call(t, http.MethodGet, api.PathReconciliation+"?order_id="+x2))
	if len(one.Mismatches) != 1 || one.Mismatches[0].OrderID != x2 || len(one.Flagged) != 0 {
		t.Errorf("reconciliation of %s alone = %+v, want its one mismatch", x2, one)
	}
	for q, want := range map[string]int{"?order_id=nope": http.StatusBadRequest, "?order_id=" + uuid.NewString(): http.StatusNotFound} {
		if r := (&fixture{url: f.url}).do(t, http.MethodGet, api.PathReconciliation+q, "", ""); r.status != want {
			t.Errorf("GET %s%s = %d, want %d", api.PathReconciliation, q, r.status, want)
		}
	}
	if diff := cmp.Diff([]string{flagged}, f.errorLines(t, "order needs attention")); diff != "" {
		t.Errorf("ERROR lines for orders that need attention (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{`orders_needing_attention{reason="capture_failed_declined"} 1`}, f.metrics(t, "orders_needing_attention")); diff != "" {
		t.Errorf("attention gauge (-want +got):\n%s", diff)
	}
}

// TestReconciliationPartial: a peer that cannot be reached, or refuses, makes the report partial
// and says why; what the other peer says is still checked.
func TestReconciliationPartial(t *testing.T) {
	for _, tt := range []struct {
		name      string
		breakPeer func(p *fakePeers)
		peer      string
		error     string // in the report's unreachable
	}{
		{"fulfillment down", func(p *fakePeers) { p.fulfillment.Close() }, "fulfillment", "fulfillment: GET "},
		{"gateway refuses", func(p *fakePeers) {
			p.mu.Lock()
			p.refuse = true
			p.mu.Unlock()
		}, "gateway-abstraction", "status 403: "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newAuditFixture(t, auditOptions{})
			held, _ := f.order(t, cardPayment, 10*time.Minute, reject)
			f.peers.set(held, "HELD", "AUTHORIZED")
			var ids []string
			for range 4 {
				id, _ := f.order(t, cardPayment, 10*time.Minute, reserve, authorize)
				f.peers.set(id, "HELD", "AUTHORIZED")
				ids = append(ids, id)
			}
			tt.breakPeer(f.peers)

			rep := decode[api.AuditReport](t, f.call(t, http.MethodPost, api.PathAudit)).Reconciliation
			if !rep.Partial || rep.Checked != 0 {
				t.Fatalf("partial %v, checked %v; want true, 0", rep.Partial, rep.Checked)
			}
			if diff := cmp.Diff(map[string]int{tt.peer: 5}, rep.Unchecked); diff != "" {
				t.Errorf("unchecked (-want +got):\n%s", diff)
			}
			if msg := rep.Unreachable[tt.peer]; len(rep.Unreachable) != 1 || !strings.Contains(msg, tt.error) {
				t.Errorf("unreachable = %v, want %s: ...%s...", rep.Unreachable, tt.peer, tt.error)
			}
			// The cancelled order still holds something by the peer that answered.
			if len(rep.Mismatches) != 1 || rep.Mismatches[0].OrderID != held || len(rep.Mismatches[0].Problems) != 1 {
				t.Fatalf("mismatches = %+v, want the cancelled order's, by the peer that answered", rep.Mismatches)
			}
			if m := rep.Mismatches[0]; m.Fulfillment.Error == "" && m.Gateway.Error == "" {
				t.Errorf("the mismatch does not say which peer did not answer: %+v", m)
			}
			e := f.logs.Find(t, "reconciliation partial: a peer did not answer")
			if e["severity"] != "ERROR" || e["peer"] != tt.peer || e["unchecked"] != float64(5) {
				t.Errorf("log line = %v", e)
			}
			want := `orders_reconciliation_unchecked{peer="` + tt.peer + `"} 5`
			if m := f.metrics(t, "orders_"); !strings.Contains(strings.Join(m, "\n"), want) {
				t.Errorf("gauges %v, want %s", m, want)
			}
		})
	}
}
