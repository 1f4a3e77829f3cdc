// Command spanneremu-soak runs mixed concurrent read-write transactions against the Spanner
// emulator for a fixed time and then checks that no update was lost and no transaction hung.
//
//	go run ./emulator/spanneremu/cmd/spanneremu-soak -duration 10m -workers 16
//
// Without SPANNER_EMULATOR_HOST it starts an in-process emulator; with it, it soaks that
// endpoint (any Spanner emulator). Every worker loops over four transaction shapes:
//
//   - transfer: read two accounts, move money with UPDATE mutations (the sum must not change);
//   - increment: DML "UPDATE Counters SET N = N + 1" on a few hot rows (every committed
//     increment must be counted);
//   - insert-or-ignore: the consumer inbox pattern, with deliberately duplicated event ids
//     (each event id must be processed exactly once);
//   - audit: a read-only transaction that sums all balances (must always see the invariant).
//
// A transaction that does not finish within -txn-timeout counts as hung. The command exits 1
// if any check fails.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/spanner"
	database "cloud.google.com/go/spanner/admin/database/apiv1"
	databasepb "cloud.google.com/go/spanner/admin/database/apiv1/databasepb"
	instance "cloud.google.com/go/spanner/admin/instance/apiv1"
	instancepb "cloud.google.com/go/spanner/admin/instance/apiv1/instancepb"
	"google.golang.org/api/iterator"

	"github.com/spanmart/spanmart/emulator/spanneremu"
)

const (
	accounts       = 50
	initialBalance = 1000
	hotCounters    = 4
)

func main() {
	duration := flag.Duration("duration", 10*time.Minute, "how long to run")
	workers := flag.Int("workers", 16, "concurrent workers")
	txnTimeout := flag.Duration("txn-timeout", time.Minute, "a transaction running longer than this counts as hung")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *duration, *workers, *txnTimeout); err != nil {
		log.Fatalf("soak: FAILED: %v", err)
	}
	log.Printf("soak: PASSED")
}

type counters struct {
	transfers, increments, inserts, dupes, audits, hung, errs atomic.Int64
	// nanos is the total time spent per transaction kind, for the average latency report.
	nanos [4]atomic.Int64
}

var progressEvery = flag.Duration("progress", 30*time.Second, "how often to print progress and the interval's throughput")

func run(ctx context.Context, duration time.Duration, workers int, txnTimeout time.Duration) error {
	if os.Getenv("SPANNER_EMULATOR_HOST") == "" {
		srv, err := spanneremu.Start(ctx, spanneremu.Options{})
		if err != nil {
			return err
		}
		defer srv.Close()
		os.Setenv("SPANNER_EMULATOR_HOST", srv.Addr())
		log.Printf("soak: in-process emulator on %s", srv.Addr())
	}
	dbName, err := createDatabase(ctx)
	if err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	client, err := spanner.NewClient(ctx, dbName)
	if err != nil {
		return err
	}
	defer client.Close()
	if err := seed(ctx, client); err != nil {
		return fmt.Errorf("seed: %w", err)
	}

	var c counters
	var processed sync.Map // event id -> true, for the ids a worker saw inserted
	deadline := time.Now().Add(duration)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
				tctx, cancel := context.WithTimeout(ctx, txnTimeout)
				err := step(tctx, client, r, w, i, &c, &processed)
				hung := errors.Is(tctx.Err(), context.DeadlineExceeded)
				cancel()
				switch {
				case hung:
					c.hung.Add(1)
					log.Printf("soak: worker %d: transaction hung for %s: %v", w, txnTimeout, err)
				case err != nil && ctx.Err() == nil:
					c.errs.Add(1)
					log.Printf("soak: worker %d: %v", w, err)
				}
			}
		}(w)
	}
	progress := time.NewTicker(*progressEvery)
	defer progress.Stop()
	var lastTotal int64
	lastAt := start
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
loop:
	for {
		select {
		case <-done:
			break loop
		case now := <-progress.C:
			// The rate of each interval shows whether throughput degrades over the run.
			total := c.transfers.Load() + c.increments.Load() + c.inserts.Load() + c.dupes.Load() + c.audits.Load()
			log.Printf("soak: %s: %d transfers, %d increments, %d inbox inserts (%d duplicates ignored), %d audits; %.0f transactions/s in the last %s",
				time.Since(start).Round(time.Second), c.transfers.Load(), c.increments.Load(), c.inserts.Load(), c.dupes.Load(), c.audits.Load(),
				float64(total-lastTotal)/now.Sub(lastAt).Seconds(), now.Sub(lastAt).Round(time.Second))
			lastTotal, lastAt = total, now
		}
	}
	elapsed := time.Since(start)
	total := c.transfers.Load() + c.increments.Load() + c.inserts.Load() + c.dupes.Load() + c.audits.Load()
	log.Printf("soak: %s with %d workers: %d transactions (%.0f/s): %d transfers, %d increments, %d inbox inserts, %d duplicates ignored, %d audits; %d errors, %d hung",
		elapsed.Round(time.Second), workers, total, float64(total)/elapsed.Seconds(), c.transfers.Load(), c.increments.Load(), c.inserts.Load(), c.dupes.Load(), c.audits.Load(), c.errs.Load(), c.hung.Load())
	avg := func(kind int, n int64) time.Duration {
		if n == 0 {
			return 0
		}
		return time.Duration(c.nanos[kind].Load() / n).Round(time.Microsecond)
	}
	log.Printf("soak: average latency: transfer %s, increment %s, inbox %s, audit %s",
		avg(0, c.transfers.Load()), avg(1, c.increments.Load()), avg(2, c.inserts.Load()+c.dupes.Load()), avg(3, c.audits.Load()))
	return verify(context.Background(), client, &c, &processed)
}

