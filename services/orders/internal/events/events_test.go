package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/uuid"

	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/spannertest"
	"github.com/spanmart/spanmart/services/orders/internal/app"
	"github.com/spanmart/spanmart/services/orders/internal/events"
	"github.com/spanmart/spanmart/services/orders/internal/order"
	"github.com/spanmart/spanmart/services/orders/internal/orderstest"
	"github.com/spanmart/spanmart/services/orders/internal/store"
)

var env *spannertest.Env

func TestMain(m *testing.M) { os.Exit(spannertest.Main(m, &env)) }

// placeOrder creates a PENDING order through the use case, as POST /v1/orders does.
func placeOrder(t *testing.T, client *spanner.Client) string {
	t.Helper()
	svc := app.New(store.New(client), nil)
	resp, err := svc.PlaceOrder(context.Background(), uuid.NewString(), app.PlaceOrderRequest{
		CustomerID: "cust-1", Lines: []app.LineRequest{{SKU: "A1", Quantity: 2}, {SKU: "B2", Quantity: 1}},
	}, func(o *order.Order) (int, []byte, error) { return http.StatusCreated, []byte(`{}`), nil })
	if err != nil {
		t.Fatal(err)
	}
	return resp.OrderID
}

func delivery(t *testing.T, typ, orderID string, version int64, payload any) outboxlib.Delivery {
	t.Helper()
	body, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	return outboxlib.Delivery{Event: outboxlib.Event{
		ID: uuid.NewString(), Type: typ, Source: "//spanmart/fulfillment", AggregateType: "reservation",
		AggregateID: orderID, AggregateVersion: version, SchemaVersion: 1, OccurredAt: time.Now(), Payload: body,
	}}
}

// handle runs h in a real read-write transaction, as the consumer does.
func handle(t *testing.T, client *spanner.Client, h outboxlib.HandlerFunc, d outboxlib.Delivery) error {
	t.Helper()
	_, err := client.ReadWriteTransaction(context.Background(), func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		return h(ctx, txn, d)
	})
	return err
}

func TestInventoryReserved(t *testing.T) {
	client, _ := env.NewDatabase(t, dbschema.Orders)
	orderstest.Seed(t, client)
	id := placeOrder(t, client)
	d := delivery(t, events.InventoryReserved, id, 1, map[string]any{"order_id": id, "lines": []any{}})
	if err := handle(t, client, events.InventoryReservedHandler, d); err != nil {
		t.Fatal(err)
	}
	s := orderstest.Read(t, client)
	if o := s.Orders[0]; o.Status != "AWAITING_PAYMENT" || o.Version != 2 || o.CancelReason.Valid {
		t.Errorf("order = %+v, want AWAITING_PAYMENT version 2", o)
	}
	if len(s.Outbox) != 2 || s.Outbox[1].EventType != "order.awaiting_payment" || s.Outbox[1].AggregateVersion != 2 || s.Outbox[1].AggregateId != id {
		t.Fatalf("outbox = %+v, want order.created v1 and order.awaiting_payment v2", s.Outbox)
	}
	if p := orderstest.Payload(t, s.Outbox[1]); p["order_id"] != id || p["status"] != "AWAITING_PAYMENT" || p["total_minor"] != float64(1300) {
		t.Errorf("order.awaiting_payment payload = %v", p)
	}
	checkTimeline(t, s, []string{"emitted order.created 1", "consumed inventory.reserved 1", "emitted order.awaiting_payment 2"})
	if s.Timeline[1].EventId != d.ID || s.Timeline[2].EventId != s.Outbox[1].EventId {
		t.Errorf("timeline event ids = %s, %s", s.Timeline[1].EventId, s.Timeline[2].EventId)
	}

	// A rejection arriving after the reservation finds the order moved on: a no-op that is still
	// on the timeline, with no new event.
	late := delivery(t, events.InventoryRejected, id, 2, map[string]any{"order_id": id, "reason": "out_of_stock"})
	if err := handle(t, client, events.InventoryRejectedHandler, late); err != nil {
		t.Fatalf("a late event = %v, want nil (no-op)", err)
	}
	s = orderstest.Read(t, client)
	if o := s.Orders[0]; o.Status != "AWAITING_PAYMENT" || o.Version != 2 {
		t.Errorf("order after a late event = %+v", o)
	}
	if len(s.Outbox) != 2 {
		t.Errorf("a late event emitted %d events", len(s.Outbox)-2)
	}
	checkTimeline(t, s, []string{"emitted order.created 1", "consumed inventory.reserved 1", "emitted order.awaiting_payment 2", "consumed inventory.rejected 2"})
}

func TestInventoryRejected(t *testing.T) {
	client, _ := env.NewDatabase(t, dbschema.Orders)
	orderstest.Seed(t, client)
	id := placeOrder(t, client)
	d := delivery(t, events.InventoryRejected, id, 1, map[string]any{"order_id": id, "reason": "out_of_stock", "lines": []any{map[string]any{"sku": "A1"}}})
	if err := handle(t, client, events.InventoryRejectedHandler, d); err != nil {
		t.Fatal(err)
	}
	s := orderstest.Read(t, client)
	if o := s.Orders[0]; o.Status != "CANCELLED" || o.Version != 2 || o.CancelReason.StringVal != "out_of_stock" {
		t.Errorf("order = %+v, want CANCELLED version 2 out_of_stock", o)
	}
	if len(s.Outbox) != 2 || s.Outbox[1].EventType != "order.cancelled" || s.Outbox[1].AggregateVersion != 2 {
		t.Fatalf("outbox = %+v", s.Outbox)
	}
	if p := orderstest.Payload(t, s.Outbox[1]); p["reason"] != "out_of_stock" || p["status"] != "CANCELLED" || len(p["lines"].([]any)) != 2 {
		t.Errorf("order.cancelled payload = %v", p)
	}
	checkTimeline(t, s, []string{"emitted order.created 1", "consumed inventory.rejected 1", "emitted order.cancelled 2"})
}

func TestUnknownOrderIsPermanent(t *testing.T) {
	client, _ := env.NewDatabase(t, dbschema.Orders)
	id := uuid.NewString()
	for _, h := range []outboxlib.HandlerFunc{events.InventoryReservedHandler, events.InventoryRejectedHandler} {
		err := handle(t, client, h, delivery(t, events.InventoryReserved, id, 1, map[string]any{"order_id": id}))
		if !outboxlib.IsPermanent(err) || !errors.Is(err, order.ErrNotFound) {
			t.Errorf("unknown order: err = %v, want permanent ErrNotFound", err)
		}
	}
	err := handle(t, client, events.InventoryReservedHandler, delivery(t, events.InventoryReserved, id, 1, map[string]any{"sku": "A1"}))
	if !outboxlib.IsPermanent(err) {
		t.Errorf("payload without order_id: err = %v, want permanent", err)
	}
	if s := orderstest.Read(t, client); len(s.Orders)+len(s.Outbox)+len(s.Timeline) != 0 {
		t.Errorf("failed events wrote rows: %+v", s)
	}
}

func checkTimeline(t *testing.T, s orderstest.State, want []string) {
	t.Helper()
	var got []string
	for i, r := range s.Timeline {
		if r.Seq != int64(i+1) || r.RecordedAt.IsZero() {
			t.Errorf("timeline row %d = %+v", i, r)
		}
		got = append(got, r.Direction+" "+r.EventType+" "+strconv.FormatInt(r.AggregateVersion, 10))
	}
	if len(got) != len(want) {
		t.Fatalf("timeline = %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("timeline = %q, want %q", got, want)
			break
		}
	}
}
