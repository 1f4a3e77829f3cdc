package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spanmart/spanmart/emulator/paysim"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/app"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/payment"
)

// KOMOJU gives a paid slip's money back by bank transfer, later: the refund's answer is
// "accepted" (REFUND_PENDING, with payment.refund_pending, and a time for the sweep to ask), the
// order's cancellation records nothing more meanwhile, and the payout's webhooks (delivered twice)
// end it REFUNDED once, with one refund call and one refund at the provider.
func TestSlipRefundIsPaidOutLater(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newFixture(t, func(c *app.Config) { c.Metrics = app.NewMetrics(reg) })
	orderID, id := f.paidSlip(t)
	d := f.cancel(t, orderID)
	if d.Intent != app.OpRefund {
		t.Fatalf("decision %+v, want a refund", d)
	}
	f.resumeRecorded(t, id, d.Recorded)
	f.expect(t, id, payment.RefundPending, "payment.pending@1", "payment.authorized@2", "payment.refund_pending@3")
	if got := f.payload(t, id, 3); got["status"] != string(payment.RefundPending) || got["amount_minor"] != float64(1800) {
		t.Errorf("payment.refund_pending payload %v, want status REFUND_PENDING and the amount", got)
	}
	p := f.payment(t, id)
	if !p.CheckAfter.Valid || !p.CheckAfter.Time.After(f.clock()) {
		t.Errorf("pending refund: CheckAfter %v, want a time for the sweep to ask", p.CheckAfter)
	}
	if in := f.intentOf(t, id, app.OpRefund); in.Status != string(app.IntentSucceeded) || in.RetryAfter.Valid {
		t.Errorf("refund intent %+v, want SUCCEEDED: the provider answered", in)
	}
	if again := f.cancel(t, orderID); again.Intent != "" {
		t.Errorf("a second order.cancelled while the refund is pending: %+v, want nothing recorded", again)
	}
	f.resume(t, id) // a redelivery's effect: nothing is left to call
	if n := counter(t, reg, "gateway_payments_total", "status", string(payment.RefundPending)); n != 1 {
		t.Errorf("gateway_payments_total{status=REFUND_PENDING} = %v, want 1", n)
	}

	if err := f.sandbox.SetWebhookFault(paysim.WebhookFault{Mode: "duplicate", Dialect: paysim.DialectKomoju}); err != nil {
		t.Fatal(err)
	}
	f.payOut(t, id)
	for _, typ := range []string{"refund_request.updated", "payment.refund.created", "payment.refunded"} {
		f.waitDelivered(t, typ)
	}
	f.expect(t, id, payment.Refunded, "payment.pending@1", "payment.authorized@2", "payment.refund_pending@3", "payment.refunded@4")
	if p := f.payment(t, id); p.CheckAfter.Valid {
		t.Errorf("refunded: CheckAfter %v, want none (nothing left to ask)", p.CheckAfter)
	}
	if n, acted := calls(t, reg, "refund"), f.acted("payment.refund.created"); n != 1 || acted != 1 {
		t.Errorf("%d refund calls, the provider refunded %d times; want 1 and 1", n, acted)
	}
	// The second payment.refunded stops at its recorded event id; refund_request.updated and
	// payment.refund.created move nothing and are acknowledged twice without a record.
	if n := counter(t, reg, "gateway_webhooks_total", "result", string(app.WebhookDuplicate)); n != 1 {
		t.Errorf("gateway_webhooks_total{result=duplicate} = %v, want 1", n)
	}
	if n := counter(t, reg, "gateway_payments_total", "status", string(payment.Refunded)); n != 1 {
		t.Errorf("gateway_payments_total{status=REFUNDED} = %v, want 1", n)
	}
}

