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
)

// versions is a consumer's version table, as pkg/outboxlib's ConsumerVersions.
const versions = `CREATE TABLE Versions (Id STRING(8) NOT NULL, Version INT64 NOT NULL,
	UpdatedAt TIMESTAMP OPTIONS (allow_commit_timestamp = true), CONSTRAINT positive CHECK (Version > 0)) PRIMARY KEY (Id)`

const (
	insertVersion  = "INSERT OR IGNORE INTO Versions (Id, Version, UpdatedAt) VALUES (@id, @v, PENDING_COMMIT_TIMESTAMP())"
	advanceVersion = "UPDATE Versions SET Version = @v, UpdatedAt = PENDING_COMMIT_TIMESTAMP() WHERE Id = @id AND Version < @v"
	insertInboxRow = "INSERT OR IGNORE INTO Inbox (Id, ProcessedAt) VALUES (@id, PENDING_COMMIT_TIMESTAMP())"
)

// typed is a statement with typed parameters, as the Go client sends them: STRING for a string
// (and for nil, a NULL), INT64 for an int.
func typed(sql string, params map[string]any) Statement {
	st := Statement{SQL: sql, Params: &structpb.Struct{Fields: map[string]*structpb.Value{}}, ParamTypes: map[string]*sppb.Type{}}
	for name, v := range params {
		switch x := v.(type) {
		case string:
			st.Params.Fields[name], st.ParamTypes[name] = str(x), &sppb.Type{Code: sppb.TypeCode_STRING}
		case int:
			st.Params.Fields[name], st.ParamTypes[name] = str(strconv.Itoa(x)), &sppb.Type{Code: sppb.TypeCode_INT64}
		case nil:
			st.Params.Fields[name], st.ParamTypes[name] = structpb.NewNullValue(), &sppb.Type{Code: sppb.TypeCode_STRING}
		}
	}
	return st
}

// holdLock begins a transaction that keeps the database's write lock until it ends: its DML scans
// (TestScanningDMLKeepsTheLock).
func holdLock(t *testing.T, db *DB) *Txn {
	t.Helper()
	tx, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if _, err := exec(t, tx, "UPDATE Singers SET Name = 'held' WHERE Name = 'nobody'", nil); err != nil {
		t.Fatal(err)
	}
	return tx
}

// A consumer's inbox row and version claim (an INSERT OR IGNORE of parameters, an UPDATE pinned
// by key) are decided by reading committed data: they run while another transaction holds the
// database's write lock, which a statement run under the lock would wait for until LockWait
// aborted it; both transactions then commit, and the decided statements' rows are written at
// the commit with its timestamp.
func TestDecidedDMLTakesNoLock(t *testing.T) {
	e, db := newTestEngine(t, Options{LockWait: 20 * time.Millisecond}, inbox, versions, singers)
	ctx := context.Background()
	claim := func(tx *Txn, event string, first bool, v int) ([]int64, error) {
		version := typed(advanceVersion, map[string]any{"id": "agg", "v": v})
		if first {
			version = typed(insertVersion, map[string]any{"id": "agg", "v": v})
		}
		return batch(t, tx, typed(insertInboxRow, map[string]any{"id": event}), version)
	}
	holder := holdLock(t, db)
	tx, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	if n, err := claim(tx, "ev-1", true, 1); err != nil || !cmp.Equal(n, []int64{1, 1}) {
		t.Fatalf("claim while another transaction holds the lock: %v, %v; want [1 1]", n, err)
	}
	if _, err := holder.Commit(ctx, nil); err != nil {
		t.Fatalf("commit of the lock's holder: %v", err)
	}
	if _, err := tx.Commit(ctx, nil); err != nil {
		t.Fatalf("commit of the claim: %v", err)
	}

	holder = holdLock(t, db)
	tx, _ = db.Begin(TxnOptions{Mode: ReadWrite})
	if n, err := claim(tx, "ev-2", false, 2); err != nil || !cmp.Equal(n, []int64{1, 1}) {
		t.Fatalf("the next version's claim: %v, %v; want [1 1]", n, err)
	}
	holder.Rollback()
	if _, err := tx.Commit(ctx, nil); err != nil {
		t.Fatalf("commit of the next claim: %v", err)
	}
	got := query(t, db, "SELECT Id, Version, UpdatedAt IS NOT NULL AND UpdatedAt <= CURRENT_TIMESTAMP() FROM Versions")
	want := [][]*structpb.Value{{str("agg"), str("2"), structpb.NewBoolValue(true)}}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("Versions (-want +got):\n%s", diff)
	}
	got = query(t, db, "SELECT Id, ProcessedAt IS NOT NULL FROM Inbox ORDER BY Id")
	want = [][]*structpb.Value{{str("ev-1"), structpb.NewBoolValue(true)}, {str("ev-2"), structpb.NewBoolValue(true)}}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("Inbox (-want +got):\n%s", diff)
	}
	if s := e.Stats(); s.LockTimeouts != 0 || s.DecidedDML != 4 {
		t.Errorf("%d lock timeouts and %d statements decided, want none and 4 (two claims of two)", s.LockTimeouts, s.DecidedDML)
	}
}

