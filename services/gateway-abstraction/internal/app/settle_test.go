package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spanmart/spanmart/emulator/paysim"
	"github.com/spanmart/spanmart/gen/dao/outboxdb"
	"github.com/spanmart/spanmart/gen/dao/paymentsdb"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/app"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/payment"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/provider"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/store"
)

// method is a payment method with the instrument the sandbox pays it with.
type method struct {
	m          payment.Method
	instrument string
}

var (
	visa        = method{payment.Card, "pm_card_visa"}
	threeDS     = method{payment.Card, "pm_card_threeDSecure2Required"}
	declined    = method{payment.Card, "pm_card_chargeDeclined"}
	wallet      = method{payment.Wallet, ""}
	konbini     = method{payment.Konbini, "lawson"}
	walletTotal = int64(50000) // ali's PayPay balance in the sandbox
)

// requestOf records a payment of m for a new order in its own transaction, as the consumer does
// with order.awaiting_payment; nothing is called yet.
func (f *fixture) requestOf(t *testing.T, m method) (orderID, paymentID string) {
	t.Helper()
	orderID = uuid.NewString()
	f.inConsumer(t, func(ctx context.Context, tx app.Tx) error {
		var err error
		paymentID, _, err = f.svc.RequestPayment(ctx, tx, app.PaymentRequest{
			OrderID: orderID, CustomerID: "ali", Email: "ali@example.com", Method: m.m, Instrument: m.instrument,
			AmountMinor: 1800, Currency: "JPY",
		})
		return err
	})
	return orderID, paymentID
}

