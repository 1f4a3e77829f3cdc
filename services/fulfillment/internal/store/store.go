// Package store keeps fulfillment's state in Spanner through the generated gen/dao/fulfillmentdb
// code (stock, the reservations of orders, shipments) and appends its events to the outbox
// (pkg/outboxlib) in the same read-write transaction as the change they announce. Spanner and
// gen/dao errors are mapped to the domain's (inventory.ErrNotFound, shipment.ErrNotFound) here and
// nowhere else.
//
// Store implements app.Repository: Update opens a transaction of its own, UpdateInTxn runs in the
// event consumer's, which reaches it through the app layer as an app.Txn (a
// *spanner.ReadWriteTransaction, the only type it accepts); both hand the closure an app.Tx bound
// to that transaction. The reads behind the API are strong reads.
package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmart/spanmart/gen/dao"
	"github.com/spanmart/spanmart/gen/dao/fulfillmentdb"
	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/services/fulfillment/internal/app"
	"github.com/spanmart/spanmart/services/fulfillment/internal/inventory"
	"github.com/spanmart/spanmart/services/fulfillment/internal/shipment"
)

// Store is the Spanner repository of fulfillment. It implements app.Repository.
type Store struct {
	client *spanner.Client
}

var (
	_ app.Repository = (*Store)(nil)
	_ app.Tx         = (*tx)(nil)
)

// New returns a store on client.
func New(client *spanner.Client) *Store { return &Store{client: client} }

// Update implements app.Repository.
func (s *Store) Update(ctx context.Context, fn func(ctx context.Context, tx app.Tx) error) (time.Time, error) {
	return s.client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		return fn(ctx, &tx{txn: txn})
	})
}

// UpdateInTxn implements app.Repository; t must be the caller's *spanner.ReadWriteTransaction.
func (s *Store) UpdateInTxn(ctx context.Context, t app.Txn, fn func(ctx context.Context, tx app.Tx) error) error {
	txn, ok := t.(*spanner.ReadWriteTransaction)
	if !ok || txn == nil {
		return fmt.Errorf("the transaction is a %T, want a *spanner.ReadWriteTransaction", t)
	}
	return fn(ctx, &tx{txn: txn})
}

// tx is the repository bound to one read-write transaction.
type tx struct {
	txn *spanner.ReadWriteTransaction
}

// linesSQL is the column of reservationSQL and shipmentsSQL that brings the lines of order o.OrderId
// (its Reservations rows, by SKU), read into []*reservationLine.
const linesSQL = `ARRAY(SELECT AS STRUCT r.Sku, r.Quantity FROM Reservations AS r WHERE r.OrderId = o.OrderId ORDER BY r.Sku) AS Lines`

// reservationSQL reads an order's reservation with its lines and the order's shipment, if it has
// one (whose lines are the reservation's): one round trip where three reads were.
var reservationSQL = `SELECT o.Status, o.Version, ` + linesSQL + `,
  ARRAY(SELECT AS STRUCT s.` + strings.Join(fulfillmentdb.ShipmentColumns(), ", s.") + `
    FROM Shipments AS s WHERE s.ShipmentId = @shipmentId) AS Shipment
FROM OrderReservations AS o
WHERE o.OrderId = @orderId`

// reservationLine is a line as linesSQL reads it.
type reservationLine struct {
	Sku      string
	Quantity int64
}

// toLines returns the lines linesSQL read.
func toLines(rows []*reservationLine) []inventory.Line {
	ls := make([]inventory.Line, len(rows))
	for i, l := range rows {
		ls[i] = inventory.Line{SKU: l.Sku, Quantity: l.Quantity}
	}
	return ls
}

