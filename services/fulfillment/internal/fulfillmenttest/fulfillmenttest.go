// Package fulfillmenttest helps the fulfillment service's tests: seeded stock, order events as the
// consumer hands them over, and comparable views of every table the service writes, so tests
// assert the database state rather than only what a call returned.
package fulfillmenttest

import (
	"context"
	"encoding/json"
	"sort"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spanmart/spanmart/gen/dao/fulfillmentdb"
	"github.com/spanmart/spanmart/gen/dao/outboxdb"
	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/services/fulfillment/internal/app"
	"github.com/spanmart/spanmart/services/fulfillment/internal/inventory"
	"github.com/spanmart/spanmart/services/fulfillment/internal/shipment"
)

// Seed inserts Inventory rows: sku → {on hand, reserved}.
func Seed(t testing.TB, client *spanner.Client, stock map[string][2]int64) {
	t.Helper()
	var ms []*spanner.Mutation
	for sku, s := range stock {
		row := fulfillmentdb.Inventory{Sku: sku, OnHand: s[0], Reserved: s[1]}
		row.SetCommitTimestamps()
		ms = append(ms, row.Insert())
	}
	if _, err := client.Apply(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
}

// Delivery returns an order event as the consumer would hand it over, with a fresh event id.
func Delivery(t testing.TB, typ, orderID string, version int64, payload any) outboxlib.Delivery {
	t.Helper()
	body, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	return outboxlib.Delivery{Event: outboxlib.Event{
		ID: uuid.NewString(), Type: typ, Source: "//spanmart/orders", AggregateType: "order",
		AggregateID: orderID, AggregateVersion: version, SchemaVersion: 1,
		OccurredAt: time.Now().UTC(), Payload: body,
	}}
}

// Line is a line of an order event.
type Line struct {
	SKU string
	Qty int64
}

// OrderCreated returns order.created (version 1) for lines, with fields fulfillment does not read.
func OrderCreated(t testing.TB, orderID string, lines ...Line) outboxlib.Delivery {
	t.Helper()
	var ls []map[string]any
	for _, l := range lines {
		ls = append(ls, map[string]any{"sku": l.SKU, "quantity": l.Qty, "unit_price_minor": 1200, "gift_wrap": false})
	}
	return Delivery(t, "order.created", orderID, 1, map[string]any{
		"order_id": orderID, "customer_id": "c-1", "currency": "JPY", "total_minor": 2400,
		"lines": ls, "placed_via": "web", // unknown fields are tolerated
	})
}

// OrderConfirmed returns order.confirmed at version.
func OrderConfirmed(t testing.TB, orderID string, version int64) outboxlib.Delivery {
	t.Helper()
	return Delivery(t, "order.confirmed", orderID, version, map[string]any{"order_id": orderID, "status": "CONFIRMED", "lines": []any{}})
}

// OrderCancelled returns order.cancelled at version.
func OrderCancelled(t testing.TB, orderID string, version int64) outboxlib.Delivery {
	t.Helper()
	return Delivery(t, "order.cancelled", orderID, version, map[string]any{"order_id": orderID, "reason": "customer_request"})
}

// Apply runs h in a read-write transaction of its own, as the consumer does.
func Apply(client *spanner.Client, h outboxlib.HandlerFunc, d outboxlib.Delivery) error {
	_, err := client.ReadWriteTransaction(context.Background(), func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		return h(ctx, txn, d)
	})
	return err
}

// MustApply is Apply that fails the test on an error.
func MustApply(t testing.TB, client *spanner.Client, h outboxlib.HandlerFunc, d outboxlib.Delivery) {
	t.Helper()
	if err := Apply(client, h, d); err != nil {
		t.Fatalf("%s: %v", d.Type, err)
	}
}

// StockRow is an Inventory row without its timestamp.
type StockRow struct {
	SKU              string
	OnHand, Reserved int64
}

// Inventory returns every Inventory row, by SKU.
func Inventory(t testing.TB, client *spanner.Client) []StockRow {
	t.Helper()
	rows, err := fulfillmentdb.ReadInventoryRows(context.Background(), client.Single(), spanner.AllKeys())
	if err != nil {
		t.Fatal(err)
	}
	var out []StockRow
	for _, r := range rows {
		out = append(out, StockRow{r.Sku, r.OnHand, r.Reserved})
	}
	return out
}

// ReservationRow is a Reservations row without its timestamps.
type ReservationRow struct {
	OrderID, SKU string
	Qty          int64
	Status       string
}

// Reservations returns every Reservations row, by order and SKU.
func Reservations(t testing.TB, client *spanner.Client) []ReservationRow {
	t.Helper()
	rows, err := fulfillmentdb.ReadReservationRows(context.Background(), client.Single(), spanner.AllKeys())
	if err != nil {
		t.Fatal(err)
	}
	var out []ReservationRow
	for _, r := range rows {
		out = append(out, ReservationRow{r.OrderId, r.Sku, r.Quantity, r.Status})
	}
	return out
}

// Decision is an OrderReservations row without its timestamps.
type Decision struct {
	OrderID, Status string
	Version         int64
}

// Decisions returns every OrderReservations row, by order.
func Decisions(t testing.TB, client *spanner.Client) []Decision {
	t.Helper()
	rows, err := fulfillmentdb.ReadOrderReservationRows(context.Background(), client.Single(), spanner.AllKeys())
	if err != nil {
		t.Fatal(err)
	}
	var out []Decision
	for _, r := range rows {
		out = append(out, Decision{r.OrderId, r.Status, r.Version})
	}
	return out
}

