package inventory

import (
	"errors"
	"fmt"
)

// ErrIllegalTransition is a change the reservation's status does not allow.
var ErrIllegalTransition = errors.New("illegal reservation transition")

// ReservationStatus is the decision fulfillment took on an order's stock; its values are those of
// the CK_OrderReservations_Status check.
type ReservationStatus string

const (
	// Held: every line is reserved (Inventory.Reserved counts it).
	Held ReservationStatus = "HELD"
	// Rejected: the order did not fit; nothing was reserved and the reservation has no lines.
	Rejected ReservationStatus = "REJECTED"
	// Released: the order was cancelled and its lines' units were given back.
	Released ReservationStatus = "RELEASED"
	// Shipped: the lines left the warehouse (Inventory.OnHand no longer counts them).
	Shipped ReservationStatus = "SHIPPED"
)

// Reservation is the reservation aggregate of one order (events inventory.*, aggregate type
// "reservation", aggregate id = the order id): fulfillment decides an order once, so a replay of
// order.created with a new event id can never reserve twice or turn a rejection into a
// reservation. Version is the AggregateVersion of the last inventory.* event emitted for it:
//
//	HELD | REJECTED at 1 (inventory.reserved | inventory.rejected)
//	HELD → RELEASED at 2 (inventory.released, the lines' units given back)
//	REJECTED at 1 → REJECTED at 2 (inventory.released with no lines: every cancelled order gets one)
//	HELD → SHIPPED, still at 1 (the shipment's event, shipment.shipped, announces it)
//	SHIPPED at 1 → SHIPPED at 2 (inventory.release_failed: cancelled after it shipped)
//
// So a REJECTED or SHIPPED reservation above version 1 has answered its order's cancellation.
type Reservation struct {
	orderID string
	status  ReservationStatus
	version int64
	lines   []Line
	// restored is the status the reservation was read in (or "" for a new one), so the store knows
	// whether the lines' rows change with it.
	restored ReservationStatus
}

// Decide returns the reservation an order's Reserve outcome makes, at version 1: HELD with the
// outcome's lines, or REJECTED with none.
func Decide(orderID string, o Outcome) *Reservation {
	if o.OK() {
		return &Reservation{orderID: orderID, status: Held, version: 1, lines: append([]Line(nil), o.Lines...)}
	}
	return &Reservation{orderID: orderID, status: Rejected, version: 1}
}

// RestoreReservation rebuilds a reservation the store read; one no reservation can be in wraps
// ErrInvalid.
func RestoreReservation(orderID string, status ReservationStatus, version int64, lines []Line) (*Reservation, error) {
	switch {
	case orderID == "":
		return nil, fmt.Errorf("reservation: empty order id: %w", ErrInvalid)
	case status != Held && status != Rejected && status != Released && status != Shipped:
		return nil, fmt.Errorf("reservation of %s: unknown status %q: %w", orderID, status, ErrInvalid)
	case version < 1:
		return nil, fmt.Errorf("reservation of %s: version %d: %w", orderID, version, ErrInvalid)
	case status == Rejected && len(lines) > 0:
		return nil, fmt.Errorf("reservation of %s: rejected with %d lines: %w", orderID, len(lines), ErrInvalid)
	}
	return &Reservation{orderID: orderID, status: status, version: version, lines: append([]Line(nil), lines...), restored: status}, nil
}

// OrderID returns the order.
func (r *Reservation) OrderID() string { return r.orderID }

// Status returns the decision.
func (r *Reservation) Status() ReservationStatus { return r.status }

// Version returns the AggregateVersion of the last inventory.* event emitted for it.
func (r *Reservation) Version() int64 { return r.version }

// Lines returns the reserved lines in SKU order; none for a rejected order.
func (r *Reservation) Lines() []Line { return append([]Line(nil), r.lines...) }

// LinesChanged reports whether the lines' status differs from the one they were read in (a new
// reservation's lines are all new).
func (r *Reservation) LinesChanged() bool { return r.status != r.restored }

// Release is what Reservation.Release did.
type Release int

const (
	// AlreadyAnswered: the cancellation was answered before (released, or its failure reported);
	// nothing changed.
	AlreadyAnswered Release = iota
	// ReleasedNow: the lines' units are to be given back (none for a rejected order); the
	// reservation is at its new version, that of inventory.released.
	ReleasedNow
	// ReleaseFailed: the lines have shipped, nothing can be given back; the reservation is at its
	// new version, that of inventory.release_failed.
	ReleaseFailed
)

// Release answers the cancellation of the order, once: a HELD reservation becomes RELEASED (the
// caller gives back the units of Lines), a rejected one is released with nothing to give back, and
// a shipped one records that it cannot be released. Each of these moves to the next version; a
// reservation that answered before stays as it is (AlreadyAnswered).
func (r *Reservation) Release() Release {
	switch {
	case r.status == Held:
		r.status = Released
	case r.status == Rejected && r.version == 1:
	case r.status == Shipped && r.version == 1:
		r.version++
		return ReleaseFailed
	default:
		return AlreadyAnswered
	}
	r.version++
	return ReleasedNow
}

// Ship records that the lines left the warehouse: HELD → SHIPPED. The version stays: the
// shipment's event announces it, not an inventory.* event.
func (r *Reservation) Ship() error {
	if r.status != Held {
		return fmt.Errorf("reservation of %s is %s, not %s: cannot ship: %w", r.orderID, r.status, Held, ErrIllegalTransition)
	}
	r.status = Shipped
	return nil
}
