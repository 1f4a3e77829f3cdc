package engine

import (
	"context"
	"testing"
	"time"

	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"
)

// readExclusive reads Singers rows at keys with LOCK_HINT_EXCLUSIVE.
func readExclusive(ctx context.Context, tx *Txn, keys ...*structpb.Value) ([][]*structpb.Value, error) {
	ks := &sppb.KeySet{}
	for _, k := range keys {
		ks.Keys = append(ks.Keys, row(k))
	}
	res, err := tx.Read(ctx, ReadRequest{Table: "Singers", Columns: []string{"SingerId", "Name"}, KeySet: ks, Exclusive: true})
	if err != nil {
		return nil, err
	}
	return res.Rows, nil
}

// waitForExclusiveWaits polls the engine's counter until n reads have waited for a lock.
func waitForExclusiveWaits(t *testing.T, e *Engine, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for e.Stats().ExclusiveWaits < n {
		if time.Now().After(deadline) {
			t.Fatalf("exclusive waits: %d, want %d", e.Stats().ExclusiveWaits, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Two read-modify-writes of one row: with shared reads both read the old value and one is
// aborted; with LOCK_HINT_EXCLUSIVE the second waits for the first to commit, reads its value and
// commits too.
func TestExclusiveReadsSerializeReadModifyWrite(t *testing.T) {
	e, db := newTestEngine(t, Options{LockWait: time.Minute}, singers)
	cols := []string{"SingerId", "Name"}
	if err := commit(t, db, insert("Singers", cols, row(str("1"), str("a")), row(str("2"), str("b")))); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// Shared: the deadlock Spanner breaks by aborting one of the two.
	a, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	b, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	read(t, a, "Singers", str("1"))
	read(t, b, "Singers", str("1"))
	if _, err := a.Commit(ctx, []*sppb.Mutation{update("Singers", cols, row(str("1"), str("a+1")))}); err != nil {
		t.Fatalf("first shared writer: %v", err)
	}
	if _, err := b.Commit(ctx, []*sppb.Mutation{update("Singers", cols, row(str("1"), str("a+1")))}); status.Code(err) != codes.Aborted {
		t.Fatalf("second shared writer: %v, want ABORTED", err)
	}

	// Exclusive: serialized, no abort.
	a, _ = db.Begin(TxnOptions{Mode: ReadWrite})
	b, _ = db.Begin(TxnOptions{Mode: ReadWrite})
	got, err := readExclusive(ctx, a, str("1"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]*structpb.Value{{str("1"), str("a+1")}}, got, protocmp.Transform()); diff != "" {
		t.Fatalf("first exclusive read (-want +got):\n%s", diff)
	}
	type result struct {
		rows [][]*structpb.Value
		err  error
	}
	second := make(chan result, 1)
	go func() {
		rows, err := readExclusive(ctx, b, str("1"))
		second <- result{rows, err}
	}()
	waitForExclusiveWaits(t, e, 1)
	if _, err := a.Commit(ctx, []*sppb.Mutation{update("Singers", cols, row(str("1"), str("a+2")))}); err != nil {
		t.Fatalf("the lock holder's commit: %v", err)
	}
	r := <-second
	if r.err != nil {
		t.Fatalf("the waiting read: %v", r.err)
	}
	if diff := cmp.Diff([][]*structpb.Value{{str("1"), str("a+2")}}, r.rows, protocmp.Transform()); diff != "" {
		t.Fatalf("the waiting read sees the holder's commit (-want +got):\n%s", diff)
	}
	if _, err := b.Commit(ctx, []*sppb.Mutation{update("Singers", cols, row(str("1"), str("a+3")))}); err != nil {
		t.Fatalf("the waiter's commit: %v", err)
	}
	if got := query(t, db, "SELECT Name FROM Singers WHERE SingerId = 1"); !cmp.Equal(got, [][]*structpb.Value{{str("a+3")}}, protocmp.Transform()) {
		t.Errorf("Name: %v, want a+3", got)
	}
	if got := e.Stats(); got.Conflicts != 1 || got.LockTimeouts != 0 {
		t.Errorf("conflicts %d, lock timeouts %d; want 1 (the shared pair) and 0", got.Conflicts, got.LockTimeouts)
	}
}

// An exclusive lock is freed by a rollback, an abort and a commit alike; other keys are not
// locked; a read of a range takes no lock.
func TestExclusiveLocksEndWithTheTransaction(t *testing.T) {
	e, db := newTestEngine(t, Options{LockWait: time.Minute}, singers)
	cols := []string{"SingerId", "Name"}
	if err := commit(t, db, insert("Singers", cols, row(str("1"), str("a")), row(str("2"), str("b")))); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	holder, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if _, err := readExclusive(ctx, holder, str("1")); err != nil {
		t.Fatal(err)
	}
	other, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if _, err := readExclusive(ctx, other, str("2")); err != nil {
		t.Fatalf("another key: %v", err)
	}
	if _, err := other.Read(ctx, ReadRequest{Table: "Singers", Columns: cols, Exclusive: true,
		KeySet: &sppb.KeySet{Ranges: []*sppb.KeyRange{{StartKeyType: &sppb.KeyRange_StartClosed{StartClosed: row(str("1"))},
			EndKeyType: &sppb.KeyRange_EndClosed{EndClosed: row(str("2"))}}}}}); err != nil {
		t.Fatalf("a range: %v", err)
	}
	if got := e.Stats().ExclusiveWaits; got != 0 {
		t.Fatalf("exclusive waits: %d, want 0", got)
	}
	other.Rollback()

	for i, end := range []func(){
		func() { holder.Rollback() },
		func() { holder.abort("test") },
		func() {
			if _, err := holder.Commit(ctx, nil); err != nil {
				t.Errorf("commit: %v", err)
			}
		},
	} {
		waiter, _ := db.Begin(TxnOptions{Mode: ReadWrite})
		done := make(chan error, 1)
		go func() {
			_, err := readExclusive(ctx, waiter, str("1"))
			done <- err
		}()
		waitForExclusiveWaits(t, e, int64(i+1))
		end()
		if err := <-done; err != nil {
			t.Fatalf("the read after the holder ended (%d): %v", i, err)
		}
		holder = waiter
	}
}

// Wound-wait: a transaction that wants a key a younger one holds aborts the holder (at once,
// when it is between requests) and takes the lock; the younger one is ABORTED at its next request.
func TestExclusiveLockWoundsAYoungerHolder(t *testing.T) {
	e, db := newTestEngine(t, Options{LockWait: time.Minute}, singers)
	cols := []string{"SingerId", "Name"}
	if err := commit(t, db, insert("Singers", cols, row(str("1"), str("a")))); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	old, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	young, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if !old.begun.Before(young.begun) {
		t.Fatal("the two transactions began at the same instant")
	}
	if _, err := readExclusive(ctx, young, str("1")); err != nil {
		t.Fatal(err)
	}
	if _, err := readExclusive(ctx, old, str("1")); err != nil {
		t.Fatalf("the older transaction's read: %v", err)
	}
	if _, err := young.Commit(ctx, []*sppb.Mutation{update("Singers", cols, row(str("1"), str("y")))}); status.Code(err) != codes.Aborted {
		t.Errorf("the wounded holder's commit: %v, want ABORTED", err)
	}
	if _, err := old.Commit(ctx, []*sppb.Mutation{update("Singers", cols, row(str("1"), str("o")))}); err != nil {
		t.Errorf("the older transaction's commit: %v", err)
	}
	if got := e.Stats(); got.Wounds != 1 || got.LockTimeouts != 0 || got.Conflicts != 0 {
		t.Errorf("wounds %d, lock timeouts %d, conflicts %d; want 1, 0, 0", got.Wounds, got.LockTimeouts, got.Conflicts)
	}
	if diff := cmp.Diff(map[string]int64{"SINGERS wounded": 1}, e.Stats().ByDatabase["d"].ConflictsBy); diff != "" {
		t.Errorf("aborts by cause (-want +got):\n%s", diff)
	}
}

// A holder wounded while it waits (here for another key, held by an older transaction) is
// aborted there, which frees what it holds.
func TestExclusiveLockWoundsAWaitingHolder(t *testing.T) {
	e, db := newTestEngine(t, Options{LockWait: time.Minute}, singers)
	cols := []string{"SingerId", "Name"}
	if err := commit(t, db, insert("Singers", cols, row(str("1"), str("a")), row(str("2"), str("b")))); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	oldest, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	old, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	young, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if _, err := readExclusive(ctx, old, str("2")); err != nil {
		t.Fatal(err)
	}
	if _, err := readExclusive(ctx, young, str("1")); err != nil {
		t.Fatal(err)
	}
	youngWaits := make(chan error, 1)
	go func() {
		_, err := readExclusive(ctx, young, str("2")) // held by old: young waits
		youngWaits <- err
	}()
	waitForExclusiveWaits(t, e, 1)
	if _, err := readExclusive(ctx, oldest, str("1")); err != nil { // held by young, who is busy waiting
		t.Fatalf("the oldest transaction's read: %v", err)
	}
	if err := <-youngWaits; status.Code(err) != codes.Aborted {
		t.Errorf("the wounded waiter: %v, want ABORTED", err)
	}
	for _, tx := range []*Txn{oldest, old} {
		if _, err := tx.Commit(ctx, nil); err != nil {
			t.Errorf("commit: %v", err)
		}
	}
	if got := e.Stats().Wounds; got != 1 {
		t.Errorf("wounds %d, want 1", got)
	}
}

// queryForUpdate runs sql in tx with INT64 parameters.
func queryForUpdate(ctx context.Context, tx *Txn, sql string, params map[string]string) ([][]*structpb.Value, error) {
	st := Statement{SQL: sql, Params: &structpb.Struct{Fields: map[string]*structpb.Value{}}, ParamTypes: map[string]*sppb.Type{}}
	for name, v := range params {
		st.Params.Fields[name] = str(v)
		st.ParamTypes[name] = &sppb.Type{Code: sppb.TypeCode_INT64}
	}
	res, err := tx.ExecuteSQL(ctx, st)
	if err != nil {
		return nil, err
	}
	return res.Rows, nil
}

// A query ending in FOR UPDATE takes the exclusive locks of the rows it reads by key, the root's
// and its subqueries' (each of a set of keys too), as exclusive reads of them would: a LOCK_HINT_EXCLUSIVE read waits for
// it, and it waits for one, then reads what the holder committed. Other keys, a query without
// FOR UPDATE and a FOR UPDATE query of a range (which takes no lock here) do not wait.
func TestForUpdateQueryTakesExclusiveLocks(t *testing.T) {
	e, db := newTestEngine(t, Options{LockWait: time.Minute}, singers,
		`CREATE TABLE Labels (LabelId INT64 NOT NULL, Name STRING(10)) PRIMARY KEY (LabelId)`)
	cols := []string{"SingerId", "Name"}
	if err := commit(t, db, insert("Singers", cols, row(str("1"), str("a")), row(str("2"), str("b"))),
		insert("Labels", []string{"LabelId", "Name"}, row(str("7"), str("l")))); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const both = `SELECT s.Name, ARRAY(SELECT AS STRUCT l.Name FROM Labels AS l WHERE l.LabelId = @label) AS Label
FROM Singers AS s WHERE s.SingerId = @id FOR UPDATE`
	type result struct {
		rows [][]*structpb.Value
		err  error
	}

	// The query holds Singers 1 and Labels 7: an exclusive read of either waits for it.
	for i, read := range []func(*Txn) error{
		func(tx *Txn) error { _, err := readExclusive(ctx, tx, str("1")); return err },
		func(tx *Txn) error {
			_, err := tx.Read(ctx, ReadRequest{Table: "Labels", Columns: []string{"Name"}, Exclusive: true,
				KeySet: &sppb.KeySet{Keys: []*structpb.ListValue{row(str("7"))}}})
			return err
		},
	} {
		holder, _ := db.Begin(TxnOptions{Mode: ReadWrite})
		if _, err := queryForUpdate(ctx, holder, both, map[string]string{"id": "1", "label": "7"}); err != nil {
			t.Fatal(err)
		}
		waiter, _ := db.Begin(TxnOptions{Mode: ReadWrite})
		done := make(chan error, 1)
		go func() { done <- read(waiter) }()
		waitForExclusiveWaits(t, e, int64(i+1))
		if _, err := holder.Commit(ctx, nil); err != nil {
			t.Fatalf("the query's transaction: %v", err)
		}
		if err := <-done; err != nil {
			t.Fatalf("the exclusive read after the query's transaction ended (%d): %v", i, err)
		}
		waiter.Rollback()
	}

	// An exclusive read holds Singers 1: the query waits for it and reads what it committed.
	holder, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if _, err := readExclusive(ctx, holder, str("1")); err != nil {
		t.Fatal(err)
	}
	other, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	for _, q := range []struct{ sql, id string }{
		{"SELECT Name FROM Singers WHERE SingerId = @id FOR UPDATE", "2"},  // another key
		{"SELECT Name FROM Singers WHERE SingerId = @id", "1"},             // no FOR UPDATE
		{"SELECT Name FROM Singers WHERE SingerId >= @id FOR UPDATE", "1"}, // a range: no lock
	} {
		if _, err := queryForUpdate(ctx, other, q.sql, map[string]string{"id": q.id}); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	if got := e.Stats().ExclusiveWaits; got != 2 {
		t.Fatalf("exclusive waits: %d, want 2 (none for another key, no FOR UPDATE or a range)", got)
	}
	other.Rollback()
	waiter, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	done := make(chan result, 1)
	go func() {
		rows, err := queryForUpdate(ctx, waiter, both, map[string]string{"id": "1", "label": "7"})
		done <- result{rows, err}
	}()
	waitForExclusiveWaits(t, e, 3)
	if _, err := holder.Commit(ctx, []*sppb.Mutation{update("Singers", cols, row(str("1"), str("a+1")))}); err != nil {
		t.Fatalf("the holder's commit: %v", err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("the waiting query: %v", r.err)
	}
	want := [][]*structpb.Value{{str("a+1"), structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewListValue(row(str("l")))}})}}
	if diff := cmp.Diff(want, r.rows, protocmp.Transform()); diff != "" {
		t.Fatalf("the waiting query sees the holder's commit (-want +got):\n%s", diff)
	}
	if _, err := waiter.Commit(ctx, []*sppb.Mutation{update("Singers", cols, row(str("1"), str("a+2")))}); err != nil {
		t.Fatalf("the waiter's commit: %v", err)
	}
	if got := e.Stats(); got.Conflicts != 0 || got.Wounds != 0 {
		t.Errorf("conflicts %d, wounds %d; want none", got.Conflicts, got.Wounds)
	}

	// FOR UPDATE of a subquery: its row only.
	holder, _ = db.Begin(TxnOptions{Mode: ReadWrite})
	if _, err := queryForUpdate(ctx, holder, `SELECT s.Name, ARRAY(SELECT AS STRUCT l.Name FROM Labels AS l WHERE l.LabelId = @label FOR UPDATE) AS Label
FROM Singers AS s WHERE s.SingerId = @id`, map[string]string{"id": "1", "label": "7"}); err != nil {
		t.Fatal(err)
	}
	other, _ = db.Begin(TxnOptions{Mode: ReadWrite})
	if _, err := readExclusive(ctx, other, str("1")); err != nil {
		t.Fatal(err)
	}
	if got := e.Stats().ExclusiveWaits; got != 3 {
		t.Fatalf("exclusive waits: %d, want 3 (none for the root row of a query whose subquery is FOR UPDATE)", got)
	}
	other.Rollback()
	waiter, _ = db.Begin(TxnOptions{Mode: ReadWrite})
	readLabel := make(chan error, 1)
	go func() {
		_, err := waiter.Read(ctx, ReadRequest{Table: "Labels", Columns: []string{"Name"}, Exclusive: true,
			KeySet: &sppb.KeySet{Keys: []*structpb.ListValue{row(str("7"))}}})
		readLabel <- err
	}()
	waitForExclusiveWaits(t, e, 4)
	holder.Rollback()
	if err := <-readLabel; err != nil {
		t.Fatalf("the exclusive read of the subquery's row after its holder ended: %v", err)
	}
	waiter.Rollback()

	// A set of keys (IN UNNEST): each of them.
	holder, _ = db.Begin(TxnOptions{Mode: ReadWrite})
	ids := structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{str("1"), str("2")}})
	if _, err := holder.ExecuteSQL(ctx, Statement{SQL: "SELECT Name FROM Singers WHERE SingerId IN UNNEST(@ids) FOR UPDATE",
		Params:     &structpb.Struct{Fields: map[string]*structpb.Value{"ids": ids}},
		ParamTypes: map[string]*sppb.Type{"ids": {Code: sppb.TypeCode_ARRAY, ArrayElementType: &sppb.Type{Code: sppb.TypeCode_INT64}}}}); err != nil {
		t.Fatal(err)
	}
	waiter, _ = db.Begin(TxnOptions{Mode: ReadWrite})
	read2 := make(chan error, 1)
	go func() { _, err := readExclusive(ctx, waiter, str("2")); read2 <- err }()
	waitForExclusiveWaits(t, e, 5)
	holder.Rollback()
	if err := <-read2; err != nil {
		t.Fatalf("the exclusive read of key 2 after the set's holder ended: %v", err)
	}
	waiter.Rollback()
}
