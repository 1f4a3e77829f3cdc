package sqlfuncs

import (
	"errors"
	"math"
	"testing"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

func TestArithmetic(t *testing.T) {
	runEvalCases(t, []evalCase{
		{name: "int add", expr: bin("+", intLit(2), intLit(3)), want: int64(5), wantType: tI},
		{name: "int add overflow", expr: bin("+", intLit(math.MaxInt64), intLit(1)), wantCode: "OUT_OF_RANGE"},
		{name: "int sub overflow", expr: bin("-", intLit(math.MinInt64), intLit(1)), wantCode: "OUT_OF_RANGE"},
		{name: "int mul overflow", expr: bin("*", intLit(1<<62), intLit(4)), wantCode: "OUT_OF_RANGE"},
		{name: "int mul", expr: bin("*", intLit(-7), intLit(6)), want: int64(-42)},
		{name: "int div is float", expr: bin("/", intLit(5), intLit(2)), want: 2.5, wantType: tF},
		{name: "div by zero", expr: bin("/", intLit(5), intLit(0)), wantCode: "OUT_OF_RANGE"},
		{name: "float div by zero", expr: bin("/", floatLit(5), floatLit(0)), wantCode: "OUT_OF_RANGE"},
		{name: "int plus float", expr: bin("+", intLit(1), floatLit(0.5)), want: 1.5, wantType: tF},
		{name: "null plus int", expr: bin("+", null(), intLit(1)), want: nil, wantType: tI},
		{name: "numeric add", expr: bin("+", p(1, tN), p(2, tN)), params: []any{"1.5", "2.25"}, want: "3.75", wantType: tN},
		{name: "numeric plus int", expr: bin("+", p(1, tN), intLit(1)), params: []any{"0.000000001"}, want: "1.000000001", wantType: tN},
		{name: "numeric div", expr: bin("/", p(1, tN), p(2, tN)), params: []any{"1", "3"}, want: "0.333333333"},
		{name: "numeric overflow", expr: bin("*", p(1, tN), p(2, tN)), params: []any{"99999999999999999999999999999", "10"}, wantCode: "OUT_OF_RANGE"},
		{name: "nan plus one", expr: bin("+", p(1, tF), floatLit(1)), params: []any{"NaN"}, want: "NaN"},
		{name: "inf minus inf", expr: bin("-", floatLit(math.Inf(1)), floatLit(math.Inf(1))), want: "NaN"},
		{name: "unary minus", expr: func() (Arg, error) { return Unary("-", intLit(5)) }, want: int64(-5)},
		{name: "unary minus overflow", expr: func() (Arg, error) { return Unary("-", p(1, tI)) }, params: []any{int64(math.MinInt64)}, wantCode: "OUT_OF_RANGE"},
		{name: "bit xor", expr: bin("^", intLit(6), intLit(3)), want: int64(5)},
		{name: "bit and", expr: bin("&", intLit(6), intLit(3)), want: int64(2)},
		{name: "shift right logical", expr: bin(">>", intLit(-1), intLit(60)), want: int64(15)},
		{name: "shift left", expr: bin("<<", intLit(1), intLit(3)), want: int64(8)},
		{name: "bitnot", expr: func() (Arg, error) { return Unary("~", intLit(0)) }, want: int64(-1)},
		{name: "bytes and", expr: bin("&", p(1, tY), p(2, tY)), params: []any{[]byte{0xF0, 0x0F}, []byte{0xFF, 0x01}}, want: []byte{0xF0, 0x01}},
		{name: "concat", expr: bin("||", lit("ab"), lit("cd")), want: "abcd", wantType: tS},
		{name: "concat null", expr: bin("||", lit("ab"), null()), want: nil},
		{name: "concat bytes", expr: bin("||", p(1, tY), p(2, tY)), params: []any{[]byte("a"), []byte{0}}, want: []byte{'a', 0}},
	})
}

var stIS = spantype.StructOf(spantype.Field{Name: "a", Type: tI}, spantype.Field{Name: "b", Type: tS})

func TestComparisons(t *testing.T) {
	runEvalCases(t, []evalCase{
		{name: "int lt", expr: bin("<", intLit(1), intLit(2)), want: int64(1), wantType: tB},
		{name: "int float eq", expr: bin("=", intLit(1), floatLit(1)), want: int64(1)},
		{name: "nan eq nan", expr: bin("=", p(1, tF), p(1, tF)), params: []any{"NaN"}, want: int64(0)},
		{name: "nan ne nan", expr: bin("!=", p(1, tF), p(1, tF)), params: []any{"NaN"}, want: int64(1)},
		{name: "one lt nan", expr: bin("<", floatLit(1), p(1, tF)), params: []any{"NaN"}, want: int64(0)},
		{name: "float null", expr: bin("<", floatLit(1), null()), want: nil},
		{name: "numeric numeric order", expr: bin("<", p(1, tN), p(2, tN)), params: []any{"9", "10"}, want: int64(1)},
		{name: "numeric negative", expr: bin("<", p(1, tN), p(2, tN)), params: []any{"-10", "-9.5"}, want: int64(1)},
		{name: "numeric vs int", expr: bin("=", p(1, tN), intLit(10)), params: []any{"10"}, want: int64(1)},
		{name: "date vs literal", expr: bin(">=", p(1, tD), lit("2020-1-2")), params: []any{"2020-01-02"}, want: int64(1)},
		{name: "timestamp vs literal", expr: bin("<", p(1, tT), lit("2020-01-01 00:00:00+00")), params: []any{"2019-12-31T23:59:59.000000000Z"}, want: int64(1)},
		{name: "string ne", expr: bin("<>", lit("a"), lit("b")), want: int64(1)},
		{name: "bool eq", expr: bin("=", p(1, tB), p(2, tB)), params: []any{int64(1), int64(1)}, want: int64(1)},
		{name: "is distinct nan", expr: bin("IS DISTINCT FROM", p(1, tF), p(1, tF)), params: []any{"NaN"}, want: int64(0)},
		{name: "is distinct null", expr: bin("IS DISTINCT FROM", p(1, tI), null()), params: []any{int64(1)}, want: int64(1)},
		{name: "and null", expr: bin("AND", p(1, tB), null()), params: []any{int64(0)}, want: int64(0)},
		{name: "or null", expr: bin("OR", p(1, tB), null()), params: []any{int64(0)}, want: nil},
		{name: "like case sensitive", expr: bin("LIKE", lit("ABC"), lit("a%")), want: int64(0)},
		{name: "like percent", expr: bin("LIKE", lit("abc"), lit("a%c")), want: int64(1)},
		{name: "like underscore unicode", expr: bin("LIKE", lit("añc"), lit("a_c")), want: int64(1)},
		{name: "like escape", expr: bin("LIKE", lit("a%c"), lit(`a\%c`)), want: int64(1)},
		{name: "like escape no match", expr: bin("LIKE", lit("abc"), lit(`a\%c`)), want: int64(0)},
		{name: "not like", expr: bin("NOT LIKE", lit("abc"), lit("%b%")), want: int64(0)},
		{name: "like bytes", expr: bin("LIKE", p(1, tY), p(2, tY)), params: []any{[]byte("xyz"), []byte("x_z")}, want: int64(1)},
		{name: "struct eq", expr: bin("=", p(1, stIS), p(2, stIS)), params: []any{`[1,"a"]`, `[1,"a"]`}, want: int64(1)},
		{name: "struct ne", expr: bin("!=", p(1, stIS), p(2, stIS)), params: []any{`[1,"a"]`, `[2,"a"]`}, want: int64(1)},
		{name: "struct eq null field", expr: bin("=", p(1, stIS), p(2, stIS)), params: []any{`[1,null]`, `[1,"a"]`}, want: nil},
		{name: "struct eq null but different", expr: bin("=", p(1, stIS), p(2, stIS)), params: []any{`[2,null]`, `[1,"a"]`}, want: int64(0)},
		{name: "like backtrack", expr: bin("LIKE", lit("aaab"), lit("%a%ab")), want: int64(1)},
	})
}

func TestBinaryErrors(t *testing.T) {
	arr := p(1, spantype.ArrayOf(tI))
	for _, c := range []struct {
		name string
		op   string
		l, r Arg
	}{
		{"array equality", "=", arr, arr},
		{"string plus int", "+", lit("a"), intLit(1)},
		{"string vs int", "=", p(1, tS), intLit(1)},
		{"bad date literal", "=", p(1, tD), lit("2020-13-01")},
		{"and of ints", "AND", intLit(1), intLit(2)},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Binary(c.op, c.l, c.r)
			e, ok := err.(*Error)
			if !ok || e.Code != "INVALID_ARGUMENT" {
				t.Fatalf("err = %v, want INVALID_ARGUMENT *Error", err)
			}
		})
	}
}