func (t *tx) Reservation(ctx context.Context, orderID string) (*inventory.Reservation, *shipment.Shipment, error) {
	var (
		status   string
		version  int64
		rows     []*reservationLine
		shipRows []*fulfillmentdb.Shipment
		found    bool
	)
	stmt := spanner.Statement{SQL: reservationSQL, Params: map[string]any{"orderId": orderID, "shipmentId": shipment.IDFor(orderID)}}
	err := t.txn.Query(ctx, stmt).Do(func(r *spanner.Row) error {
		found = true
		return r.Columns(&status, &version, &rows, &shipRows)
	})
	switch {
	case err != nil:
		return nil, nil, fmt.Errorf("read reservation %s: %w", orderID, err)
	case !found:
		return nil, nil, fmt.Errorf("no reservation for order %s: %w", orderID, inventory.ErrNotFound)
	}
	lines := toLines(rows)
	r, err := inventory.RestoreReservation(orderID, inventory.ReservationStatus(status), version, lines)
	if err != nil || len(shipRows) == 0 {
		return r, nil, err
	}
	sh, err := restoreShipment(shipRows[0], lines)
	return r, sh, err
}

// Stock reads the SKUs' stock with exclusive locks: a read-write transaction reads stock to
// change it (reserve, release, ship), and orders of one popular SKU come together, so two
// transactions would otherwise both read the row, both want to write it, and one of them would
// be aborted (docs/architecture.md, "Local system").
func (t *tx) Stock(ctx context.Context, skus []string) ([]inventory.Stock, error) {
	keys := make([]spanner.Key, len(skus))
	for i, sku := range skus {
		keys[i] = fulfillmentdb.InventoryKey(sku)
	}
	rows, err := fulfillmentdb.ReadInventoryRows(ctx, dao.Exclusive(t.txn), spanner.KeySetFromKeys(keys...))
	if err != nil {
		return nil, fmt.Errorf("read stock: %w", err)
	}
	return toStock(rows)
}

// stockUnlessDecidedSQL reads whether an order has a reservation and the stock of some SKUs, in
// one round trip where two reads were; the stock with FOR UPDATE, locked exclusively as Stock
// locks it.
var stockUnlessDecidedSQL = `SELECT EXISTS(SELECT 1 FROM OrderReservations AS o WHERE o.OrderId = @orderId) AS Decided,
  ARRAY(SELECT AS STRUCT i.` + strings.Join(fulfillmentdb.InventoryColumns(), ", i.") + `
    FROM Inventory AS i WHERE i.Sku IN UNNEST(@skus) ORDER BY i.Sku FOR UPDATE) AS Stock`

func (t *tx) StockUnlessDecided(ctx context.Context, orderID string, skus []string) (bool, []inventory.Stock, error) {
	var (
		decided bool
		rows    []*fulfillmentdb.Inventory
	)
	stmt := spanner.Statement{SQL: stockUnlessDecidedSQL, Params: map[string]any{"orderId": orderID, "skus": skus}}
	if err := t.txn.Query(ctx, stmt).Do(func(r *spanner.Row) error { return r.Columns(&decided, &rows) }); err != nil {
		return false, nil, fmt.Errorf("read reservation %s and stock: %w", orderID, err)
	}
	if decided {
		return true, nil, nil
	}
	stock, err := toStock(rows)
	return false, stock, err
}

// shipmentsSQL reads shipments with their lines (their orders' reservation rows): one round trip
// where two reads were; shipmentSQL and pendingShipmentsSQL add which shipments.
var shipmentsSQL = "SELECT o." + strings.Join(fulfillmentdb.ShipmentColumns(), ", o.") + ", " + linesSQL

// shipmentSQL reads a shipment with its lines and the status and version of its order's
// reservation, which a warehouse action moves with the shipment: one round trip where three reads
// were.
var shipmentSQL = shipmentsSQL + `, v.Status AS ReservationStatus, v.Version AS ReservationVersion
FROM Shipments AS o LEFT JOIN OrderReservations AS v ON v.OrderId = o.OrderId
WHERE o.ShipmentId = @id`

