package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/spanmart/spanmart/gen/dao/fulfillmentdb"
	"github.com/spanmart/spanmart/gen/dao/outboxdb"
	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/spannertest"
	"github.com/spanmart/spanmart/services/fulfillment/internal/events"
)

var env *spannertest.Env

func TestMain(m *testing.M) { os.Exit(spannertest.Main(m, &env)) }

// seed inserts Inventory rows: sku → {on hand, reserved}.
func seed(t *testing.T, client *spanner.Client, stock map[string][2]int64) {
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

// delivery returns an order event as the consumer would hand it over, with a fresh event id.
func delivery(t *testing.T, typ, orderID string, version int64, payload any) outboxlib.Delivery {
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

type line struct {
	SKU string
	Qty int64
}

func orderCreated(t *testing.T, orderID string, lines ...line) outboxlib.Delivery {
	t.Helper()
	var ls []map[string]any
	for _, l := range lines {
		ls = append(ls, map[string]any{"sku": l.SKU, "quantity": l.Qty, "unit_price_minor": 1200, "gift_wrap": false})
	}
	return delivery(t, events.TypeOrderCreated, orderID, 1, map[string]any{
		"order_id": orderID, "customer_id": "c-1", "currency": "JPY", "total_minor": 2400,
		"lines": ls, "placed_via": "web", // unknown fields are tolerated
	})
}

// apply runs h in a read-write transaction of its own, as the consumer does.
func apply(client *spanner.Client, h outboxlib.HandlerFunc, d outboxlib.Delivery) error {
	_, err := client.ReadWriteTransaction(context.Background(), func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		return h(ctx, txn, d)
	})
	return err
}

func mustApply(t *testing.T, client *spanner.Client, h outboxlib.HandlerFunc, d outboxlib.Delivery) {
	t.Helper()
	if err := apply(client, h, d); err != nil {
		t.Fatalf("%s: %v", d.Type, err)
	}
}

// stockRow is an Inventory row without its timestamp.
type stockRow struct {
	SKU              string
	OnHand, Reserved int64
}

func inventory(t *testing.T, client *spanner.Client) []stockRow {
	t.Helper()
	rows, err := fulfillmentdb.ReadInventoryRows(context.Background(), client.Single(), spanner.AllKeys())
	if err != nil {
		t.Fatal(err)
	}
	var out []stockRow
	for _, r := range rows {
		out = append(out, stockRow{r.Sku, r.OnHand, r.Reserved})
	}
	return out
}

// reservationRow is a Reservations row without its timestamps.
type reservationRow struct {
	OrderID, SKU string
	Qty          int64
	Status       string
}

func reservations(t *testing.T, client *spanner.Client) []reservationRow {
	t.Helper()
	rows, err := fulfillmentdb.ReadReservationRows(context.Background(), client.Single(), spanner.AllKeys())
	if err != nil {
		t.Fatal(err)
	}
	var out []reservationRow
	for _, r := range rows {
		out = append(out, reservationRow{r.OrderId, r.Sku, r.Quantity, r.Status})
	}
	return out
}

// decision is an OrderReservations row without its timestamps.
type decision struct {
	OrderID, Status string
	Version         int64
}

func decisions(t *testing.T, client *spanner.Client) []decision {
	t.Helper()
	rows, err := fulfillmentdb.ReadOrderReservationRows(context.Background(), client.Single(), spanner.AllKeys())
	if err != nil {
		t.Fatal(err)
	}
	var out []decision
	for _, r := range rows {
		out = append(out, decision{r.OrderId, r.Status, r.Version})
	}
	return out
}

// outboxRow is what a consumer of fulfillment's events sees of an outbox row.
type outboxRow struct {
	Type, AggregateType, AggregateID string
	Version                          int64
	Payload                          any
	Pending                          bool
}

// outbox returns the outbox rows ordered by aggregate id, version and type.
func outbox(t *testing.T, client *spanner.Client) []outboxRow {
	t.Helper()
	rows, err := outboxdb.ReadOutboxEventRows(context.Background(), client.Single(), spanner.AllKeys())
	if err != nil {
		t.Fatal(err)
	}
	var out []outboxRow
	for _, r := range rows {
		var payload any
		b, _ := json.Marshal(r.Payload.Value)
		if err := json.Unmarshal(b, &payload); err != nil {
			t.Fatal(err)
		}
		if _, err := uuid.Parse(r.EventId); err != nil || r.SchemaVersion != 1 {
			t.Errorf("outbox row %s: schema version %d (%v)", r.EventId, r.SchemaVersion, err)
		}
		out = append(out, outboxRow{r.EventType, r.AggregateType, r.AggregateId, r.AggregateVersion, payload, r.PendingShard.Valid})
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

// js decodes a JSON literal, the way payloads read back from the outbox are compared.
func js(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func check[T any](t *testing.T, what string, want, got T) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", what, diff)
	}
}

func TestOrderCreatedReserves(t *testing.T) {
	client, _ := env.NewDatabase(t, dbschema.Fulfillment)
	seed(t, client, map[string][2]int64{"A1": {5, 0}, "B2": {1, 0}})

	mustApply(t, client, events.OrderCreated, orderCreated(t, "o-1", line{"A1", 2}))

	check(t, "inventory", []stockRow{{"A1", 5, 2}, {"B2", 1, 0}}, inventory(t, client))
	check(t, "reservations", []reservationRow{{"o-1", "A1", 2, "HELD"}}, reservations(t, client))
	check(t, "decisions", []decision{{"o-1", "HELD", 1}}, decisions(t, client))
	check(t, "outbox", []outboxRow{{
		Type: "inventory.reserved", AggregateType: "reservation", AggregateID: "o-1", Version: 1, Pending: true,
		Payload: js(t, `{"order_id":"o-1","lines":[{"sku":"A1","quantity":2}]}`),
	}}, outbox(t, client))
}

func TestOrderCreatedRejectsWhenShort(t *testing.T) {
	client, _ := env.NewDatabase(t, dbschema.Fulfillment)
	seed(t, client, map[string][2]int64{"A1": {5, 0}, "B2": {3, 0}})
	before, err := fulfillmentdb.ReadInventory(context.Background(), client.Single(), "A1")
	if err != nil {
		t.Fatal(err)
	}

	mustApply(t, client, events.OrderCreated, orderCreated(t, "o-1", line{"B2", 1}, line{"A1", 10}, line{"ZZ", 1}))

	check(t, "inventory", []stockRow{{"A1", 5, 0}, {"B2", 3, 0}}, inventory(t, client))
	after, err := fulfillmentdb.ReadInventory(context.Background(), client.Single(), "A1")
	if err != nil {
		t.Fatal(err)
	}
	if !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Errorf("A1 UpdatedAt changed from %v to %v: stock was written", before.UpdatedAt, after.UpdatedAt)
	}
	check(t, "reservations", nil, reservations(t, client))
	check(t, "decisions", []decision{{"o-1", "REJECTED", 1}}, decisions(t, client))
	check(t, "outbox", []outboxRow{{
		Type: "inventory.rejected", AggregateType: "reservation", AggregateID: "o-1", Version: 1, Pending: true,
		Payload: js(t, `{"order_id":"o-1","reason":"out_of_stock","short":[
			{"sku":"A1","requested":10,"available":5},{"sku":"ZZ","requested":1,"available":0}]}`),
	}}, outbox(t, client))
}

func TestOrderCreatedReplayWithNewEventID(t *testing.T) {
	for _, tt := range []struct {
		name   string
		onHand int64
		want   string
	}{
		{"reserved once", 5, "HELD"},
		// Stock arriving between the two deliveries must not turn a rejection into a reservation.
		{"rejected once", 1, "REJECTED"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			client, _ := env.NewDatabase(t, dbschema.Fulfillment)
			seed(t, client, map[string][2]int64{"A1": {tt.onHand, 0}})
			mustApply(t, client, events.OrderCreated, orderCreated(t, "o-1", line{"A1", 2}))
			if _, err := client.Apply(context.Background(), []*spanner.Mutation{
				spanner.Update(fulfillmentdb.InventoryTable, []string{"Sku", "OnHand"}, []any{"A1", int64(10)}),
			}); err != nil {
				t.Fatal(err)
			}
			again := orderCreated(t, "o-1", line{"A1", 2}) // same order, new event id
			mustApply(t, client, events.OrderCreated, again)

			wantReserved := map[string]int64{"HELD": 2, "REJECTED": 0}[tt.want]
			check(t, "inventory", []stockRow{{"A1", 10, wantReserved}}, inventory(t, client))
			check(t, "decisions", []decision{{"o-1", tt.want, 1}}, decisions(t, client))
			if got := outbox(t, client); len(got) != 1 {
				t.Errorf("outbox has %d rows, want 1: %+v", len(got), got)
			}
		})
	}
}

