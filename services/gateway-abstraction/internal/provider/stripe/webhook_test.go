package stripe_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	stripego "github.com/stripe/stripe-go/v82"

	"github.com/spanmart/spanmart/emulator/paysim"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/payment"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/provider"
)

// The sandbox's real, signed deliveries for each flow, parsed: the events that move a payment
// carry its Outcome, the others Status "", all of them the payment's ids (a refund names the
// payment only when the gateway made it).
func TestWebhooks(t *testing.T) {
	p := newProvider(t, sandbox.URL(), nil)
	ctx := context.Background()
	sc := stripego.NewClient(apiKey, stripego.WithBackends(stripego.NewBackendsWithConfig(&stripego.BackendConfig{
		URL: stripego.String(sandbox.URL()), LeveledLogger: &stripego.LeveledLogger{Level: stripego.LevelNull},
	})))
	capture := func(t *testing.T, r provider.AuthorizeRequest, id string) {
		if _, err := p.Capture(ctx, provider.Operation{IdempotencyKey: "capture-" + r.PaymentID, PaymentID: r.PaymentID, ProviderPaymentID: id}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		card string
		then func(t *testing.T, r provider.AuthorizeRequest, id string)
		want map[string]provider.Outcome // by event type; ProviderPaymentID is filled in
		// refundNamesPayment: the refund events carry the payment id (the gateway's refund)
		refundNamesPayment bool
	}{
		{
			name: "authorize and capture", card: "pm_card_visa", then: capture,
			want: map[string]provider.Outcome{
				"payment_intent.created":                   {},
				"charge.succeeded":                         {},
				"payment_intent.amount_capturable_updated": {Status: payment.Authorized},
				"charge.captured":                          {},
				"payment_intent.succeeded":                 {Status: payment.Captured},
			},
		},
		{
			name: "authorize and void", card: "pm_card_visa",
			then: func(t *testing.T, r provider.AuthorizeRequest, id string) {
				if _, err := p.Void(ctx, provider.Operation{IdempotencyKey: "void-" + r.PaymentID, PaymentID: r.PaymentID, ProviderPaymentID: id}); err != nil {
					t.Fatal(err)
				}
			},
			want: map[string]provider.Outcome{
				"payment_intent.amount_capturable_updated": {Status: payment.Authorized},
				"payment_intent.canceled":                  {Status: payment.Voided},
			},
		},
		{
			name: "declined", card: "pm_card_chargeDeclined",
			want: map[string]provider.Outcome{
				"charge.failed":                 {},
				"payment_intent.payment_failed": {Status: payment.Failed, Reason: payment.ReasonDeclined},
			},
		},
		{
			name: "insufficient funds", card: "pm_card_chargeDeclinedInsufficientFunds",
			want: map[string]provider.Outcome{
				"payment_intent.payment_failed": {Status: payment.Failed, Reason: payment.ReasonInsufficientFunds},
			},
		},
		{
			name: "3-D Secure", card: "pm_card_threeDSecure2Required",
			want: map[string]provider.Outcome{
				"payment_intent.requires_action": {Status: payment.Requested},
			},
		},
		{
			name: "the gateway's refund", card: "pm_card_visa",
			then: func(t *testing.T, r provider.AuthorizeRequest, id string) {
				capture(t, r, id)
				if _, err := p.Refund(ctx, provider.Operation{IdempotencyKey: "refund-" + r.PaymentID, PaymentID: r.PaymentID, ProviderPaymentID: id}); err != nil {
					t.Fatal(err)
				}
			},
			want: map[string]provider.Outcome{
				"refund.created":  {Status: payment.Refunded},
				"charge.refunded": {Status: payment.Refunded},
			},
			refundNamesPayment: true,
		},
		{
			// A refund made elsewhere (the Dashboard) moves a payment only once the whole
			// charge is refunded, which charge.refunded says.
			name: "a refund made elsewhere", card: "pm_card_visa",
			then: func(t *testing.T, r provider.AuthorizeRequest, id string) {
				capture(t, r, id)
				if _, err := sc.V1Refunds.Create(ctx, &stripego.RefundCreateParams{PaymentIntent: stripego.String(id)}); err != nil {
					t.Fatal(err)
				}
			},
			want: map[string]provider.Outcome{
				"refund.created":  {},
				"charge.refunded": {Status: payment.Refunded},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cardRequest(tc.card)
			o, err := p.Authorize(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			id := o.ProviderPaymentID
			if tc.then != nil {
				tc.then(t, r, id)
			}
			var types []string
			for typ := range tc.want {
				types = append(types, typ)
			}
			got := waitNotifications(t, p, hooks, id, types...)
			for typ, outcome := range tc.want {
				n := got[typ]
				if n.EventID == "" {
					t.Errorf("%s: no event id", typ)
				}
				want := provider.Notification{EventID: n.EventID, EventType: typ, ProviderPaymentID: id, Outcome: outcome}
				if strings.HasPrefix(typ, "payment_intent.") || (strings.HasPrefix(typ, "refund.") && tc.refundNamesPayment) {
					want.PaymentID = r.PaymentID
				}
				if outcome.Status != "" {
					want.Outcome.ProviderPaymentID = id
				}
				if diff := cmp.Diff(want, n); diff != "" {
					t.Errorf("%s (-want +got):\n%s", typ, diff)
				}
			}
		})
	}
}

// A webhook that is not signed with the secret within the tolerance before now is ErrSignature.
func TestWebhookSignature(t *testing.T) {
	p := newProvider(t, sandbox.URL(), nil)
	_, id := authorized(t, p)
	waitNotifications(t, p, hooks, id, "payment_intent.amount_capturable_updated")
	var real delivery
	for _, d := range hooks.deliveries() {
		if n, err := p.ParseWebhook(d.header, d.body, time.Now()); err == nil && n.ProviderPaymentID == id && n.EventType == "payment_intent.amount_capturable_updated" {
			real = d
		}
	}
	now := time.Now()
	signed := func(secret string, at time.Time) http.Header {
		return http.Header{"Stripe-Signature": {paysim.SignatureHeader(real.body, secret, at)}}
	}
	tampered := []byte(strings.Replace(string(real.body), `"requires_capture"`, `"succeeded"`, 1))
	if string(tampered) == string(real.body) {
		t.Fatalf("the delivery has no requires_capture to tamper with:\n%s", real.body)
	}

	for _, tc := range []struct {
		name   string
		header http.Header
		body   []byte
		now    time.Time
		ok     bool
	}{
		{"the sandbox's delivery", real.header, real.body, now, true},
		{"signed 299 s before now", signed(webhookSecret, now.Add(-299*time.Second)), real.body, now, true},
		{"signed 301 s before now", signed(webhookSecret, now.Add(-301*time.Second)), real.body, now, false},
		{"the delivery, read 10 minutes later", real.header, real.body, now.Add(10 * time.Minute), false},
		{"another secret", signed("whsec_forged", now), real.body, now, false},
		{"tampered body", real.header, tampered, now, false},
		{"no header", http.Header{}, real.body, now, false},
		{"no timestamp", http.Header{"Stripe-Signature": {"v1=00ff"}}, real.body, now, false},
		{"no signature", http.Header{"Stripe-Signature": {"t=" + strings.TrimPrefix(strings.Split(real.header.Get("Stripe-Signature"), ",")[0], "t=")}}, real.body, now, false},
		{"garbage header", http.Header{"Stripe-Signature": {"nonsense"}}, real.body, now, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := p.ParseWebhook(tc.header, tc.body, tc.now)
			if tc.ok {
				if err != nil || n.Outcome.Status != payment.Authorized {
					t.Errorf("ParseWebhook = %+v, %v; want AUTHORIZED", n, err)
				}
				return
			}
			if !errors.Is(err, provider.ErrSignature) || errors.Is(err, provider.ErrMalformed) {
				t.Errorf("ParseWebhook = %+v, %v; want ErrSignature", n, err)
			}
		})
	}
}

// Hand-made events, signed with the secret, for what the sandbox cannot produce: the mapping
// of every PaymentIntent status and failure the adapter reads, and verified events it cannot read.
func TestWebhookDecoding(t *testing.T) {
	p := newProvider(t, sandbox.URL(), nil)
	intent := func(status string, extra map[string]any) map[string]any {
		pi := map[string]any{"id": "pi_1", "object": "payment_intent", "status": status, "amount": 2400, "currency": "jpy",
			"metadata": map[string]string{"spanmart_payment_id": "pay-1"}}
		for k, v := range extra {
			pi[k] = v
		}
		return pi
	}
	lastError := func(code, declineCode string) map[string]any {
		return map[string]any{"last_payment_error": map[string]any{"type": "card_error", "code": code, "decline_code": declineCode, "message": "declined"}}
	}
	canceled := func(reason any) map[string]any { return map[string]any{"cancellation_reason": reason} }
	refund := func(status string, metadata map[string]string) map[string]any {
		return map[string]any{"id": "re_1", "object": "refund", "status": status, "amount": 2400, "payment_intent": "pi_1", "metadata": metadata}
	}
	ours := map[string]string{"spanmart_payment_id": "pay-1"}
	charge := func(refunded bool) map[string]any {
		return map[string]any{"id": "ch_1", "object": "charge", "payment_intent": "pi_1", "refunded": refunded}
	}
	for _, tc := range []struct {
		name, typ  string
		object     any
		apiVersion string // default stripe-go's
		paymentID  string // of a charge or refund event; a payment intent's is pay-1
		want       provider.Outcome
		malformed  bool
	}{
		{name: "authorized", typ: "payment_intent.amount_capturable_updated", object: intent("requires_capture", nil),
			want: provider.Outcome{Status: payment.Authorized, ProviderPaymentID: "pi_1"}},
		{name: "captured", typ: "payment_intent.succeeded", object: intent("succeeded", nil),
			want: provider.Outcome{Status: payment.Captured, ProviderPaymentID: "pi_1"}},
		{name: "voided", typ: "payment_intent.canceled", object: intent("canceled", canceled(nil)),
			want: provider.Outcome{Status: payment.Voided, ProviderPaymentID: "pi_1"}},
		{name: "canceled by request", typ: "payment_intent.canceled", object: intent("canceled", canceled("requested_by_customer")),
			want: provider.Outcome{Status: payment.Voided, ProviderPaymentID: "pi_1"}},
		{name: "lapsed", typ: "payment_intent.canceled", object: intent("canceled", canceled("automatic")),
			want: provider.Outcome{Status: payment.Expired, ProviderPaymentID: "pi_1", Reason: payment.ReasonExpired}},
		{name: "expired", typ: "payment_intent.canceled", object: intent("canceled", canceled("expired")),
			want: provider.Outcome{Status: payment.Expired, ProviderPaymentID: "pi_1", Reason: payment.ReasonExpired}},
		{name: "3-D Secure", typ: "payment_intent.requires_action", object: intent("requires_action", nil),
			want: provider.Outcome{Status: payment.Requested, ProviderPaymentID: "pi_1"}},
		{name: "generic decline", typ: "payment_intent.payment_failed", object: intent("requires_payment_method", lastError("card_declined", "generic_decline")),
			want: provider.Outcome{Status: payment.Failed, ProviderPaymentID: "pi_1", Reason: payment.ReasonDeclined}},
		{name: "expired card", typ: "payment_intent.payment_failed", object: intent("requires_payment_method", lastError("expired_card", "")),
			want: provider.Outcome{Status: payment.Failed, ProviderPaymentID: "pi_1", Reason: payment.ReasonDeclined}},
		{name: "insufficient funds", typ: "payment_intent.payment_failed", object: intent("requires_payment_method", lastError("card_declined", "insufficient_funds")),
			want: provider.Outcome{Status: payment.Failed, ProviderPaymentID: "pi_1", Reason: payment.ReasonInsufficientFunds}},
		{name: "3-D Secure failed", typ: "payment_intent.payment_failed", object: intent("requires_payment_method", lastError("payment_intent_authentication_failure", "")),
			want: provider.Outcome{Status: payment.Failed, ProviderPaymentID: "pi_1", Reason: payment.ReasonAuthentication}},
		{name: "authentication required", typ: "payment_intent.payment_failed", object: intent("requires_payment_method", lastError("card_declined", "authentication_required")),
			want: provider.Outcome{Status: payment.Failed, ProviderPaymentID: "pi_1", Reason: payment.ReasonAuthentication}},
		{name: "created: moves nothing", typ: "payment_intent.created", object: intent("requires_confirmation", nil)},
		{name: "processing: moves nothing", typ: "payment_intent.processing", object: intent("processing", nil)},
		{name: "charge: moves nothing", typ: "charge.succeeded", object: map[string]any{"id": "ch_1", "object": "charge", "payment_intent": "pi_1"}},
		{name: "charge refunded in full", typ: "charge.refunded", object: charge(true),
			want: provider.Outcome{Status: payment.Refunded, ProviderPaymentID: "pi_1"}},
		{name: "charge refunded in part: moves nothing", typ: "charge.refunded", object: charge(false)},
		{name: "our refund succeeded", typ: "refund.created", object: refund("succeeded", ours), paymentID: "pay-1",
			want: provider.Outcome{Status: payment.Refunded, ProviderPaymentID: "pi_1"}},
		{name: "our refund pending: moves nothing", typ: "refund.created", object: refund("pending", ours), paymentID: "pay-1"},
		{name: "our refund succeeded later", typ: "refund.updated", object: refund("succeeded", ours), paymentID: "pay-1",
			want: provider.Outcome{Status: payment.Refunded, ProviderPaymentID: "pi_1"}},
		{name: "our refund failed", typ: "refund.failed", object: refund("failed", ours), paymentID: "pay-1",
			want: provider.Outcome{Status: payment.RefundFailed, ProviderPaymentID: "pi_1", Reason: payment.ReasonDeclined}},
		{name: "a refund made elsewhere: moves nothing", typ: "refund.created", object: refund("succeeded", nil)},
		{name: "customer: moves nothing", typ: "customer.created", object: map[string]any{"id": "cus_1", "object": "customer"}},

		{name: "not a payment intent", typ: "payment_intent.succeeded", object: map[string]any{"id": "ch_1", "object": "charge"}, malformed: true},
		{name: "unknown status", typ: "payment_intent.succeeded", object: intent("teleported", nil), malformed: true},
		{name: "unknown refund status", typ: "refund.updated", object: refund("teleported", ours), malformed: true},
		{name: "other api version", typ: "payment_intent.succeeded", object: intent("succeeded", nil), apiVersion: "2020-08-27", malformed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			version := tc.apiVersion
			if version == "" {
				version = stripego.APIVersion
			}
			body, err := json.Marshal(map[string]any{"id": "evt_1", "object": "event", "api_version": version, "created": time.Now().Unix(),
				"type": tc.typ, "data": map[string]any{"object": tc.object}})
			if err != nil {
				t.Fatal(err)
			}
			n, err := p.ParseWebhook(http.Header{"Stripe-Signature": {paysim.SignatureHeader(body, webhookSecret, time.Now())}}, body, time.Now())
			if tc.malformed {
				if !errors.Is(err, provider.ErrMalformed) || errors.Is(err, provider.ErrSignature) {
					t.Errorf("ParseWebhook = %+v, %v; want ErrMalformed", n, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := provider.Notification{EventID: "evt_1", EventType: tc.typ, PaymentID: tc.paymentID, Outcome: tc.want}
			if strings.HasPrefix(tc.typ, "payment_intent.") {
				want.PaymentID = "pay-1"
			}
			if !strings.HasPrefix(tc.typ, "customer.") {
				want.ProviderPaymentID = "pi_1"
			}
			if diff := cmp.Diff(want, n); diff != "" {
				t.Errorf("ParseWebhook (-want +got):\n%s", diff)
			}
		})
	}

	body := []byte("this is not JSON")
	_, err := p.ParseWebhook(http.Header{"Stripe-Signature": {paysim.SignatureHeader(body, webhookSecret, time.Now())}}, body, time.Now())
	if !errors.Is(err, provider.ErrMalformed) {
		t.Errorf("a signed body that is not JSON: %v, want ErrMalformed", err)
	}
}
