package conformance

import (
	"math"
	"math/big"
	"reflect"
	"testing"
	"time"

	"cloud.google.com/go/civil"
	"cloud.google.com/go/spanner"
	"github.com/google/go-cmp/cmp"
)

func mustRat(s string) *big.Rat {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		panic(s)
	}
	return r
}

// TestTypeRoundTrip sends every scalar and array type as a query parameter, selects it back and
// scans it into the Go type the client maps it to, also writing it to and reading it from a table
// column of that type.
func TestTypeRoundTrip(t *testing.T) {
	t.Parallel()
	client := newDB(t, `CREATE TABLE AllTypes (
		Id INT64 NOT NULL,
		B BOOL, I INT64, F FLOAT64, N NUMERIC, S STRING(MAX), Y BYTES(MAX), D DATE, T TIMESTAMP, J JSON,
		AB ARRAY<BOOL>, AI ARRAY<INT64>, AF ARRAY<FLOAT64>, AN ARRAY<NUMERIC>, ASx ARRAY<STRING(MAX)>,
		AY ARRAY<BYTES(MAX)>, AD ARRAY<DATE>, ATs ARRAY<TIMESTAMP>, AJ ARRAY<JSON>,
	) PRIMARY KEY (Id)`)

	nanoTs := time.Date(2024, 2, 29, 23, 59, 58, 123456789, time.UTC)
	tests := []struct {
		name     string
		column   string
		param    any
		wantType string
		// newDest returns a pointer to scan into; want is what it must then point to.
		newDest func() any
		want    any
	}{
		{"bool", "B", true, "BOOL", func() any { return new(bool) }, true},
		{"null bool", "B", spanner.NullBool{}, "BOOL", func() any { return new(spanner.NullBool) }, spanner.NullBool{}},
		{"int64 max", "I", int64(math.MaxInt64), "INT64", func() any { return new(int64) }, int64(math.MaxInt64)},
		{"int64 min", "I", int64(math.MinInt64), "INT64", func() any { return new(int64) }, int64(math.MinInt64)},
		{"null int64", "I", spanner.NullInt64{}, "INT64", func() any { return new(spanner.NullInt64) }, spanner.NullInt64{}},
		{"float64", "F", 1.25, "FLOAT64", func() any { return new(float64) }, 1.25},
		{"float64 NaN", "F", math.NaN(), "FLOAT64", func() any { return new(float64) }, math.NaN()},
		{"float64 +Inf", "F", math.Inf(1), "FLOAT64", func() any { return new(float64) }, math.Inf(1)},
		{"float64 -Inf", "F", math.Inf(-1), "FLOAT64", func() any { return new(float64) }, math.Inf(-1)},
		{"float64 tiny", "F", 5e-324, "FLOAT64", func() any { return new(float64) }, 5e-324},
		{"numeric", "N", *mustRat("12345678901234567890123456789.123456789"), "NUMERIC", func() any { return new(big.Rat) }, *mustRat("12345678901234567890123456789.123456789")},
		{"numeric negative", "N", *mustRat("-0.5"), "NUMERIC", func() any { return new(big.Rat) }, *mustRat("-0.5")},
		{"null numeric", "N", spanner.NullNumeric{}, "NUMERIC", func() any { return new(spanner.NullNumeric) }, spanner.NullNumeric{}},
		{"string", "S", "héllo, 世界", "STRING", func() any { return new(string) }, "héllo, 世界"},
		{"empty string", "S", "", "STRING", func() any { return new(string) }, ""},
		{"null string", "S", spanner.NullString{}, "STRING", func() any { return new(spanner.NullString) }, spanner.NullString{}},
		{"bytes", "Y", []byte{0, 1, 2, 0xff}, "BYTES", func() any { return new([]byte) }, []byte{0, 1, 2, 0xff}},
		{"date", "D", civil.Date{Year: 2024, Month: 2, Day: 29}, "DATE", func() any { return new(civil.Date) }, civil.Date{Year: 2024, Month: 2, Day: 29}},
		{"date min", "D", civil.Date{Year: 1, Month: 1, Day: 1}, "DATE", func() any { return new(civil.Date) }, civil.Date{Year: 1, Month: 1, Day: 1}},
		{"timestamp nanos", "T", nanoTs, "TIMESTAMP", func() any { return new(time.Time) }, nanoTs},
		{"timestamp epoch", "T", time.Unix(0, 0).UTC(), "TIMESTAMP", func() any { return new(time.Time) }, time.Unix(0, 0).UTC()},
		{"json", "J", spanner.NullJSON{Value: map[string]any{"b": 1, "a": []any{true, nil, "x"}}, Valid: true}, "JSON",
			func() any { return new(spanner.NullJSON) },
			spanner.NullJSON{Value: map[string]any{"a": []any{true, nil, "x"}, "b": float64(1)}, Valid: true}},
		{"null json", "J", spanner.NullJSON{}, "JSON", func() any { return new(spanner.NullJSON) }, spanner.NullJSON{}},
		{"array bool", "AB", []bool{true, false}, "ARRAY<BOOL>", func() any { return new([]bool) }, []bool{true, false}},
		{"array int64", "AI", []int64{3, 1, 2}, "ARRAY<INT64>", func() any { return new([]int64) }, []int64{3, 1, 2}},
		{"empty array", "AI", []int64{}, "ARRAY<INT64>", func() any { return new([]int64) }, []int64{}},
		{"null array", "AI", []int64(nil), "ARRAY<INT64>", func() any { return new([]int64) }, []int64(nil)},
		{"array with null elements", "AI", []spanner.NullInt64{{Int64: 1, Valid: true}, {}}, "ARRAY<INT64>",
			func() any { return new([]spanner.NullInt64) }, []spanner.NullInt64{{Int64: 1, Valid: true}, {}}},
		{"array float64", "AF", []float64{1.5, math.Inf(-1), math.NaN()}, "ARRAY<FLOAT64>", func() any { return new([]float64) }, []float64{1.5, math.Inf(-1), math.NaN()}},
		{"array numeric", "AN", []big.Rat{*mustRat("1.5"), *mustRat("-2")}, "ARRAY<NUMERIC>", func() any { return new([]big.Rat) }, []big.Rat{*mustRat("1.5"), *mustRat("-2")}},
		{"array string", "ASx", []string{"b", "", "a"}, "ARRAY<STRING>", func() any { return new([]string) }, []string{"b", "", "a"}},
		{"array bytes", "AY", [][]byte{{1}, {}, nil}, "ARRAY<BYTES>", func() any { return new([][]byte) }, [][]byte{{1}, {}, nil}},
		{"array date", "AD", []civil.Date{{Year: 2000, Month: 1, Day: 1}}, "ARRAY<DATE>", func() any { return new([]civil.Date) }, []civil.Date{{Year: 2000, Month: 1, Day: 1}}},
		{"array timestamp", "ATs", []time.Time{nanoTs}, "ARRAY<TIMESTAMP>", func() any { return new([]time.Time) }, []time.Time{nanoTs}},
		{"array json", "AJ", []spanner.NullJSON{{Value: map[string]any{"k": "v"}, Valid: true}}, "ARRAY<JSON>",
			func() any { return new([]spanner.NullJSON) }, []spanner.NullJSON{{Value: map[string]any{"k": "v"}, Valid: true}}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			check := func(t *testing.T, r *spanner.Row) {
				t.Helper()
				dest := tt.newDest()
				if err := r.Column(0, dest); err != nil {
					t.Fatalf("scan: %v", err)
				}
				got := reflect.ValueOf(dest).Elem().Interface()
				if diff := cmp.Diff(tt.want, got, cmpOpts...); diff != "" {
					t.Errorf("value (-want +got):\n%s", diff)
				}
			}

			t.Run("param", func(t *testing.T) {
				iter := client.Single().Query(ctx, spanner.Statement{SQL: "SELECT @p", Params: map[string]any{"p": tt.param}})
				defer iter.Stop()
				r, err := iter.Next()
				if err != nil {
					t.Fatalf("query: %v", err)
				}
				check(t, r)
				if got := typeString(iter.Metadata.GetRowType().GetFields()[0].GetType()); got != tt.wantType {
					t.Errorf("column type = %s, want %s", got, tt.wantType)
				}
			})

			t.Run("column", func(t *testing.T) {
				id := int64(i)
				mustApply(t, client, spanner.InsertOrUpdate("AllTypes", []string{"Id", tt.column}, []any{id, tt.param}))
				r, err := client.Single().ReadRow(ctx, "AllTypes", spanner.Key{id}, []string{tt.column})
				if err != nil {
					t.Fatalf("ReadRow: %v", err)
				}
				check(t, r)
				// The same value through SQL, compared with the parameter inside the server.
				stmt := spanner.Statement{
					SQL:    "SELECT " + tt.column + " FROM AllTypes WHERE Id = @id",
					Params: map[string]any{"id": id},
				}
				iter := client.Single().Query(ctx, stmt)
				defer iter.Stop()
				r, err = iter.Next()
				if err != nil {
					t.Fatalf("query: %v", err)
				}
				check(t, r)
			})
		})
	}
}

