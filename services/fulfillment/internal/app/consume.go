package app

import (
	"context"
	"fmt"

	"github.com/spanmart/spanmart/services/fulfillment/internal/inventory"
	"github.com/spanmart/spanmart/services/fulfillment/internal/shipment"
)

// The use cases of the events fulfillment consumes (internal/events decodes them). Each runs inside
// the consumer's transaction txn.

// Reserve applies order.created: it decides the order once, reserving every line (Inventory.Reserved
// += quantity, the reservation HELD, inventory.reserved) or none (REJECTED, stock untouched,
// inventory.rejected with the lines that do not fit). An order decided before (a replay, whatever
// its event id) changes nothing. Lines that can never be valid wrap inventory.ErrInvalid. The reads
// lock the stock rows, so concurrent reservations of the same SKUs serialize and the Inventory
// CHECK cannot be broken by a lost update.
func (s *Service) Reserve(ctx context.Context, txn Txn, orderID string, lines []inventory.Line) (Outcome, error) {
	lines, err := inventory.NormalizeLines(lines)
	if err != nil {
		return Outcome{}, fmt.Errorf("reserve order %s: %w", orderID, err)
	}
	var out Outcome
	err = s.repo.UpdateInTxn(ctx, txn, func(ctx context.Context, tx Tx) error {
		out = Outcome{}
		decided, stock, err := tx.StockUnlessDecided(ctx, orderID, skus(lines))
		switch {
		case err != nil:
			return err
		case decided:
			out.Note = fmt.Sprintf("order %s already decided; nothing to reserve", orderID)
			return nil
		}
		outcome, err := inventory.Reserve(stock, lines)
		if err != nil {
			return err
		}
		r := inventory.Decide(orderID, outcome)
		ev := rejectedEvent(r, outcome.Short)
		if outcome.OK() {
			if err := tx.SaveStock(ctx, outcome.Stock...); err != nil {
				return err
			}
			ev = reservedEvent(r)
		}
		if err := tx.SaveReservation(ctx, r, true); err != nil {
			return err
		}
		out = Outcome{Applied: true, Note: fmt.Sprintf("order %s decided: %s", orderID, ev.Type)}
		return tx.Append(ctx, ev)
	})
	if err != nil {
		return Outcome{}, fmt.Errorf("reserve order %s: %w", orderID, err)
	}
	return out, nil
}

// Cancel applies order.cancelled: the order's reservation answers the cancellation once.
//   - HELD: the lines' units leave Inventory.Reserved, the reservation is RELEASED and a PENDING
//     shipment is CANCELLED, all in this transaction; inventory.released with the lines.
//   - REJECTED: nothing was held; inventory.released with no lines (every cancelled order gets one).
//   - SHIPPED: the goods are gone and nothing can be released; inventory.release_failed
//     (already_shipped), so that orders can flag the order for an operator.
//
// A cancellation answered before changes nothing. An order never decided is inventory.ErrNotFound:
// its order.created has not been applied yet.
func (s *Service) Cancel(ctx context.Context, txn Txn, orderID string) (Outcome, error) {
	var out Outcome
	err := s.repo.UpdateInTxn(ctx, txn, func(ctx context.Context, tx Tx) error {
		out = Outcome{}
		r, sh, err := tx.Reservation(ctx, orderID)
		if err != nil {
			return err
		}
		from := r.Status()
		switch r.Release() {
		case inventory.AlreadyAnswered:
			out.Note = fmt.Sprintf("order %s: cancellation already answered (reservation %s)", orderID, from)
			return nil
		case inventory.ReleaseFailed:
			if err := tx.SaveReservation(ctx, r, false); err != nil {
				return err
			}
			out = Outcome{Applied: true, Note: fmt.Sprintf("order %s cancelled after it shipped: nothing to release", orderID)}
			return tx.Append(ctx, releaseFailedEvent(r))
		}
		var released []inventory.Line
		if from == inventory.Held {
			released = r.Lines()
			stock, err := stockBySKU(ctx, tx, released)
			if err != nil {
				return err
			}
			for _, l := range released {
				if stock[l.SKU], err = stock[l.SKU].Release(l.Quantity); err != nil {
					return inconsistent("order %s: %v", orderID, err)
				}
			}
			if err := tx.SaveStock(ctx, values(stock, released)...); err != nil {
				return err
			}
		}
		if err := tx.SaveReservation(ctx, r, false); err != nil {
			return err
		}
		out = Outcome{Applied: true, Note: fmt.Sprintf("order %s released: %d lines", orderID, len(released))}
		if sh != nil {
			// A held reservation's shipment has not left: shipping it ships the reservation too.
			changed, err := sh.Cancel()
			if err != nil {
				return inconsistent("order %s: reservation %s: %v", orderID, from, err)
			}
			if changed {
				if err := tx.SaveShipment(ctx, sh, false); err != nil {
					return err
				}
				out.Note += fmt.Sprintf("; shipment %s cancelled", sh.ID())
				out.Transitions = []shipment.Status{shipment.Cancelled}
			}
		}
		return tx.Append(ctx, releasedEvent(r, released))
	})
	if err != nil {
		return Outcome{}, fmt.Errorf("cancel order %s: %w", orderID, err)
	}
	return out, nil
}

// CreateShipment applies order.confirmed: the order's shipment is created PENDING with the lines
// of its HELD reservation, for the warehouse to ship. The shipment's id is derived from the order
// id, so an order that has one (a replay, whatever its event id) changes nothing. A reservation
// that is not HELD (released: the order was cancelled meanwhile) gets no shipment; that is noted.
// An order never decided is inventory.ErrNotFound: its order.created has not been applied yet.
func (s *Service) CreateShipment(ctx context.Context, txn Txn, orderID string) (Outcome, error) {
	var out Outcome
	err := s.repo.UpdateInTxn(ctx, txn, func(ctx context.Context, tx Tx) error {
		out = Outcome{}
		r, sh, err := tx.Reservation(ctx, orderID)
		if err != nil {
			return err
		}
		if sh != nil {
			out.Note = fmt.Sprintf("order %s already has shipment %s (%s)", orderID, sh.ID(), sh.Status())
			return nil
		}
		if r.Status() != inventory.Held {
			out.Note = fmt.Sprintf("order %s confirmed but its reservation is %s: no shipment", orderID, r.Status())
			return nil
		}
		if sh, err = shipment.New(orderID, r.Lines()); err != nil {
			return err
		}
		if err := tx.SaveShipment(ctx, sh, true); err != nil {
			return err
		}
		out = Outcome{Applied: true, Note: fmt.Sprintf("order %s: shipment %s %s", orderID, sh.ID(), sh.Status()), Transitions: []shipment.Status{sh.Status()}}
		return nil
	})
	if err != nil {
		return Outcome{}, fmt.Errorf("create the shipment of order %s: %w", orderID, err)
	}
	return out, nil
}
