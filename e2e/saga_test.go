package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/spanmart/spanmart/e2e/harness"
	"github.com/spanmart/spanmart/emulator/paysim"
	"github.com/spanmart/spanmart/internal/mailtest"
	"github.com/spanmart/spanmart/pkg/faults"
)

// The whole order saga of issue 12 on the whole system: reserve → authorize → confirm → ship →
// capture → complete, the customer's cancel with its tracked compensations, a failed shipment, a
// failed capture, and the e-mails the customers get (the harness's mail server is a real SMTP
// server in-process: internal/mailtest). The warehouse ships through fulfillment's API with its
// account's ID token, as a warehouse client would (the dev stack's simulated carrier calls the same
// use case by itself).

// shipmentJSON is fulfillment's view of a shipment (GET /v1/shipments).
type shipmentJSON struct {
	ShipmentID string `json:"shipment_id"`
	OrderID    string `json:"order_id"`
	Status     string `json:"status"`
	ShippedBy  string `json:"shipped_by"`
	FailedBy   string `json:"failed_by"`
}

// shipmentOf waits for the order's shipment (created on order.confirmed) and returns it.
func shipmentOf(t *testing.T, s *harness.Stack, orderID string) shipmentJSON {
	t.Helper()
	var sh shipmentJSON
	harness.Until(t, "order "+orderID+" has a shipment", func() (bool, string) {
		var list struct {
			Items []shipmentJSON `json:"items"`
		}
		if err := s.GetJSON(context.Background(), "fulfillment", "/v1/shipments?order_id="+orderID, &list); err != nil {
			return false, err.Error()
		}
		if len(list.Items) != 1 {
			return false, fmt.Sprintf("%d shipments", len(list.Items))
		}
		sh = list.Items[0]
		return true, ""
	})
	return sh
}

// warehouse makes the warehouse's call on the order's shipment: "ship" (with a carrier and a
// tracking number) or "fail" (with a reason), with the warehouse's ID token, and returns the
// answer, which records the warehouse's account as who did it. The same call without a token is
// refused first (401) and changes nothing.
func warehouse(t *testing.T, s *harness.Stack, orderID, action string) *harness.Response {
	t.Helper()
	ctx := context.Background()
	sh := shipmentOf(t, s, orderID)
	body := map[string]string{"carrier": "yamato", "tracking_number": "YT-" + orderID[:8]}
	if action == "fail" {
		body = map[string]string{"reason": "carrier_rejected"}
	}
	path := "/v1/shipments/" + sh.ShipmentID + "/" + action
	if r, err := s.Do(ctx, http.MethodPost, "fulfillment", path, body); err != nil || r.Status != http.StatusUnauthorized {
		t.Fatalf("%s shipment %s without a token: %v %v, want 401", action, sh.ShipmentID, r, err)
	}
	r, err := s.WarehouseDo(ctx, http.MethodPost, path, body)
	if err != nil {
		t.Fatal(err)
	}
	var got shipmentJSON
	if r.Status != http.StatusOK || r.JSON(&got) != nil {
		t.Fatalf("%s shipment %s: %s", action, sh.ShipmentID, r)
	}
	if by := map[string]string{"ship": got.ShippedBy, "fail": got.FailedBy}[action]; by != harness.Warehouse {
		t.Errorf("%s shipment %s: answered %+v, want it done by %s", action, sh.ShipmentID, got, harness.Warehouse)
	}
	return r
}

// cancelOrder is the customer's POST /v1/orders/{id}/cancel.
func cancelOrder(t *testing.T, s *harness.Stack, orderID string) *harness.Response {
	t.Helper()
	return customerDo(t, s, orderID, http.MethodPost, "/v1/orders/"+orderID+"/cancel", "Idempotency-Key", uuid.NewString())
}

