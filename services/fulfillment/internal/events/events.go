// Package events is fulfillment's consumer of other services' events, registered with the
// outboxlib consumer (POST /events): order.created reserves an order's stock (all lines or none) and
// order.cancelled releases it. Each handler runs inside the consumer's read-write transaction,
// which also records the inbox row and the aggregate version; the handlers only change
// fulfillment's state and append its own events (inventory.reserved, inventory.rejected,
// inventory.released) to the outbox in the same transaction. They are idempotent on their own as
// well: a replay of an order's event with a new event id changes nothing.
package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"cloud.google.com/go/spanner"

	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/services/fulfillment/internal/inventory"
	"github.com/spanmart/spanmart/services/fulfillment/internal/store"
)

// Event types fulfillment consumes and emits.
const (
	TypeOrderCreated      = "order.created"
	TypeOrderCancelled    = "order.cancelled"
	TypeInventoryReserved = "inventory.reserved"
	TypeInventoryRejected = "inventory.rejected"
	TypeInventoryReleased = "inventory.released"
)

// AggregateType is the aggregate of the events fulfillment emits about an order's stock; its id is
// the order id. inventory.reserved or inventory.rejected is version 1, inventory.released version 2.
const AggregateType = "reservation"

// ReasonOutOfStock is the reason of an inventory.rejected event.
const ReasonOutOfStock = "out_of_stock"

// Handler is what Register needs of an outboxlib consumer.
type Handler interface {
	Handle(eventType string, h outboxlib.HandlerFunc, opts ...outboxlib.HandlerOption)
}

// Register registers the handlers of every event fulfillment consumes, in the library's default
// order: order.cancelled waits until this consumer has applied the order's order.created (the
// relay names it as the cancellation's predecessor).
func Register(c Handler) {
	c.Handle(TypeOrderCreated, OrderCreated)
	c.Handle(TypeOrderCancelled, OrderCancelled)
}

// OrderCreatedPayload is the part of order.created that fulfillment reads (unknown fields are
// ignored, as the contract requires).
type OrderCreatedPayload struct {
	OrderID    string      `json:"order_id"`
	CustomerID string      `json:"customer_id"`
	Currency   string      `json:"currency"`
	TotalMinor int64       `json:"total_minor"`
	Lines      []OrderLine `json:"lines"`
}

// OrderLine is a line of order.created.
type OrderLine struct {
	SKU            string `json:"sku"`
	Quantity       int64  `json:"quantity"`
	UnitPriceMinor int64  `json:"unit_price_minor"`
}

// ReservedPayload is the payload of inventory.reserved and inventory.released.
type ReservedPayload struct {
	OrderID string     `json:"order_id"`
	Lines   []LineJSON `json:"lines"`
}

// LineJSON is a line of inventory.reserved and inventory.released.
type LineJSON struct {
	SKU      string `json:"sku"`
	Quantity int64  `json:"quantity"`
}

// RejectedPayload is the payload of inventory.rejected.
type RejectedPayload struct {
	OrderID string         `json:"order_id"`
	Reason  string         `json:"reason"`
	Short   []ShortageJSON `json:"short"`
}

// ShortageJSON is a line of inventory.rejected that does not fit.
type ShortageJSON struct {
	SKU       string `json:"sku"`
	Requested int64  `json:"requested"`
	Available int64  `json:"available"`
}