var orderShipmentsSQL = shipmentsSQL + `
FROM Shipments@{FORCE_INDEX=ShipmentsByOrder} AS o
WHERE o.OrderId = @orderId`

var pendingShipmentsSQL = shipmentsSQL + `
FROM Shipments@{FORCE_INDEX=ShipmentsByStatus} AS o
WHERE o.Status = @status AND o.CreatedAt <= @before
ORDER BY o.CreatedAt, o.ShipmentId
LIMIT @limit`

// querier is a transaction, or a single use of the client, that queries.
type querier interface {
	Query(ctx context.Context, stmt spanner.Statement) *spanner.RowIterator
}

// queryShipments runs a query of shipmentsSQL's columns and restores its shipments; each row's
// other columns go to more, when it is not nil.
func queryShipments(ctx context.Context, q querier, stmt spanner.Statement, more func(*spanner.Row, *shipment.Shipment) error) ([]*shipment.Shipment, error) {
	var out []*shipment.Shipment
	err := q.Query(ctx, stmt).Do(func(r *spanner.Row) error {
		var (
			row  fulfillmentdb.Shipment
			rows []*reservationLine
		)
		if err := r.ToStructLenient(&row); err != nil {
			return err
		}
		if err := r.ColumnByName("Lines", &rows); err != nil {
			return err
		}
		sh, err := restoreShipment(&row, toLines(rows))
		if err != nil {
			return err
		}
		if more != nil {
			if err := more(r, sh); err != nil {
				return err
			}
		}
		out = append(out, sh)
		return nil
	})
	return out, err
}

// queryShipment reads the shipment id with its lines, and its order's reservation (nil if there is
// none).
func queryShipment(ctx context.Context, q querier, id string) (*shipment.Shipment, *inventory.Reservation, error) {
	var res *inventory.Reservation
	out, err := queryShipments(ctx, q, spanner.Statement{SQL: shipmentSQL, Params: map[string]any{"id": id}}, func(r *spanner.Row, sh *shipment.Shipment) error {
		var (
			status  spanner.NullString
			version spanner.NullInt64
		)
		if err := r.ColumnByName("ReservationStatus", &status); err != nil {
			return err
		}
		if err := r.ColumnByName("ReservationVersion", &version); err != nil {
			return err
		}
		if !status.Valid {
			return nil
		}
		var err error
		res, err = inventory.RestoreReservation(sh.OrderID(), inventory.ReservationStatus(status.StringVal), version.Int64, sh.Lines())
		return err
	})
	switch {
	case err != nil:
		return nil, nil, fmt.Errorf("read shipment %s: %w", id, err)
	case len(out) == 0:
		return nil, nil, fmt.Errorf("shipment %s: %w", id, shipment.ErrNotFound)
	}
	return out[0], res, nil
}

func (t *tx) Shipment(ctx context.Context, id string) (*shipment.Shipment, *inventory.Reservation, error) {
	return queryShipment(ctx, t.txn, id)
}

func (t *tx) SaveReservation(ctx context.Context, r *inventory.Reservation, created bool) error {
	status := string(r.Status())
	var ms []*spanner.Mutation
	if created {
		head := fulfillmentdb.OrderReservation{OrderId: r.OrderID(), Status: status, Version: r.Version()}
		head.SetCommitTimestamps()
		ms = append(ms, head.Insert())
		for _, l := range r.Lines() {
			row := fulfillmentdb.Reservation{OrderId: r.OrderID(), Sku: l.SKU, Quantity: l.Quantity, Status: status}
			row.SetCommitTimestamps()
			ms = append(ms, row.Insert())
		}
		return t.txn.BufferWrite(ms)
	}
	head := fulfillmentdb.OrderReservation{OrderId: r.OrderID(), Status: status, Version: r.Version(), UpdatedAt: spanner.CommitTimestamp}
	m, err := head.UpdateColumns(fulfillmentdb.OrderReservationColStatus, fulfillmentdb.OrderReservationColVersion, fulfillmentdb.OrderReservationColUpdatedAt)
	if err != nil {
		return err
	}
	ms = append(ms, m)
	if r.LinesChanged() {
		for _, l := range r.Lines() {
			row := fulfillmentdb.Reservation{OrderId: r.OrderID(), Sku: l.SKU, Status: status, UpdatedAt: spanner.CommitTimestamp}
			m, err := row.UpdateColumns(fulfillmentdb.ReservationColStatus, fulfillmentdb.ReservationColUpdatedAt)
			if err != nil {
				return err
			}
			ms = append(ms, m)
		}
	}
	return t.txn.BufferWrite(ms)
}

