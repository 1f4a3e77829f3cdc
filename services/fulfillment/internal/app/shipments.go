package app

import (
	"context"
	"fmt"
	"time"

	"github.com/spanmart/spanmart/services/fulfillment/internal/inventory"
	"github.com/spanmart/spanmart/services/fulfillment/internal/shipment"
)

// The warehouse's actions on a shipment (the public API, and the simulated carrier of the dev
// stack). Each runs in a read-write transaction of its own; after a commit that appended an event
// the relay is nudged and the transition counted. Each names who acts (by): the verified account of
// the request, or the simulated carrier's own name. The shipment records it when it moves, and
// keeps the first one: a repeat by another account changes nothing. It stays fulfillment's record
// and is not in the events: no consumer has a use for a warehouse's account.

// Ship records that by handed a PENDING shipment to carrier under trackingNumber, in one
// transaction: the shipment becomes SHIPPED (ShippedAt = the commit timestamp, ShippedBy = by), its
// reservation SHIPPED, and each line's units leave the warehouse (Inventory OnHand and Reserved
// drop by the quantity); shipment.shipped is appended. It returns the shipment as committed and
// whether this call shipped it: a shipment already shipped with the same carrier and tracking
// number is returned unchanged (a repeated request), with others it is shipment.ErrConflict; a cancelled or failed one is
// shipment.ErrIllegalTransition, an unknown id shipment.ErrNotFound, invalid details
// shipment.ErrInvalid. Two identical requests at once ship once: both transactions read the
// shipment, so one of them aborts, runs again and finds it shipped.
func (s *Service) Ship(ctx context.Context, id, carrier, trackingNumber, by string) (*shipment.Shipment, bool, error) {
	if problems := shipment.ValidateShip(carrier, trackingNumber); len(problems) > 0 {
		return nil, false, &shipment.ValidationError{Problems: problems}
	}
	if !isShipmentID(id) {
		return nil, false, fmt.Errorf("shipment %q: %w", id, shipment.ErrNotFound)
	}
	var (
		shipped bool
		sh      *shipment.Shipment
	)
	at, err := s.repo.Update(ctx, func(ctx context.Context, tx Tx) error {
		shipped = false
		var (
			r   *inventory.Reservation
			err error
		)
		if sh, r, err = tx.Shipment(ctx, id); err != nil {
			return err
		}
		changed, err := sh.Ship(carrier, trackingNumber, by)
		if err != nil || !changed {
			return err
		}
		// A pending shipment's reservation is held: cancelling the order cancels both at once.
		if r == nil {
			return inconsistent("shipment %s is %s: its order has no reservation", id, shipment.Pending)
		}
		if err := r.Ship(); err != nil {
			return inconsistent("shipment %s is %s: %v", id, shipment.Pending, err)
		}
		lines := r.Lines()
		stock, err := stockBySKU(ctx, tx, lines)
		if err != nil {
			return err
		}
		for _, l := range lines {
			if stock[l.SKU], err = stock[l.SKU].Ship(l.Quantity); err != nil {
				return inconsistent("shipment %s: %v", id, err)
			}
		}
		if err := tx.SaveStock(ctx, values(stock, lines)...); err != nil {
			return err
		}
		if err := tx.SaveReservation(ctx, r, false); err != nil {
			return err
		}
		if err := tx.SaveShipment(ctx, sh, false); err != nil {
			return err
		}
		shipped = true
		return tx.Append(ctx, shippedEvent(sh))
	})
	if err != nil {
		return nil, false, fmt.Errorf("ship shipment %s: %w", id, err)
	}
	return s.committed(ctx, sh, at, shipped, shipment.Shipped), shipped, nil
}

// Fail records that by found a PENDING shipment cannot be shipped, for reason: FAILED (FailedBy =
// by), and shipment.failed is appended. The reservation stays HELD: orders answers shipment.failed with
// order.cancelled, which releases it. It returns the shipment as committed and whether this call
// failed it: a shipment already failed for the same reason is returned unchanged, for another it
// is shipment.ErrConflict; a shipped or cancelled one is shipment.ErrIllegalTransition.
func (s *Service) Fail(ctx context.Context, id, reason, by string) (*shipment.Shipment, bool, error) {
	if problems := shipment.ValidateFailure(reason); len(problems) > 0 {
		return nil, false, &shipment.ValidationError{Problems: problems}
	}
	if !isShipmentID(id) {
		return nil, false, fmt.Errorf("shipment %q: %w", id, shipment.ErrNotFound)
	}
	var (
		failed bool
		sh     *shipment.Shipment
	)
	at, err := s.repo.Update(ctx, func(ctx context.Context, tx Tx) error {
		failed = false
		var err error
		if sh, _, err = tx.Shipment(ctx, id); err != nil {
			return err
		}
		changed, err := sh.Fail(reason, by)
		if err != nil || !changed {
			return err
		}
		if err := tx.SaveShipment(ctx, sh, false); err != nil {
			return err
		}
		failed = true
		return tx.Append(ctx, shipmentFailedEvent(sh))
	})
	if err != nil {
		return nil, false, fmt.Errorf("fail shipment %s: %w", id, err)
	}
	return s.committed(ctx, sh, at, failed, shipment.Failed), failed, nil
}

// committed finishes a warehouse action on sh, which committed at: when it changed the shipment
// (to status), the shipment takes the commit's timestamps, the relay is nudged for its event and
// the transition counted. It returns sh as committed.
func (s *Service) committed(ctx context.Context, sh *shipment.Shipment, at time.Time, changed bool, status shipment.Status) *shipment.Shipment {
	if changed {
		sh.Committed(at)
		if s.nudge != nil {
			s.nudge.NudgeAggregate(ctx, sh.ID())
		}
		s.metrics.shipments.WithLabelValues(string(status)).Inc()
	}
	return sh
}
