package stripe_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/payment"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/provider"
)

// An authorization not captured within 7 days lapses: Lookup and the webhook say EXPIRED, a
// capture fails for good, a void finds nothing held. The test has a sandbox of its own, since
// it moves the clock.
func TestAuthorizationLapse(t *testing.T) {
	rcv := newReceiver()
	t.Cleanup(rcv.Close)
	srv, err := startSandbox(rcv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	p := newProvider(t, srv.URL(), nil)
	ctx := context.Background()

	toCapture, captureID := authorized(t, p)
	toVoid, voidID := authorized(t, p)
	if _, err := srv.AdvanceClock(7*24*time.Hour + time.Minute); err != nil {
		t.Fatal(err)
	}

	expired := provider.Outcome{Status: payment.Expired, ProviderPaymentID: captureID, Reason: payment.ReasonExpired}
	got, err := p.Lookup(ctx, captureID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(expired, got); diff != "" {
		t.Errorf("Lookup (-want +got):\n%s", diff)
	}

	got, err = p.Capture(ctx, provider.Operation{IdempotencyKey: "capture-" + toCapture.PaymentID, PaymentID: toCapture.PaymentID, ProviderPaymentID: captureID})
	if err != nil {
		t.Fatal(err)
	}
	want := provider.Outcome{Status: payment.CaptureFailed, ProviderPaymentID: captureID, Reason: payment.ReasonExpired}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Capture of a lapsed authorization (-want +got):\n%s", diff)
	}

	got, err = p.Void(ctx, provider.Operation{IdempotencyKey: "void-" + toVoid.PaymentID, PaymentID: toVoid.PaymentID, ProviderPaymentID: voidID})
	if err != nil {
		t.Fatal(err)
	}
	want = provider.Outcome{Status: payment.Voided, ProviderPaymentID: voidID, Reason: payment.ReasonExpired}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Void of a lapsed authorization (-want +got):\n%s", diff)
	}

	n := waitNotifications(t, p, rcv, captureID, "payment_intent.canceled")["payment_intent.canceled"]
	wantN := provider.Notification{EventID: n.EventID, EventType: "payment_intent.canceled", PaymentID: toCapture.PaymentID,
		ProviderPaymentID: captureID, Outcome: expired}
	if diff := cmp.Diff(wantN, n); diff != "" || n.EventID == "" {
		t.Errorf("the lapse's webhook (-want +got):\n%s", diff)
	}
}