// SaveStock writes both levels. They were read in this transaction, whose locks keep them until
// the commit, so a concurrent change of either (another order, a receipt of stock) serializes with
// it instead of being overwritten.
func (t *tx) SaveStock(ctx context.Context, stock ...inventory.Stock) error {
	ms := make([]*spanner.Mutation, 0, len(stock))
	for _, s := range stock {
		row := fulfillmentdb.Inventory{Sku: s.SKU(), OnHand: s.OnHand(), Reserved: s.Reserved(), UpdatedAt: spanner.CommitTimestamp}
		m, err := row.UpdateColumns(fulfillmentdb.InventoryColOnHand, fulfillmentdb.InventoryColReserved, fulfillmentdb.InventoryColUpdatedAt)
		if err != nil {
			return err
		}
		ms = append(ms, m)
	}
	return t.txn.BufferWrite(ms)
}

func (t *tx) SaveShipment(ctx context.Context, s *shipment.Shipment, created bool) error {
	snap := s.Snapshot()
	row := fulfillmentdb.Shipment{
		ShipmentId: snap.ID, OrderId: snap.OrderID, Status: string(snap.Status), Version: snap.Version,
		Carrier: nullString(snap.Carrier), TrackingNumber: nullString(snap.TrackingNumber), FailureReason: nullString(snap.FailureReason),
		ShippedBy: nullString(snap.ShippedBy), FailedBy: nullString(snap.FailedBy),
		UpdatedAt: spanner.CommitTimestamp,
	}
	if snap.Status == shipment.Shipped {
		row.ShippedAt = dao.NullCommitTimestamp
	}
	if created {
		row.CreatedAt = spanner.CommitTimestamp
		return t.txn.BufferWrite([]*spanner.Mutation{row.Insert()})
	}
	m, err := row.UpdateColumns(fulfillmentdb.ShipmentColStatus, fulfillmentdb.ShipmentColVersion, fulfillmentdb.ShipmentColCarrier,
		fulfillmentdb.ShipmentColTrackingNumber, fulfillmentdb.ShipmentColFailureReason, fulfillmentdb.ShipmentColShippedAt,
		fulfillmentdb.ShipmentColShippedBy, fulfillmentdb.ShipmentColFailedBy, fulfillmentdb.ShipmentColUpdatedAt)
	if err != nil {
		return err
	}
	return t.txn.BufferWrite([]*spanner.Mutation{m})
}

func (t *tx) Append(ctx context.Context, events ...app.Event) error {
	out := make([]outboxlib.Event, 0, len(events))
	for _, e := range events {
		ev, err := outboxlib.NewEvent(ctx, e.Type, e.AggregateType, e.AggregateID, e.Version, e.Payload)
		if err != nil {
			return err
		}
		out = append(out, ev)
	}
	return outboxlib.Append(ctx, t.txn, out...)
}

// ListStock implements app.Repository.
func (s *Store) ListStock(ctx context.Context) ([]inventory.Stock, error) {
	rows, err := fulfillmentdb.ReadInventoryRows(ctx, s.client.Single(), spanner.AllKeys())
	if err != nil {
		return nil, fmt.Errorf("list stock: %w", err)
	}
	return toStock(rows)
}

