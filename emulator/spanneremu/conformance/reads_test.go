package conformance

import (
	"testing"

	"cloud.google.com/go/spanner"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
)

var readSchema = []string{
	`CREATE TABLE Nums (K INT64 NOT NULL, V STRING(MAX)) PRIMARY KEY (K)`,
	`CREATE TABLE Items (A STRING(MAX) NOT NULL, B INT64 NOT NULL, Price INT64, Note STRING(MAX), Secret STRING(MAX)) PRIMARY KEY (A, B)`,
	`CREATE INDEX ItemsByPriceDesc ON Items(Price DESC) STORING (Note)`,
	`CREATE TABLE Rev (K INT64 NOT NULL, V STRING(MAX)) PRIMARY KEY (K DESC)`,
}

func seedReads(t *testing.T, client *spanner.Client) {
	t.Helper()
	var ms []*spanner.Mutation
	// Inserted out of order on purpose: results must come back in key order regardless.
	for _, k := range []int64{7, 3, 10, 1, 5, 9, 2, 8, 4, 6} {
		ms = append(ms, spanner.Insert("Nums", []string{"K", "V"}, []any{k, "v"}))
		ms = append(ms, spanner.Insert("Rev", []string{"K", "V"}, []any{k, "v"}))
	}
	items := []struct {
		a     string
		b     int64
		price any
		note  string
	}{
		{"b", 2, 50, "b2"}, {"a", 3, 30, "a3"}, {"c", 1, nil, "c1"}, {"a", 1, 10, "a1"},
		{"b", 1, 40, "b1"}, {"a", 2, 20, "a2"},
	}
	for _, it := range items {
		ms = append(ms, spanner.Insert("Items", []string{"A", "B", "Price", "Note", "Secret"}, []any{it.a, it.b, it.price, it.note, "s"}))
	}
	mustApply(t, client, ms...)
}

