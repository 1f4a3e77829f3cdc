package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/payment"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/provider"
)

// Decision is what a use case run in the consumer's transaction decided about an order's payment.
type Decision struct {
	PaymentID string
	Intent    Operation // the intent recorded; "" when none was
	Note      string    // what was decided and why, for the consumer's log line of the event
	// Recorded is the intent recorded, as written, for ResumePayment after the commit; nil
	// when none was.
	Recorded *Recorded
}

// Recorded is an intent recorded in a consumer's transaction, as written, with the provider of its
// payment: what ResumePayment needs to carry it out after the commit without reading either back.
type Recorded struct {
	Intent   Intent
	Provider string
}

// recorded is in, just recorded for p, as a Decision carries it.
func recorded(p *payment.Payment, in Intent) *Recorded {
	return &Recorded{Intent: in, Provider: p.Method().Provider()}
}

// RequestCapture records, in the consumer's transaction tx, the capture of the payment of a
// shipped order: AUTHORIZED → CAPTURE_REQUESTED with its capture intent, which Resume carries out
// after the commit. A payment in any other state (captured already: a replay; lapsed; failed) is
// left as it is, with a Note saying so. An order without a payment is payment.ErrNotFound: the
// payment is recorded from order.awaiting_payment, which reaches the gateway before the order's
// order.shipped (the relay orders an aggregate's events per subscriber), so it never will be.
func (s *Service) RequestCapture(ctx context.Context, tx Tx, orderID string) (Decision, error) {
	id := PaymentIDFor(orderID)
	p, err := tx.Payment(ctx, id)
	if err != nil {
		return Decision{}, fmt.Errorf("capture the payment of order %s: %w", orderID, err)
	}
	if p.Status() != payment.Authorized {
		return Decision{PaymentID: id, Note: fmt.Sprintf("payment %s is %s: nothing to capture", id, p.Status())}, nil
	}
	in, err := s.recordIntent(ctx, tx, p, OpCapture)
	if err != nil {
		return Decision{}, err
	}
	if err := tx.Save(ctx, p, false, s.checkAfter(p, s.cfg.Now())); err != nil {
		return Decision{}, err
	}
	return Decision{PaymentID: id, Intent: OpCapture, Recorded: recorded(p, in),
		Note: fmt.Sprintf("capture of payment %s requested (%d %s)", id, p.AmountMinor(), p.Currency())}, nil
}

// SettleCancelledOrder records, in the consumer's transaction tx, what giving a cancelled order's
// money back takes, by the state of its payment:
//
//	no payment (cancelled before it awaited payment)   nothing
//	REQUESTED, the provider's answer not in yet        CancelRequested: the payment is voided as
//	                                                   soon as the answer lands AUTHORIZED or PENDING
//	REQUESTED, the customer must act (3-D Secure),     VOID_REQUESTED + void intent
//	PENDING (an unpaid slip), AUTHORIZED (card, wallet)
//	AUTHORIZED (a paid slip), CAPTURED                 REFUND_REQUESTED + refund intent
//	*_REQUESTED                                        nothing: an operation is in flight
//	REFUND_PENDING                                     nothing: the provider pays the refund out
//	FAILED, EXPIRED, VOIDED, REFUNDED, *_FAILED        nothing: no money is held, or an operator
//	                                                   must settle it (the event saying so is out)
//
// Resume carries the intent out after the commit.
func (s *Service) SettleCancelledOrder(ctx context.Context, tx Tx, orderID string) (Decision, error) {
	id := PaymentIDFor(orderID)
	p, err := tx.Payment(ctx, id)
	switch {
	case errors.Is(err, payment.ErrNotFound):
		return Decision{Note: fmt.Sprintf("order %s has no payment: nothing to settle", orderID)}, nil
	case err != nil:
		return Decision{}, fmt.Errorf("settle the payment of order %s: %w", orderID, err)
	}
	d := Decision{PaymentID: id}
	if op, ok := settlement(p); ok {
		in, err := s.recordIntent(ctx, tx, p, op)
		if err != nil {
			return Decision{}, err
		}
		d.Intent, d.Recorded, d.Note = op, recorded(p, in), fmt.Sprintf("%s of payment %s requested", op, id)
		return d, tx.Save(ctx, p, false, s.checkAfter(p, s.cfg.Now()))
	}
	switch {
	case p.Status() == payment.Requested && p.CancelRequested():
		d.Note = fmt.Sprintf("payment %s: the cancellation is recorded already", id)
	case p.Status() == payment.Requested:
		if err := p.RequestCancel(); err != nil {
			return Decision{}, err
		}
		d.Note = fmt.Sprintf("payment %s is being authorized: it is voided once the provider's answer lands", id)
		return d, tx.Save(ctx, p, false, s.checkAfter(p, s.cfg.Now()))
	case p.Status().InFlight():
		d.Note = fmt.Sprintf("payment %s is %s: its operation is in flight", id, p.Status())
	case p.Status() == payment.RefundPending:
		d.Note = fmt.Sprintf("payment %s is %s: the provider accepted its refund and pays it out later", id, p.Status())
	default:
		d.Note = fmt.Sprintf("payment %s is %s: nothing to settle", id, p.Status())
	}
	return d, nil
}

