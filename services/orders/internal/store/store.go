// Package store keeps orders in Spanner through the generated gen/dao/ordersdb code: every state
// change, its outbox events (pkg/outboxlib) and its timeline rows are written in one read-write
// transaction. Spanner error codes are mapped here and nowhere else.
//
// Store implements app.Repository. PlaceOrder, Order and ActiveProducts run their own
// transactions; UpdateInTxn runs in the event consumer's, which reaches it through the app layer
// as an app.Txn (a *spanner.ReadWriteTransaction, the only type it accepts).
package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"cloud.google.com/go/spanner"

	"github.com/spanmart/spanmart/gen/dao"
	"github.com/spanmart/spanmart/gen/dao/ordersdb"
	"github.com/spanmart/spanmart/pkg/faults"
	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/services/orders/internal/app"
	"github.com/spanmart/spanmart/services/orders/internal/order"
)

// Store is the Spanner repository of orders. It implements app.Repository.
type Store struct {
	client *spanner.Client
}

var _ app.Repository = (*Store)(nil)

// New returns a store on client.
func New(client *spanner.Client) *Store { return &Store{client: client} }

// PlaceOrder implements app.Repository. Two requests with one key that both read "no key" cannot
// both commit: the one that commits second read a key that the first one wrote, so its
// transaction is ABORTED and run again by the client, and that attempt reads the first one's
// response.
func (s *Store) PlaceOrder(ctx context.Context, p app.Placement) (app.Response, error) {
	resp, err := s.placeOnce(ctx, p)
	if err != nil {
		return app.Response{}, fmt.Errorf("place order: %w", err)
	}
	return resp, nil
}

func (s *Store) placeOnce(ctx context.Context, p app.Placement) (app.Response, error) {
	var resp app.Response
	_, err := s.client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		resp = app.Response{}
		stored, catalog, err := readPlacement(ctx, txn, p)
		switch {
		case err != nil:
			return err
		case stored != nil:
			resp, err = storedResponseOf(stored, p.Key)
			return err
		}
		o, err := p.Build(catalog)
		if err != nil {
			return err
		}
		status, body, err := p.Render(o)
		if err != nil {
			return err
		}
		if body, err = normalizeJSON(body); err != nil {
			return err
		}
		if err := insertOrder(ctx, txn, o); err != nil {
			return err
		}
		if err := saveResponse(txn, p.Key, o.ID(), status, body); err != nil {
			return err
		}
		resp = app.Response{Status: status, Body: body, OrderID: o.ID()}
		// Drill: the process dies with the order and its event buffered but not committed.
		faults.Hit(faults.OrdersBeforeCommit)
		return nil
	})
	if err == nil && !resp.Replayed {
		// Drill: the process dies after the commit, before anyone hears of the order.
		faults.Hit(faults.OrdersAfterCommit)
	}
	return resp, err
}

// ChangeOrder implements app.Repository; concurrent requests with one key behave as PlaceOrder's.
func (s *Store) ChangeOrder(ctx context.Context, c app.Change) (app.Response, error) {
	resp, err := s.changeOnce(ctx, c)
	if err != nil {
		return app.Response{}, fmt.Errorf("change order %s: %w", c.OrderID, err)
	}
	return resp, nil
}

func (s *Store) changeOnce(ctx context.Context, c app.Change) (app.Response, error) {
	var resp app.Response
	_, err := s.client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		stored, found, err := storedResponse(ctx, txn, c.Key)
		if err != nil || found {
			resp = stored
			return err
		}
		o, seq, err := readOrderForUpdate(ctx, txn, c.OrderID)
		if err != nil {
			return err
		}
		if err := c.Change(o); err != nil {
			return err
		}
		status, body, err := c.Render(o)
		if err != nil {
			return err
		}
		if body, err = normalizeJSON(body); err != nil {
			return err
		}
		if err := saveChanged(ctx, txn, o, seq-1); err != nil {
			return err
		}
		if err := saveResponse(txn, c.Key, o.ID(), status, body); err != nil {
			return err
		}
		resp = app.Response{Status: status, Body: body, OrderID: o.ID()}
		return nil
	})
	return resp, err
}

