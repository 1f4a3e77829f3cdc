package conformance

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
)

var counterSchema = []string{
	`CREATE TABLE Counters (K INT64 NOT NULL, V INT64 NOT NULL) PRIMARY KEY (K)`,
}

func readCounter(ctx context.Context, rc interface {
	ReadRow(context.Context, string, spanner.Key, []string) (*spanner.Row, error)
}, k int64) (int64, error) {
	r, err := rc.ReadRow(ctx, "Counters", spanner.Key{k}, []string{"V"})
	if err != nil {
		return 0, err
	}
	var v int64
	err = r.Columns(&v)
	return v, err
}

func TestTransactions(t *testing.T) {
	t.Parallel()

	t.Run("read your writes", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, counterSchema...)
		var seenDML, seenMutation [][]any
		_, err := client.ReadWriteTransaction(testCtx(t), func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
			if _, err := tx.Update(ctx, spanner.NewStatement(`INSERT INTO Counters (K, V) VALUES (1, 10)`)); err != nil {
				return err
			}
			if err := tx.BufferWrite([]*spanner.Mutation{spanner.Insert("Counters", []string{"K", "V"}, []any{2, 20})}); err != nil {
				return err
			}
			// DML is applied when executed, so later statements see it; buffered mutations are
			// only applied at commit and stay invisible to the transaction itself.
			res, err := tryQuery(ctx, tx, spanner.NewStatement(`SELECT K, V FROM Counters ORDER BY K`))
			if err != nil {
				return err
			}
			seenDML = res.Rows
			// The Read API sees DML writes as well.
			if v, err := readCounter(ctx, tx, 1); err != nil || v != 10 {
				return fmt.Errorf("ReadRow after DML insert = %d, %v; want 10", v, err)
			}
			res, err = collect(tx.Read(ctx, "Counters", spanner.Key{2}, []string{"K"}))
			seenMutation = res.Rows
			return err
		})
		if err != nil {
			t.Fatalf("transaction: %v", err)
		}
		if diff := cmp.Diff(rows(row(int64(1), int64(10))), seenDML); diff != "" {
			t.Errorf("inside transaction (-want +got):\n%s", diff)
		}
		if seenMutation != nil {
			t.Errorf("buffered mutation visible before commit: %v", seenMutation)
		}
		if diff := cmp.Diff(rows(row(int64(1), int64(10)), row(int64(2), int64(20))), readAll(t, client, "Counters", "K", "V")); diff != "" {
			t.Errorf("after commit (-want +got):\n%s", diff)
		}
	})

	t.Run("concurrent increments lose no update", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, counterSchema...)
		mustApply(t, client, spanner.Insert("Counters", []string{"K", "V"}, []any{1, 0}))
		const workers, increments = 8, 25
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; i < increments; i++ {
					_, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
						v, err := readCounter(ctx, tx, 1)
						if err != nil {
							return err
						}
						// Alternate between a mutation and DML so both write paths are covered.
						if (w+i)%2 == 0 {
							return tx.BufferWrite([]*spanner.Mutation{spanner.Update("Counters", []string{"K", "V"}, []any{1, v + 1})})
						}
						_, err = tx.Update(ctx, spanner.Statement{SQL: `UPDATE Counters SET V = @v WHERE K = 1`, Params: map[string]any{"v": v + 1}})
						return err
					})
					if err != nil {
						errs <- fmt.Errorf("worker %d increment %d: %w", w, i, err)
						return
					}
				}
			}(w)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		got, err := readCounter(testCtx(t), client.Single(), 1)
		if err != nil {
			t.Fatalf("read counter: %v", err)
		}
		if got != workers*increments {
			t.Errorf("counter = %d, want %d", got, workers*increments)
		}
	})

	t.Run("indexes inside a transaction", func(t *testing.T) {
		t.Parallel()
		client := newDB(t,
			`CREATE TABLE Stock (Sku STRING(MAX) NOT NULL, Qty INT64 NOT NULL) PRIMARY KEY (Sku)`,
			`CREATE INDEX StockByQty ON Stock(Qty)`,
		)
		mustApply(t, client,
			spanner.Insert("Stock", []string{"Sku", "Qty"}, []any{"a", 5}),
			spanner.Insert("Stock", []string{"Sku", "Qty"}, []any{"b", 7}),
		)
		var viaQuery, viaRead result
		_, err := client.ReadWriteTransaction(testCtx(t), func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
			// DML changes indexed values; reads through the index in the same transaction
			// must see the new entries and not the old ones.
			if _, err := tx.Update(ctx, spanner.NewStatement(`UPDATE Stock SET Qty = 1 WHERE Sku = 'b'`)); err != nil {
				return err
			}
			if _, err := tx.Update(ctx, spanner.NewStatement(`DELETE FROM Stock WHERE Sku = 'a'`)); err != nil {
				return err
			}
			if _, err := tx.Update(ctx, spanner.NewStatement(`INSERT INTO Stock (Sku, Qty) VALUES ('c', 3)`)); err != nil {
				return err
			}
			var err error
			viaQuery, err = tryQuery(ctx, tx, spanner.NewStatement(`SELECT Qty, Sku FROM Stock@{FORCE_INDEX=StockByQty} WHERE Qty < 10 ORDER BY Qty`))
			if err != nil {
				return err
			}
			viaRead, err = collect(tx.ReadUsingIndex(ctx, "Stock", "StockByQty", spanner.AllKeys(), []string{"Qty", "Sku"}))
			return err
		})
		if err != nil {
			t.Fatalf("transaction: %v", err)
		}
		want := rows(row(int64(1), "b"), row(int64(3), "c"))
		if diff := cmp.Diff(want, viaQuery.Rows); diff != "" {
			t.Errorf("query through index (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(want, viaRead.Rows); diff != "" {
			t.Errorf("read through index (-want +got):\n%s", diff)
		}
	})

	t.Run("mutations apply after DML at commit", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, counterSchema...)
		// The buffered insert is invisible to the DML that follows it, so the DML inserts the
		// same key; when the mutation is applied at commit, the key exists and the whole
		// transaction fails.
		_, err := client.ReadWriteTransaction(testCtx(t), func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
			if err := tx.BufferWrite([]*spanner.Mutation{spanner.Insert("Counters", []string{"K", "V"}, []any{5, 1})}); err != nil {
				return err
			}
			_, err := tx.Update(ctx, spanner.NewStatement(`INSERT INTO Counters (K, V) VALUES (5, 2)`))
			return err
		})
		checkErr(t, err, codes.AlreadyExists)
		if got := readAll(t, client, "Counters", "K"); got != nil {
			t.Errorf("Counters = %v, want empty after the failed commit", got)
		}

		// An update mutation, on the other hand, overwrites what the DML wrote.
		_, err = client.ReadWriteTransaction(testCtx(t), func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
			if err := tx.BufferWrite([]*spanner.Mutation{spanner.InsertOrUpdate("Counters", []string{"K", "V"}, []any{6, 1})}); err != nil {
				return err
			}
			_, err := tx.Update(ctx, spanner.NewStatement(`INSERT INTO Counters (K, V) VALUES (6, 2)`))
			return err
		})
		if err != nil {
			t.Fatalf("transaction: %v", err)
		}
		if diff := cmp.Diff(rows(row(int64(6), int64(1))), readAll(t, client, "Counters", "K", "V")); diff != "" {
			t.Errorf("Counters (-want +got):\n%s", diff)
		}
	})

	t.Run("uncommitted writes are invisible and do not block reads", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, counterSchema...)
		mustApply(t, client, spanner.Insert("Counters", []string{"K", "V"}, []any{1, 1}))
		ctx := testCtx(t)
		tx, err := spanner.NewReadWriteStmtBasedTransaction(ctx, client)
		if err != nil {
			t.Fatalf("begin: %v", err)
		}
		if _, err := tx.Update(ctx, spanner.NewStatement(`UPDATE Counters SET V = 2 WHERE K = 1`)); err != nil {
			t.Fatalf("update: %v", err)
		}
		// Read-only reads take no locks: they neither wait for the open writer nor see its
		// uncommitted value.
		readCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		v, err := readCounter(readCtx, client.Single(), 1)
		if err != nil {
			t.Fatalf("strong read while a writer is open: %v", err)
		}
		if v != 1 {
			t.Errorf("strong read saw %d, want the committed 1", v)
		}
		res, err := tryQuery(readCtx, client.Single(), spanner.NewStatement(`SELECT V FROM Counters WHERE K = 1`))
		if err != nil {
			t.Fatalf("strong query while a writer is open: %v", err)
		}
		if diff := cmp.Diff(rows(row(int64(1))), res.Rows); diff != "" {
			t.Errorf("strong query (-want +got):\n%s", diff)
		}
		if _, err := tx.Commit(ctx); err != nil {
			t.Fatalf("commit: %v", err)
		}
		if v, err := readCounter(ctx, client.Single(), 1); err != nil || v != 2 {
			t.Errorf("after commit read %d, %v; want 2", v, err)
		}
	})

	t.Run("opposite lock order does not deadlock", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, counterSchema...)
		mustApply(t, client,
			spanner.Insert("Counters", []string{"K", "V"}, []any{1, 0}),
			spanner.Insert("Counters", []string{"K", "V"}, []any{2, 0}),
		)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		const rounds = 20
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		for w, order := range [][2]int64{{1, 2}, {2, 1}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < rounds; i++ {
					_, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
						for _, k := range order {
							if _, err := tx.Update(ctx, spanner.Statement{SQL: `UPDATE Counters SET V = V + 1 WHERE K = @k`, Params: map[string]any{"k": k}}); err != nil {
								return err
							}
						}
						return nil
					})
					if err != nil {
						errs <- fmt.Errorf("worker %d round %d: %w", w, i, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		want := rows(row(int64(1), int64(2*rounds)), row(int64(2), int64(2*rounds)))
		if diff := cmp.Diff(want, readAll(t, client, "Counters", "K", "V")); diff != "" {
			t.Errorf("Counters (-want +got):\n%s", diff)
		}
	})

	t.Run("no write skew", func(t *testing.T) {
		t.Parallel()
		// Two doctors are on call; each transaction lets one go off call if the other is still
		// on. Under snapshot isolation both could commit (write skew); Spanner's transactions
		// are serializable, so exactly one does.
		client := newDB(t, counterSchema...)
		mustApply(t, client,
			spanner.Insert("Counters", []string{"K", "V"}, []any{1, 1}),
			spanner.Insert("Counters", []string{"K", "V"}, []any{2, 1}),
		)
		ctx := testCtx(t)
		var readBoth sync.WaitGroup
		readBoth.Add(2)
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		for _, me := range []int64{1, 2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				first := true
				_, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
					res, err := tryQuery(ctx, tx, spanner.NewStatement(`SELECT SUM(V) FROM Counters`))
					if err != nil {
						return err
					}
					if first {
						// Let both transactions read before either writes; a server that makes
						// the second reader wait is given a bounded time, not a deadlock.
						first = false
						readBoth.Done()
						waitTimeout(&readBoth, 2*time.Second)
					}
					if res.Rows[0][0] != int64(2) {
						return nil
					}
					_, err = tx.Update(ctx, spanner.Statement{SQL: `UPDATE Counters SET V = 0 WHERE K = @k`, Params: map[string]any{"k": me}})
					return err
				})
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("transaction: %v", err)
			}
		}
		res := query(t, client.Single(), spanner.NewStatement(`SELECT SUM(V) FROM Counters`))
		if diff := cmp.Diff(rows(row(int64(1))), res.Rows); diff != "" {
			t.Errorf("doctors on call (-want +got):\n%s", diff)
		}
	})

	t.Run("no phantoms", func(t *testing.T) {
		t.Parallel()
		// Each transaction inserts a row into a key range only if the range is empty. Two
		// concurrent ones both see it empty; serializability (range locks, or aborting on
		// conflict) lets only one of the inserts survive.
		client := newDB(t, counterSchema...)
		ctx := testCtx(t)
		var readBoth sync.WaitGroup
		readBoth.Add(2)
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		for _, k := range []int64{10, 20} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				first := true
				_, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
					res, err := tryQuery(ctx, tx, spanner.NewStatement(`SELECT COUNT(*) FROM Counters WHERE K BETWEEN 1 AND 100`))
					if err != nil {
						return err
					}
					if first {
						first = false
						readBoth.Done()
						waitTimeout(&readBoth, 2*time.Second)
					}
					if res.Rows[0][0] != int64(0) {
						return nil
					}
					return tx.BufferWrite([]*spanner.Mutation{spanner.Insert("Counters", []string{"K", "V"}, []any{k, 1})})
				})
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("transaction: %v", err)
			}
		}
		res := query(t, client.Single(), spanner.NewStatement(`SELECT COUNT(*) FROM Counters`))
		if diff := cmp.Diff(rows(row(int64(1))), res.Rows); diff != "" {
			t.Errorf("rows inserted into the range (-want +got):\n%s", diff)
		}
	})

	t.Run("read-only transaction sees one snapshot", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, counterSchema...)
		mustApply(t, client, spanner.Insert("Counters", []string{"K", "V"}, []any{1, 1}))
		ctx := testCtx(t)
		ro := client.ReadOnlyTransaction()
		defer ro.Close()
		before, err := readCounter(ctx, ro, 1)
		if err != nil {
			t.Fatalf("first read: %v", err)
		}
		mustApply(t, client,
			spanner.Update("Counters", []string{"K", "V"}, []any{1, 2}),
			spanner.Insert("Counters", []string{"K", "V"}, []any{2, 2}),
		)
		after, err := readCounter(ctx, ro, 1)
		if err != nil {
			t.Fatalf("second read: %v", err)
		}
		res, err := tryQuery(ctx, ro, spanner.NewStatement(`SELECT COUNT(*) FROM Counters`))
		if err != nil {
			t.Fatalf("query: %v", err)
		}
		if before != 1 || after != 1 {
			t.Errorf("read-only transaction read %d then %d, want 1 both times", before, after)
		}
		if diff := cmp.Diff(rows(row(int64(1))), res.Rows); diff != "" {
			t.Errorf("count in snapshot (-want +got):\n%s", diff)
		}
		roTs, err := ro.Timestamp()
		if err != nil {
			t.Fatalf("Timestamp: %v", err)
		}
		if roTs.IsZero() {
			t.Errorf("read-only transaction timestamp is zero")
		}
		strong, err := readCounter(ctx, client.Single(), 1)
		if err != nil {
			t.Fatalf("strong read: %v", err)
		}
		if strong != 2 {
			t.Errorf("strong read after commit = %d, want 2", strong)
		}
	})

	t.Run("strong reads see every committed write", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, counterSchema...)
		mustApply(t, client, spanner.Insert("Counters", []string{"K", "V"}, []any{1, 0}))
		ctx := testCtx(t)
		for i := int64(1); i <= 20; i++ {
			if i%2 == 0 {
				mustApply(t, client, spanner.Update("Counters", []string{"K", "V"}, []any{1, i}))
			} else {
				mustUpdate(t, client, fmt.Sprintf(`UPDATE Counters SET V = %d WHERE K = 1`, i))
			}
			got, err := readCounter(ctx, client.Single(), 1)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			res := query(t, client.Single(), spanner.NewStatement(`SELECT V FROM Counters WHERE K = 1`))
			if got != i || !cmp.Equal(rows(row(i)), res.Rows) {
				t.Fatalf("after write %d: read %d, query %v", i, got, res.Rows)
			}
		}
	})

	t.Run("commit timestamps strictly increase", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, counterSchema...)
		var prev time.Time
		for i := 0; i < 20; i++ {
			ts := mustApply(t, client, spanner.InsertOrUpdate("Counters", []string{"K", "V"}, []any{1, i}))
			if !ts.After(prev) {
				t.Fatalf("commit %d timestamp %v is not after previous %v", i, ts, prev)
			}
			prev = ts
		}
		// Commit timestamps are real time (TrueTime), not a counter.
		if d := time.Since(prev); d < -time.Minute || d > time.Minute {
			t.Errorf("commit timestamp %v is %v away from local time", prev, d)
		}
	})

	t.Run("abandoned transaction does not block others", func(t *testing.T) {
		t.Parallel()
		tests := []struct {
			name  string
			write bool // whether the abandoned transaction also wrote the row
		}{
			{"after a read", false},
			{"after a read and a write", true},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				client := newDB(t, counterSchema...)
				mustApply(t, client, spanner.Insert("Counters", []string{"K", "V"}, []any{1, 0}))
				ctx := testCtx(t)
				// Begin a transaction that takes locks and never end it, as a crashed client
				// would.
				abandoned, err := spanner.NewReadWriteStmtBasedTransaction(ctx, client)
				if err != nil {
					t.Fatalf("begin: %v", err)
				}
				t.Cleanup(func() { abandoned.Rollback(context.Background()) })
				if _, err := readCounter(ctx, abandoned, 1); err != nil {
					t.Fatalf("read in abandoned transaction: %v", err)
				}
				if tt.write {
					if _, err := abandoned.Update(ctx, spanner.NewStatement(`UPDATE Counters SET V = 100 WHERE K = 1`)); err != nil {
						t.Fatalf("update in abandoned transaction: %v", err)
					}
				}

				// Spanner aborts idle transactions (after about 10 s), so others eventually
				// proceed.
				otherCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				_, err = client.ReadWriteTransaction(otherCtx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
					v, err := readCounter(ctx, tx, 1)
					if err != nil {
						return err
					}
					return tx.BufferWrite([]*spanner.Mutation{spanner.Update("Counters", []string{"K", "V"}, []any{1, v + 1})})
				})
				if err != nil {
					t.Fatalf("transaction blocked by an abandoned one: %v", err)
				}
				got, err := readCounter(ctx, client.Single(), 1)
				if err != nil {
					t.Fatalf("read: %v", err)
				}
				if got != 1 {
					t.Errorf("counter = %d, want 1 (the abandoned update must never commit)", got)
				}
				if tt.write {
					// The abandoned transaction lost its locks, so it cannot commit any more.
					if _, err := abandoned.Commit(ctx); err == nil {
						t.Errorf("abandoned transaction committed after another transaction overwrote its read")
					}
				}
			})
		}
	})

	t.Run("aborted transaction is retried", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, counterSchema...)
		mustApply(t, client, spanner.Insert("Counters", []string{"K", "V"}, []any{1, 0}))
		ctx := testCtx(t)
		attempts := 0
		interfered := false
		_, err := client.ReadWriteTransaction(ctx, func(txCtx context.Context, tx *spanner.ReadWriteTransaction) error {
			attempts++
			v, err := readCounter(txCtx, tx, 1)
			if err != nil {
				return err
			}
			if !interfered {
				interfered = true
				// A conflicting writer runs while this transaction holds its read. Whatever the
				// concurrency control (wait, wound-wait, or optimistic abort), both increments
				// must survive: if the writer goes first, this transaction is aborted and its
				// retry reads the new value.
				done := make(chan error, 1)
				go func() {
					_, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, tx2 *spanner.ReadWriteTransaction) error {
						v2, err := readCounter(ctx, tx2, 1)
						if err != nil {
							return err
						}
						return tx2.BufferWrite([]*spanner.Mutation{spanner.Update("Counters", []string{"K", "V"}, []any{1, v2 + 10})})
					})
					done <- err
				}()
				t.Cleanup(func() {
					if err := <-done; err != nil {
						t.Errorf("interfering transaction: %v", err)
					}
				})
				// Give the writer a chance to commit first; if the server makes it wait for
				// this transaction instead, go on after a short while.
				select {
				case err := <-done:
					done <- err
				case <-time.After(2 * time.Second):
				}
			}
			return tx.BufferWrite([]*spanner.Mutation{spanner.Update("Counters", []string{"K", "V"}, []any{1, v + 1})})
		})
		if err != nil {
			t.Fatalf("transaction: %v", err)
		}
		eventually(t, 30*time.Second, func() (bool, error) {
			got, err := readCounter(ctx, client.Single(), 1)
			return got == 11, fmt.Errorf("counter = %d (%v), want 11", got, err)
		})
		t.Logf("attempts: %d", attempts)
	})

	t.Run("stale reads", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, counterSchema...)
		ts1 := mustApply(t, client, spanner.Insert("Counters", []string{"K", "V"}, []any{1, 1}))
		ts2 := mustApply(t, client, spanner.Update("Counters", []string{"K", "V"}, []any{1, 2}))
		ctx := testCtx(t)

		// A minimum read timestamp at a commit sees that commit (or anything later).
		v, err := readCounter(ctx, client.Single().WithTimestampBound(spanner.MinReadTimestamp(ts2)), 1)
		if err != nil {
			t.Fatalf("MinReadTimestamp read: %v", err)
		}
		if v != 2 {
			t.Errorf("MinReadTimestamp(ts2) read %d, want 2", v)
		}
		v, err = readCounter(ctx, client.Single().WithTimestampBound(spanner.MaxStaleness(10*time.Second)), 1)
		if err != nil {
			t.Fatalf("MaxStaleness read: %v", err)
		}
		if v != 1 && v != 2 {
			t.Errorf("MaxStaleness read %d, want 1 or 2", v)
		}

		// An exact read timestamp sees the database as of that instant.
		v, err = readCounter(ctx, client.Single().WithTimestampBound(spanner.ReadTimestamp(ts1)), 1)
		if err != nil {
			t.Fatalf("ReadTimestamp read: %v", err)
		}
		if v != 1 {
			t.Errorf("ReadTimestamp(ts1) read %d, want 1 (the value committed at ts1)", v)
		}
		ro := client.ReadOnlyTransaction().WithTimestampBound(spanner.ReadTimestamp(ts1))
		defer ro.Close()
		res, err := tryQuery(ctx, ro, spanner.NewStatement(`SELECT V FROM Counters`))
		if err != nil {
			t.Fatalf("query at ts1: %v", err)
		}
		if diff := cmp.Diff(rows(row(int64(1))), res.Rows); diff != "" {
			t.Errorf("query at ts1 (-want +got):\n%s", diff)
		}

		// Exact staleness reads a fixed distance in the past: once that distance has passed
		// since the last commit, it sees it.
		eventually(t, 30*time.Second, func() (bool, error) {
			v, err := readCounter(ctx, client.Single().WithTimestampBound(spanner.ExactStaleness(200*time.Millisecond)), 1)
			return err == nil && v == 2, fmt.Errorf("ExactStaleness read %d (%v), want 2", v, err)
		})
	})
}

// waitTimeout waits for wg, or gives up after d.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
	}
}
