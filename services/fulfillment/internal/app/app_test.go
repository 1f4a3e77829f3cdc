package app_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/spannertest"
	"github.com/spanmart/spanmart/services/fulfillment/internal/app"
	ft "github.com/spanmart/spanmart/services/fulfillment/internal/fulfillmenttest"
	"github.com/spanmart/spanmart/services/fulfillment/internal/inventory"
	"github.com/spanmart/spanmart/services/fulfillment/internal/shipment"
	"github.com/spanmart/spanmart/services/fulfillment/internal/store"
)

var env *spannertest.Env

// Who acts on the shipments: a warehouse's account and an operator's.
const (
	warehouse = "warehouse@spanmart-test.iam.gserviceaccount.com"
	operator  = "oncall@spanmart-test.iam.gserviceaccount.com"
)

func TestMain(m *testing.M) { os.Exit(spannertest.Main(m, &env)) }

// nudges records the aggregates the service nudged the relay for.
type nudges struct {
	mu  sync.Mutex
	ids []string
}

func (n *nudges) NudgeAggregate(_ context.Context, id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.ids = append(n.ids, id)
}

func (n *nudges) got() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.ids...)
}

type fixture struct {
	client *spanner.Client
	svc    *app.Service
	reg    *prometheus.Registry
	nudged *nudges
}

// newFixture seeds A1 (5 on hand) and B2 (3 on hand).
func newFixture(t *testing.T) *fixture {
	t.Helper()
	client, _ := env.NewDatabase(t, dbschema.Fulfillment)
	ft.Seed(t, client, map[string][2]int64{"A1": {5, 0}, "B2": {3, 0}})
	reg := prometheus.NewRegistry()
	n := &nudges{}
	return &fixture{client: client, svc: app.New(store.New(client), n, app.NewMetrics(reg)), reg: reg, nudged: n}
}

// inTxn runs an event use case as the consumer would and counts its outcome once committed.
func (f *fixture) inTxn(t *testing.T, fn func(ctx context.Context, txn app.Txn) (app.Outcome, error)) app.Outcome {
	t.Helper()
	out := ft.Run(t, f.client, fn)
	f.svc.Committed(out)
	return out
}

// confirmed reserves lines for order id and creates its shipment, returning the shipment id.
func (f *fixture) confirmed(t *testing.T, orderID string, lines ...inventory.Line) string {
	t.Helper()
	return ft.Confirm(t, f.client, f.svc, orderID, lines...)
}