// placementSQL reads, in one round trip where two reads were, what placing an order needs: the
// response stored under its idempotency key (none, or one row) and the products it names.
var placementSQL = `SELECT
  ARRAY(SELECT AS STRUCT k.` + strings.Join(ordersdb.IdempotencyKeyColumns(), ", k.") + `
    FROM IdempotencyKeys AS k WHERE k.KeyHash = @keyHash) AS Stored,
  ARRAY(SELECT AS STRUCT p.` + strings.Join(ordersdb.ProductColumns(), ", p.") + `
    FROM Products AS p WHERE p.Sku IN UNNEST(@skus)) AS Products`

// readPlacement reads the key's stored row (nil when the key is new) and the catalog of p's SKUs
// (those that exist).
func readPlacement(ctx context.Context, txn *spanner.ReadWriteTransaction, p app.Placement) (*ordersdb.IdempotencyKey, map[string]app.Product, error) {
	var (
		stored   []*ordersdb.IdempotencyKey
		products []*ordersdb.Product
	)
	stmt := spanner.Statement{SQL: placementSQL, Params: map[string]any{"keyHash": p.Key.KeyHash, "skus": p.SKUs}}
	err := txn.Query(ctx, stmt).Do(func(r *spanner.Row) error {
		return r.Columns(&stored, &products)
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read idempotency key and products: %w", err)
	}
	catalog := make(map[string]app.Product, len(products))
	for _, r := range products {
		catalog[r.Sku] = product(r)
	}
	if len(stored) > 0 {
		return stored[0], catalog, nil
	}
	return nil, catalog, nil
}

// storedResponse reads the response stored under key: found is false when the key is new; a key
// stored for another request is app.ErrIdempotencyConflict.
func storedResponse(ctx context.Context, txn *spanner.ReadWriteTransaction, key app.Idempotency) (app.Response, bool, error) {
	row, err := ordersdb.ReadIdempotencyKey(ctx, txn, key.KeyHash)
	switch {
	case errors.Is(err, dao.ErrNotFound):
		return app.Response{}, false, nil
	case err != nil:
		return app.Response{}, false, err
	}
	resp, err := storedResponseOf(row, key)
	return resp, err == nil, err
}

// storedResponseOf is the response row stored for key.
func storedResponseOf(row *ordersdb.IdempotencyKey, key app.Idempotency) (app.Response, error) {
	switch {
	case row.RequestHash != key.RequestHash:
		return app.Response{}, app.ErrIdempotencyConflict
	case !row.ResponseStatus.Valid || !row.ResponseBody.Valid:
		return app.Response{}, fmt.Errorf("idempotency key %s has no stored response", key.KeyHash)
	}
	body, err := json.Marshal(row.ResponseBody.Value)
	if err != nil {
		return app.Response{}, fmt.Errorf("stored response: %w", err)
	}
	return app.Response{Status: int(row.ResponseStatus.Int64), Body: body, OrderID: row.OrderId.StringVal, Replayed: true}, nil
}

// saveResponse buffers the key with the response it answered (body normalized).
func saveResponse(txn *spanner.ReadWriteTransaction, key app.Idempotency, orderID string, status int, body []byte) error {
	row := ordersdb.IdempotencyKey{
		KeyHash: key.KeyHash, Scope: key.Scope, ClientKey: key.ClientKey, RequestHash: key.RequestHash,
		OrderId:        spanner.NullString{StringVal: orderID, Valid: true},
		ResponseStatus: spanner.NullInt64{Int64: int64(status), Valid: true},
		ResponseBody:   spanner.NullJSON{Value: json.RawMessage(body), Valid: true},
	}
	row.SetCommitTimestamps()
	return txn.BufferWrite([]*spanner.Mutation{row.Insert()})
}

// insertOrder buffers a new order, its lines, its events and their timeline rows.
func insertOrder(ctx context.Context, txn *spanner.ReadWriteTransaction, o *order.Order) error {
	snap := o.Snapshot()
	row, err := stateRow(snap)
	if err != nil {
		return err
	}
	row.CustomerId, row.Currency, row.TotalMinor = snap.CustomerID, snap.Currency, snap.TotalMinor
	row.PaymentMethod = nullString(string(snap.Payment.Method))
	row.PaymentDetail = nullString(snap.Payment.Detail)
	row.Email = nullString(snap.Email)
	row.Language = nullString(string(snap.Language))
	row.SetCommitTimestamps()
	ms := []*spanner.Mutation{row.Insert()}
	for i, l := range snap.Lines {
		item := ordersdb.OrderItem{OrderId: snap.ID, LineNo: int64(i + 1), Sku: l.SKU, Quantity: l.Quantity, UnitPriceMinor: l.UnitPriceMinor}
		ms = append(ms, item.Insert())
	}
	if err := txn.BufferWrite(ms); err != nil {
		return err
	}
	return appendEvents(ctx, txn, o, 0)
}

// appendEvents appends o's emitted events to the outbox and the timeline (after seq).
func appendEvents(ctx context.Context, txn *spanner.ReadWriteTransaction, o *order.Order, seq int64) error {
	var (
		events []outboxlib.Event
		ms     []*spanner.Mutation
	)
	for _, em := range o.Emitted() {
		e, err := outboxlib.NewEvent(ctx, em.Type, order.AggregateType, o.ID(), em.Version, payload(o, em))
		if err != nil {
			return err
		}
		events = append(events, e)
		seq++
		ms = append(ms, timelineRow(o.ID(), seq, app.DirectionEmitted, e.Type, e.ID, e.AggregateType, e.AggregateVersion).Insert())
	}
	if err := outboxlib.Append(ctx, txn, events...); err != nil {
		return err
	}
	return txn.BufferWrite(ms)
}

func timelineRow(orderID string, seq int64, direction, typ, eventID, aggType string, version int64) *ordersdb.OrderTimeline {
	r := &ordersdb.OrderTimeline{
		OrderId: orderID, Seq: seq, Direction: direction, EventType: typ, EventId: eventID,
		AggregateType: aggType, AggregateVersion: version,
	}
	r.SetCommitTimestamps()
	return r
}

func nullString(s string) spanner.NullString { return spanner.NullString{StringVal: s, Valid: s != ""} }

// UpdateInTxn implements app.Repository. txn must be the *spanner.ReadWriteTransaction of the
// caller (the event consumer). It loads order id, applies change and, in the same transaction,
// writes the consumed event's timeline row and, if change changed the order, the order's new state
// (status, version, cancel reason, payment slip), its outbox events and their timeline rows.
// change may leave the order untouched (an event for an order that moved on): only the consumed
// row is written. An unknown order is order.ErrNotFound; change's error is returned unchanged and
// nothing is written.
func (s *Store) UpdateInTxn(ctx context.Context, t app.Txn, id string, consumed app.Consumed, change func(*order.Order) error) error {
	txn, ok := t.(*spanner.ReadWriteTransaction)
	if !ok || txn == nil {
		return fmt.Errorf("update order %s: the transaction is a %T, want a *spanner.ReadWriteTransaction", id, t)
	}
	o, seq, err := readOrderForUpdate(ctx, txn, id)
	if err != nil {
		return err
	}
	if err := change(o); err != nil {
		return err
	}
	ms := []*spanner.Mutation{timelineRow(id, seq, app.DirectionConsumed, consumed.Type, consumed.ID, consumed.AggregateType, consumed.AggregateVersion).Insert()}
	if err := txn.BufferWrite(ms); err != nil {
		return err
	}
	return saveChanged(ctx, txn, o, seq)
}

// saveChanged writes o's new state, if it changed, and appends its events after timeline row seq.
func saveChanged(ctx context.Context, txn *spanner.ReadWriteTransaction, o *order.Order, seq int64) error {
	if !o.Changed() {
		return nil
	}
	row, err := stateRow(o.Snapshot())
	if err != nil {
		return err
	}
	row.UpdatedAt = spanner.CommitTimestamp
	m, err := row.UpdateColumns(stateColumns...)
	if err != nil {
		return err
	}
	if err := txn.BufferWrite([]*spanner.Mutation{m}); err != nil {
		return err
	}
	return appendEvents(ctx, txn, o, seq)
}

// stateColumns are the columns of an order that change after it is placed.
var stateColumns = []string{
	ordersdb.OrderColStatus, ordersdb.OrderColVersion, ordersdb.OrderColCancelReason, ordersdb.OrderColPaymentInstructions,
	ordersdb.OrderColShipment, ordersdb.OrderColCompensations, ordersdb.OrderColAttentionReason, ordersdb.OrderColUpdatedAt,
}

// stateRow is the row of snap with its stateColumns filled in.
func stateRow(snap order.Snapshot) (ordersdb.Order, error) {
	row := ordersdb.Order{
		OrderId: snap.ID, Status: string(snap.Status), Version: snap.Version,
		CancelReason: nullString(snap.CancelReason), AttentionReason: nullString(snap.AttentionReason),
	}
	var err error
	if row.PaymentInstructions, err = instructionsColumn(snap.Instructions); err != nil {
		return row, err
	}
	if snap.Shipment != nil {
		row.Shipment = spanner.NullJSON{Value: snap.Shipment, Valid: true}
	}
	if len(snap.Compensations) > 0 {
		row.Compensations = spanner.NullJSON{Value: snap.Compensations, Valid: true}
	}
	return row, nil
}

// orderForUpdateSQL reads, in a read-write transaction, an order with its lines and the last
// sequence number of its timeline (0 for none): one round trip where three reads were.
var orderForUpdateSQL = "SELECT o." + strings.Join(ordersdb.OrderColumns(), ", o.") + `,
  ARRAY(SELECT AS STRUCT i.Sku, i.Quantity, i.UnitPriceMinor FROM OrderItems AS i
    WHERE i.OrderId = o.OrderId ORDER BY i.LineNo) AS OrderLines,
  (SELECT IFNULL(MAX(t.Seq), 0) FROM OrderTimeline AS t WHERE t.OrderId = o.OrderId) AS LastSeq
FROM Orders AS o
WHERE o.OrderId = @id`

// orderLine is a line as orderForUpdateSQL reads it.
type orderLine struct {
	Sku            string
	Quantity       int64
	UnitPriceMinor int64
}

// readOrderForUpdate reads an order and its lines in txn, and the timeline sequence number its
// next row takes.
func readOrderForUpdate(ctx context.Context, txn *spanner.ReadWriteTransaction, id string) (*order.Order, int64, error) {
	var (
		row     ordersdb.Order
		lines   []*orderLine
		lastSeq int64
		found   bool
	)
	err := txn.Query(ctx, spanner.Statement{SQL: orderForUpdateSQL, Params: map[string]any{"id": id}}).Do(func(r *spanner.Row) error {
		found = true
		if err := r.ToStructLenient(&row); err != nil {
			return err
		}
		if err := r.ColumnByName("OrderLines", &lines); err != nil {
			return err
		}
		return r.ColumnByName("LastSeq", &lastSeq)
	})
	switch {
	case err != nil:
		return nil, 0, err
	case !found:
		return nil, 0, fmt.Errorf("order %s: %w", id, order.ErrNotFound)
	}
	ls := make([]order.Line, len(lines))
	for i, l := range lines {
		ls[i] = order.Line{SKU: l.Sku, Quantity: l.Quantity, UnitPriceMinor: l.UnitPriceMinor}
	}
	o, err := restoreOrder(&row, ls)
	return o, lastSeq + 1, err
}

// readOrder reads an order and its lines.
func readOrder(ctx context.Context, r dao.Reader, id string) (*order.Order, error) {
	row, err := ordersdb.ReadOrder(ctx, r, id)
	if errors.Is(err, dao.ErrNotFound) {
		return nil, fmt.Errorf("order %s: %w", id, order.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	items, err := ordersdb.ReadOrderItemRows(ctx, r, spanner.Key{id}.AsPrefix())
	if err != nil {
		return nil, err
	}
	lines := make([]order.Line, len(items))
	for i, it := range items {
		lines[i] = order.Line{SKU: it.Sku, Quantity: it.Quantity, UnitPriceMinor: it.UnitPriceMinor}
	}
	return restoreOrder(row, lines)
}

// restoreOrder is the order of row with lines.
func restoreOrder(row *ordersdb.Order, lines []order.Line) (*order.Order, error) {
	id := row.OrderId
	instructions, err := instructionsFromColumn(row.PaymentInstructions)
	if err != nil {
		return nil, fmt.Errorf("order %s: %w", id, err)
	}
	var shipment *order.Shipment
	if err := jsonColumn(row.Shipment, &shipment); err != nil {
		return nil, fmt.Errorf("order %s: shipment: %w", id, err)
	}
	var comps []order.Compensation
	if err := jsonColumn(row.Compensations, &comps); err != nil {
		return nil, fmt.Errorf("order %s: compensations: %w", id, err)
	}
	// Orders placed before migration 0003 have NULL payment columns: the zero Payment, no e-mail;
	// before 0004, no language (Japanese) and no saga columns.
	return order.Restore(order.Snapshot{
		ID: row.OrderId, CustomerID: row.CustomerId, Status: order.Status(row.Status), Currency: row.Currency,
		Lines: lines, TotalMinor: row.TotalMinor, Version: row.Version, CancelReason: row.CancelReason.StringVal,
		Payment:      order.Payment{Method: order.PaymentMethod(row.PaymentMethod.StringVal), Detail: row.PaymentDetail.StringVal},
		Email:        row.Email.StringVal,
		Instructions: instructions,
		Language:     order.Language(row.Language.StringVal),
		Shipment:     shipment, Compensations: comps, AttentionReason: row.AttentionReason.StringVal,
	})
}

// jsonColumn decodes a JSON column into v (left as it is when the column is NULL).
func jsonColumn(c spanner.NullJSON, v any) error {
	if !c.Valid {
		return nil
	}
	b, err := json.Marshal(c.Value)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// Order implements app.Repository: one read-only transaction, so the order, its lines and its
// timeline are consistent.
func (s *Store) Order(ctx context.Context, id string) (*order.Order, []app.TimelineEntry, error) {
	txn := s.client.ReadOnlyTransaction()
	defer txn.Close()
	o, err := readOrder(ctx, txn, id)
	if err != nil {
		return nil, nil, err
	}
	rows, err := ordersdb.ReadOrderTimelineRows(ctx, txn, spanner.Key{id}.AsPrefix())
	if err != nil {
		return nil, nil, err
	}
	timeline := make([]app.TimelineEntry, len(rows))
	for i, r := range rows {
		timeline[i] = app.TimelineEntry{
			Seq: r.Seq, Direction: r.Direction, EventType: r.EventType, EventID: r.EventId,
			AggregateType: r.AggregateType, AggregateVersion: r.AggregateVersion, At: r.RecordedAt,
		}
	}
	return o, timeline, nil
}

// ActiveProducts implements app.Repository. The catalog is small (seeded); a full read is fine.
func (s *Store) ActiveProducts(ctx context.Context) ([]app.Product, error) {
	rows, err := ordersdb.ReadProductRows(ctx, s.client.Single(), spanner.AllKeys())
	if err != nil {
		return nil, err
	}
	var out []app.Product
	for _, r := range rows {
		if r.Active {
			out = append(out, product(r))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].SKU < out[j].SKU })
	return out, nil
}

func product(r *ordersdb.Product) app.Product {
	return app.Product{
		SKU: r.Sku, Name: r.Name, Description: r.Description.StringVal,
		PriceMinor: r.PriceMinor, Currency: r.Currency, Active: r.Active,
	}
}

// normalizeJSON returns body the way a JSON column gives it back (object keys sorted, no
// insignificant whitespace), so a first response and its replays are byte for byte the same.
func normalizeJSON(body []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("response body: %w", err)
	}
	return json.Marshal(v)
}
