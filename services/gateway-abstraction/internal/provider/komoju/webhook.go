package komoju

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/payment"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/provider"
)

// signatureHeader carries the hex HMAC-SHA256 of a webhook's raw body.
const signatureHeader = "X-Komoju-Signature"

// eventJSON is a KOMOJU event as delivered to a webhook.
type eventJSON struct {
	ID     string          `json:"id"`
	Type   string          `json:"type"`
	Data   json.RawMessage `json:"data"`
	Reason *string         `json:"reason"`
}

// movingEvents are the event types whose payment snapshot says what the payment now is.
var movingEvents = map[string]bool{
	"payment.authorized": true,
	"payment.captured":   true,
	"payment.failed":     true,
	"payment.cancelled":  true,
	"payment.expired":    true,
	"payment.refunded":   true,
	"payment.updated":    true,
}

// ParseWebhook verifies X-Komoju-Signature and decodes the event. KOMOJU signs no timestamp,
// so now is not used and a delivery has no age to check: a replay verifies, and the gateway's
// de-duplication of events by id (ProviderEvents) absorbs it.
func (p *Provider) ParseWebhook(h http.Header, body []byte, now time.Time) (provider.Notification, error) {
	if err := p.verify(h.Get(signatureHeader), body); err != nil {
		return provider.Notification{}, err
	}
	var e eventJSON
	if err := json.Unmarshal(body, &e); err != nil {
		return provider.Notification{}, fmt.Errorf("%w: komoju event: %v", provider.ErrMalformed, err)
	}
	if e.ID == "" || e.Type == "" {
		return provider.Notification{}, fmt.Errorf("%w: komoju event without id or type", provider.ErrMalformed)
	}
	n := provider.Notification{EventID: e.ID, EventType: e.Type}
	if e.Type == refundRequestUpdated {
		return refundRequestNotification(n, e)
	}
	if !strings.HasPrefix(e.Type, "payment.") {
		return n, nil // ping, customer.*, settlement.*: nothing about a payment
	}
	var pay paymentJSON
	if err := json.Unmarshal(e.Data, &pay); err != nil || pay.ID == "" {
		return provider.Notification{}, fmt.Errorf("%w: komoju event %s (%s) carries no payment", provider.ErrMalformed, e.ID, e.Type)
	}
	n.PaymentID, n.ProviderPaymentID = pay.paymentID(), pay.ID
	if !movingEvents[e.Type] {
		return n, nil // payment.refund.created: a partial refund leaves the payment captured; payment.refunded follows a full one
	}
	var reason string
	if e.Reason != nil {
		reason = *e.Reason
	}
	o, err := outcomeOf(pay, reason)
	if err != nil {
		return provider.Notification{}, fmt.Errorf("%w: komoju event %s (%s): %v", provider.ErrMalformed, e.ID, e.Type, err)
	}
	n.Outcome = o
	return n, nil
}

// refundRequestUpdated is the event of a refund request whose status changed; its data is the
// RefundRequest, which names its payment by KOMOJU's id only.
const refundRequestUpdated = "refund_request.updated"

// refundRequestNotification reads a refund_request.updated event: a rejected request is the
// refund failed (REFUND_FAILED, declined: the payment stays captured, and no payment event
// follows), a pending one accepted (REFUND_PENDING). A completed one moves nothing by itself: it
// may have been for part of the payment, and payment.refunded follows one that gave it all back.
func refundRequestNotification(n provider.Notification, e eventJSON) (provider.Notification, error) {
	var r refundRequestJSON
	if err := json.Unmarshal(e.Data, &r); err != nil || r.Payment == "" {
		return provider.Notification{}, fmt.Errorf("%w: komoju event %s (%s) carries no refund request of a payment", provider.ErrMalformed, e.ID, e.Type)
	}
	n.ProviderPaymentID = r.Payment
	switch r.Status {
	case refundRequestPending:
		n.Outcome = provider.Outcome{Status: payment.RefundPending, ProviderPaymentID: r.Payment}
	case refundRequestRejected:
		n.Outcome = provider.Outcome{Status: payment.RefundFailed, ProviderPaymentID: r.Payment, Reason: payment.ReasonDeclined}
	case refundRequestCompleted:
	default:
		return provider.Notification{}, fmt.Errorf("%w: komoju event %s: refund request %s has status %q, which the komoju adapter does not know", provider.ErrMalformed, e.ID, r.ID, r.Status)
	}
	return n, nil
}

// verify checks signature, the hex HMAC-SHA256 of body keyed with the webhook secret, in
// constant time.
func (p *Provider) verify(signature string, body []byte) error {
	if signature == "" {
		return fmt.Errorf("%w: no %s header", provider.ErrSignature, signatureHeader)
	}
	got, err := hex.DecodeString(strings.TrimSpace(signature))
	if err != nil {
		return fmt.Errorf("%w: %s is not hex", provider.ErrSignature, signatureHeader)
	}
	mac := hmac.New(sha256.New, []byte(p.webhookSecret))
	mac.Write(body)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return fmt.Errorf("%w: %s does not match the body", provider.ErrSignature, signatureHeader)
	}
	return nil
}
