package paysim

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stripe/stripe-go/v82"
)

func TestAuthorizeAndCapture(t *testing.T) {
	ctx := context.Background()
	params := &stripe.PaymentIntentCreateParams{
		Amount:        stripe.Int64(2500),
		Currency:      stripe.String("usd"),
		PaymentMethod: stripe.String("pm_card_visa"),
		CaptureMethod: stripe.String("manual"),
		Confirm:       stripe.Bool(true),
	}
	params.AddMetadata("order_id", "o-1")
	pi, err := sc.V1PaymentIntents.Create(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if pi.Status != stripe.PaymentIntentStatusRequiresCapture || pi.AmountCapturable != 2500 || pi.AmountReceived != 0 {
		t.Fatalf("after confirm: status %s, capturable %d, received %d", pi.Status, pi.AmountCapturable, pi.AmountReceived)
	}
	if diff := cmp.Diff(map[string]string{"order_id": "o-1"}, pi.Metadata); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	if pi.PaymentMethod == nil || pi.PaymentMethod.ID == "" || pi.LatestCharge == nil || pi.LatestCharge.ID == "" {
		t.Fatalf("payment_method %+v, latest_charge %+v", pi.PaymentMethod, pi.LatestCharge)
	}
	if pi.CaptureMethod != stripe.PaymentIntentCaptureMethodManual || pi.Currency != stripe.CurrencyUSD {
		t.Errorf("capture_method %s, currency %s", pi.CaptureMethod, pi.Currency)
	}

	captured, err := sc.V1PaymentIntents.Capture(ctx, pi.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if captured.Status != stripe.PaymentIntentStatusSucceeded || captured.AmountReceived != 2500 || captured.AmountCapturable != 0 {
		t.Errorf("after capture: status %s, received %d, capturable %d", captured.Status, captured.AmountReceived, captured.AmountCapturable)
	}
	got, err := sc.V1PaymentIntents.Retrieve(ctx, pi.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != stripe.PaymentIntentStatusSucceeded {
		t.Errorf("retrieved status %s", got.Status)
	}
	ch, err := sc.V1Charges.Retrieve(ctx, pi.LatestCharge.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !ch.Captured || ch.AmountCaptured != 2500 || ch.PaymentIntent.ID != pi.ID {
		t.Errorf("charge captured %v, amount_captured %d, payment_intent %v", ch.Captured, ch.AmountCaptured, ch.PaymentIntent)
	}
}

func TestTwoStepCreateThenConfirm(t *testing.T) {
	ctx := context.Background()
	pi, err := sc.V1PaymentIntents.Create(ctx, &stripe.PaymentIntentCreateParams{
		Amount: stripe.Int64(1000), Currency: stripe.String("eur"), CaptureMethod: stripe.String("manual"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if pi.Status != stripe.PaymentIntentStatusRequiresPaymentMethod {
		t.Fatalf("status %s, want requires_payment_method", pi.Status)
	}
	_, err = sc.V1PaymentIntents.Confirm(ctx, pi.ID, nil)
	if se := stripeError(t, err); se.Code != "payment_intent_unexpected_state" || se.HTTPStatusCode != http.StatusBadRequest {
		t.Errorf("confirm without payment method: %v", se)
	}
	pi, err = sc.V1PaymentIntents.Confirm(ctx, pi.ID, &stripe.PaymentIntentConfirmParams{PaymentMethod: stripe.String("pm_card_mastercard")})
	if err != nil {
		t.Fatal(err)
	}
	if pi.Status != stripe.PaymentIntentStatusRequiresCapture {
		t.Errorf("status %s, want requires_capture", pi.Status)
	}
}

func TestPartialCapture(t *testing.T) {
	ctx := context.Background()
	pi, err := authorize(t, sc, "pm_card_visa", 5000)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sc.V1PaymentIntents.Capture(ctx, pi.ID, &stripe.PaymentIntentCaptureParams{AmountToCapture: stripe.Int64(6000)})
	if se := stripeError(t, err); se.Type != stripe.ErrorTypeInvalidRequest || se.Param != "amount_to_capture" {
		t.Errorf("capture more than authorized: %v", se)
	}
	pi, err = sc.V1PaymentIntents.Capture(ctx, pi.ID, &stripe.PaymentIntentCaptureParams{AmountToCapture: stripe.Int64(3000)})
	if err != nil {
		t.Fatal(err)
	}
	if pi.Status != stripe.PaymentIntentStatusSucceeded || pi.AmountReceived != 3000 {
		t.Errorf("status %s, amount_received %d", pi.Status, pi.AmountReceived)
	}
}

func TestAutomaticCapture(t *testing.T) {
	pi, err := sc.V1PaymentIntents.Create(context.Background(), &stripe.PaymentIntentCreateParams{
		Amount: stripe.Int64(700), Currency: stripe.String("usd"), PaymentMethod: stripe.String("pm_card_visa"), Confirm: stripe.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	if pi.Status != stripe.PaymentIntentStatusSucceeded || pi.AmountReceived != 700 || pi.CaptureMethod != stripe.PaymentIntentCaptureMethodAutomaticAsync {
		t.Errorf("status %s, amount_received %d, capture_method %s", pi.Status, pi.AmountReceived, pi.CaptureMethod)
	}
}

func TestDeclines(t *testing.T) {
	for _, tc := range []struct {
		pm          string
		declineCode stripe.DeclineCode
		message     string
	}{
		{"pm_card_chargeDeclined", stripe.DeclineCodeGenericDecline, "Your card was declined."},
		{"pm_card_chargeDeclinedInsufficientFunds", stripe.DeclineCodeInsufficientFunds, "Your card has insufficient funds."},
	} {
		t.Run(tc.pm, func(t *testing.T) {
			_, err := authorize(t, sc, tc.pm, 1500)
			se := stripeError(t, err)
			if se.HTTPStatusCode != http.StatusPaymentRequired || se.Type != stripe.ErrorTypeCard ||
				se.Code != stripe.ErrorCodeCardDeclined || se.DeclineCode != tc.declineCode || se.Msg != tc.message {
				t.Errorf("error: status %d type %s code %s decline_code %s message %q",
					se.HTTPStatusCode, se.Type, se.Code, se.DeclineCode, se.Msg)
			}
			if ce, ok := se.Err.(*stripe.CardError); !ok || ce.DeclineCode != tc.declineCode {
				t.Errorf("Err = %#v, want a *stripe.CardError with decline code %s", se.Err, tc.declineCode)
			}
			if se.PaymentIntent == nil || se.PaymentIntent.Status != stripe.PaymentIntentStatusRequiresPaymentMethod {
				t.Fatalf("error's payment_intent = %+v", se.PaymentIntent)
			}
			pi, err := sc.V1PaymentIntents.Retrieve(context.Background(), se.PaymentIntent.ID, nil)
			if err != nil {
				t.Fatal(err)
			}
			if pi.LastPaymentError == nil || pi.LastPaymentError.DeclineCode != tc.declineCode || pi.PaymentMethod != nil {
				t.Errorf("last_payment_error %+v, payment_method %+v", pi.LastPaymentError, pi.PaymentMethod)
			}
			// A declined PaymentIntent can be confirmed again with another card.
			pi, err = sc.V1PaymentIntents.Confirm(context.Background(), pi.ID, &stripe.PaymentIntentConfirmParams{PaymentMethod: stripe.String("pm_card_visa")})
			if err != nil {
				t.Fatal(err)
			}
			if pi.Status != stripe.PaymentIntentStatusRequiresCapture || pi.LastPaymentError != nil {
				t.Errorf("after retry with a good card: status %s, last_payment_error %+v", pi.Status, pi.LastPaymentError)
			}
		})
	}
}

func TestThreeDSecure(t *testing.T) {
	ctx := context.Background()
	pi, err := authorize(t, sc, "pm_card_threeDSecure2Required", 4200)
	if err != nil {
		t.Fatal(err)
	}
	if pi.Status != stripe.PaymentIntentStatusRequiresAction || pi.NextAction == nil || pi.NextAction.Type != stripe.PaymentIntentNextActionTypeUseStripeSDK {
		t.Fatalf("status %s, next_action %+v", pi.Status, pi.NextAction)
	}
	if _, err := sc.V1PaymentIntents.Capture(ctx, pi.ID, nil); stripeError(t, err).Code != "payment_intent_unexpected_state" {
		t.Errorf("capture before 3DS: %v", err)
	}
	pi, err = sc.V1PaymentIntents.Confirm(ctx, pi.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pi.Status != stripe.PaymentIntentStatusRequiresCapture || pi.NextAction != nil || pi.AmountCapturable != 4200 {
		t.Errorf("after 3DS: status %s, next_action %+v, capturable %d", pi.Status, pi.NextAction, pi.AmountCapturable)
	}
}

func TestCancel(t *testing.T) {
	ctx := context.Background()
	pi, err := authorize(t, sc, "pm_card_visa", 900)
	if err != nil {
		t.Fatal(err)
	}
	pi, err = sc.V1PaymentIntents.Cancel(ctx, pi.ID, &stripe.PaymentIntentCancelParams{CancellationReason: stripe.String("requested_by_customer")})
	if err != nil {
		t.Fatal(err)
	}
	if pi.Status != stripe.PaymentIntentStatusCanceled || pi.CancellationReason != stripe.PaymentIntentCancellationReasonRequestedByCustomer ||
		pi.CanceledAt == 0 || pi.AmountCapturable != 0 {
		t.Errorf("status %s, reason %s, canceled_at %d, capturable %d", pi.Status, pi.CancellationReason, pi.CanceledAt, pi.AmountCapturable)
	}
	for name, call := range map[string]func() error{
		"cancel":  func() error { _, err := sc.V1PaymentIntents.Cancel(ctx, pi.ID, nil); return err },
		"capture": func() error { _, err := sc.V1PaymentIntents.Capture(ctx, pi.ID, nil); return err },
		"confirm": func() error { _, err := sc.V1PaymentIntents.Confirm(ctx, pi.ID, nil); return err },
	} {
		se := stripeError(t, call())
		if se.HTTPStatusCode != http.StatusBadRequest || se.Type != stripe.ErrorTypeInvalidRequest || se.Code != "payment_intent_unexpected_state" ||
			se.PaymentIntent == nil || se.PaymentIntent.ID != pi.ID {
			t.Errorf("%s a canceled PaymentIntent: %v", name, se)
		}
	}
}

func TestRefund(t *testing.T) {
	ctx := context.Background()
	pi, err := authorize(t, sc, "pm_card_visa", 1000)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sc.V1Refunds.Create(ctx, &stripe.RefundCreateParams{PaymentIntent: stripe.String(pi.ID)})
	if se := stripeError(t, err); se.HTTPStatusCode != http.StatusBadRequest {
		t.Errorf("refund of an uncaptured PaymentIntent: %v", se)
	}
	if _, err := sc.V1PaymentIntents.Capture(ctx, pi.ID, nil); err != nil {
		t.Fatal(err)
	}
	r1, err := sc.V1Refunds.Create(ctx, &stripe.RefundCreateParams{PaymentIntent: stripe.String(pi.ID), Amount: stripe.Int64(300)})
	if err != nil {
		t.Fatal(err)
	}
	if r1.Status != stripe.RefundStatusSucceeded || r1.Amount != 300 || r1.PaymentIntent.ID != pi.ID || r1.Charge.ID != pi.LatestCharge.ID {
		t.Errorf("refund %+v", r1)
	}
	_, err = sc.V1Refunds.Create(ctx, &stripe.RefundCreateParams{PaymentIntent: stripe.String(pi.ID), Amount: stripe.Int64(800)})
	if se := stripeError(t, err); se.Param != "amount" || se.Msg != "Refund amount ($8.00) is greater than unrefunded amount on charge ($7.00)" {
		t.Errorf("refund above what is left: %v", se)
	}
	r2, err := sc.V1Refunds.Create(ctx, &stripe.RefundCreateParams{PaymentIntent: stripe.String(pi.ID)})
	if err != nil {
		t.Fatal(err)
	}
	if r2.Amount != 700 {
		t.Errorf("second refund amount %d, want the 700 left", r2.Amount)
	}
	_, err = sc.V1Refunds.Create(ctx, &stripe.RefundCreateParams{PaymentIntent: stripe.String(pi.ID)})
	if se := stripeError(t, err); se.Code != stripe.ErrorCodeChargeAlreadyRefunded {
		t.Errorf("refund of a refunded charge: %v", se)
	}
	got, err := sc.V1Refunds.Retrieve(ctx, r1.ID, nil)
	if err != nil || got.Amount != 300 {
		t.Errorf("Retrieve = %+v, %v", got, err)
	}
	ch, err := sc.V1Charges.Retrieve(ctx, pi.LatestCharge.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !ch.Refunded || ch.AmountRefunded != 1000 {
		t.Errorf("charge refunded %v, amount_refunded %d", ch.Refunded, ch.AmountRefunded)
	}
}

func TestNotFoundAndAuth(t *testing.T) {
	ctx := context.Background()
	_, err := sc.V1PaymentIntents.Retrieve(ctx, "pi_missing", nil)
	if se := stripeError(t, err); se.HTTPStatusCode != http.StatusNotFound || se.Code != stripe.ErrorCodeResourceMissing || se.Msg != "No such payment_intent: 'pi_missing'" {
		t.Errorf("retrieve missing: %v", se)
	}
	_, err = sc.V1PaymentIntents.Capture(ctx, "pi_missing", nil)
	if se := stripeError(t, err); se.HTTPStatusCode != http.StatusNotFound || se.Code != stripe.ErrorCodeResourceMissing {
		t.Errorf("capture missing: %v", se)
	}
	_, err = authorize(t, sc, "pm_card_nope", 100)
	if se := stripeError(t, err); se.Code != stripe.ErrorCodeResourceMissing || se.Param != "payment_method" {
		t.Errorf("unknown payment method: %v", se)
	}

	_, err = newClient(sandbox.URL(), "pk_test_wrong").V1PaymentIntents.Retrieve(ctx, "pi_x", nil)
	if se := stripeError(t, err); se.HTTPStatusCode != http.StatusUnauthorized || se.Type != stripe.ErrorTypeInvalidRequest {
		t.Errorf("wrong key: %v", se)
	}
	resp, err := http.Get(sandbox.URL() + "/v1/payment_intents/pi_x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no key: status %d, want 401", resp.StatusCode)
	}

	_, err = sc.V1PaymentIntents.Create(ctx, &stripe.PaymentIntentCreateParams{Currency: stripe.String("usd")})
	if se := stripeError(t, err); se.Code != stripe.ErrorCodeParameterMissing || se.Param != "amount" {
		t.Errorf("missing amount: %v", se)
	}
}

func TestOnlyConfiguredKey(t *testing.T) {
	srv, _ := startSandbox(t, Options{APIKey: "sk_test_only"})
	_, err := newClient(srv.URL(), "sk_test_other").V1Events.Retrieve(context.Background(), "evt_x", nil)
	if se := stripeError(t, err); se.HTTPStatusCode != http.StatusUnauthorized {
		t.Errorf("other key: %v", se)
	}
	_, err = newClient(srv.URL(), "sk_test_only").V1Events.Retrieve(context.Background(), "evt_x", nil)
	if se := stripeError(t, err); se.HTTPStatusCode != http.StatusNotFound {
		t.Errorf("configured key: %v", se)
	}
}
