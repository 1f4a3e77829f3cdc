package sqlfuncs

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

// evalAgg runs the aggregate over rows bound as column x.
func evalAgg(t *testing.T, c Call, rows []any) (any, Arg, error) {
	t.Helper()
	x, err := Aggregate(c)
	if err != nil {
		return nil, x, err
	}
	var sel []string
	for i := range rows {
		sel = append(sel, fmt.Sprintf("SELECT ?%d AS x", i+1))
	}
	from := strings.Join(sel, " UNION ALL ")
	if len(rows) == 0 {
		from = "SELECT NULL AS x WHERE 0"
	}
	var v any
	err = db(t).QueryRow("SELECT "+x.SQL+" FROM ("+from+")", rows...).Scan(&v)
	if b, ok := v.([]byte); ok && c.Name != "STRING_AGG" {
		v = string(b)
	}
	return v, x, err
}

func col(t spantype.Type) Arg { return Arg{SQL: "x", Type: t} }

func TestAggregates(t *testing.T) {
	for _, c := range []struct {
		name     string
		call     Call
		rows     []any
		want     any
		wantType spantype.Type
		wantCode string
	}{
		{name: "count star", call: Call{Name: "COUNT"}, rows: []any{nil, int64(1)}, want: int64(2)},
		{name: "count x", call: Call{Name: "count", Args: []Arg{col(tI)}}, rows: []any{nil, int64(1)}, want: int64(1)},
		{name: "count distinct", call: Call{Name: "COUNT", Distinct: true, Args: []Arg{col(tI)}}, rows: []any{int64(1), int64(1), int64(2)}, want: int64(2)},
		{name: "count distinct numeric", call: Call{Name: "COUNT", Distinct: true, Args: []Arg{col(tN)}}, rows: []any{"1", "1.0", "2"}, want: int64(2)},
		{name: "countif", call: Call{Name: "COUNTIF", Args: []Arg{col(tB)}}, rows: []any{int64(1), int64(0), nil, int64(1)}, want: int64(2)},
		{name: "countif empty", call: Call{Name: "COUNTIF", Args: []Arg{col(tB)}}, rows: nil, want: int64(0)},
		{name: "sum int", call: Call{Name: "SUM", Args: []Arg{col(tI)}}, rows: []any{int64(1), nil, int64(2)}, want: int64(3), wantType: tI},
		{name: "sum int overflow", call: Call{Name: "SUM", Args: []Arg{col(tI)}}, rows: []any{int64(math.MaxInt64), int64(1)}, wantCode: "OUT_OF_RANGE"},
		{name: "sum empty", call: Call{Name: "SUM", Args: []Arg{col(tI)}}, rows: nil, want: nil},
		{name: "sum distinct", call: Call{Name: "SUM", Distinct: true, Args: []Arg{col(tI)}}, rows: []any{int64(2), int64(2), int64(3)}, want: int64(5)},
		{name: "sum float nan", call: Call{Name: "SUM", Args: []Arg{col(tF)}}, rows: []any{1.5, "NaN"}, want: "NaN"},
		{name: "sum numeric exact", call: Call{Name: "SUM", Args: []Arg{col(tN)}}, rows: []any{"0.1", "0.2"}, want: "0.3", wantType: tN},
		{name: "avg int", call: Call{Name: "AVG", Args: []Arg{col(tI)}}, rows: []any{int64(1), int64(2)}, want: 1.5, wantType: tF},
		{name: "avg numeric", call: Call{Name: "AVG", Args: []Arg{col(tN)}}, rows: []any{"1", "2"}, want: "1.5", wantType: tN},
		{name: "min int", call: Call{Name: "MIN", Args: []Arg{col(tI)}}, rows: []any{int64(3), nil, int64(-1)}, want: int64(-1)},
		{name: "max string", call: Call{Name: "MAX", Args: []Arg{col(tS)}}, rows: []any{"a", "b"}, want: "b"},
		{name: "max numeric", call: Call{Name: "MAX", Args: []Arg{col(tN)}}, rows: []any{"9", "10"}, want: "10"},
		{name: "min float nan", call: Call{Name: "MIN", Args: []Arg{col(tF)}}, rows: []any{1.0, "NaN"}, want: "NaN"},
		{name: "max float", call: Call{Name: "MAX", Args: []Arg{col(tF)}}, rows: []any{1.0, 2.5}, want: 2.5},
		{name: "logical_and", call: Call{Name: "LOGICAL_AND", Args: []Arg{col(tB)}}, rows: []any{int64(1), nil, int64(0)}, want: int64(0)},
		{name: "logical_or", call: Call{Name: "LOGICAL_OR", Args: []Arg{col(tB)}}, rows: []any{int64(0), nil, int64(1)}, want: int64(1)},
		{name: "any_value", call: Call{Name: "ANY_VALUE", Args: []Arg{col(tS)}}, rows: []any{"a"}, want: "a"},
		{name: "bit_xor", call: Call{Name: "BIT_XOR", Args: []Arg{col(tI)}}, rows: []any{int64(5), int64(3)}, want: int64(6)},
		{name: "bit_and", call: Call{Name: "BIT_AND", Args: []Arg{col(tI)}}, rows: []any{int64(5), int64(3)}, want: int64(1)},
		{name: "array_agg", call: Call{Name: "ARRAY_AGG", Args: []Arg{col(tI)}}, rows: []any{int64(1), nil, int64(2)}, want: "[1,null,2]", wantType: tAI},
		{name: "array_agg ignore nulls", call: Call{Name: "ARRAY_AGG", IgnoreNulls: true, Args: []Arg{col(tS)}}, rows: []any{"a", nil}, want: `["a"]`},
		{name: "array_agg distinct", call: Call{Name: "ARRAY_AGG", Distinct: true, Args: []Arg{col(tS)}}, rows: []any{"a", "a", "b"}, want: `["a","b"]`},
		{name: "array_agg bytes", call: Call{Name: "ARRAY_AGG", Args: []Arg{col(tY)}}, rows: []any{[]byte("hi")}, want: `["aGk="]`},
		{name: "array_agg empty", call: Call{Name: "ARRAY_AGG", Args: []Arg{col(tI)}}, rows: nil, want: nil},
		{name: "array_concat_agg", call: Call{Name: "ARRAY_CONCAT_AGG", Args: []Arg{col(tAI)}}, rows: []any{"[1,2]", nil, "[]", "[3]"}, want: "[1,2,3]", wantType: tAI},
		{name: "array_concat_agg nulls", call: Call{Name: "ARRAY_CONCAT_AGG", Args: []Arg{col(tAI)}}, rows: []any{nil}, want: nil},
		{name: "string_agg", call: Call{Name: "STRING_AGG", Args: []Arg{col(tS)}}, rows: []any{"a", nil, "b"}, want: "a,b"},
		{name: "string_agg delimiter", call: Call{Name: "STRING_AGG", Args: []Arg{col(tS), lit(" | ")}}, rows: []any{"a", "b"}, want: "a | b"},
		{name: "string_agg bytes", call: Call{Name: "STRING_AGG", Args: []Arg{col(tY), Arg{SQL: "X'00'", Type: tY}}}, rows: []any{[]byte("a"), []byte("b")}, want: []byte{'a', 0, 'b'}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, x, err := evalAgg(t, c.call, c.rows)
			if c.wantCode != "" {
				if code := runtimeCode(err); code != c.wantCode {
					t.Fatalf("error %v, want code %s", err, c.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatalf("SQL %s: %v", x.SQL, err)
			}
			if c.wantType.Code != spantype.Unknown && !c.wantType.Equal(x.Type) {
				t.Errorf("type = %s, want %s", x.Type, c.wantType)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("SQL %s (-want +got):\n%s", x.SQL, diff)
			}
		})
	}
}

func TestAggregateErrors(t *testing.T) {
	for _, c := range []Call{
		{Name: "SUM", Args: []Arg{col(tS)}},
		{Name: "MIN", Args: []Arg{col(tAI)}},
		{Name: "ARRAY_AGG", Args: []Arg{col(tAI)}},
		{Name: "LOGICAL_AND", Args: []Arg{col(tI)}},
		{Name: "NO_SUCH_AGG", Args: []Arg{col(tI)}},
	} {
		if _, err := Aggregate(c); err == nil {
			t.Errorf("%s(%s): want an error", c.Name, typeList(c.Args))
		}
	}
	if !IsAggregate("count") || IsAggregate("UPPER") {
		t.Error("IsAggregate is wrong")
	}
}

func TestAggregateHaving(t *testing.T) {
	// Rows (x, y): the HAVING MAX y rows are x=b and x=c (y=3), HAVING MIN is x=a (y=1).
	const from = `(SELECT 'a' AS x, 1 AS y UNION ALL SELECT 'b', 3 UNION ALL SELECT 'c', 3 UNION ALL SELECT 'd', NULL)`
	y := col(tI)
	y.SQL = "y"
	for _, c := range []struct {
		name string
		call Call
		want any
	}{
		{"array_agg having max", Call{Name: "ARRAY_AGG", Args: []Arg{col(tS)}, Having: &Having{Max: true, Expr: y}}, `["b","c"]`},
		{"string_agg having min", Call{Name: "STRING_AGG", Args: []Arg{col(tS)}, Having: &Having{Expr: y}}, "a"},
		{"count having max", Call{Name: "COUNT", Args: []Arg{col(tS)}, Having: &Having{Max: true, Expr: y}}, int64(2)},
		{"count star having max", Call{Name: "COUNT", Having: &Having{Max: true, Expr: y}}, int64(2)},
		{"max having min", Call{Name: "MAX", Args: []Arg{col(tS)}, Having: &Having{Expr: y}}, "a"},
		{"min having max", Call{Name: "MIN", Args: []Arg{col(tS)}, Having: &Having{Max: true, Expr: y}}, "b"},
		{"sum having max", Call{Name: "SUM", Args: []Arg{y}, Having: &Having{Max: true, Expr: y}}, int64(6)},
	} {
		t.Run(c.name, func(t *testing.T) {
			x, err := Aggregate(c.call)
			if err != nil {
				t.Fatal(err)
			}
			var got any
			if err := db(t).QueryRow("SELECT " + x.SQL + " FROM " + from).Scan(&got); err != nil {
				t.Fatalf("SQL %s: %v", x.SQL, err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("SQL %s (-want +got):\n%s", x.SQL, diff)
			}
		})
	}
}

func TestAggregateOrderByLimit(t *testing.T) {
	const from = `(SELECT 'a' AS x, 2 AS y UNION ALL SELECT 'b', 1 UNION ALL SELECT 'c', NULL UNION ALL SELECT 'a', 3 UNION ALL SELECT NULL, 0)`
	y := col(tI)
	y.SQL = "y"
	x := col(tS)
	two := intLit(2)
	for _, c := range []struct {
		name string
		call Call
		want any
	}{
		{"array_agg order by", Call{Name: "ARRAY_AGG", Args: []Arg{x}, OrderBy: []OrderItem{{Expr: y}}}, `["c",null,"b","a","a"]`},
		{"array_agg order by desc", Call{Name: "ARRAY_AGG", Args: []Arg{x}, OrderBy: []OrderItem{{Expr: y, Desc: true}}}, `["a","a","b",null,"c"]`},
		{"array_agg order by limit", Call{Name: "ARRAY_AGG", Args: []Arg{x}, OrderBy: []OrderItem{{Expr: y, Desc: true}}, Limit: &two}, `["a","a"]`},
		{"array_agg distinct order by x", Call{Name: "ARRAY_AGG", Distinct: true, IgnoreNulls: true, Args: []Arg{x}, OrderBy: []OrderItem{{Expr: x, Desc: true}}}, `["c","b","a"]`},
		{"string_agg order by", Call{Name: "STRING_AGG", Args: []Arg{x, lit("-")}, OrderBy: []OrderItem{{Expr: x}}}, "a-a-b-c"},
		{"string_agg distinct delimiter", Call{Name: "STRING_AGG", Distinct: true, Args: []Arg{x, lit("+")}}, "a+b+c"},
		{"sum distinct having max", Call{Name: "SUM", Distinct: true, Args: []Arg{y}, Having: &Having{Max: true, Expr: y}}, int64(3)},
	} {
		t.Run(c.name, func(t *testing.T) {
			agg, err := Aggregate(c.call)
			if err != nil {
				t.Fatal(err)
			}
			var got any
			if err := db(t).QueryRow("SELECT " + agg.SQL + " FROM " + from).Scan(&got); err != nil {
				t.Fatalf("SQL %s: %v", agg.SQL, err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("SQL %s (-want +got):\n%s", agg.SQL, diff)
			}
		})
	}
	empty, err := Aggregate(Call{Name: "COUNT", Having: &Having{Max: true, Expr: y}})
	if err != nil {
		t.Fatal(err)
	}
	var n any
	if err := db(t).QueryRow("SELECT " + empty.SQL + " FROM (SELECT 1 AS y WHERE 0)").Scan(&n); err != nil || n != int64(0) {
		t.Errorf("COUNT(*) HAVING MAX over no rows = %v, %v; want 0", n, err)
	}
	if _, err := Aggregate(Call{Name: "ARRAY_AGG", Args: []Arg{x}, OrderBy: []OrderItem{{Expr: col(tJ)}}}); err == nil {
		t.Error("ORDER BY a JSON value: want an error")
	}
}

func TestVarianceAggregates(t *testing.T) {
	rows := []any{int64(2), int64(4), int64(4), int64(4), int64(5), int64(5), int64(7), int64(9), nil}
	for name, want := range map[string]any{"VARIANCE": 32.0 / 7, "STDDEV": math.Sqrt(32.0 / 7)} {
		got, x, err := evalAgg(t, Call{Name: name, Args: []Arg{col(tI)}}, rows)
		if err != nil {
			t.Fatalf("%s: %v", x.SQL, err)
		}
		if f, ok := got.(float64); !ok || math.Abs(f-want.(float64)) > 1e-12 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	got, _, err := evalAgg(t, Call{Name: "STDDEV_SAMP", Args: []Arg{col(tF)}}, []any{1.0})
	if err != nil || got != nil {
		t.Errorf("STDDEV_SAMP of one row = %v, %v; want NULL", got, err)
	}
}
