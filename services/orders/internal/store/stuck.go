package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmart/spanmart/gen/dao"
	"github.com/spanmart/spanmart/gen/dao/ordersdb"
	"github.com/spanmart/spanmart/services/orders/internal/app"
	"github.com/spanmart/spanmart/services/orders/internal/order"
)

// OrdersByStatus implements app.Repository through the index OrdersByStatus (Status, UpdatedAt):
// the range [(status, from), (status, to)) in index order, then each order with its lines, all in
// one read-only transaction so every order is as it was at one timestamp. The audit reads few
// orders (stuck ones are the exception, and its reads are bounded), so each is read as
// GET /v1/orders/{id} reads it.
func (s *Store) OrdersByStatus(ctx context.Context, status order.Status, from, to time.Time, limit int) ([]app.DatedOrder, error) {
	start := spanner.Key{string(status)}
	if !from.IsZero() {
		start = ordersdb.OrdersByStatusKey(string(status), from)
	}
	keys := spanner.KeyRange{Start: start, End: ordersdb.OrdersByStatusKey(string(status), to), Kind: spanner.ClosedOpen}
	txn := s.client.ReadOnlyTransaction()
	defer txn.Close()
	rows, err := ordersdb.ReadOrdersByStatusKeys(ctx, txn, keys, limit)
	if err != nil {
		return nil, fmt.Errorf("orders in %s: %w", status, err)
	}
	out := make([]app.DatedOrder, 0, len(rows))
	for _, r := range rows {
		o, err := readOrder(ctx, txn, r.OrderId)
		if err != nil {
			return nil, fmt.Errorf("orders in %s: %w", status, err)
		}
		out = append(out, app.DatedOrder{Order: o, UpdatedAt: r.UpdatedAt})
	}
	return out, nil
}

// DatedOrder implements app.Repository: one order and when it last changed (order.ErrNotFound if
// there is none).
func (s *Store) DatedOrder(ctx context.Context, id string) (app.DatedOrder, error) {
	txn := s.client.ReadOnlyTransaction()
	defer txn.Close()
	row, err := ordersdb.ReadOrder(ctx, txn, id)
	if errors.Is(err, dao.ErrNotFound) {
		return app.DatedOrder{}, fmt.Errorf("order %s: %w", id, order.ErrNotFound)
	}
	if err != nil {
		return app.DatedOrder{}, err
	}
	o, err := readOrder(ctx, txn, id)
	if err != nil {
		return app.DatedOrder{}, err
	}
	return app.DatedOrder{Order: o, UpdatedAt: row.UpdatedAt}, nil
}
