package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"
)

func execSQL(t *testing.T, tx *Txn, sql string) *Result {
	t.Helper()
	res, err := tx.ExecuteSQL(context.Background(), Statement{SQL: sql})
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return res
}

// A SQL query in a read-write transaction takes no lock and conflicts only with a commit that
// changes its answer: other commits to its table go through while it is open (with a short
// LockWait they would time out behind a lock), a commit of a row it did not select leaves it
// valid, and a phantom (a new row matching its WHERE) aborts it.
func TestQueryConflictsWithItsAnswerOnly(t *testing.T) {
	e, db := newTestEngine(t, Options{LockWait: 50 * time.Millisecond}, singers)
	cols := []string{"SingerId", "Name"}
	if err := commit(t, db, insert("Singers", cols, row(str("1"), str("a")), row(str("2"), str("b")))); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	q := "SELECT SingerId FROM Singers WHERE Name = 'a'"

	tx, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	got := execSQL(t, tx, q)
	if diff := cmp.Diff([][]*structpb.Value{{str("1")}}, got.Rows, protocmp.Transform()); diff != "" {
		t.Fatalf("query (-want +got):\n%s", diff)
	}
	if err := commit(t, db, update("Singers", cols, row(str("2"), str("c")))); err != nil {
		t.Fatalf("a commit to the queried table while the query's transaction is open: %v", err)
	}
	execSQL(t, tx, q) // checks the first answer again, still the same
	if _, err := tx.Commit(ctx, []*sppb.Mutation{update("Singers", cols, row(str("1"), str("a1")))}); err != nil {
		t.Fatalf("commit after a write to a row the query did not select: %v", err)
	}

	tx, _ = db.Begin(TxnOptions{Mode: ReadWrite})
	execSQL(t, tx, "SELECT SingerId FROM Singers WHERE Name = 'c'")
	if err := commit(t, db, insert("Singers", cols, row(str("3"), str("c")))); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx, []*sppb.Mutation{update("Singers", cols, row(str("2"), str("c2")))}); status.Code(err) != codes.Aborted {
		t.Fatalf("commit after a phantom: %v, want ABORTED", err)
	}
	st := e.Stats()
	if st.LockTimeouts != 0 || st.Conflicts != 1 || st.ByDatabase["d"].ConflictsBy["SINGERS query"] != 1 {
		t.Errorf("lock timeouts %d, conflicts %d (%v); want 0 and 1 SINGERS query", st.LockTimeouts, st.Conflicts, st.ByDatabase)
	}
}

// A query sees the transaction's own DML, and is checked again on that DML as it stood when the
// query ran (not on DML that came after it).
func TestQueryAfterOwnDML(t *testing.T) {
	_, db := newTestEngine(t, Options{LockWait: time.Minute}, singers)
	cols := []string{"SingerId", "Name"}
	if err := commit(t, db, insert("Singers", cols, row(str("1"), str("a")), row(str("2"), str("b")))); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tx, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	execSQL(t, tx, "UPDATE Singers SET Name = 'z' WHERE SingerId = 1")
	got := execSQL(t, tx, "SELECT COUNT(*) FROM Singers WHERE Name = 'z'")
	if diff := cmp.Diff([][]*structpb.Value{{str("1")}}, got.Rows, protocmp.Transform()); diff != "" {
		t.Fatalf("the query sees the transaction's own update (-want +got):\n%s", diff)
	}
	execSQL(t, tx, "UPDATE Singers SET Name = 'z' WHERE SingerId = 2") // after the query
	if err := commit(t, db, insert("Singers", cols, row(str("3"), str("y")))); err != nil {
		t.Fatal(err) // changes the table, not the answer: the query runs again at commit
	}
	if _, err := tx.Commit(ctx, nil); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if got := query(t, db, "SELECT COUNT(*) FROM Singers WHERE Name = 'z'"); !cmp.Equal(got, [][]*structpb.Value{{str("2")}}, protocmp.Transform()) {
		t.Errorf("rows named z: %v, want 2", got)
	}
}

