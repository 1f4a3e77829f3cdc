package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/spanmart/spanmart/gen/dao/ordersdb"
	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/pkg/spannertest"
	"github.com/spanmart/spanmart/services/orders/internal/app"
	"github.com/spanmart/spanmart/services/orders/internal/events"
	"github.com/spanmart/spanmart/services/orders/internal/order"
	"github.com/spanmart/spanmart/services/orders/internal/orderstest"
	"github.com/spanmart/spanmart/services/orders/internal/store"
)

var env *spannertest.Env

func TestMain(m *testing.M) { os.Exit(spannertest.Main(m, &env)) }

var (
	card    = &app.PaymentRequest{Method: "card", Fields: map[string]string{"payment_method": "pm_card_visa"}}
	wallet  = &app.PaymentRequest{Method: "wallet"}
	konbini = &app.PaymentRequest{Method: "konbini", Fields: map[string]string{"store": "lawson"}}
	bank    = &app.PaymentRequest{Method: "bank_transfer"}
)

// fixture is a fresh seeded database with the service and its handlers, as run wires them.
type fixture struct {
	client   *spanner.Client
	svc      *app.Service
	handlers map[string]outboxlib.HandlerFunc
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	client, _ := env.NewDatabase(t, dbschema.Orders)
	orderstest.Seed(t, client)
	svc := app.New(store.New(client), nil)
	return &fixture{client: client, svc: svc, handlers: events.Handlers(svc)}
}

// placeOrder creates a PENDING order (A1 ×2, B2 ×1: 1300 JPY) through the use case, as
// POST /v1/orders does.
func (f *fixture) placeOrder(t *testing.T, payment *app.PaymentRequest, email string) string {
	t.Helper()
	resp, err := f.svc.PlaceOrder(context.Background(), "cust-1", uuid.NewString(), app.PlaceOrderRequest{
		CustomerID: "cust-1", Email: email, Lines: []app.LineRequest{{SKU: "A1", Quantity: 2}, {SKU: "B2", Quantity: 1}}, Payment: payment,
	}, func(o *order.Order) (int, []byte, error) { return http.StatusCreated, []byte(`{}`), nil })
	if err != nil {
		t.Fatal(err)
	}
	return resp.OrderID
}

// awaitingPayment places an order and applies its inventory.reserved.
func (f *fixture) awaitingPayment(t *testing.T, payment *app.PaymentRequest, email string) string {
	t.Helper()
	id := f.placeOrder(t, payment, email)
	if err := f.handle(t, reservation(t, events.InventoryReserved, id, 1, map[string]any{"order_id": id})); err != nil {
		t.Fatal(err)
	}
	return id
}

// handle runs the handler of d's type in a real read-write transaction, as the consumer does.
func (f *fixture) handle(t *testing.T, d outboxlib.Delivery) error {
	t.Helper()
	_, err := f.handleNoted(t, d)
	return err
}

// handleNoted is handle, and returns the notes of the attempt that committed (outboxlib.Note logs
// them when called outside a consumer).
func (f *fixture) handleNoted(t *testing.T, d outboxlib.Delivery) ([]string, error) {
	t.Helper()
	h, ok := f.handlers[d.Type]
	if !ok {
		t.Fatalf("no handler for %s", d.Type)
	}
	var logs *observer.ObservedLogs
	_, err := f.client.ReadWriteTransaction(context.Background(), func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		var core zapcore.Core
		core, logs = observer.New(zapcore.InfoLevel)
		return h(platform.WithLogger(ctx, zap.New(core)), txn, d)
	})
	var notes []string
	for _, e := range logs.All() {
		notes = append(notes, e.Message)
	}
	return notes, err
}

func delivery(t *testing.T, typ, source, aggType, aggID string, version int64, payload any) outboxlib.Delivery {
	t.Helper()
	body, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	return outboxlib.Delivery{Event: outboxlib.Event{
		ID: uuid.NewString(), Type: typ, Source: source, AggregateType: aggType,
		AggregateID: aggID, AggregateVersion: version, SchemaVersion: 1, OccurredAt: time.Now(), Payload: body,
	}}
}