func step(ctx context.Context, client *spanner.Client, r *rand.Rand, w, i int, c *counters, processed *sync.Map) error {
	kind := r.IntN(4)
	defer func(start time.Time) { c.nanos[kind].Add(int64(time.Since(start))) }(time.Now())
	switch kind {
	case 0:
		from, to := r.IntN(accounts), r.IntN(accounts)
		if from == to {
			to = (to + 1) % accounts
		}
		amount := int64(r.IntN(20) + 1)
		_, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
			a, err := balance(ctx, tx, from)
			if err != nil {
				return err
			}
			b, err := balance(ctx, tx, to)
			if err != nil {
				return err
			}
			if a < amount {
				return nil
			}
			return tx.BufferWrite([]*spanner.Mutation{
				spanner.Update("Accounts", []string{"Id", "Balance"}, []any{int64(from), a - amount}),
				spanner.Update("Accounts", []string{"Id", "Balance"}, []any{int64(to), b + amount}),
			})
		})
		if err == nil {
			c.transfers.Add(1)
		}
		return err
	case 1:
		id := int64(r.IntN(hotCounters))
		_, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
			_, err := tx.Update(ctx, spanner.Statement{SQL: `UPDATE Counters SET N = N + 1 WHERE Id = @id`, Params: map[string]any{"id": id}})
			return err
		})
		if err == nil {
			c.increments.Add(1)
		}
		return err
	case 2:
		// Every fourth event id repeats one a worker already used: a redelivery.
		eventID := fmt.Sprintf("w%d-e%d", w, i)
		if i > 4 && r.IntN(4) == 0 {
			eventID = fmt.Sprintf("w%d-e%d", w, r.IntN(i))
		}
		var inserted int64
		_, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
			n, err := tx.Update(ctx, spanner.Statement{
				SQL:    `INSERT OR IGNORE INTO ProcessedEvents (EventId, Consumer, ProcessedAt) VALUES (@id, 'soak', PENDING_COMMIT_TIMESTAMP())`,
				Params: map[string]any{"id": eventID},
			})
			inserted = n
			if err != nil || n == 0 {
				return err
			}
			_, err = tx.Update(ctx, spanner.Statement{SQL: `UPDATE Counters SET N = N + 1 WHERE Id = @id`, Params: map[string]any{"id": int64(hotCounters)}})
			return err
		})
		if err == nil {
			if inserted == 1 {
				if _, dup := processed.LoadOrStore(eventID, true); dup {
					return fmt.Errorf("event %s was processed twice", eventID)
				}
				c.inserts.Add(1)
			} else {
				c.dupes.Add(1)
			}
		}
		return err
	default:
		ro := client.ReadOnlyTransaction()
		defer ro.Close()
		sum, err := sumBalances(ctx, ro)
		if err != nil {
			return err
		}
		if sum != accounts*initialBalance {
			return fmt.Errorf("audit saw total balance %d, want %d", sum, accounts*initialBalance)
		}
		c.audits.Add(1)
		return nil
	}
}

func balance(ctx context.Context, tx *spanner.ReadWriteTransaction, id int) (int64, error) {
	row, err := tx.ReadRow(ctx, "Accounts", spanner.Key{int64(id)}, []string{"Balance"})
	if err != nil {
		return 0, err
	}
	var b int64
	return b, row.Columns(&b)
}

