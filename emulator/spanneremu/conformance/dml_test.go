package conformance

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
)

var dmlSchema = []string{
	`CREATE TABLE Items (
		Id INT64 NOT NULL,
		Name STRING(MAX),
		Qty INT64 NOT NULL,
		Updated TIMESTAMP OPTIONS (allow_commit_timestamp = true),
		CONSTRAINT QtyNonNegative CHECK (Qty >= 0),
	) PRIMARY KEY (Id)`,
}

// seedDML inserts items 1..3 named a, b, c with quantities 1, 2, 3.
func seedDML(t *testing.T, client *spanner.Client) {
	t.Helper()
	mustUpdate(t, client, `INSERT INTO Items (Id, Name, Qty) VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', 3)`)
}

func TestDML(t *testing.T) {
	t.Parallel()
	itemCols := []string{"Id", "Name", "Qty"}
	tests := []struct {
		name      string
		sql       string
		params    map[string]any
		wantCount int64
		wantCode  codes.Code
		wantMsg   []string
		want      [][]any // Items (Id, Name, Qty) afterwards
	}{
		{name: "insert", sql: `INSERT INTO Items (Id, Name, Qty) VALUES (4, 'd', 4), (5, @n, @q)`,
			params: map[string]any{"n": "e", "q": 5}, wantCount: 2,
			want: rows(row(int64(1), "a", int64(1)), row(int64(2), "b", int64(2)), row(int64(3), "c", int64(3)), row(int64(4), "d", int64(4)), row(int64(5), "e", int64(5)))},
		{name: "insert select", sql: `INSERT INTO Items (Id, Name, Qty) SELECT Id + 10, CONCAT(Name, '!'), Qty * 2 FROM Items WHERE Id >= 2`, wantCount: 2,
			want: rows(row(int64(1), "a", int64(1)), row(int64(2), "b", int64(2)), row(int64(3), "c", int64(3)), row(int64(12), "b!", int64(4)), row(int64(13), "c!", int64(6)))},
		{name: "insert from array of structs", sql: `INSERT INTO Items (Id, Name, Qty) SELECT r.Id, r.Name, r.Qty FROM UNNEST(@rows) AS r`,
			params: map[string]any{"rows": []struct {
				Id   int64
				Name string
				Qty  int64
			}{{7, "g", 7}, {8, "h", 8}}}, wantCount: 2,
			want: rows(row(int64(1), "a", int64(1)), row(int64(2), "b", int64(2)), row(int64(3), "c", int64(3)), row(int64(7), "g", int64(7)), row(int64(8), "h", int64(8)))},
		{name: "update from struct param", sql: `UPDATE Items SET Name = @s.Name, Qty = @s.Qty WHERE Id = @s.Id`,
			params: map[string]any{"s": struct {
				Id   int64
				Name string
				Qty  int64
			}{2, "z", 20}}, wantCount: 1,
			want: rows(row(int64(1), "a", int64(1)), row(int64(2), "z", int64(20)), row(int64(3), "c", int64(3)))},
		{name: "delete in unnest", sql: `DELETE FROM Items WHERE Id IN UNNEST(@ids)`, params: map[string]any{"ids": []int64{1, 3, 99}}, wantCount: 2,
			want: rows(row(int64(2), "b", int64(2)))},
		{name: "insert duplicate", sql: `INSERT INTO Items (Id, Name, Qty) VALUES (1, 'z', 9)`,
			wantCode: codes.AlreadyExists, wantMsg: []string{"Items", "already exists"},
			want: rows(row(int64(1), "a", int64(1)), row(int64(2), "b", int64(2)), row(int64(3), "c", int64(3)))},
		{name: "insert or ignore", sql: `INSERT OR IGNORE INTO Items (Id, Name, Qty) VALUES (1, 'z', 9), (4, 'd', 4)`, wantCount: 1,
			want: rows(row(int64(1), "a", int64(1)), row(int64(2), "b", int64(2)), row(int64(3), "c", int64(3)), row(int64(4), "d", int64(4)))},
		{name: "insert or ignore existing only", sql: `INSERT OR IGNORE INTO Items (Id, Name, Qty) VALUES (1, 'z', 9)`, wantCount: 0,
			want: rows(row(int64(1), "a", int64(1)), row(int64(2), "b", int64(2)), row(int64(3), "c", int64(3)))},
		{name: "insert or update", sql: `INSERT OR UPDATE INTO Items (Id, Name, Qty) VALUES (1, 'z', 9), (4, 'd', 4)`, wantCount: 2,
			want: rows(row(int64(1), "z", int64(9)), row(int64(2), "b", int64(2)), row(int64(3), "c", int64(3)), row(int64(4), "d", int64(4)))},
		{name: "insert or update keeps unnamed columns", sql: `INSERT OR UPDATE INTO Items (Id, Qty) VALUES (2, 20)`, wantCount: 1,
			want: rows(row(int64(1), "a", int64(1)), row(int64(2), "b", int64(20)), row(int64(3), "c", int64(3)))},
		{name: "update where", sql: `UPDATE Items SET Qty = Qty * 10, Name = UPPER(Name) WHERE Qty >= 2`, wantCount: 2,
			want: rows(row(int64(1), "a", int64(1)), row(int64(2), "B", int64(20)), row(int64(3), "C", int64(30)))},
		{name: "update no match", sql: `UPDATE Items SET Qty = 0 WHERE Id > 100`, wantCount: 0,
			want: rows(row(int64(1), "a", int64(1)), row(int64(2), "b", int64(2)), row(int64(3), "c", int64(3)))},
		{name: "update with subquery", sql: `UPDATE Items SET Qty = (SELECT MAX(Qty) FROM Items) WHERE Id = 1`, wantCount: 1,
			want: rows(row(int64(1), "a", int64(3)), row(int64(2), "b", int64(2)), row(int64(3), "c", int64(3)))},
		{name: "delete where", sql: `DELETE FROM Items WHERE Name IN ('a', 'c')`, wantCount: 2,
			want: rows(row(int64(2), "b", int64(2)))},
		{name: "delete all", sql: `DELETE FROM Items WHERE TRUE`, wantCount: 3, want: nil},
		{name: "update key column", sql: `UPDATE Items SET Id = 10 WHERE Id = 1`, wantCode: codes.InvalidArgument,
			want: rows(row(int64(1), "a", int64(1)), row(int64(2), "b", int64(2)), row(int64(3), "c", int64(3)))},
		{name: "check violation", sql: `UPDATE Items SET Qty = Qty - 2 WHERE TRUE`, wantCode: codes.OutOfRange, wantMsg: []string{"QtyNonNegative"},
			want: rows(row(int64(1), "a", int64(1)), row(int64(2), "b", int64(2)), row(int64(3), "c", int64(3)))},
		{name: "null into not null", sql: `UPDATE Items SET Qty = NULL WHERE Id = 1`, wantCode: codes.FailedPrecondition, wantMsg: []string{"Qty"},
			want: rows(row(int64(1), "a", int64(1)), row(int64(2), "b", int64(2)), row(int64(3), "c", int64(3)))},
		{name: "insert without not null column", sql: `INSERT INTO Items (Id, Name) VALUES (9, 'x')`, wantCode: codes.FailedPrecondition, wantMsg: []string{"Qty"},
			want: rows(row(int64(1), "a", int64(1)), row(int64(2), "b", int64(2)), row(int64(3), "c", int64(3)))},
		{name: "update without where", sql: `UPDATE Items SET Qty = 0`, wantCode: codes.InvalidArgument,
			want: rows(row(int64(1), "a", int64(1)), row(int64(2), "b", int64(2)), row(int64(3), "c", int64(3)))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			client := newDB(t, dmlSchema...)
			seedDML(t, client)
			var count int64
			_, err := client.ReadWriteTransaction(testCtx(t), func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
				var err error
				count, err = tx.Update(ctx, spanner.Statement{SQL: tt.sql, Params: tt.params})
				return err
			})
			if tt.wantCode == codes.OK {
				if err != nil {
					t.Fatalf("Update: %v", err)
				}
				if count != tt.wantCount {
					t.Errorf("row count = %d, want %d", count, tt.wantCount)
				}
			} else {
				checkErr(t, err, tt.wantCode, tt.wantMsg...)
			}
			if diff := cmp.Diff(tt.want, readAll(t, client, "Items", itemCols...)); diff != "" {
				t.Errorf("Items afterwards (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDMLThenReturn(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		sql       string
		wantCount int64
		want      [][]any
	}{
		{"insert", `INSERT INTO Items (Id, Name, Qty) VALUES (4, 'd', 4), (5, 'e', 5) THEN RETURN Id, Name`, 2,
			rows(row(int64(4), "d"), row(int64(5), "e"))},
		{"insert or ignore returns inserted rows only", `INSERT OR IGNORE INTO Items (Id, Name, Qty) VALUES (1, 'z', 9), (4, 'd', 4) THEN RETURN Id, Name`, 1,
			rows(row(int64(4), "d"))},
		{"insert or ignore nothing inserted", `INSERT OR IGNORE INTO Items (Id, Name, Qty) VALUES (1, 'z', 9) THEN RETURN Id`, 0, nil},
		{"insert or update", `INSERT OR UPDATE INTO Items (Id, Name, Qty) VALUES (1, 'z', 9) THEN RETURN Id, Name, Qty`, 1,
			rows(row(int64(1), "z", int64(9)))},
		{"update returns new values", `UPDATE Items SET Qty = Qty + 100 WHERE Id = 2 THEN RETURN Id, Qty, Qty - 100 AS Old`, 1,
			rows(row(int64(2), int64(102), int64(2)))},
		{"delete returns old values", `DELETE FROM Items WHERE Id = 3 THEN RETURN Name, Qty`, 1,
			rows(row("c", int64(3)))},
		{"star", `UPDATE Items SET Name = 'q' WHERE Id = 1 THEN RETURN *`, 1,
			rows(row(int64(1), "q", int64(1), nil))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			client := newDB(t, dmlSchema...)
			seedDML(t, client)
			var res result
			var count int64
			_, err := client.ReadWriteTransaction(testCtx(t), func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
				iter := tx.Query(ctx, spanner.NewStatement(tt.sql))
				defer iter.Stop()
				var err error
				res, err = collect(iter)
				count = iter.RowCount
				return err
			})
			if err != nil {
				t.Fatalf("transaction: %v", err)
			}
			// THEN RETURN promises no order, so rows are compared sorted by their first column.
			sort.Slice(res.Rows, func(i, j int) bool { return fmt.Sprint(res.Rows[i][0]) < fmt.Sprint(res.Rows[j][0]) })
			if diff := cmp.Diff(tt.want, res.Rows); diff != "" {
				t.Errorf("returned rows (-want +got):\n%s", diff)
			}
			if count != tt.wantCount {
				t.Errorf("row count = %d, want %d", count, tt.wantCount)
			}
		})
	}
}

