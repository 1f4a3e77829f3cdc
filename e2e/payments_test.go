package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/spanmart/spanmart/e2e/harness"
	"github.com/spanmart/spanmart/emulator/paysim"
	"github.com/spanmart/spanmart/internal/localenv"
	"github.com/spanmart/spanmart/pkg/faults"
)

// The payment flows and drills of issue 11, on the whole system: orders → fulfillment → orders →
// gateway → provider sandbox → (answer or webhook) → gateway → orders (→ fulfillment → orders when
// the payment fails). Product A1 costs ¥1,200 in the harness's seed; ali's PayPay wallet holds
// ¥50,000 and sara's ¥2,000 (the sandbox's defaults).

// paymentSeed has stock enough for every order of a test.
var paymentSeed = []harness.Product{{SKU: "A1", Name: "Anchor mug", PriceMinor: 1200, Currency: "JPY", OnHand: 50}}

// pay is a payment object of POST /v1/orders.
type pay map[string]any

// placePaid places an order of qty × A1 for customer, paid as p, and returns its id.
func placePaid(t *testing.T, s *harness.Stack, customer string, qty int64, p pay) string {
	t.Helper()
	body := map[string]any{
		"customer_id": customer, "email": customer + "@example.com",
		"lines": []map[string]any{{"sku": "A1", "quantity": qty}}, "payment": p,
	}
	r, err := postOrder(context.Background(), s, uuid.NewString(), body)
	if err != nil || r.Status != http.StatusCreated {
		t.Fatalf("POST /v1/orders %v: %v %v", p, r, err)
	}
	var o order
	if err := r.JSON(&o); err != nil {
		t.Fatal(err)
	}
	return o.ID
}

// paymentRow is an order's payment in the gateway's database.
type paymentRow struct {
	Status, Reason, ProviderID string
}

func paymentOf(t *testing.T, s *harness.Stack, orderID string) paymentRow {
	t.Helper()
	rows := query(t, s, "payments", "SELECT Status, IFNULL(FailureReason, ''), IFNULL(ProviderPaymentId, '') FROM Payments WHERE OrderId = @id", map[string]any{"id": orderID})
	if len(rows) != 1 {
		t.Fatalf("order %s has %d payments, want 1", orderID, len(rows))
	}
	return paymentRow{rows[0][0], rows[0][1], rows[0][2]}
}

// waitPayment waits until an order's payment has the status.
func waitPayment(t *testing.T, s *harness.Stack, orderID, want string) paymentRow {
	t.Helper()
	var got paymentRow
	harness.Until(t, fmt.Sprintf("the payment of order %s is %s", orderID, want), func() (bool, string) {
		rows, err := queryErr(s, "payments", "SELECT Status, IFNULL(FailureReason, ''), IFNULL(ProviderPaymentId, '') FROM Payments WHERE OrderId = @id", map[string]any{"id": orderID})
		if err != nil || len(rows) != 1 {
			return false, fmt.Sprintf("%d payments (%v)", len(rows), err)
		}
		got = paymentRow{rows[0][0], rows[0][1], rows[0][2]}
		return got.Status == want, got.Status
	})
	return got
}

// eventsOf counts an aggregate's outbox events by type in a database.
func eventsOf(t *testing.T, s *harness.Stack, db, aggregateID string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, r := range query(t, s, db, "SELECT EventType FROM OutboxEvents WHERE AggregateId = @id", map[string]any{"id": aggregateID}) {
		out[r[0]]++
	}
	return out
}

// paymentIDOf is the gateway's id of an order's payment (the payment events' aggregate id).
func paymentIDOf(t *testing.T, s *harness.Stack, orderID string) string {
	t.Helper()
	return query(t, s, "payments", "SELECT PaymentId FROM Payments WHERE OrderId = @id", map[string]any{"id": orderID})[0][0]
}

