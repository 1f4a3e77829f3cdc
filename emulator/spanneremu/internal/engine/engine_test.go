package engine

import (
	"context"
	"strconv"
	"testing"
	"time"

	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

const testDB = "projects/p/instances/i/databases/d"

func newTestDB(t *testing.T, ddl ...string) *DB {
	t.Helper()
	_, db := newTestEngine(t, Options{}, ddl...)
	return db
}

// newTestEngine starts an engine with opts and creates the test database with ddl.
func newTestEngine(t *testing.T, opts Options, ddl ...string) (*Engine, *DB) {
	t.Helper()
	e, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if err := e.CreateDatabase(context.Background(), testDB, ddl); err != nil {
		t.Fatalf("CreateDatabase: %v", err)
	}
	db, err := e.Database(testDB)
	if err != nil {
		t.Fatal(err)
	}
	return e, db
}

func str(s string) *structpb.Value { return structpb.NewStringValue(s) }

func row(vs ...*structpb.Value) *structpb.ListValue { return &structpb.ListValue{Values: vs} }

func insert(table string, cols []string, rows ...*structpb.ListValue) *sppb.Mutation {
	return &sppb.Mutation{Operation: &sppb.Mutation_Insert{Insert: &sppb.Mutation_Write{Table: table, Columns: cols, Values: rows}}}
}

func commit(t *testing.T, db *DB, muts ...*sppb.Mutation) error {
	t.Helper()
	tx, err := db.Begin(TxnOptions{Mode: ReadWrite})
	if err != nil {
		t.Fatal(err)
	}
	_, err = tx.Commit(context.Background(), muts)
	return err
}

func query(t *testing.T, db *DB, sql string) [][]*structpb.Value {
	t.Helper()
	tx, err := db.Begin(TxnOptions{Mode: ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	res, err := tx.ExecuteSQL(context.Background(), Statement{SQL: sql})
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return res.Rows
}

func TestMutationsAndQuery(t *testing.T) {
	db := newTestDB(t, `CREATE TABLE Singers (SingerId INT64 NOT NULL, Name STRING(10)) PRIMARY KEY (SingerId)`)
	if err := commit(t, db, insert("Singers", []string{"SingerId", "Name"}, row(str("1"), str("Ann")), row(str("2"), str("Bob")))); err != nil {
		t.Fatal(err)
	}
	err := commit(t, db, insert("Singers", []string{"SingerId", "Name"}, row(str("1"), str("Dup"))))
	if status.Code(err) != codes.AlreadyExists {
		t.Errorf("duplicate insert: got %v, want ALREADY_EXISTS", err)
	}
	got := query(t, db, "SELECT SingerId, Name FROM Singers ORDER BY SingerId DESC")
	want := [][]*structpb.Value{{str("2"), str("Bob")}, {str("1"), str("Ann")}}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
}

func read(t *testing.T, tx *Txn, table string, key ...*structpb.Value) [][]*structpb.Value {
	t.Helper()
	res, err := tx.Read(context.Background(), ReadRequest{Table: table, Columns: []string{"SingerId", "Name"},
		KeySet: &sppb.KeySet{Keys: []*structpb.ListValue{row(key...)}}})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return res.Rows
}

func update(table string, cols []string, rows ...*structpb.ListValue) *sppb.Mutation {
	return &sppb.Mutation{Operation: &sppb.Mutation_Update{Update: &sppb.Mutation_Write{Table: table, Columns: cols, Values: rows}}}
}

const singers = `CREATE TABLE Singers (SingerId INT64 NOT NULL, Name STRING(10)) PRIMARY KEY (SingerId)`

// An optimistic read that a concurrent commit made stale aborts the reader at commit; a read
// of another key does not.
func TestOptimisticReadConflict(t *testing.T) {
	db := newTestDB(t, singers)
	cols := []string{"SingerId", "Name"}
	if err := commit(t, db, insert("Singers", cols, row(str("1"), str("a")), row(str("2"), str("b")))); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// The writer is the oldest: a younger one would wait for the readers (readers.go).
	writer, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	stale, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	other, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	read(t, stale, "Singers", str("1"))
	read(t, other, "Singers", str("2"))
	if _, err := writer.Commit(ctx, []*sppb.Mutation{update("Singers", cols, row(str("1"), str("new")))}); err != nil {
		t.Fatal(err)
	}
	if _, err := stale.Commit(ctx, []*sppb.Mutation{update("Singers", cols, row(str("1"), str("lost")))}); status.Code(err) != codes.Aborted {
		t.Errorf("commit after a stale read: got %v, want ABORTED", err)
	}
	if _, err := other.Commit(ctx, []*sppb.Mutation{update("Singers", cols, row(str("2"), str("ok")))}); err != nil {
		t.Errorf("commit after reading an untouched key: %v", err)
	}
	got := query(t, db, "SELECT Name FROM Singers ORDER BY SingerId")
	want := [][]*structpb.Value{{str("new")}, {str("ok")}}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
}

// A read-write transaction never sees a state that did not exist: after it read row 1, a commit
// that changed rows 1 and 2 aborts it at its read of row 2, rather than answering that read with
// the new row 2 beside the old row 1 (read skew; fulfillment's ship saw a PENDING shipment with a
// released reservation this way). Every read validates the earlier ones, so the reads a
// transaction got always show the database as of one moment. A read of rows no commit touched
// goes on.
func TestReadsOfAReadWriteTransactionAreConsistent(t *testing.T) {
	e, db := newTestEngine(t, Options{}, singers)
	cols := []string{"SingerId", "Name"}
	if err := commit(t, db, insert("Singers", cols, row(str("1"), str("a")), row(str("2"), str("b")), row(str("3"), str("c")))); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	writer, _ := db.Begin(TxnOptions{Mode: ReadWrite}) // the oldest, so it does not wait for the readers
	skewed, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	untouched, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	read(t, skewed, "Singers", str("1"))
	read(t, untouched, "Singers", str("3"))
	if _, err := writer.Commit(ctx, []*sppb.Mutation{update("Singers", cols, row(str("1"), str("a2")), row(str("2"), str("b2")))}); err != nil {
		t.Fatal(err)
	}
	_, err := skewed.Read(ctx, ReadRequest{Table: "Singers", Columns: cols, KeySet: &sppb.KeySet{Keys: []*structpb.ListValue{row(str("2"))}}})
	if status.Code(err) != codes.Aborted {
		t.Errorf("read of row 2 after row 1 changed: got %v, want ABORTED", err)
	}
	if got := read(t, untouched, "Singers", str("2")); len(got) != 1 || got[0][1].GetStringValue() != "b2" {
		t.Errorf("read of row 2 by a transaction whose row 3 is unchanged: %v, want b2", got)
	}
	if _, err := untouched.Commit(ctx, nil); err != nil {
		t.Errorf("commit of the unaffected transaction: %v", err)
	}
	want := map[string]int64{"SINGERS key": 1}
	for name, ds := range e.Stats().ByDatabase {
		if diff := cmp.Diff(want, ds.ConflictsBy); diff != "" {
			t.Errorf("database %s: conflicts by footprint (-want +got):\n%s", name, diff)
		}
	}
}

// scanningDML is DML whose WHERE does not pin the key: it takes the write lock for the rest of
// its transaction.
const scanningDML = "UPDATE Singers SET Name = 'x' WHERE Name = 'nobody'"

// A transaction waiting longer than LockWait for the write lock that another one holds across
// its requests (it ran DML that scans) is aborted, and the holder is unaffected.
func TestLockWaitAborts(t *testing.T) {
	e, db := newTestEngine(t, Options{LockWait: 20 * time.Millisecond}, singers)
	ctx := context.Background()
	holder, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if _, err := holder.ExecuteSQL(ctx, Statement{SQL: scanningDML}); err != nil {
		t.Fatal(err)
	}
	waiter, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if _, err := waiter.ExecuteSQL(ctx, Statement{SQL: scanningDML}); status.Code(err) != codes.Aborted {
		t.Fatalf("waiter: got %v, want ABORTED", err)
	}
	if _, err := holder.Commit(ctx, nil); err != nil {
		t.Errorf("holder commit: %v", err)
	}
	if got := e.Stats().LockTimeouts; got != 1 {
		t.Errorf("LockTimeouts = %d, want 1", got)
	}
}

// Every commit that takes the write lock counts its hold, from taking the lock to letting it go;
// a transaction that took it for a statement holds it until its commit, and a hold longer than
// a millisecond is counted apart too.
func TestCommitHoldsAreCounted(t *testing.T) {
	e, db := newTestEngine(t, Options{}, singers)
	ctx := context.Background()
	cols := []string{"SingerId", "Name"}
	for i := range 3 {
		if err := commit(t, db, insert("Singers", cols, row(str(strconv.Itoa(i)), str("a")))); err != nil {
			t.Fatal(err)
		}
	}
	holder, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if _, err := holder.ExecuteSQL(ctx, Statement{SQL: scanningDML}); err != nil {
		t.Fatal(err)
	}
	const held = 5 * time.Millisecond
	time.Sleep(held) // the hold to be measured, not a wait for anything
	if _, err := holder.Commit(ctx, nil); err != nil {
		t.Fatal(err)
	}
	st := e.Stats()
	if st.CommitHolds != 4 || st.CommitHeld < held {
		t.Errorf("CommitHolds %d, CommitHeld %v: want 4 holds of %v or more in all", st.CommitHolds, st.CommitHeld, held)
	}
	if st.LongCommitHolds < 1 || st.LongCommitHeld < held || st.LongCommitHeld > st.CommitHeld {
		t.Errorf("LongCommitHolds %d, LongCommitHeld %v: want the hold of %v or more among them, and no more than CommitHeld %v",
			st.LongCommitHolds, st.LongCommitHeld, held, st.CommitHeld)
	}
}

// Waiting behind other commits is a queue, not a lock conflict: a commit that waits for the write
// lock many times LockWait, while no transaction holds it across requests, is not aborted and
// commits once the lock is free. (On Spanner a busy database slows a transaction down; it does
// not abort it.)
func TestLockQueueDoesNotAbort(t *testing.T) {
	e, db := newTestEngine(t, Options{LockWait: 20 * time.Millisecond}, singers)
	ctx := context.Background()
	db.lock <- struct{}{} // a commit in progress, for as long as the test holds it
	txn, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	done := make(chan error, 1)
	go func() {
		_, err := txn.Commit(ctx, []*sppb.Mutation{insert("Singers", []string{"SingerId", "Name"}, row(str("9"), str("queued")))})
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for e.Stats().LockQueueWaits < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("lock queue waits: %d, want 3", e.Stats().LockQueueWaits)
		}
		time.Sleep(time.Millisecond)
	}
	<-db.lock
	if err := <-done; err != nil {
		t.Fatalf("commit after waiting in the queue: %v", err)
	}
	if st := e.Stats(); st.LockTimeouts != 0 || st.Commits != 1 {
		t.Errorf("lock timeouts %d, commits %d; want 0 and 1", st.LockTimeouts, st.Commits)
	}
	// The wait is counted once, for at least the three LockWaits it was seen waiting; a commit
	// that finds the lock free is not counted.
	if st := e.Stats(); st.LockWaits != 1 || st.LockWaited < 3*20*time.Millisecond {
		t.Errorf("lock waits %d for %s; want 1, of at least 60ms", st.LockWaits, st.LockWaited)
	}
	if err := commit(t, db, insert("Singers", []string{"SingerId", "Name"}, row(str("10"), str("free")))); err != nil {
		t.Fatal(err)
	}
	if st := e.Stats(); st.LockWaits != 1 {
		t.Errorf("lock waits %d after a commit that found the lock free, want still 1", st.LockWaits)
	}
}

// An abandoned transaction holding the lock is aborted by the janitor, so others proceed.
// The abort counts as an idle abort; a read-only transaction left idle as long (the Go client
// never ends one) is ended too, but that aborts no work and is not counted.
func TestIdleTransactionReleasesLock(t *testing.T) {
	e, db := newTestEngine(t, Options{IdleTimeout: 50 * time.Millisecond, LockWait: 5 * time.Second}, singers)
	ctx := context.Background()
	forgotten, _ := db.Begin(TxnOptions{Mode: ReadOnly})
	if _, err := forgotten.ExecuteSQL(ctx, Statement{SQL: "SELECT 1"}); err != nil {
		t.Fatal(err)
	}
	abandoned, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if _, err := abandoned.ExecuteSQL(ctx, Statement{SQL: scanningDML}); err != nil {
		t.Fatal(err)
	}
	if err := commit(t, db, insert("Singers", []string{"SingerId"}, row(str("1")))); err != nil {
		t.Fatalf("commit behind an abandoned transaction: %v", err)
	}
	if _, err := abandoned.Commit(ctx, nil); status.Code(err) != codes.Aborted {
		t.Errorf("abandoned commit: got %v, want ABORTED", err)
	}
	if _, err := forgotten.ExecuteSQL(ctx, Statement{SQL: "SELECT 1"}); status.Code(err) != codes.Aborted {
		t.Errorf("read of a read-only transaction idle past the timeout: got %v, want ABORTED", err)
	}
	if got := e.Stats().IdleAborts; got != 1 {
		t.Errorf("idle aborts: %d, want 1 (the read-write transaction)", got)
	}
}

// A read-only transaction keeps its snapshot while others commit; after its snapshot is
// released it still reads as long as nothing changed, and fails clearly once data changed.
func TestReadOnlySnapshot(t *testing.T) {
	_, db := newTestEngine(t, Options{SnapshotIdle: time.Millisecond}, singers)
	ctx := context.Background()
	cols := []string{"SingerId", "Name"}
	if err := commit(t, db, insert("Singers", cols, row(str("1"), str("a")))); err != nil {
		t.Fatal(err)
	}
	ro, _ := db.Begin(TxnOptions{Mode: ReadOnly})
	want := [][]*structpb.Value{{str("1"), str("a")}}
	if diff := cmp.Diff(want, read(t, ro, "Singers", str("1")), protocmp.Transform()); diff != "" {
		t.Fatalf("first read (-want +got):\n%s", diff)
	}
	if err := commit(t, db, update("Singers", cols, row(str("1"), str("b")))); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, read(t, ro, "Singers", str("1")), protocmp.Transform()); diff != "" {
		t.Errorf("read after a concurrent commit (-want +got):\n%s", diff)
	}
	// Release the snapshot as the janitor would after SnapshotIdle.
	db.abortIdle(time.Now().Add(time.Second))
	_, err := ro.Read(ctx, ReadRequest{Table: "Singers", Columns: cols, KeySet: &sppb.KeySet{All: true}})
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("read of a released snapshot after a commit: got %v, want FAILED_PRECONDITION", err)
	}
	ro2, _ := db.Begin(TxnOptions{Mode: ReadOnly})
	read(t, ro2, "Singers", str("1"))
	db.abortIdle(time.Now().Add(time.Second))
	if _, err := ro2.Read(ctx, ReadRequest{Table: "Singers", Columns: cols, KeySet: &sppb.KeySet{All: true}}); err != nil {
		t.Errorf("read of a released snapshot with no commit since: %v", err)
	}
}

