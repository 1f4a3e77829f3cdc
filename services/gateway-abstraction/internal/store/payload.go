package store

import (
	"encoding/json"
	"strings"

	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/payment"
)

// paymentPayload is the published contract of the payment.* events (schema version 1): every
// event carries the whole payment as it is after the transition. Consumers tolerate unknown
// fields, so fields may be added; none may be renamed or removed.
type paymentPayload struct {
	PaymentID   string          `json:"payment_id"`
	OrderID     string          `json:"order_id"`
	Method      string          `json:"method"` // card, wallet, konbini, bank_transfer (as orders takes them)
	Provider    string          `json:"provider"`
	Status      string          `json:"status"`
	AmountMinor int64           `json:"amount_minor"`
	Currency    string          `json:"currency"`
	Reason      string          `json:"reason,omitempty"` // failed, expired, capture_failed, void_failed, refund_failed
	Slip        json.RawMessage `json:"slip,omitempty"`   // pending: how the customer pays (provider.Slip)
}

// payloadOf is the payload of an event that reports status: the payment as that transition left
// it (the same transaction may have recorded an intent since).
func payloadOf(p *payment.Payment, status payment.Status) paymentPayload {
	out := paymentPayload{
		PaymentID: p.ID(), OrderID: p.OrderID(), Method: strings.ToLower(string(p.Method())), Provider: p.Method().Provider(),
		Status: string(status), AmountMinor: p.AmountMinor(), Currency: p.Currency(), Reason: string(p.FailureReason()),
	}
	if status == payment.Pending {
		out.Slip = p.Slip()
	}
	if status == payment.Expired && out.Reason == "" {
		out.Reason = string(payment.ReasonExpired)
	}
	return out
}