// Every method, every ending: a card that authorizes and one that declines, a wallet that covers
// the amount and one that does not, a konbini slip and a bank transfer slip that are paid days
// later, and a konbini slip that expires (3 days; the sandbox's clock moves 4, short of the 7 after
// which card and wallet authorizations lapse). Failed and expired payments cancel their orders
// with the reason and release the stock.
func TestPaymentMethods(t *testing.T) {
	s := harness.Start(t, harness.Options{Seed: paymentSeed})
	visa := placePaid(t, s, "cust-card", 1, pay{"method": "card", "payment_method": "pm_card_visa"})
	declined := placePaid(t, s, "cust-card", 1, pay{"method": "card", "payment_method": "pm_card_chargeDeclined"})
	ali := placePaid(t, s, "ali", 2, pay{"method": "wallet"})
	sara := placePaid(t, s, "sara", 2, pay{"method": "wallet"}) // ¥2,400 > ¥2,000
	konbini := placePaid(t, s, "cust-konbini", 1, pay{"method": "konbini", "store": "lawson"})
	bank := placePaid(t, s, "cust-bank", 1, pay{"method": "bank_transfer"})
	unpaid := placePaid(t, s, "cust-unpaid", 1, pay{"method": "konbini", "store": "seven-eleven"})

	waitStatus(t, s, visa, "CONFIRMED")
	waitStatus(t, s, ali, "CONFIRMED")
	waitStatus(t, s, declined, "CANCELLED payment_declined")
	waitStatus(t, s, sara, "CANCELLED payment_insufficient_funds")
	if p := paymentOf(t, s, sara); p.Reason != "insufficient_funds" {
		t.Errorf("sara's payment: %+v, want FAILED insufficient_funds", p)
	}

	// Slips: the order waits, and shows how to pay.
	for _, id := range []string{konbini, bank, unpaid} {
		waitPayment(t, s, id, "PENDING")
		harness.Until(t, "order "+id+" shows its slip", func() (bool, string) {
			o := getOrder(t, s, id)
			return o.Status == "AWAITING_PAYMENT" && o.Payment.Instructions != nil, fmt.Sprintf("%s %+v", o.Status, o.Payment)
		})
	}
	if o := getOrder(t, s, konbini); o.Payment.Instructions.Store != "lawson" || o.Payment.Instructions.PaymentCode == "" || o.Payment.Instructions.ExpiresAt == "" {
		t.Errorf("konbini instructions %+v: want the store, a payment code and an expiry", o.Payment.Instructions)
	}
	if o := getOrder(t, s, bank); o.Payment.Instructions.Bank == nil || o.Payment.Instructions.Bank.AccountNumber == "" {
		t.Errorf("bank transfer instructions %+v: want the account to pay to", o.Payment.Instructions)
	}

	// Days later two customers pay; the third never does.
	if _, err := s.Paysim.AdvanceClock(2 * 24 * time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{konbini, bank} {
		if err := s.Paysim.PayKomojuSlip(paymentOf(t, s, id).ProviderID); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, s, id, "CONFIRMED")
	}
	if _, err := s.Paysim.AdvanceClock(2 * 24 * time.Hour); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, s, unpaid, "CANCELLED payment_expired")

	snap := waitSettled(t, s)
	wantPayments := map[string]string{
		visa: "AUTHORIZED", declined: "FAILED", ali: "AUTHORIZED", sara: "FAILED", konbini: "AUTHORIZED", bank: "AUTHORIZED",
		unpaid: "EXPIRED",
	}
	for id, want := range wantPayments {
		if snap.Payments[id] != want {
			t.Errorf("payment of %s: %s, want %s", id, snap.Payments[id], want)
		}
	}
	// Held: visa 1 + ali 2 + konbini 1 + bank 1; the failed and expired orders gave theirs back.
	if got := snap.Stock["A1"]; got != "50/5" {
		t.Errorf("stock A1 = %s, want 50/5", got)
	}
	if n := snap.DeadLetters; len(n) != 0 {
		t.Errorf("dead letters %v, want none", n)
	}
	checkNoDuplicateEvents(t, s)
	if avail, held := s.Paysim.WalletBalance("ali"); avail != 50000-2400 || held != 2400 {
		t.Errorf("ali's wallet: %d available, %d held; want 47600 and 2400", avail, held)
	}
	if avail, held := s.Paysim.WalletBalance("sara"); avail != 2000 || held != 0 {
		t.Errorf("sara's wallet: %d available, %d held; want untouched", avail, held)
	}
}