// settlement is the operation that gives p's money back when its order is cancelled, if one can
// now: a void releases a hold (card, wallet), cancels an unpaid slip or gives up a payment the
// customer has not completed; a refund gives taken money back (captured, or a paid slip).
func settlement(p *payment.Payment) (Operation, bool) {
	switch p.Status() {
	case payment.Requested:
		return OpVoid, p.ProviderPaymentID() != ""
	case payment.Pending:
		return OpVoid, true
	case payment.Authorized:
		if p.Method().UsesSlip() {
			return OpRefund, true
		}
		return OpVoid, true
	case payment.Captured:
		return OpRefund, true
	}
	return "", false
}

// recordIntent moves p to the intent of op (CAPTURE_REQUESTED, VOID_REQUESTED,
// REFUND_REQUESTED) and records the intent in tx, with the exact request Resume will send, and
// returns it; the caller saves p.
func (s *Service) recordIntent(ctx context.Context, tx Tx, p *payment.Payment, op Operation) (Intent, error) {
	var err error
	switch op {
	case OpCapture:
		err = p.RequestCapture()
	case OpVoid:
		err = p.RequestVoid()
	case OpRefund:
		err = p.RequestRefund()
	default:
		err = fmt.Errorf("%w: %s is not an operation on a payment the provider knows", payment.ErrInvalid, op)
	}
	if err != nil {
		return Intent{}, err
	}
	req := provider.Operation{
		IdempotencyKey: IntentKey(p.ID(), op), PaymentID: p.ID(), ProviderPaymentID: p.ProviderPaymentID(), AmountMinor: p.AmountMinor(),
	}
	body, err := json.Marshal(req)
	if err != nil {
		return Intent{}, err
	}
	in := Intent{
		Key: req.IdempotencyKey, PaymentID: p.ID(), Op: op, Status: IntentStarted, Request: body,
		RetryAfter: s.cfg.Now().Add(s.cfg.ResumeAfter),
	}
	return in, tx.SaveIntent(ctx, in, true)
}

// resumeOrder is the order in which ResumePayment looks at a payment's intents: the order they
// can be recorded in (a void's answer may record the refund).
var resumeOrder = []Operation{OpAuthorize, OpCapture, OpVoid, OpRefund}

// ResumePayment carries out every unfinished intent of the payment (Resume), stopping at the
// first that stays unfinished. It is what a delivery of an order's event runs after the commit
// (outboxlib.After in package events), so that a redelivery retries whatever the handler's
// intent, or an intent its answer recorded, left unfinished.
//
// rec is the intent the delivery's own handler recorded (Decision.Recorded), nil for none (a
// redelivery, or a handler that recorded none): it is carried out as written, without reading it
// or its payment back, and then the intent its answer recorded, if any (Resume follows it). It is
// the payment's one unfinished intent (a payment has one operation in flight at a time, and the
// handler could record it only with none in flight), so nothing else is read. Without rec the
// intents are read together, again after each one resumed (its answer may have recorded the
// next).
func (s *Service) ResumePayment(ctx context.Context, paymentID string, rec *Recorded) error {
	if rec != nil {
		return s.resumeFrom(ctx, rec.Intent, rec.Provider)
	}
	ops := resumeOrder
	for len(ops) > 0 {
		keys := make([]string, len(ops))
		for i, op := range ops {
			keys[i] = IntentKey(paymentID, op)
		}
		intents, err := s.cfg.Repo.Intents(ctx, keys)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(keys, func(k string) bool {
			in, ok := intents[k]
			return ok && in.Status == IntentStarted
		})
		if i < 0 {
			return nil
		}
		if err := s.resumeFrom(ctx, intents[keys[i]], ""); err != nil {
			return err
		}
		ops = ops[i+1:]
	}
	return nil
}
