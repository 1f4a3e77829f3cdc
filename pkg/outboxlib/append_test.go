package outboxlib_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"cloud.google.com/go/spanner"
	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/gen/dao/outboxdb"
	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/outboxlib"
)

func TestAppend(t *testing.T) {
	ctx := context.Background()
	client, _ := env.NewDatabase(t, dbschema.Fulfillment)
	e1 := testEvent(t)
	e2, err := outboxlib.NewEvent(ctx, "order.confirmed", "order", e1.AggregateID, 4, map[string]string{"by": "payments"})
	if err != nil {
		t.Fatal(err)
	}
	ts, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		return outboxlib.Append(ctx, txn, e1, e2)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []outboxlib.Event{e1, e2} {
		got, err := outboxdb.ReadOutboxEvent(ctx, client.Single(), e.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := outboxdb.OutboxEvent{
			EventId: e.ID, AggregateType: "order", AggregateId: e.AggregateID, AggregateVersion: e.AggregateVersion,
			EventType: e.Type, SchemaVersion: 1, Payload: spanner.NullJSON{Value: e.Payload, Valid: true},
			TraceParent: spanner.NullString{StringVal: e.TraceParent, Valid: e.TraceParent != ""},
			OccurredAt:  e.OccurredAt, CreatedAt: ts,
			PendingShard: spanner.NullInt64{Int64: outboxlib.ShardOf(e.AggregateID), Valid: true},
		}
		if diff := cmp.Diff(want, *got, cmp.Comparer(sameJSON)); diff != "" {
			t.Errorf("row of %s (-want +got):\n%s", e.Type, diff)
		}
	}
}

// sameJSON compares JSON values by content (Spanner normalizes a JSON column's text).
func sameJSON(a, b spanner.NullJSON) bool {
	var x, y any
	if json.Unmarshal([]byte(a.String()), &x) != nil || json.Unmarshal([]byte(b.String()), &y) != nil {
		return false
	}
	return a.Valid == b.Valid && cmp.Equal(x, y)
}

func TestAppendRejectsInvalidEvent(t *testing.T) {
	ctx := context.Background()
	client, _ := env.NewDatabase(t, dbschema.Fulfillment)
	bad := testEvent(t)
	bad.AggregateVersion = 0
	_, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		return outboxlib.Append(ctx, txn, testEvent(t), bad)
	})
	if err == nil || !strings.Contains(err.Error(), "aggregate version") {
		t.Fatalf("Append with an invalid event = %v, want a validation error", err)
	}
	n := 0
	it := client.Single().Read(ctx, outboxdb.OutboxEventsTable, spanner.AllKeys(), []string{outboxdb.OutboxEventColEventId})
	if err := it.Do(func(*spanner.Row) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d outbox rows after a failed Append, want 0 (nothing buffered)", n)
	}
}
