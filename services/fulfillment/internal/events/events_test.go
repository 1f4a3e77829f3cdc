package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"cloud.google.com/go/spanner"

	"github.com/spanmart/spanmart/gen/dao/fulfillmentdb"
	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/spannertest"
	"github.com/spanmart/spanmart/services/fulfillment/internal/app"
	"github.com/spanmart/spanmart/services/fulfillment/internal/events"
	ft "github.com/spanmart/spanmart/services/fulfillment/internal/fulfillmenttest"
	"github.com/spanmart/spanmart/services/fulfillment/internal/shipment"
	"github.com/spanmart/spanmart/services/fulfillment/internal/store"
)

var env *spannertest.Env

func TestMain(m *testing.M) { os.Exit(spannertest.Main(m, &env)) }

// fixture is a fresh database with stock, the service over it and its handlers.
type fixture struct {
	client   *spanner.Client
	svc      *app.Service
	handlers map[string]outboxlib.HandlerFunc
}

func newFixture(t *testing.T, stock map[string][2]int64) *fixture {
	t.Helper()
	client, _ := env.NewDatabase(t, dbschema.Fulfillment)
	ft.Seed(t, client, stock)
	svc := app.New(store.New(client), nil, nil)
	return &fixture{client: client, svc: svc, handlers: events.Handlers(svc)}
}

// apply runs the handler of d's type in a transaction of its own, as the consumer does.
func (f *fixture) apply(d outboxlib.Delivery) error {
	return ft.Apply(f.client, f.handlers[d.Type], d)
}

func (f *fixture) mustApply(t *testing.T, d outboxlib.Delivery) {
	t.Helper()
	ft.MustApply(t, f.client, f.handlers[d.Type], d)
}

func TestOrderCreatedReserves(t *testing.T) {
	f := newFixture(t, map[string][2]int64{"A1": {5, 0}, "B2": {1, 0}})

	f.mustApply(t, ft.OrderCreated(t, "o-1", ft.Line{SKU: "A1", Qty: 2}))

	ft.Check(t, "inventory", []ft.StockRow{ft.Stock("A1", 5, 2), ft.Stock("B2", 1, 0)}, ft.Inventory(t, f.client))
	ft.Check(t, "reservations", []ft.ReservationRow{ft.Held("o-1", "A1", 2, "HELD")}, ft.Reservations(t, f.client))
	ft.Check(t, "decisions", []ft.Decision{ft.Decided("o-1", "HELD", 1)}, ft.Decisions(t, f.client))
	ft.Check(t, "outbox", []ft.OutboxRow{{
		Type: "inventory.reserved", AggregateType: "reservation", AggregateID: "o-1", Version: 1, Pending: true,
		Payload: ft.JS(t, `{"order_id":"o-1","lines":[{"sku":"A1","quantity":2}]}`),
	}}, ft.Outbox(t, f.client))
}