func TestOrderKey(t *testing.T) {
	vals := []any{"NaN", math.Inf(-1), -1.5, 0.0, 2.0, math.Inf(1)}
	for i := 0; i+1 < len(vals); i++ {
		k1, _ := OrderKey(p(1, tF))
		k2, _ := OrderKey(p(2, tF))
		got, err := Eval(t, Arg{SQL: "(" + k1 + " < " + k2 + ")"}, vals[i], vals[i+1])
		if err != nil || got != int64(1) {
			t.Errorf("key(%v) < key(%v) = %v, %v", vals[i], vals[i+1], got, err)
		}
	}
	nums := []string{"-100", "-9.5", "-0.000000001", "0", "0.5", "9", "10"}
	for i := 0; i+1 < len(nums); i++ {
		k1, _ := OrderKey(p(1, tN))
		k2, _ := OrderKey(p(2, tN))
		got, err := Eval(t, Arg{SQL: "(" + k1 + " < " + k2 + ")"}, nums[i], nums[i+1])
		if err != nil || got != int64(1) {
			t.Errorf("key(%v) < key(%v) = %v, %v", nums[i], nums[i+1], got, err)
		}
	}
}

func TestParseRuntimeError(t *testing.T) {
	x, err := Binary("+", intLit(math.MaxInt64), intLit(1))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Eval(t, x)
	code, msg, ok := ParseRuntimeError(err)
	if !ok || code != "OUT_OF_RANGE" || msg != "int64 overflow: 9223372036854775807 + 1" {
		t.Errorf("ParseRuntimeError(%v) = %q, %q, %v", err, code, msg, ok)
	}
	if _, _, ok := ParseRuntimeError(errors.New("no such table: t")); ok {
		t.Error("a plain SQLite error must not parse")
	}
}
