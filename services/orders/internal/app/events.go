package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/spanmart/spanmart/services/orders/internal/order"
)

// Txn is a read-write transaction that the caller opened and will commit: the event consumer's,
// in which it also records the inbox row. The use cases below never look inside it; they pass it
// to Repository.UpdateInTxn, whose implementation knows its type (the store takes a
// *spanner.ReadWriteTransaction and refuses anything else). It is an empty interface so that this
// package needs no Spanner import.
type Txn any

// Consumed identifies an event of another service that is being applied to an order, for the
// order's timeline.
type Consumed struct {
	Type             string
	ID               string
	AggregateType    string
	AggregateVersion int64
}

// Outcome is what applying a consumed event decided.
type Outcome struct {
	// Applied is false when the order had moved on (the event is late or about a stage the order
	// has left): nothing changed but the timeline, which records every consumed event.
	Applied bool
	// Note says what was decided, for the consumer's log line of the event.
	Note string
}

// PaymentAuthorization is what payment.authorized tells: the amount the provider authorized.
type PaymentAuthorization struct {
	AmountMinor int64
	Currency    string
}

// Default reasons when an event does not give one.
const (
	ReasonOutOfStock    = "out_of_stock"
	ReasonPaymentFailed = "failed"
)

// MarkStockReserved applies inventory.reserved: every line is reserved, so a PENDING order awaits
// payment (order.awaiting_payment, which carries the payment for the gateway).
func (s *Service) MarkStockReserved(ctx context.Context, txn Txn, ev Consumed, orderID string) (Outcome, error) {
	return s.apply(ctx, txn, ev, orderID, (*order.Order).MarkAwaitingPayment)
}

// RejectForStock applies inventory.rejected: stock could not be reserved, so a PENDING order is
// cancelled with the reason (default out_of_stock; order.cancelled). Nothing was reserved or paid,
// so it goes straight to CANCELLED.
func (s *Service) RejectForStock(ctx context.Context, txn Txn, ev Consumed, orderID, reason string) (Outcome, error) {
	if reason == "" {
		reason = ReasonOutOfStock
	}
	if len(reason) > order.MaxReasonLen {
		reason = reason[:order.MaxReasonLen]
	}
	return s.apply(ctx, txn, ev, orderID, func(o *order.Order) error { return o.Reject(reason) })
}

// ConfirmPayment applies payment.authorized: AWAITING_PAYMENT → CONFIRMED (order.confirmed), if
// the authorized amount is the order's (a mismatch is order.ErrInvalid: permanent).
func (s *Service) ConfirmPayment(ctx context.Context, txn Txn, ev Consumed, orderID string, a PaymentAuthorization) (Outcome, error) {
	return s.apply(ctx, txn, ev, orderID, func(o *order.Order) error { return o.Confirm(a.AmountMinor, a.Currency) })
}

// RecordPaymentSlip applies payment.pending: the gateway issued a konbini or bank transfer slip.
// The order stays AWAITING_PAYMENT and keeps its version (no order event); the slip is stored and
// shown by GET /v1/orders/{id}.
func (s *Service) RecordPaymentSlip(ctx context.Context, txn Txn, ev Consumed, orderID string, slip order.PaymentInstructions) (Outcome, error) {
	return s.apply(ctx, txn, ev, orderID, func(o *order.Order) error { return o.RecordPaymentInstructions(slip) })
}

// FailPayment applies payment.failed: an order awaiting payment is cancelled with "payment_" + the
// gateway's reason (order.cancelled; fulfillment releases the stock); a cancelling order's payment
// compensation is done (no money was held). An empty reason is ReasonPaymentFailed.
func (s *Service) FailPayment(ctx context.Context, txn Txn, ev Consumed, orderID, reason string) (Outcome, error) {
	if reason == "" {
		reason = ReasonPaymentFailed
	}
	return s.apply(ctx, txn, ev, orderID, func(o *order.Order) error { return o.FailPayment(reason) })
}

// ExpirePayment applies payment.expired: a slip that was not paid, or an authorization that lapsed
// before shipping, cancels the order with "payment_expired"; a cancelling order's payment
// compensation is done; a shipped order cannot be captured any more (order.Order.ExpirePayment).
func (s *Service) ExpirePayment(ctx context.Context, txn Txn, ev Consumed, orderID string) (Outcome, error) {
	return s.apply(ctx, txn, ev, orderID, (*order.Order).ExpirePayment)
}

