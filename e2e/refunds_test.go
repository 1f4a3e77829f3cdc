package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/e2e/harness"
	"github.com/spanmart/spanmart/emulator/paysim"
)

// Refunds the provider pays out later (issue 24), on the whole system: KOMOJU accepts a paid
// konbini slip's refund and pays it by bank transfer days later (the sandbox: when its clock
// reaches the payout, or on PayOutKomojuRefund), or rejects it (RejectKomojuRefund). The gateway
// holds the payment REFUND_PENDING meanwhile; orders keeps the order CANCELLING, waiting for its
// money, until payment.refunded (CANCELLED) or payment.refund_failed (NEEDS_ATTENTION).

// paidSlipOrder places a konbini order for customer and has the customer pay its slip: CONFIRMED.
func paidSlipOrder(t *testing.T, s *harness.Stack, customer string) (orderID, providerID string) {
	t.Helper()
	id := placePaid(t, s, customer, 1, pay{"method": "konbini", "store": "lawson"})
	p := waitPayment(t, s, id, "PENDING")
	if err := s.Paysim.PayKomojuSlip(p.ProviderID); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, s, id, "CONFIRMED")
	return id, p.ProviderID
}

// waitCompensations waits until the order shows the compensations (GET /v1/orders/{id}).
func waitCompensations(t *testing.T, s *harness.Stack, id string, want []compensation) {
	t.Helper()
	harness.Until(t, fmt.Sprintf("order %s shows its compensations %v", id, want), func() (bool, string) {
		got := getOrder(t, s, id).Compensations
		return cmp.Equal(want, got), fmt.Sprint(got)
	})
}

// waitingForMoney are the compensations of a cancelled order whose stock is back and whose money
// is not.
var waitingForMoney = []compensation{{"stock", "done", "released"}, {"payment", "pending", ""}}

// reconcileOrder is orders' reconciliation of one order (what an operator or an order's trace
// asks), as the operator.
func reconcileOrder(t *testing.T, s *harness.Stack, id string) harness.Reconciliation {
	t.Helper()
	r, err := s.AdminDo(context.Background(), http.MethodGet, "orders", "/admin/reconciliation?order_id="+id, nil)
	var rec harness.Reconciliation
	if err != nil || r.Status != http.StatusOK || r.JSON(&rec) != nil {
		t.Fatalf("GET /admin/reconciliation?order_id=%s: %v %v", id, r, err)
	}
	return rec
}

// A paid konbini order is cancelled: KOMOJU accepts the refund and pays it out later. Until then
// the payment is REFUND_PENDING and the order CANCELLING with its payment compensation pending,
// which the stuck-order detector reports as waiting, not stuck, however short CANCELLING's
// threshold. The payout's webhooks (each delivered twice) end the payment REFUNDED and the order
// CANCELLED, once, with one refund e-mail.
func TestRefundPendingUntilPaidOut(t *testing.T) {
	s := harness.Start(t, harness.Options{Seed: paymentSeed, Env: map[string][]string{"orders": {"STUCK_AFTER=CANCELLING=1ms"}}})
	id, providerID := paidSlipOrder(t, s, "cust-refund")
	if err := s.Paysim.SetWebhookFault(paysim.WebhookFault{Mode: "duplicate", Dialect: paysim.DialectKomoju}); err != nil {
		t.Fatal(err)
	}
	if r := cancelOrder(t, s, id); r.Status != http.StatusAccepted {
		t.Fatalf("cancel: %s", r)
	}
	waitPayment(t, s, id, "REFUND_PENDING")
	waitCompensations(t, s, id, waitingForMoney)
	waitSettled(t, s)
	if o := getOrder(t, s, id); o.Status != "CANCELLING" {
		t.Fatalf("order %s while its refund is pending, want CANCELLING", o.Status)
	}
	pid := paymentIDOf(t, s, id)
	if ev := eventsOf(t, s, "payments", pid); ev["payment.refund_pending"] != 1 || ev["payment.refunded"] != 0 {
		t.Errorf("payment events %v, want one payment.refund_pending and no payment.refunded", ev)
	}
	if ev := eventsOf(t, s, "orders", id); ev["order.cancellation_completed"] != 0 {
		t.Errorf("order events %v: the cancellation completed before the money was back", ev)
	}
	if slices.Contains(stuckOrders(t, s), id) {
		t.Errorf("the stuck-order detector reports order %s, whose refund is on its way", id)
	}
	// Without the gateway's word the detector cannot tell: it reports the order, as it would
	// any order waiting for its money past CANCELLING's threshold.
	s.Stop("gateway-abstraction")
	if !slices.Contains(stuckOrders(t, s), id) {
		t.Errorf("with the gateway down, the stuck-order detector does not report order %s", id)
	}
	if err := s.Start(context.Background(), "gateway-abstraction"); err != nil {
		t.Fatal(err)
	}

	if err := s.Paysim.PayOutKomojuRefund(providerID); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, s, id, "CANCELLED customer_request")
	snap := waitSagaSettled(t, s)
	if snap.Payments[id] != "REFUNDED" || snap.Stock["A1"] != "50/0" {
		t.Errorf("payment %s, stock %s; want REFUNDED, 50/0", snap.Payments[id], snap.Stock["A1"])
	}
	if ev := eventsOf(t, s, "payments", pid); ev["payment.refund_pending"] != 1 || ev["payment.refunded"] != 1 {
		t.Errorf("payment events %v, want one payment.refund_pending and one payment.refunded", ev)
	}
	if ev := eventsOf(t, s, "orders", id); ev["order.cancellation_completed"] != 1 {
		t.Errorf("order events %v, want one order.cancellation_completed", ev)
	}
	if diff := cmp.Diff([]compensation{{"stock", "done", "released"}, {"payment", "done", "refunded"}}, getOrder(t, s, id).Compensations); diff != "" {
		t.Errorf("compensations (-want +got):\n%s", diff)
	}
	want := map[string]int{"payment_instructions": 1, "order_confirmed": 1, "order_cancelled": 1, "payment_refunded": 1}
	if diff := cmp.Diff(want, mailsOf(t, s, id, "cust-refund@example.com")); diff != "" {
		t.Errorf("e-mails (-want +got):\n%s", diff)
	}
	if got := metricSum(t, s, "gateway-abstraction", "gateway_webhooks_total", `result="duplicate"`); got < 1 {
		t.Errorf("gateway_webhooks_total{result=duplicate} = %v, want the payout's duplicate absorbed", got)
	}
	if rec := reconcileOrder(t, s, id); len(rec.Mismatches) != 0 {
		t.Errorf("reconciliation of the order: %+v, want no mismatch", rec.Mismatches)
	}
}

