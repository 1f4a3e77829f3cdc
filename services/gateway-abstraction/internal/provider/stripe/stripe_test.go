package stripe_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/payment"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/provider"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/provider/stripe"
)

func TestNew(t *testing.T) {
	p := newProvider(t, sandbox.URL(), nil)
	if got := p.Name(); got != payment.ProviderStripe {
		t.Errorf("Name() = %q, want %q", got, payment.ProviderStripe)
	}
	if _, err := stripe.New(stripe.Config{}); err == nil {
		t.Error("New without an API key and a webhook secret: no error")
	}
}

// Each test card's answer, and Lookup reading the same from the PaymentIntent afterwards.
func TestAuthorize(t *testing.T) {
	p := newProvider(t, sandbox.URL(), nil)
	for _, tc := range []struct {
		card          string
		want          provider.Outcome
		sandboxStatus string
	}{
		{"pm_card_visa", provider.Outcome{Status: payment.Authorized}, "requires_capture"},
		{"pm_card_mastercard", provider.Outcome{Status: payment.Authorized}, "requires_capture"},
		{"pm_card_chargeDeclined", provider.Outcome{Status: payment.Failed, Reason: payment.ReasonDeclined}, "requires_payment_method"},
		{"pm_card_chargeDeclinedInsufficientFunds", provider.Outcome{Status: payment.Failed, Reason: payment.ReasonInsufficientFunds}, "requires_payment_method"},
		{"pm_card_chargeDeclinedLostCard", provider.Outcome{Status: payment.Failed, Reason: payment.ReasonDeclined}, "requires_payment_method"},
		{"pm_card_threeDSecure2Required", provider.Outcome{Status: payment.Requested}, "requires_action"},
	} {
		t.Run(tc.card, func(t *testing.T) {
			ctx := context.Background()
			r := cardRequest(tc.card)
			got, err := p.Authorize(ctx, r)
			if err != nil {
				t.Fatalf("Authorize: %v", err)
			}
			pi := onlyIntent(t, sandbox, r.PaymentID)
			tc.want.ProviderPaymentID = pi.ID
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Authorize (-want +got):\n%s", diff)
			}
			wantPI := sandboxIntent{ID: pi.ID, Status: tc.sandboxStatus, Amount: 2400, Currency: "jpy", CaptureMethod: "manual",
				Metadata: map[string]string{"spanmart_payment_id": r.PaymentID, "order_id": r.OrderID, "customer_id": r.CustomerID}}
			if diff := cmp.Diff(wantPI, pi); diff != "" {
				t.Errorf("the sandbox's payment intent (-want +got):\n%s", diff)
			}
			looked, err := p.Lookup(ctx, pi.ID)
			if err != nil {
				t.Fatalf("Lookup: %v", err)
			}
			if diff := cmp.Diff(tc.want, looked); diff != "" {
				t.Errorf("Lookup (-want +got):\n%s", diff)
			}
		})
	}
}