// Duplicate webhooks, webhooks in reverse order: one state change, one event. (The sandbox sends
// every event twice, then swaps each pair.)
func TestWebhooksDuplicatedAndReordered(t *testing.T) {
	s := harness.Start(t, harness.Options{Seed: paymentSeed})
	for _, mode := range []string{"duplicate", "reorder"} {
		if err := s.Paysim.SetWebhookFault(paysim.WebhookFault{Mode: mode, Dialect: paysim.DialectKomoju}); err != nil {
			t.Fatal(err)
		}
		id := placePaid(t, s, "cust-"+mode, 1, pay{"method": "konbini", "store": "family-mart"})
		p := waitPayment(t, s, id, "PENDING")
		if err := s.Paysim.PayKomojuSlip(p.ProviderID); err != nil {
			t.Fatal(err)
		}
		if mode == "reorder" {
			// A held event is released by the next one: this order's last is followed by none.
			if err := s.Paysim.SetWebhookFault(paysim.WebhookFault{Mode: "none", Dialect: paysim.DialectKomoju}); err != nil {
				t.Fatal(err)
			}
		}
		waitStatus(t, s, id, "CONFIRMED")
		waitSettled(t, s)
		ev := eventsOf(t, s, "payments", paymentIDOf(t, s, id))
		if ev["payment.pending"] != 1 || ev["payment.authorized"] != 1 || len(ev) != 2 {
			t.Errorf("%s: payment events %v, want one payment.pending and one payment.authorized", mode, ev)
		}
	}
	checkNoDuplicateEvents(t, s)
	if got := metricSum(t, s, "gateway-abstraction", "gateway_webhooks_total", `result="duplicate"`); got < 1 {
		t.Errorf("gateway_webhooks_total{result=duplicate} = %v, want the duplicates counted", got)
	}
}

// Forged, unsigned and too old webhooks are refused with a 400 problem and change nothing.
func TestForgedAndExpiredWebhooksAreRefused(t *testing.T) {
	s := harness.Start(t, harness.Options{Seed: paymentSeed})
	ctx := context.Background()
	id := placePaid(t, s, "cust-forge", 1, pay{"method": "card", "payment_method": "pm_card_visa"})
	waitStatus(t, s, id, "CONFIRMED")
	waitSettled(t, s)
	before := count(t, s, "payments", "SELECT COUNT(*) FROM ProviderEvents", nil)
	p := paymentOf(t, s, id)
	body := []byte(fmt.Sprintf(`{"id":"evt_forged_1","object":"event","api_version":%q,"type":"payment_intent.canceled","data":{"object":{"id":%q,"object":"payment_intent","status":"canceled","metadata":{"spanmart_payment_id":%q}}}}`,
		paysim.DefaultAPIVersion, p.ProviderID, paymentIDOf(t, s, id)))
	komoju := []byte(`{"id":"kevt_forged","type":"payment.cancelled","resource":"event","data":{"id":"x","status":"cancelled"}}`)
	for _, c := range []struct {
		name, path string
		body       []byte
		headers    []string
	}{
		{"stripe: another secret", "/webhooks/stripe", body, []string{"Stripe-Signature", paysim.SignatureHeader(body, "whsec_attacker", time.Now())}},
		{"stripe: unsigned", "/webhooks/stripe", body, nil},
		{"stripe: 10 minutes old", "/webhooks/stripe", body, []string{"Stripe-Signature", paysim.SignatureHeader(body, localenv.StripeWebhookSecret, time.Now().Add(-10*time.Minute))}},
		{"komoju: another secret", "/webhooks/komoju", komoju, []string{"X-Komoju-Signature", paysim.KomojuSignature(komoju, "attacker")}},
		{"komoju: unsigned", "/webhooks/komoju", komoju, nil},
	} {
		r, err := s.Do(ctx, http.MethodPost, "gateway-abstraction", c.path, c.body, c.headers...)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != http.StatusBadRequest || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/problem+json") {
			t.Errorf("%s: %s, want a 400 problem", c.name, r)
		}
	}
	if after := count(t, s, "payments", "SELECT COUNT(*) FROM ProviderEvents", nil); after != before {
		t.Errorf("ProviderEvents %d → %d: a refused webhook was stored", before, after)
	}
	if got := paymentOf(t, s, id); got.Status != "AUTHORIZED" {
		t.Errorf("payment after the forged cancellation: %s, want AUTHORIZED", got.Status)
	}
	if got := metricSum(t, s, "gateway-abstraction", "gateway_webhook_verification_failures_total", `why="signature"`); got != 5 {
		t.Errorf("gateway_webhook_verification_failures_total{why=signature} = %v, want 5", got)
	}
}

