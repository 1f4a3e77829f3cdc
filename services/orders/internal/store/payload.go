package store

import "github.com/spanmart/spanmart/services/orders/internal/order"

// The payloads below are the published contract of the order.* events (schema version 1).
// Consumers tolerate unknown fields, so fields may be added; none may be renamed or removed.

type linePayload struct {
	SKU            string `json:"sku"`
	Quantity       int64  `json:"quantity"`
	UnitPriceMinor int64  `json:"unit_price_minor"`
}

type orderPayload struct {
	OrderID      string          `json:"order_id"`
	CustomerID   string          `json:"customer_id"`
	Status       string          `json:"status"`
	Currency     string          `json:"currency"`
	TotalMinor   int64           `json:"total_minor"`
	Lines        []linePayload   `json:"lines,omitempty"`
	CancelReason string          `json:"reason,omitempty"`
	Email        string          `json:"email"`
	Language     string          `json:"language"`
	Payment      *paymentPayload `json:"payment,omitempty"`
	Shipment     *order.Shipment `json:"shipment,omitempty"`
	Attention    string          `json:"attention_reason,omitempty"`
}

// paymentPayload is the customer's choice of payment, as the request wrote it:
// {"method": "card", "payment_method": "pm_..."}, {"method": "konbini", "store": "lawson"},
// {"method": "wallet"}, {"method": "bank_transfer"}.
type paymentPayload struct {
	Method        string `json:"method"`
	PaymentMethod string `json:"payment_method,omitempty"`
	Store         string `json:"store,omitempty"`
}

// payload returns the body of an emitted event. Every event carries the totals, the status, the
// cancel reason (once cancelled) and the customer's e-mail address ("" when none was given) and
// language, so that whoever writes to the customer needs nothing else; order.created,
// order.confirmed and order.cancelled carry the lines (fulfillment reserves, ships or releases
// them; the e-mails list them), order.awaiting_payment the payment (the gateway creates the
// payment from it), order.shipped the shipment, order.needs_attention why.
func payload(o *order.Order, e order.Emitted) orderPayload {
	p := orderPayload{
		OrderID: o.ID(), CustomerID: o.CustomerID(), Status: string(o.Status()), Currency: o.Currency(),
		TotalMinor: o.TotalMinor(), CancelReason: o.CancelReason(), Email: o.Email(), Language: string(o.Language()),
	}
	switch e.Type {
	case order.EventShipped:
		p.Shipment = o.Shipment()
	case order.EventNeedsAttention:
		p.Attention = o.AttentionReason()
	}
	switch e.Type {
	case order.EventCreated, order.EventConfirmed, order.EventCancelled:
		for _, l := range o.Lines() {
			p.Lines = append(p.Lines, linePayload{SKU: l.SKU, Quantity: l.Quantity, UnitPriceMinor: l.UnitPriceMinor})
		}
	case order.EventAwaitingPayment:
		if pay := o.Payment(); !pay.IsZero() {
			p.Payment = &paymentPayload{Method: string(pay.Method)}
			switch pay.Method.DetailField() {
			case order.FieldPaymentMethod:
				p.Payment.PaymentMethod = pay.Detail
			case order.FieldStore:
				p.Payment.Store = pay.Detail
			}
		}
	}
	return p
}
