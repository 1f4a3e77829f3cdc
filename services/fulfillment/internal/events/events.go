// Package events is fulfillment's consumer of orders' events, registered with the outboxlib
// consumer (POST /events, consumer name "fulfillment"), which verifies the caller, de-duplicates
// deliveries (ProcessedEvents) and orders each aggregate's events in one read-write transaction
// around the handlers below:
//
//   - order.created reserves the order's stock, all lines or none (app.Service.Reserve);
//   - order.confirmed creates the order's shipment (app.Service.CreateShipment);
//   - order.cancelled releases the stock, cancels a pending shipment, or reports that the order
//     already shipped (app.Service.Cancel).
//
// A handler only decodes: it reads the payload (orders' published contract; unknown fields are
// ignored) and calls the use case the event means, passing the consumer's transaction along as an
// app.Txn, so fulfillment's change, its events and the inbox row commit together. This package
// never touches the store.
//
// Errors: a payload that can never be applied (not JSON, no order id, invalid lines) is permanent
// (outboxlib.Permanent: dead-lettered at once, for an operator). An order.confirmed or
// order.cancelled for an order fulfillment has not decided yet is early (outboxlib.ErrEarly): the
// queue delivers it again once order.created is applied. Any other error is transient.
package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"cloud.google.com/go/spanner"

	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/services/fulfillment/internal/app"
	"github.com/spanmart/spanmart/services/fulfillment/internal/inventory"
	"github.com/spanmart/spanmart/services/fulfillment/internal/shipment"
)

// ConsumerName is the name of this consumer in ProcessedEvents, ConsumerVersions and DeadLetters.
const ConsumerName = "fulfillment"

// Event types consumed, all of aggregate "order" (id = the order id).
const (
	TypeOrderCreated   = "order.created"
	TypeOrderConfirmed = "order.confirmed"
	TypeOrderCancelled = "order.cancelled"
)

// Handlers returns the handler of every consumed event type, applying them through svc.
func Handlers(svc *app.Service) map[string]outboxlib.HandlerFunc {
	h := &handlers{svc: svc}
	return map[string]outboxlib.HandlerFunc{
		TypeOrderCreated:   h.orderCreated,
		TypeOrderConfirmed: h.orderConfirmed,
		TypeOrderCancelled: h.orderCancelled,
	}
}

// Register adds every handler to c, in the library's default order per aggregate: an order's
// order.confirmed and order.cancelled wait until this consumer has applied its order.created (the
// relay names each event's predecessor among the types routed to fulfillment). Each handler's
// metrics are counted once its transaction has committed (outboxlib.OnCommit).
func Register(c outboxlib.Registrar, svc *app.Service) {
	for typ, h := range Handlers(svc) {
		c.Handle(typ, h)
	}
}

type handlers struct {
	svc *app.Service
}

// OrderCreatedPayload is the part of order.created that fulfillment reads.
type OrderCreatedPayload struct {
	OrderID string      `json:"order_id"`
	Lines   []OrderLine `json:"lines"`
}

// OrderLine is a line of order.created.
type OrderLine struct {
	SKU      string `json:"sku"`
	Quantity int64  `json:"quantity"`
}

// orderPayload is what fulfillment reads of order.confirmed and order.cancelled.
type orderPayload struct {
	OrderID string `json:"order_id"`
}

func (h *handlers) orderCreated(ctx context.Context, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
	var p OrderCreatedPayload
	orderID, err := decode(d, &p, &p.OrderID)
	if err != nil {
		return err
	}
	lines := make([]inventory.Line, len(p.Lines))
	for i, l := range p.Lines {
		lines[i] = inventory.Line{SKU: l.SKU, Quantity: l.Quantity}
	}
	out, err := h.svc.Reserve(ctx, txn, orderID, lines)
	return h.finish(ctx, out, err)
}

func (h *handlers) orderConfirmed(ctx context.Context, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
	var p orderPayload
	orderID, err := decode(d, &p, &p.OrderID)
	if err != nil {
		return err
	}
	out, err := h.svc.CreateShipment(ctx, txn, orderID)
	return h.finish(ctx, out, err)
}

func (h *handlers) orderCancelled(ctx context.Context, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
	var p orderPayload
	orderID, err := decode(d, &p, &p.OrderID)
	if err != nil {
		return err
	}
	out, err := h.svc.Cancel(ctx, txn, orderID)
	return h.finish(ctx, out, err)
}

// decode reads d's payload into v and returns the order of the event: its subject, which the
// payload's order_id (*payloadID, when present) must match.
func decode(d outboxlib.Delivery, v any, payloadID *string) (string, error) {
	if err := json.Unmarshal(d.Payload, v); err != nil {
		return "", outboxlib.Permanent(fmt.Errorf("%s %s: payload: %w", d.Type, d.ID, err))
	}
	id := d.AggregateID
	if id == "" {
		id = *payloadID
	}
	switch {
	case id == "":
		return "", outboxlib.Permanent(fmt.Errorf("%s %s: no order id", d.Type, d.ID))
	case *payloadID != "" && *payloadID != id:
		return "", outboxlib.Permanent(fmt.Errorf("%s %s: payload order_id %q is not the subject %q", d.Type, d.ID, *payloadID, id))
	case len(id) > app.MaxOrderIDLen:
		return "", outboxlib.Permanent(fmt.Errorf("%s %s: order id %q is longer than %d characters", d.Type, d.ID, id, app.MaxOrderIDLen))
	}
	return id, nil
}

// finish turns a use case's answer into the handler's: the note for the consumer's log line, the
// metrics for after the commit, and the error classified for the queue.
func (h *handlers) finish(ctx context.Context, out app.Outcome, err error) error {
	switch {
	case errors.Is(err, inventory.ErrNotFound):
		return fmt.Errorf("%w: %w", outboxlib.ErrEarly, err)
	case errors.Is(err, inventory.ErrInvalid), errors.Is(err, shipment.ErrInvalid):
		return outboxlib.Permanent(err)
	case err != nil:
		return err
	}
	outboxlib.Note(ctx, out.Note)
	outboxlib.OnCommit(ctx, func() { h.svc.Committed(out) })
	return nil
}