// mailsOf counts the e-mails sent about an order, by template (X-Spanmart-Template), and checks
// that each went to addr.
func mailsOf(t *testing.T, s *harness.Stack, orderID, addr string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, m := range s.Mail.Messages() {
		if m.Header.Get("X-Spanmart-Order") != orderID {
			continue
		}
		out[m.Header.Get("X-Spanmart-Template")]++
		if len(m.To) != 1 || !strings.EqualFold(m.To[0], addr) {
			t.Errorf("e-mail %s about order %s went to %v, want %s", m.MessageID(), orderID, m.To, addr)
		}
	}
	return out
}

// waitMail waits for the e-mail of template about an order.
func waitMail(t *testing.T, s *harness.Stack, orderID, template string) mailtest.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), harness.DefaultWait)
	defer cancel()
	m, err := s.Mail.Wait(ctx, func(m mailtest.Message) bool {
		return m.Header.Get("X-Spanmart-Order") == orderID && m.Header.Get("X-Spanmart-Template") == template
	})
	if err != nil {
		t.Fatalf("no %s e-mail about order %s: %v", template, orderID, err)
	}
	return m
}

// waitSagaSettled is waitSettled, and also waits until every e-mail intent of the notifications
// database is final (sent, bounced or failed): the flow and its e-mails have come to rest.
func waitSagaSettled(t *testing.T, s *harness.Stack) snapshot {
	t.Helper()
	harness.Until(t, "every e-mail sent", func() (bool, string) {
		n, err := countErr(s, "notifications", "SELECT COUNT(*) FROM Notifications WHERE Status = 'PENDING'", nil)
		return err == nil && n == 0, fmt.Sprintf("%d pending (%v)", n, err)
	})
	return waitSettled(t, s)
}

