package conformance

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"testing"

	"cloud.google.com/go/spanner"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
)

// TestLargeResults checks results far bigger than one streaming message: many rows, and single
// values big enough that the server must split them across PartialResultSets (chunked values).
func TestLargeResults(t *testing.T) {
	t.Parallel()
	client := newDB(t, `CREATE TABLE Blobs (Id INT64 NOT NULL, S STRING(MAX), B BYTES(MAX), A ARRAY<STRING(MAX)>) PRIMARY KEY (Id)`)

	const n = 3000
	pad := strings.Repeat("p", 1000)
	var ms []*spanner.Mutation
	for i := 0; i < n; i++ {
		ms = append(ms, spanner.Insert("Blobs", []string{"Id", "S"}, []any{i, fmt.Sprintf("%05d%s", i, pad)}))
		if len(ms) == 500 {
			mustApply(t, client, ms...)
			ms = nil
		}
	}
	big := strings.Repeat("0123456789abcdef", 6<<20/16) // 6 MiB: beyond any single message chunk
	bigBytes := []byte(strings.Repeat("\x00\xff", 2<<20))
	bigArray := []string{strings.Repeat("a", 3<<20), "", strings.Repeat("b", 3<<20)}
	mustApply(t, client, spanner.Insert("Blobs", []string{"Id", "S", "B", "A"}, []any{n, big, bigBytes, bigArray}))

	t.Run("many rows", func(t *testing.T) {
		t.Parallel()
		check := func(t *testing.T, iter *spanner.RowIterator) {
			t.Helper()
			next := 0
			err := iter.Do(func(r *spanner.Row) error {
				var id int64
				var s string
				if err := r.Columns(&id, &s); err != nil {
					return err
				}
				if id != int64(next) || s != fmt.Sprintf("%05d%s", next, pad) {
					return fmt.Errorf("row %d: got id %d, %d-byte string", next, id, len(s))
				}
				next++
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if next != n {
				t.Errorf("got %d rows, want %d", next, n)
			}
		}
		t.Run("query", func(t *testing.T) {
			check(t, client.Single().Query(testCtx(t), spanner.Statement{SQL: `SELECT Id, S FROM Blobs WHERE Id < @n ORDER BY Id`, Params: map[string]any{"n": n}}))
		})
		t.Run("read", func(t *testing.T) {
			check(t, client.Single().Read(testCtx(t), "Blobs", spanner.KeyRange{Start: spanner.Key{0}, End: spanner.Key{n}, Kind: spanner.ClosedOpen}, []string{"Id", "S"}))
		})
	})

	t.Run("big values", func(t *testing.T) {
		t.Parallel()
		sum := func(b []byte) string { return fmt.Sprintf("%x", sha256.Sum256(b)) }
		type got struct {
			S, B string
			A    []string
		}
		want := got{S: sum([]byte(big)), B: sum(bigBytes), A: []string{sum([]byte(bigArray[0])), sum(nil), sum([]byte(bigArray[2]))}}
		decode := func(r *spanner.Row) (got, error) {
			var s string
			var b []byte
			var a []string
			if err := r.Columns(&s, &b, &a); err != nil {
				return got{}, err
			}
			g := got{S: sum([]byte(s)), B: sum(b)}
			for _, e := range a {
				g.A = append(g.A, sum([]byte(e)))
			}
			return g, nil
		}
		t.Run("read", func(t *testing.T) {
			r, err := client.Single().ReadRow(testCtx(t), "Blobs", spanner.Key{n}, []string{"S", "B", "A"})
			if err != nil {
				t.Fatalf("ReadRow: %v", err)
			}
			g, err := decode(r)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, g); diff != "" {
				t.Errorf("hashes (-want +got):\n%s", diff)
			}
		})
		t.Run("query", func(t *testing.T) {
			iter := client.Single().Query(testCtx(t), spanner.Statement{SQL: `SELECT S, B, A FROM Blobs WHERE Id = @id`, Params: map[string]any{"id": n}})
			defer iter.Stop()
			r, err := iter.Next()
			if err != nil {
				t.Fatalf("query: %v", err)
			}
			g, err := decode(r)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, g); diff != "" {
				t.Errorf("hashes (-want +got):\n%s", diff)
			}
		})
	})
}

// TestCancelledStream checks that a client abandoning a streaming query halfway (context
// cancelled) gets CANCELED and leaves the server usable.
func TestCancelledStream(t *testing.T) {
	t.Parallel()
	client := newDB(t, `CREATE TABLE Nums (K INT64 NOT NULL, Pad STRING(MAX)) PRIMARY KEY (K)`)
	var ms []*spanner.Mutation
	for k := 0; k < 2000; k++ {
		ms = append(ms, spanner.Insert("Nums", []string{"K", "Pad"}, []any{k, strings.Repeat("x", 500)}))
	}
	mustApply(t, client, ms...)
	for i := 0; i < 5; i++ {
		ctx, cancel := context.WithCancel(testCtx(t))
		iter := client.Single().Query(ctx, spanner.NewStatement(`SELECT K, Pad FROM Nums ORDER BY K`))
		if _, err := iter.Next(); err != nil {
			t.Fatalf("first row: %v", err)
		}
		cancel()
		var err error
		for err == nil {
			_, err = iter.Next()
		}
		iter.Stop()
		if errors.Is(err, iterator.Done) {
			// The whole result may already have been buffered; that is fine too.
			continue
		}
		if code := spanner.ErrCode(err); code != codes.Canceled {
			t.Errorf("after cancel: code %v (%v), want Canceled", code, err)
		}
	}
	res := query(t, client.Single(), spanner.NewStatement(`SELECT COUNT(*) FROM Nums`))
	if diff := cmp.Diff(rows(row(int64(2000))), res.Rows); diff != "" {
		t.Errorf("count after cancelled streams (-want +got):\n%s", diff)
	}
}

// TestErrorMidStream checks that an error raised while rows are already streaming reaches the
// client as that error, not as a truncated but successful result.
func TestErrorMidStream(t *testing.T) {
	t.Parallel()
	client := newDB(t, `CREATE TABLE Nums (K INT64 NOT NULL, Pad STRING(MAX)) PRIMARY KEY (K)`)
	var ms []*spanner.Mutation
	for k := 0; k < 2000; k++ {
		ms = append(ms, spanner.Insert("Nums", []string{"K", "Pad"}, []any{k, strings.Repeat("x", 500)}))
	}
	mustApply(t, client, ms...)
	_, err := tryQuery(testCtx(t), client.Single(), spanner.NewStatement(`SELECT K, Pad, DIV(1, K - 1500) FROM Nums ORDER BY K`))
	checkErr(t, err, codes.OutOfRange, "division by zero")
}