// DML writing PENDING_COMMIT_TIMESTAMP() gets the commit timestamp; reading it back inside the
// transaction is an error.
func TestPendingCommitTimestamp(t *testing.T) {
	db := newTestDB(t, `CREATE TABLE Events (Id INT64 NOT NULL, Ts TIMESTAMP OPTIONS (allow_commit_timestamp = true)) PRIMARY KEY (Id)`)
	ctx := context.Background()
	tx, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	res, err := tx.ExecuteSQL(ctx, Statement{SQL: "INSERT INTO Events (Id, Ts) VALUES (1, PENDING_COMMIT_TIMESTAMP()), (2, PENDING_COMMIT_TIMESTAMP())"})
	if err != nil {
		t.Fatal(err)
	}
	if res.RowCount != 2 {
		t.Errorf("RowCount = %d, want 2", res.RowCount)
	}
	if _, err := tx.ExecuteSQL(ctx, Statement{SQL: "SELECT Ts FROM Events"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("reading a pending commit timestamp: got %v, want INVALID_ARGUMENT", err)
	}
	ts, err := tx.Commit(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := structpb.NewStringValue(ts.UTC().Format(time.RFC3339Nano))
	for _, r := range query(t, db, "SELECT Ts FROM Events") {
		if diff := cmp.Diff(want, r[0], protocmp.Transform()); diff != "" {
			t.Errorf("Ts (-want +got):\n%s", diff)
		}
	}
}

// Exact-timestamp reads see the database as it was, from kept versions.
func TestExactTimestampRead(t *testing.T) {
	db := newTestDB(t, singers)
	ctx := context.Background()
	cols := []string{"SingerId", "Name"}
	write := func(m *sppb.Mutation) time.Time {
		t.Helper()
		tx, _ := db.Begin(TxnOptions{Mode: ReadWrite})
		ts, err := tx.Commit(ctx, []*sppb.Mutation{m})
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	ts1 := write(insert("Singers", cols, row(str("1"), str("a"))))
	ts2 := write(update("Singers", cols, row(str("1"), str("b"))))
	at := func(ts time.Time) []*structpb.Value {
		t.Helper()
		ro, err := db.Begin(TxnOptions{Mode: ReadOnly, SingleUse: true,
			ReadOnly: &sppb.TransactionOptions_ReadOnly{TimestampBound: &sppb.TransactionOptions_ReadOnly_ReadTimestamp{ReadTimestamp: timestamppb.New(ts)}}})
		if err != nil {
			t.Fatal(err)
		}
		defer ro.Rollback()
		res, err := ro.ExecuteSQL(ctx, Statement{SQL: "SELECT Name FROM Singers"})
		if err != nil {
			t.Fatalf("read at %v: %v", ts, err)
		}
		if got := ro.ReadTimestamp(); !got.Equal(ts) {
			t.Errorf("ReadTimestamp() = %v, want %v", got, ts)
		}
		var names []*structpb.Value
		for _, r := range res.Rows {
			names = append(names, r[0])
		}
		return names
	}
	for _, tt := range []struct {
		name string
		ts   time.Time
		want []*structpb.Value
	}{
		{"before the first write", ts1.Add(-time.Microsecond), nil},
		{"at the first write", ts1, []*structpb.Value{str("a")}},
		{"between the writes", ts2.Add(-time.Microsecond), []*structpb.Value{str("a")}},
		{"at the second write", ts2, []*structpb.Value{str("b")}},
	} {
		if diff := cmp.Diff(tt.want, at(tt.ts), protocmp.Transform()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

// Commit statistics count written cells and, per row, the columns of every index a write
// changes.
func TestMutationCount(t *testing.T) {
	db := newTestDB(t,
		`CREATE TABLE Accounts (Id INT64 NOT NULL, Nickname STRING(MAX), Balance INT64) PRIMARY KEY (Id)`,
		`CREATE INDEX ByNickname ON Accounts (Nickname) STORING (Balance)`)
	cols := []string{"Id", "Balance"}
	tests := []struct {
		name string
		muts []*sppb.Mutation
		want int64
	}{
		{"update of a stored column", []*sppb.Mutation{update("Accounts", cols, row(str("1"), str("5")), row(str("2"), str("6")))}, 2 * (2 + 2)},
		{"insert writes every index", []*sppb.Mutation{insert("Accounts", []string{"Id"}, row(str("3")))}, 1 + 2},
		{"update of an unindexed column", []*sppb.Mutation{update("Accounts", []string{"Id"}, row(str("1")))}, 1},
		{"deletes", []*sppb.Mutation{{Operation: &sppb.Mutation_Delete_{Delete: &sppb.Mutation_Delete{Table: "Accounts",
			KeySet: &sppb.KeySet{Keys: []*structpb.ListValue{row(str("1")), row(str("2"))}, Ranges: []*sppb.KeyRange{{}}}}}}}, 3},
	}
	for _, tt := range tests {
		if got := db.MutationCount(tt.muts); got != tt.want {
			t.Errorf("%s: MutationCount = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// A read-write transaction whose client dies while it holds the write lock (a query in a
// read-write transaction takes it for the rest of the transaction) is aborted once idle, and the
// database takes writes again, even when a row deletion policy sweep wanted the lock meanwhile:
// the janitor runs both, and a sweep that waited for the lock for good kept the database from
// taking writes for good (found by the soak after a kill -9 of the gateway).
func TestAbandonedLockHolderIsAbortedDespiteTheTTLSweep(t *testing.T) {
	_, db := newTestEngine(t, Options{IdleTimeout: 500 * time.Millisecond, LockWait: 100 * time.Millisecond, TTLSweepInterval: 20 * time.Millisecond},
		`CREATE TABLE Events (Id STRING(36) NOT NULL, PublishedAt TIMESTAMP) PRIMARY KEY (Id), ROW DELETION POLICY (OLDER_THAN(PublishedAt, INTERVAL 7 DAY))`)
	ctx := context.Background()
	dead, err := db.Begin(TxnOptions{Mode: ReadWrite})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dead.ExecuteSQL(ctx, Statement{SQL: "SELECT Id FROM Events"}); err != nil {
		t.Fatal(err)
	}
	// The client is gone: nothing ends dead. Writes wait for the lock (ABORTED after LockWait,
	// retried as a client would) until the janitor aborts dead.
	start := time.Now()
	deadline := start.Add(20 * time.Second)
	for {
		err := commit(t, db, insert("Events", []string{"Id"}, row(str("e-1"))))
		if err == nil {
			break
		}
		if status.Code(err) != codes.Aborted || time.Now().After(deadline) {
			t.Fatalf("a write %s after the lock holder's last use: %v", time.Since(start).Round(time.Millisecond), err)
		}
	}
	if _, err := dead.ExecuteSQL(ctx, Statement{SQL: "SELECT Id FROM Events"}); status.Code(err) != codes.Aborted {
		t.Errorf("the abandoned transaction after the janitor: %v, want ABORTED", err)
	}
}

// A commit waits for an older transaction that read a row it writes, as Spanner's read locks
// make it (wound-wait), so the reader commits rather than being aborted; a commit older than the
// reader does not wait, and the younger reader is aborted.
func TestCommitWaitsForOlderReaders(t *testing.T) {
	e, db := newTestEngine(t, Options{LockWait: time.Minute}, singers)
	cols := []string{"SingerId", "Name"}
	if err := commit(t, db, insert("Singers", cols, row(str("1"), str("a")), row(str("2"), str("b")))); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	reader, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	read(t, reader, "Singers", str("1"))
	writer, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	done := make(chan error, 1)
	go func() {
		_, err := writer.Commit(ctx, []*sppb.Mutation{update("Singers", cols, row(str("1"), str("w")))})
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for e.Stats().ReaderWaits == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the younger writer did not wait for the older reader")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := reader.Commit(ctx, []*sppb.Mutation{update("Singers", cols, row(str("2"), str("r")))}); err != nil {
		t.Errorf("the older reader's commit: %v, want it to commit before the writer", err)
	}
	if err := <-done; err != nil {
		t.Errorf("the writer's commit after the reader ended: %v", err)
	}

	old, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	young, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	read(t, young, "Singers", str("1"))
	if _, err := old.Commit(ctx, []*sppb.Mutation{update("Singers", cols, row(str("1"), str("o")))}); err != nil {
		t.Fatalf("the older writer's commit: %v", err)
	}
	if _, err := young.Commit(ctx, nil); status.Code(err) != codes.Aborted {
		t.Errorf("the younger reader's commit after an older writer wrote its row: %v, want ABORTED", err)
	}
	if got := e.Stats().ReaderWaits; got != 1 {
		t.Errorf("reader waits: %d, want 1", got)
	}
	got := query(t, db, "SELECT Name FROM Singers ORDER BY SingerId")
	want := [][]*structpb.Value{{str("o")}, {str("r")}}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
}

// A write mutation's plan (its table, columns and statements, worked out once per shape) follows
// the schema: after a column is added, the same shape with it writes it; after it is dropped, a
// mutation naming it is refused; a refused shape is refused every time.
func TestWritePlansFollowTheSchema(t *testing.T) {
	e, db := newTestEngine(t, Options{}, singers)
	ctx := context.Background()
	cols := []string{"SingerId", "Name"}
	if err := commit(t, db, insert("Singers", cols, row(str("1"), str("a")))); err != nil {
		t.Fatal(err)
	}
	withAge := []string{"SingerId", "Name", "Age"}
	for range 2 {
		if err := commit(t, db, insert("Singers", withAge, row(str("2"), str("b"), str("30")))); status.Code(err) != codes.NotFound {
			t.Fatalf("a column not in the table yet: got %v, want NOT_FOUND", err)
		}
	}
	if err := e.UpdateDDL(ctx, testDB, []string{"ALTER TABLE Singers ADD COLUMN Age INT64"}); err != nil {
		t.Fatal(err)
	}
	if err := commit(t, db, insert("Singers", withAge, row(str("2"), str("b"), str("30")))); err != nil {
		t.Fatalf("the same shape once the column is added: %v", err)
	}
	if err := commit(t, db, update("Singers", cols, row(str("1"), str("a2")))); err != nil {
		t.Fatal(err)
	}
	got := query(t, db, "SELECT SingerId, Name, Age FROM Singers ORDER BY SingerId")
	want := [][]*structpb.Value{{str("1"), str("a2"), structpb.NewNullValue()}, {str("2"), str("b"), str("30")}}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("Singers (-want +got):\n%s", diff)
	}
	if err := e.UpdateDDL(ctx, testDB, []string{"ALTER TABLE Singers DROP COLUMN Age"}); err != nil {
		t.Fatal(err)
	}
	if err := commit(t, db, insert("Singers", withAge, row(str("3"), str("c"), str("40")))); status.Code(err) != codes.NotFound {
		t.Errorf("a dropped column: got %v, want NOT_FOUND", err)
	}
}

// While CreateDatabase applies its DDL the database's name is reserved with no database behind it
// yet: Stats (read by the bench and the admin API at any moment) must pass over it. It
// dereferenced it, and the conformance suite's parallel tests crashed there once.
func TestStatsWhileADatabaseIsBeingCreated(t *testing.T) {
	e, db := newTestEngine(t, Options{}, singers)
	e.mu.Lock()
	e.dbs["projects/p/instances/i/databases/creating"] = nil // as CreateDatabase reserves it
	e.mu.Unlock()
	st := e.Stats()
	if _, ok := st.ByDatabase["d"]; !ok || len(st.ByDatabase) != 1 || db.name != testDB {
		t.Errorf("Stats by database: %v, want the one created database only", st.ByDatabase)
	}
}