// Every payment method through the whole saga: confirmed, shipped by the warehouse, captured,
// completed; the stock leaves the warehouse; each customer gets each e-mail once, in their language.
func TestSagaEveryMethod(t *testing.T) {
	s := harness.Start(t, harness.Options{Seed: paymentSeed, Env: map[string][]string{"orders": {"RECONCILE_SETTLE=1s"}}})
	type placedOrder struct {
		id, customer string
		slip         bool
	}
	orders := []placedOrder{
		{id: placePaid(t, s, "cust-card", 1, pay{"method": "card", "payment_method": "pm_card_visa"}), customer: "cust-card"},
		{id: placePaid(t, s, "ali", 2, pay{"method": "wallet"}), customer: "ali"},
		{id: placePaid(t, s, "cust-konbini", 1, pay{"method": "konbini", "store": "lawson"}), customer: "cust-konbini", slip: true},
		{id: placePaid(t, s, "cust-bank", 1, pay{"method": "bank_transfer"}), customer: "cust-bank", slip: true},
	}
	// An English-speaking customer.
	r, err := postOrder(context.Background(), s, uuid.NewString(), map[string]any{
		"customer_id": "cust-en", "email": "cust-en@example.com", "language": "en",
		"lines": []map[string]any{{"sku": "A1", "quantity": 1}}, "payment": pay{"method": "card", "payment_method": "pm_card_visa"},
	})
	var en order
	if err != nil || r.Status != http.StatusCreated || r.JSON(&en) != nil {
		t.Fatalf("POST /v1/orders (en): %v %v", r, err)
	}
	orders = append(orders, placedOrder{id: en.ID, customer: "cust-en"})

	for _, o := range orders {
		if o.slip {
			waitPayment(t, s, o.id, "PENDING")
			waitMail(t, s, o.id, "payment_instructions")
			if err := s.Paysim.PayKomojuSlip(paymentOf(t, s, o.id).ProviderID); err != nil {
				t.Fatal(err)
			}
		}
		waitStatus(t, s, o.id, "CONFIRMED")
		warehouse(t, s, o.id, "ship")
	}
	for _, o := range orders {
		waitStatus(t, s, o.id, "COMPLETED")
	}
	snap := waitSagaSettled(t, s)
	for _, o := range orders {
		if p := snap.Payments[o.id]; p != "CAPTURED" {
			t.Errorf("payment of %s (%s): %s, want CAPTURED", o.id, o.customer, p)
		}
		want := map[string]int{"order_confirmed": 1, "order_shipped": 1}
		if o.slip {
			want["payment_instructions"] = 1
		}
		if diff := cmp.Diff(want, mailsOf(t, s, o.id, o.customer+"@example.com")); diff != "" {
			t.Errorf("e-mails about %s's order (-want +got):\n%s", o.customer, diff)
		}
		got := getOrder(t, s, o.id)
		if got.Shipment == nil || got.Shipment.TrackingNumber != "YT-"+o.id[:8] {
			t.Errorf("order %s shows shipment %+v", o.id, got.Shipment)
		}
	}
	// 6 units shipped: they left the warehouse, nothing is held.
	if got := snap.Stock["A1"]; got != "44/0" {
		t.Errorf("stock A1 = %s, want 44/0", got)
	}
	if len(snap.DeadLetters) != 0 {
		t.Errorf("dead letters: %v", snap.DeadLetters)
	}
	checkNoDuplicateEvents(t, s)

	// The languages: Japanese by default, English when asked.
	subject := func(id string) string {
		sub, err := waitMail(t, s, id, "order_shipped").Subject()
		if err != nil {
			t.Fatal(err)
		}
		return sub
	}
	if sub := subject(orders[0].id); !strings.Contains(sub, "発送") {
		t.Errorf("Japanese subject of order_shipped: %q", sub)
	}
	if sub := subject(en.ID); !strings.Contains(strings.ToLower(sub), "shipped") {
		t.Errorf("English subject of order_shipped: %q", sub)
	}
	// The timeline tells the whole story.
	want := []string{
		"consumed:inventory.reserved", "consumed:payment.authorized", "consumed:payment.captured", "consumed:shipment.shipped",
		"emitted:order.awaiting_payment", "emitted:order.completed", "emitted:order.confirmed", "emitted:order.created", "emitted:order.shipped",
	}
	if diff := cmp.Diff(want, timelineTypes(getOrder(t, s, orders[0].id))); diff != "" {
		t.Errorf("timeline (-want +got):\n%s", diff)
	}

	// A duplicate delivery of an order.confirmed sends no second e-mail.
	confirmed := outboxEvent(t, s, "orders", orders[0].id, "order.confirmed")
	deliver(t, s, "notifications", "notifications-inbox", confirmed, "", time.Time{})
	harness.Until(t, "notifications answered the duplicate", func() (bool, string) {
		n, err := metric(s, "notifications", "outbox_consumer_events_total", `outcome="duplicate"`, `type="order.confirmed"`)
		return err == nil && n >= 1, fmt.Sprint(n, err)
	})
	waitSagaSettled(t, s)
	if n := mailsOf(t, s, orders[0].id, "cust-card@example.com")["order_confirmed"]; n != 1 {
		t.Errorf("%d order_confirmed e-mails after a duplicate delivery, want 1", n)
	}

	// A healthy run: nothing stuck, and once the orders have settled every one of them is
	// consistent across the services.
	harness.Until(t, "the audit has checked every order", func() (bool, string) {
		a := runAudit(t, s)
		c := a.Reconciliation.Checked
		return c != nil && *c == len(orders), fmt.Sprintf("checked %v", c)
	})
	a := runAudit(t, s)
	if len(a.Stuck.Orders) != 0 || len(a.Reconciliation.Mismatches) != 0 || !a.Reconciliation.Configured || a.Reconciliation.Partial != nil && *a.Reconciliation.Partial {
		t.Errorf("audit of a healthy run: %+v", a)
	}
}