// A dropped webhook: the slip is paid but KOMOJU's callback never arrives; the reconciliation
// sweep (POST /admin/sweep, called here with an operator's token as an operator would; the local
// scheduler, which calls it as scheduler@, is off so that the payment stays PENDING until then)
// asks the provider and confirms the order.
func TestDroppedWebhookIsFoundByTheSweep(t *testing.T) {
	s := harness.Start(t, harness.Options{Seed: paymentSeed, SchedulerEvery: -1, Env: map[string][]string{
		"gateway-abstraction": {"PAYMENTS_RECONCILE_AFTER=1ms"},
	}})
	ctx := context.Background()
	id := placePaid(t, s, "cust-drop", 1, pay{"method": "konbini", "store": "ministop"})
	p := waitPayment(t, s, id, "PENDING")
	if err := s.Paysim.SetWebhookFault(paysim.WebhookFault{Mode: "drop", Dialect: paysim.DialectKomoju}); err != nil {
		t.Fatal(err)
	}
	if err := s.Paysim.PayKomojuSlip(p.ProviderID); err != nil {
		t.Fatal(err)
	}
	if got := paymentOf(t, s, id); got.Status != "PENDING" {
		t.Fatalf("payment %s after a dropped webhook, want still PENDING", got.Status)
	}
	r, err := s.Do(ctx, http.MethodPost, "gateway-abstraction", "/admin/sweep", nil)
	if err != nil || r.Status != http.StatusUnauthorized {
		t.Errorf("sweep without a token: %v %v, want 401", r, err)
	}
	token, err := s.OperatorToken(ctx, "gateway-abstraction")
	if err != nil {
		t.Fatal(err)
	}
	r, err = s.Do(ctx, http.MethodPost, "gateway-abstraction", "/admin/sweep", nil, "Authorization", "Bearer "+token)
	if err != nil || r.Status != http.StatusOK {
		t.Fatalf("sweep: %v %v", r, err)
	}
	var rep struct{ Checked, Changed int }
	if err := r.JSON(&rep); err != nil || rep.Changed != 1 {
		t.Errorf("sweep report %s, want one payment changed", r)
	}
	waitStatus(t, s, id, "CONFIRMED")
	waitSettled(t, s)
	if ev := eventsOf(t, s, "payments", paymentIDOf(t, s, id)); ev["payment.authorized"] != 1 {
		t.Errorf("payment events %v, want one payment.authorized", ev)
	}
}

// The gateway dies after the provider authorized and before it recorded the answer: the restarted
// gateway is given the event again (the queue retries the broken delivery), resumes the intent
// with the same idempotency key, and the provider holds one authorization. Stripe's webhooks are
// dropped here: they race the answer and would otherwise often tell the gateway first.
func TestGatewayDiesAfterTheProviderCall(t *testing.T) {
	s := harness.Start(t, harness.Options{Seed: paymentSeed})
	ctx := context.Background()
	if err := s.Paysim.SetWebhookFault(paysim.WebhookFault{Mode: "drop", Dialect: paysim.DialectStripe}); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(ctx, "gateway-abstraction", faults.EnvVar+"="+faults.GatewayAfterProviderCall); err != nil {
		t.Fatal(err)
	}
	id := placePaid(t, s, "cust-crash", 1, pay{"method": "card", "payment_method": "pm_card_visa"})
	if code, err := s.WaitExit(ctx, "gateway-abstraction", 20*time.Second); err != nil || code != faults.ExitCode {
		t.Fatalf("gateway exit: %d, %v; want %d", code, err, faults.ExitCode)
	}
	if p := paymentOf(t, s, id); p.Status != "REQUESTED" {
		t.Fatalf("payment after the crash: %s, want REQUESTED (the answer was lost)", p.Status)
	}
	if err := s.Start(ctx, "gateway-abstraction"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, s, id, "CONFIRMED")
	waitSettled(t, s)
	pid := paymentIDOf(t, s, id)
	if pis := sandboxIntents(t, s, pid); len(pis) != 1 {
		t.Errorf("the provider holds %d PaymentIntents for the payment, want 1", len(pis))
	}
	if ev := eventsOf(t, s, "payments", pid); ev["payment.authorized"] != 1 || len(ev) != 1 {
		t.Errorf("payment events %v, want one payment.authorized", ev)
	}
}