func TestOrderCreatedRejectsWhenShort(t *testing.T) {
	f := newFixture(t, map[string][2]int64{"A1": {5, 0}, "B2": {3, 0}})
	before, err := fulfillmentdb.ReadInventory(context.Background(), f.client.Single(), "A1")
	if err != nil {
		t.Fatal(err)
	}

	f.mustApply(t, ft.OrderCreated(t, "o-1", ft.Line{SKU: "B2", Qty: 1}, ft.Line{SKU: "A1", Qty: 10}, ft.Line{SKU: "ZZ", Qty: 1}))

	ft.Check(t, "inventory", []ft.StockRow{ft.Stock("A1", 5, 0), ft.Stock("B2", 3, 0)}, ft.Inventory(t, f.client))
	after, err := fulfillmentdb.ReadInventory(context.Background(), f.client.Single(), "A1")
	if err != nil {
		t.Fatal(err)
	}
	if !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Errorf("A1 UpdatedAt changed from %v to %v: stock was written", before.UpdatedAt, after.UpdatedAt)
	}
	ft.Check(t, "reservations", nil, ft.Reservations(t, f.client))
	ft.Check(t, "decisions", []ft.Decision{ft.Decided("o-1", "REJECTED", 1)}, ft.Decisions(t, f.client))
	ft.Check(t, "outbox", []ft.OutboxRow{{
		Type: "inventory.rejected", AggregateType: "reservation", AggregateID: "o-1", Version: 1, Pending: true,
		Payload: ft.JS(t, `{"order_id":"o-1","reason":"out_of_stock","short":[
			{"sku":"A1","requested":10,"available":5},{"sku":"ZZ","requested":1,"available":0}]}`),
	}}, ft.Outbox(t, f.client))
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
			f := newFixture(t, map[string][2]int64{"A1": {tt.onHand, 0}})
			f.mustApply(t, ft.OrderCreated(t, "o-1", ft.Line{SKU: "A1", Qty: 2}))
			if _, err := f.client.Apply(context.Background(), []*spanner.Mutation{
				spanner.Update(fulfillmentdb.InventoryTable, []string{"Sku", "OnHand"}, []any{"A1", int64(10)}),
			}); err != nil {
				t.Fatal(err)
			}
			f.mustApply(t, ft.OrderCreated(t, "o-1", ft.Line{SKU: "A1", Qty: 2})) // same order, new event id

			wantReserved := map[string]int64{"HELD": 2, "REJECTED": 0}[tt.want]
			ft.Check(t, "inventory", []ft.StockRow{ft.Stock("A1", 10, wantReserved)}, ft.Inventory(t, f.client))
			ft.Check(t, "decisions", []ft.Decision{ft.Decided("o-1", tt.want, 1)}, ft.Decisions(t, f.client))
			if got := ft.Outbox(t, f.client); len(got) != 1 {
				t.Errorf("outbox has %d rows, want 1: %+v", len(got), got)
			}
		})
	}
}