// An order is stuck because a consumer is down (fulfillment: the order stays PENDING): the
// stuck-order detector reports it, and it leaves the report once the consumer is back.
func TestStuckOrderWhileAConsumerIsDown(t *testing.T) {
	s := harness.Start(t, harness.Options{Seed: paymentSeed, Env: map[string][]string{"orders": {"STUCK_AFTER=PENDING=1s"}}})
	ctx := context.Background()
	s.Stop("fulfillment")
	id := placePaid(t, s, "cust-stuck", 1, pay{"method": "card", "payment_method": "pm_card_visa"})
	harness.Until(t, "the detector reports the order", func() (bool, string) {
		for _, o := range runAudit(t, s).Stuck.Orders {
			if o.OrderID == id {
				return o.Status == "PENDING" && o.WaitingFor != "", fmt.Sprintf("%+v", o)
			}
		}
		return false, "not reported"
	})
	if err := s.Start(ctx, "fulfillment"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, s, id, "CONFIRMED")
	if stuck := stuckOrders(t, s); slices.Contains(stuck, id) {
		t.Errorf("the order is still reported once the consumer is back: %v", stuck)
	}
}

// The notifications service dies between the mail server's acceptance and marking the e-mail
// sent (the failpoint notifications.after_send): once the dead attempt's lease has run out, the
// e-mail sweep (the local scheduler's job) sends it again with the same Message-ID, so a mail
// client shows it once. This is the one window where a customer can receive a message twice; it is
// documented in services/notifications/README.md.
func TestNotificationsDiesMidSend(t *testing.T) {
	s := harness.Start(t, harness.Options{Seed: paymentSeed})
	ctx := context.Background()
	if err := s.Restart(ctx, "notifications", faults.EnvVar+"="+faults.NotificationsAfterSend); err != nil {
		t.Fatal(err)
	}
	id := placePaid(t, s, "cust-mail", 1, pay{"method": "card", "payment_method": "pm_card_visa"})
	if code, err := s.WaitExit(ctx, "notifications", 20*time.Second); err != nil || code != faults.ExitCode {
		t.Fatalf("notifications exit: %d, %v; want %d", code, err, faults.ExitCode)
	}
	first := waitMail(t, s, id, "order_confirmed")
	if err := s.Start(ctx, "notifications"); err != nil {
		t.Fatal(err)
	}
	waitSagaSettled(t, s)
	var copies []mailtest.Message
	for _, m := range s.Mail.Messages() {
		if m.Header.Get("X-Spanmart-Order") == id {
			copies = append(copies, m)
		}
	}
	if len(copies) != 2 {
		t.Fatalf("%d e-mails about the order, want the first and its resend", len(copies))
	}
	for _, m := range copies {
		if m.MessageID() != first.MessageID() || m.Header.Get("X-Spanmart-Template") != "order_confirmed" {
			t.Errorf("e-mail %s (%s), want the resend of %s", m.MessageID(), m.Header.Get("X-Spanmart-Template"), first.MessageID())
		}
	}
	if got := query(t, s, "notifications", "SELECT Status FROM Notifications WHERE OrderId = @id", map[string]any{"id": id}); len(got) != 1 || got[0][0] != "SENT" {
		t.Errorf("notification rows %v, want one SENT", got)
	}
}

