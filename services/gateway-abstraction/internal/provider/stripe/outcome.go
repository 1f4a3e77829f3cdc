package stripe

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	stripego "github.com/stripe/stripe-go/v82"

	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/payment"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/provider"
)

// outcomeOf reads a PaymentIntent as an Outcome (the table in the package doc). A status this
// adapter does not know is an error rather than a guess.
func outcomeOf(pi *stripego.PaymentIntent) (provider.Outcome, error) {
	o := provider.Outcome{ProviderPaymentID: pi.ID}
	switch pi.Status {
	case stripego.PaymentIntentStatusRequiresPaymentMethod:
		// Stripe leaves a declined PaymentIntent here, with the decline in last_payment_error,
		// for the customer to try another card.
		if pi.LastPaymentError != nil {
			o.Status, o.Reason = payment.Failed, reasonOf(pi.LastPaymentError)
		} else {
			o.Status = payment.Requested
		}
	case stripego.PaymentIntentStatusRequiresConfirmation, stripego.PaymentIntentStatusRequiresAction, stripego.PaymentIntentStatusProcessing:
		o.Status = payment.Requested
	case stripego.PaymentIntentStatusRequiresCapture:
		o.Status = payment.Authorized
	case stripego.PaymentIntentStatusSucceeded:
		o.Status = payment.Captured
	case stripego.PaymentIntentStatusCanceled:
		switch pi.CancellationReason {
		case stripego.PaymentIntentCancellationReasonAutomatic, stripego.PaymentIntentCancellationReasonExpired:
			o.Status, o.Reason = payment.Expired, payment.ReasonExpired
		default:
			o.Status = payment.Voided
		}
	default:
		return provider.Outcome{}, fmt.Errorf("payment intent %s has status %q, which the stripe adapter does not know", pi.ID, pi.Status)
	}
	return o, nil
}

// refundPending reports whether Stripe has not finished the refund yet.
func refundPending(rf *stripego.Refund) bool {
	return rf.Status == stripego.RefundStatusPending || rf.Status == stripego.RefundStatusRequiresAction
}

// refundOutcome reads a Refund of the PaymentIntent providerPaymentID as an Outcome (the table in
// the package doc); final is false while Stripe has not finished it. A status this adapter does
// not know is an error rather than a guess.
func refundOutcome(rf *stripego.Refund, providerPaymentID string) (o provider.Outcome, final bool, err error) {
	o = provider.Outcome{ProviderPaymentID: providerPaymentID}
	switch {
	case rf.Status == stripego.RefundStatusSucceeded:
		o.Status = payment.Refunded
	case rf.Status == stripego.RefundStatusFailed, rf.Status == stripego.RefundStatusCanceled:
		o.Status, o.Reason = payment.RefundFailed, payment.ReasonDeclined
	case refundPending(rf):
		return provider.Outcome{}, false, nil
	default:
		return provider.Outcome{}, false, fmt.Errorf("refund %s has status %q, which the stripe adapter does not know", rf.ID, rf.Status)
	}
	return o, true, nil
}

// reasonOf normalizes a card error (a decline, or a failed 3-D Secure in last_payment_error).
func reasonOf(e *stripego.Error) payment.Reason {
	switch {
	case e.DeclineCode == stripego.DeclineCodeInsufficientFunds || e.Code == stripego.ErrorCodeInsufficientFunds:
		return payment.ReasonInsufficientFunds
	case e.DeclineCode == stripego.DeclineCodeAuthenticationRequired,
		e.Code == stripego.ErrorCodeAuthenticationRequired,
		e.Code == stripego.ErrorCodePaymentIntentAuthenticationFailure:
		return payment.ReasonAuthentication
	}
	return payment.ReasonDeclined
}

// failure turns a failed call into a *provider.Error (the table in the package doc). status is
// the HTTP status the transport saw, 0 when no answer came back.
func failure(op string, status int, err error) *provider.Error {
	pe := &provider.Error{Provider: payment.ProviderStripe, Op: op, Status: status,
		Reason: payment.ReasonProviderUnavailable, Temporary: true, Err: err}
	var se *stripego.Error
	if !errors.As(err, &se) {
		// No Stripe error object: no answer (connection, timeout, canceled context) or one that
		// is not Stripe's JSON. Either way nobody knows what Stripe did; the same key will tell.
		// Only a 4xx that no retry mends (a wrong URL, a proxy refusing us) is permanent.
		if status >= 400 && status < 500 && status != http.StatusRequestTimeout && status != http.StatusConflict && status != http.StatusTooManyRequests {
			pe.Reason, pe.Temporary = payment.ReasonInvalidRequest, false
		}
		return pe
	}
	if se.HTTPStatusCode != 0 {
		pe.Status = se.HTTPStatusCode
	}
	pe.Err = &apiError{e: se}
	switch {
	case se.Type == stripego.ErrorTypeAPI, pe.Status >= 500, pe.Status == http.StatusTooManyRequests,
		// 409 idempotency_key_in_use: a request with this key is still running at Stripe.
		pe.Status == http.StatusConflict:
		return pe
	case pe.Status == http.StatusNotFound && se.Code == stripego.ErrorCodeResourceMissing:
		pe.Err = fmt.Errorf("%w: %w", provider.ErrNotFound, pe.Err)
	}
	pe.Reason, pe.Temporary = payment.ReasonInvalidRequest, false
	return pe
}

// invalid is a request the adapter refuses before calling Stripe.
func invalid(op, why string) *provider.Error {
	return &provider.Error{Provider: payment.ProviderStripe, Op: op, Reason: payment.ReasonInvalidRequest, Err: errors.New(why)}
}

// apiError is a Stripe error object as this package lets it out: its message names the type,
// codes, message and request id, never the PaymentIntent (with its client_secret) that
// stripe-go's own Error() text includes.
type apiError struct{ e *stripego.Error }

func (a *apiError) Error() string {
	var b strings.Builder
	b.WriteString(string(a.e.Type))
	if a.e.Code != "" {
		b.WriteString(" " + string(a.e.Code))
	}
	if a.e.DeclineCode != "" {
		b.WriteString(" (" + string(a.e.DeclineCode) + ")")
	}
	if a.e.Msg != "" {
		b.WriteString(": " + a.e.Msg)
	}
	if a.e.RequestID != "" {
		b.WriteString(" [request " + a.e.RequestID + "]")
	}
	return b.String()
}