// Stock implements app.Repository.
func (s *Store) Stock(ctx context.Context, sku string) (inventory.Stock, error) {
	row, err := fulfillmentdb.ReadInventory(ctx, s.client.Single(), sku)
	if errors.Is(err, dao.ErrNotFound) {
		return inventory.Stock{}, fmt.Errorf("sku %q: %w", sku, inventory.ErrNotFound)
	}
	if err != nil {
		return inventory.Stock{}, fmt.Errorf("read stock %s: %w", sku, err)
	}
	return inventory.NewStock(row.Sku, row.OnHand, row.Reserved)
}

// Reservation implements app.Repository.
func (s *Store) Reservation(ctx context.Context, orderID string) (app.Reservation, error) {
	txn := s.client.ReadOnlyTransaction() // both reads at one timestamp
	defer txn.Close()
	head, err := fulfillmentdb.ReadOrderReservation(ctx, txn, orderID)
	if errors.Is(err, dao.ErrNotFound) {
		return app.Reservation{}, fmt.Errorf("reservation of order %q: %w", orderID, inventory.ErrNotFound)
	}
	if err != nil {
		return app.Reservation{}, fmt.Errorf("read reservation %s: %w", orderID, err)
	}
	rows, err := fulfillmentdb.ReadReservationRows(ctx, txn, spanner.Key{orderID}.AsPrefix())
	if err != nil {
		return app.Reservation{}, fmt.Errorf("read reservation %s: %w", orderID, err)
	}
	out := app.Reservation{
		OrderID: head.OrderId, Status: inventory.ReservationStatus(head.Status), Version: head.Version,
		CreatedAt: head.CreatedAt, UpdatedAt: head.UpdatedAt,
	}
	for _, row := range rows {
		out.Lines = append(out.Lines, app.ReservationLine{SKU: row.Sku, Quantity: row.Quantity, Status: row.Status})
	}
	return out, nil
}

// Shipment implements app.Repository: one query, so the shipment and its lines are read at one
// timestamp.
func (s *Store) Shipment(ctx context.Context, id string) (*shipment.Shipment, error) {
	sh, _, err := queryShipment(ctx, s.client.Single(), id)
	return sh, err
}

// ShipmentsOfOrder implements app.Repository.
func (s *Store) ShipmentsOfOrder(ctx context.Context, orderID string) ([]*shipment.Shipment, error) {
	out, err := queryShipments(ctx, s.client.Single(), spanner.Statement{SQL: orderShipmentsSQL, Params: map[string]any{"orderId": orderID}}, nil)
	if err != nil {
		return nil, fmt.Errorf("read shipments of order %s: %w", orderID, err)
	}
	return out, nil
}

// PendingShipments implements app.Repository.
func (s *Store) PendingShipments(ctx context.Context, createdBefore time.Time, limit int) ([]*shipment.Shipment, error) {
	out, err := queryShipments(ctx, s.client.Single(), spanner.Statement{SQL: pendingShipmentsSQL, Params: map[string]any{
		"status": string(shipment.Pending), "before": createdBefore, "limit": int64(limit),
	}}, nil)
	if err != nil {
		return nil, fmt.Errorf("read pending shipments: %w", err)
	}
	return out, nil
}

func restoreShipment(row *fulfillmentdb.Shipment, ls []inventory.Line) (*shipment.Shipment, error) {
	return shipment.Restore(shipment.Snapshot{
		ID: row.ShipmentId, OrderID: row.OrderId, Status: shipment.Status(row.Status),
		Carrier: row.Carrier.StringVal, TrackingNumber: row.TrackingNumber.StringVal, FailureReason: row.FailureReason.StringVal,
		ShippedBy: row.ShippedBy.StringVal, FailedBy: row.FailedBy.StringVal, Lines: ls, Version: row.Version,
		CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt, ShippedAt: row.ShippedAt.Time,
	})
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

func nullString(s string) spanner.NullString { return spanner.NullString{StringVal: s, Valid: s != ""} }
