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