func TestPendingCommitTimestamp(t *testing.T) {
	t.Parallel()

	t.Run("equals commit timestamp", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, dmlSchema...)
		resp, err := client.ReadWriteTransactionWithOptions(testCtx(t), func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
			if _, err := tx.Update(ctx, spanner.NewStatement(`INSERT INTO Items (Id, Qty, Updated) VALUES (1, 1, PENDING_COMMIT_TIMESTAMP()), (2, 2, PENDING_COMMIT_TIMESTAMP())`)); err != nil {
				return err
			}
			// A mutation in the same transaction gets the same timestamp.
			return tx.BufferWrite([]*spanner.Mutation{spanner.Insert("Items", []string{"Id", "Qty", "Updated"}, []any{3, 3, spanner.CommitTimestamp})})
		}, spanner.TransactionOptions{})
		if err != nil {
			t.Fatalf("transaction: %v", err)
		}
		got := readAll(t, client, "Items", "Updated")
		want := rows(row(resp.CommitTs), row(resp.CommitTs), row(resp.CommitTs))
		if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
			t.Errorf("Updated vs commit timestamp (-want +got):\n%s", diff)
		}
	})

	// The emulator runs a statement on known keys optimistically and again at the commit (writing
	// the commit's timestamp then), and one that scans under the lock the transaction then keeps
	// (its value fixed at the commit): every row gets the commit's timestamp either way.
	t.Run("before and after the transaction takes the lock", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, dmlSchema...)
		seedDML(t, client)
		resp, err := client.ReadWriteTransactionWithOptions(testCtx(t), func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
			for _, sql := range []string{
				`UPDATE Items SET Updated = PENDING_COMMIT_TIMESTAMP() WHERE Id = 1`,
				`INSERT INTO Items (Id, Qty, Updated) VALUES (4, 4, PENDING_COMMIT_TIMESTAMP())`,
				`UPDATE Items SET Updated = PENDING_COMMIT_TIMESTAMP() WHERE Qty = 3`,
				`UPDATE Items SET Qty = 5, Updated = PENDING_COMMIT_TIMESTAMP() WHERE Id = 2`,
			} {
				if _, err := tx.Update(ctx, spanner.NewStatement(sql)); err != nil {
					return err
				}
			}
			return nil
		}, spanner.TransactionOptions{})
		if err != nil {
			t.Fatalf("transaction: %v", err)
		}
		got := readAll(t, client, "Items", "Id", "Updated")
		want := rows(row(int64(1), resp.CommitTs), row(int64(2), resp.CommitTs), row(int64(3), resp.CommitTs), row(int64(4), resp.CommitTs))
		if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
			t.Errorf("Items (-want +got):\n%s", diff)
		}
	})

	t.Run("update sets commit timestamp", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, dmlSchema...)
		seedDML(t, client)
		resp, err := client.ReadWriteTransactionWithOptions(testCtx(t), func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
			_, err := tx.Update(ctx, spanner.NewStatement(`UPDATE Items SET Updated = PENDING_COMMIT_TIMESTAMP() WHERE Id = 2`))
			return err
		}, spanner.TransactionOptions{})
		if err != nil {
			t.Fatalf("transaction: %v", err)
		}
		got := readAll(t, client, "Items", "Id", "Updated")
		want := rows(row(int64(1), nil), row(int64(2), resp.CommitTs), row(int64(3), nil))
		if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
			t.Errorf("Items (-want +got):\n%s", diff)
		}
	})

	t.Run("not readable before commit", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, dmlSchema...)
		seedDML(t, client)
		var readErr, apiReadErr error
		var name string
		_, err := client.ReadWriteTransaction(testCtx(t), func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
			if _, err := tx.Update(ctx, spanner.NewStatement(`UPDATE Items SET Updated = PENDING_COMMIT_TIMESTAMP() WHERE Id = 1`)); err != nil {
				return err
			}
			// The value does not exist until commit, so reading it is an error, through SQL or
			// the Read API...
			_, readErr = tryQuery(ctx, tx, spanner.NewStatement(`SELECT Updated FROM Items WHERE Id = 1`))
			_, apiReadErr = tx.ReadRow(ctx, "Items", spanner.Key{1}, []string{"Updated"})
			// ...but the row's other columns stay readable.
			r, err := tx.ReadRow(ctx, "Items", spanner.Key{1}, []string{"Name"})
			if err != nil {
				return err
			}
			return r.Columns(&name)
		})
		if err != nil {
			t.Fatalf("transaction: %v", err)
		}
		checkErr(t, readErr, codes.InvalidArgument)
		checkErr(t, apiReadErr, codes.InvalidArgument)
		if name != "a" {
			t.Errorf("Name = %q, want a", name)
		}
	})

	t.Run("needs the column option", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, `CREATE TABLE T (Id INT64 NOT NULL, Ts TIMESTAMP) PRIMARY KEY (Id)`)
		_, err := client.ReadWriteTransaction(testCtx(t), func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
			_, err := tx.Update(ctx, spanner.NewStatement(`INSERT INTO T (Id, Ts) VALUES (1, PENDING_COMMIT_TIMESTAMP())`))
			return err
		})
		if err == nil {
			t.Errorf("PENDING_COMMIT_TIMESTAMP() into a column without allow_commit_timestamp succeeded, want an error")
		}
	})

	t.Run("not allowed in select", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, dmlSchema...)
		_, err := tryQuery(testCtx(t), client.Single(), spanner.NewStatement(`SELECT PENDING_COMMIT_TIMESTAMP()`))
		checkErr(t, err, codes.InvalidArgument)
	})
}