func TestReads(t *testing.T) {
	t.Parallel()
	client := newDB(t, readSchema...)
	seedReads(t, client)

	t.Run("KeySets", func(t *testing.T) {
		t.Parallel()
		tests := []struct {
			name  string
			table string
			keys  spanner.KeySet
			want  []int64
		}{
			{"single key", "Nums", spanner.Key{3}, []int64{3}},
			{"missing key", "Nums", spanner.Key{42}, nil},
			{"empty key set", "Nums", spanner.KeySets(), nil},
			{"keys come back in key order", "Nums", spanner.KeySets(spanner.Key{5}, spanner.Key{1}, spanner.Key{3}), []int64{1, 3, 5}},
			{"duplicates read once", "Nums", spanner.KeySets(spanner.Key{2}, spanner.Key{2}, spanner.KeyRange{Start: spanner.Key{1}, End: spanner.Key{3}, Kind: spanner.ClosedClosed}), []int64{1, 2, 3}},
			{"closed open", "Nums", spanner.KeyRange{Start: spanner.Key{3}, End: spanner.Key{6}, Kind: spanner.ClosedOpen}, []int64{3, 4, 5}},
			{"closed closed", "Nums", spanner.KeyRange{Start: spanner.Key{3}, End: spanner.Key{6}, Kind: spanner.ClosedClosed}, []int64{3, 4, 5, 6}},
			{"open open", "Nums", spanner.KeyRange{Start: spanner.Key{3}, End: spanner.Key{6}, Kind: spanner.OpenOpen}, []int64{4, 5}},
			{"open closed", "Nums", spanner.KeyRange{Start: spanner.Key{3}, End: spanner.Key{6}, Kind: spanner.OpenClosed}, []int64{4, 5, 6}},
			{"empty range", "Nums", spanner.KeyRange{Start: spanner.Key{6}, End: spanner.Key{3}, Kind: spanner.ClosedClosed}, nil},
			{"all keys", "Nums", spanner.AllKeys(), []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
			// For a DESC key the table's order is descending, and ranges are given in that
			// order: start is the larger value.
			{"desc key all", "Rev", spanner.AllKeys(), []int64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}},
			{"desc key range", "Rev", spanner.KeyRange{Start: spanner.Key{8}, End: spanner.Key{5}, Kind: spanner.ClosedOpen}, []int64{8, 7, 6}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				var got []int64
				err := client.Single().Read(testCtx(t), tt.table, tt.keys, []string{"K"}).Do(func(r *spanner.Row) error {
					var k int64
					if err := r.Columns(&k); err != nil {
						return err
					}
					got = append(got, k)
					return nil
				})
				if err != nil {
					t.Fatalf("Read: %v", err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("keys (-want +got):\n%s", diff)
				}
			})
		}
	})

	t.Run("CompositeKeys", func(t *testing.T) {
		t.Parallel()
		tests := []struct {
			name string
			keys spanner.KeySet
			want [][]any
		}{
			{"full key", spanner.Key{"a", 2}, rows(row("a", int64(2)))},
			{"prefix", spanner.Key{"a"}.AsPrefix(), rows(row("a", int64(1)), row("a", int64(2)), row("a", int64(3)))},
			{"prefix closed closed", spanner.KeyRange{Start: spanner.Key{"b"}, End: spanner.Key{"b"}, Kind: spanner.ClosedClosed}, rows(row("b", int64(1)), row("b", int64(2)))},
			{"prefix closed open excludes", spanner.KeyRange{Start: spanner.Key{"a"}, End: spanner.Key{"b"}, Kind: spanner.ClosedOpen}, rows(row("a", int64(1)), row("a", int64(2)), row("a", int64(3)))},
			{"mixed depth range", spanner.KeyRange{Start: spanner.Key{"a", 2}, End: spanner.Key{"b"}, Kind: spanner.ClosedClosed}, rows(row("a", int64(2)), row("a", int64(3)), row("b", int64(1)), row("b", int64(2)))},
			{"open start on prefix", spanner.KeyRange{Start: spanner.Key{"a"}, End: spanner.Key{"c"}, Kind: spanner.OpenClosed}, rows(row("b", int64(1)), row("b", int64(2)), row("c", int64(1)))},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				iter := client.Single().Read(testCtx(t), "Items", tt.keys, []string{"A", "B"})
				res, err := collect(iter)
				if err != nil {
					t.Fatalf("Read: %v", err)
				}
				if diff := cmp.Diff(tt.want, res.Rows); diff != "" {
					t.Errorf("rows (-want +got):\n%s", diff)
				}
			})
		}
	})

	t.Run("Index", func(t *testing.T) {
		t.Parallel()
		tests := []struct {
			name string
			keys spanner.KeySet
			cols []string
			want [][]any
		}{
			// Index order is Price DESC, then the primary key ascending; NULL sorts first
			// ascending, so last descending.
			{"all in index order", spanner.AllKeys(), []string{"Price", "A", "B"}, rows(
				row(int64(50), "b", int64(2)), row(int64(40), "b", int64(1)), row(int64(30), "a", int64(3)),
				row(int64(20), "a", int64(2)), row(int64(10), "a", int64(1)), row(nil, "c", int64(1)))},
			{"storing column", spanner.Key{int64(30)}, []string{"Note"}, rows(row("a3"))},
			{"desc range", spanner.KeyRange{Start: spanner.Key{int64(40)}, End: spanner.Key{int64(20)}, Kind: spanner.ClosedClosed}, []string{"Price", "Note"}, rows(
				row(int64(40), "b1"), row(int64(30), "a3"), row(int64(20), "a2"))},
			{"null key", spanner.Key{spanner.NullInt64{}}, []string{"A", "B"}, rows(row("c", int64(1)))},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				iter := client.Single().ReadUsingIndex(testCtx(t), "Items", "ItemsByPriceDesc", tt.keys, tt.cols)
				res, err := collect(iter)
				if err != nil {
					t.Fatalf("ReadUsingIndex: %v", err)
				}
				if diff := cmp.Diff(tt.want, res.Rows); diff != "" {
					t.Errorf("rows (-want +got):\n%s", diff)
				}
			})
		}
		t.Run("column not in index", func(t *testing.T) {
			iter := client.Single().ReadUsingIndex(testCtx(t), "Items", "ItemsByPriceDesc", spanner.AllKeys(), []string{"Secret"})
			if _, err := collect(iter); err == nil {
				t.Errorf("reading a column the index does not store succeeded, want an error")
			}
		})
	})

	t.Run("Limit", func(t *testing.T) {
		t.Parallel()
		iter := client.Single().ReadWithOptions(testCtx(t), "Nums", spanner.AllKeys(), []string{"K"}, &spanner.ReadOptions{Limit: 3})
		res, err := collect(iter)
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		if diff := cmp.Diff(rows(row(int64(1)), row(int64(2)), row(int64(3))), res.Rows); diff != "" {
			t.Errorf("rows (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"INT64"}, res.Types); diff != "" {
			t.Errorf("types (-want +got):\n%s", diff)
		}
	})

	t.Run("ReadRow", func(t *testing.T) {
		t.Parallel()
		r, err := client.Single().ReadRow(testCtx(t), "Items", spanner.Key{"b", 1}, []string{"Note", "Price"})
		if err != nil {
			t.Fatalf("ReadRow: %v", err)
		}
		var note string
		var price spanner.NullInt64
		if err := r.Columns(&note, &price); err != nil {
			t.Fatal(err)
		}
		if note != "b1" || price != (spanner.NullInt64{Int64: 40, Valid: true}) {
			t.Errorf("ReadRow = %q, %v; want b1, 40", note, price)
		}

		_, err = client.Single().ReadRow(testCtx(t), "Items", spanner.Key{"zz", 1}, []string{"Note"})
		checkErr(t, err, codes.NotFound)

		r, err = client.Single().ReadRowUsingIndex(testCtx(t), "Items", "ItemsByPriceDesc", spanner.Key{int64(20)}, []string{"A", "B"})
		if err != nil {
			t.Fatalf("ReadRowUsingIndex: %v", err)
		}
		var a string
		var b int64
		if err := r.Columns(&a, &b); err != nil {
			t.Fatal(err)
		}
		if a != "a" || b != 2 {
			t.Errorf("ReadRowUsingIndex = %q, %d; want a, 2", a, b)
		}
	})

	t.Run("Errors", func(t *testing.T) {
		t.Parallel()
		tests := []struct {
			name  string
			table string
			cols  []string
		}{
			{"unknown table", "Nope", []string{"K"}},
			{"unknown column", "Nums", []string{"Nope"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := collect(client.Single().Read(testCtx(t), tt.table, spanner.AllKeys(), tt.cols))
				checkErr(t, err, codes.NotFound, "Nope")
			})
		}
	})
}