// The customer cancels a confirmed order: the order is CANCELLING while the stock is released and
// the authorization voided, then CANCELLED; the customer is told once. After shipping, a cancel is
// refused (409) and changes nothing.
func TestCustomerCancel(t *testing.T) {
	s := harness.Start(t, harness.Options{Seed: paymentSeed})
	id := placePaid(t, s, "cust-cancel", 2, pay{"method": "card", "payment_method": "pm_card_visa"})
	waitStatus(t, s, id, "CONFIRMED")
	shipmentOf(t, s, id) // the shipment is created, then cancelled with the order
	r := cancelOrder(t, s, id)
	if r.Status != http.StatusAccepted {
		t.Fatalf("cancel: %s, want 202", r)
	}
	waitStatus(t, s, id, "CANCELLED customer_request")
	snap := waitSagaSettled(t, s)
	if snap.Payments[id] != "VOIDED" || snap.Stock["A1"] != "50/0" || snap.Shipments[id] != "CANCELLED" {
		t.Errorf("after the cancel: payment %s, stock %s, shipment %s; want VOIDED, 50/0, CANCELLED", snap.Payments[id], snap.Stock["A1"], snap.Shipments[id])
	}
	o := getOrder(t, s, id)
	want := []compensation{{"stock", "done", "released"}, {"payment", "done", "voided"}}
	if diff := cmp.Diff(want, o.Compensations); diff != "" {
		t.Errorf("compensations (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"order_confirmed": 1, "order_cancelled": 1}, mailsOf(t, s, id, "cust-cancel@example.com")); diff != "" {
		t.Errorf("e-mails (-want +got):\n%s", diff)
	}
	if pis := sandboxIntentStates(t, s, paymentIDOf(t, s, id)); len(pis) != 1 || pis[0].Status != "canceled" {
		t.Errorf("the provider's PaymentIntents: %+v, want one, canceled", pis)
	}

	shipped := placePaid(t, s, "cust-late", 1, pay{"method": "card", "payment_method": "pm_card_visa"})
	waitStatus(t, s, shipped, "CONFIRMED")
	warehouse(t, s, shipped, "ship")
	waitStatus(t, s, shipped, "COMPLETED")
	if r := cancelOrder(t, s, shipped); r.Status != http.StatusConflict {
		t.Errorf("cancel after shipping: %s, want 409", r)
	}
	if st := getOrder(t, s, shipped).Status; st != "COMPLETED" {
		t.Errorf("a refused cancel left the order %s", st)
	}
}

// A customer cancels while the authorization is in flight (the provider is failing, so the
// gateway keeps retrying it): when the provider comes back the authorization succeeds and is
// voided at once; the order ends CANCELLED with the stock back and no money held.
func TestCancelRacesTheAuthorization(t *testing.T) {
	s := harness.Start(t, harness.Options{Seed: paymentSeed})
	if err := s.Paysim.SetAPIFault(paysim.APIFault{Mode: paysim.FaultError, Dialect: paysim.DialectStripe}); err != nil {
		t.Fatal(err)
	}
	id := placePaid(t, s, "cust-race", 1, pay{"method": "card", "payment_method": "pm_card_visa"})
	harness.Until(t, "the gateway has tried to authorize", func() (bool, string) {
		n, err := metric(s, "gateway-abstraction", "gateway_provider_errors_total", `op="authorize"`)
		return err == nil && n >= 1, fmt.Sprint(n, err)
	})
	if p := paymentOf(t, s, id); p.Status != "REQUESTED" {
		t.Fatalf("payment before the cancel: %s, want REQUESTED (in flight)", p.Status)
	}
	if r := cancelOrder(t, s, id); r.Status != http.StatusAccepted {
		t.Fatalf("cancel: %s", r)
	}
	waitStatus(t, s, id, "CANCELLING customer_request")
	if err := s.Paysim.SetAPIFault(paysim.APIFault{Mode: paysim.FaultNone}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, s, id, "CANCELLED customer_request")
	snap := waitSagaSettled(t, s)
	if snap.Payments[id] != "VOIDED" || snap.Stock["A1"] != "50/0" {
		t.Errorf("payment %s, stock %s; want VOIDED, 50/0", snap.Payments[id], snap.Stock["A1"])
	}
	pid := paymentIDOf(t, s, id)
	if pis := sandboxIntentStates(t, s, pid); len(pis) != 1 || pis[0].Status != "canceled" {
		t.Errorf("the provider's PaymentIntents: %+v, want one, canceled (authorized, then voided)", pis)
	}
	if ev := eventsOf(t, s, "payments", pid); ev["payment.authorized"] != 1 || ev["payment.voided"] != 1 {
		t.Errorf("payment events %v, want one payment.authorized and one payment.voided", ev)
	}
}

// A shipment that cannot be made after the customer paid (a konbini slip: the money is taken when
// the slip is paid): the stock is released and the money refunded; KOMOJU pays a konbini refund
// out later, so the order waits CANCELLING for it and is CANCELLED only once it is paid out.
func TestShipmentFailsAfterPayment(t *testing.T) {
	s := harness.Start(t, harness.Options{Seed: paymentSeed})
	id := placePaid(t, s, "cust-ship-fail", 1, pay{"method": "konbini", "store": "lawson"})
	waitPayment(t, s, id, "PENDING")
	if err := s.Paysim.PayKomojuSlip(paymentOf(t, s, id).ProviderID); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, s, id, "CONFIRMED")
	warehouse(t, s, id, "fail")
	p := waitPayment(t, s, id, "REFUND_PENDING")
	waitCompensations(t, s, id, waitingForMoney)
	if o := getOrder(t, s, id); o.Status != "CANCELLING" {
		t.Errorf("order %s while its refund is pending, want CANCELLING", o.Status)
	}
	if err := s.Paysim.PayOutKomojuRefund(p.ProviderID); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, s, id, "CANCELLED shipment_failed")
	snap := waitSagaSettled(t, s)
	if snap.Payments[id] != "REFUNDED" || snap.Stock["A1"] != "50/0" || snap.Shipments[id] != "FAILED" {
		t.Errorf("payment %s, stock %s, shipment %s; want REFUNDED, 50/0, FAILED", snap.Payments[id], snap.Stock["A1"], snap.Shipments[id])
	}
	want := map[string]int{"payment_instructions": 1, "order_confirmed": 1, "order_cancelled": 1, "payment_refunded": 1}
	if diff := cmp.Diff(want, mailsOf(t, s, id, "cust-ship-fail@example.com")); diff != "" {
		t.Errorf("e-mails (-want +got):\n%s", diff)
	}
	o := getOrder(t, s, id)
	if diff := cmp.Diff([]compensation{{"stock", "done", "released"}, {"payment", "done", "refunded"}}, o.Compensations); diff != "" {
		t.Errorf("compensations (-want +got):\n%s", diff)
	}
}