// What a decided statement read is validated at commit as any optimistic read: a commit that
// wrote its key in between aborts it, whether it found the row there (0 rows) or not (1), and
// whether its row qualified or not. Decided outcomes are Spanner's: an ignored duplicate counts
// 0, an update whose row does not qualify or does not exist counts 0.
func TestDecidedDMLConflicts(t *testing.T) {
	db := newTestDB(t, inbox, versions)
	ctx := context.Background()
	commitDML := func(sts ...Statement) {
		t.Helper()
		tx, _ := db.Begin(TxnOptions{Mode: ReadWrite})
		if _, err := batch(t, tx, sts...); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Commit(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		st      Statement
		want    int64
		between Statement // committed between the statement and its commit
		aborted bool
	}{
		{"insert of a new key, inserted meanwhile", typed(insertInboxRow, map[string]any{"id": "a"}), 1,
			typed(insertInboxRow, map[string]any{"id": "a"}), true},
		{"insert of a new key, another inserted meanwhile", typed(insertInboxRow, map[string]any{"id": "b"}), 1,
			typed(insertInboxRow, map[string]any{"id": "other"}), false},
		{"ignored duplicate, deleted meanwhile", typed(insertInboxRow, map[string]any{"id": "a"}), 0,
			typed("DELETE FROM Inbox WHERE Id = @id", map[string]any{"id": "a"}), true},
		{"update of a qualifying row, updated meanwhile", typed(advanceVersion, map[string]any{"id": "x", "v": 5}), 1,
			typed("UPDATE Versions SET Version = 3 WHERE Id = @id", map[string]any{"id": "x"}), true},
		{"update of a row that does not qualify, updated meanwhile", typed(advanceVersion, map[string]any{"id": "x", "v": 2}), 0,
			typed("UPDATE Versions SET Version = 1 WHERE Id = @id", map[string]any{"id": "x"}), true},
		{"update of a missing row, inserted meanwhile", typed(advanceVersion, map[string]any{"id": "y", "v": 2}), 0,
			typed(insertVersion, map[string]any{"id": "y", "v": 1}), true},
	}
	commitDML(typed(insertVersion, map[string]any{"id": "x", "v": 1}))
	for _, tt := range tests {
		tx, _ := db.Begin(TxnOptions{Mode: ReadWrite})
		if n, err := batch(t, tx, tt.st); err != nil || !cmp.Equal(n, []int64{tt.want}) {
			t.Fatalf("%s: %v, %v; want [%d]", tt.name, n, err, tt.want)
		}
		commitDML(tt.between)
		_, err := tx.Commit(ctx, nil)
		if aborted := status.Code(err) == codes.Aborted; aborted != tt.aborted || (err != nil && !aborted) {
			t.Errorf("%s: commit: %v, want aborted %v", tt.name, err, tt.aborted)
		}
	}
}

// A statement whose values would fail (NULL in a key, too long, breaking a CHECK constraint) is
// not decided: it runs, and fails at the statement as Spanner's does, not at the commit. Two statements of one batch on one table are not decided
// either (the second must see the first's write), and both take effect.
func TestUndecidedDML(t *testing.T) {
	db := newTestDB(t, inbox, versions)
	ctx := context.Background()
	for _, st := range []Statement{
		typed(insertVersion, map[string]any{"id": "too-long-id", "v": 1}),
		typed(insertVersion, map[string]any{"id": nil, "v": 1}),
		typed(insertInboxRow, map[string]any{"id": nil}),
		typed(insertVersion, map[string]any{"id": "w", "v": 0}),
	} {
		tx, _ := db.Begin(TxnOptions{Mode: ReadWrite})
		if _, err := batch(t, tx, st); err == nil || status.Code(err) == codes.Aborted {
			t.Errorf("%s with %v: %v, want the statement's error", st.SQL, st.Params, err)
		}
		tx.Rollback()
	}
	tx, _ := db.Begin(TxnOptions{Mode: ReadWrite})
	n, err := batch(t, tx, typed(insertVersion, map[string]any{"id": "z", "v": 1}), typed(advanceVersion, map[string]any{"id": "z", "v": 2}))
	if err != nil || !cmp.Equal(n, []int64{1, 1}) {
		t.Fatalf("insert and advance in one batch: %v, %v; want [1 1]", n, err)
	}
	if _, err := tx.Commit(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got := query(t, db, "SELECT Version FROM Versions WHERE Id = 'z'"); len(got) != 1 || got[0][0].GetStringValue() != "2" {
		t.Errorf("version after the batch: %v, want 2", got)
	}
	tx, _ = db.Begin(TxnOptions{Mode: ReadWrite})
	if _, err := batch(t, tx, typed("UPDATE Versions SET Version = @v WHERE Id = @id", map[string]any{"id": "z", "v": -1})); err == nil || status.Code(err) == codes.Aborted {
		t.Errorf("an update breaking the CHECK constraint: %v, want the statement's error", err)
	}
	tx.Rollback()
}