// The provider answers 500s, then times out, for a while: the gateway retries with the same key
// (the queue redelivers while the intent is unfinished), the circuit opens and closes again, and
// there is one authorization.
func TestProviderErrorsAndTimeouts(t *testing.T) {
	s := harness.Start(t, harness.Options{Seed: paymentSeed, Env: map[string][]string{
		"gateway-abstraction": {"PROVIDER_TIMEOUT=300ms", "PROVIDER_ATTEMPTS=2", "PROVIDER_BREAKER_THRESHOLD=3", "PROVIDER_BREAKER_COOLDOWN=200ms"},
	}})
	if err := s.Paysim.SetAPIFault(paysim.APIFault{Mode: paysim.FaultError, Count: 4, Dialect: paysim.DialectStripe}); err != nil {
		t.Fatal(err)
	}
	a := placePaid(t, s, "cust-500", 1, pay{"method": "card", "payment_method": "pm_card_visa"})
	waitStatus(t, s, a, "CONFIRMED")
	if err := s.Paysim.SetAPIFault(paysim.APIFault{Mode: paysim.FaultTimeout, Count: 2, Delay: 2 * time.Second, Dialect: paysim.DialectStripe}); err != nil {
		t.Fatal(err)
	}
	b := placePaid(t, s, "cust-timeout", 1, pay{"method": "card", "payment_method": "pm_card_visa"})
	waitStatus(t, s, b, "CONFIRMED")
	waitSettled(t, s)
	for _, id := range []string{a, b} {
		pid := paymentIDOf(t, s, id)
		if pis := sandboxIntents(t, s, pid); len(pis) != 1 {
			t.Errorf("order %s: the provider holds %d PaymentIntents, want 1", id, len(pis))
		}
		if ev := eventsOf(t, s, "payments", pid); ev["payment.authorized"] != 1 || len(ev) != 1 {
			t.Errorf("order %s: payment events %v, want one payment.authorized", id, ev)
		}
	}
	if got := metricSum(t, s, "gateway-abstraction", "gateway_provider_errors_total", `reason="provider_unavailable"`); got < 4 {
		t.Errorf("gateway_provider_errors_total{provider_unavailable} = %v, want the 500s and timeouts counted", got)
	}
	if got := metricSum(t, s, "gateway-abstraction", "gateway_provider_errors_total", `reason="circuit_open"`); got < 1 {
		t.Errorf("gateway_provider_errors_total{circuit_open} = %v, want calls refused by the open circuit", got)
	}
	if got := metricSum(t, s, "gateway-abstraction", "gateway_provider_circuit_state", `provider="stripe"`); got != 0 {
		t.Errorf("stripe's circuit is %v at the end, want 0 (closed)", got)
	}
}

// metricSum is metric, failing the test when the process cannot be asked.
func metricSum(t *testing.T, s *harness.Stack, process, name string, labels ...string) float64 {
	t.Helper()
	v, err := metric(s, process, name, labels...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// sandboxIntents are the sandbox's PaymentIntents for a gateway payment.
func sandboxIntents(t *testing.T, s *harness.Stack, paymentID string) []string {
	t.Helper()
	ids, err := s.Paysim.PaymentIntentIDs("spanmart_payment_id", paymentID)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// A customer whose Identity Platform uid is the longest there is (128 characters) is a customer
// like any other: the order is paid and confirmed, the customer told, and the gateway and
// notifications keep the id.
func TestLongestCustomerID(t *testing.T) {
	s := harness.Start(t, harness.Options{Seed: paymentSeed})
	customer := strings.Repeat("u", 128)
	body := map[string]any{
		"customer_id": customer, "email": "long@example.com",
		"lines": []map[string]any{{"sku": "A1", "quantity": 1}}, "payment": pay{"method": "card", "payment_method": "pm_card_visa"},
	}
	r, err := postOrder(context.Background(), s, uuid.NewString(), body)
	if err != nil || r.Status != http.StatusCreated {
		t.Fatalf("POST /v1/orders for a 128-character customer id: %v %v", r, err)
	}
	var o order
	if err := r.JSON(&o); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, s, o.ID, "CONFIRMED")
	waitMail(t, s, o.ID, "order_confirmed") // sent to the contact notifications recorded
	for db, sql := range map[string]string{
		"orders":        "SELECT CustomerId FROM Orders WHERE OrderId = @id",
		"payments":      "SELECT CustomerId FROM Payments WHERE OrderId = @id",
		"notifications": "SELECT CustomerId FROM OrderContacts WHERE OrderId = @id",
	} {
		if got := query(t, s, db, sql, map[string]any{"id": o.ID}); len(got) != 1 || got[0][0] != customer {
			t.Errorf("%s: customer %v, want the 128-character id", db, got)
		}
	}
}