// inConsumer runs fn in a read-write transaction bound to the repository, as the consumer runs a
// handler.
func (f *fixture) inConsumer(t *testing.T, fn func(ctx context.Context, tx app.Tx) error) {
	t.Helper()
	_, err := f.client.ReadWriteTransaction(context.Background(), func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		return fn(ctx, store.Tx(txn))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// ship delivers order.shipped: the handler's use case, then its After effect.
func (f *fixture) ship(t *testing.T, orderID string) app.Decision {
	t.Helper()
	var d app.Decision
	f.inConsumer(t, func(ctx context.Context, tx app.Tx) (err error) {
		d, err = f.svc.RequestCapture(ctx, tx, orderID)
		return err
	})
	return d
}

// cancel records order.cancelled's settlement (the handler's use case); the After effect is
// f.resume.
func (f *fixture) cancel(t *testing.T, orderID string) app.Decision {
	t.Helper()
	var d app.Decision
	f.inConsumer(t, func(ctx context.Context, tx app.Tx) (err error) {
		d, err = f.svc.SettleCancelledOrder(ctx, tx, orderID)
		return err
	})
	return d
}

// resume is the After effect of every order event on a redelivery: the payment's unfinished
// intents, read.
func (f *fixture) resume(t *testing.T, paymentID string) {
	t.Helper()
	f.resumeRecorded(t, paymentID, nil)
}

// resumeRecorded is the After effect of the delivery whose handler decided d: the intent it
// recorded, as written (no read), and what its answer records; nil is a redelivery's effect.
func (f *fixture) resumeRecorded(t *testing.T, paymentID string, rec *app.Recorded) {
	t.Helper()
	if err := f.svc.ResumePayment(context.Background(), paymentID, rec); err != nil {
		t.Fatal(err)
	}
}

// authorized requests a payment of m and resumes it: AUTHORIZED (card, wallet) or PENDING (slip).
func (f *fixture) authorized(t *testing.T, m method) (orderID, paymentID string) {
	t.Helper()
	orderID, paymentID = f.requestOf(t, m)
	f.resume(t, paymentID)
	return orderID, paymentID
}

// paidSlip is a konbini payment whose slip the customer paid: AUTHORIZED by KOMOJU's webhook.
func (f *fixture) paidSlip(t *testing.T) (orderID, paymentID string) {
	t.Helper()
	orderID, paymentID = f.authorized(t, konbini)
	p := f.payment(t, paymentID)
	if p.Status != string(payment.Pending) {
		t.Fatalf("konbini payment %s, want PENDING", p.Status)
	}
	if err := f.sandbox.PayKomojuSlip(p.ProviderPaymentId.StringVal); err != nil {
		t.Fatal(err)
	}
	f.waitStatus(t, paymentID, payment.Authorized)
	return orderID, paymentID
}

// payOut stands for KOMOJU paying out the pending refund of a paid slip (its webhooks follow).
func (f *fixture) payOut(t *testing.T, paymentID string) {
	t.Helper()
	if err := f.sandbox.PayOutKomojuRefund(f.payment(t, paymentID).ProviderPaymentId.StringVal); err != nil {
		t.Fatal(err)
	}
}

// captured is a payment of m authorized, shipped and captured.
func (f *fixture) captured(t *testing.T, m method) (orderID, paymentID string) {
	t.Helper()
	orderID, paymentID = f.authorized(t, m)
	f.ship(t, orderID)
	f.resume(t, paymentID)
	if p := f.payment(t, paymentID); p.Status != string(payment.Captured) {
		t.Fatalf("after the capture: %s, want CAPTURED", p.Status)
	}
	return orderID, paymentID
}

// waitStatus polls the payment until it is in status (a webhook applies it), or fails the test.
func (f *fixture) waitStatus(t *testing.T, paymentID string, status payment.Status) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p := f.payment(t, paymentID)
		if p.Status == string(status) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("payment %s is %s, want %s", paymentID, p.Status, status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (f *fixture) intentOf(t *testing.T, paymentID string, op app.Operation) *paymentsdb.ProviderRequest {
	t.Helper()
	in, err := paymentsdb.ReadProviderRequest(context.Background(), f.client.Single(), app.IntentKey(paymentID, op))
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// operation is the request an intent recorded.
func (f *fixture) operation(t *testing.T, paymentID string, op app.Operation) provider.Operation {
	t.Helper()
	b, err := json.Marshal(f.intentOf(t, paymentID, op).Request.Value)
	if err != nil {
		t.Fatal(err)
	}
	var r provider.Operation
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// payload is the payload of the payment's event at version.
func (f *fixture) payload(t *testing.T, paymentID string, version int64) map[string]any {
	t.Helper()
	rows, err := outboxdb.ReadOutboxEventRows(context.Background(), f.client.Single(), spanner.AllKeys())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.AggregateId == paymentID && r.AggregateVersion == version {
			b, _ := json.Marshal(r.Payload.Value)
			var out map[string]any
			if err := json.Unmarshal(b, &out); err != nil {
				t.Fatal(err)
			}
			return out
		}
	}
	t.Fatalf("payment %s has no event at version %d", paymentID, version)
	return nil
}

// acted is how many events of type typ the sandbox created: how often the provider acted (a
// replay of an idempotency key creates none).
func (f *fixture) acted(typ string) int {
	ids := map[string]bool{}
	for _, d := range f.sandbox.Deliveries() {
		if d.EventType == typ {
			ids[d.EventID] = true
		}
	}
	return len(ids)
}

// expect checks the payment's status and its events ("type@version", in version order).
func (f *fixture) expect(t *testing.T, paymentID string, status payment.Status, events ...string) {
	t.Helper()
	if p := f.payment(t, paymentID); p.Status != string(status) {
		t.Errorf("payment %s, want %s", p.Status, status)
	}
	if diff := cmp.Diff(events, f.events(t, paymentID)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// actedOnce checks that the provider acted once: one event of type typ.
func (f *fixture) actedOnce(t *testing.T, typ string) {
	t.Helper()
	if n := f.acted(typ); n != 1 {
		t.Errorf("the provider created %d %s, want 1: it acted once", n, typ)
	}
}

// waitDelivered waits until every webhook of type typ the sandbox sent has been answered: the
// gateway has handled it.
func (f *fixture) waitDelivered(t *testing.T, typ string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		seen, done := 0, 0
		for _, d := range f.sandbox.Deliveries() {
			if d.EventType == typ {
				seen++
				if d.State == "delivered" || d.State == "failed" {
					done++
				}
			}
		}
		if seen > 0 && done == seen {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("webhooks %s: %d of %d answered", typ, done, seen)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// calls is how many provider calls (tries) of operation op the gateway made.
func calls(t *testing.T, reg *prometheus.Registry, op string) uint64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, f := range fams {
		if f.GetName() != "gateway_provider_call_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" && l.GetValue() == op {
					n += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return n
}

// counter is the value of a counter of reg with the given label.
func counter(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// A shipped order's authorized payment is captured once: CAPTURE_REQUESTED with its intent in the
// consumer's transaction, CAPTURED with payment.captured by the answer; a paid slip is captured
// through the adapter too (KOMOJU took the money when the customer paid). The webhook after the
// answer changes nothing; a second order.shipped records nothing and calls nobody.
func TestShippedOrderIsCaptured(t *testing.T) {
	for _, tc := range []struct {
		name     string
		setUp    func(f *fixture, t *testing.T) (orderID, paymentID string)
		webhook  string // the provider's callback after the capture ("" for none)
		provider string
	}{
		{"card", func(f *fixture, t *testing.T) (string, string) { return f.authorized(t, visa) }, "payment_intent.succeeded", payment.Card.Provider()},
		{"wallet", func(f *fixture, t *testing.T) (string, string) { return f.authorized(t, wallet) }, "payment.captured", payment.Wallet.Provider()},
		{"paid konbini slip", (*fixture).paidSlip, "", payment.Konbini.Provider()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			orderID, id := tc.setUp(f, t)
			before := f.events(t, id)
			d := f.ship(t, orderID)
			if d.Intent != app.OpCapture || d.PaymentID != id {
				t.Errorf("decision %+v, want the capture of %s", d, id)
			}
			if p := f.payment(t, id); p.Status != string(payment.CaptureRequested) || p.CheckAfter.Valid {
				t.Errorf("after order.shipped: %s (check after %v), want CAPTURE_REQUESTED and nothing to check: its intent covers it", p.Status, p.CheckAfter)
			}
			if d.Recorded == nil || d.Recorded.Intent.Key != app.IntentKey(id, app.OpCapture) || d.Recorded.Provider != tc.provider {
				t.Fatalf("recorded %+v, want the capture intent of %s at %s", d.Recorded, id, tc.provider)
			}
			f.resumeRecorded(t, id, d.Recorded)
			want := append(before, fmt.Sprintf("payment.captured@%d", len(before)+1))
			f.expect(t, id, payment.Captured, want...)
			if p := f.payment(t, id); p.CheckAfter.Valid {
				t.Errorf("a captured payment is checked after %v, want never", p.CheckAfter)
			}
			if in := f.intentOf(t, id, app.OpCapture); in.Status != string(app.IntentSucceeded) || in.Attempts != 1 {
				t.Errorf("capture intent %+v, want SUCCEEDED after 1 attempt", in)
			}
			if tc.webhook != "" {
				f.waitDelivered(t, tc.webhook)
				f.expect(t, id, payment.Captured, want...)
			}
			if again := f.ship(t, orderID); again.Intent != "" {
				t.Errorf("a second order.shipped: %+v, want nothing recorded", again)
			}
			f.resume(t, id)
			if n := calls(t, f.reg, "capture"); n != 1 {
				t.Errorf("%d capture calls, want 1", n)
			}
			if n := counter(t, f.reg, "gateway_payments_total", "status", string(payment.Captured)); n != 1 {
				t.Errorf("gateway_payments_total{status=CAPTURED} = %v, want 1", n)
			}
		})
	}
}

// An authorization that lapsed before the order shipped (its webhook missed) cannot be captured:
// the provider refuses for good, and the payment is CAPTURE_FAILED with reason expired.
func TestCaptureOfALapsedAuthorizationFails(t *testing.T) {
	f := newFixture(t, nil)
	if err := f.sandbox.SetWebhookFault(paysim.WebhookFault{Mode: "drop", Dialect: paysim.DialectStripe}); err != nil {
		t.Fatal(err)
	}
	orderID, id := f.authorized(t, visa)
	if _, err := f.sandbox.AdvanceClock(8 * 24 * time.Hour); err != nil {
		t.Fatal(err)
	}
	f.ship(t, orderID)
	f.resume(t, id)
	f.expect(t, id, payment.CaptureFailed, "payment.authorized@1", "payment.capture_failed@2")
	if p := f.payment(t, id); p.FailureReason.StringVal != string(payment.ReasonExpired) {
		t.Errorf("failure reason %q, want expired", p.FailureReason.StringVal)
	}
	if got := f.payload(t, id, 2); got["reason"] != "expired" || got["status"] != string(payment.CaptureFailed) {
		t.Errorf("payment.capture_failed payload %v, want status CAPTURE_FAILED, reason expired", got)
	}
	if in := f.intentOf(t, id, app.OpCapture); in.Status != string(app.IntentSucceeded) {
		t.Errorf("capture intent %s, want SUCCEEDED (the refusal is an answer)", in.Status)
	}
}

// order.shipped of a payment that is not authorized records nothing; of an order without a
// payment is payment.ErrNotFound (the handler dead-letters it).
func TestShippedOrderThatCannotBeCaptured(t *testing.T) {
	f := newFixture(t, nil)
	orderID, id := f.authorized(t, declined)
	if d := f.ship(t, orderID); d.Intent != "" {
		t.Errorf("order.shipped of a FAILED payment: %+v, want nothing recorded", d)
	}
	f.expect(t, id, payment.Failed, "payment.failed@1")
	_, err := f.client.ReadWriteTransaction(context.Background(), func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		_, err := f.svc.RequestCapture(ctx, store.Tx(txn), uuid.NewString())
		return err
	})
	if !errors.Is(err, payment.ErrNotFound) {
		t.Errorf("order.shipped without a payment: %v, want payment.ErrNotFound", err)
	}
}

// A cancelled order's hold is released and its unpaid slip cancelled: VOID_REQUESTED with its
// intent, VOIDED with payment.voided by the answer; a payment the customer never completed (3-D
// Secure) is voided at the provider too. The webhook after the answer changes nothing; a second
// order.cancelled records nothing and calls nobody.
func TestCancelledOrderIsVoided(t *testing.T) {
	for _, tc := range []struct {
		name     string
		m        method
		before   []string
		webhook  string
		released bool // the wallet's hold is back
	}{
		{"card", visa, []string{"payment.authorized@1"}, "payment_intent.canceled", false},
		{"wallet", wallet, []string{"payment.authorized@1"}, "payment.cancelled", true},
		{"unpaid konbini slip", konbini, []string{"payment.pending@1"}, "payment.cancelled", false},
		{"3-D Secure not completed", threeDS, nil, "payment_intent.canceled", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			orderID, id := f.authorized(t, tc.m)
			d := f.cancel(t, orderID)
			if d.Intent != app.OpVoid {
				t.Errorf("decision %+v, want a void", d)
			}
			if p := f.payment(t, id); p.Status != string(payment.VoidRequested) || p.CheckAfter.Valid {
				t.Errorf("after order.cancelled: %s (check after %v), want VOID_REQUESTED, nothing to check", p.Status, p.CheckAfter)
			}
			if d.Recorded == nil || d.Recorded.Intent.Key != app.IntentKey(id, app.OpVoid) {
				t.Fatalf("recorded %+v, want the void intent of %s", d.Recorded, id)
			}
			f.resumeRecorded(t, id, d.Recorded)
			want := append(tc.before, fmt.Sprintf("payment.voided@%d", len(tc.before)+1))
			f.expect(t, id, payment.Voided, want...)
			f.waitDelivered(t, tc.webhook)
			f.expect(t, id, payment.Voided, want...)
			if again := f.cancel(t, orderID); again.Intent != "" {
				t.Errorf("a second order.cancelled: %+v, want nothing recorded", again)
			}
			f.resume(t, id)
			if n, acted := calls(t, f.reg, "void"), f.acted(tc.webhook); n != 1 || acted != 1 {
				t.Errorf("%d void calls, the provider acted %d times; want 1 and 1", n, acted)
			}
			if avail, held := f.sandbox.WalletBalance("ali"); tc.released && (avail != walletTotal || held != 0) {
				t.Errorf("wallet: %d available, %d held; want the hold released", avail, held)
			}
		})
	}
}

// A cancelled order whose money is taken (a captured payment) is refunded: REFUND_REQUESTED with
// its intent, REFUNDED with payment.refunded; once. (A paid slip's refund is paid out later:
// refund_test.go.)
func TestCancelledOrderIsRefunded(t *testing.T) {
	for _, tc := range []struct {
		name     string
		setUp    func(f *fixture, t *testing.T) (orderID, paymentID string)
		before   []string
		webhooks []string // the provider's callbacks about the refund
		acted    string   // the event the provider creates when it refunds
	}{
		{"captured card", func(f *fixture, t *testing.T) (string, string) { return f.captured(t, visa) },
			[]string{"payment.authorized@1", "payment.captured@2"}, []string{"refund.created", "charge.refunded"}, "refund.created"},
		{"captured wallet", func(f *fixture, t *testing.T) (string, string) { return f.captured(t, wallet) },
			[]string{"payment.authorized@1", "payment.captured@2"}, []string{"payment.refunded"}, "payment.refunded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			orderID, id := tc.setUp(f, t)
			if d := f.cancel(t, orderID); d.Intent != app.OpRefund {
				t.Errorf("decision %+v, want a refund", d)
			}
			if p := f.payment(t, id); p.Status != string(payment.RefundRequested) {
				t.Errorf("after order.cancelled: %s, want REFUND_REQUESTED", p.Status)
			}
			f.resume(t, id)
			for _, w := range tc.webhooks {
				f.waitDelivered(t, w)
			}
			f.expect(t, id, payment.Refunded, append(tc.before, fmt.Sprintf("payment.refunded@%d", len(tc.before)+1))...)
			if again := f.cancel(t, orderID); again.Intent != "" {
				t.Errorf("a second order.cancelled: %+v, want nothing recorded", again)
			}
			f.resume(t, id)
			if n, acted := calls(t, f.reg, "refund"), f.acted(tc.acted); n != 1 || acted != 1 {
				t.Errorf("%d refund calls, the provider acted %d times; want 1 and 1", n, acted)
			}
			if avail, held := f.sandbox.WalletBalance("ali"); avail != walletTotal || held != 0 {
				t.Errorf("wallet: %d available, %d held; want everything back", avail, held)
			}
		})
	}
}

// A cancel that races the authorization: the order is cancelled while the authorize call is in
// flight (the payment is REQUESTED), and the authorization is still voided, once, whichever of
// the answer and the webhook lands it; a slip is cancelled the same way; a refusal leaves nothing
// to void.
func TestCancelRacingTheAuthorizationStillVoids(t *testing.T) {
	cancelWhileRequested := func(t *testing.T, f *fixture, m method) (string, string) {
		orderID, id := f.requestOf(t, m)
		if d := f.cancel(t, orderID); d.Intent != "" {
			t.Errorf("decision %+v, want nothing to call yet", d)
		}
		p := f.payment(t, id)
		if p.Status != string(payment.Requested) || !p.CancelRequested.Bool {
			t.Errorf("after order.cancelled: %s, cancel requested %v; want REQUESTED with the cancellation recorded", p.Status, p.CancelRequested)
		}
		if again := f.cancel(t, orderID); again.Intent != "" {
			t.Errorf("a second order.cancelled: %+v", again)
		}
		return orderID, id
	}
	t.Run("the answer lands after the cancel", func(t *testing.T) {
		f := newFixture(t, nil)
		if err := f.sandbox.SetWebhookFault(paysim.WebhookFault{Mode: "drop", Dialect: paysim.DialectStripe}); err != nil {
			t.Fatal(err)
		}
		_, id := cancelWhileRequested(t, f, visa)
		// The awaiting_payment delivery's effect: the authorize call, whose answer records the
		// void, which is carried out at once.
		if err := f.svc.Resume(context.Background(), app.IntentKey(id, app.OpAuthorize)); err != nil {
			t.Fatal(err)
		}
		f.expect(t, id, payment.Voided, "payment.authorized@1", "payment.voided@2")
		// The authorization's event reports the authorization, though its transaction voided it.
		if got := f.payload(t, id, 1); got["status"] != string(payment.Authorized) {
			t.Errorf("payment.authorized payload %v, want status AUTHORIZED", got)
		}
		f.resume(t, id) // the cancel delivery's effect, later
		if n, acted := calls(t, f.reg, "void"), f.acted("payment_intent.canceled"); n != 1 || acted != 1 {
			t.Errorf("%d void calls, the provider acted %d times; want 1 and 1", n, acted)
		}
	})
	t.Run("the webhook lands first", func(t *testing.T) {
		f := newFixture(t, nil)
		_, id := cancelWhileRequested(t, f, visa)
		// The authorize call's answer is lost; the webhook applies the authorization and the
		// void follows it.
		var r provider.AuthorizeRequest
		b, _ := json.Marshal(f.intent(t, id).Request.Value)
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		if _, err := f.adapter.Authorize(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		f.waitStatus(t, id, payment.Voided)
		f.resume(t, id) // the delivery's effect: the authorize call again, answered late
		f.expect(t, id, payment.Voided, "payment.authorized@1", "payment.voided@2")
		f.actedOnce(t, "payment_intent.canceled")
	})
	t.Run("the sweep lands it", func(t *testing.T) {
		f := newFixture(t, func(c *app.Config) { c.Calls.Attempts, c.ResumeAfter = 1, time.Millisecond })
		if err := f.sandbox.SetAPIFault(paysim.APIFault{Mode: paysim.FaultError, Dialect: paysim.DialectStripe, Count: 1}); err != nil {
			t.Fatal(err)
		}
		if err := f.sandbox.SetWebhookFault(paysim.WebhookFault{Mode: "drop", Dialect: paysim.DialectStripe}); err != nil {
			t.Fatal(err) // the sweep's answer, not a webhook, lands the authorization
		}
		orderID, id := f.requestOf(t, visa)
		if err := f.svc.ResumePayment(context.Background(), id, nil); !provider.Temporary(err) {
			t.Fatalf("the authorization during the outage: %v, want a temporary error", err)
		}
		f.cancel(t, orderID)
		f.advance(time.Second) // past the intent's retry time
		if rep, err := f.svc.Sweep(context.Background()); err != nil || rep.Resumed != 1 || len(rep.Failures) != 0 {
			t.Fatalf("sweep = %+v, %v; want the authorization resumed, and its void with it", rep, err)
		}
		f.expect(t, id, payment.Voided, "payment.authorized@1", "payment.voided@2")
	})
	t.Run("slip", func(t *testing.T) {
		f := newFixture(t, nil)
		_, id := cancelWhileRequested(t, f, konbini)
		f.resume(t, id)
		f.expect(t, id, payment.Voided, "payment.pending@1", "payment.voided@2")
		f.actedOnce(t, "payment.cancelled")
		if got := f.payload(t, id, 1); got["status"] != string(payment.Pending) || got["slip"] == nil {
			t.Errorf("payment.pending payload %v, want status PENDING with the slip", got)
		}
	})
	t.Run("declined", func(t *testing.T) {
		f := newFixture(t, nil)
		_, id := cancelWhileRequested(t, f, declined)
		f.resume(t, id)
		f.expect(t, id, payment.Failed, "payment.failed@1")
		if n := calls(t, f.reg, "void"); n != 0 {
			t.Errorf("%d void calls for a refused payment, want none", n)
		}
	})
}

// A cancelled order without a payment, or whose payment holds no money, records nothing.
func TestCancelledOrderWithNothingToSettle(t *testing.T) {
	f := newFixture(t, nil)
	if d := f.cancel(t, uuid.NewString()); d.Intent != "" || d.PaymentID != "" {
		t.Errorf("an order without a payment: %+v, want nothing", d)
	}
	orderID, id := f.authorized(t, declined)
	if d := f.cancel(t, orderID); d.Intent != "" {
		t.Errorf("a FAILED payment: %+v, want nothing", d)
	}
	f.expect(t, id, payment.Failed, "payment.failed@1")
}

// The provider fails the void for a while (500s): the intent stays STARTED with its error and
// is retried, by a redelivery's effect and by the sweep, until the provider acts; the payment
// is voided once.
func TestTemporaryVoidFailuresAreRetried(t *testing.T) {
	f := newFixture(t, func(c *app.Config) {
		c.Calls.Attempts, c.Calls.BreakerThreshold, c.ResumeAfter = 2, 100, time.Millisecond
	})
	orderID, id := f.authorized(t, visa)
	if err := f.sandbox.SetAPIFault(paysim.APIFault{Mode: paysim.FaultError, Dialect: paysim.DialectStripe, Count: 3}); err != nil {
		t.Fatal(err)
	}
	f.cancel(t, orderID)
	if err := f.svc.ResumePayment(context.Background(), id, nil); !provider.Temporary(err) {
		t.Fatalf("the void during the outage: %v, want a temporary error", err)
	}
	in := f.intentOf(t, id, app.OpVoid)
	if p := f.payment(t, id); p.Status != string(payment.VoidRequested) || in.Status != string(app.IntentStarted) ||
		in.Attempts != 1 || !in.LastError.Valid || !in.RetryAfter.Valid {
		t.Fatalf("after the outage: %s, intent %+v; want VOID_REQUESTED, STARTED after 1 attempt (of 2 tries) with the error and a retry time", p.Status, in)
	}
	f.advance(time.Second) // past the intent's retry time
	rep, err := f.svc.Sweep(context.Background())
	if err != nil || rep.Resumed != 1 {
		t.Fatalf("sweep = %+v, %v; want the void resumed", rep, err)
	}
	f.expect(t, id, payment.Voided, "payment.authorized@1", "payment.voided@2")
	f.actedOnce(t, "payment_intent.canceled")
}

// A void or refund that cannot be made (the provider refuses it for good, or stays unreachable
// until the intent is given up) ends VOID_FAILED or REFUND_FAILED with its reason and event, for
// orders to flag the order and an operator to settle it.
func TestSettlementThatCannotBeMadeFails(t *testing.T) {
	outage := func(dialect string) func(f *fixture, t *testing.T) {
		return func(f *fixture, t *testing.T) {
			if err := f.sandbox.SetAPIFault(paysim.APIFault{Mode: paysim.FaultError, Dialect: dialect}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name    string
		setUp   func(f *fixture, t *testing.T) (orderID, paymentID string)
		fault   func(f *fixture, t *testing.T) // before order.cancelled
		giveUp  bool                           // the intent fails only after GiveUpAfter
		op      app.Operation
		status  payment.Status
		reason  payment.Reason
		event   string
		version int64
	}{
		{
			name: "void refused", op: app.OpVoid, status: payment.VoidFailed, reason: payment.ReasonInvalidRequest,
			event: "payment.void_failed", version: 2,
			setUp: func(f *fixture, t *testing.T) (string, string) {
				// The money was captured at the provider behind the gateway's back (its
				// webhook dropped): a void can no longer release it.
				if err := f.sandbox.SetWebhookFault(paysim.WebhookFault{Mode: "drop", Dialect: paysim.DialectStripe}); err != nil {
					t.Fatal(err)
				}
				orderID, id := f.authorized(t, visa)
				p := f.payment(t, id)
				if _, err := f.adapter.Capture(context.Background(), provider.Operation{IdempotencyKey: "dashboard-" + id, ProviderPaymentID: p.ProviderPaymentId.StringVal}); err != nil {
					t.Fatal(err)
				}
				return orderID, id
			},
		},
		{
			name: "void given up", op: app.OpVoid, status: payment.VoidFailed, reason: payment.ReasonProviderUnavailable,
			event: "payment.void_failed", version: 2, giveUp: true, fault: outage(paysim.DialectStripe),
			setUp: func(f *fixture, t *testing.T) (string, string) { return f.authorized(t, visa) },
		},
		{
			name: "refund given up", op: app.OpRefund, status: payment.RefundFailed, reason: payment.ReasonProviderUnavailable,
			event: "payment.refund_failed", version: 3, giveUp: true, fault: outage(paysim.DialectKomoju),
			setUp: (*fixture).paidSlip,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			f := newFixture(t, func(c *app.Config) { c.GiveUpAfter, c.Calls.Attempts, c.Metrics = time.Hour, 1, app.NewMetrics(reg) })
			orderID, id := tc.setUp(f, t)
			if tc.fault != nil {
				tc.fault(f, t)
			}
			f.cancel(t, orderID)
			err := f.svc.ResumePayment(context.Background(), id, nil)
			if tc.giveUp {
				if !provider.Temporary(err) {
					t.Fatalf("during the outage: %v, want a temporary error", err)
				}
				f.advance(2 * time.Hour) // past GiveUpAfter
				err = f.svc.ResumePayment(context.Background(), id, nil)
			}
			if err != nil {
				t.Fatalf("ResumePayment = %v, want nil (the intent is finished: failed)", err)
			}
			p := f.payment(t, id)
			if p.Status != string(tc.status) || p.FailureReason.StringVal != string(tc.reason) {
				t.Errorf("payment %s %q, want %s %s", p.Status, p.FailureReason.StringVal, tc.status, tc.reason)
			}
			if in := f.intentOf(t, id, tc.op); in.Status != string(app.IntentFailed) || in.RetryAfter.Valid {
				t.Errorf("intent %+v, want FAILED with nothing to resume", in)
			}
			events := f.events(t, id)
			if len(events) != int(tc.version) || events[tc.version-1] != fmt.Sprintf("%s@%d", tc.event, tc.version) {
				t.Errorf("events %v, want %s last", events, tc.event)
			}
			if got := f.payload(t, id, tc.version); got["reason"] != string(tc.reason) {
				t.Errorf("%s payload %v, want reason %s", tc.event, got, tc.reason)
			}
			if n := counter(t, reg, "gateway_intents_failed_total", "op", string(tc.op)); n != 1 {
				t.Errorf("gateway_intents_failed_total{op=%s} = %v, want 1", tc.op, n)
			}
			if n := counter(t, reg, "gateway_payments_total", "status", string(tc.status)); n != 1 {
				t.Errorf("gateway_payments_total{status=%s} = %v, want 1", tc.status, n)
			}
		})
	}
}

// The answer to a capture, void or refund is lost, and the provider's webhook (delivered twice)
// moves the payment instead: the same single transition and event; resuming the intent later
// replays the provider's first answer, which is late and changes nothing. A paid slip's refund
// sends no webhook when KOMOJU accepts it: its payout's (payment.refunded) moves the payment
// from REFUND_REQUESTED to REFUNDED, and the resumed call finds it refunded.
func TestWebhookOfALostAnswerMovesThePayment(t *testing.T) {
	shipped := func(f *fixture, t *testing.T) (string, string) {
		orderID, id := f.authorized(t, visa)
		f.ship(t, orderID)
		return orderID, id
	}
	cancelled := func(setUp func(f *fixture, t *testing.T) (string, string)) func(f *fixture, t *testing.T) (string, string) {
		return func(f *fixture, t *testing.T) (string, string) {
			orderID, id := setUp(f, t)
			f.cancel(t, orderID)
			return orderID, id
		}
	}
	stripeOf := func(f *fixture) provider.Provider { return f.adapter }
	komojuOf := func(f *fixture) provider.Provider { return f.komoju }
	for _, tc := range []struct {
		name     string
		setUp    func(f *fixture, t *testing.T) (orderID, paymentID string) // records the intent
		op       app.Operation
		provider func(f *fixture) provider.Provider
		want     payment.Status
		event    string
		then     func(f *fixture, t *testing.T, paymentID string) // after the lost call, before the webhook
	}{
		{"card capture", shipped, app.OpCapture, stripeOf, payment.Captured, "payment.captured@2", nil},
		{"card void", cancelled(func(f *fixture, t *testing.T) (string, string) { return f.authorized(t, visa) }),
			app.OpVoid, stripeOf, payment.Voided, "payment.voided@2", nil},
		{"card refund", cancelled(func(f *fixture, t *testing.T) (string, string) { return f.captured(t, visa) }),
			app.OpRefund, stripeOf, payment.Refunded, "payment.refunded@3", nil},
		{"slip cancellation", cancelled(func(f *fixture, t *testing.T) (string, string) { return f.authorized(t, konbini) }),
			app.OpVoid, komojuOf, payment.Voided, "payment.voided@2", nil},
		{"paid slip refund", cancelled((*fixture).paidSlip), app.OpRefund, komojuOf, payment.Refunded, "payment.refunded@3", (*fixture).payOut},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			_, id := tc.setUp(f, t)
			if err := f.sandbox.SetWebhookFault(paysim.WebhookFault{Mode: "duplicate"}); err != nil {
				t.Fatal(err)
			}
			// The call whose answer was lost.
			p, r := tc.provider(f), f.operation(t, id, tc.op)
			call := map[app.Operation]func(context.Context, provider.Operation) (provider.Outcome, error){
				app.OpCapture: p.Capture, app.OpVoid: p.Void, app.OpRefund: p.Refund,
			}[tc.op]
			if _, err := call(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			if tc.then != nil {
				tc.then(f, t, id)
			}
			f.waitStatus(t, id, tc.want)
			if in := f.intentOf(t, id, tc.op); in.Status != string(app.IntentStarted) {
				t.Errorf("intent %s before it is resumed, want STARTED", in.Status)
			}
			f.resume(t, id)
			if in := f.intentOf(t, id, tc.op); in.Status != string(app.IntentSucceeded) {
				t.Errorf("intent %s after it is resumed, want SUCCEEDED", in.Status)
			}
			events := f.events(t, id)
			if p := f.payment(t, id); p.Status != string(tc.want) || events[len(events)-1] != tc.event {
				t.Errorf("payment %s, events %v; want %s with %s last", p.Status, events, tc.want, tc.event)
			}
			n := 0
			for _, e := range events {
				if e == tc.event {
					n++
				}
			}
			if n != 1 {
				t.Errorf("events %v: %s %d times, want once", events, tc.event, n)
			}
		})
	}
}

// The customer pays the slip while its cancellation is on its way: KOMOJU's slip is no longer
// cancellable, the void's answer says it is paid, and the gateway refunds it instead (accepted,
// then paid out).
// The void's answer records the refund, which is carried out at once, whether the void is carried
// out by the cancel delivery's own effect (the intent its handler recorded, followed by what its
// answer records) or by a redelivery (which reads the payment's intents).
func TestSlipPaidBeforeItsCancellationIsRefunded(t *testing.T) {
	for _, tc := range []struct {
		name   string
		resume func(t *testing.T, f *fixture, id string, d app.Decision)
	}{
		{"the delivery's own effect", func(t *testing.T, f *fixture, id string, d app.Decision) { f.resumeRecorded(t, id, d.Recorded) }},
		{"a redelivery", func(t *testing.T, f *fixture, id string, _ app.Decision) { f.resume(t, id) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			orderID, id := f.authorized(t, konbini)
			d := f.cancel(t, orderID) // VOID_REQUESTED, the call not made yet
			if d.Recorded == nil || d.Intent != app.OpVoid {
				t.Fatalf("decision %+v, want a void recorded", d)
			}
			if err := f.sandbox.PayKomojuSlip(f.payment(t, id).ProviderPaymentId.StringVal); err != nil {
				t.Fatal(err)
			}
			tc.resume(t, f, id, d)
			f.expect(t, id, payment.RefundPending, "payment.pending@1", "payment.refund_pending@2")
			if in := f.intentOf(t, id, app.OpVoid); in.Status != string(app.IntentSucceeded) {
				t.Errorf("void intent %s, want SUCCEEDED (answered: paid)", in.Status)
			}
			if in := f.intentOf(t, id, app.OpRefund); in.Status != string(app.IntentSucceeded) {
				t.Errorf("refund intent %s, want SUCCEEDED (carried out after the void's answer)", in.Status)
			}
			f.payOut(t, id)
			f.waitStatus(t, id, payment.Refunded)
			f.expect(t, id, payment.Refunded, "payment.pending@1", "payment.refund_pending@2", "payment.refunded@3")
			f.actedOnce(t, "payment.refunded")
		})
	}
}

// The After effect of a delivery whose handler recorded an intent reads no intent but that one,
// in the transaction that records its answer: the recorded intent is the payment's one unfinished
// intent, and what its answer records it follows (TestSlipPaidBeforeItsCancellationIsRefunded).
// It reads it with its payment, in one query (Tx.PaymentWithIntent), and ProviderRequests not
// otherwise.
func TestRecordedIntentReadsNoOtherIntent(t *testing.T) {
	f := newFixture(t, nil)
	orderID := uuid.NewString()
	var d app.Decision
	f.inConsumer(t, func(ctx context.Context, tx app.Tx) (err error) {
		d.PaymentID, d.Recorded, err = f.svc.RequestPayment(ctx, tx, app.PaymentRequest{
			OrderID: orderID, CustomerID: "ali", Email: "ali@example.com", Method: visa.m, Instrument: visa.instrument,
			AmountMinor: 1800, Currency: "JPY",
		})
		return err
	})
	reads := func() (intents, queries int64) {
		st, ok := env.DatabaseStats(f.db)
		if !ok {
			t.Fatal("the tests' emulator is not in process: its requests cannot be counted")
		}
		return st.RPCs["StreamingRead(ProviderRequests)"], st.RPCs["ExecuteStreamingSql"]
	}
	carryOut := func(what string) {
		t.Helper()
		intents, queries := reads()
		f.resumeRecorded(t, d.PaymentID, d.Recorded)
		i, q := reads()
		if i != intents || q != queries+1 {
			t.Errorf("carrying out the recorded %s read ProviderRequests %d times and made %d queries, want 0 and 1 (the payment with the intent, to record its answer)",
				what, i-intents, q-queries)
		}
	}
	carryOut("authorization")
	f.expect(t, d.PaymentID, payment.Authorized, "payment.authorized@1")
	d = f.ship(t, orderID)
	carryOut("capture")
	f.expect(t, d.PaymentID, payment.Captured, "payment.authorized@1", "payment.captured@2")
}
