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
	OrderID      string        `json:"order_id"`
	CustomerID   string        `json:"customer_id"`
	Status       string        `json:"status"`
	Currency     string        `json:"currency"`
	TotalMinor   int64         `json:"total_minor"`
	Lines        []linePayload `json:"lines,omitempty"`
	CancelReason string        `json:"reason,omitempty"`
}

// payload returns the body of an emitted event: order.created and order.cancelled carry the
// lines (fulfillment reserves or releases them), every event the totals and status.
func payload(o *order.Order, e order.Emitted) orderPayload {
	p := orderPayload{
		OrderID: o.ID(), CustomerID: o.CustomerID(), Status: string(o.Status()), Currency: o.Currency(),
		TotalMinor: o.TotalMinor(), CancelReason: o.CancelReason(),
	}
	if e.Type == order.EventCreated || e.Type == order.EventCancelled {
		for _, l := range o.Lines() {
			p.Lines = append(p.Lines, linePayload{SKU: l.SKU, Quantity: l.Quantity, UnitPriceMinor: l.UnitPriceMinor})
		}
	}
	return p
}
