// Package events applies orders' events to payments. It is registered with the outboxlib consumer
// (POST /events, consumer name "gateway-abstraction"), which verifies the caller, de-duplicates
// deliveries and orders them in the same read-write transaction as the handlers below:
//
//	order.awaiting_payment  the payment and its authorize intent (app.RequestPayment)
//	order.shipped           the capture of the authorized payment (app.RequestCapture)
//	order.cancelled         the void or refund that gives the money back (app.SettleCancelledOrder)
//
// The handlers decode the payload and call the use cases of package app, which record an intent
// in that transaction; the provider is called after the commit (outboxlib.After,
// app.ResumePayment: the intent the handler recorded and what its answer records; on a
// redelivery, every unfinished intent of the order's payment), and again on a redelivery while
// one is unfinished.
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
	OrderShipped         = "order.shipped"
	OrderCancelled       = "order.cancelled"
)

// orderPayload is what the gateway reads of orders' events (orders' contract: every order.*
// payload carries the order); unknown fields are ignored.
type orderPayload struct {
	OrderID    string `json:"order_id"`
	Reason     string `json:"reason"` // order.cancelled
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
func Register(c outboxlib.Registrar, svc *app.Service) {
	resume := outboxlib.After(func(ctx context.Context, d outboxlib.Delivery) error {
		p, err := decode(d)
		if err != nil {
			return nil // the handler dead-lettered it; nothing to carry out
		}
		// Outside the handler's transaction, outboxlib.Note logs each note at info.
		return svc.ResumePayment(app.WithNotes(ctx, outboxlib.Note), app.PaymentIDFor(p.OrderID), recorded(d))
	})
	c.Handle(OrderAwaitingPayment, func(ctx context.Context, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
		return awaitingPayment(ctx, svc, txn, d)
	}, resume)
	c.Handle(OrderShipped, func(ctx context.Context, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
		return shipped(ctx, svc, txn, d)
	}, resume)
	c.Handle(OrderCancelled, func(ctx context.Context, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
		return cancelled(ctx, svc, txn, d)
	}, resume)
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
	id, rec, err := svc.RequestPayment(ctx, store.Tx(txn), app.PaymentRequest{
		OrderID: p.OrderID, CustomerID: p.CustomerID, Email: p.Email, Method: method, Instrument: instrument,
		AmountMinor: p.TotalMinor, Currency: p.Currency,
	})
	switch {
	case errors.Is(err, payment.ErrInvalid), errors.Is(err, app.ErrUnknownProvider):
		return outboxlib.Permanent(fmt.Errorf("%s %s: %w", d.Type, d.ID, err))
	case err != nil:
		return fmt.Errorf("%s %s: %w", d.Type, d.ID, err)
	case rec != nil:
		outboxlib.HandToAfter(ctx, *rec)
		outboxlib.Note(ctx, fmt.Sprintf("payment %s requested (%s, %d %s)", id, method, p.TotalMinor, p.Currency))
	default:
		outboxlib.Note(ctx, fmt.Sprintf("order %s already has payment %s", p.OrderID, id))
	}
	return nil
}

// shipped records the capture of the shipped order's payment.
func shipped(ctx context.Context, svc *app.Service, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
	p, err := decode(d)
	if err != nil {
		return err
	}
	dec, err := svc.RequestCapture(ctx, store.Tx(txn), p.OrderID)
	switch {
	case errors.Is(err, payment.ErrNotFound):
		// order.awaiting_payment precedes order.shipped for this consumer: the payment will
		// never be there.
		return outboxlib.Permanent(fmt.Errorf("%s %s: %w", d.Type, d.ID, err))
	case err != nil:
		return fmt.Errorf("%s %s: %w", d.Type, d.ID, err)
	}
	handToResume(ctx, dec)
	outboxlib.Note(ctx, dec.Note)
	return nil
}

// cancelled records what giving the cancelled order's money back takes.
func cancelled(ctx context.Context, svc *app.Service, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
	p, err := decode(d)
	if err != nil {
		return err
	}
	dec, err := svc.SettleCancelledOrder(ctx, store.Tx(txn), p.OrderID)
	if err != nil {
		return fmt.Errorf("%s %s: %w", d.Type, d.ID, err)
	}
	handToResume(ctx, dec)
	outboxlib.Note(ctx, fmt.Sprintf("order cancelled (%s): %s", p.Reason, dec.Note))
	return nil
}

// handToResume hands the intent dec recorded, if any, to ResumePayment after the commit.
func handToResume(ctx context.Context, dec app.Decision) {
	if dec.Recorded != nil {
		outboxlib.HandToAfter(ctx, *dec.Recorded)
	}
}

// recorded is the intent the delivery's own handler recorded and handed over, with its commit
// time, nil for none.
func recorded(d outboxlib.Delivery) *app.Recorded {
	for _, v := range d.Handed {
		if rec, ok := v.(app.Recorded); ok {
			rec.Intent.CreatedAt = d.AppliedAt
			return &rec
		}
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
