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