// A query of tables the transaction's own DML did not change reads committed data without the
// lock, as a read does: it does not wait behind a transaction that holds the lock, and it is
// still validated by its answer at commit.
func TestQueryOfOtherTablesAfterDMLTakesNoLock(t *testing.T) {
	e, db := newTestEngine(t, Options{LockWait: 50 * time.Millisecond}, singers,
		`CREATE TABLE Labels (LabelId INT64 NOT NULL, Name STRING(10)) PRIMARY KEY (LabelId)`)
	if err := commit(t, db, insert("Labels", []string{"LabelId", "Name"}, row(str("1"), str("a")))); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tx, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	execSQL(t, tx, "INSERT INTO Singers (SingerId, Name) VALUES (1, 's')")
	holder, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if _, err := holder.ExecuteSQL(ctx, Statement{SQL: scanningDML}); err != nil {
		t.Fatal(err)
	}
	got := execSQL(t, tx, "SELECT Name FROM Labels WHERE LabelId = 1") // would time out behind holder under the lock
	if diff := cmp.Diff([][]*structpb.Value{{str("a")}}, got.Rows, protocmp.Transform()); diff != "" {
		t.Fatalf("query (-want +got):\n%s", diff)
	}
	if _, err := holder.Commit(ctx, []*sppb.Mutation{update("Labels", []string{"LabelId", "Name"}, row(str("1"), str("b")))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx, nil); status.Code(err) != codes.Aborted {
		t.Fatalf("commit after its query's answer changed: %v, want ABORTED", err)
	}
	st := e.Stats()
	if st.LockTimeouts != 0 || st.ByDatabase["d"].ConflictsBy["LABELS query"] != 1 {
		t.Errorf("lock timeouts %d, conflicts %v; want 0 and 1 LABELS query", st.LockTimeouts, st.ByDatabase["d"].ConflictsBy)
	}
}

const aggregates = `CREATE TABLE Orders (OrderId STRING(36) NOT NULL, Status STRING(20)) PRIMARY KEY (OrderId);
CREATE TABLE Lines (OrderId STRING(36) NOT NULL, LineNo INT64 NOT NULL, Sku STRING(20)) PRIMARY KEY (OrderId, LineNo),
  INTERLEAVE IN PARENT Orders ON DELETE CASCADE`

// aggregateSQL reads one order with its lines and their count: the shape of a service's read of
// one aggregate (sqlgen's keyReads).
const aggregateSQL = `SELECT o.Status,
  ARRAY(SELECT AS STRUCT l.LineNo, l.Sku FROM Lines AS l WHERE l.OrderId = o.OrderId ORDER BY l.LineNo) AS Lines,
  (SELECT COUNT(*) FROM Lines AS n WHERE n.OrderId = o.OrderId) AS N
FROM Orders AS o WHERE o.OrderId = @id`

// A query that reads one aggregate by key is validated by the keys commits wrote, as a Read is:
// commits to other aggregates of its tables leave it valid without running it again at commit;
// a commit that changes its root row, or adds, changes or removes a row in its children's key
// range, aborts its transaction. A query of another shape is still run again at commit. (Like a
// Read it also makes a younger transaction that writes those rows wait for it; the writers here
// are older.)
func TestAggregateQueryIsValidatedByItsKeys(t *testing.T) {
	e, db := newTestEngine(t, Options{LockWait: time.Minute}, strings.Split(aggregates, ";\n")...)
	ctx := context.Background()
	orderCols, lineCols := []string{"OrderId", "Status"}, []string{"OrderId", "LineNo", "Sku"}
	if err := commit(t, db,
		insert("Orders", orderCols, row(str("a"), str("NEW")), row(str("b"), str("NEW"))),
		insert("Lines", lineCols, row(str("a"), str("1"), str("x")), row(str("b"), str("1"), str("y")))); err != nil {
		t.Fatal(err)
	}
	readA := func(tx *Txn) {
		t.Helper()
		res, err := tx.ExecuteSQL(ctx, Statement{SQL: aggregateSQL, Params: &structpb.Struct{Fields: map[string]*structpb.Value{"id": str("a")}},
			ParamTypes: map[string]*sppb.Type{"id": {Code: sppb.TypeCode_STRING}}})
		if err != nil || len(res.Rows) != 1 {
			t.Fatalf("read of order a: %v, %v", res, err)
		}
	}
	// commitOlder commits muts in a transaction begun before tx: a younger one would wait for
	// tx, which read what it writes, as it waits for an older Read (readers.go).
	commitOlder := func(older *Txn, muts ...*sppb.Mutation) error {
		_, err := older.Commit(ctx, muts)
		return err
	}
	rechecks := func() int64 { return e.Stats().QueryRechecks }

	// Another aggregate's writes: no conflict, no re-run.
	older, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	tx, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	readA(tx)
	if err := commitOlder(older, update("Orders", orderCols, row(str("b"), str("PAID"))),
		insert("Lines", lineCols, row(str("b"), str("2"), str("z")))); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx, []*sppb.Mutation{update("Orders", orderCols, row(str("a"), str("NEW")))}); err != nil {
		t.Fatalf("commit after writes to another order only: %v", err)
	}
	if n := rechecks(); n != 0 {
		t.Errorf("the aggregate query ran again %d times at commit, want 0", n)
	}

	// Its own aggregate's writes: the root row, a new line, a changed line, a removed line.
	for _, w := range []struct {
		what string
		mut  *sppb.Mutation
	}{
		{"the order's row", update("Orders", orderCols, row(str("a"), str("SHIPPED")))},
		{"a new line", insert("Lines", lineCols, row(str("a"), str("2"), str("w")))},
		{"a changed line", update("Lines", lineCols, row(str("a"), str("1"), str("v")))},
		{"a removed line", &sppb.Mutation{Operation: &sppb.Mutation_Delete_{Delete: &sppb.Mutation_Delete{Table: "Lines",
			KeySet: &sppb.KeySet{Keys: []*structpb.ListValue{row(str("a"), str("2"))}}}}}},
	} {
		older, _ := db.Begin(TxnOptions{Mode: ReadWrite})
		tx, _ := db.Begin(TxnOptions{Mode: ReadWrite})
		readA(tx)
		if err := commitOlder(older, w.mut); err != nil {
			t.Fatalf("%s: %v", w.what, err)
		}
		if _, err := tx.Commit(ctx, []*sppb.Mutation{update("Orders", orderCols, row(str("a"), str("NEW")))}); status.Code(err) != codes.Aborted {
			t.Errorf("commit after a concurrent write of %s: %v, want ABORTED", w.what, err)
		}
	}

	// Not the shape (the key is not pinned): run again at commit, as before.
	tx, _ = db.Begin(TxnOptions{Mode: ReadWrite})
	execSQL(t, tx, "SELECT Status FROM Orders WHERE Status = 'NEW'")
	if err := commit(t, db, update("Orders", orderCols, row(str("b"), str("DONE")))); err != nil {
		t.Fatal(err)
	}
	before := rechecks()
	if _, err := tx.Commit(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if n := rechecks() - before; n != 1 {
		t.Errorf("a query by status ran again %d times at commit, want 1", n)
	}
}

// Queries that read rows by sets of keys (key IN UNNEST(@array)) and selects of such subqueries
// without FROM are validated by those keys too: a commit of other keys of their tables neither
// aborts them nor runs them again at commit; a commit that writes one of the keys (a row that was
// absent included), or a row in one of the key ranges (a new line of an order read by its key),
// aborts them.
func TestKeySetQueryIsValidatedByItsKeys(t *testing.T) {
	e, db := newTestEngine(t, Options{LockWait: time.Minute}, strings.Split(aggregates, ";\n")...)
	ctx := context.Background()
	orderCols, lineCols := []string{"OrderId", "Status"}, []string{"OrderId", "LineNo", "Sku"}
	if err := commit(t, db,
		insert("Orders", orderCols, row(str("a"), str("NEW")), row(str("b"), str("NEW")), row(str("c"), str("NEW"))),
		insert("Lines", lineCols, row(str("a"), str("1"), str("x")), row(str("b"), str("1"), str("y")), row(str("c"), str("1"), str("z")))); err != nil {
		t.Fatal(err)
	}
	strs := func(ss ...string) *structpb.Value {
		vs := make([]*structpb.Value, len(ss))
		for i, s := range ss {
			vs[i] = str(s)
		}
		return structpb.NewListValue(&structpb.ListValue{Values: vs})
	}
	stringType, arrayType := &sppb.Type{Code: sppb.TypeCode_STRING}, &sppb.Type{Code: sppb.TypeCode_ARRAY, ArrayElementType: &sppb.Type{Code: sppb.TypeCode_STRING}}
	line := 1 // the last line number used
	newLine := func(order string) *sppb.Mutation {
		line++
		return insert("Lines", lineCols, row(str(order), str(fmt.Sprint(line)), str("n")))
	}
	for _, q := range []struct {
		name    string
		st      Statement
		aborted []string // the writes below that abort it
	}{
		{"orders a and b with their lines", Statement{
			SQL: `SELECT o.OrderId, o.Status, ARRAY(SELECT AS STRUCT l.LineNo FROM Lines AS l WHERE l.OrderId = o.OrderId) AS Lines
FROM Orders AS o WHERE o.OrderId IN UNNEST(@ids)`,
			Params: &structpb.Struct{Fields: map[string]*structpb.Value{"ids": strs("a", "b")}}, ParamTypes: map[string]*sppb.Type{"ids": arrayType}},
			[]string{"order b", "a new line of order b"}},
		{"order a, absent order q and the lines of a and b, without FROM", Statement{
			SQL: `SELECT ARRAY(SELECT AS STRUCT Status FROM Orders WHERE OrderId = @id) AS A, ARRAY(SELECT AS STRUCT Status FROM Orders WHERE OrderId = @absent) AS Q,
  ARRAY(SELECT AS STRUCT LineNo FROM Lines WHERE OrderId IN UNNEST(@ids)) AS L`,
			Params:     &structpb.Struct{Fields: map[string]*structpb.Value{"id": str("a"), "absent": str("q"), "ids": strs("a", "b")}},
			ParamTypes: map[string]*sppb.Type{"id": stringType, "absent": stringType, "ids": arrayType}},
			[]string{"a new line of order b", "order q"}},
	} {
		for _, w := range []struct {
			what string
			mut  func() *sppb.Mutation
		}{
			{"order c", func() *sppb.Mutation { return update("Orders", orderCols, row(str("c"), str("PAID"))) }},
			{"a new line of order c", func() *sppb.Mutation { return newLine("c") }},
			{"order b", func() *sppb.Mutation { return update("Orders", orderCols, row(str("b"), str("SHIPPED"))) }},
			{"a new line of order b", func() *sppb.Mutation { return newLine("b") }},
			{"order q", func() *sppb.Mutation {
				return &sppb.Mutation{Operation: &sppb.Mutation_InsertOrUpdate{InsertOrUpdate: &sppb.Mutation_Write{Table: "Orders", Columns: orderCols, Values: []*structpb.ListValue{row(str("q"), str("NEW"))}}}}
			}},
		} {
			before := e.Stats().QueryRechecks
			older, _ := db.Begin(TxnOptions{Mode: ReadWrite})
			tx, _ := db.Begin(TxnOptions{Mode: ReadWrite})
			if _, err := tx.ExecuteSQL(ctx, q.st); err != nil {
				t.Fatalf("%s: %v", q.name, err)
			}
			if _, err := older.Commit(ctx, []*sppb.Mutation{w.mut()}); err != nil {
				t.Fatalf("%s: %v", w.what, err)
			}
			_, err := tx.Commit(ctx, []*sppb.Mutation{update("Orders", orderCols, row(str("a"), str("NEW")))})
			if slices.Contains(q.aborted, w.what) {
				if status.Code(err) != codes.Aborted {
					t.Errorf("%s: commit after a concurrent write of %s: %v, want ABORTED", q.name, w.what, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: commit after a concurrent write of %s, which it did not read: %v", q.name, w.what, err)
			}
			if n := e.Stats().QueryRechecks - before; n != 0 {
				t.Errorf("%s: run again %d times at commit after a write of %s, want 0", q.name, n, w.what)
			}
		}
	}
}