// The provider refuses the void for a while (500s): the gateway keeps trying with the same key,
// the order stays CANCELLING with its payment compensation pending, and once the provider answers
// the void is done once and the order is CANCELLED.
func TestVoidFailsForAWhile(t *testing.T) {
	s := harness.Start(t, harness.Options{Seed: paymentSeed})
	id := placePaid(t, s, "cust-void", 1, pay{"method": "card", "payment_method": "pm_card_visa"})
	waitStatus(t, s, id, "CONFIRMED")
	if err := s.Paysim.SetAPIFault(paysim.APIFault{Mode: paysim.FaultError, Dialect: paysim.DialectStripe}); err != nil {
		t.Fatal(err)
	}
	if r := cancelOrder(t, s, id); r.Status != http.StatusAccepted {
		t.Fatalf("cancel: %s", r)
	}
	harness.Until(t, "the gateway has tried to void twice", func() (bool, string) {
		n, err := metric(s, "gateway-abstraction", "gateway_provider_errors_total", `op="void"`)
		return err == nil && n >= 2, fmt.Sprint(n, err)
	})
	// While the void fails, the stock may already be back, but the order waits for the money.
	if p := paymentOf(t, s, id); p.Status != "VOID_REQUESTED" {
		t.Errorf("payment while the void fails: %s, want VOID_REQUESTED", p.Status)
	}
	o := getOrder(t, s, id)
	if o.Status != "CANCELLING" || len(o.Compensations) != 2 || o.Compensations[1] != (compensation{Kind: "payment", State: "pending"}) {
		t.Errorf("order while the void fails: %s %+v, want CANCELLING waiting for the payment", o.Status, o.Compensations)
	}
	if err := s.Paysim.SetAPIFault(paysim.APIFault{Mode: paysim.FaultNone}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, s, id, "CANCELLED customer_request")
	pid := paymentIDOf(t, s, id)
	waitSagaSettled(t, s)
	if ev := eventsOf(t, s, "payments", pid); ev["payment.voided"] != 1 {
		t.Errorf("payment events %v, want one payment.voided", ev)
	}
	if pis := sandboxIntentStates(t, s, pid); len(pis) != 1 || pis[0].Status != "canceled" {
		t.Errorf("the provider's PaymentIntents: %+v, want one, canceled", pis)
	}
}