// reservation is a fulfillment event: aggregate "reservation", id = the order id.
func reservation(t *testing.T, typ, orderID string, version int64, payload any) outboxlib.Delivery {
	return delivery(t, typ, "//spanmart/fulfillment", "reservation", orderID, version, payload)
}

// payment is a gateway event about orderID's payment (aggregate "payment", id = the payment id),
// with the payload's usual members plus extra.
func payment(t *testing.T, typ, orderID, method string, version int64, extra map[string]any) outboxlib.Delivery {
	t.Helper()
	paymentID := uuid.NewSHA1(uuid.NameSpaceOID, []byte(orderID)).String()
	p := map[string]any{
		"payment_id": paymentID, "order_id": orderID, "method": method, "provider": "stripe",
		"status": "AUTHORIZED", "amount_minor": 1300, "currency": "JPY",
	}
	for k, v := range extra {
		p[k] = v
	}
	return delivery(t, typ, "//spanmart/gateway-abstraction", "payment", paymentID, version, p)
}

func orderRow(t *testing.T, s orderstest.State, id string) *ordersdb.Order {
	t.Helper()
	for _, o := range s.Orders {
		if o.OrderId == id {
			return o
		}
	}
	t.Fatalf("no order %s", id)
	return nil
}

func TestInventoryReserved(t *testing.T) {
	f := newFixture(t)
	id := f.placeOrder(t, card, "ali@example.com")
	d := reservation(t, events.InventoryReserved, id, 1, map[string]any{"order_id": id, "lines": []any{}})
	if err := f.handle(t, d); err != nil {
		t.Fatal(err)
	}
	s := orderstest.Read(t, f.client)
	if o := s.Orders[0]; o.Status != "AWAITING_PAYMENT" || o.Version != 2 || o.CancelReason.Valid {
		t.Errorf("order = %+v, want AWAITING_PAYMENT version 2", o)
	}
	if len(s.Outbox) != 2 || s.Outbox[1].EventType != "order.awaiting_payment" || s.Outbox[1].AggregateVersion != 2 || s.Outbox[1].AggregateId != id {
		t.Fatalf("outbox = %+v, want order.created v1 and order.awaiting_payment v2", s.Outbox)
	}
	want := map[string]any{
		"order_id": id, "customer_id": "cust-1", "status": "AWAITING_PAYMENT", "currency": "JPY", "total_minor": float64(1300),
		"email": "ali@example.com", "language": "ja", "payment": map[string]any{"method": "card", "payment_method": "pm_card_visa"},
	}
	if diff := cmp.Diff(want, orderstest.Payload(t, s.Outbox[1])); diff != "" {
		t.Errorf("order.awaiting_payment payload (-want +got):\n%s", diff)
	}
	checkTimeline(t, s, id, []string{"emitted order.created 1", "consumed inventory.reserved 1", "emitted order.awaiting_payment 2"})
	if s.Timeline[1].EventId != d.ID || s.Timeline[2].EventId != s.Outbox[1].EventId {
		t.Errorf("timeline event ids = %s, %s", s.Timeline[1].EventId, s.Timeline[2].EventId)
	}

	// A rejection arriving after the reservation finds the order moved on: a no-op that is still
	// on the timeline, with no new event.
	late := reservation(t, events.InventoryRejected, id, 2, map[string]any{"order_id": id, "reason": "out_of_stock"})
	if err := f.handle(t, late); err != nil {
		t.Fatalf("a late event = %v, want nil (no-op)", err)
	}
	s = orderstest.Read(t, f.client)
	if o := s.Orders[0]; o.Status != "AWAITING_PAYMENT" || o.Version != 2 {
		t.Errorf("order after a late event = %+v", o)
	}
	if len(s.Outbox) != 2 {
		t.Errorf("a late event emitted %d events", len(s.Outbox)-2)
	}
	checkTimeline(t, s, id, []string{"emitted order.created 1", "consumed inventory.reserved 1", "emitted order.awaiting_payment 2", "consumed inventory.rejected 2"})
}