func sumBalances(ctx context.Context, ro *spanner.ReadOnlyTransaction) (int64, error) {
	var sum int64
	err := ro.Query(ctx, spanner.NewStatement(`SELECT SUM(Balance) FROM Accounts`)).Do(func(r *spanner.Row) error {
		return r.Columns(&sum)
	})
	return sum, err
}

func verify(ctx context.Context, client *spanner.Client, c *counters, processed *sync.Map) error {
	var problems []error
	if n := c.hung.Load(); n > 0 {
		problems = append(problems, fmt.Errorf("%d transactions hung", n))
	}
	if n := c.errs.Load(); n > 0 {
		problems = append(problems, fmt.Errorf("%d transactions failed", n))
	}
	sum, err := sumBalances(ctx, client.ReadOnlyTransaction())
	if err != nil {
		return err
	}
	if sum != accounts*initialBalance {
		problems = append(problems, fmt.Errorf("total balance %d, want %d (a transfer was lost or doubled)", sum, accounts*initialBalance))
	}
	var hot, inbox int64
	iter := client.Single().Query(ctx, spanner.NewStatement(`SELECT Id, N FROM Counters`))
	defer iter.Stop()
	for {
		row, err := iter.Next()
		if err == iterator.Done {
			break
		}
		if err != nil {
			return err
		}
		var id, n int64
		if err := row.Columns(&id, &n); err != nil {
			return err
		}
		if id == hotCounters {
			inbox = n
		} else {
			hot += n
		}
	}
	if hot != c.increments.Load() {
		problems = append(problems, fmt.Errorf("counters sum to %d, want %d committed increments (an update was lost)", hot, c.increments.Load()))
	}
	var rows int64
	if err := client.Single().Query(ctx, spanner.NewStatement(`SELECT COUNT(*) FROM ProcessedEvents`)).Do(func(r *spanner.Row) error {
		return r.Columns(&rows)
	}); err != nil {
		return err
	}
	if rows != c.inserts.Load() || inbox != rows {
		problems = append(problems, fmt.Errorf("inbox has %d rows and counted %d side effects, want %d", rows, inbox, c.inserts.Load()))
	}
	log.Printf("soak: checks: total balance %d, %d increments counted, %d inbox rows", sum, hot, rows)
	return errors.Join(problems...)
}

func createDatabase(ctx context.Context) (string, error) {
	project, inst := "soak-project", fmt.Sprintf("soak-%d", time.Now().Unix())
	ia, err := instance.NewInstanceAdminClient(ctx)
	if err != nil {
		return "", err
	}
	defer ia.Close()
	op, err := ia.CreateInstance(ctx, &instancepb.CreateInstanceRequest{
		Parent: "projects/" + project, InstanceId: inst,
		Instance: &instancepb.Instance{Config: "projects/" + project + "/instanceConfigs/emulator-config", DisplayName: "soak", NodeCount: 1},
	})
	if err != nil {
		return "", err
	}
	if _, err := op.Wait(ctx); err != nil {
		return "", err
	}
	da, err := database.NewDatabaseAdminClient(ctx)
	if err != nil {
		return "", err
	}
	defer da.Close()
	dop, err := da.CreateDatabase(ctx, &databasepb.CreateDatabaseRequest{
		Parent: "projects/" + project + "/instances/" + inst, CreateStatement: "CREATE DATABASE soak",
		ExtraStatements: []string{
			`CREATE TABLE Accounts (Id INT64 NOT NULL, Balance INT64 NOT NULL, CONSTRAINT NonNegative CHECK (Balance >= 0)) PRIMARY KEY (Id)`,
			`CREATE TABLE Counters (Id INT64 NOT NULL, N INT64 NOT NULL) PRIMARY KEY (Id)`,
			`CREATE TABLE ProcessedEvents (EventId STRING(64) NOT NULL, Consumer STRING(64) NOT NULL, ProcessedAt TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp = true)) PRIMARY KEY (EventId, Consumer)`,
		},
	})
	if err != nil {
		return "", err
	}
	db, err := dop.Wait(ctx)
	if err != nil {
		return "", err
	}
	return db.Name, nil
}

func seed(ctx context.Context, client *spanner.Client) error {
	var ms []*spanner.Mutation
	for i := 0; i < accounts; i++ {
		ms = append(ms, spanner.Insert("Accounts", []string{"Id", "Balance"}, []any{int64(i), int64(initialBalance)}))
	}
	for i := 0; i <= hotCounters; i++ {
		ms = append(ms, spanner.Insert("Counters", []string{"Id", "N"}, []any{int64(i), int64(0)}))
	}
	_, err := client.Apply(ctx, ms)
	return err
}