// The capture fails for good: the card authorization lapsed (the sandbox's clock moves past its 7
// days) while the gateway was down, after the goods shipped. The order needs attention, with the
// reason; no e-mail claims the order completed.
func TestCaptureFailsPermanently(t *testing.T) {
	s := harness.Start(t, harness.Options{Seed: paymentSeed, Env: map[string][]string{"orders": {"RECONCILE_SETTLE=1s"}}})
	ctx := context.Background()
	id := placePaid(t, s, "cust-lapse", 1, pay{"method": "card", "payment_method": "pm_card_visa"})
	waitStatus(t, s, id, "CONFIRMED")
	s.Stop("gateway-abstraction")
	warehouse(t, s, id, "ship")
	waitStatus(t, s, id, "SHIPPED")
	if _, err := s.Paysim.AdvanceClock(8 * 24 * time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx, "gateway-abstraction"); err != nil {
		t.Fatal(err)
	}
	harness.Until(t, "order "+id+" needs attention", func() (bool, string) {
		o := getOrder(t, s, id)
		return o.Status == "NEEDS_ATTENTION", o.Status
	})
	o := getOrder(t, s, id)
	if o.AttentionReason != "capture_failed_expired" {
		t.Errorf("attention reason %q, want capture_failed_expired", o.AttentionReason)
	}
	waitSagaSettled(t, s)
	if p := paymentOf(t, s, id); p.Status != "CAPTURE_FAILED" && p.Status != "EXPIRED" {
		t.Errorf("payment %+v, want CAPTURE_FAILED (the capture was refused) or EXPIRED (the lapse was heard first)", p)
	}
	if diff := cmp.Diff(map[string]int{"order_confirmed": 1, "order_shipped": 1}, mailsOf(t, s, id, "cust-lapse@example.com")); diff != "" {
		t.Errorf("e-mails (-want +got):\n%s", diff)
	}
	// The alert: orders' audit flags the order (an ERROR line, orders_needing_attention).
	harness.Until(t, "the audit flags the order", func() (bool, string) {
		a := runAudit(t, s)
		for _, f := range a.Reconciliation.Flagged {
			if f.OrderID == id {
				return f.AttentionReason == "capture_failed_expired", f.AttentionReason
			}
		}
		return false, "not flagged"
	})
	if n, err := metric(s, "orders", "orders_needing_attention", `reason="capture_failed_expired"`); err != nil || n != 1 {
		t.Errorf("orders_needing_attention = %v (%v), want 1", n, err)
	}
}