// TestOrderCreatedConcurrent runs orders competing for the last units in concurrent read-write
// transactions: the Inventory CHECK must hold and exactly as many orders as there are units win.
func TestOrderCreatedConcurrent(t *testing.T) {
	client, _ := env.NewDatabase(t, dbschema.Fulfillment)
	seed(t, client, map[string][2]int64{"A1": {10, 7}, "B2": {100, 0}})

	const orders = 10
	errs := make([]error, orders)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range orders {
		d := orderCreated(t, fmt.Sprintf("o-%02d", i), line{"B2", 1}, line{"A1", 1})
		wg.Go(func() {
			<-start
			errs[i] = apply(client, events.OrderCreated, d)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("order %d: %v", i, err)
		}
	}

	check(t, "inventory", []stockRow{{"A1", 10, 10}, {"B2", 100, 3}}, inventory(t, client))
	count := map[string]int{}
	for _, d := range decisions(t, client) {
		count[d.Status]++
	}
	check(t, "decisions by status", map[string]int{"HELD": 3, "REJECTED": 7}, count)
	if got := len(reservations(t, client)); got != 2*3 {
		t.Errorf("%d reservation rows, want 6", got)
	}
	types := map[string]int{}
	for _, e := range outbox(t, client) {
		types[e.Type]++
	}
	check(t, "events by type", map[string]int{"inventory.reserved": 3, "inventory.rejected": 7}, types)
}

func TestOrderCancelled(t *testing.T) {
	cancelled := func(t *testing.T, orderID string) outboxlib.Delivery {
		return delivery(t, events.TypeOrderCancelled, orderID, 2, map[string]any{"order_id": orderID, "reason": "customer"})
	}
	t.Run("releases held stock once", func(t *testing.T) {
		client, _ := env.NewDatabase(t, dbschema.Fulfillment)
		seed(t, client, map[string][2]int64{"A1": {5, 1}, "B2": {2, 0}})
		mustApply(t, client, events.OrderCreated, orderCreated(t, "o-1", line{"A1", 2}, line{"B2", 2}))
		mustApply(t, client, events.OrderCancelled, cancelled(t, "o-1"))
		mustApply(t, client, events.OrderCancelled, cancelled(t, "o-1")) // replay, new event id

		check(t, "inventory", []stockRow{{"A1", 5, 1}, {"B2", 2, 0}}, inventory(t, client))
		check(t, "reservations", []reservationRow{{"o-1", "A1", 2, "RELEASED"}, {"o-1", "B2", 2, "RELEASED"}}, reservations(t, client))
		check(t, "decisions", []decision{{"o-1", "RELEASED", 2}}, decisions(t, client))
		got := outbox(t, client)
		if len(got) != 2 {
			t.Fatalf("outbox = %+v, want reserved and released", got)
		}
		check(t, "released event", outboxRow{
			Type: "inventory.released", AggregateType: "reservation", AggregateID: "o-1", Version: 2, Pending: true,
			Payload: js(t, `{"order_id":"o-1","lines":[{"sku":"A1","quantity":2},{"sku":"B2","quantity":2}]}`),
		}, got[1])
	})
	t.Run("rejected order is released with no lines", func(t *testing.T) {
		client, _ := env.NewDatabase(t, dbschema.Fulfillment)
		seed(t, client, map[string][2]int64{"A1": {1, 0}})
		mustApply(t, client, events.OrderCreated, orderCreated(t, "o-1", line{"A1", 2}))
		mustApply(t, client, events.OrderCancelled, cancelled(t, "o-1"))
		mustApply(t, client, events.OrderCancelled, cancelled(t, "o-1"))

		check(t, "inventory", []stockRow{{"A1", 1, 0}}, inventory(t, client))
		check(t, "decisions", []decision{{"o-1", "REJECTED", 2}}, decisions(t, client))
		got := outbox(t, client)
		if len(got) != 2 {
			t.Fatalf("outbox = %+v, want rejected and released", got)
		}
		check(t, "released event", outboxRow{
			Type: "inventory.released", AggregateType: "reservation", AggregateID: "o-1", Version: 2, Pending: true,
			Payload: js(t, `{"order_id":"o-1","lines":[]}`),
		}, got[1])
	})
	t.Run("before order.created is early", func(t *testing.T) {
		client, _ := env.NewDatabase(t, dbschema.Fulfillment)
		err := apply(client, events.OrderCancelled, cancelled(t, "o-1"))
		if !errors.Is(err, outboxlib.ErrEarly) || outboxlib.IsPermanent(err) {
			t.Errorf("order.cancelled before order.created = %v, want ErrEarly", err)
		}
		check(t, "outbox", nil, outbox(t, client))
	})
}

func TestPermanentErrors(t *testing.T) {
	client, _ := env.NewDatabase(t, dbschema.Fulfillment)
	seed(t, client, map[string][2]int64{"A1": {5, 0}})
	raw := func(typ, subject, body string) outboxlib.Delivery {
		d := delivery(t, typ, subject, 1, nil)
		d.Payload = json.RawMessage(body)
		return d
	}
	for name, d := range map[string]outboxlib.Delivery{
		"not json":               raw(events.TypeOrderCreated, "o-1", `{`),
		"no lines":               raw(events.TypeOrderCreated, "o-1", `{"order_id":"o-1","lines":[]}`),
		"zero quantity":          raw(events.TypeOrderCreated, "o-1", `{"order_id":"o-1","lines":[{"sku":"A1","quantity":0}]}`),
		"order id not subject":   raw(events.TypeOrderCreated, "o-1", `{"order_id":"o-2","lines":[{"sku":"A1","quantity":1}]}`),
		"cancelled, not json":    raw(events.TypeOrderCancelled, "o-1", `[`),
		"quantity is a string":   raw(events.TypeOrderCreated, "o-1", `{"order_id":"o-1","lines":[{"sku":"A1","quantity":"1"}]}`),
		"order id is too long":   raw(events.TypeOrderCreated, "o-0123456789012345678901234567890123456789", `{"lines":[{"sku":"A1","quantity":1}]}`),
		"cancelled, no order id": raw(events.TypeOrderCancelled, "", `{}`),
	} {
		t.Run(name, func(t *testing.T) {
			h := events.OrderCreated
			if d.Type == events.TypeOrderCancelled {
				h = events.OrderCancelled
			}
			if err := apply(client, h, d); !outboxlib.IsPermanent(err) {
				t.Errorf("handler = %v, want a permanent error", err)
			}
		})
	}
	check(t, "inventory", []stockRow{{"A1", 5, 0}}, inventory(t, client))
	check(t, "outbox", nil, outbox(t, client))
}