// The payout's webhooks are lost: the payment stays REFUND_PENDING; the sweep asks KOMOJU once
// the payment's check time has passed, counts the refund as still pending while it is, and
// applies the payout once it happened (REFUNDED, one event).
func TestPendingRefundSettledByTheSweep(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newFixture(t, func(c *app.Config) { c.ReconcileAfter, c.Metrics = time.Minute, app.NewMetrics(reg) })
	orderID, id := f.paidSlip(t)
	f.cancel(t, orderID)
	f.resume(t, id)
	f.waitStatus(t, id, payment.RefundPending)

	sweep := func(want app.SweepReport) {
		t.Helper()
		rep, err := f.svc.Sweep(context.Background())
		if err != nil || rep.Checked != want.Checked || rep.Changed != want.Changed || rep.RefundsPending != want.RefundsPending || len(rep.Failures) != 0 {
			t.Fatalf("sweep = %+v, %v; want %+v", rep, err, want)
		}
	}
	sweep(app.SweepReport{}) // not due yet
	f.advance(2 * time.Minute)
	sweep(app.SweepReport{Checked: 1, RefundsPending: 1}) // KOMOJU has not paid it out
	sweep(app.SweepReport{})                              // asked again only after ReconcileAfter

	if err := f.sandbox.SetWebhookFault(paysim.WebhookFault{Mode: "drop", Dialect: paysim.DialectKomoju}); err != nil {
		t.Fatal(err)
	}
	f.payOut(t, id)
	if p := f.payment(t, id); p.Status != string(payment.RefundPending) {
		t.Fatalf("after the payout, its webhooks dropped: %s, want REFUND_PENDING still", p.Status)
	}
	f.advance(2 * time.Minute)
	sweep(app.SweepReport{Checked: 1, Changed: 1})
	f.expect(t, id, payment.Refunded, "payment.pending@1", "payment.authorized@2", "payment.refund_pending@3", "payment.refunded@4")
	if n := counter(t, reg, "gateway_reconciled_total", "provider", payment.ProviderKomoju); n != 1 {
		t.Errorf("gateway_reconciled_total{provider=komoju} = %v, want 1", n)
	}
	f.advance(time.Hour)
	sweep(app.SweepReport{}) // settled: never asked about again
}

// KOMOJU rejects the refund it accepted (the customer's account is wrong): REFUND_FAILED
// (declined) with payment.refund_failed, for orders to flag the order and an operator to settle
// it; by the rejection's webhook, or by the sweep when that webhook is lost.
func TestPendingRefundRejected(t *testing.T) {
	for _, tc := range []struct {
		name      string
		dropHooks bool
	}{{"webhook", false}, {"sweep", true}} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			f := newFixture(t, func(c *app.Config) { c.ReconcileAfter, c.Metrics = time.Minute, app.NewMetrics(reg) })
			orderID, id := f.paidSlip(t)
			f.cancel(t, orderID)
			f.resume(t, id)
			f.waitStatus(t, id, payment.RefundPending)
			if tc.dropHooks {
				if err := f.sandbox.SetWebhookFault(paysim.WebhookFault{Mode: "drop", Dialect: paysim.DialectKomoju}); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.sandbox.RejectKomojuRefund(f.payment(t, id).ProviderPaymentId.StringVal); err != nil {
				t.Fatal(err)
			}
			if tc.dropHooks {
				f.advance(2 * time.Minute)
				if rep, err := f.svc.Sweep(context.Background()); err != nil || rep.Changed != 1 {
					t.Fatalf("sweep = %+v, %v; want the rejection applied", rep, err)
				}
			}
			f.waitStatus(t, id, payment.RefundFailed)
			f.expect(t, id, payment.RefundFailed, "payment.pending@1", "payment.authorized@2", "payment.refund_pending@3", "payment.refund_failed@4")
			if p := f.payment(t, id); p.FailureReason.StringVal != string(payment.ReasonDeclined) || p.CheckAfter.Valid {
				t.Errorf("payment reason %q, CheckAfter %v; want declined and nothing left to ask", p.FailureReason.StringVal, p.CheckAfter)
			}
			if got := f.payload(t, id, 4); got["reason"] != string(payment.ReasonDeclined) || got["status"] != string(payment.RefundFailed) {
				t.Errorf("payment.refund_failed payload %v, want REFUND_FAILED, declined", got)
			}
			if n := counter(t, reg, "gateway_payments_total", "status", string(payment.RefundFailed)); n != 1 {
				t.Errorf("gateway_payments_total{status=REFUND_FAILED} = %v, want 1", n)
			}
			if again := f.cancel(t, orderID); again.Intent != "" {
				t.Errorf("order.cancelled again: %+v, want nothing (an operator settles it)", again)
			}
		})
	}
}