// TestShipConcurrentRepeats sends the same ship request many times at once, from two accounts: the
// shipment ships once, by the account of the request that shipped it (the others, of either
// account, change nothing), its stock leaves the warehouse once, one event is emitted and one nudge
// sent, and every request answers with the shipped shipment.
func TestShipConcurrentRepeats(t *testing.T) {
	f := newFixture(t)
	id := f.confirmed(t, "o-1", inventory.Line{SKU: "A1", Quantity: 2}, inventory.Line{SKU: "B2", Quantity: 1})

	const requests = 8
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		results = make([]*shipment.Shipment, requests)
		changed = make([]bool, requests)
		errs    = make([]error, requests)
		by      = func(i int) string { return []string{warehouse, operator}[i%2] }
	)
	for i := range requests {
		wg.Go(func() {
			<-start
			results[i], changed[i], errs[i] = f.svc.Ship(context.Background(), id, "yamato", "1234-5678", by(i))
		})
	}
	close(start)
	wg.Wait()
	shipped, shipper := 0, ""
	for i := range requests {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		if changed[i] {
			shipped, shipper = shipped+1, by(i)
		}
	}
	if shipped != 1 {
		t.Fatalf("%d requests shipped the shipment, want 1", shipped)
	}
	for i, s := range results {
		if s.Status() != shipment.Shipped || s.Version() != 2 || s.ShippedAt().IsZero() || s.ShippedBy() != shipper {
			t.Errorf("request %d answered %+v, want SHIPPED at version 2 with a ShippedAt, by %s", i, s.Snapshot(), shipper)
		}
	}

	ft.Check(t, "inventory: the lines left once", []ft.StockRow{ft.Stock("A1", 3, 0), ft.Stock("B2", 2, 0)}, ft.Inventory(t, f.client))
	ft.Check(t, "reservations", []ft.ReservationRow{ft.Held("o-1", "A1", 2, "SHIPPED"), ft.Held("o-1", "B2", 1, "SHIPPED")}, ft.Reservations(t, f.client))
	ft.Check(t, "decisions: shipping emits no inventory event", []ft.Decision{ft.Decided("o-1", "SHIPPED", 1)}, ft.Decisions(t, f.client))
	ft.Check(t, "shipments", []ft.ShipmentRow{{ID: id, OrderID: "o-1", Status: "SHIPPED", Carrier: "yamato", TrackingNumber: "1234-5678", ShippedBy: shipper, Version: 2, Shipped: true}},
		ft.Shipments(t, f.client))
	// Who shipped is fulfillment's record only: the event's payload is as it was.
	ft.Check(t, "shipment.shipped", []ft.OutboxRow{{
		Type: "shipment.shipped", AggregateType: "shipment", AggregateID: id, Version: 1, Pending: true,
		Payload: ft.JS(t, `{"shipment_id":"`+id+`","order_id":"o-1","carrier":"yamato","tracking_number":"1234-5678",
			"lines":[{"sku":"A1","quantity":2},{"sku":"B2","quantity":1}]}`),
	}}, ft.OutboxOf(t, f.client, "shipment.shipped"))
	ft.Check(t, "nudges", []string{id}, f.nudged.got())
	ft.Check(t, "fulfillment_shipments_total", map[string]float64{"PENDING": 1, "SHIPPED": 1}, ft.Counts(t, f.reg, "fulfillment_shipments_total"))

	// ShippedAt is the commit timestamp: the one the row carries.
	read, err := f.svc.Shipment(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if !read.ShippedAt().Equal(read.UpdatedAt()) || !read.ShippedAt().After(read.CreatedAt()) {
		t.Errorf("created %v, updated %v, shipped %v: want shipped = updated, after created", read.CreatedAt(), read.UpdatedAt(), read.ShippedAt())
	}
	// Every request answered the shipment as committed, its timestamps included, without reading
	// it back: the one that shipped it from its commit, the others from what they read.
	for i, s := range results {
		if diff := cmp.Diff(read.Snapshot(), s.Snapshot()); diff != "" {
			t.Errorf("request %d answered another shipment than the one committed (-committed +answered):\n%s", i, diff)
		}
	}
}

func TestShipRefusals(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := f.confirmed(t, "o-1", inventory.Line{SKU: "A1", Quantity: 1})
	if _, _, err := f.svc.Ship(ctx, id, "yamato", "T-1", warehouse); err != nil {
		t.Fatal(err)
	}
	failed := f.confirmed(t, "o-2", inventory.Line{SKU: "A1", Quantity: 1})
	if _, _, err := f.svc.Fail(ctx, failed, shipment.ReasonCarrierRejected, warehouse); err != nil {
		t.Fatal(err)
	}
	cancelled := f.confirmed(t, "o-3", inventory.Line{SKU: "A1", Quantity: 1})
	f.inTxn(t, func(ctx context.Context, txn app.Txn) (app.Outcome, error) { return f.svc.Cancel(ctx, txn, "o-3") })
	before := ft.Outbox(t, f.client)

	for _, tt := range []struct {
		name              string
		id                string
		carrier, tracking string
		want              error
	}{
		{"shipped with another tracking number", id, "yamato", "T-2", shipment.ErrConflict},
		{"shipped with another carrier", id, "sagawa", "T-1", shipment.ErrConflict},
		{"failed", failed, "yamato", "T-3", shipment.ErrIllegalTransition},
		{"cancelled", cancelled, "yamato", "T-4", shipment.ErrIllegalTransition},
		{"unknown", shipment.IDFor("o-unknown"), "yamato", "T-5", shipment.ErrNotFound},
		{"not a shipment id", "o-1", "yamato", "T-6", shipment.ErrNotFound},
		{"no carrier", id, "", "T-1", shipment.ErrInvalid},
		{"no tracking number", id, "yamato", "", shipment.ErrInvalid},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := f.svc.Ship(ctx, tt.id, tt.carrier, tt.tracking, warehouse); !errors.Is(err, tt.want) {
				t.Errorf("Ship = %v, want %v", err, tt.want)
			}
		})
	}
	ft.Check(t, "outbox: refusals emit nothing", before, ft.Outbox(t, f.client))
	ft.Check(t, "inventory: o-1 shipped, o-2 held, o-3 released", []ft.StockRow{ft.Stock("A1", 4, 1), ft.Stock("B2", 3, 0)}, ft.Inventory(t, f.client))
	ft.Check(t, "nudges: one per shipment that moved", []string{id, failed}, f.nudged.got())
}

