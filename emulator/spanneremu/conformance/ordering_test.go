package conformance

import (
	"math"
	"math/rand/v2"
	"testing"

	"cloud.google.com/go/civil"
	"cloud.google.com/go/spanner"
	"github.com/google/go-cmp/cmp"
)

// TestKeyOrdering checks that every key type sorts as Spanner sorts it, both as a primary key
// (Read in key order, ascending and descending) and in ORDER BY: a store that encodes values as
// text or variable-width numbers gets negative numbers, nanoseconds or old dates wrong.
func TestKeyOrdering(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		typ    string
		sorted []any // ascending, as written through the client
		want   []any // ascending, as decoded
	}{
		{"int64", "INT64",
			[]any{int64(math.MinInt64), int64(-10), int64(-2), int64(0), int64(3), int64(20), int64(math.MaxInt64)},
			[]any{int64(math.MinInt64), int64(-10), int64(-2), int64(0), int64(3), int64(20), int64(math.MaxInt64)}},
		{"float64", "FLOAT64",
			[]any{math.Inf(-1), -1e300, -2.5, -0.001, 0.0, 1e-300, 2.5, 10.0, math.Inf(1)},
			[]any{math.Inf(-1), -1e300, -2.5, -0.001, 0.0, 1e-300, 2.5, 10.0, math.Inf(1)}},
		{"numeric", "NUMERIC",
			[]any{*mustRat("-100000000000000000000"), *mustRat("-10.5"), *mustRat("-2"), *mustRat("0"), *mustRat("0.000000001"), *mustRat("0.1"), *mustRat("3"), *mustRat("100")},
			[]any{"-100000000000000000000", "-10.5", "-2", "0", "0.000000001", "0.1", "3", "100"}},
		{"string", "STRING(MAX)",
			[]any{"", "A", "Z", "a", "ab", "b", "é", "日本"},
			[]any{"", "A", "Z", "a", "ab", "b", "é", "日本"}},
		{"bytes", "BYTES(MAX)",
			[]any{[]byte{}, []byte{0}, []byte{0, 0}, []byte{1}, []byte{0x7f}, []byte{0x80}, []byte{0xff}},
			[]any{[]byte{}, []byte{0}, []byte{0, 0}, []byte{1}, []byte{0x7f}, []byte{0x80}, []byte{0xff}}},
		{"bool", "BOOL", []any{false, true}, []any{false, true}},
		{"date", "DATE",
			[]any{civil.Date{Year: 1, Month: 1, Day: 1}, civil.Date{Year: 999, Month: 12, Day: 31}, civil.Date{Year: 1969, Month: 12, Day: 31}, civil.Date{Year: 1970, Month: 1, Day: 1}, civil.Date{Year: 2024, Month: 2, Day: 9}, civil.Date{Year: 2024, Month: 10, Day: 1}, civil.Date{Year: 9999, Month: 12, Day: 31}},
			[]any{date("0001-01-01"), date("0999-12-31"), date("1969-12-31"), date("1970-01-01"), date("2024-02-09"), date("2024-10-01"), date("9999-12-31")}},
		{"timestamp", "TIMESTAMP",
			[]any{ts("0001-01-01T00:00:00Z"), ts("1969-12-31T23:59:59.999999999Z"), ts("1970-01-01T00:00:00Z"), ts("1970-01-01T00:00:00.000000001Z"), ts("1970-01-01T00:00:00.1Z"), ts("1970-01-01T00:00:01Z"), ts("2024-01-01T00:00:00Z"), ts("9999-12-31T23:59:59.999999999Z")},
			[]any{ts("0001-01-01T00:00:00Z"), ts("1969-12-31T23:59:59.999999999Z"), ts("1970-01-01T00:00:00Z"), ts("1970-01-01T00:00:00.000000001Z"), ts("1970-01-01T00:00:00.1Z"), ts("1970-01-01T00:00:01Z"), ts("2024-01-01T00:00:00Z"), ts("9999-12-31T23:59:59.999999999Z")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			client := newDB(t,
				`CREATE TABLE Up (K `+tt.typ+` NOT NULL) PRIMARY KEY (K)`,
				`CREATE TABLE Down (K `+tt.typ+` NOT NULL) PRIMARY KEY (K DESC)`,
			)
			var ms []*spanner.Mutation
			for _, i := range rand.Perm(len(tt.sorted)) {
				ms = append(ms, spanner.Insert("Up", []string{"K"}, []any{tt.sorted[i]}), spanner.Insert("Down", []string{"K"}, []any{tt.sorted[i]}))
			}
			mustApply(t, client, ms...)

			asc := make([][]any, len(tt.want))
			desc := make([][]any, len(tt.want))
			for i, v := range tt.want {
				asc[i] = []any{v}
				desc[len(tt.want)-1-i] = []any{v}
			}
			if diff := cmp.Diff(asc, readAll(t, client, "Up", "K"), cmpOpts...); diff != "" {
				t.Errorf("ascending key order (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(desc, readAll(t, client, "Down", "K"), cmpOpts...); diff != "" {
				t.Errorf("descending key order (-want +got):\n%s", diff)
			}
			res := query(t, client.Single(), spanner.NewStatement(`SELECT K FROM Down ORDER BY K`))
			if diff := cmp.Diff(asc, res.Rows, cmpOpts...); diff != "" {
				t.Errorf("ORDER BY (-want +got):\n%s", diff)
			}
			res = query(t, client.Single(), spanner.NewStatement(`SELECT K FROM Up ORDER BY K DESC`))
			if diff := cmp.Diff(desc, res.Rows, cmpOpts...); diff != "" {
				t.Errorf("ORDER BY DESC (-want +got):\n%s", diff)
			}
			// Comparisons and MIN/MAX use the same order.
			res = query(t, client.Single(), spanner.Statement{
				SQL:    `SELECT COUNTIF(K > @p), COUNTIF(K <= @p), MIN(K), MAX(K) FROM Up`,
				Params: map[string]any{"p": tt.sorted[1]},
			})
			wantCmp := rows(row(int64(len(tt.want)-2), int64(2), tt.want[0], tt.want[len(tt.want)-1]))
			if diff := cmp.Diff(wantCmp, res.Rows, cmpOpts...); diff != "" {
				t.Errorf("comparisons with the second value [>, <=, MIN, MAX] (-want +got):\n%s", diff)
			}
			if len(tt.sorted) < 4 {
				return
			}
			// Range reads follow the same order: from the third key up to the last one.
			iter := client.Single().Read(testCtx(t), "Up", spanner.KeyRange{Start: spanner.Key{tt.sorted[2]}, End: spanner.Key{tt.sorted[len(tt.sorted)-1]}, Kind: spanner.ClosedOpen}, []string{"K"})
			got, err := collect(iter)
			if err != nil {
				t.Fatalf("range read: %v", err)
			}
			if diff := cmp.Diff(asc[2:len(asc)-1], got.Rows, cmpOpts...); diff != "" {
				t.Errorf("range read (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("float specials in ORDER BY", func(t *testing.T) {
		t.Parallel()
		client := newDB(t)
		// GoogleSQL orders NULL first, then NaN, then -inf up to +inf.
		res := query(t, client.Single(), spanner.NewStatement(
			`SELECT x FROM UNNEST([1.0, IEEE_DIVIDE(0, 0), NULL, IEEE_DIVIDE(-1, 0), -3.0, IEEE_DIVIDE(1, 0)]) AS x ORDER BY x`))
		want := rows(row(nil), row(math.NaN()), row(math.Inf(-1)), row(-3.0), row(1.0), row(math.Inf(1)))
		if diff := cmp.Diff(want, res.Rows, cmpOpts...); diff != "" {
			t.Errorf("rows (-want +got):\n%s", diff)
		}
	})
}