// The same idempotency key twice is one PaymentIntent and the first answer, decline included;
// the same key with other parameters is refused for good.
func TestAuthorizeIdempotent(t *testing.T) {
	p := newProvider(t, sandbox.URL(), nil)
	ctx := context.Background()
	for _, card := range []string{"pm_card_visa", "pm_card_chargeDeclined"} {
		t.Run(card, func(t *testing.T) {
			r := cardRequest(card)
			first, err := p.Authorize(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			again, err := p.Authorize(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(first, again); diff != "" {
				t.Errorf("replay (-first +again):\n%s", diff)
			}
			if pi := onlyIntent(t, sandbox, r.PaymentID); pi.ID != first.ProviderPaymentID {
				t.Errorf("the sandbox holds %s, the adapter answered %s", pi.ID, first.ProviderPaymentID)
			}
			other := r
			other.AmountMinor++
			_, err = p.Authorize(ctx, other)
			if pe := providerError(t, err); pe.Temporary || pe.Reason != payment.ReasonInvalidRequest || pe.Status != 400 {
				t.Errorf("same key, other amount: %v; want invalid_request, not temporary, http 400", err)
			}
			onlyIntent(t, sandbox, r.PaymentID)
		})
	}
}

// Requests the adapter or Stripe refuses for good; none makes a payment.
func TestAuthorizeInvalid(t *testing.T) {
	p := newProvider(t, sandbox.URL(), nil)
	wrongKey, err := stripe.New(stripe.Config{APIKey: "sk_test_wrong", BaseURL: sandbox.URL(), WebhookSecret: webhookSecret})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		p      *stripe.Provider
		change func(*provider.AuthorizeRequest)
		status int
	}{
		{"no idempotency key", p, func(r *provider.AuthorizeRequest) { r.IdempotencyKey = "" }, 0},
		{"konbini", p, func(r *provider.AuthorizeRequest) { r.Method, r.Instrument = payment.Konbini, "lawson" }, 0},
		{"no instrument", p, func(r *provider.AuthorizeRequest) { r.Instrument = "" }, 0},
		{"zero amount", p, func(r *provider.AuthorizeRequest) { r.AmountMinor = 0 }, 0},
		{"unknown payment method", p, func(r *provider.AuthorizeRequest) { r.Instrument = "pm_card_nosuch" }, 400},
		{"wrong api key", wrongKey, func(r *provider.AuthorizeRequest) {}, 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cardRequest("pm_card_visa")
			tc.change(&r)
			o, err := tc.p.Authorize(context.Background(), r)
			pe := providerError(t, err)
			if pe.Temporary || pe.Reason != payment.ReasonInvalidRequest || pe.Status != tc.status || pe.Op != "authorize" || pe.Provider != "stripe" {
				t.Errorf("Authorize = %+v, %v; want invalid_request, not temporary, http %d", o, err, tc.status)
			}
			if errors.Is(err, provider.ErrNotFound) {
				t.Errorf("%v is ErrNotFound; only an unknown payment is", err)
			}
			if pis := intentsOf(t, sandbox, r.PaymentID); len(pis) != 0 {
				t.Errorf("the sandbox holds %+v, want nothing", pis)
			}
		})
	}
}

func TestCapture(t *testing.T) {
	p := newProvider(t, sandbox.URL(), nil)
	ctx := context.Background()
	for _, tc := range []struct {
		name         string
		amount       int64
		wantReceived int64
	}{
		{"everything", 0, 2400},
		{"part", 1000, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, id := authorized(t, p)
			op := provider.Operation{IdempotencyKey: "capture-" + r.PaymentID, PaymentID: r.PaymentID, ProviderPaymentID: id, AmountMinor: tc.amount}
			want := provider.Outcome{Status: payment.Captured, ProviderPaymentID: id}
			for _, attempt := range []string{"first", "replay"} {
				got, err := p.Capture(ctx, op)
				if err != nil {
					t.Fatalf("%s Capture: %v", attempt, err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s Capture (-want +got):\n%s", attempt, diff)
				}
			}
			if pi := onlyIntent(t, sandbox, r.PaymentID); pi.Status != "succeeded" || pi.AmountReceived != tc.wantReceived {
				t.Errorf("the sandbox's payment intent: %s, %d received; want succeeded, %d", pi.Status, pi.AmountReceived, tc.wantReceived)
			}
			// A capture under another key (an earlier one's answer was lost, say) finds it captured.
			op.IdempotencyKey += "-2"
			if got, err := p.Capture(ctx, op); err != nil || got != want {
				t.Errorf("Capture of a captured payment = %+v, %v; want %+v", got, err, want)
			}
			if got, err := p.Lookup(ctx, id); err != nil || got != want {
				t.Errorf("Lookup = %+v, %v; want %+v", got, err, want)
			}
			// The money is taken: a void cannot release it.
			_, err := p.Void(ctx, provider.Operation{IdempotencyKey: "void-" + r.PaymentID, PaymentID: r.PaymentID, ProviderPaymentID: id})
			if pe := providerError(t, err); pe.Temporary || pe.Reason != payment.ReasonInvalidRequest || pe.Status != 400 {
				t.Errorf("Void of a captured payment: %v; want invalid_request, not temporary, http 400", err)
			}
		})
	}
}