func TestBatchUpdate(t *testing.T) {
	t.Parallel()

	t.Run("all succeed", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, dmlSchema...)
		seedDML(t, client)
		var counts []int64
		_, err := client.ReadWriteTransaction(testCtx(t), func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
			var err error
			counts, err = tx.BatchUpdate(ctx, []spanner.Statement{
				spanner.NewStatement(`UPDATE Items SET Qty = Qty + 1 WHERE TRUE`),
				spanner.NewStatement(`INSERT INTO Items (Id, Qty) VALUES (4, 4)`),
				// Later statements see earlier ones.
				spanner.NewStatement(`DELETE FROM Items WHERE Qty >= 4`),
			})
			return err
		})
		if err != nil {
			t.Fatalf("transaction: %v", err)
		}
		if diff := cmp.Diff([]int64{3, 1, 2}, counts); diff != "" {
			t.Errorf("counts (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(rows(row(int64(1), int64(2)), row(int64(2), int64(3))), readAll(t, client, "Items", "Id", "Qty")); diff != "" {
			t.Errorf("Items (-want +got):\n%s", diff)
		}
	})

	t.Run("stops at first failure", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, dmlSchema...)
		seedDML(t, client)
		var counts []int64
		var batchErr error
		_, err := client.ReadWriteTransaction(testCtx(t), func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
			counts, batchErr = tx.BatchUpdate(ctx, []spanner.Statement{
				spanner.NewStatement(`UPDATE Items SET Qty = Qty + 1 WHERE Id = 1`),
				spanner.NewStatement(`UPDATE NoSuchTable SET Qty = 0 WHERE TRUE`),
				spanner.NewStatement(`UPDATE Items SET Qty = 100 WHERE Id = 3`),
			})
			// Commit what succeeded: statements before the failing one stay applied, the
			// ones after it never ran.
			return nil
		})
		if err != nil {
			t.Fatalf("transaction: %v", err)
		}
		checkErr(t, batchErr, codes.InvalidArgument, "NoSuchTable")
		if diff := cmp.Diff([]int64{1}, counts); diff != "" {
			t.Errorf("counts (-want +got):\n%s", diff)
		}
		want := rows(row(int64(1), int64(2)), row(int64(2), int64(2)), row(int64(3), int64(3)))
		if diff := cmp.Diff(want, readAll(t, client, "Items", "Id", "Qty")); diff != "" {
			t.Errorf("Items (-want +got):\n%s", diff)
		}
	})

	t.Run("constraint failure", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, dmlSchema...)
		seedDML(t, client)
		var counts []int64
		_, err := client.ReadWriteTransaction(testCtx(t), func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
			var err error
			counts, err = tx.BatchUpdate(ctx, []spanner.Statement{
				spanner.NewStatement(`UPDATE Items SET Qty = Qty + 1 WHERE Id = 1`),
				spanner.NewStatement(`UPDATE Items SET Qty = Qty + 1 WHERE Id = 2`),
				spanner.NewStatement(`INSERT INTO Items (Id, Qty) VALUES (2, 9)`),
				spanner.NewStatement(`UPDATE Items SET Qty = 100 WHERE Id = 3`),
			})
			return err
		})
		checkErr(t, err, codes.AlreadyExists)
		if diff := cmp.Diff([]int64{1, 1}, counts); diff != "" {
			t.Errorf("counts (-want +got):\n%s", diff)
		}
		want := rows(row(int64(1), int64(1)), row(int64(2), int64(2)), row(int64(3), int64(3)))
		if diff := cmp.Diff(want, readAll(t, client, "Items", "Id", "Qty")); diff != "" {
			t.Errorf("Items after rolled-back transaction (-want +got):\n%s", diff)
		}
	})
}

