// Package store is fulfillment's Spanner code: the reservation of an order's lines and its release,
// each inside the caller's read-write transaction (the outboxlib consumer's, which also records the
// inbox row), and the reads behind the HTTP API. It maps Spanner and gen/dao errors to the domain's
// (inventory.ErrNotFound) once, here.
package store

import (
	"context"
	"errors"
	"fmt"

	"cloud.google.com/go/spanner"

	"github.com/spanmart/spanmart/gen/dao"
	"github.com/spanmart/spanmart/gen/dao/fulfillmentdb"
	"github.com/spanmart/spanmart/services/fulfillment/internal/inventory"
)

// Statuses of OrderReservations (the order's decision) and Reservations (its lines).
const (
	StatusHeld     = "HELD"
	StatusRejected = "REJECTED"
	StatusReleased = "RELEASED"
	StatusShipped  = "SHIPPED"
)

// ErrShipped is returned by Release for an order whose stock has shipped: nothing can be released.
var ErrShipped = errors.New("reservation already shipped")

// Reserved is what Reserve did.
type Reserved struct {
	// Applied is false when the order had been decided before (a replay, whatever its event id):
	// nothing was written and Outcome is empty.
	Applied bool
	Outcome inventory.Outcome
}

// Reserve decides an order once: every line is reserved (Inventory.Reserved += quantity,
// Reservations rows HELD, OrderReservations HELD at version 1) or none is (OrderReservations
// REJECTED at version 1, stock untouched). Lines that can never be valid wrap inventory.ErrInvalid.
// The reads lock the rows they read, so concurrent reservations of the same SKUs serialize and the
// Inventory CHECK cannot be violated by a lost update.
func Reserve(ctx context.Context, txn *spanner.ReadWriteTransaction, orderID string, lines []inventory.Line) (Reserved, error) {
	lines, err := inventory.NormalizeLines(lines)
	if err != nil {
		return Reserved{}, fmt.Errorf("reserve order %s: %w", orderID, err)
	}
	if _, err := fulfillmentdb.ReadOrderReservation(ctx, txn, orderID); err == nil {
		return Reserved{}, nil
	} else if !errors.Is(err, dao.ErrNotFound) {
		return Reserved{}, fmt.Errorf("reserve order %s: %w", orderID, err)
	}
	keys := make([]spanner.Key, len(lines))
	for i, l := range lines {
		keys[i] = fulfillmentdb.InventoryKey(l.SKU)
	}
	rows, err := fulfillmentdb.ReadInventoryRows(ctx, txn, spanner.KeySetFromKeys(keys...))
	if err != nil {
		return Reserved{}, fmt.Errorf("reserve order %s: %w", orderID, err)
	}
	stock, err := toStock(rows)
	if err != nil {
		return Reserved{}, fmt.Errorf("reserve order %s: %w", orderID, err)
	}
	outcome, err := inventory.Reserve(stock, lines)
	if err != nil {
		return Reserved{}, fmt.Errorf("reserve order %s: %w", orderID, err)
	}

	head := &fulfillmentdb.OrderReservation{OrderId: orderID, Status: StatusRejected, Version: 1}
	head.SetCommitTimestamps()
	ms := []*spanner.Mutation{}
	if outcome.OK() {
		head.Status = StatusHeld
		for _, s := range outcome.Stock {
			m, err := stockUpdate(s)
			if err != nil {
				return Reserved{}, err
			}
			ms = append(ms, m)
		}
		for _, l := range outcome.Lines {
			r := &fulfillmentdb.Reservation{OrderId: orderID, Sku: l.SKU, Quantity: l.Quantity, Status: StatusHeld}
			r.SetCommitTimestamps()
			ms = append(ms, r.Insert())
		}
	}
	ms = append(ms, head.Insert())
	if err := txn.BufferWrite(ms); err != nil {
		return Reserved{}, fmt.Errorf("reserve order %s: %w", orderID, err)
	}
	return Reserved{Applied: true, Outcome: outcome}, nil
}

// Released is what Release did.
type Released struct {
	// Applied is false when the order had been released before: nothing was written.
	Applied bool
	// Lines are the lines whose stock was released; empty for a rejected order, which held none.
	Lines []inventory.Line
	// Version is the reservation aggregate's new version (that of the inventory.released event).
	Version int64
}