// TestQueryValues covers literal SQL values, JSON normalization and STRUCT parameters and
// results, compared as decoded wire values with their types.
func TestQueryValues(t *testing.T) {
	t.Parallel()
	client := newDB(t)

	type pair struct {
		A int64  `spanner:"a"`
		B string `spanner:"b"`
	}
	tests := []struct {
		name      string
		sql       string
		params    map[string]any
		wantTypes []string
		want      [][]any
	}{
		{"literals", `SELECT TRUE, 1, 1.5, 'x', b'y', DATE '2024-01-02', NUMERIC '1.50'`, nil,
			[]string{"BOOL", "INT64", "FLOAT64", "STRING", "BYTES", "DATE", "NUMERIC"},
			rows(row(true, int64(1), 1.5, "x", []byte("y"), date("2024-01-02"), "1.5"))},
		{"timestamp literal with zone", `SELECT TIMESTAMP '2024-01-02T03:04:05.123456789Z'`, nil,
			[]string{"TIMESTAMP"}, rows(row(ts("2024-01-02T03:04:05.123456789Z")))},
		// Without an explicit zone, GoogleSQL on Spanner reads civil times in America/Los_Angeles.
		{"timestamp literal default zone", `SELECT TIMESTAMP '2024-01-02 03:04:05'`, nil,
			[]string{"TIMESTAMP"}, rows(row(ts("2024-01-02T11:04:05Z")))},
		{"nulls", `SELECT CAST(NULL AS INT64), NULL + 1, NULL = NULL, 1 = NULL, NULL IS NULL, IFNULL(NULL, 'd'), COALESCE(NULL, NULL, 3)`, nil,
			[]string{"INT64", "INT64", "BOOL", "BOOL", "BOOL", "STRING", "INT64"},
			rows(row(nil, nil, nil, nil, true, "d", int64(3)))},
		{"in with nulls", `SELECT 1 IN (NULL, 2), 1 IN (1, NULL), NULL IN (1), 1 NOT IN (2, NULL)`, nil,
			[]string{"BOOL", "BOOL", "BOOL", "BOOL"}, rows(row(nil, true, nil, nil))},
		{"three valued logic", `SELECT NULL AND FALSE, NULL OR TRUE, NULL AND TRUE, NOT CAST(NULL AS BOOL)`, nil,
			[]string{"BOOL", "BOOL", "BOOL", "BOOL"}, rows(row(false, true, nil, nil))},
		{"json is normalized", `SELECT JSON '{"b": 1, "a": [1, 2.5, "x"], "c": {"z": null, "y": true}}'`, nil,
			[]string{"JSON"}, rows(row(`{"a":[1,2.5,"x"],"b":1,"c":{"y":true,"z":null}}`))},
		{"parse json", `SELECT PARSE_JSON('  {"k" :  "v"}  ')`, nil, []string{"JSON"}, rows(row(`{"k":"v"}`))},
		{"json param", `SELECT @j`, map[string]any{"j": spanner.NullJSON{Value: map[string]any{"z": 1, "a": "s"}, Valid: true}},
			[]string{"JSON"}, rows(row(`{"a":"s","z":1}`))},
		{"struct param fields", `SELECT @s.a, @s.b`, map[string]any{"s": pair{A: 7, B: "seven"}},
			[]string{"INT64", "STRING"}, rows(row(int64(7), "seven"))},
		{"null struct param", `SELECT @s IS NULL`, map[string]any{"s": (*pair)(nil)},
			[]string{"BOOL"}, rows(row(true))},
		{"array of struct param", `SELECT a, b FROM UNNEST(@arr) ORDER BY a DESC`,
			map[string]any{"arr": []pair{{1, "one"}, {2, "two"}}},
			[]string{"INT64", "STRING"}, rows(row(int64(2), "two"), row(int64(1), "one"))},
		{"array of select as struct", `SELECT ARRAY(SELECT AS STRUCT x, y FROM (SELECT 2 AS x, 'b' AS y UNION ALL SELECT 1, 'a') ORDER BY x)`, nil,
			[]string{"ARRAY<STRUCT<x INT64, y STRING>>"}, rows(row([]any{[]any{int64(1), "a"}, []any{int64(2), "b"}}))},
		{"array literal", `SELECT [1, 2, 3], ARRAY<STRING>['a', NULL], ARRAY<INT64>[]`, nil,
			[]string{"ARRAY<INT64>", "ARRAY<STRING>", "ARRAY<INT64>"},
			rows(row([]any{int64(1), int64(2), int64(3)}, []any{"a", nil}, []any{}))},
		{"typed nulls through params", `SELECT @i IS NULL, @s IS NULL`, map[string]any{"i": spanner.NullInt64{}, "s": spanner.NullString{}},
			[]string{"BOOL", "BOOL"}, rows(row(true, true))},
		{"unnamed columns and aliases", `SELECT 1 AS one, 2`, nil, []string{"INT64", "INT64"}, rows(row(int64(1), int64(2)))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := query(t, client.Single(), spanner.Statement{SQL: tt.sql, Params: tt.params})
			if diff := cmp.Diff(tt.wantTypes, res.Types); diff != "" {
				t.Errorf("types (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, res.Rows, cmpOpts...); diff != "" {
				t.Errorf("rows (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("scan struct results", func(t *testing.T) {
		t.Parallel()
		iter := client.Single().Query(testCtx(t), spanner.NewStatement(
			`SELECT ARRAY(SELECT AS STRUCT x AS a, CAST(x AS STRING) AS b FROM UNNEST([3, 1, 2]) AS x ORDER BY x)`))
		defer iter.Stop()
		r, err := iter.Next()
		if err != nil {
			t.Fatalf("query: %v", err)
		}
		var got []*pair
		if err := r.Column(0, &got); err != nil {
			t.Fatalf("scan: %v", err)
		}
		want := []*pair{{1, "1"}, {2, "2"}, {3, "3"}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("structs (-want +got):\n%s", diff)
		}
	})

	t.Run("column names", func(t *testing.T) {
		t.Parallel()
		iter := client.Single().Query(testCtx(t), spanner.NewStatement(`SELECT 1 AS one, 'x' AS Two`))
		defer iter.Stop()
		r, err := iter.Next()
		if err != nil {
			t.Fatalf("query: %v", err)
		}
		if diff := cmp.Diff([]string{"one", "Two"}, r.ColumnNames()); diff != "" {
			t.Errorf("column names (-want +got):\n%s", diff)
		}
	})
}