func TestPartitionedUpdate(t *testing.T) {
	t.Parallel()
	client := newDB(t, dmlSchema...)
	seedDML(t, client)
	count, err := client.PartitionedUpdate(testCtx(t), spanner.NewStatement(`UPDATE Items SET Name = CONCAT(Name, '-') WHERE Qty >= 2`))
	if err != nil {
		t.Fatalf("PartitionedUpdate: %v", err)
	}
	if count != 2 {
		t.Errorf("count = %d, want 2", count)
	}
	count, err = client.PartitionedUpdate(testCtx(t), spanner.NewStatement(`DELETE FROM Items WHERE Id = 1`))
	if err != nil {
		t.Fatalf("PartitionedUpdate: %v", err)
	}
	if count != 1 {
		t.Errorf("count = %d, want 1", count)
	}
	want := rows(row(int64(2), "b-"), row(int64(3), "c-"))
	if diff := cmp.Diff(want, readAll(t, client, "Items", "Id", "Name")); diff != "" {
		t.Errorf("Items (-want +got):\n%s", diff)
	}
	// INSERT cannot be partitioned.
	_, err = client.PartitionedUpdate(testCtx(t), spanner.NewStatement(`INSERT INTO Items (Id, Qty) VALUES (9, 9)`))
	checkErr(t, err, codes.InvalidArgument)
}

