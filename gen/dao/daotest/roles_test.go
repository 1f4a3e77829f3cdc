package daotest

import (
	"context"
	"errors"
	"maps"
	"sync"
	"sync/atomic"
	"testing"

	"cloud.google.com/go/spanner"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"

	"github.com/spanmart/spanmart/gen/dao"
	"github.com/spanmart/spanmart/gen/dao/fulfillmentdb"
	"github.com/spanmart/spanmart/gen/dao/ordersdb"
	"github.com/spanmart/spanmart/gen/dao/outboxdb"
	"github.com/spanmart/spanmart/gen/dao/paymentsdb"
	"github.com/spanmart/spanmart/pkg/dbschema"
)

// TestOutboxAppend: the append builder writes an unpublished row (commit timestamp, no PublishedAt, no
// attempts) in the same transaction as a state change, and the relay's index finds it.
func TestOutboxAppend(t *testing.T) {
	ctx := context.Background()
	client, _ := env.NewDatabase(t, dbschema.Orders)
	ev := &outboxdb.OutboxEventAppend{
		EventId: "8d7a2a3e-0000-4000-8000-0000000000aa", AggregateType: "order", AggregateId: "o-9", AggregateVersion: 1,
		EventType: "order.created", SchemaVersion: 1, Payload: js(map[string]any{"orderId": "o-9"}),
		OccurredAt: t0, PendingShard: 5,
	}
	ts, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		o := order("o-9", "c-9")
		return txn.BufferWrite([]*spanner.Mutation{o.Insert(), ev.Insert()})
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := outboxdb.ReadOutboxEvent(ctx, client.Single(), ev.EventId)
	if err != nil {
		t.Fatal(err)
	}
	want := &outboxdb.OutboxEvent{
		EventId: ev.EventId, AggregateType: "order", AggregateId: "o-9", AggregateVersion: 1, EventType: "order.created",
		SchemaVersion: 1, Payload: ev.Payload, OccurredAt: t0, CreatedAt: ts, PendingShard: i64(5), Attempts: 0,
		ReplayGeneration: 0, ReplayReason: spanner.NullString{}, // never replayed
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outbox row (-want +got):\n%s", diff)
	}
	txn := client.ReadOnlyTransaction()
	defer txn.Close()
	pending, err := outboxdb.ReadOutboxPendingKeys(ctx, txn, spanner.Key{int64(5)}.AsPrefix(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 || pending[0].EventId != ev.EventId {
		t.Errorf("pending rows of shard 5 = %v, want the appended event", pending)
	}
	// Appending the same event again fails: the outbox is append-only.
	if _, err := client.Apply(ctx, []*spanner.Mutation{ev.Insert()}); spanner.ErrCode(err) != codes.AlreadyExists {
		t.Errorf("second append: %v, want AlreadyExists", err)
	}
}

// TestInboxInsertOrIgnore: the inbox statement inserts once; a redelivery affects no row.
func TestInboxInsertOrIgnore(t *testing.T) {
	ctx := context.Background()
	client, _ := env.NewDatabase(t, dbschema.Fulfillment)
	run := func() int64 {
		t.Helper()
		var n int64
		_, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
			var err error
			n, err = txn.Update(ctx, outboxdb.InsertOrIgnoreProcessedEvent("e-1", "fulfillment"))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := run(); n != 1 {
		t.Errorf("first delivery: row count %d, want 1", n)
	}
	if n := run(); n != 0 {
		t.Errorf("second delivery: row count %d, want 0", n)
	}
	row, err := outboxdb.ReadProcessedEvent(ctx, client.Single(), "e-1", "fulfillment")
	if err != nil {
		t.Fatal(err)
	}
	if row.ProcessedAt.IsZero() {
		t.Error("ProcessedAt is zero, want the commit timestamp")
	}
	// Another consumer of the same event has its own record.
	if _, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		n, err := txn.Update(ctx, outboxdb.InsertOrIgnoreProcessedEvent("e-1", "other"))
		if err == nil && n != 1 {
			t.Errorf("other consumer: row count %d, want 1", n)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// TestConstraints: CHECK and unique index violations surface as errors of the generated mutations.
func TestConstraints(t *testing.T) {
	ctx := context.Background()
	t.Run("check", func(t *testing.T) {
		client, _ := env.NewDatabase(t, dbschema.Fulfillment)
		inv := &fulfillmentdb.Inventory{Sku: "SKU-1", OnHand: 1, Reserved: 2}
		inv.SetCommitTimestamps()
		if _, err := client.Apply(ctx, []*spanner.Mutation{inv.Insert()}); err == nil {
			t.Fatal("Reserved > OnHand was accepted")
		}
		if _, err := fulfillmentdb.ReadInventory(ctx, client.Single(), "SKU-1"); !errors.Is(err, dao.ErrNotFound) {
			t.Fatalf("read after failed insert: %v, want ErrNotFound", err)
		}
	})
	t.Run("unique index", func(t *testing.T) {
		client, _ := env.NewDatabase(t, dbschema.Payments)
		p := func(id string) *paymentsdb.Payment {
			x := &paymentsdb.Payment{PaymentId: id, OrderId: "o-1", Provider: "sandbox", Method: "CARD", Status: "REQUESTED",
				AmountMinor: 100, Currency: "JPY", ProviderPaymentId: str("pp-1"), Version: 1}
			x.SetCommitTimestamps()
			return x
		}
		apply(t, client, p("p-1").Insert())
		if _, err := client.Apply(ctx, []*spanner.Mutation{p("p-2").Insert()}); err == nil {
			t.Fatal("a second payment with the same provider payment id was accepted")
		}
	})
	t.Run("partial update of a missing row", func(t *testing.T) {
		client, _ := env.NewDatabase(t, dbschema.Orders)
		o := order("missing", "c")
		m, err := o.UpdateColumns(ordersdb.OrderColStatus)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.Apply(ctx, []*spanner.Mutation{m}); spanner.ErrCode(err) != codes.NotFound {
			t.Fatalf("update of a missing row: %v, want NotFound", err)
		}
	})
}

// TestInterleaved: the lines of an order are read with a key prefix and go with their order.
func TestInterleaved(t *testing.T) {
	ctx := context.Background()
	client, _ := env.NewDatabase(t, dbschema.Orders)
	o := order("o-7", "c-7")
	ms := []*spanner.Mutation{o.Insert()}
	for i := int64(1); i <= 3; i++ {
		it := &ordersdb.OrderItem{OrderId: "o-7", LineNo: i, Sku: "SKU", Quantity: i, UnitPriceMinor: 100}
		ms = append(ms, it.Insert())
	}
	apply(t, client, ms...)
	lines, err := ordersdb.ReadOrderItemRows(ctx, client.Single(), ordersdb.OrderKey("o-7").AsPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 3 || lines[2].LineNo != 3 {
		t.Fatalf("lines of o-7 = %v, want 3 in key order", lines)
	}
	apply(t, client, ordersdb.DeleteOrder("o-7"))
	if _, err := ordersdb.ReadOrderItem(ctx, client.Single(), "o-7", 1); !errors.Is(err, dao.ErrNotFound) {
		t.Fatalf("line after deleting its order: %v, want ErrNotFound (ON DELETE CASCADE)", err)
	}
}

// TestIndexOrderAndLimit: a read through an index that does not store every column (two reads: the
// index, then the table) keeps the index order and the limit.
func TestIndexOrderAndLimit(t *testing.T) {
	ctx := context.Background()
	client, _ := env.NewDatabase(t, dbschema.Orders)
	for _, id := range []string{"o-b", "o-a", "o-c"} {
		apply(t, client, order(id, "c-limit").Insert()) // one commit each: CreatedAt ascending in this order
	}
	rows, err := readOnly(t, client, func(r dao.Reader) ([]*ordersdb.Order, error) {
		return ordersdb.ReadOrdersByCustomerKeys(ctx, r, spanner.Key{"c-limit"}.AsPrefix(), 2)
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range rows {
		got = append(got, o.OrderId)
	}
	if diff := cmp.Diff([]string{"o-c", "o-a"}, got); diff != "" { // CreatedAt DESC, limit 2
		t.Errorf("orders of c-limit by OrdersByCustomer (-want +got):\n%s", diff)
	}
}

// TestExclusiveReads: concurrent read-modify-writes of one row through dao.Exclusive count
// exactly, and on spanneremu none of them is aborted for a stale read: each read waits for the
// exclusive lock of the one before instead of reading a row the other is about to write. A run
// may still be wounded (wound-wait): a transaction that began first but asked for the lock second
// takes it from the younger holder, as on Spanner; every rerun must be one of those.
func TestExclusiveReads(t *testing.T) {
	ctx := context.Background()
	client, name := env.NewDatabase(t, dbschema.Orders)
	const shard, workers, increments = 999, 4, 5
	lease := &outboxdb.OutboxLease{Shard: shard}
	lease.SetCommitTimestamps()
	if _, err := client.Apply(ctx, []*spanner.Mutation{lease.Insert()}); err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int64
	errs := make(chan error, workers*increments)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range increments {
				_, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
					runs.Add(1)
					l, err := outboxdb.ReadOutboxLease(ctx, dao.Exclusive(txn), shard)
					if err != nil {
						return err
					}
					l.Epoch++
					l.SetCommitTimestamps()
					return txn.BufferWrite([]*spanner.Mutation{l.Update()})
				})
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("increment: %v", err)
		}
	}
	got, err := outboxdb.ReadOutboxLease(ctx, client.Single(), shard)
	if err != nil {
		t.Fatal(err)
	}
	if got.Epoch != workers*increments {
		t.Errorf("epoch %d after %d increments", got.Epoch, workers*increments)
	}
	if st, ok := env.DatabaseStats(name); ok {
		others := maps.Clone(st.ConflictsBy)
		wounded := others["OUTBOXLEASES wounded"]
		delete(others, "OUTBOXLEASES wounded")
		if len(others) > 0 {
			t.Errorf("aborts other than wounds: %v", others)
		}
		if runs.Load() != workers*increments+wounded {
			t.Errorf("transaction functions run %d times for %d increments and %d wounds: an exclusive read was aborted instead of waiting", runs.Load(), workers*increments, wounded)
		}
	}
}