func TestFail(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := f.confirmed(t, "o-1", inventory.Line{SKU: "A1", Quantity: 2})

	s, changed, err := f.svc.Fail(ctx, id, shipment.ReasonLostBeforeHandover, warehouse)
	if err != nil || !changed || s.Status() != shipment.Failed || s.FailureReason() != shipment.ReasonLostBeforeHandover {
		t.Fatalf("Fail = %+v, %v, %v", s, changed, err)
	}
	if s, changed, err := f.svc.Fail(ctx, id, shipment.ReasonLostBeforeHandover, operator); err != nil || changed || s.Version() != 2 || s.FailedBy() != warehouse {
		t.Errorf("the same failure again, by an operator = %v, %v (version %d, by %q); want no change, by %s", changed, err, s.Version(), s.FailedBy(), warehouse)
	}
	if _, _, err := f.svc.Fail(ctx, id, shipment.ReasonCarrierRejected, warehouse); !errors.Is(err, shipment.ErrConflict) {
		t.Errorf("another failure = %v, want ErrConflict", err)
	}
	if _, _, err := f.svc.Ship(ctx, id, "yamato", "T-1", warehouse); !errors.Is(err, shipment.ErrIllegalTransition) {
		t.Errorf("Ship after Fail = %v, want ErrIllegalTransition", err)
	}

	// The reservation stays held: orders answers with order.cancelled, which releases it.
	ft.Check(t, "inventory", []ft.StockRow{ft.Stock("A1", 5, 2), ft.Stock("B2", 3, 0)}, ft.Inventory(t, f.client))
	ft.Check(t, "decisions", []ft.Decision{ft.Decided("o-1", "HELD", 1)}, ft.Decisions(t, f.client))
	ft.Check(t, "shipments", []ft.ShipmentRow{{ID: id, OrderID: "o-1", Status: "FAILED", FailureReason: "lost_before_handover", FailedBy: warehouse, Version: 2}}, ft.Shipments(t, f.client))
	ft.Check(t, "shipment.failed", []ft.OutboxRow{{
		Type: "shipment.failed", AggregateType: "shipment", AggregateID: id, Version: 1, Pending: true,
		Payload: ft.JS(t, `{"shipment_id":"`+id+`","order_id":"o-1","reason":"lost_before_handover"}`),
	}}, ft.OutboxOf(t, f.client, "shipment.failed"))
	ft.Check(t, "nudges", []string{id}, f.nudged.got())

	shipped := f.confirmed(t, "o-2", inventory.Line{SKU: "B2", Quantity: 1})
	if _, _, err := f.svc.Ship(ctx, shipped, "yamato", "T-2", warehouse); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.svc.Fail(ctx, shipped, shipment.ReasonCarrierRejected, warehouse); !errors.Is(err, shipment.ErrIllegalTransition) {
		t.Errorf("Fail after Ship = %v, want ErrIllegalTransition", err)
	}
	ft.Check(t, "fulfillment_shipments_total", map[string]float64{"PENDING": 2, "FAILED": 1, "SHIPPED": 1}, ft.Counts(t, f.reg, "fulfillment_shipments_total"))
}

