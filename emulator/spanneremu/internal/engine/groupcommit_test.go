package engine

import (
	"context"
	"testing"
	"time"

	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// queueCommit commits tx's muts in the background once tx is set up, and returns when the commit
// waits in the database's commit queue (n commits queued then), so that commits queue in the
// order the test starts them.
func queueCommit(t *testing.T, db *DB, tx *Txn, n int, muts ...*sppb.Mutation) <-chan commitOutcome {
	t.Helper()
	out := make(chan commitOutcome, 1)
	go func() {
		ts, err := tx.Commit(context.Background(), muts)
		out <- commitOutcome{ts, err}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for db.queue.queued() < n {
		if time.Now().After(deadline) {
			t.Fatalf("commits queued: %d, want %d", db.queue.queued(), n)
		}
		time.Sleep(time.Millisecond)
	}
	return out
}

type commitOutcome struct {
	ts  time.Time
	err error
}

// The commits queued behind the lock's holder are committed in its SQLite transaction, each as
// if it had taken the lock after the one before: one whose read a member before it overwrote is
// aborted, one whose query's table the group wrote has its query run again (with its own DML
// replayed first) and commits if its answer is the same, is aborted if not, one that breaks a constraint fails alone, and every other gets a
// commit timestamp of its own, after the one before, with its PENDING_COMMIT_TIMESTAMP() values.
func TestGroupCommit(t *testing.T) {
	e, db := newTestEngine(t, Options{NoHistory: true, LockWait: 10 * time.Second}, singers, inbox)
	ctx := context.Background()
	cols := []string{"SingerId", "Name"}
	if err := commit(t, db, insert("Singers", cols, row(str("1"), str("one")))); err != nil {
		t.Fatal(err)
	}
	blind, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	reader, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if rows := read(t, reader, "Singers", str("101")); len(rows) != 0 {
		t.Fatalf("read of 101: %v", rows)
	}
	querier, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if _, err := exec(t, querier, insertInbox, map[string]*structpb.Value{"id": str("q")}); err != nil {
		t.Fatal(err)
	}
	if got := execSQL(t, querier, "SELECT COUNT(*) FROM Singers WHERE Name = 'nobody'").Rows[0][0].GetStringValue(); got != "0" {
		t.Fatalf("count: %s", got)
	}
	phantom, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if got := execSQL(t, phantom, "SELECT COUNT(*) FROM Singers WHERE Name = 'blind'").Rows[0][0].GetStringValue(); got != "0" {
		t.Fatalf("count: %s", got)
	}
	breaker, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	last, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if _, err := exec(t, last, insertInbox, map[string]*structpb.Value{"id": str("last")}); err != nil {
		t.Fatal(err)
	}

	// Their DML ran (optimistically, under the lock for a moment): now a holder keeps the lock.
	holder, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if _, err := holder.ExecuteSQL(ctx, Statement{SQL: scanningDML}); err != nil { // keeps the lock
		t.Fatal(err)
	}

	blindDone := queueCommit(t, db, blind, 1, insert("Singers", cols, row(str("101"), str("blind"))))
	readerDone := queueCommit(t, db, reader, 2, insert("Singers", cols, row(str("201"), str("reader"))))
	querierDone := queueCommit(t, db, querier, 3, insert("Singers", cols, row(str("301"), str("querier"))))
	phantomDone := queueCommit(t, db, phantom, 4, insert("Singers", cols, row(str("401"), str("phantom"))))
	breakerDone := queueCommit(t, db, breaker, 5, insert("Singers", cols, row(str("1"), str("again"))))
	lastDone := queueCommit(t, db, last, 6, insert("Singers", cols, row(str("102"), str("last"))))

	holderTS, err := holder.Commit(ctx, []*sppb.Mutation{insert("Singers", cols, row(str("100"), str("holder")))})
	if err != nil {
		t.Fatalf("holder: %v", err)
	}
	blindOut, readerOut, querierOut, phantomOut, breakerOut, lastOut := <-blindDone, <-readerDone, <-querierDone, <-phantomDone, <-breakerDone, <-lastDone
	if blindOut.err != nil || querierOut.err != nil || lastOut.err != nil {
		t.Fatalf("members: blind %v, querier %v, last %v; want all committed", blindOut.err, querierOut.err, lastOut.err)
	}
	if status.Code(readerOut.err) != codes.Aborted {
		t.Errorf("reader of 101, which the group wrote before it: %v, want ABORTED", readerOut.err)
	}
	if status.Code(phantomOut.err) != codes.Aborted {
		t.Errorf("query whose answer a member before it changed: %v, want ABORTED", phantomOut.err)
	}
	if status.Code(breakerOut.err) != codes.AlreadyExists {
		t.Errorf("insert of an existing row: %v, want ALREADY_EXISTS", breakerOut.err)
	}
	if !(holderTS.Before(blindOut.ts) && blindOut.ts.Before(querierOut.ts) && querierOut.ts.Before(lastOut.ts)) {
		t.Errorf("timestamps holder %s, blind %s, querier %s, last %s: want increasing", holderTS, blindOut.ts, querierOut.ts, lastOut.ts)
	}
	if st := e.Stats(); st.GroupedCommits != 3 || st.Commits != 5 {
		t.Errorf("grouped commits %d of %d, want 3 of 5 (the first commit, the holder, three members)", st.GroupedCommits, st.Commits)
	}

	got := map[string]string{}
	for _, r := range query(t, db, "SELECT CAST(SingerId AS STRING), Name FROM Singers") {
		got[r[0].GetStringValue()] = r[1].GetStringValue()
	}
	want := map[string]string{"1": "one", "100": "holder", "101": "blind", "301": "querier", "102": "last"}
	if len(got) != len(want) {
		t.Errorf("singers %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("singer %s: %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	stamps := map[string]time.Time{}
	for _, r := range query(t, db, "SELECT Id, ProcessedAt FROM Inbox") {
		ts, err := time.Parse(time.RFC3339Nano, r[1].GetStringValue())
		if err != nil {
			t.Fatal(err)
		}
		stamps[r[0].GetStringValue()] = ts
	}
	if !stamps["q"].Equal(querierOut.ts) || !stamps["last"].Equal(lastOut.ts) {
		t.Errorf("inbox stamps %v, want q at %s and last at %s", stamps, querierOut.ts, lastOut.ts)
	}
}

// With version history kept, every commit is its own: there is no state between a group's
// members to keep as a version.
func TestNoGroupsWithHistory(t *testing.T) {
	e, db := newTestEngine(t, Options{LockWait: 10 * time.Second}, singers)
	ctx := context.Background()
	cols := []string{"SingerId", "Name"}
	holder, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if _, err := holder.ExecuteSQL(ctx, Statement{SQL: scanningDML}); err != nil {
		t.Fatal(err)
	}
	queued, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	done := queueCommit(t, db, queued, 1, insert("Singers", cols, row(str("2"), str("queued"))))
	if _, err := holder.Commit(ctx, []*sppb.Mutation{insert("Singers", cols, row(str("1"), str("holder")))}); err != nil {
		t.Fatal(err)
	}
	if out := <-done; out.err != nil {
		t.Fatal(out.err)
	}
	if st := e.Stats(); st.GroupedCommits != 0 || st.Commits != 2 {
		t.Errorf("grouped commits %d of %d, want 0 of 2", st.GroupedCommits, st.Commits)
	}
}