// ShipmentRow is a Shipments row without its timestamps; Shipped says whether ShippedAt is set.
type ShipmentRow struct {
	ID, OrderID, Status                    string
	Carrier, TrackingNumber, FailureReason string
	ShippedBy, FailedBy                    string
	Version                                int64
	Shipped                                bool
}

// Shipments returns every Shipments row, by shipment id.
func Shipments(t testing.TB, client *spanner.Client) []ShipmentRow {
	t.Helper()
	rows, err := fulfillmentdb.ReadShipmentRows(context.Background(), client.Single(), spanner.AllKeys())
	if err != nil {
		t.Fatal(err)
	}
	var out []ShipmentRow
	for _, r := range rows {
		out = append(out, ShipmentRow{
			ID: r.ShipmentId, OrderID: r.OrderId, Status: r.Status, Carrier: r.Carrier.StringVal,
			TrackingNumber: r.TrackingNumber.StringVal, FailureReason: r.FailureReason.StringVal,
			ShippedBy: r.ShippedBy.StringVal, FailedBy: r.FailedBy.StringVal, Version: r.Version, Shipped: r.ShippedAt.Valid,
		})
	}
	return out
}

// OutboxRow is what a consumer of fulfillment's events sees of an outbox row.
type OutboxRow struct {
	Type, AggregateType, AggregateID string
	Version                          int64
	Payload                          any
	Pending                          bool
}

// Outbox returns the outbox rows ordered by aggregate id, version and type. Every row must have a
// UUID event id and schema version 1.
func Outbox(t testing.TB, client *spanner.Client) []OutboxRow {
	t.Helper()
	rows, err := outboxdb.ReadOutboxEventRows(context.Background(), client.Single(), spanner.AllKeys())
	if err != nil {
		t.Fatal(err)
	}
	var out []OutboxRow
	for _, r := range rows {
		var payload any
		b, _ := json.Marshal(r.Payload.Value)
		if err := json.Unmarshal(b, &payload); err != nil {
			t.Fatal(err)
		}
		if _, err := uuid.Parse(r.EventId); err != nil || r.SchemaVersion != 1 {
			t.Errorf("outbox row %s: schema version %d (%v)", r.EventId, r.SchemaVersion, err)
		}
		out = append(out, OutboxRow{r.EventType, r.AggregateType, r.AggregateId, r.AggregateVersion, payload, r.PendingShard.Valid})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.AggregateID != b.AggregateID {
			return a.AggregateID < b.AggregateID
		}
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		return a.Type < b.Type
	})
	return out
}

// OutboxOf returns the outbox rows of one event type, in Outbox's order.
func OutboxOf(t testing.TB, client *spanner.Client, typ string) []OutboxRow {
	t.Helper()
	var out []OutboxRow
	for _, r := range Outbox(t, client) {
		if r.Type == typ {
			out = append(out, r)
		}
	}
	return out
}

// OutboxTypes counts the outbox rows by event type.
func OutboxTypes(t testing.TB, client *spanner.Client) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, r := range Outbox(t, client) {
		out[r.Type]++
	}
	return out
}

// JS decodes a JSON literal, the way payloads read back from the outbox are compared.
func JS(t testing.TB, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// Check reports a difference between want and got.
func Check[T any](t testing.TB, what string, want, got T) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", what, diff)
	}
}

// Stock is an Inventory row.
func Stock(sku string, onHand, reserved int64) StockRow {
	return StockRow{SKU: sku, OnHand: onHand, Reserved: reserved}
}

// Held is a Reservations row (in any status).
func Held(orderID, sku string, qty int64, status string) ReservationRow {
	return ReservationRow{OrderID: orderID, SKU: sku, Qty: qty, Status: status}
}

// Decided is an OrderReservations row.
func Decided(orderID, status string, version int64) Decision {
	return Decision{OrderID: orderID, Status: status, Version: version}
}

// Counts returns the values of counter vector name in reg by its one label's value.
func Counts(t testing.TB, reg prometheus.Gatherer, name string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != 1 {
				t.Fatalf("%s has labels %v, want one", name, m.GetLabel())
			}
			out[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	return out
}

// Run runs an event use case in a read-write transaction of its own, as the consumer would, and
// returns its outcome.
func Run(t testing.TB, client *spanner.Client, fn func(ctx context.Context, txn app.Txn) (app.Outcome, error)) app.Outcome {
	t.Helper()
	var out app.Outcome
	if _, err := client.ReadWriteTransaction(context.Background(), func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		var err error
		out, err = fn(ctx, txn)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// Confirm reserves lines for an order and creates its shipment, as order.created and
// order.confirmed would (the outcomes counted once committed, as the consumer does), and returns
// the shipment's id; it fails the test if there is none.
func Confirm(t testing.TB, client *spanner.Client, svc *app.Service, orderID string, lines ...inventory.Line) string {
	t.Helper()
	svc.Committed(Run(t, client, func(ctx context.Context, txn app.Txn) (app.Outcome, error) {
		return svc.Reserve(ctx, txn, orderID, lines)
	}))
	out := Run(t, client, func(ctx context.Context, txn app.Txn) (app.Outcome, error) {
		return svc.CreateShipment(ctx, txn, orderID)
	})
	if !out.Applied {
		t.Fatalf("no shipment for %s: %s", orderID, out.Note)
	}
	svc.Committed(out)
	return shipment.IDFor(orderID)
}