// The payout's webhooks are lost: the order keeps waiting until the gateway's sweep (run by the
// scheduler) asks KOMOJU, finds the refund paid out, and the order is CANCELLED.
func TestPendingRefundSettledByTheSweep(t *testing.T) {
	s := harness.Start(t, harness.Options{Seed: paymentSeed, Env: map[string][]string{
		"gateway-abstraction": {"PAYMENTS_RECONCILE_AFTER=1ms"},
	}})
	id, providerID := paidSlipOrder(t, s, "cust-refund-swept")
	if r := cancelOrder(t, s, id); r.Status != http.StatusAccepted {
		t.Fatalf("cancel: %s", r)
	}
	waitPayment(t, s, id, "REFUND_PENDING")
	waitCompensations(t, s, id, waitingForMoney)
	if err := s.Paysim.SetWebhookFault(paysim.WebhookFault{Mode: "drop", Dialect: paysim.DialectKomoju}); err != nil {
		t.Fatal(err)
	}
	if err := s.Paysim.PayOutKomojuRefund(providerID); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, s, id, "CANCELLED customer_request")
	waitSagaSettled(t, s)
	if p := paymentOf(t, s, id); p.Status != "REFUNDED" {
		t.Errorf("payment %s, want REFUNDED", p.Status)
	}
	if got := metricSum(t, s, "gateway-abstraction", "gateway_reconciled_total"); got < 1 {
		t.Errorf("gateway_reconciled_total = %v, want the sweep to have applied the payout", got)
	}
	if ev := eventsOf(t, s, "payments", paymentIDOf(t, s, id)); ev["payment.refunded"] != 1 {
		t.Errorf("payment events %v, want one payment.refunded", ev)
	}
}

// KOMOJU rejects the refund it accepted (the customer's account is wrong): the payment is
// REFUND_FAILED and the order NEEDS_ATTENTION with the reason, never CANCELLED while the money is
// held; the audit flags it for an operator, and the customer gets no refund e-mail.
func TestPendingRefundRejected(t *testing.T) {
	s := harness.Start(t, harness.Options{Seed: paymentSeed, Env: map[string][]string{"orders": {"RECONCILE_SETTLE=1s"}}})
	id, providerID := paidSlipOrder(t, s, "cust-refund-rejected")
	if r := cancelOrder(t, s, id); r.Status != http.StatusAccepted {
		t.Fatalf("cancel: %s", r)
	}
	waitPayment(t, s, id, "REFUND_PENDING")
	waitCompensations(t, s, id, waitingForMoney)
	if err := s.Paysim.RejectKomojuRefund(providerID); err != nil {
		t.Fatal(err)
	}
	harness.Until(t, "order "+id+" needs attention", func() (bool, string) {
		o := getOrder(t, s, id)
		return o.Status == "NEEDS_ATTENTION", o.Status
	})
	waitSagaSettled(t, s)
	o := getOrder(t, s, id)
	if o.AttentionReason != "payment_release_failed_declined" {
		t.Errorf("attention reason %q, want payment_release_failed_declined", o.AttentionReason)
	}
	if diff := cmp.Diff([]compensation{{"stock", "done", "released"}, {"payment", "failed", "declined"}}, o.Compensations); diff != "" {
		t.Errorf("compensations (-want +got):\n%s", diff)
	}
	if p := paymentOf(t, s, id); p.Status != "REFUND_FAILED" || p.Reason != "declined" {
		t.Errorf("payment %+v, want REFUND_FAILED, declined", p)
	}
	if ev := eventsOf(t, s, "orders", id); ev["order.cancellation_completed"] != 0 || ev["order.needs_attention"] != 1 {
		t.Errorf("order events %v, want order.needs_attention and no order.cancellation_completed", ev)
	}
	if n := mailsOf(t, s, id, "cust-refund-rejected@example.com")["payment_refunded"]; n != 0 {
		t.Errorf("%d refund e-mails for a refund that was rejected", n)
	}
	harness.Until(t, "the audit flags the order", func() (bool, string) {
		for _, f := range runAudit(t, s).Reconciliation.Flagged {
			if f.OrderID == id {
				return f.AttentionReason == "payment_release_failed_declined", f.AttentionReason
			}
		}
		return false, "not flagged"
	})
}
