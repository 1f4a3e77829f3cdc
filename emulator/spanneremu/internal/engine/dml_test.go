package engine

import (
	"context"
	"strings"
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

// exec runs one statement in tx and returns its row count.
func exec(t *testing.T, tx *Txn, sql string, params map[string]*structpb.Value) (int64, error) {
	t.Helper()
	res, err := tx.ExecuteSQL(context.Background(), Statement{SQL: sql, Params: &structpb.Struct{Fields: params}})
	if err != nil {
		return 0, err
	}
	return res.RowCount, nil
}

const inbox = `CREATE TABLE Inbox (Id STRING(36) NOT NULL, ProcessedAt TIMESTAMP OPTIONS (allow_commit_timestamp = true)) PRIMARY KEY (Id)`

const insertInbox = "INSERT OR IGNORE INTO Inbox (Id, ProcessedAt) VALUES (@id, PENDING_COMMIT_TIMESTAMP())"

// Transactions that start with DML do not hold the lock between their statements: two of them
// run side by side (with a LockWait far shorter than their lives), each reads another table
// optimistically, and both commit, their pending commit timestamps filled in.
func TestDMLDoesNotHoldTheLock(t *testing.T) {
	e, db := newTestEngine(t, Options{LockWait: 20 * time.Millisecond}, inbox, singers)
	ctx := context.Background()
	if err := commit(t, db, insert("Singers", []string{"SingerId", "Name"}, row(str("1"), str("a")))); err != nil {
		t.Fatal(err)
	}
	a, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	b, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	for _, step := range []struct {
		tx *Txn
		id string
	}{{a, "ev-a"}, {b, "ev-b"}} {
		n, err := exec(t, step.tx, insertInbox, map[string]*structpb.Value{"id": str(step.id)})
		if err != nil || n != 1 {
			t.Fatalf("%s: inserted %d, %v; want 1 row", step.id, n, err)
		}
	}
	read(t, a, "Singers", str("1"))
	read(t, b, "Singers", str("1"))
	if _, err := b.Commit(ctx, nil); err != nil {
		t.Fatalf("commit b: %v", err)
	}
	if _, err := a.Commit(ctx, []*sppb.Mutation{update("Singers", []string{"SingerId", "Name"}, row(str("1"), str("by-a")))}); err != nil {
		t.Fatalf("commit a: %v", err)
	}
	got := query(t, db, "SELECT Id, ProcessedAt IS NOT NULL AND ProcessedAt <= CURRENT_TIMESTAMP() FROM Inbox ORDER BY Id")
	want := [][]*structpb.Value{{str("ev-a"), structpb.NewBoolValue(true)}, {str("ev-b"), structpb.NewBoolValue(true)}}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("Inbox (-want +got):\n%s", diff)
	}
	if s := e.Stats(); s.LockTimeouts != 0 || s.Conflicts != 0 {
		t.Errorf("stats %+v: want no lock timeouts and no conflicts", s)
	}
}

