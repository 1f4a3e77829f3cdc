package paysim

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
)

func createParams(key string, amount int64) *stripe.PaymentIntentCreateParams {
	p := &stripe.PaymentIntentCreateParams{
		Amount: stripe.Int64(amount), Currency: stripe.String("usd"),
		PaymentMethod: stripe.String("pm_card_visa"), CaptureMethod: stripe.String("manual"), Confirm: stripe.Bool(true),
	}
	p.SetIdempotencyKey(key)
	return p
}

func TestIdempotencyReplayAndMismatch(t *testing.T) {
	ctx := context.Background()
	key := "order-" + newID("k")
	first, err := sc.V1PaymentIntents.Create(ctx, createParams(key, 1200))
	if err != nil {
		t.Fatal(err)
	}
	if got := first.LastResponse.Header.Get("Idempotent-Replayed"); got != "" {
		t.Errorf("first response Idempotent-Replayed = %q", got)
	}
	again, err := sc.V1PaymentIntents.Create(ctx, createParams(key, 1200))
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != first.ID || again.LastResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay: id %s (first %s), Idempotent-Replayed %q", again.ID, first.ID, again.LastResponse.Header.Get("Idempotent-Replayed"))
	}
	if again.LastResponse.IdempotencyKey != key {
		t.Errorf("response Idempotency-Key %q, want %q", again.LastResponse.IdempotencyKey, key)
	}

	_, err = sc.V1PaymentIntents.Create(ctx, createParams(key, 1300))
	se := stripeError(t, err)
	if se.HTTPStatusCode != http.StatusBadRequest || se.Type != stripe.ErrorTypeIdempotency {
		t.Errorf("same key, other parameters: %v", se)
	}
	if _, ok := se.Err.(*stripe.IdempotencyError); !ok {
		t.Errorf("Err = %T, want *stripe.IdempotencyError", se.Err)
	}
	p := &stripe.RefundCreateParams{PaymentIntent: stripe.String(first.ID)}
	p.SetIdempotencyKey(key)
	_, err = sc.V1Refunds.Create(ctx, p)
	if se := stripeError(t, err); se.Type != stripe.ErrorTypeIdempotency {
		t.Errorf("same key, other endpoint: %v", se)
	}

	// Keys are scoped to the secret key that used them.
	other, err := newClient(sandbox.URL(), "sk_test_other").V1PaymentIntents.Create(ctx, createParams(key, 1300))
	if err != nil {
		t.Fatal(err)
	}
	if other.ID == first.ID {
		t.Error("another API key replayed the first key's response")
	}
}

func TestIdempotencyReplaysDeclines(t *testing.T) {
	ctx := context.Background()
	key := newID("k")
	p := createParams(key, 800)
	p.PaymentMethod = stripe.String("pm_card_chargeDeclined")
	_, err := sc.V1PaymentIntents.Create(ctx, p)
	first := stripeError(t, err)
	_, err = sc.V1PaymentIntents.Create(ctx, p)
	second := stripeError(t, err)
	if second.DeclineCode != stripe.DeclineCodeGenericDecline || second.PaymentIntent.ID != first.PaymentIntent.ID ||
		second.LastResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replayed decline: %v (first payment intent %s)", second, first.PaymentIntent.ID)
	}

	// Validation errors are not saved (Stripe saves results only once the endpoint starts
	// executing), so a retry with the same key runs the request again.
	bad := &stripe.PaymentIntentCreateParams{Currency: stripe.String("usd")}
	bad.SetIdempotencyKey(newID("k"))
	for range 2 {
		_, err := sc.V1PaymentIntents.Create(ctx, bad)
		if se := stripeError(t, err); se.Code != stripe.ErrorCodeParameterMissing || se.LastResponse.Header.Get("Idempotent-Replayed") != "" {
			t.Errorf("validation error: %v, replayed %q", se, se.LastResponse.Header.Get("Idempotent-Replayed"))
		}
	}
}

func TestIdempotencyKeysExpireAfter24Hours(t *testing.T) {
	srv, c := startSandbox(t, Options{})
	ctx := context.Background()
	first, err := c.V1PaymentIntents.Create(ctx, createParams("k", 100))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.AdvanceClock(23 * time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := c.V1PaymentIntents.Create(ctx, createParams("k", 200)); stripeError(t, err).Type != stripe.ErrorTypeIdempotency {
		t.Errorf("after 23 h: %v", err)
	}
	if _, err := srv.AdvanceClock(time.Hour); err != nil {
		t.Fatal(err)
	}
	pi, err := c.V1PaymentIntents.Create(ctx, createParams("k", 200))
	if err != nil {
		t.Fatal(err)
	}
	if pi.ID == first.ID || pi.Amount != 200 {
		t.Errorf("after 24 h: %s amount %d, want a new PaymentIntent", pi.ID, pi.Amount)
	}
}
