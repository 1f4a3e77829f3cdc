package stripe

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/payment"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/provider"
)

// movingEvents are the PaymentIntent events that announce a state a payment moves to; their
// Outcome is read from the event's PaymentIntent. Other events are acknowledged and ignored.
var movingEvents = map[stripego.EventType]bool{
	stripego.EventTypePaymentIntentAmountCapturableUpdated: true,
	stripego.EventTypePaymentIntentPaymentFailed:           true,
	stripego.EventTypePaymentIntentSucceeded:               true,
	stripego.EventTypePaymentIntentCanceled:                true,
	stripego.EventTypePaymentIntentRequiresAction:          true,
}

// refundEvents are the refund events whose Refund says how a refund the gateway asked for ended.
var refundEvents = map[stripego.EventType]bool{
	stripego.EventTypeRefundCreated: true,
	stripego.EventTypeRefundUpdated: true,
	stripego.EventTypeRefundFailed:  true,
}

// ParseWebhook verifies a Stripe webhook and decodes it (see the package doc).
//
// The signature's age is measured against now, not the wall clock: stripe-go's
// webhook.ConstructEvent can only compare with time.Now, so the adapter reads the signed
// timestamp (t=) and checks the tolerance itself, then has stripe-go verify the HMAC, which
// covers that timestamp, with its own tolerance check switched off.
func (p *Provider) ParseWebhook(h http.Header, body []byte, now time.Time) (provider.Notification, error) {
	header := h.Get("Stripe-Signature")
	if header == "" {
		return provider.Notification{}, fmt.Errorf("%w: no Stripe-Signature header", provider.ErrSignature)
	}
	signed, ok := signedAt(header)
	if !ok {
		return provider.Notification{}, fmt.Errorf("%w: Stripe-Signature has no valid timestamp", provider.ErrSignature)
	}
	if age := now.Sub(signed); age > p.webhookTolerance {
		return provider.Notification{}, fmt.Errorf("%w: signed %v ago, more than the %v tolerated", provider.ErrSignature, age.Truncate(time.Second), p.webhookTolerance)
	}
	ev, err := webhook.ConstructEventWithOptions(body, header, p.webhookSecret, webhook.ConstructEventOptions{IgnoreTolerance: true})
	switch {
	case errors.Is(err, webhook.ErrNotSigned), errors.Is(err, webhook.ErrInvalidHeader),
		errors.Is(err, webhook.ErrNoValidSignature), errors.Is(err, webhook.ErrTooOld):
		return provider.Notification{}, fmt.Errorf("%w: %v", provider.ErrSignature, err)
	case err != nil && !json.Valid(body):
		// Verified, but not JSON: stripe-go's error quotes encoding/json's, which is not the
		// caller's business.
		return provider.Notification{}, fmt.Errorf("%w: the signed body is not JSON", provider.ErrMalformed)
	case err != nil:
		// Verified JSON, but not an event of the API version stripe-go decodes (its error names
		// both versions).
		return provider.Notification{}, fmt.Errorf("%w: %v", provider.ErrMalformed, err)
	}
	return decodeEvent(ev)
}

// signedAt is the timestamp (t=) of a Stripe-Signature header "t=1700000000,v1=...".
func signedAt(header string) (time.Time, bool) {
	for _, part := range strings.Split(header, ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(part), "t="); ok {
			sec, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return time.Time{}, false
			}
			return time.Unix(sec, 0), true
		}
	}
	return time.Time{}, false
}

// decodeEvent reads a verified event. A PaymentIntent event must carry a readable PaymentIntent;
// of charge and refund events only the PaymentIntent's id is read (when it can be), and the
// refund they announce (see the package doc).
func decodeEvent(ev stripego.Event) (provider.Notification, error) {
	n := provider.Notification{EventID: ev.ID, EventType: string(ev.Type)}
	if ev.ID == "" || ev.Type == "" || ev.Data == nil || len(ev.Data.Raw) == 0 {
		return provider.Notification{}, fmt.Errorf("%w: event %q of type %q has no id, type or object", provider.ErrMalformed, ev.ID, ev.Type)
	}
	typ := string(ev.Type)
	switch {
	case strings.HasPrefix(typ, "payment_intent."):
		var pi stripego.PaymentIntent
		if err := json.Unmarshal(ev.Data.Raw, &pi); err != nil || pi.ID == "" || pi.Object != "payment_intent" {
			return provider.Notification{}, fmt.Errorf("%w: event %s (%s) does not carry a payment intent (%v)", provider.ErrMalformed, ev.ID, typ, err)
		}
		n.PaymentID, n.ProviderPaymentID = pi.Metadata[metaPaymentID], pi.ID
		if movingEvents[ev.Type] {
			o, err := outcomeOf(&pi)
			if err != nil {
				return provider.Notification{}, fmt.Errorf("%w: event %s: %v", provider.ErrMalformed, ev.ID, err)
			}
			n.Outcome = o
		}
	case strings.HasPrefix(typ, "charge."):
		var ch stripego.Charge
		if json.Unmarshal(ev.Data.Raw, &ch) == nil && ch.PaymentIntent != nil {
			n.PaymentID, n.ProviderPaymentID = ch.Metadata[metaPaymentID], ch.PaymentIntent.ID
			// Refunded is true once all of the charge is given back; a partial refund moves nothing.
			if ev.Type == stripego.EventTypeChargeRefunded && ch.Refunded {
				n.Outcome = provider.Outcome{Status: payment.Refunded, ProviderPaymentID: ch.PaymentIntent.ID}
			}
		}
	case strings.HasPrefix(typ, "refund."):
		var rf stripego.Refund
		if json.Unmarshal(ev.Data.Raw, &rf) == nil && rf.PaymentIntent != nil {
			n.PaymentID, n.ProviderPaymentID = rf.Metadata[metaPaymentID], rf.PaymentIntent.ID
			// Only a refund the gateway made (it carries the payment id) moves a payment: it is
			// all of the payment, where one made elsewhere (the Dashboard) may be a part.
			if refundEvents[ev.Type] && n.PaymentID != "" {
				o, final, err := refundOutcome(&rf, rf.PaymentIntent.ID)
				if err != nil {
					return provider.Notification{}, fmt.Errorf("%w: event %s: %v", provider.ErrMalformed, ev.ID, err)
				}
				if final {
					n.Outcome = o
				}
			}
		}
	}
	return n, nil
}
