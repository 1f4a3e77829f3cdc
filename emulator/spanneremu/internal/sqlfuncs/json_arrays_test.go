package sqlfuncs

import (
	"math"

	"testing"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

func TestJSONFunctions(t *testing.T) {
	j := p(1, tJ)
	const doc = `{"a":{"b":[1,"x",{"c":true}]},"n":1.5,"s":"str"}`
	runEvalCases(t, []evalCase{
		{name: "json_value number", expr: fn("JSON_VALUE", j, lit("$.n")), params: []any{doc}, want: "1.5", wantType: tS},
		{name: "json_value string", expr: fn("JSON_VALUE", j, lit("$.s")), params: []any{doc}, want: "str"},
		{name: "json_value array elem", expr: fn("JSON_VALUE", j, lit("$.a.b[1]")), params: []any{doc}, want: "x"},
		{name: "json_value object is null", expr: fn("JSON_VALUE", j, lit("$.a")), params: []any{doc}, want: nil},
		{name: "json_value missing", expr: fn("JSON_VALUE", j, lit("$.zzz")), params: []any{doc}, want: nil},
		{name: "json_value bool", expr: fn("JSON_VALUE", j, lit("$.a.b[2].c")), params: []any{doc}, want: "true"},
		{name: "json_value bracket key", expr: fn("JSON_VALUE", j, lit("$['s']")), params: []any{doc}, want: "str"},
		{name: "json_value string input", expr: fn("JSON_VALUE", lit(`{"a": 2}`), lit("$.a")), want: "2"},
		{name: "json_query", expr: fn("JSON_QUERY", j, lit("$.a.b")), params: []any{doc}, want: `[1,"x",{"c":true}]`, wantType: tJ},
		{name: "json_query string", expr: fn("JSON_QUERY", j, lit("$.s")), params: []any{doc}, want: `"str"`},
		{name: "json_query bad path", expr: fn("JSON_QUERY", j, lit("a.b")), params: []any{doc}, wantCode: "OUT_OF_RANGE"},
		{name: "json_value_array", expr: fn("JSON_VALUE_ARRAY", lit(`{"a":[1,"b",true]}`), lit("$.a")), want: `["1","b","true"]`},
		{name: "json_query_array", expr: fn("JSON_QUERY_ARRAY", j, lit("$.a.b")), params: []any{doc}, want: `["1","\"x\"","{\"c\":true}"]`, wantType: spantype.ArrayOf(tJ)},
		{name: "parse_json", expr: fn("PARSE_JSON", lit(`{"b": 1, "a": [true, null]}`)), want: `{"a":[true,null],"b":1}`, wantType: tJ},
		{name: "parse_json bad", expr: fn("PARSE_JSON", p(1, tS)), params: []any{"{"}, wantCode: "OUT_OF_RANGE"},
		{name: "json_type", expr: fn("JSON_TYPE", j), params: []any{`[1]`}, want: "array"},
		{name: "int64 of json", expr: fn("INT64", j), params: []any{`42`}, want: int64(42)},
		{name: "int64 of json string", expr: fn("INT64", j), params: []any{`"42"`}, wantCode: "OUT_OF_RANGE"},
		{name: "bool of json", expr: fn("BOOL", j), params: []any{`true`}, want: int64(1)},
		{name: "string of json", expr: fn("STRING", j), params: []any{`"hi"`}, want: "hi"},
		{name: "float64 of json", expr: fn("FLOAT64", j), params: []any{`2.5`}, want: 2.5},
		{name: "json_keys", expr: fn("JSON_KEYS", j), params: []any{`{"b":{"c":1},"a":2}`}, want: `["a","b","b.c"]`},
		{name: "to_json_string int", expr: fn("TO_JSON_STRING", intLit(5)), want: "5"},
		{name: "to_json_string struct", expr: fn("TO_JSON_STRING", p(1, spantype.StructOf(spantype.Field{Name: "a", Type: tI}, spantype.Field{Name: "b", Type: tAS}))), params: []any{`[1,["x",null]]`}, want: `{"a":1,"b":["x",null]}`},
		{name: "to_json_string bytes", expr: fn("TO_JSON_STRING", p(1, tY)), params: []any{[]byte("hi")}, want: `"aGk="`},
		{name: "to_json_string null", expr: fn("TO_JSON_STRING", null()), want: "null"},
		{name: "to_json timestamp", expr: fn("TO_JSON", p(1, tT)), params: []any{"2020-01-01T00:00:00.500000000Z"}, want: `"2020-01-01T00:00:00.5Z"`, wantType: tJ},
		{name: "lax_int64 of string", expr: fn("LAX_INT64", j), params: []any{`"2.5"`}, want: int64(3)},
		{name: "lax_bool of number", expr: fn("LAX_BOOL", j), params: []any{`0`}, want: int64(0)},
		{name: "lax_string of number", expr: fn("LAX_STRING", j), params: []any{`1.5`}, want: "1.5"},
		{name: "lax_float64 of object", expr: fn("LAX_FLOAT64", j), params: []any{`{}`}, want: nil},
		{name: "string of timestamp", expr: fn("STRING", p(1, tT), lit("UTC")), params: []any{"2020-01-02T03:04:05.000000000Z"}, want: "2020-01-02 03:04:05+00"},
		{name: "json_object", expr: fn("JSON_OBJECT", lit("k"), intLit(1), lit("s"), lit("v")), want: `{"k":1,"s":"v"}`},
		{name: "json_array", expr: fn("JSON_ARRAY", intLit(1), lit("a"), null()), want: `[1,"a",null]`},
	})
}

func TestArrayFunctions(t *testing.T) {
	ai := p(1, tAI)
	as := p(1, tAS)
	runEvalCases(t, []evalCase{
		{name: "array_length", expr: fn("ARRAY_LENGTH", ai), params: []any{"[1,2,3]"}, want: int64(3), wantType: tI},
		{name: "array_length null", expr: fn("ARRAY_LENGTH", ai), params: []any{nil}, want: nil},
		{name: "array_concat", expr: fn("ARRAY_CONCAT", ai, p(2, tAI)), params: []any{"[1]", "[2,null]"}, want: "[1,2,null]"},
		{name: "array_concat null", expr: fn("ARRAY_CONCAT", ai, p(2, tAI)), params: []any{"[1]", nil}, want: nil},
		{name: "concat operator arrays", expr: bin("||", ai, p(2, spantype.ArrayOf(spantype.TUnknown))), params: []any{"[1]", "[]"}, want: "[1]", wantType: tAI},
		{name: "array_to_string", expr: fn("ARRAY_TO_STRING", as, lit(",")), params: []any{`["a",null,"b"]`}, want: "a,b"},
		{name: "array_to_string null text", expr: fn("ARRAY_TO_STRING", as, lit(","), lit("N")), params: []any{`["a",null,"b"]`}, want: "a,N,b"},
		{name: "array_reverse", expr: fn("ARRAY_REVERSE", ai), params: []any{"[1,2,3]"}, want: "[3,2,1]"},
		{name: "array_includes", expr: fn("ARRAY_INCLUDES", ai, intLit(2)), params: []any{"[1,2,3]"}, want: int64(1)},
		{name: "array_includes no", expr: fn("ARRAY_INCLUDES", as, lit("z")), params: []any{`["a"]`}, want: int64(0)},
		{name: "array_includes_any", expr: fn("ARRAY_INCLUDES_ANY", ai, p(2, tAI)), params: []any{"[1,2,3]", "[9,3]"}, want: int64(1)},
		{name: "array_includes_any none", expr: fn("ARRAY_INCLUDES_ANY", ai, p(2, tAI)), params: []any{"[1,2,3]", "[9,null]"}, want: int64(0)},
		{name: "array_includes_all", expr: fn("ARRAY_INCLUDES_ALL", ai, p(2, tAI)), params: []any{"[1,2,3]", "[3,1]"}, want: int64(1)},
		{name: "array_includes_all missing", expr: fn("ARRAY_INCLUDES_ALL", ai, p(2, tAI)), params: []any{"[1,2,3]", "[3,4]"}, want: int64(0)},
		{name: "array_includes_all empty", expr: fn("ARRAY_INCLUDES_ALL", ai, p(2, tAI)), params: []any{"[1]", "[]"}, want: int64(1)},
		{name: "array_min", expr: fn("ARRAY_MIN", ai), params: []any{"[3,null,1]"}, want: int64(1)},
		{name: "array_max strings", expr: fn("ARRAY_MAX", as), params: []any{`["a","c","b"]`}, want: "c"},
		{name: "array_is_distinct", expr: fn("ARRAY_IS_DISTINCT", ai), params: []any{"[1,2,1]"}, want: int64(0)},
		{name: "array_is_distinct nulls", expr: fn("ARRAY_IS_DISTINCT", ai), params: []any{"[1,null]"}, want: int64(1)},
		{name: "array_first", expr: fn("ARRAY_FIRST", as), params: []any{`["a","b"]`}, want: "a"},
		{name: "array_last", expr: fn("ARRAY_LAST", as), params: []any{`["a","b"]`}, want: "b"},
		{name: "array_first empty", expr: fn("ARRAY_FIRST", as), params: []any{`[]`}, wantCode: "OUT_OF_RANGE"},
		{name: "array_slice", expr: fn("ARRAY_SLICE", ai, intLit(1), intLit(-2)), params: []any{"[1,2,3,4]"}, want: "[2,3]"},
		{name: "array_slice clamps", expr: fn("ARRAY_SLICE", ai, intLit(-10), intLit(10)), params: []any{"[1,2]"}, want: "[1,2]"},
		{name: "generate_array", expr: fn("GENERATE_ARRAY", intLit(1), intLit(10), intLit(3)), want: "[1,4,7,10]", wantType: tAI},
		{name: "generate_array down", expr: fn("GENERATE_ARRAY", intLit(3), intLit(1), intLit(-1)), want: "[3,2,1]"},
		{name: "generate_array empty", expr: fn("GENERATE_ARRAY", intLit(3), intLit(1)), want: "[]"},
		{name: "generate_array float", expr: fn("GENERATE_ARRAY", floatLit(0), floatLit(1), floatLit(0.5)), want: "[0,0.5,1]"},
		{name: "generate_array zero step", expr: fn("GENERATE_ARRAY", intLit(1), intLit(2), intLit(0)), wantCode: "OUT_OF_RANGE"},
		{name: "generate_date_array", expr: fn("GENERATE_DATE_ARRAY", lit("2020-01-30"), lit("2020-04-01"), intLit(1), lit("MONTH")), want: `["2020-01-30","2020-02-29","2020-03-30"]`},
		{name: "generate_date_array huge step", expr: fn("GENERATE_DATE_ARRAY", lit("2020-01-01"), lit("2020-01-03"), intLit(1<<62), lit("DAY")), want: `["2020-01-01"]`},
		{name: "generate_date_array days", expr: fn("GENERATE_DATE_ARRAY", lit("2020-01-01"), lit("2020-01-03")), want: `["2020-01-01","2020-01-02","2020-01-03"]`},
		{name: "offset", expr: func() (Arg, error) { return ArrayElement(as, intLit(1), "OFFSET") }, params: []any{`["a","b"]`}, want: "b", wantType: tS},
		{name: "plain index", expr: func() (Arg, error) { return ArrayElement(as, intLit(0), "") }, params: []any{`["a","b"]`}, want: "a"},
		{name: "ordinal", expr: func() (Arg, error) { return ArrayElement(as, intLit(1), "ORDINAL") }, params: []any{`["a","b"]`}, want: "a"},
		{name: "offset out of range", expr: func() (Arg, error) { return ArrayElement(as, intLit(2), "OFFSET") }, params: []any{`["a","b"]`}, wantCode: "OUT_OF_RANGE"},
		{name: "safe_offset", expr: func() (Arg, error) { return ArrayElement(as, intLit(5), "SAFE_OFFSET") }, params: []any{`["a","b"]`}, want: nil},
		{name: "safe_ordinal zero", expr: func() (Arg, error) { return ArrayElement(as, intLit(0), "SAFE_ORDINAL") }, params: []any{`["a","b"]`}, want: nil},
		{name: "bytes element", expr: func() (Arg, error) { return ArrayElement(p(1, tAY), intLit(0), "OFFSET") }, params: []any{`["aGk="]`}, want: "hi"},
		{name: "float element inf", expr: func() (Arg, error) { return ArrayElement(p(1, spantype.ArrayOf(tF)), intLit(0), "OFFSET") }, params: []any{`["-Infinity"]`}, want: math.Inf(-1)},
		{name: "struct field", expr: func() (Arg, error) {
			return StructField(p(1, spantype.StructOf(spantype.Field{Name: "a", Type: tI}, spantype.Field{Name: "b", Type: tS})), 1)
		}, params: []any{`[1,"x"]`}, want: "x", wantType: tS},
	})
}