// OrderCreated reserves every line of a new order or none, and emits inventory.reserved or
// inventory.rejected. An order decided before (a replay with a new event id) is a no-op. A payload
// that can never be applied (not JSON, no order id, invalid lines) is permanent: dead-lettered.
func OrderCreated(ctx context.Context, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
	var p OrderCreatedPayload
	if err := json.Unmarshal(d.Payload, &p); err != nil {
		return outboxlib.Permanent(fmt.Errorf("order.created %s: payload: %w", d.ID, err))
	}
	orderID, err := orderID(d, p.OrderID)
	if err != nil {
		return err
	}
	lines := make([]inventory.Line, len(p.Lines))
	for i, l := range p.Lines {
		lines[i] = inventory.Line{SKU: l.SKU, Quantity: l.Quantity}
	}
	res, err := store.Reserve(ctx, txn, orderID, lines)
	if errors.Is(err, inventory.ErrInvalid) {
		return outboxlib.Permanent(err)
	}
	if err != nil {
		return err
	}
	if !res.Applied {
		outboxlib.Note(ctx, fmt.Sprintf("order %s already decided; nothing to reserve", orderID))
		return nil
	}
	var ev outboxlib.Event
	if res.Outcome.OK() {
		payload := ReservedPayload{OrderID: orderID, Lines: linesJSON(res.Outcome.Lines)}
		ev, err = outboxlib.NewEvent(ctx, TypeInventoryReserved, AggregateType, orderID, 1, payload)
	} else {
		payload := RejectedPayload{OrderID: orderID, Reason: ReasonOutOfStock}
		for _, s := range res.Outcome.Short {
			payload.Short = append(payload.Short, ShortageJSON{SKU: s.SKU, Requested: s.Requested, Available: s.Available})
		}
		ev, err = outboxlib.NewEvent(ctx, TypeInventoryRejected, AggregateType, orderID, 1, payload)
	}
	if err != nil {
		return err
	}
	outboxlib.Note(ctx, fmt.Sprintf("order %s decided: %s", orderID, ev.Type))
	return outboxlib.Append(ctx, txn, ev)
}

// OrderCancelled releases the stock an order holds and emits inventory.released (also for a
// rejected order, which held nothing: every cancelled order gets one). An order whose order.created
// has not been applied yet is early: the queue delivers it again later. An order released before is
// a no-op; a shipped one cannot be released (permanent: an operator looks at it).
func OrderCancelled(ctx context.Context, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
	var p struct {
		OrderID string `json:"order_id"`
	}
	if err := json.Unmarshal(d.Payload, &p); err != nil {
		return outboxlib.Permanent(fmt.Errorf("order.cancelled %s: payload: %w", d.ID, err))
	}
	orderID, err := orderID(d, p.OrderID)
	if err != nil {
		return err
	}
	res, err := store.Release(ctx, txn, orderID)
	switch {
	case errors.Is(err, inventory.ErrNotFound):
		return fmt.Errorf("%w: %w", outboxlib.ErrEarly, err)
	case errors.Is(err, store.ErrShipped), errors.Is(err, inventory.ErrInvalid):
		return outboxlib.Permanent(err)
	case err != nil:
		return err
	}
	if !res.Applied {
		outboxlib.Note(ctx, fmt.Sprintf("order %s already released", orderID))
		return nil
	}
	ev, err := outboxlib.NewEvent(ctx, TypeInventoryReleased, AggregateType, orderID, res.Version,
		ReservedPayload{OrderID: orderID, Lines: linesJSON(res.Lines)})
	if err != nil {
		return err
	}
	outboxlib.Note(ctx, fmt.Sprintf("order %s released: %d lines", orderID, len(res.Lines)))
	return outboxlib.Append(ctx, txn, ev)
}

// orderID returns the order of an order.* event: its subject, which the payload's order_id (when
// present) must match.
func orderID(d outboxlib.Delivery, payloadID string) (string, error) {
	id := d.AggregateID
	if id == "" {
		id = payloadID
	}
	switch {
	case id == "":
		return "", outboxlib.Permanent(fmt.Errorf("%s %s: no order id", d.Type, d.ID))
	case payloadID != "" && payloadID != id:
		return "", outboxlib.Permanent(fmt.Errorf("%s %s: payload order_id %q is not the subject %q", d.Type, d.ID, payloadID, id))
	case len(id) > 36:
		return "", outboxlib.Permanent(fmt.Errorf("%s %s: order id %q is longer than 36 characters", d.Type, d.ID, id))
	}
	return id, nil
}

func linesJSON(lines []inventory.Line) []LineJSON {
	out := make([]LineJSON, 0, len(lines))
	for _, l := range lines {
		out = append(out, LineJSON{SKU: l.SKU, Quantity: l.Quantity})
	}
	return out
}
