package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"cloud.google.com/go/spanner"
	"github.com/google/uuid"

	"github.com/spanmart/spanmart/gen/dao/ordersdb"
	"github.com/spanmart/spanmart/pkg/platform/platformtest"
	"github.com/spanmart/spanmart/services/orders/api"
	"github.com/spanmart/spanmart/services/orders/internal/orderstest"
)

// setStatus moves an order to status directly in the database, as the saga would have.
func (f *fixture) setStatus(t *testing.T, id, status string) {
	t.Helper()
	row := ordersdb.Order{OrderId: id, Status: status, UpdatedAt: spanner.CommitTimestamp}
	m, err := row.UpdateColumns(ordersdb.OrderColStatus, ordersdb.OrderColUpdatedAt)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.Apply(context.Background(), []*spanner.Mutation{m}); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) place(t *testing.T) string {
	t.Helper()
	resp := f.do(t, http.MethodPost, "/v1/orders", uuid.NewString(), orderBody)
	if resp.status != http.StatusCreated {
		t.Fatalf("POST = %d %s", resp.status, resp.body)
	}
	return decode[api.Order](t, resp.body).ID
}

func TestCancelOrder(t *testing.T) {
	f := newFixture(t)
	id := f.place(t)
	resp := f.do(t, http.MethodPost, "/v1/orders/"+id+"/cancel", "c1", "")
	if resp.status != http.StatusAccepted {
		t.Fatalf("cancel = %d %s, want 202", resp.status, resp.body)
	}
	got := decode[api.Order](t, resp.body)
	if got.Status != "CANCELLING" || got.CancelReason == nil || *got.CancelReason != "customer_request" || len(got.Compensations) != 1 {
		t.Errorf("cancelled order = %+v", got)
	}
	// The same key again: the stored response, marked replayed; the order is not touched again.
	again := f.do(t, http.MethodPost, "/v1/orders/"+id+"/cancel", "c1", "{}")
	if again.status != http.StatusAccepted || again.header.Get(api.HeaderIdempotentReplayed) != "true" || string(again.body) != string(resp.body) {
		t.Errorf("replay = %d %q %s", again.status, again.header.Get(api.HeaderIdempotentReplayed), again.body)
	}
	// Another key: the order is already cancelling, answered as it is.
	other := f.do(t, http.MethodPost, "/v1/orders/"+id+"/cancel", "c2", "")
	if other.status != http.StatusOK || decode[api.Order](t, other.body).Status != "CANCELLING" {
		t.Errorf("second cancel = %d %s, want 200 CANCELLING", other.status, other.body)
	}
	s := orderstest.Read(t, f.client)
	var cancelled int
	for _, e := range s.Outbox {
		if e.EventType == "order.cancelled" {
			cancelled++
		}
	}
	if cancelled != 1 {
		t.Errorf("%d order.cancelled events, want 1", cancelled)
	}
	// The key is bound to its order.
	id2 := f.place(t)
	if r := f.do(t, http.MethodPost, "/v1/orders/"+id2+"/cancel", "c1", ""); r.status != http.StatusUnprocessableEntity {
		t.Errorf("key of another order = %d %s, want 422", r.status, r.body)
	}
}

func TestCancelOrderRefused(t *testing.T) {
	f := newFixture(t)
	shipped := f.place(t)
	f.setStatus(t, shipped, "SHIPPED")
	noKey := orderHeaders(t, "")
	delete(noKey, api.HeaderIdempotencyKey)
	platformtest.RefuseAll(t, f.url, []platformtest.Hostile{
		{Name: "shipped", Path: "/v1/orders/" + shipped + "/cancel", Header: orderHeaders(t, ""), Status: http.StatusConflict},
		{Name: "unknown order", Path: "/v1/orders/00000000-0000-4000-8000-000000000000/cancel", Header: orderHeaders(t, ""), Status: http.StatusNotFound},
		{Name: "not a uuid", Path: "/v1/orders/nope/cancel", Header: orderHeaders(t, ""), Status: http.StatusBadRequest},
		{Name: "no key", Path: "/v1/orders/" + shipped + "/cancel", Header: noKey, Status: http.StatusBadRequest},
		{Name: "a body", Path: "/v1/orders/" + shipped + "/cancel", Header: orderHeaders(t, "application/json"), Body: `{"reason": "changed my mind"}`, Status: http.StatusBadRequest},
		{Name: "not json", Path: "/v1/orders/" + shipped + "/cancel", Header: orderHeaders(t, "application/json"), Body: `cancel!`, Status: http.StatusBadRequest},
	})
	if o := decode[api.Order](t, f.do(t, http.MethodGet, "/v1/orders/"+shipped, "", "").body); o.Status != "SHIPPED" {
		t.Errorf("a refused cancel changed the order: %s", o.Status)
	}
}