// Release gives back the stock of an order: its HELD lines become RELEASED and their units leave
// Inventory.Reserved. A rejected order held nothing; it is released once too (version 2), so that
// every cancelled order gets its inventory.released. An order never decided is inventory.ErrNotFound
// (its order.created has not been applied yet); a shipped one is ErrShipped.
func Release(ctx context.Context, txn *spanner.ReadWriteTransaction, orderID string) (Released, error) {
	head, err := fulfillmentdb.ReadOrderReservation(ctx, txn, orderID)
	if errors.Is(err, dao.ErrNotFound) {
		return Released{}, fmt.Errorf("release order %s: no reservation: %w", orderID, inventory.ErrNotFound)
	}
	if err != nil {
		return Released{}, fmt.Errorf("release order %s: %w", orderID, err)
	}
	switch {
	case head.Status == StatusShipped:
		return Released{}, fmt.Errorf("release order %s: %w", orderID, ErrShipped)
	case head.Status == StatusReleased, head.Status == StatusRejected && head.Version > 1:
		return Released{}, nil
	}

	var ms []*spanner.Mutation
	var released []inventory.Line
	if head.Status == StatusHeld {
		lines, err := fulfillmentdb.ReadReservationRows(ctx, txn, spanner.Key{orderID}.AsPrefix())
		if err != nil {
			return Released{}, fmt.Errorf("release order %s: %w", orderID, err)
		}
		keys := make([]spanner.Key, 0, len(lines))
		for _, l := range lines {
			keys = append(keys, fulfillmentdb.InventoryKey(l.Sku))
		}
		rows, err := fulfillmentdb.ReadInventoryRows(ctx, txn, spanner.KeySetFromKeys(keys...))
		if err != nil {
			return Released{}, fmt.Errorf("release order %s: %w", orderID, err)
		}
		stock, err := toStock(rows)
		if err != nil {
			return Released{}, fmt.Errorf("release order %s: %w", orderID, err)
		}
		bySKU := make(map[string]inventory.Stock, len(stock))
		for _, s := range stock {
			bySKU[s.SKU()] = s
		}
		for _, l := range lines {
			if l.Status != StatusHeld {
				continue
			}
			s, ok := bySKU[l.Sku]
			if !ok {
				return Released{}, fmt.Errorf("release order %s: sku %s has no inventory row", orderID, l.Sku)
			}
			s, err := s.Release(l.Quantity)
			if err != nil {
				return Released{}, fmt.Errorf("release order %s: %w", orderID, err)
			}
			bySKU[l.Sku] = s
			m, err := stockUpdate(s)
			if err != nil {
				return Released{}, err
			}
			l.Status, l.UpdatedAt = StatusReleased, spanner.CommitTimestamp
			rm, err := l.UpdateColumns(fulfillmentdb.ReservationColStatus, fulfillmentdb.ReservationColUpdatedAt)
			if err != nil {
				return Released{}, err
			}
			ms = append(ms, m, rm)
			released = append(released, inventory.Line{SKU: l.Sku, Quantity: l.Quantity})
		}
		head.Status = StatusReleased
	}
	head.Version++
	head.UpdatedAt = spanner.CommitTimestamp
	hm, err := head.UpdateColumns(fulfillmentdb.OrderReservationColStatus, fulfillmentdb.OrderReservationColVersion, fulfillmentdb.OrderReservationColUpdatedAt)
	if err != nil {
		return Released{}, err
	}
	if err := txn.BufferWrite(append(ms, hm)); err != nil {
		return Released{}, fmt.Errorf("release order %s: %w", orderID, err)
	}
	return Released{Applied: true, Lines: released, Version: head.Version}, nil
}

// stockUpdate writes the new Reserved of s; OnHand is not written, so a concurrent receipt of
// stock (which would lock the row too) is never overwritten.
func stockUpdate(s inventory.Stock) (*spanner.Mutation, error) {
	row := &fulfillmentdb.Inventory{Sku: s.SKU(), Reserved: s.Reserved(), UpdatedAt: spanner.CommitTimestamp}
	return row.UpdateColumns(fulfillmentdb.InventoryColReserved, fulfillmentdb.InventoryColUpdatedAt)
}

func toStock(rows []*fulfillmentdb.Inventory) ([]inventory.Stock, error) {
	out := make([]inventory.Stock, 0, len(rows))
	for _, r := range rows {
		s, err := inventory.NewStock(r.Sku, r.OnHand, r.Reserved)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}