func TestDMLRollback(t *testing.T) {
	t.Parallel()

	t.Run("failed statement does not apply and transaction continues", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, dmlSchema...)
		seedDML(t, client)
		var stmtErr error
		_, err := client.ReadWriteTransaction(testCtx(t), func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
			if _, err := tx.Update(ctx, spanner.NewStatement(`UPDATE Items SET Qty = 10 WHERE Id = 1`)); err != nil {
				return err
			}
			// An invalid statement is rejected without affecting the transaction.
			_, stmtErr = tx.Update(ctx, spanner.NewStatement(`UPDATE NoSuchTable SET Qty = 0 WHERE TRUE`))
			_, err := tx.Update(ctx, spanner.NewStatement(`UPDATE Items SET Qty = 20 WHERE Id = 2`))
			return err
		})
		if err != nil {
			t.Fatalf("transaction: %v", err)
		}
		checkErr(t, stmtErr, codes.InvalidArgument, "NoSuchTable")
		want := rows(row(int64(1), int64(10)), row(int64(2), int64(20)), row(int64(3), int64(3)))
		if diff := cmp.Diff(want, readAll(t, client, "Items", "Id", "Qty")); diff != "" {
			t.Errorf("Items (-want +got):\n%s", diff)
		}
	})

	t.Run("first statement fails and transaction continues", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, dmlSchema...)
		seedDML(t, client)
		// The failing statement carried the inline BeginTransaction, so no transaction id came
		// back; the client then begins explicitly and the transaction must work as usual.
		var stmtErr error
		_, err := client.ReadWriteTransaction(testCtx(t), func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
			_, stmtErr = tx.Update(ctx, spanner.NewStatement(`UPDATE NoSuchTable SET Qty = 0 WHERE TRUE`))
			if _, err := tx.Update(ctx, spanner.NewStatement(`UPDATE Items SET Qty = 30 WHERE Id = 3`)); err != nil {
				return err
			}
			_, err := tryQuery(ctx, tx, spanner.NewStatement(`SELECT Qty FROM Items WHERE Id = 3`))
			return err
		})
		if err != nil {
			t.Fatalf("transaction: %v", err)
		}
		checkErr(t, stmtErr, codes.InvalidArgument)
		want := rows(row(int64(1), int64(1)), row(int64(2), int64(2)), row(int64(3), int64(30)))
		if diff := cmp.Diff(want, readAll(t, client, "Items", "Id", "Qty")); diff != "" {
			t.Errorf("Items (-want +got):\n%s", diff)
		}
	})

	t.Run("failed statement is atomic", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, dmlSchema...)
		seedDML(t, client)
		var stmtErr error
		_, err := client.ReadWriteTransaction(testCtx(t), func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
			if _, err := tx.Update(ctx, spanner.NewStatement(`UPDATE Items SET Name = 'x' WHERE Id = 3`)); err != nil {
				return err
			}
			// Rows 2 and 3 could be decremented, row 1 cannot: the whole statement fails.
			_, stmtErr = tx.Update(ctx, spanner.NewStatement(`UPDATE Items SET Qty = Qty - 2 WHERE TRUE`))
			return stmtErr
		})
		checkErr(t, stmtErr, codes.OutOfRange)
		checkErr(t, err, codes.OutOfRange)
		// The transaction returned an error, so nothing of it is committed.
		want := rows(row(int64(1), "a", int64(1)), row(int64(2), "b", int64(2)), row(int64(3), "c", int64(3)))
		if diff := cmp.Diff(want, readAll(t, client, "Items", "Id", "Name", "Qty")); diff != "" {
			t.Errorf("Items (-want +got):\n%s", diff)
		}
	})

	t.Run("error from transaction function rolls back", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, dmlSchema...)
		seedDML(t, client)
		boom := errors.New("boom")
		_, err := client.ReadWriteTransaction(testCtx(t), func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
			if _, err := tx.Update(ctx, spanner.NewStatement(`INSERT INTO Items (Id, Qty) VALUES (4, 4)`)); err != nil {
				return err
			}
			if _, err := tx.Update(ctx, spanner.NewStatement(`DELETE FROM Items WHERE Id = 1`)); err != nil {
				return err
			}
			if err := tx.BufferWrite([]*spanner.Mutation{spanner.Insert("Items", []string{"Id", "Qty"}, []any{5, 5})}); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("transaction error = %v, want %v", err, boom)
		}
		want := rows(row(int64(1)), row(int64(2)), row(int64(3)))
		if diff := cmp.Diff(want, readAll(t, client, "Items", "Id")); diff != "" {
			t.Errorf("Items (-want +got):\n%s", diff)
		}
	})

	t.Run("rolled back transaction releases its locks", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, dmlSchema...)
		seedDML(t, client)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for i := 0; i < 3; i++ {
			_, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
				if _, err := tx.Update(ctx, spanner.NewStatement(`UPDATE Items SET Qty = 50 WHERE Id = 1`)); err != nil {
					return err
				}
				return errors.New("give up")
			})
			if err == nil {
				t.Fatalf("transaction %d succeeded, want its error", i)
			}
		}
		// A rolled-back writer must not delay the next one.
		mustUpdate(t, client, `UPDATE Items SET Qty = 7 WHERE Id = 1`)
		if diff := cmp.Diff(rows(row(int64(7))), readAll(t, client, "Items", "Qty")[:1]); diff != "" {
			t.Errorf("Qty (-want +got):\n%s", diff)
		}
	})
}
