package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmart/spanmart/gen/dao"
	"github.com/spanmart/spanmart/gen/dao/fulfillmentdb"
	"github.com/spanmart/spanmart/services/fulfillment/internal/inventory"
)

// Reads serves the HTTP API's reads from a Spanner client (strong reads).
type Reads struct {
	Client *spanner.Client
}

// ListStock returns the stock of every SKU, in SKU order.
func (r Reads) ListStock(ctx context.Context) ([]inventory.Stock, error) {
	rows, err := fulfillmentdb.ReadInventoryRows(ctx, r.Client.Single(), spanner.AllKeys())
	if err != nil {
		return nil, fmt.Errorf("list stock: %w", err)
	}
	return toStock(rows)
}

// Stock returns the stock of sku; an unknown SKU is inventory.ErrNotFound.
func (r Reads) Stock(ctx context.Context, sku string) (inventory.Stock, error) {
	row, err := fulfillmentdb.ReadInventory(ctx, r.Client.Single(), sku)
	if errors.Is(err, dao.ErrNotFound) {
		return inventory.Stock{}, fmt.Errorf("sku %q: %w", sku, inventory.ErrNotFound)
	}
	if err != nil {
		return inventory.Stock{}, fmt.Errorf("read stock %s: %w", sku, err)
	}
	return inventory.NewStock(row.Sku, row.OnHand, row.Reserved)
}

// Reservation is an order's reservation as the API shows it.
type Reservation struct {
	OrderID   string
	Status    string // HELD, REJECTED, RELEASED or SHIPPED
	Version   int64
	Lines     []ReservationLine // SKU order; none for a rejected order
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ReservationLine is one reserved SKU of an order.
type ReservationLine struct {
	SKU      string
	Quantity int64
	Status   string
}

// Reservation returns the reservation of an order; an order fulfillment has not decided on is
// inventory.ErrNotFound.
func (r Reads) Reservation(ctx context.Context, orderID string) (Reservation, error) {
	txn := r.Client.ReadOnlyTransaction() // both reads at one timestamp
	defer txn.Close()
	head, err := fulfillmentdb.ReadOrderReservation(ctx, txn, orderID)
	if errors.Is(err, dao.ErrNotFound) {
		return Reservation{}, fmt.Errorf("reservation of order %q: %w", orderID, inventory.ErrNotFound)
	}
	if err != nil {
		return Reservation{}, fmt.Errorf("read reservation %s: %w", orderID, err)
	}
	rows, err := fulfillmentdb.ReadReservationRows(ctx, txn, spanner.Key{orderID}.AsPrefix())
	if err != nil {
		return Reservation{}, fmt.Errorf("read reservation %s: %w", orderID, err)
	}
	out := Reservation{OrderID: head.OrderId, Status: head.Status, Version: head.Version, CreatedAt: head.CreatedAt, UpdatedAt: head.UpdatedAt}
	for _, row := range rows {
		out.Lines = append(out.Lines, ReservationLine{SKU: row.Sku, Quantity: row.Quantity, Status: row.Status})
	}
	return out, nil
}