func TestVoid(t *testing.T) {
	p := newProvider(t, sandbox.URL(), nil)
	ctx := context.Background()
	for _, card := range []string{"pm_card_visa", "pm_card_threeDSecure2Required"} {
		t.Run(card, func(t *testing.T) {
			r := cardRequest(card)
			o, err := p.Authorize(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			op := provider.Operation{IdempotencyKey: "void-" + r.PaymentID, PaymentID: r.PaymentID, ProviderPaymentID: o.ProviderPaymentID}
			want := provider.Outcome{Status: payment.Voided, ProviderPaymentID: o.ProviderPaymentID}
			for _, attempt := range []string{"first", "replay", "another key"} {
				if attempt == "another key" {
					op.IdempotencyKey += "-2"
				}
				got, err := p.Void(ctx, op)
				if err != nil {
					t.Fatalf("%s Void: %v", attempt, err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s Void (-want +got):\n%s", attempt, diff)
				}
			}
			if got, err := p.Lookup(ctx, o.ProviderPaymentID); err != nil || got != want {
				t.Errorf("Lookup = %+v, %v; want %+v", got, err, want)
			}
			if pi := onlyIntent(t, sandbox, r.PaymentID); pi.Status != "canceled" {
				t.Errorf("the sandbox's payment intent is %s, want canceled", pi.Status)
			}
			_, err = p.Capture(ctx, provider.Operation{IdempotencyKey: "capture-" + r.PaymentID, PaymentID: r.PaymentID, ProviderPaymentID: o.ProviderPaymentID})
			if pe := providerError(t, err); pe.Temporary || pe.Reason != payment.ReasonInvalidRequest {
				t.Errorf("Capture of a voided payment: %v; want invalid_request, not temporary", err)
			}
		})
	}
}

// A payment Stripe does not know is ErrNotFound (inside a permanent *provider.Error) for
// Lookup, Capture and Void alike.
func TestUnknownPayment(t *testing.T) {
	p := newProvider(t, sandbox.URL(), nil)
	ctx := context.Background()
	op := func(key string) provider.Operation {
		return provider.Operation{IdempotencyKey: key + "-" + rand.Text(), PaymentID: "pay-x", ProviderPaymentID: "pi_nosuch"}
	}
	for name, call := range map[string]func() (provider.Outcome, error){
		"lookup":  func() (provider.Outcome, error) { return p.Lookup(ctx, "pi_nosuch") },
		"capture": func() (provider.Outcome, error) { return p.Capture(ctx, op("capture")) },
		"void":    func() (provider.Outcome, error) { return p.Void(ctx, op("void")) },
	} {
		t.Run(name, func(t *testing.T) {
			_, err := call()
			if !errors.Is(err, provider.ErrNotFound) {
				t.Fatalf("%s of an unknown payment: %v, want ErrNotFound", name, err)
			}
			if pe := providerError(t, err); pe.Temporary || pe.Status != 404 || pe.Op != name {
				t.Errorf("%s: %v; want not temporary, http 404", name, err)
			}
		})
	}
	if _, err := p.Lookup(ctx, ""); err == nil || provider.Temporary(err) {
		t.Errorf("Lookup(\"\") = %v, want a permanent error", err)
	}
}

// A captured payment is refunded once: the replay answers the same, a refund under another key
// finds it refunded (charge_already_refunded); the sandbox holds one refund, which names the
// payment. Money that is only held (not captured) or a payment Stripe does not know is refused
// for good.
func TestRefund(t *testing.T) {
	p := newProvider(t, sandbox.URL(), nil)
	ctx := context.Background()
	r, id := authorized(t, p)
	op := provider.Operation{IdempotencyKey: "refund-" + r.PaymentID, PaymentID: r.PaymentID, ProviderPaymentID: id, AmountMinor: r.AmountMinor}
	_, err := p.Refund(ctx, op)
	if pe := providerError(t, err); pe.Temporary || pe.Reason != payment.ReasonInvalidRequest || pe.Op != "refund" {
		t.Errorf("Refund of an authorization that is not captured: %v; want invalid_request, not temporary", err)
	}
	if _, err := p.Capture(ctx, provider.Operation{IdempotencyKey: "capture-" + r.PaymentID, PaymentID: r.PaymentID, ProviderPaymentID: id}); err != nil {
		t.Fatal(err)
	}
	op.IdempotencyKey += "-after-capture" // the refused request's answer is kept under the first key
	want := provider.Outcome{Status: payment.Refunded, ProviderPaymentID: id}
	for _, attempt := range []string{"first", "replay", "another key"} {
		if attempt == "another key" {
			op.IdempotencyKey += "-2"
		}
		got, err := p.Refund(ctx, op)
		if err != nil {
			t.Fatalf("%s Refund: %v", attempt, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s Refund (-want +got):\n%s", attempt, diff)
		}
	}
	var refunds []sandboxRefund
	for _, rf := range readBack[sandboxRefund](t, sandbox, "/_sandbox/refunds") {
		if rf.PaymentIntent == id {
			refunds = append(refunds, rf)
		}
	}
	wantRefunds := []sandboxRefund{{PaymentIntent: id, Amount: 2400, Status: "succeeded", Metadata: map[string]string{"spanmart_payment_id": r.PaymentID}}}
	if diff := cmp.Diff(wantRefunds, refunds); diff != "" {
		t.Errorf("the sandbox's refunds (-want +got):\n%s", diff)
	}

	_, err = p.Refund(ctx, provider.Operation{IdempotencyKey: "refund-" + rand.Text(), PaymentID: "pay-x", ProviderPaymentID: "pi_nosuch"})
	if pe := providerError(t, err); pe.Temporary || pe.Reason != payment.ReasonInvalidRequest || pe.Status != 400 {
		t.Errorf("Refund of an unknown payment: %v; want invalid_request, not temporary, http 400", err)
	}
	if _, err := p.Refund(ctx, provider.Operation{PaymentID: "pay-x", ProviderPaymentID: id}); err == nil || provider.Temporary(err) {
		t.Errorf("Refund without an idempotency key = %v, want a permanent error", err)
	}
}

// A refund Stripe has not finished is read again by its id (a retry under the same key would
// replay "pending"): a temporary error while it stays pending, REFUNDED once it succeeded. The
// sandbox refunds at once, so a stand-in answers here.
func TestPendingRefundIsReadAgain(t *testing.T) {
	var (
		mu       sync.Mutex
		requests []string
		status   = "pending"
	)
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		requests = append(requests, r.Method+" "+r.URL.Path)
		answer := "pending" // what a replay of the creation says
		if r.Method == http.MethodGet {
			answer = status
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"re_1","object":"refund","amount":2400,"currency":"jpy","status":%q,"payment_intent":"pi_1"}`, answer)
	}))
	t.Cleanup(fake.Close)
	p := newProvider(t, fake.URL, nil)
	op := provider.Operation{IdempotencyKey: "refund-pay-1", PaymentID: "pay-1", ProviderPaymentID: "pi_1"}
	if _, err := p.Refund(context.Background(), op); !provider.Temporary(err) {
		t.Fatalf("Refund while pending: %v, want a temporary error", err)
	}
	mu.Lock()
	status = "succeeded"
	mu.Unlock()
	got, err := p.Refund(context.Background(), op)
	if err != nil || got != (provider.Outcome{Status: payment.Refunded, ProviderPaymentID: "pi_1"}) {
		t.Errorf("Refund once it succeeded = %+v, %v; want REFUNDED", got, err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"POST /v1/refunds", "GET /v1/refunds/re_1", "POST /v1/refunds", "GET /v1/refunds/re_1"}
	if diff := cmp.Diff(want, requests); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

// sandboxRefund is a Refund as the sandbox's read-back shows it.
type sandboxRefund struct {
	PaymentIntent string            `json:"payment_intent"`
	Amount        int64             `json:"amount"`
	Status        string            `json:"status"`
	Metadata      map[string]string `json:"metadata"`
}
