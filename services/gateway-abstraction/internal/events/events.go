// Package events applies orders' events to payments. It is registered with the outboxlib consumer
// (POST /events, consumer name "gateway-abstraction"), which verifies the caller, de-duplicates
// deliveries and orders them in the same read-write transaction as the handlers below. The
// handlers decode the payload and call the use cases of package app, which record an intent in
// that transaction; the provider is called after the commit (outboxlib.After), and again on a
// redelivery while the intent is unfinished.
package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"cloud.google.com/go/spanner"

	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/app"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/payment"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/store"
)

// ConsumerName is the name of this consumer in ProcessedEvents, ConsumerVersions and DeadLetters.
const ConsumerName = "gateway-abstraction"

// Event types consumed.
const (
	OrderAwaitingPayment = "order.awaiting_payment"
)

// orderPayload is what the gateway reads of order.awaiting_payment (orders' contract); unknown
// fields are ignored.
type orderPayload struct {
	OrderID    string `json:"order_id"`
	CustomerID string `json:"customer_id"`
	Email      string `json:"email"`
	Currency   string `json:"currency"`
	TotalMinor int64  `json:"total_minor"`
	Payment    struct {
		Method        string `json:"method"`
		PaymentMethod string `json:"payment_method"` // card
		Store         string `json:"store"`          // konbini
	} `json:"payment"`
}

// Register adds every handler to c.
func Register(c *outboxlib.Consumer, svc *app.Service) {
	c.Handle(OrderAwaitingPayment, func(ctx context.Context, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
		return awaitingPayment(ctx, svc, txn, d)
	}, outboxlib.After(func(ctx context.Context, d outboxlib.Delivery) error {
		p, err := decode(d)
		if err != nil {
			return nil // the handler dead-lettered it; nothing to carry out
		}
		// Outside the handler's transaction, outboxlib.Note logs each note at info.
		return svc.Resume(app.WithNotes(ctx, outboxlib.Note), app.IntentKey(app.PaymentIDFor(p.OrderID), app.OpAuthorize))
	}))
}

// awaitingPayment records the order's payment and its authorize intent.
func awaitingPayment(ctx context.Context, svc *app.Service, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
	p, err := decode(d)
	if err != nil {
		return err
	}
	method, err := payment.ParseMethod(p.Payment.Method)
	if err != nil {
		return outboxlib.Permanent(fmt.Errorf("%s %s: %w", d.Type, d.ID, err))
	}
	instrument := p.Payment.PaymentMethod
	if method == payment.Konbini {
		instrument = p.Payment.Store
	}
	id, created, err := svc.RequestPayment(ctx, store.Tx(txn), app.PaymentRequest{
		OrderID: p.OrderID, CustomerID: p.CustomerID, Email: p.Email, Method: method, Instrument: instrument,
		AmountMinor: p.TotalMinor, Currency: p.Currency,
	})
	switch {
	case errors.Is(err, payment.ErrInvalid), errors.Is(err, app.ErrUnknownProvider):
		return outboxlib.Permanent(fmt.Errorf("%s %s: %w", d.Type, d.ID, err))
	case err != nil:
		return fmt.Errorf("%s %s: %w", d.Type, d.ID, err)
	case created:
		outboxlib.Note(ctx, fmt.Sprintf("payment %s requested (%s, %d %s)", id, method, p.TotalMinor, p.Currency))
	default:
		outboxlib.Note(ctx, fmt.Sprintf("order %s already has payment %s", p.OrderID, id))
	}
	return nil
}

func decode(d outboxlib.Delivery) (orderPayload, error) {
	var p orderPayload
	if err := json.Unmarshal(d.Payload, &p); err != nil {
		return p, outboxlib.Permanent(fmt.Errorf("%s %s: payload: %w", d.Type, d.ID, err))
	}
	if p.OrderID == "" {
		return p, outboxlib.Permanent(fmt.Errorf("%s %s: payload has no order_id", d.Type, d.ID))
	}
	return p, nil
}