// TestCancelPendingShipment: the release and the shipment's cancellation commit together, and the
// cancelled shipment can no longer ship.
func TestCancelPendingShipment(t *testing.T) {
	f := newFixture(t)
	id := f.confirmed(t, "o-1", inventory.Line{SKU: "A1", Quantity: 2})
	out := f.inTxn(t, func(ctx context.Context, txn app.Txn) (app.Outcome, error) { return f.svc.Cancel(ctx, txn, "o-1") })
	ft.Check(t, "transitions", []shipment.Status{shipment.Cancelled}, out.Transitions)
	ft.Check(t, "shipments", []ft.ShipmentRow{{ID: id, OrderID: "o-1", Status: "CANCELLED", Version: 2}}, ft.Shipments(t, f.client))
	ft.Check(t, "inventory", []ft.StockRow{ft.Stock("A1", 5, 0), ft.Stock("B2", 3, 0)}, ft.Inventory(t, f.client))
	if _, _, err := f.svc.Ship(context.Background(), id, "yamato", "T-1", warehouse); !errors.Is(err, shipment.ErrIllegalTransition) {
		t.Errorf("Ship after the cancellation = %v, want ErrIllegalTransition", err)
	}
	ft.Check(t, "fulfillment_shipments_total", map[string]float64{"PENDING": 1, "CANCELLED": 1}, ft.Counts(t, f.reg, "fulfillment_shipments_total"))
}

func TestCreateShipmentAfterRelease(t *testing.T) {
	f := newFixture(t)
	lines := []inventory.Line{{SKU: "A1", Quantity: 2}}
	f.inTxn(t, func(ctx context.Context, txn app.Txn) (app.Outcome, error) {
		return f.svc.Reserve(ctx, txn, "o-1", lines)
	})
	f.inTxn(t, func(ctx context.Context, txn app.Txn) (app.Outcome, error) { return f.svc.Cancel(ctx, txn, "o-1") })
	out := f.inTxn(t, func(ctx context.Context, txn app.Txn) (app.Outcome, error) {
		return f.svc.CreateShipment(ctx, txn, "o-1")
	})
	if out.Applied || len(out.Transitions) > 0 || out.Note == "" {
		t.Errorf("CreateShipment after the release = %+v, want nothing applied and a note", out)
	}
	ft.Check(t, "shipments", nil, ft.Shipments(t, f.client))
	ss, err := f.svc.ShipmentsOfOrder(context.Background(), "o-1")
	if err != nil || len(ss) != 0 {
		t.Errorf("ShipmentsOfOrder = %v, %v; want none", ss, err)
	}
}

func TestPendingShipments(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	first := f.confirmed(t, "o-1", inventory.Line{SKU: "A1", Quantity: 1})
	second := f.confirmed(t, "o-2", inventory.Line{SKU: "A1", Quantity: 1})
	shipped := f.confirmed(t, "o-3", inventory.Line{SKU: "A1", Quantity: 1})
	if _, _, err := f.svc.Ship(ctx, shipped, "yamato", "T-3", warehouse); err != nil {
		t.Fatal(err)
	}
	s2, err := f.svc.Shipment(ctx, second)
	if err != nil {
		t.Fatal(err)
	}
	ids := func(createdBefore time.Time, limit int) []string {
		t.Helper()
		ss, err := f.svc.PendingShipments(ctx, createdBefore, limit)
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, s := range ss {
			if s.Status() != shipment.Pending || len(s.Lines()) != 1 {
				t.Errorf("pending shipment %+v", s.Snapshot())
			}
			out = append(out, s.ID())
		}
		return out
	}
	ft.Check(t, "every pending one, oldest first", []string{first, second}, ids(time.Now().Add(time.Minute), 10))
	ft.Check(t, "bounded", []string{first}, ids(time.Now().Add(time.Minute), 1))
	ft.Check(t, "created at or before", []string{first, second}, ids(s2.CreatedAt(), 10))
	ft.Check(t, "none yet", []string{}, ids(s2.CreatedAt().Add(-time.Hour), 10))
}

// TestUpdateInTxnRefusesOtherTransactions: the Txn is the consumer's *spanner.ReadWriteTransaction.
func TestUpdateInTxnRefusesOtherTransactions(t *testing.T) {
	f := newFixture(t)
	if _, err := f.svc.Reserve(context.Background(), "not a transaction", "o-1", []inventory.Line{{SKU: "A1", Quantity: 1}}); err == nil {
		t.Error("Reserve accepted a Txn that is no transaction")
	}
}
