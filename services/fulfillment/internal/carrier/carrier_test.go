package carrier_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/platform/platformtest"
	"github.com/spanmart/spanmart/pkg/spannertest"
	"github.com/spanmart/spanmart/services/fulfillment/internal/app"
	"github.com/spanmart/spanmart/services/fulfillment/internal/carrier"
	ft "github.com/spanmart/spanmart/services/fulfillment/internal/fulfillmenttest"
	"github.com/spanmart/spanmart/services/fulfillment/internal/inventory"
	"github.com/spanmart/spanmart/services/fulfillment/internal/shipment"
	"github.com/spanmart/spanmart/services/fulfillment/internal/store"
)

var env *spannertest.Env

func TestMain(m *testing.M) { os.Exit(spannertest.Main(m, &env)) }

func TestTrackingNumber(t *testing.T) {
	id := "82aa86e8-02a9-5e0d-a765-2cfe9ae0dee3"
	if got := carrier.TrackingNumber(id); got != "SIM82AA86E802" {
		t.Errorf("TrackingNumber(%s) = %s, want SIM82AA86E802", id, got)
	}
	other := uuid.NewString()
	if carrier.TrackingNumber(other) != carrier.TrackingNumber(other) || carrier.TrackingNumber(other) == carrier.TrackingNumber(id) {
		t.Error("tracking numbers are not derived from the shipment id alone")
	}
	if n := len(carrier.TrackingNumber(other)); n > shipment.MaxDetailLen {
		t.Errorf("tracking number of %d characters", n)
	}
}

func TestInterval(t *testing.T) {
	for after, want := range map[time.Duration]time.Duration{
		time.Millisecond: 10 * time.Millisecond,
		time.Second:      250 * time.Millisecond,
		time.Hour:        5 * time.Second,
	} {
		if got := carrier.Interval(after); got != want {
			t.Errorf("Interval(%s) = %s, want %s", after, got, want)
		}
	}
}

// TestRun runs the simulator with a short delay and waits for the shipments to reach their
// states: shipped by the simulated carrier, or failed for a SKU it rejects.
func TestRun(t *testing.T) {
	client, _ := env.NewDatabase(t, dbschema.Fulfillment)
	ft.Seed(t, client, map[string][2]int64{"A1": {5, 0}, "BAD": {5, 0}})
	svc := app.New(store.New(client), nil, nil)
	good := ft.Confirm(t, client, svc, "o-good", inventory.Line{SKU: "A1", Quantity: 2})
	bad := ft.Confirm(t, client, svc, "o-bad", inventory.Line{SKU: "A1", Quantity: 1}, inventory.Line{SKU: "BAD", Quantity: 1})
	cancelled := ft.Confirm(t, client, svc, "o-cancelled", inventory.Line{SKU: "A1", Quantity: 1})
	ft.Run(t, client, func(ctx context.Context, txn app.Txn) (app.Outcome, error) {
		return svc.Cancel(ctx, txn, "o-cancelled")
	})

	log, logs := platformtest.NewLogger(t, "fulfillment")
	sim := &carrier.Simulator{Shipments: svc, After: 20 * time.Millisecond, FailSKUs: []string{"BAD"}, Batch: 1, Log: log}
	run := platformtest.Start(t, func(ctx context.Context) error { sim.Run(ctx); return nil })

	status := func(id string) shipment.Status {
		s, err := svc.Shipment(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return s.Status()
	}
	platformtest.Eventually(t, "both pending shipments handled", func() bool {
		return status(good) != shipment.Pending && status(bad) != shipment.Pending
	})
	if err := run.Stop(t); err != nil {
		t.Fatal(err)
	}
	logs.Find(t, "carrier simulation stopped")

	ft.Check(t, "shipments", []ft.ShipmentRow{
		{ID: cancelled, OrderID: "o-cancelled", Status: "CANCELLED", Version: 2},
		{ID: bad, OrderID: "o-bad", Status: "FAILED", FailureReason: "carrier_rejected", FailedBy: carrier.Actor, Version: 2},
		{ID: good, OrderID: "o-good", Status: "SHIPPED", Carrier: "spanmart-sim", TrackingNumber: carrier.TrackingNumber(good), ShippedBy: carrier.Actor, Version: 2, Shipped: true},
	}, sortedByID(ft.Shipments(t, client), cancelled, bad, good))
	ft.Check(t, "inventory: o-good shipped, o-bad still held", []ft.StockRow{ft.Stock("A1", 3, 1), ft.Stock("BAD", 5, 1)}, ft.Inventory(t, client))
	ft.Check(t, "events", map[string]int{"inventory.reserved": 3, "inventory.released": 1, "shipment.shipped": 1, "shipment.failed": 1}, ft.OutboxTypes(t, client))
	for _, want := range []struct{ id, action string }{{good, "ship"}, {bad, "fail"}} {
		line := logs.FindFunc(t, "the log line of "+want.action, func(e map[string]any) bool {
			return e["message"] == "carrier simulation" && e["shipment_id"] == want.id
		})
		if line["action"] != want.action {
			t.Errorf("log line %v, want action %s", line, want.action)
		}
	}
}

// sortedByID returns rows in the order of ids.
func sortedByID(rows []ft.ShipmentRow, ids ...string) []ft.ShipmentRow {
	out := make([]ft.ShipmentRow, 0, len(rows))
	for _, id := range ids {
		for _, r := range rows {
			if r.ID == id {
				out = append(out, r)
			}
		}
	}
	return out
}

// TestTickWaitsForTheDelay: a shipment younger than After is left alone; once due it ships, and a
// second tick finds nothing to do.
func TestTickWaitsForTheDelay(t *testing.T) {
	client, _ := env.NewDatabase(t, dbschema.Fulfillment)
	ft.Seed(t, client, map[string][2]int64{"A1": {5, 0}})
	svc := app.New(store.New(client), nil, nil)
	id := ft.Confirm(t, client, svc, "o-1", inventory.Line{SKU: "A1", Quantity: 1})
	s, err := svc.Shipment(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	now := s.CreatedAt().Add(time.Minute - time.Millisecond)
	sim := &carrier.Simulator{Shipments: svc, After: time.Minute, Log: zap.NewNop(), Now: func() time.Time { return now }}
	if n, err := sim.Tick(context.Background()); err != nil || n != 0 {
		t.Fatalf("Tick before the delay = %d, %v; want 0", n, err)
	}
	now = s.CreatedAt().Add(time.Minute)
	if n, err := sim.Tick(context.Background()); err != nil || n != 1 {
		t.Fatalf("Tick at the delay = %d, %v; want 1", n, err)
	}
	if n, err := sim.Tick(context.Background()); err != nil || n != 0 {
		t.Fatalf("Tick again = %d, %v; want 0", n, err)
	}
	s, err = svc.Shipment(context.Background(), id)
	if err != nil || s.Status() != shipment.Shipped || !strings.HasPrefix(s.TrackingNumber(), "SIM") {
		t.Errorf("shipment = %+v, %v", s, err)
	}
}
