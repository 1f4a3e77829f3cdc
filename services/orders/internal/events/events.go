// Package events applies other services' events to orders. It is registered with the outboxlib
// consumer (POST /events, consumer name "orders"), which verifies the caller, de-duplicates
// deliveries (ProcessedEvents) and tracks per-aggregate versions in the same read-write
// transaction as the handlers below; the handlers only change the order and append its events.
package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"cloud.google.com/go/spanner"

	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/services/orders/internal/order"
	"github.com/spanmart/spanmart/services/orders/internal/store"
)

// ConsumerName is the name of this consumer in ProcessedEvents, ConsumerVersions and DeadLetters.
const ConsumerName = "orders"

// Event types consumed.
const (
	InventoryReserved = "inventory.reserved"
	InventoryRejected = "inventory.rejected"
)

// Handlers returns the handler of every consumed event type.
func Handlers() map[string]outboxlib.HandlerFunc {
	return map[string]outboxlib.HandlerFunc{
		InventoryReserved: InventoryReservedHandler,
		InventoryRejected: InventoryRejectedHandler,
	}
}

// Register adds every handler to c.
func Register(c *outboxlib.Consumer) {
	for typ, h := range Handlers() {
		c.Handle(typ, h)
	}
}

// inventoryPayload is what orders reads of inventory.* payloads (fulfillment's contract); unknown
// fields are ignored.
type inventoryPayload struct {
	OrderID string `json:"order_id"`
	Reason  string `json:"reason"`
}

// InventoryReservedHandler: every line is reserved, so a PENDING order now awaits payment
// (order.awaiting_payment).
func InventoryReservedHandler(ctx context.Context, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
	return apply(ctx, txn, d, func(o *order.Order, _ inventoryPayload) error { return o.MarkAwaitingPayment() })
}

// InventoryRejectedHandler: stock could not be reserved, so a PENDING order is cancelled with the
// event's reason (default "out_of_stock"; order.cancelled). Nothing was reserved or paid, so it goes
// straight to CANCELLED.
func InventoryRejectedHandler(ctx context.Context, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
	return apply(ctx, txn, d, func(o *order.Order, p inventoryPayload) error {
		reason := p.Reason
		if reason == "" {
			reason = "out_of_stock"
		}
		if len(reason) > order.MaxReasonLen {
			reason = reason[:order.MaxReasonLen]
		}
		return o.Reject(reason)
	})
}

// apply decodes the payload and runs change on the order it names. An order that has already
// moved on (the transition is illegal from its state) makes the event a no-op, logged; an unknown
// order or an unreadable payload is permanent: orders created the order this event is about, so
// neither can be fixed by waiting.
func apply(ctx context.Context, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery, change func(*order.Order, inventoryPayload) error) error {
	var p inventoryPayload
	if err := json.Unmarshal(d.Payload, &p); err != nil {
		return outboxlib.Permanent(fmt.Errorf("%s %s: payload: %w", d.Type, d.ID, err))
	}
	if p.OrderID == "" {
		return outboxlib.Permanent(fmt.Errorf("%s %s: payload has no order_id", d.Type, d.ID))
	}
	consumed := store.Consumed{Type: d.Type, ID: d.ID, AggregateType: d.AggregateType, AggregateVersion: d.AggregateVersion}
	err := store.UpdateInTxn(ctx, txn, p.OrderID, consumed, func(o *order.Order) error {
		err := change(o, p)
		if errors.Is(err, order.ErrIllegalTransition) {
			outboxlib.Note(ctx, fmt.Sprintf("event ignored: order %s has moved on (status %s)", p.OrderID, o.Status()))
			return nil
		}
		return err
	})
	switch {
	case errors.Is(err, order.ErrNotFound):
		return outboxlib.Permanent(fmt.Errorf("%s %s: %w", d.Type, d.ID, err))
	case errors.Is(err, order.ErrInvalid):
		return outboxlib.Permanent(fmt.Errorf("%s %s: %w", d.Type, d.ID, err))
	case err != nil:
		return fmt.Errorf("%s %s: %w", d.Type, d.ID, err)
	}
	return nil
}