// The relay dies (SIGKILL) and the gateway is down between the shipment and the capture: once they
// are back the order completes exactly once, with one capture at the provider.
func TestDiesBetweenShipAndCapture(t *testing.T) {
	s := harness.Start(t, harness.Options{Seed: paymentSeed})
	ctx := context.Background()
	id := placePaid(t, s, "cust-crash", 1, pay{"method": "card", "payment_method": "pm_card_visa"})
	waitStatus(t, s, id, "CONFIRMED")
	s.Stop("gateway-abstraction")
	warehouse(t, s, id, "ship")
	waitStatus(t, s, id, "SHIPPED")
	s.Kill("relay")
	if err := s.Start(ctx, "relay"); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx, "gateway-abstraction"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, s, id, "COMPLETED")
	waitSagaSettled(t, s)
	pid := paymentIDOf(t, s, id)
	if ev := eventsOf(t, s, "payments", pid); ev["payment.captured"] != 1 {
		t.Errorf("payment events %v, want one payment.captured", ev)
	}
	if pis := sandboxIntentStates(t, s, pid); len(pis) != 1 || pis[0].Status != "succeeded" || pis[0].AmountReceived != 1200 {
		t.Errorf("the provider's PaymentIntents: %+v, want one, captured once for 1200", pis)
	}
	if ev := eventsOf(t, s, "orders", id); ev["order.completed"] != 1 || ev["order.shipped"] != 1 {
		t.Errorf("order events %v, want one order.shipped and one order.completed", ev)
	}
}

// sandboxIntent is a PaymentIntent as the sandbox holds it.
type sandboxIntent struct {
	ID             string            `json:"id"`
	Status         string            `json:"status"`
	AmountReceived int64             `json:"amount_received"`
	Metadata       map[string]string `json:"metadata"`
}

// sandboxIntentStates reads back the sandbox's PaymentIntents of a payment (GET
// /_sandbox/payment_intents), in creation order.
func sandboxIntentStates(t *testing.T, s *harness.Stack, paymentID string) []sandboxIntent {
	t.Helper()
	resp, err := s.HTTP.Get(s.Paysim.URL() + "/_sandbox/payment_intents")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var all struct {
		Data []sandboxIntent `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&all); err != nil {
		t.Fatal(err)
	}
	var out []sandboxIntent
	for _, pi := range all.Data {
		if pi.Metadata["spanmart_payment_id"] == paymentID {
			out = append(out, pi)
		}
	}
	return out
}

// compensation is an entry of an order's compensations (GET /v1/orders/{id}).
type compensation struct {
	Kind    string `json:"kind"`
	State   string `json:"state"`
	Outcome string `json:"outcome,omitempty"`
}

// runAudit runs orders' audit as the operator.
func runAudit(t *testing.T, s *harness.Stack) harness.AuditReport {
	t.Helper()
	a, err := s.Audit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// stuckOrders is the ids of the orders the stuck-order detector reports now.
func stuckOrders(t *testing.T, s *harness.Stack) []string {
	t.Helper()
	var ids []string
	for _, o := range runAudit(t, s).Stuck.Orders {
		ids = append(ids, o.OrderID)
	}
	return ids
}

// A card authorization lapses (the sandbox's clock moves 8 days) before the order ships: the
// payment is EXPIRED, the confirmed order CANCELLED (payment_expired), its stock released and the
// shipment cancelled; nothing is held to void.
func TestLapsedAuthorizationCancelsTheOrder(t *testing.T) {
	s := harness.Start(t, harness.Options{Seed: paymentSeed})
	id := placePaid(t, s, "cust-lapsed", 1, pay{"method": "card", "payment_method": "pm_card_visa"})
	waitStatus(t, s, id, "CONFIRMED")
	shipmentOf(t, s, id)
	if _, err := s.Paysim.AdvanceClock(8 * 24 * time.Hour); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, s, id, "CANCELLED payment_expired")
	snap := waitSagaSettled(t, s)
	if snap.Payments[id] != "EXPIRED" || snap.Stock["A1"] != "50/0" || snap.Shipments[id] != "CANCELLED" {
		t.Errorf("payment %s, stock %s, shipment %s; want EXPIRED, 50/0, CANCELLED", snap.Payments[id], snap.Stock["A1"], snap.Shipments[id])
	}
	if diff := cmp.Diff([]compensation{{"stock", "done", "released"}, {"payment", "done", "expired"}}, getOrder(t, s, id).Compensations); diff != "" {
		t.Errorf("compensations (-want +got):\n%s", diff)
	}
}