// ReleasePayment applies payment.voided and payment.refunded (outcome order.PaymentVoided or
// order.PaymentRefunded): the money of a cancelling order is given back; CANCELLED once the stock is
// released too.
func (s *Service) ReleasePayment(ctx context.Context, txn Txn, ev Consumed, orderID, outcome string) (Outcome, error) {
	return s.apply(ctx, txn, ev, orderID, func(o *order.Order) error { return o.ReleasePayment(outcome) })
}

// CompleteCancellation applies inventory.released: the reservation of a CANCELLING order is
// released; CANCELLED (order.cancellation_completed) once the money is given back too. A rejected
// order (already CANCELLED, nothing was held) gets an inventory.released too: it has moved on.
func (s *Service) CompleteCancellation(ctx context.Context, txn Txn, ev Consumed, orderID string) (Outcome, error) {
	return s.apply(ctx, txn, ev, orderID, (*order.Order).ReleaseStock)
}

// FailCompensation applies inventory.release_failed, payment.void_failed and
// payment.refund_failed: a compensation of a cancelling order failed for good, so the order needs
// an operator (NEEDS_ATTENTION, order.needs_attention).
func (s *Service) FailCompensation(ctx context.Context, txn Txn, ev Consumed, orderID string, kind order.CompensationKind, reason string) (Outcome, error) {
	return s.apply(ctx, txn, ev, orderID, func(o *order.Order) error { return o.FailCompensation(kind, reason) })
}

// ShipOrder applies shipment.shipped: CONFIRMED → SHIPPED (order.shipped, with the shipment, so
// the gateway captures the money and the customer is told the tracking number).
func (s *Service) ShipOrder(ctx context.Context, txn Txn, ev Consumed, orderID string, sh order.Shipment) (Outcome, error) {
	return s.apply(ctx, txn, ev, orderID, func(o *order.Order) error { return o.Ship(sh) })
}

// FailShipment applies shipment.failed: a confirmed order that cannot be shipped is cancelled
// (reason shipment_failed), waiting for its stock and its money.
func (s *Service) FailShipment(ctx context.Context, txn Txn, ev Consumed, orderID string) (Outcome, error) {
	return s.apply(ctx, txn, ev, orderID, (*order.Order).FailShipment)
}

// CompleteOrder applies payment.captured: SHIPPED → COMPLETED (order.completed).
func (s *Service) CompleteOrder(ctx context.Context, txn Txn, ev Consumed, orderID string) (Outcome, error) {
	return s.apply(ctx, txn, ev, orderID, (*order.Order).Complete)
}

// FailCapture applies payment.capture_failed: a shipped order whose money cannot be taken needs an
// operator (NEEDS_ATTENTION with "capture_failed_" + the reason).
func (s *Service) FailCapture(ctx context.Context, txn Txn, ev Consumed, orderID, reason string) (Outcome, error) {
	return s.apply(ctx, txn, ev, orderID, func(o *order.Order) error { return o.FailCapture(reason) })
}

// apply runs change on the order inside txn. A change the order's state does not allow
// (order.ErrIllegalTransition: the order has moved on) is not an error: the event is recorded on
// the timeline and nothing else changes, since redelivering it could never help. An unknown order
// (order.ErrNotFound) and an invalid change (order.ErrInvalid) are returned, wrapped.
func (s *Service) apply(ctx context.Context, txn Txn, ev Consumed, orderID string, change func(*order.Order) error) (Outcome, error) {
	var out Outcome
	err := s.repo.UpdateInTxn(ctx, txn, orderID, ev, func(o *order.Order) error {
		// The transaction may run this more than once: out is set afresh each time.
		from := o.Status()
		err := change(o)
		switch {
		case errors.Is(err, order.ErrIllegalTransition):
			out = Outcome{Note: fmt.Sprintf("%s ignored: order %s has moved on (status %s)", ev.Type, orderID, from)}
			return nil
		case err != nil:
			return err
		case o.Status() != from:
			out = Outcome{Applied: true, Note: fmt.Sprintf("%s: order %s %s → %s", ev.Type, orderID, from, o.Status())}
		default:
			out = Outcome{Applied: true, Note: fmt.Sprintf("%s: order %s stays %s", ev.Type, orderID, from)}
		}
		return nil
	})
	if err != nil {
		return Outcome{}, fmt.Errorf("apply %s %s to order %s: %w", ev.Type, ev.ID, orderID, err)
	}
	return out, nil
}
