package conformance

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/go-cmp/cmp"
)

// TestCommitTimestampCursor checks the property an outbox relay depends on: a reader that
// repeatedly runs a strong query for rows whose commit timestamp is greater than the largest it
// has seen never misses a row, because a strong read at time R sees every commit at or before R
// and every later commit gets a timestamp after R.
func TestCommitTimestampCursor(t *testing.T) {
	t.Parallel()
	client := newDB(t, `CREATE TABLE Outbox (
		Id STRING(36) NOT NULL,
		CreatedAt TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp = true),
	) PRIMARY KEY (Id)`)
	const writers, perWriter = 4, 25
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var wg sync.WaitGroup
	errs := make(chan error, writers+1)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				id := fmt.Sprintf("w%d-%03d", w, i)
				var err error
				if i%2 == 0 {
					_, err = client.Apply(ctx, []*spanner.Mutation{spanner.Insert("Outbox", []string{"Id", "CreatedAt"}, []any{id, spanner.CommitTimestamp})})
				} else {
					_, err = client.ReadWriteTransaction(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
						_, err := tx.Update(ctx, spanner.Statement{
							SQL:    `INSERT INTO Outbox (Id, CreatedAt) VALUES (@id, PENDING_COMMIT_TIMESTAMP())`,
							Params: map[string]any{"id": id},
						})
						return err
					})
				}
				if err != nil {
					errs <- fmt.Errorf("writer %d row %d: %w", w, i, err)
					return
				}
			}
		}(w)
	}
	writersDone := make(chan struct{})
	go func() {
		wg.Wait()
		close(writersDone)
	}()

	seen := map[string]int{}
	var cursor time.Time
	poll := func() error {
		iter := client.Single().Query(ctx, spanner.Statement{
			SQL:    `SELECT Id, CreatedAt FROM Outbox WHERE CreatedAt > @cursor ORDER BY CreatedAt, Id`,
			Params: map[string]any{"cursor": cursor},
		})
		return iter.Do(func(r *spanner.Row) error {
			var id string
			var at time.Time
			if err := r.Columns(&id, &at); err != nil {
				return err
			}
			seen[id]++
			if at.After(cursor) {
				cursor = at
			}
			return nil
		})
	}
	for done := false; !done; {
		select {
		case <-writersDone:
			done = true
		default:
		}
		if err := poll(); err != nil {
			t.Fatalf("poll: %v", err)
		}
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// The last poll ran after every writer had finished.
	if len(seen) != writers*perWriter {
		t.Errorf("relay saw %d distinct rows, want %d: rows committed behind the cursor were missed", len(seen), writers*perWriter)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("row %s seen %d times, want once", id, n)
		}
	}
}

// TestCommitTimestampKey covers a commit timestamp as part of the primary key, the usual shape
// of an event or outbox table ordered by commit time.
func TestCommitTimestampKey(t *testing.T) {
	t.Parallel()
	client := newDB(t, `CREATE TABLE Events (
		CreatedAt TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp = true),
		Id STRING(36) NOT NULL,
		Payload STRING(MAX),
	) PRIMARY KEY (CreatedAt, Id)`)
	ts1 := mustApply(t, client, spanner.Insert("Events", []string{"CreatedAt", "Id", "Payload"}, []any{spanner.CommitTimestamp, "a", "first"}))
	resp, err := client.ReadWriteTransactionWithOptions(testCtx(t), func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
		_, err := tx.Update(ctx, spanner.NewStatement(`INSERT INTO Events (CreatedAt, Id, Payload) VALUES (PENDING_COMMIT_TIMESTAMP(), 'b', 'second'), (PENDING_COMMIT_TIMESTAMP(), 'c', 'third')`))
		return err
	}, spanner.TransactionOptions{})
	if err != nil {
		t.Fatalf("transaction: %v", err)
	}
	ts2 := resp.CommitTs
	want := [][]any{{ts1, "a", "first"}, {ts2, "b", "second"}, {ts2, "c", "third"}}
	if diff := cmp.Diff(want, readAll(t, client, "Events", "CreatedAt", "Id", "Payload"), cmpOpts...); diff != "" {
		t.Errorf("Events (-want +got):\n%s", diff)
	}
	// The key is the commit timestamp, so the row can be read back by it.
	r, err := client.Single().ReadRow(testCtx(t), "Events", spanner.Key{ts2, "c"}, []string{"Payload"})
	if err != nil {
		t.Fatalf("ReadRow by commit timestamp key: %v", err)
	}
	var payload string
	if err := r.Columns(&payload); err != nil {
		t.Fatal(err)
	}
	if payload != "third" {
		t.Errorf("Payload = %q, want third", payload)
	}
	// Rows after a commit timestamp, as a consumer resuming from ts1 would ask.
	iter := client.Single().Read(testCtx(t), "Events", spanner.KeyRange{Start: spanner.Key{ts1}, End: spanner.Key{}, Kind: spanner.OpenClosed}, []string{"Id"})
	res, err := collect(iter)
	if err != nil {
		t.Fatalf("range read: %v", err)
	}
	if diff := cmp.Diff([][]any{{"b"}, {"c"}}, res.Rows); diff != "" {
		t.Errorf("rows after ts1 (-want +got):\n%s", diff)
	}
}