// TestOrderCreatedConcurrent runs orders competing for the last units in concurrent read-write
// transactions: the Inventory CHECK must hold and exactly as many orders as there are units win.
func TestOrderCreatedConcurrent(t *testing.T) {
	f := newFixture(t, map[string][2]int64{"A1": {10, 7}, "B2": {100, 0}})

	const orders = 10
	errs := make([]error, orders)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range orders {
		d := ft.OrderCreated(t, fmt.Sprintf("o-%02d", i), ft.Line{SKU: "B2", Qty: 1}, ft.Line{SKU: "A1", Qty: 1})
		wg.Go(func() {
			<-start
			errs[i] = f.apply(d)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("order %d: %v", i, err)
		}
	}

	ft.Check(t, "inventory", []ft.StockRow{ft.Stock("A1", 10, 10), ft.Stock("B2", 100, 3)}, ft.Inventory(t, f.client))
	count := map[string]int{}
	for _, d := range ft.Decisions(t, f.client) {
		count[d.Status]++
	}
	ft.Check(t, "decisions by status", map[string]int{"HELD": 3, "REJECTED": 7}, count)
	if got := len(ft.Reservations(t, f.client)); got != 2*3 {
		t.Errorf("%d reservation rows, want 6", got)
	}
	ft.Check(t, "events by type", map[string]int{"inventory.reserved": 3, "inventory.rejected": 7}, ft.OutboxTypes(t, f.client))
}

func TestOrderCancelled(t *testing.T) {
	t.Run("releases held stock once", func(t *testing.T) {
		f := newFixture(t, map[string][2]int64{"A1": {5, 1}, "B2": {2, 0}})
		f.mustApply(t, ft.OrderCreated(t, "o-1", ft.Line{SKU: "A1", Qty: 2}, ft.Line{SKU: "B2", Qty: 2}))
		f.mustApply(t, ft.OrderCancelled(t, "o-1", 2))
		f.mustApply(t, ft.OrderCancelled(t, "o-1", 2)) // replay, new event id

		ft.Check(t, "inventory", []ft.StockRow{ft.Stock("A1", 5, 1), ft.Stock("B2", 2, 0)}, ft.Inventory(t, f.client))
		ft.Check(t, "reservations", []ft.ReservationRow{ft.Held("o-1", "A1", 2, "RELEASED"), ft.Held("o-1", "B2", 2, "RELEASED")}, ft.Reservations(t, f.client))
		ft.Check(t, "decisions", []ft.Decision{ft.Decided("o-1", "RELEASED", 2)}, ft.Decisions(t, f.client))
		got := ft.Outbox(t, f.client)
		if len(got) != 2 {
			t.Fatalf("outbox = %+v, want reserved and released", got)
		}
		ft.Check(t, "released event", ft.OutboxRow{
			Type: "inventory.released", AggregateType: "reservation", AggregateID: "o-1", Version: 2, Pending: true,
			Payload: ft.JS(t, `{"order_id":"o-1","lines":[{"sku":"A1","quantity":2},{"sku":"B2","quantity":2}]}`),
		}, got[1])
	})
	t.Run("rejected order is released with no lines", func(t *testing.T) {
		f := newFixture(t, map[string][2]int64{"A1": {1, 0}})
		f.mustApply(t, ft.OrderCreated(t, "o-1", ft.Line{SKU: "A1", Qty: 2}))
		f.mustApply(t, ft.OrderCancelled(t, "o-1", 2))
		f.mustApply(t, ft.OrderCancelled(t, "o-1", 2))

		ft.Check(t, "inventory", []ft.StockRow{ft.Stock("A1", 1, 0)}, ft.Inventory(t, f.client))
		ft.Check(t, "decisions", []ft.Decision{ft.Decided("o-1", "REJECTED", 2)}, ft.Decisions(t, f.client))
		got := ft.Outbox(t, f.client)
		if len(got) != 2 {
			t.Fatalf("outbox = %+v, want rejected and released", got)
		}
		ft.Check(t, "released event", ft.OutboxRow{
			Type: "inventory.released", AggregateType: "reservation", AggregateID: "o-1", Version: 2, Pending: true,
			Payload: ft.JS(t, `{"order_id":"o-1","lines":[]}`),
		}, got[1])
	})
	t.Run("before order.created is early", func(t *testing.T) {
		f := newFixture(t, nil)
		err := f.apply(ft.OrderCancelled(t, "o-1", 2))
		if !errors.Is(err, outboxlib.ErrEarly) || outboxlib.IsPermanent(err) {
			t.Errorf("order.cancelled before order.created = %v, want ErrEarly", err)
		}
		ft.Check(t, "outbox", nil, ft.Outbox(t, f.client))
	})
	t.Run("cancels a pending shipment with the release", func(t *testing.T) {
		f := newFixture(t, map[string][2]int64{"A1": {5, 0}})
		f.mustApply(t, ft.OrderCreated(t, "o-1", ft.Line{SKU: "A1", Qty: 2}))
		f.mustApply(t, ft.OrderConfirmed(t, "o-1", 3))
		f.mustApply(t, ft.OrderCancelled(t, "o-1", 4))
		f.mustApply(t, ft.OrderCancelled(t, "o-1", 4)) // replay, new event id

		id := shipment.IDFor("o-1")
		ft.Check(t, "shipments", []ft.ShipmentRow{{ID: id, OrderID: "o-1", Status: "CANCELLED", Version: 2}}, ft.Shipments(t, f.client))
		ft.Check(t, "inventory", []ft.StockRow{ft.Stock("A1", 5, 0)}, ft.Inventory(t, f.client))
		ft.Check(t, "decisions", []ft.Decision{ft.Decided("o-1", "RELEASED", 2)}, ft.Decisions(t, f.client))
		ft.Check(t, "events by type", map[string]int{"inventory.reserved": 1, "inventory.released": 1}, ft.OutboxTypes(t, f.client))
	})
	t.Run("after shipping, emits inventory.release_failed once", func(t *testing.T) {
		f := newFixture(t, map[string][2]int64{"A1": {5, 0}})
		f.mustApply(t, ft.OrderCreated(t, "o-1", ft.Line{SKU: "A1", Qty: 2}))
		f.mustApply(t, ft.OrderConfirmed(t, "o-1", 3))
		id := shipment.IDFor("o-1")
		if _, _, err := f.svc.Ship(context.Background(), id, "yamato", "T-1", "warehouse@spanmart-test.iam.gserviceaccount.com"); err != nil {
			t.Fatal(err)
		}
		f.mustApply(t, ft.OrderCancelled(t, "o-1", 4))
		f.mustApply(t, ft.OrderCancelled(t, "o-1", 4)) // replay, new event id

		ft.Check(t, "inventory: shipped, nothing released", []ft.StockRow{ft.Stock("A1", 3, 0)}, ft.Inventory(t, f.client))
		ft.Check(t, "reservations", []ft.ReservationRow{ft.Held("o-1", "A1", 2, "SHIPPED")}, ft.Reservations(t, f.client))
		ft.Check(t, "decisions", []ft.Decision{ft.Decided("o-1", "SHIPPED", 2)}, ft.Decisions(t, f.client))
		ft.Check(t, "shipments", []ft.ShipmentRow{{ID: id, OrderID: "o-1", Status: "SHIPPED", Carrier: "yamato", TrackingNumber: "T-1", ShippedBy: "warehouse@spanmart-test.iam.gserviceaccount.com", Version: 2, Shipped: true}},
			ft.Shipments(t, f.client))
		ft.Check(t, "release_failed event", []ft.OutboxRow{{
			Type: "inventory.release_failed", AggregateType: "reservation", AggregateID: "o-1", Version: 2, Pending: true,
			Payload: ft.JS(t, `{"order_id":"o-1","reason":"already_shipped"}`),
		}}, ft.OutboxOf(t, f.client, "inventory.release_failed"))
		ft.Check(t, "events by type", map[string]int{"inventory.reserved": 1, "shipment.shipped": 1, "inventory.release_failed": 1}, ft.OutboxTypes(t, f.client))
	})
	t.Run("after a failed shipment, releases and leaves the shipment FAILED", func(t *testing.T) {
		f := newFixture(t, map[string][2]int64{"A1": {5, 0}})
		f.mustApply(t, ft.OrderCreated(t, "o-1", ft.Line{SKU: "A1", Qty: 2}))
		f.mustApply(t, ft.OrderConfirmed(t, "o-1", 3))
		id := shipment.IDFor("o-1")
		if _, _, err := f.svc.Fail(context.Background(), id, shipment.ReasonLostBeforeHandover, "warehouse@spanmart-test.iam.gserviceaccount.com"); err != nil {
			t.Fatal(err)
		}
		ft.Check(t, "inventory: still held after the failure", []ft.StockRow{ft.Stock("A1", 5, 2)}, ft.Inventory(t, f.client))
		f.mustApply(t, ft.OrderCancelled(t, "o-1", 4))

		ft.Check(t, "inventory", []ft.StockRow{ft.Stock("A1", 5, 0)}, ft.Inventory(t, f.client))
		ft.Check(t, "decisions", []ft.Decision{ft.Decided("o-1", "RELEASED", 2)}, ft.Decisions(t, f.client))
		ft.Check(t, "shipments", []ft.ShipmentRow{{ID: id, OrderID: "o-1", Status: "FAILED", FailureReason: "lost_before_handover", FailedBy: "warehouse@spanmart-test.iam.gserviceaccount.com", Version: 2}},
			ft.Shipments(t, f.client))
		ft.Check(t, "events by type", map[string]int{"inventory.reserved": 1, "shipment.failed": 1, "inventory.released": 1}, ft.OutboxTypes(t, f.client))
	})
}

func TestOrderConfirmed(t *testing.T) {
	t.Run("creates the shipment once", func(t *testing.T) {
		f := newFixture(t, map[string][2]int64{"A1": {5, 0}, "B2": {5, 0}})
		f.mustApply(t, ft.OrderCreated(t, "o-1", ft.Line{SKU: "B2", Qty: 1}, ft.Line{SKU: "A1", Qty: 2}))
		f.mustApply(t, ft.OrderConfirmed(t, "o-1", 3))
		f.mustApply(t, ft.OrderConfirmed(t, "o-1", 3)) // replay, new event id

		id := shipment.IDFor("o-1")
		ft.Check(t, "shipments", []ft.ShipmentRow{{ID: id, OrderID: "o-1", Status: "PENDING", Version: 1}}, ft.Shipments(t, f.client))
		sh, err := f.svc.Shipment(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		ft.Check(t, "shipment lines", "[{A1 2} {B2 1}]", fmt.Sprint(sh.Lines()))
		if sh.CreatedAt().IsZero() || !sh.ShippedAt().IsZero() {
			t.Errorf("created at %v, shipped at %v; want a commit timestamp and none", sh.CreatedAt(), sh.ShippedAt())
		}
		ft.Check(t, "inventory: still held", []ft.StockRow{ft.Stock("A1", 5, 2), ft.Stock("B2", 5, 1)}, ft.Inventory(t, f.client))
		ft.Check(t, "events: a shipment emits none when created", map[string]int{"inventory.reserved": 1}, ft.OutboxTypes(t, f.client))
	})
	t.Run("after the reservation was released creates nothing", func(t *testing.T) {
		f := newFixture(t, map[string][2]int64{"A1": {5, 0}})
		f.mustApply(t, ft.OrderCreated(t, "o-1", ft.Line{SKU: "A1", Qty: 2}))
		f.mustApply(t, ft.OrderCancelled(t, "o-1", 2))
		f.mustApply(t, ft.OrderConfirmed(t, "o-1", 3))

		ft.Check(t, "shipments", nil, ft.Shipments(t, f.client))
		ft.Check(t, "decisions", []ft.Decision{ft.Decided("o-1", "RELEASED", 2)}, ft.Decisions(t, f.client))
		ft.Check(t, "events by type", map[string]int{"inventory.reserved": 1, "inventory.released": 1}, ft.OutboxTypes(t, f.client))
	})
	t.Run("of a rejected order creates nothing", func(t *testing.T) {
		f := newFixture(t, map[string][2]int64{"A1": {1, 0}})
		f.mustApply(t, ft.OrderCreated(t, "o-1", ft.Line{SKU: "A1", Qty: 2}))
		f.mustApply(t, ft.OrderConfirmed(t, "o-1", 3))
		ft.Check(t, "shipments", nil, ft.Shipments(t, f.client))
	})
	t.Run("before order.created is early", func(t *testing.T) {
		f := newFixture(t, nil)
		err := f.apply(ft.OrderConfirmed(t, "o-1", 3))
		if !errors.Is(err, outboxlib.ErrEarly) || outboxlib.IsPermanent(err) {
			t.Errorf("order.confirmed before order.created = %v, want ErrEarly", err)
		}
		ft.Check(t, "shipments", nil, ft.Shipments(t, f.client))
	})
}

func TestPermanentErrors(t *testing.T) {
	f := newFixture(t, map[string][2]int64{"A1": {5, 0}})
	raw := func(typ, subject, body string) outboxlib.Delivery {
		d := ft.Delivery(t, typ, subject, 1, nil)
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
		"confirmed, not json":    raw(events.TypeOrderConfirmed, "o-1", `"o-1"`),
		"confirmed, other order": raw(events.TypeOrderConfirmed, "o-1", `{"order_id":"o-2"}`),
	} {
		t.Run(name, func(t *testing.T) {
			if err := f.apply(d); !outboxlib.IsPermanent(err) {
				t.Errorf("handler = %v, want a permanent error", err)
			}
		})
	}
	ft.Check(t, "inventory", []ft.StockRow{ft.Stock("A1", 5, 0)}, ft.Inventory(t, f.client))
	ft.Check(t, "outbox", nil, ft.Outbox(t, f.client))
}