// TestAwaitingPaymentPayload: order.awaiting_payment carries the payment of every method and the
// e-mail address when there is one; the other events carry neither.
func TestAwaitingPaymentPayload(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		payment *app.PaymentRequest
		email   string
		want    map[string]any
	}{
		{card, "", map[string]any{"method": "card", "payment_method": "pm_card_visa"}},
		{wallet, "", map[string]any{"method": "wallet"}},
		{konbini, "ali@example.com", map[string]any{"method": "konbini", "store": "lawson"}},
		{bank, "bob@example.com", map[string]any{"method": "bank_transfer"}},
	}
	for _, tt := range tests {
		t.Run(tt.payment.Method, func(t *testing.T) {
			id := f.awaitingPayment(t, tt.payment, tt.email)
			s := orderstest.Read(t, f.client)
			for _, e := range s.Outbox {
				if e.AggregateId != id {
					continue
				}
				p := orderstest.Payload(t, e)
				// Every order event carries the contact, so whoever writes to the customer
				// needs nothing else; only order.awaiting_payment carries the payment.
				if p["email"] != tt.email || p["language"] != "ja" {
					t.Errorf("%s: email %v language %v, want %q ja", e.EventType, p["email"], p["language"], tt.email)
				}
				if e.EventType != order.EventAwaitingPayment {
					if p["payment"] != nil {
						t.Errorf("%s carries the payment: %v", e.EventType, p)
					}
					continue
				}
				if diff := cmp.Diff(tt.want, p["payment"]); diff != "" {
					t.Errorf("payment (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestInventoryRejected(t *testing.T) {
	f := newFixture(t)
	id := f.placeOrder(t, wallet, "")
	d := reservation(t, events.InventoryRejected, id, 1, map[string]any{"order_id": id, "reason": "out_of_stock", "lines": []any{map[string]any{"sku": "A1"}}})
	if err := f.handle(t, d); err != nil {
		t.Fatal(err)
	}
	s := orderstest.Read(t, f.client)
	if o := s.Orders[0]; o.Status != "CANCELLED" || o.Version != 2 || o.CancelReason.StringVal != "out_of_stock" {
		t.Errorf("order = %+v, want CANCELLED version 2 out_of_stock", o)
	}
	if len(s.Outbox) != 2 || s.Outbox[1].EventType != "order.cancelled" || s.Outbox[1].AggregateVersion != 2 {
		t.Fatalf("outbox = %+v", s.Outbox)
	}
	if p := orderstest.Payload(t, s.Outbox[1]); p["reason"] != "out_of_stock" || p["status"] != "CANCELLED" || len(p["lines"].([]any)) != 2 {
		t.Errorf("order.cancelled payload = %v", p)
	}
	checkTimeline(t, s, id, []string{"emitted order.created 1", "consumed inventory.rejected 1", "emitted order.cancelled 2"})

	// Fulfillment releases every cancelled order, a rejected one too (it held nothing): the
	// order is already CANCELLED, so the release is only noted.
	if err := f.handle(t, reservation(t, events.InventoryReleased, id, 2, map[string]any{"order_id": id, "lines": []any{}})); err != nil {
		t.Fatalf("inventory.released for a rejected order = %v, want nil", err)
	}
	s = orderstest.Read(t, f.client)
	if o := s.Orders[0]; o.Status != "CANCELLED" || o.Version != 2 || len(s.Outbox) != 2 {
		t.Errorf("after the release: %+v, %d events", o, len(s.Outbox))
	}
	checkTimeline(t, s, id, []string{"emitted order.created 1", "consumed inventory.rejected 1", "emitted order.cancelled 2", "consumed inventory.released 2"})
}

func TestPaymentAuthorized(t *testing.T) {
	f := newFixture(t)
	id := f.awaitingPayment(t, card, "ali@example.com")
	d := payment(t, events.PaymentAuthorized, id, "card", 1, nil)
	notes, err := f.handleNoted(t, d)
	if err != nil {
		t.Fatal(err)
	}
	if want := "payment.authorized: order " + id + " AWAITING_PAYMENT → CONFIRMED"; len(notes) != 1 || notes[0] != want {
		t.Errorf("notes = %q, want %q", notes, want)
	}
	s := orderstest.Read(t, f.client)
	if o := s.Orders[0]; o.Status != "CONFIRMED" || o.Version != 3 {
		t.Errorf("order = %+v, want CONFIRMED version 3", o)
	}
	if len(s.Outbox) != 3 || s.Outbox[2].EventType != "order.confirmed" || s.Outbox[2].AggregateVersion != 3 {
		t.Fatalf("outbox = %+v", s.Outbox)
	}
	if p := orderstest.Payload(t, s.Outbox[2]); p["status"] != "CONFIRMED" || p["total_minor"] != float64(1300) || p["payment"] != nil {
		t.Errorf("order.confirmed payload = %v", p)
	}
	checkTimeline(t, s, id, []string{"emitted order.created 1", "consumed inventory.reserved 1", "emitted order.awaiting_payment 2", "consumed payment.authorized 1", "emitted order.confirmed 3"})
	if tl := s.Timeline[3]; tl.EventId != d.ID || tl.AggregateType != "payment" {
		t.Errorf("consumed timeline row = %+v", tl)
	}

	// A payment failure after the authorization (the order has moved on) is only noted.
	if err := f.handle(t, payment(t, events.PaymentFailed, id, "card", 2, map[string]any{"reason": "declined"})); err != nil {
		t.Fatalf("a late payment.failed = %v, want nil", err)
	}
	s = orderstest.Read(t, f.client)
	if o := s.Orders[0]; o.Status != "CONFIRMED" || o.Version != 3 || o.CancelReason.Valid || len(s.Outbox) != 3 {
		t.Errorf("after a late failure: %+v, %d events", o, len(s.Outbox))
	}
	checkTimeline(t, s, id, []string{"emitted order.created 1", "consumed inventory.reserved 1", "emitted order.awaiting_payment 2", "consumed payment.authorized 1", "emitted order.confirmed 3", "consumed payment.failed 2"})
}

// TestPaymentAuthorizedForAnotherAmount: an authorization that is not the order's total is never
// a confirmation: permanent (dead-lettered for an operator), nothing written.
func TestPaymentAuthorizedForAnotherAmount(t *testing.T) {
	f := newFixture(t)
	id := f.awaitingPayment(t, card, "")
	before := orderstest.Read(t, f.client)
	for _, extra := range []map[string]any{{"amount_minor": 1299}, {"currency": "USD"}, {"amount_minor": nil}} {
		err := f.handle(t, payment(t, events.PaymentAuthorized, id, "card", 1, extra))
		if !outboxlib.IsPermanent(err) || !errors.Is(err, order.ErrInvalid) {
			t.Errorf("authorization %v: err = %v, want permanent ErrInvalid", extra, err)
		}
	}
	after := orderstest.Read(t, f.client)
	if o := after.Orders[0]; o.Status != "AWAITING_PAYMENT" || len(after.Outbox) != len(before.Outbox) || len(after.Timeline) != len(before.Timeline) {
		t.Errorf("a refused authorization wrote: %+v, %d events, %d timeline rows", o, len(after.Outbox), len(after.Timeline))
	}
}

var lawsonSlip = map[string]any{
	"method": "konbini", "store": "lawson", "payment_code": "LW-123456", "confirmation_code": "7890",
	"instructions_url": "https://komoju.test/slips/lw-1", "expires_at": "2026-12-09T23:59:59+09:00",
}

// TestPaymentPending: the slip is stored on the order, which stays AWAITING_PAYMENT at its version
// with no event; the use case's read shows it; the payment's authorization then confirms the order
// and the slip stays.
func TestPaymentPending(t *testing.T) {
	f := newFixture(t)
	id := f.awaitingPayment(t, konbini, "ali@example.com")
	d := payment(t, events.PaymentPending, id, "konbini", 1, map[string]any{"provider": "komoju", "status": "PENDING", "slip": lawsonSlip})
	if err := f.handle(t, d); err != nil {
		t.Fatal(err)
	}
	s := orderstest.Read(t, f.client)
	o := s.Orders[0]
	if o.Status != "AWAITING_PAYMENT" || o.Version != 2 || len(s.Outbox) != 2 {
		t.Errorf("after payment.pending: %s version %d, %d events; want AWAITING_PAYMENT 2, 2", o.Status, o.Version, len(s.Outbox))
	}
	if !o.PaymentInstructions.Valid {
		t.Fatal("no PaymentInstructions")
	}
	checkTimeline(t, s, id, []string{"emitted order.created 1", "consumed inventory.reserved 1", "emitted order.awaiting_payment 2", "consumed payment.pending 1"})

	got, _, err := f.svc.Order(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	want := &order.PaymentInstructions{
		Method: order.MethodKonbini, Store: "lawson", PaymentCode: "LW-123456", ConfirmationCode: "7890",
		InstructionsURL: "https://komoju.test/slips/lw-1", ExpiresAt: time.Date(2026, 12, 9, 14, 59, 59, 0, time.UTC),
	}
	if diff := cmp.Diff(want, got.PaymentInstructions()); diff != "" {
		t.Errorf("instructions (-want +got):\n%s", diff)
	}

	// A slip issued again replaces the first; its method may be spelled in the gateway's own
	// vocabulary, the payment's method is what counts.
	again := map[string]any{}
	for k, v := range lawsonSlip {
		again[k] = v
	}
	again["method"], again["payment_code"] = "KONBINI", "LW-654321"
	if err := f.handle(t, payment(t, events.PaymentPending, id, "konbini", 2, map[string]any{"slip": again})); err != nil {
		t.Fatal(err)
	}
	got, _, err = f.svc.Order(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if in := got.PaymentInstructions(); in == nil || in.Method != order.MethodKonbini || in.PaymentCode != "LW-654321" || got.Version() != 2 {
		t.Errorf("after a second slip: %+v", got.Snapshot())
	}

	if err := f.handle(t, payment(t, events.PaymentAuthorized, id, "konbini", 3, map[string]any{"provider": "komoju"})); err != nil {
		t.Fatal(err)
	}
	got, _, err = f.svc.Order(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status() != order.Confirmed || got.Version() != 3 || got.PaymentInstructions() == nil {
		t.Errorf("after the slip was paid: %+v", got.Snapshot())
	}
}

func TestPaymentPendingBankTransfer(t *testing.T) {
	f := newFixture(t)
	id := f.awaitingPayment(t, bank, "ali@example.com")
	slip := map[string]any{
		"method": "bank_transfer", "expires_at": "2026-12-09T15:00:00Z", "instructions_url": "https://komoju.test/slips/bt-1",
		"bank": map[string]any{"bank_name": "Mizuho", "branch_name": "Shibuya", "account_type": "ordinary", "account_number": "1234567", "account_holder": "KOMOJU"},
	}
	if err := f.handle(t, payment(t, events.PaymentPending, id, "bank_transfer", 1, map[string]any{"slip": slip})); err != nil {
		t.Fatal(err)
	}
	got, _, err := f.svc.Order(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	want := &order.PaymentInstructions{
		Method: order.MethodBankTransfer, InstructionsURL: "https://komoju.test/slips/bt-1", ExpiresAt: time.Date(2026, 12, 9, 15, 0, 0, 0, time.UTC),
		Bank: &order.BankAccount{BankName: "Mizuho", BranchName: "Shibuya", AccountType: "ordinary", AccountNumber: "1234567", AccountHolder: "KOMOJU"},
	}
	if diff := cmp.Diff(want, got.PaymentInstructions()); diff != "" {
		t.Errorf("instructions (-want +got):\n%s", diff)
	}
}

// TestPaymentFailedOrExpired: AWAITING_PAYMENT → CANCELLING with "payment_" + the reason and
// order.cancelled with the lines; fulfillment's inventory.released then completes the
// cancellation.
func TestPaymentFailedOrExpired(t *testing.T) {
	tests := []struct {
		typ, method string
		payment     *app.PaymentRequest
		reason      any // the payload's reason; nil: absent
		want        string
	}{
		{events.PaymentFailed, "card", card, "declined", "payment_declined"},
		{events.PaymentFailed, "card", card, "insufficient_funds", "payment_insufficient_funds"},
		{events.PaymentFailed, "card", card, "authentication_failed", "payment_authentication_failed"},
		{events.PaymentFailed, "wallet", wallet, "provider_unavailable", "payment_provider_unavailable"},
		{events.PaymentFailed, "card", card, "invalid_request", "payment_invalid_request"},
		{events.PaymentFailed, "card", card, nil, "payment_failed"},
		{events.PaymentExpired, "konbini", konbini, "expired", "payment_expired"},
		{events.PaymentExpired, "bank_transfer", bank, nil, "payment_expired"},
	}
	for _, tt := range tests {
		t.Run(tt.want+" "+tt.method, func(t *testing.T) {
			f := newFixture(t)
			id := f.awaitingPayment(t, tt.payment, "ali@example.com")
			extra := map[string]any{"status": "FAILED"}
			if tt.reason != nil {
				extra["reason"] = tt.reason
			}
			if err := f.handle(t, payment(t, tt.typ, id, tt.method, 1, extra)); err != nil {
				t.Fatal(err)
			}
			s := orderstest.Read(t, f.client)
			if o := s.Orders[0]; o.Status != "CANCELLING" || o.Version != 3 || o.CancelReason.StringVal != tt.want {
				t.Errorf("order = %s v%d %q, want CANCELLING v3 %q", o.Status, o.Version, o.CancelReason.StringVal, tt.want)
			}
			if len(s.Outbox) != 3 || s.Outbox[2].EventType != "order.cancelled" {
				t.Fatalf("outbox = %+v", s.Outbox)
			}
			if p := orderstest.Payload(t, s.Outbox[2]); p["reason"] != tt.want || p["status"] != "CANCELLING" || len(p["lines"].([]any)) != 2 {
				t.Errorf("order.cancelled payload = %v", p)
			}

			if err := f.handle(t, reservation(t, events.InventoryReleased, id, 2, map[string]any{"order_id": id, "lines": []any{}})); err != nil {
				t.Fatal(err)
			}
			s = orderstest.Read(t, f.client)
			if o := s.Orders[0]; o.Status != "CANCELLED" || o.Version != 4 || o.CancelReason.StringVal != tt.want {
				t.Errorf("after the release: %s v%d %q, want CANCELLED v4 %q", o.Status, o.Version, o.CancelReason.StringVal, tt.want)
			}
			checkTimeline(t, s, id, []string{
				"emitted order.created 1", "consumed inventory.reserved 1", "emitted order.awaiting_payment 2",
				"consumed " + tt.typ + " 1", "emitted order.cancelled 3", "consumed inventory.released 2", "emitted order.cancellation_completed 4",
			})
		})
	}
}

// TestMovedOn: every consumed event for an order in a state it does not apply to changes nothing
// but the timeline, and is not an error.
func TestMovedOn(t *testing.T) {
	f := newFixture(t)
	pending := f.placeOrder(t, konbini, "ali@example.com")
	confirmed := f.awaitingPayment(t, card, "")
	if err := f.handle(t, payment(t, events.PaymentAuthorized, confirmed, "card", 1, nil)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		d    outboxlib.Delivery
	}{
		{"authorized before the reservation", payment(t, events.PaymentAuthorized, pending, "konbini", 1, nil)},
		{"slip before the reservation", payment(t, events.PaymentPending, pending, "konbini", 1, map[string]any{"slip": lawsonSlip})},
		{"failure before the reservation", payment(t, events.PaymentFailed, pending, "konbini", 1, map[string]any{"reason": "declined"})},
		{"release of a pending order", reservation(t, events.InventoryReleased, pending, 2, map[string]any{"order_id": pending})},
		{"authorized twice", payment(t, events.PaymentAuthorized, confirmed, "card", 2, nil)},
		{"expiry before the reservation", payment(t, events.PaymentExpired, pending, "konbini", 1, map[string]any{"reason": "expired"})},
		{"slip for a confirmed order", payment(t, events.PaymentPending, confirmed, "card", 2, map[string]any{"slip": lawsonSlip})},
		{"reservation of a confirmed order", reservation(t, events.InventoryReserved, confirmed, 1, map[string]any{"order_id": confirmed})},
		{"release of a confirmed order", reservation(t, events.InventoryReleased, confirmed, 2, map[string]any{"order_id": confirmed})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p struct {
				OrderID string `json:"order_id"`
			}
			if err := json.Unmarshal(tt.d.Payload, &p); err != nil {
				t.Fatal(err)
			}
			before := orderstest.Read(t, f.client)
			notes, err := f.handleNoted(t, tt.d)
			if err != nil {
				t.Fatalf("err = %v, want nil (noted)", err)
			}
			if len(notes) != 1 || !strings.Contains(notes[0], "ignored: order "+p.OrderID+" has moved on (status "+orderRow(t, before, p.OrderID).Status+")") {
				t.Errorf("notes = %q, want one saying the order has moved on", notes)
			}
			after := orderstest.Read(t, f.client)
			b, a := orderRow(t, before, p.OrderID), orderRow(t, after, p.OrderID)
			if a.Status != b.Status || a.Version != b.Version || a.PaymentInstructions.Valid != b.PaymentInstructions.Valid || len(after.Outbox) != len(before.Outbox) {
				t.Errorf("order changed: %s v%d → %s v%d, %d → %d events", b.Status, b.Version, a.Status, a.Version, len(before.Outbox), len(after.Outbox))
			}
			if len(after.Timeline) != len(before.Timeline)+1 {
				t.Errorf("timeline rows %d → %d, want one more (consumed)", len(before.Timeline), len(after.Timeline))
			}
		})
	}
}

// An authorization that lapses before the order ships (card authorizations last 7 days; capture
// comes only after shipping): the confirmed order can no longer be paid for, so it is cancelled
// with payment_expired and its stock released.
func TestLapsedAuthorizationCancelsAConfirmedOrder(t *testing.T) {
	f := newFixture(t)
	id := f.awaitingPayment(t, card, "")
	if err := f.handle(t, payment(t, events.PaymentAuthorized, id, "card", 1, nil)); err != nil {
		t.Fatal(err)
	}
	if err := f.handle(t, payment(t, events.PaymentExpired, id, "card", 2, map[string]any{"status": "EXPIRED", "reason": "expired"})); err != nil {
		t.Fatal(err)
	}
	s := orderstest.Read(t, f.client)
	if o := s.Orders[0]; o.Status != "CANCELLING" || o.CancelReason.StringVal != "payment_expired" {
		t.Errorf("order = %s %q, want CANCELLING payment_expired", o.Status, o.CancelReason.StringVal)
	}
	checkTimeline(t, s, id, []string{
		"emitted order.created 1", "consumed inventory.reserved 1", "emitted order.awaiting_payment 2",
		"consumed payment.authorized 1", "emitted order.confirmed 3", "consumed payment.expired 2", "emitted order.cancelled 4",
	})
}

func TestUnknownOrderIsPermanent(t *testing.T) {
	f := newFixture(t)
	id := uuid.NewString()
	for typ := range f.handlers {
		var d outboxlib.Delivery
		if typ == events.InventoryReserved || typ == events.InventoryRejected || typ == events.InventoryReleased {
			d = reservation(t, typ, id, 1, map[string]any{"order_id": id})
		} else {
			d = payment(t, typ, id, "konbini", 1, map[string]any{"slip": lawsonSlip})
		}
		if err := f.handle(t, d); !outboxlib.IsPermanent(err) || !errors.Is(err, order.ErrNotFound) {
			t.Errorf("%s for an unknown order: err = %v, want permanent ErrNotFound", typ, err)
		}
		// A payload without an order id, or that is not the JSON expected, can never be applied.
		for _, body := range []string{`{"sku": "A1"}`, `{"order_id": 7}`, `[]`} {
			d.ID, d.Payload = uuid.NewString(), json.RawMessage(body)
			if err := f.handle(t, d); !outboxlib.IsPermanent(err) {
				t.Errorf("%s with payload %s: err = %v, want permanent", typ, body, err)
			}
		}
	}
	if s := orderstest.Read(t, f.client); len(s.Orders)+len(s.Outbox)+len(s.Timeline) != 0 {
		t.Errorf("failed events wrote rows: %+v", s)
	}
}

// TestPaymentPendingInvalid: a slip that is missing, of a method without slips or of another
// method than the order's is permanent and writes nothing.
func TestPaymentPendingInvalid(t *testing.T) {
	f := newFixture(t)
	id := f.awaitingPayment(t, konbini, "ali@example.com")
	before := orderstest.Read(t, f.client)
	for name, extra := range map[string]map[string]any{
		"no slip":        {},
		"card slip":      {"method": "card", "slip": map[string]any{"method": "card"}},
		"another method": {"method": "bank_transfer", "slip": map[string]any{"method": "bank_transfer", "bank": map[string]any{"bank_name": "Mizuho"}}},
		"bad expiry":     {"slip": map[string]any{"method": "konbini", "expires_at": "next week"}},
	} {
		if err := f.handle(t, payment(t, events.PaymentPending, id, "konbini", 1, extra)); !outboxlib.IsPermanent(err) {
			t.Errorf("%s: err = %v, want permanent", name, err)
		}
	}
	after := orderstest.Read(t, f.client)
	if orderRow(t, after, id).PaymentInstructions.Valid || len(after.Timeline) != len(before.Timeline) {
		t.Error("an invalid slip was written")
	}
}

// TestOrderWithoutPayment: an order placed before migration 0003 has NULL payment columns; it is
// restored, awaits payment without a payment in its event, and the payment events apply to it.
func TestOrderWithoutPayment(t *testing.T) {
	f := newFixture(t)
	id := uuid.NewString()
	row := ordersdb.Order{OrderId: id, CustomerId: "old", Status: "PENDING", Currency: "JPY", TotalMinor: 300, Version: 1}
	row.SetCommitTimestamps()
	item := ordersdb.OrderItem{OrderId: id, LineNo: 1, Sku: "A1", Quantity: 2, UnitPriceMinor: 150}
	if _, err := f.client.Apply(context.Background(), []*spanner.Mutation{row.Insert(), item.Insert()}); err != nil {
		t.Fatal(err)
	}
	if err := f.handle(t, reservation(t, events.InventoryReserved, id, 1, map[string]any{"order_id": id})); err != nil {
		t.Fatal(err)
	}
	s := orderstest.Read(t, f.client)
	p := orderstest.Payload(t, s.Outbox[0])
	if _, ok := p["payment"]; ok || p["email"] != "" || p["status"] != "AWAITING_PAYMENT" {
		t.Errorf("order.awaiting_payment of an order without payment = %v", p)
	}
	d := payment(t, events.PaymentAuthorized, id, "card", 1, map[string]any{"amount_minor": 300})
	if err := f.handle(t, d); err != nil {
		t.Fatal(err)
	}
	o, _, err := f.svc.Order(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if o.Status() != order.Confirmed || !o.Payment().IsZero() || o.Email() != "" {
		t.Errorf("order = %+v", o.Snapshot())
	}
}

func checkTimeline(t *testing.T, s orderstest.State, orderID string, want []string) {
	t.Helper()
	var got []string
	for _, r := range s.Timeline {
		if r.OrderId != orderID {
			continue
		}
		if r.Seq != int64(len(got)+1) || r.RecordedAt.IsZero() {
			t.Errorf("timeline row %d = %+v", len(got), r)
		}
		got = append(got, r.Direction+" "+r.EventType+" "+strconv.FormatInt(r.AggregateVersion, 10))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("timeline (-want +got):\n%s", diff)
	}
}