// Two transactions insert the same key with INSERT OR IGNORE: both see one inserted row, the
// first to commit wins and the second is aborted; its retry inserts nothing. This is the
// consumer inbox under a concurrent duplicate delivery.
func TestDMLSameKeyConflicts(t *testing.T) {
	db := newTestDB(t, inbox)
	ctx := context.Background()
	a, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	b, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	id := map[string]*structpb.Value{"id": str("ev-1")}
	for _, tx := range []*Txn{a, b} {
		if n, err := exec(t, tx, insertInbox, id); err != nil || n != 1 {
			t.Fatalf("insert: %d, %v; want 1 row", n, err)
		}
	}
	if _, err := a.Commit(ctx, nil); err != nil {
		t.Fatalf("commit a: %v", err)
	}
	if _, err := b.Commit(ctx, nil); status.Code(err) != codes.Aborted {
		t.Fatalf("commit b: got %v, want ABORTED", err)
	}
	retry, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if n, err := exec(t, retry, insertInbox, id); err != nil || n != 0 {
		t.Fatalf("retry: %d, %v; want 0 rows (already there)", n, err)
	}
	if _, err := retry.Commit(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got := query(t, db, "SELECT COUNT(*) FROM Inbox"); got[0][0].GetStringValue() != "1" {
		t.Errorf("Inbox rows: %v, want 1", got)
	}
}

// singerOneIs checks that tx reads singer 1's name as want (what it is), through the Read API
// and through SQL.
func singerOneIs(t *testing.T, tx *Txn, want, what string) {
	t.Helper()
	if got := read(t, tx, "Singers", str("1")); len(got) != 1 || got[0][1].GetStringValue() != want {
		t.Fatalf("Read of %s: %v, want name %q", what, got, want)
	}
	res, err := tx.ExecuteSQL(context.Background(), Statement{SQL: "SELECT Name FROM Singers WHERE SingerId = 1"})
	if err != nil || len(res.Rows) != 1 || res.Rows[0][0].GetStringValue() != want {
		t.Fatalf("query of %s: %v, %v; want name %q", what, res, err, want)
	}
}

// A transaction reads its own DML writes, through the Read API and through SQL, and later DML
// sees earlier DML.
func TestDMLReadYourWrites(t *testing.T) {
	db := newTestDB(t, singers)
	ctx := context.Background()
	tx, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if _, err := exec(t, tx, "INSERT INTO Singers (SingerId, Name) VALUES (1, 'a')", nil); err != nil {
		t.Fatal(err)
	}
	if n, err := exec(t, tx, "UPDATE Singers SET Name = 'b' WHERE SingerId = 1", nil); err != nil || n != 1 {
		t.Fatalf("update: %d, %v; want 1 row", n, err)
	}
	singerOneIs(t, tx, "b", "own write")
	if _, err := tx.Commit(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got := query(t, db, "SELECT Name FROM Singers"); len(got) != 1 || got[0][0].GetStringValue() != "b" {
		t.Errorf("after commit: %v", got)
	}
}

// A read of a table whose only DML in the transaction wrote no row (an update whose row did not
// qualify, as a consumer's version claim for an early event) has no own write to see: it is
// optimistic and leaves the lock free, and a commit to the row it read aborts the transaction. A
// read after DML that wrote a row of the table takes the lock and sees the write.
func TestNoOpDMLLeavesReadsOptimistic(t *testing.T) {
	e, db := newTestEngine(t, Options{LockWait: 20 * time.Millisecond}, singers)
	ctx := context.Background()
	cols := []string{"SingerId", "Name"}
	if err := commit(t, db, insert("Singers", cols, row(str("1"), str("a")))); err != nil {
		t.Fatal(err)
	}
	held := func() int64 {
		var n int64
		for _, ds := range e.Stats().ByDatabase {
			for _, c := range ds.HeldLocks {
				n += c
			}
		}
		return n
	}
	tx, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if n, err := exec(t, tx, "UPDATE Singers SET Name = 'b' WHERE SingerId = 1 AND Name = 'z'", nil); err != nil || n != 0 {
		t.Fatalf("update of a row that does not qualify: %d, %v; want 0 rows", n, err)
	}
	singerOneIs(t, tx, "a", "the row as committed, after DML that wrote nothing")
	if h := held(); h != 0 {
		t.Errorf("%d transactions held the lock for a read after DML that wrote nothing, want 0", h)
	}
	if err := commit(t, db, update("Singers", cols, row(str("1"), str("c")))); err != nil {
		t.Fatalf("a commit while the reader waits: %v (the lock is not free)", err)
	}
	if _, err := tx.Commit(ctx, nil); status.Code(err) != codes.Aborted {
		t.Errorf("commit of a transaction whose read was overwritten: got %v, want ABORTED", err)
	}

	tx, _ = db.Begin(TxnOptions{Mode: ReadWrite})
	if n, err := exec(t, tx, "UPDATE Singers SET Name = 'd' WHERE SingerId = 1 AND Name = 'c'", nil); err != nil || n != 1 {
		t.Fatalf("update: %d, %v; want 1 row", n, err)
	}
	singerOneIs(t, tx, "d", "own write")
	if h := held(); h != 1 {
		t.Errorf("%d transactions held the lock, want 1 (the read of a table its DML changed)", h)
	}
	if _, err := tx.Commit(ctx, nil); err != nil {
		t.Fatal(err)
	}
}

// DML that scans (UPDATE ... WHERE on a non-key column) cannot name the rows it read, so it
// keeps the lock to commit: a concurrent writer that could insert a matching row (a phantom)
// waits, and past LockWait is aborted; the scan's transaction commits.
func TestScanningDMLKeepsTheLock(t *testing.T) {
	e, db := newTestEngine(t, Options{LockWait: 20 * time.Millisecond}, singers)
	ctx := context.Background()
	cols := []string{"SingerId", "Name"}
	if err := commit(t, db, insert("Singers", cols, row(str("1"), str("new")))); err != nil {
		t.Fatal(err)
	}
	tx, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if n, err := exec(t, tx, "UPDATE Singers SET Name = 'done' WHERE Name = 'new'", nil); err != nil || n != 1 {
		t.Fatalf("update: %d, %v", n, err)
	}
	if err := commit(t, db, insert("Singers", cols, row(str("2"), str("new")))); status.Code(err) != codes.Aborted {
		t.Fatalf("concurrent insert of a matching row: got %v, want ABORTED after LockWait", err)
	}
	if _, err := tx.Commit(ctx, nil); err != nil {
		t.Fatalf("commit of the scanning update: %v", err)
	}
	got := query(t, db, "SELECT Name FROM Singers ORDER BY SingerId")
	want := [][]*structpb.Value{{str("done")}}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	if s := e.Stats(); s.LockTimeouts != 1 {
		t.Errorf("LockTimeouts = %d, want 1", s.LockTimeouts)
	}
}

// An INSERT OR IGNORE that skipped a row (a duplicate delivery) keeps the lock to commit: it
// read a key RETURNING does not report.
func TestIgnoredInsertKeepsTheLock(t *testing.T) {
	_, db := newTestEngine(t, Options{LockWait: 20 * time.Millisecond}, inbox)
	ctx := context.Background()
	id := map[string]*structpb.Value{"id": str("ev-1")}
	first, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if n, err := exec(t, first, insertInbox, id); err != nil || n != 1 {
		t.Fatalf("first delivery: %d, %v", n, err)
	}
	if _, err := first.Commit(ctx, nil); err != nil {
		t.Fatal(err)
	}
	dup, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if n, err := exec(t, dup, insertInbox, id); err != nil || n != 0 {
		t.Fatalf("duplicate delivery: %d, %v; want 0 rows", n, err)
	}
	other, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if _, err := exec(t, other, insertInbox, map[string]*structpb.Value{"id": str("ev-2")}); status.Code(err) != codes.Aborted {
		t.Fatalf("DML beside the duplicate: got %v, want ABORTED after LockWait", err)
	}
	if _, err := dup.Commit(ctx, nil); err != nil {
		t.Fatal(err)
	}
}

// DML whose result would change if run again (GENERATE_UUID) takes the lock for the rest of
// the transaction, as all DML did before: a second writer waits and, past LockWait, aborts.
func TestVolatileDMLHoldsTheLock(t *testing.T) {
	_, db := newTestEngine(t, Options{LockWait: 20 * time.Millisecond}, inbox)
	ctx := context.Background()
	holder, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if _, err := exec(t, holder, "INSERT INTO Inbox (Id) VALUES (GENERATE_UUID())", nil); err != nil {
		t.Fatal(err)
	}
	waiter, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if _, err := exec(t, waiter, insertInbox, map[string]*structpb.Value{"id": str("x")}); status.Code(err) != codes.Aborted {
		t.Fatalf("second writer: got %v, want ABORTED after LockWait", err)
	}
	if _, err := holder.Commit(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got := query(t, db, "SELECT COUNT(*) FROM Inbox"); got[0][0].GetStringValue() != "1" {
		t.Errorf("Inbox rows: %v, want 1", got)
	}
}

// A range read (all rows under a key prefix) conflicts only with writes inside its range: a row
// committed under another prefix leaves the reader alone, one under its prefix aborts it.
func TestRangeReadFootprint(t *testing.T) {
	db := newTestDB(t, `CREATE TABLE Lines (OrderId STRING(10) NOT NULL, Seq INT64 NOT NULL, Sku STRING(10)) PRIMARY KEY (OrderId, Seq)`)
	ctx := context.Background()
	cols := []string{"OrderId", "Seq", "Sku"}
	if err := commit(t, db, insert("Lines", cols, row(str("o1"), str("1"), str("A")), row(str("o2"), str("1"), str("B")))); err != nil {
		t.Fatal(err)
	}
	prefix := func(id string) *sppb.KeySet {
		return &sppb.KeySet{Ranges: []*sppb.KeyRange{{
			StartKeyType: &sppb.KeyRange_StartClosed{StartClosed: row(str(id))},
			EndKeyType:   &sppb.KeyRange_EndClosed{EndClosed: row(str(id))},
		}}}
	}
	readLines := func(tx *Txn, id string) int {
		res, err := tx.Read(ctx, ReadRequest{Table: "Lines", Columns: cols, KeySet: prefix(id)})
		if err != nil {
			t.Fatal(err)
		}
		return len(res.Rows)
	}
	writer, _ := db.Begin(TxnOptions{Mode: ReadWrite}) // older than the readers: it does not wait for them
	untouched, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	touched, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if readLines(untouched, "o1") != 1 || readLines(touched, "o2") != 1 {
		t.Fatal("each order has one line")
	}
	if _, err := writer.Commit(ctx, []*sppb.Mutation{insert("Lines", cols, row(str("o2"), str("2"), str("C")))}); err != nil {
		t.Fatal(err)
	}
	if _, err := untouched.Commit(ctx, []*sppb.Mutation{insert("Lines", cols, row(str("o1"), str("2"), str("D")))}); err != nil {
		t.Errorf("commit after a write outside the range read: %v", err)
	}
	if _, err := touched.Commit(ctx, []*sppb.Mutation{insert("Lines", cols, row(str("o2"), str("3"), str("E")))}); status.Code(err) != codes.Aborted {
		t.Errorf("commit after a write inside the range read: got %v, want ABORTED", err)
	}
	if got := query(t, db, "SELECT COUNT(*) FROM Lines"); got[0][0].GetStringValue() != "4" {
		t.Errorf("Lines rows: %v, want 4", got)
	}
}

// A query forcing a NULL_FILTERED index returns only the rows the index holds (those with every
// index key non-NULL), as Spanner does, and SQLite answers it from the index instead of scanning
// the table, also when a key column is NOT NULL (the relay's pending scan).
func TestForceNullFilteredIndex(t *testing.T) {
	db := newTestDB(t, `CREATE TABLE Events (Id STRING(10) NOT NULL, Shard INT64, CreatedAt INT64 NOT NULL) PRIMARY KEY (Id)`,
		`CREATE NULL_FILTERED INDEX Pending ON Events (Shard, CreatedAt)`)
	cols := []string{"Id", "Shard", "CreatedAt"}
	null := structpb.NewNullValue()
	if err := commit(t, db, insert("Events", cols, row(str("a"), str("1"), str("10")), row(str("b"), null, str("11")),
		row(str("c"), null, str("13")), row(str("d"), str("2"), str("12")))); err != nil {
		t.Fatal(err)
	}
	want := [][]*structpb.Value{{str("a")}, {str("d")}}
	if diff := cmp.Diff(want, query(t, db, "SELECT Id FROM Events@{FORCE_INDEX=Pending} ORDER BY Id"), protocmp.Transform()); diff != "" {
		t.Errorf("rows through the index (-want +got):\n%s", diff)
	}
	if got := query(t, db, "SELECT COUNT(*) FROM Events"); got[0][0].GetStringValue() != "4" {
		t.Errorf("rows through the base table: %v, want 4", got)
	}
	stmt, err := parseStatement("SELECT Id FROM Events@{FORCE_INDEX=Pending} WHERE Shard = @shard ORDER BY CreatedAt")
	if err != nil {
		t.Fatal(err)
	}
	c, err := db.compile(db.Schema(), Statement{}, stmt, nil)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := db.sqldb.Query("EXPLAIN QUERY PLAN "+c.SQL, int64(1))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if len(plan) == 0 || !strings.Contains(strings.Join(plan, "; "), "INDEX Pending (Shard=?") {
		t.Errorf("query plan %q does not use index Pending", plan)
	}
}

// An UPDATE whose WHERE pins the primary key reads only that row: updates of different rows run
// side by side, a concurrent commit to its row aborts it, and so does the insert of the row it
// found missing.
func TestUpdateByKeyFootprint(t *testing.T) {
	_, db := newTestEngine(t, Options{LockWait: 20 * time.Millisecond}, singers)
	ctx := context.Background()
	cols := []string{"SingerId", "Name"}
	if err := commit(t, db, insert("Singers", cols, row(str("1"), str("a")), row(str("2"), str("b")))); err != nil {
		t.Fatal(err)
	}
	const upd = "UPDATE Singers SET Name = @name WHERE SingerId = @id AND Name IS NOT NULL"
	set := func(tx *Txn, id, name string) int64 {
		t.Helper()
		res, err := tx.ExecuteSQL(ctx, Statement{SQL: upd,
			Params:     &structpb.Struct{Fields: map[string]*structpb.Value{"id": str(id), "name": str(name)}},
			ParamTypes: map[string]*sppb.Type{"id": {Code: sppb.TypeCode_INT64}, "name": {Code: sppb.TypeCode_STRING}}})
		if err != nil {
			t.Fatalf("update %s: %v", id, err)
		}
		return res.RowCount
	}
	one, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	two, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	stale, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	missing, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if set(one, "1", "one") != 1 || set(two, "2", "two") != 1 || set(stale, "1", "stale") != 1 || set(missing, "3", "none") != 0 {
		t.Fatal("unexpected row counts")
	}
	if _, err := one.Commit(ctx, nil); err != nil {
		t.Fatalf("commit one: %v", err)
	}
	if _, err := two.Commit(ctx, nil); err != nil {
		t.Fatalf("commit two (another row): %v", err)
	}
	if _, err := stale.Commit(ctx, nil); status.Code(err) != codes.Aborted {
		t.Errorf("commit of an update to a row committed meanwhile: got %v, want ABORTED", err)
	}
	if err := commit(t, db, insert("Singers", cols, row(str("3"), str("c")))); err != nil {
		t.Fatal(err)
	}
	if _, err := missing.Commit(ctx, nil); status.Code(err) != codes.Aborted {
		t.Errorf("commit of an update that found no row, after the row was inserted: got %v, want ABORTED", err)
	}
	got := query(t, db, "SELECT Name FROM Singers ORDER BY SingerId")
	want := [][]*structpb.Value{{str("one")}, {str("two")}, {str("c")}}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
}

// Without version history an exact-timestamp read of the latest data still works, and one from
// before the latest commit fails with FAILED_PRECONDITION saying why.
func TestNoHistory(t *testing.T) {
	_, db := newTestEngine(t, Options{NoHistory: true}, singers)
	ctx := context.Background()
	cols := []string{"SingerId", "Name"}
	var stamps []time.Time
	for _, name := range []string{"a", "b"} {
		tx, _ := db.Begin(TxnOptions{Mode: ReadWrite})
		ts, err := tx.Commit(ctx, []*sppb.Mutation{{Operation: &sppb.Mutation_InsertOrUpdate{InsertOrUpdate: &sppb.Mutation_Write{
			Table: "Singers", Columns: cols, Values: []*structpb.ListValue{row(str("1"), str(name))}}}}})
		if err != nil {
			t.Fatal(err)
		}
		stamps = append(stamps, ts)
	}
	at := func(ts time.Time) (*Result, error) {
		ro, err := db.Begin(TxnOptions{Mode: ReadOnly, SingleUse: true,
			ReadOnly: &sppb.TransactionOptions_ReadOnly{TimestampBound: &sppb.TransactionOptions_ReadOnly_ReadTimestamp{ReadTimestamp: timestamppb.New(ts)}}})
		if err != nil {
			t.Fatal(err)
		}
		defer ro.Rollback()
		return ro.ExecuteSQL(ctx, Statement{SQL: "SELECT Name FROM Singers"})
	}
	if res, err := at(stamps[1]); err != nil || len(res.Rows) != 1 || res.Rows[0][0].GetStringValue() != "b" {
		t.Errorf("read at the latest commit: %v, %v", res, err)
	}
	_, err := at(stamps[0])
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "no version history") {
		t.Errorf("read before the latest commit: got %v, want FAILED_PRECONDITION naming the missing history", err)
	}
}

// The janitor forgets recorded writes no open transaction can conflict with, and keeps those an
// optimistic reader must still be checked against, even while that reader is busy.
func TestPruneKeepsWritesOpenReadsNeed(t *testing.T) {
	db := newTestDB(t, singers)
	ctx := context.Background()
	cols := []string{"SingerId", "Name"}
	writer, _ := db.Begin(TxnOptions{Mode: ReadWrite}) // older than the reader: it does not wait for it
	reader, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if err := commit(t, db, insert("Singers", cols, row(str("1"), str("a")))); err != nil {
		t.Fatal(err)
	}
	read(t, reader, "Singers", str("2"))
	if _, err := writer.Commit(ctx, []*sppb.Mutation{insert("Singers", cols, row(str("2"), str("x")))}); err != nil {
		t.Fatal(err)
	}
	if err := commit(t, db, insert("Singers", cols, row(str("3"), str("x")))); err != nil {
		t.Fatal(err)
	}
	reader.mu.Lock() // busy with a request: the janitor must not need its lock
	db.abortIdle(time.Now())
	reader.mu.Unlock()
	db.mu.Lock()
	kept := len(db.occ.log)
	db.mu.Unlock()
	if kept != 2 {
		t.Errorf("log keeps %d commits, want the 2 after the open read", kept)
	}
	if _, err := reader.Commit(ctx, nil); status.Code(err) != codes.Aborted {
		t.Errorf("reader commit after its key was written: got %v, want ABORTED", err)
	}
	db.abortIdle(time.Now())
	db.mu.Lock()
	kept = len(db.occ.log)
	db.mu.Unlock()
	if kept != 0 {
		t.Errorf("log keeps %d commits with no open read, want 0", kept)
	}
}

// Stats count each database's commits and the rows they wrote, DML and mutations alike.
func TestStatsByDatabase(t *testing.T) {
	e, db := newTestEngine(t, Options{}, inbox, singers)
	if err := commit(t, db, insert("Singers", []string{"SingerId", "Name"}, row(str("1"), str("a")), row(str("2"), str("b")))); err != nil {
		t.Fatal(err)
	}
	tx, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if n, err := exec(t, tx, insertInbox, map[string]*structpb.Value{"id": str("ev-1")}); err != nil || n != 1 {
		t.Fatalf("inserted %d, %v", n, err)
	}
	if _, err := tx.Commit(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	s := e.Stats()
	if len(s.ByDatabase) != 1 {
		t.Fatalf("ByDatabase %+v: want one database", s.ByDatabase)
	}
	for name, got := range s.ByDatabase {
		if want := (DatabaseStats{Commits: 2, RowsWritten: 3}); !cmp.Equal(got, want) || s.Commits != 2 {
			t.Errorf("database %s: %+v (engine commits %d), want %+v", name, got, s.Commits, want)
		}
	}
}

// An index read covers its index range and the rows it returned, not its whole table: a commit
// that writes a row outside the range (or a row's other columns, outside the range) leaves it
// valid; one that moves a row into the range, or changes a row it returned, makes it stale.
func TestIndexReadFootprint(t *testing.T) {
	ctx := context.Background()
	cols := []string{"Id", "Status", "Note"}
	for _, tc := range []struct {
		name  string
		write *sppb.Mutation
		stale bool
	}{
		{"a new row outside the range", insert("Items", cols, row(str("3"), str("B"), str("x"))), false},
		{"another column of a row outside the range", update("Items", []string{"Id", "Note"}, row(str("2"), str("y"))), false},
		{"a row moved between two other values", update("Items", []string{"Id", "Status"}, row(str("2"), str("C"))), false},
		{"a new row in the range", insert("Items", cols, row(str("3"), str("A"), str("x"))), true},
		{"a row moved into the range", update("Items", []string{"Id", "Status"}, row(str("2"), str("A"))), true},
		{"a row moved into the range, its table and columns named in lower case", update("items", []string{"id", "status"}, row(str("2"), str("A"))), true},
		{"another column of a row outside the range, named in lower case", update("items", []string{"id", "note"}, row(str("2"), str("y"))), false},
		{"a row of the range changed", update("Items", []string{"Id", "Note"}, row(str("1"), str("z"))), true},
		{"a row of the range moved out", update("Items", []string{"Id", "Status"}, row(str("1"), str("B"))), true},
		{"a row of the range deleted", &sppb.Mutation{Operation: &sppb.Mutation_Delete_{Delete: &sppb.Mutation_Delete{Table: "Items", KeySet: &sppb.KeySet{Keys: []*structpb.ListValue{row(str("1"))}}}}}, true},
		{"a new row whose index key the write does not give (a needless abort, but safe)", insert("Items", []string{"Id", "Note"}, row(str("3"), str("x"))), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := newTestDB(t, `CREATE TABLE Items (Id INT64 NOT NULL, Status STRING(10), Note STRING(10)) PRIMARY KEY (Id)`,
				`CREATE INDEX ItemsByStatus ON Items(Status)`)
			if err := commit(t, db, insert("Items", cols, row(str("1"), str("A"), str("n")), row(str("2"), str("B"), str("n")))); err != nil {
				t.Fatal(err)
			}
			writer, _ := db.Begin(TxnOptions{Mode: ReadWrite}) // older than the reader: it does not wait
			reader, _ := db.Begin(TxnOptions{Mode: ReadWrite})
			res, err := reader.Read(ctx, ReadRequest{Table: "Items", Index: "ItemsByStatus", Columns: []string{"Id"},
				KeySet: &sppb.KeySet{Keys: []*structpb.ListValue{row(str("A"))}}})
			if err != nil || len(res.Rows) != 1 || len(res.Rows[0]) != 1 {
				t.Fatalf("index read: %v, %v; want row 1 alone, its one column", res, err)
			}
			if _, err := writer.Commit(ctx, []*sppb.Mutation{tc.write}); err != nil {
				t.Fatal(err)
			}
			_, err = reader.Commit(ctx, []*sppb.Mutation{insert("Items", cols, row(str("9"), str("Z"), str("r")))})
			if got := status.Code(err) == codes.Aborted; got != tc.stale {
				t.Errorf("reader's commit: %v; want aborted %v", err, tc.stale)
			}
		})
	}
}

// batch runs statements as one BatchDML in tx and returns their row counts.
func batch(t *testing.T, tx *Txn, sts ...Statement) ([]int64, error) {
	t.Helper()
	res, err := tx.BatchDML(context.Background(), sts)
	counts := make([]int64, len(res))
	for i, r := range res {
		counts[i] = r.RowCount
	}
	return counts, err
}

// A batch of DML runs its statements together, as a consumer's inbox row and version claim are:
// exact statements leave the lock free between requests and their footprints are validated at
// commit; a statement that is not exact (an ignored insert) makes the transaction keep the lock
// from there on, with the batch's earlier effects in place and its later statements run under
// it; a failing statement stops the batch, and those before it stay applied.
func TestBatchDML(t *testing.T) {
	e, db := newTestEngine(t, Options{LockWait: 20 * time.Millisecond}, inbox, singers)
	ctx := context.Background()
	cols := []string{"SingerId", "Name"}
	if err := commit(t, db, insert("Singers", cols, row(str("1"), str("a")), row(str("2"), str("b")))); err != nil {
		t.Fatal(err)
	}
	inboxRow := func(id string) Statement {
		return Statement{SQL: insertInbox, Params: &structpb.Struct{Fields: map[string]*structpb.Value{"id": str(id)}}}
	}
	rename := func(id, name string) Statement {
		return Statement{SQL: "UPDATE Singers SET Name = @name WHERE SingerId = @id",
			Params:     &structpb.Struct{Fields: map[string]*structpb.Value{"id": str(id), "name": str(name)}},
			ParamTypes: map[string]*sppb.Type{"id": {Code: sppb.TypeCode_INT64}, "name": {Code: sppb.TypeCode_STRING}}}
	}
	held := func() map[string]int64 {
		for _, ds := range e.Stats().ByDatabase {
			return ds.HeldLocks
		}
		return nil
	}

	a, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	b, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	for _, step := range []struct {
		tx       *Txn
		id, name string
	}{{a, "ev-a", "by-a"}, {b, "ev-b", "by-b"}} {
		if n, err := batch(t, step.tx, inboxRow(step.id), rename("1", step.name)); err != nil || !cmp.Equal(n, []int64{1, 1}) {
			t.Fatalf("%s: counts %v, %v; want [1 1]", step.id, n, err)
		}
	}
	if h := held(); len(h) != 0 {
		t.Fatalf("exact batches held the lock: %v", h)
	}
	if _, err := a.Commit(ctx, nil); err != nil {
		t.Fatalf("commit a: %v", err)
	}
	if _, err := b.Commit(ctx, nil); status.Code(err) != codes.Aborted {
		t.Fatalf("commit b, whose batch updated the row a committed: got %v, want ABORTED", err)
	}

	// ev-a is in the inbox: ignored, so the transaction keeps the lock, and the update after it
	// runs under it.
	c, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if n, err := batch(t, c, rename("2", "by-c"), inboxRow("ev-a"), rename("1", "by-c")); err != nil || !cmp.Equal(n, []int64{1, 0, 1}) {
		t.Fatalf("batch with an ignored insert: counts %v, %v; want [1 0 1]", n, err)
	}
	if h := held(); len(h) != 1 || h["DML not exact: "+insertInbox] != 1 {
		t.Errorf("held locks %v, want one for the ignored insert", h)
	}
	if _, err := c.Commit(ctx, nil); err != nil {
		t.Fatalf("commit c: %v", err)
	}

	d, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	dup := Statement{SQL: "INSERT INTO Singers (SingerId, Name) VALUES (2, 'again')"}
	n, err := batch(t, d, rename("1", "by-d"), dup, rename("2", "never"))
	if status.Code(err) != codes.AlreadyExists || !cmp.Equal(n, []int64{1}) {
		t.Fatalf("batch with a duplicate insert: counts %v, %v; want [1] and ALREADY_EXISTS", n, err)
	}
	if _, err := d.Commit(ctx, nil); err != nil {
		t.Fatalf("commit d: %v", err)
	}
	got := query(t, db, "SELECT Name FROM Singers ORDER BY SingerId")
	want := [][]*structpb.Value{{str("by-d")}, {str("by-c")}}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("Singers (-want +got):\n%s", diff)
	}
}

// Reads of committed data run on the writer connection while no transaction holds the write
// lock (its page cache survives the commits, DB.reader), and on a pooled connection while one
// does: there, a transaction holding the lock across its requests has its DML applied and not
// committed, and no other transaction may see it. Reads of every kind (a read-write
// transaction's Read and query, a single-use read, a read-only transaction's) see the committed
// row, not the DML.
func TestReadsOfCommittedDataSkipALockHoldersDML(t *testing.T) {
	db := newTestDB(t, singers)
	ctx := context.Background()
	cols := []string{"SingerId", "Name"}
	if err := commit(t, db, insert("Singers", cols, row(str("1"), str("a")))); err != nil {
		t.Fatal(err)
	}
	q, done := db.reader()
	if q != querier(db.writer) {
		t.Fatalf("reader with the lock free: %T, want the writer", q)
	}
	if q2, done2 := db.reader(); q2 != querier(db.pool) {
		t.Errorf("reader with the lock taken by a reader: %T, want the pool", q2)
	} else {
		done2()
	}
	done()
	if err := commit(t, db, update("Singers", cols, row(str("1"), str("b")))); err != nil {
		t.Fatalf("a commit after the reader gave the lock back: %v", err)
	}

	holder, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if n, err := exec(t, holder, "UPDATE Singers SET Name = 'open' WHERE SingerId = 1", nil); err != nil || n != 1 {
		t.Fatalf("update: %d, %v", n, err)
	}
	singerOneIs(t, holder, "open", "its own write") // takes the lock for the rest of its life
	if !holder.hasLock {
		t.Fatal("the transaction that read its own DML does not hold the lock")
	}
	if q, done := db.reader(); q != querier(db.pool) {
		t.Errorf("reader while a transaction holds the lock: %T, want the pool", q)
	} else {
		done()
	}
	other, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	singerOneIs(t, other, "b", "a read-write transaction's read while another holds the lock")
	other.Rollback()
	for _, opts := range []TxnOptions{{Mode: ReadOnly, SingleUse: true}, {Mode: ReadOnly}} {
		ro, _ := db.Begin(opts)
		res, err := ro.ExecuteSQL(ctx, Statement{SQL: "SELECT Name FROM Singers WHERE SingerId = 1"})
		if err != nil || len(res.Rows) != 1 || res.Rows[0][0].GetStringValue() != "b" {
			t.Errorf("read-only query (single use %v) while another holds the lock: %v, %v; want name \"b\"", opts.SingleUse, res, err)
		}
		ro.Rollback()
	}
	if _, err := holder.Commit(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got := query(t, db, "SELECT Name FROM Singers WHERE SingerId = 1"); len(got) != 1 || got[0][0].GetStringValue() != "open" {
		t.Errorf("after the commit: %v", got)
	}
}
