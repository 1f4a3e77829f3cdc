package conformance

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
	"github.com/google/go-cmp/cmp"
)

// TestConcurrentTransfers runs workers that mix read-modify-write transfers between a few hot
// rows with inserts of new rows, through both mutations and DML. Serializable transactions keep
// the total constant; a lost update or a partially applied transaction breaks it.
func TestConcurrentTransfers(t *testing.T) {
	t.Parallel()
	name, client := newDBNamed(t,
		`CREATE TABLE Accounts (Id INT64 NOT NULL, Balance INT64 NOT NULL) PRIMARY KEY (Id)`,
		`CREATE TABLE Ledger (Id STRING(64) NOT NULL, Account INT64 NOT NULL, Amount INT64 NOT NULL) PRIMARY KEY (Id)`,
	)
	const (
		accounts = 4
		initial  = 1000
		workers  = 8
		txns     = 50
	)
	var ms []*spanner.Mutation
	for i := 0; i < accounts; i++ {
		ms = append(ms, spanner.Insert("Accounts", []string{"Id", "Balance"}, []any{i, initial}))
	}
	mustApply(t, client, ms...)

	// Half the workers use a second client, so transactions also come from different
	// sessions.
	clients := []*spanner.Client{client, newClient(t, name)}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var ledgerRows atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			for i := 0; i < txns; i++ {
				from, to := rng.IntN(accounts), rng.IntN(accounts-1)
				if to >= from {
					to++
				}
				amount := int64(rng.IntN(20) + 1)
				kind := rng.IntN(3)
				ledgerID := fmt.Sprintf("w%d-t%d", w, i)
				// The closure may run more than once (aborts are retried): it only decides
				// from what it reads and reports through its result.
				wrote := false
				_, err := clients[w%2].ReadWriteTransaction(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
					wrote = false
					switch kind {
					case 0: // transfer with reads and mutations
						bals, err := balances(ctx, tx, from, to)
						if err != nil {
							return err
						}
						if bals[0] < amount {
							return nil
						}
						return tx.BufferWrite([]*spanner.Mutation{
							spanner.Update("Accounts", []string{"Id", "Balance"}, []any{from, bals[0] - amount}),
							spanner.Update("Accounts", []string{"Id", "Balance"}, []any{to, bals[1] + amount}),
						})
					case 1: // transfer with DML
						n, err := tx.Update(ctx, spanner.Statement{
							SQL:    `UPDATE Accounts SET Balance = Balance - @amount WHERE Id = @id AND Balance >= @amount`,
							Params: map[string]any{"id": from, "amount": amount},
						})
						if err != nil || n == 0 {
							return err
						}
						_, err = tx.Update(ctx, spanner.Statement{
							SQL:    `UPDATE Accounts SET Balance = Balance + @amount WHERE Id = @id`,
							Params: map[string]any{"id": to, "amount": amount},
						})
						return err
					default: // move money out of an account into a new ledger row
						bals, err := balances(ctx, tx, from)
						if err != nil {
							return err
						}
						if bals[0] < amount {
							return nil
						}
						if _, err := tx.Update(ctx, spanner.Statement{
							SQL:    `INSERT INTO Ledger (Id, Account, Amount) VALUES (@id, @account, @amount)`,
							Params: map[string]any{"id": ledgerID, "account": from, "amount": amount},
						}); err != nil {
							return err
						}
						wrote = true
						return tx.BufferWrite([]*spanner.Mutation{
							spanner.Update("Accounts", []string{"Id", "Balance"}, []any{from, bals[0] - amount}),
						})
					}
				})
				if err != nil {
					errs <- fmt.Errorf("worker %d transaction %d: %w", w, i, err)
					return
				}
				if wrote {
					ledgerRows.Add(1)
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	res := query(t, client.Single(), spanner.NewStatement(
		`SELECT (SELECT SUM(Balance) FROM Accounts) + IFNULL((SELECT SUM(Amount) FROM Ledger), 0),
		        (SELECT COUNT(*) FROM Ledger),
		        (SELECT COUNTIF(Balance < 0) FROM Accounts)`))
	want := rows(row(int64(accounts*initial), ledgerRows.Load(), int64(0)))
	if diff := cmp.Diff(want, res.Rows); diff != "" {
		t.Errorf("invariants [total, ledger rows, negative balances] (-want +got):\n%s", diff)
	}
}

// balances reads the balances of the given accounts, in order.
func balances(ctx context.Context, tx *spanner.ReadWriteTransaction, ids ...int) ([]int64, error) {
	out := make([]int64, len(ids))
	for i, id := range ids {
		r, err := tx.ReadRow(ctx, "Accounts", spanner.Key{id}, []string{"Balance"})
		if err != nil {
			return nil, err
		}
		if err := r.Columns(&out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// TestExclusiveLockHint runs concurrent read-modify-write increments of one row, each reading it
// with LOCK_HINT_EXCLUSIVE (spanner.ReadOptions.LockHint): the count is exact, and on spanneremu
// no increment is aborted for a stale read, because each waits for the lock instead of reading
// the value another is about to overwrite. An increment may still be wounded, on spanneremu as on
// Cloud Spanner: one that began first but asked for the lock second takes it from the younger
// holder (wound-wait); every rerun must be one of those. (Google's emulator runs one read-write
// transaction at a time and aborts the others, so against an external endpoint only the count is
// checked.)
func TestExclusiveLockHint(t *testing.T) {
	t.Parallel()
	name, client := newDBNamed(t, `CREATE TABLE Counters (Id INT64 NOT NULL, N INT64 NOT NULL) PRIMARY KEY (Id)`)
	mustApply(t, client, spanner.Insert("Counters", []string{"Id", "N"}, []any{1, 0}))
	const workers, increments = 6, 10
	ctx := testCtx(t)
	var runs atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < increments; i++ {
				_, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
					runs.Add(1)
					r, err := tx.ReadRowWithOptions(ctx, "Counters", spanner.Key{1}, []string{"N"},
						&spanner.ReadOptions{LockHint: sppb.ReadRequest_LOCK_HINT_EXCLUSIVE})
					if err != nil {
						return err
					}
					var n int64
					if err := r.Column(0, &n); err != nil {
						return err
					}
					return tx.BufferWrite([]*spanner.Mutation{spanner.Update("Counters", []string{"Id", "N"}, []any{1, n + 1})})
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("increment: %v", err)
	}
	if diff := cmp.Diff(rows(row(int64(workers*increments))), readAll(t, client, "Counters", "N")); diff != "" {
		t.Errorf("counter (-want +got):\n%s", diff)
	}
	if emu != nil {
		others := maps.Clone(emu.Stats().ByDatabase[name[strings.LastIndex(name, "/")+1:]].ConflictsBy)
		wounded := others["COUNTERS wounded"]
		delete(others, "COUNTERS wounded")
		if len(others) > 0 {
			t.Errorf("aborts other than wounds: %v", others)
		}
		if runs.Load() != workers*increments+wounded {
			t.Errorf("transaction functions run %d times for %d increments and %d wounds: an exclusive read was aborted instead of waiting", runs.Load(), workers*increments, wounded)
		}
	}
}
