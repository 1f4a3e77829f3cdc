package sqlfuncs

import (
	"sort"
	"strings"
	"testing"
)

// TestEveryFunctionWithNulls calls every scalar function and aggregate with zero to four
// arguments of each simple kind (NULL literal, typed NULL parameters) and runs whatever
// translates. It guards against panics in handlers or Go implementations and against SQL that
// SQLite rejects; NULL inputs must never fail at run time except where GoogleSQL says so.
func TestEveryFunctionWithNulls(t *testing.T) {
	var names []string
	for n := range scalars {
		names = append(names, n)
	}
	sort.Strings(names)
	failsOnNull := map[string]bool{"ERROR": true, "JSON_OBJECT": true} // NULL message or key
	kinds := [][]Arg{
		{null()},
		{p(1, tS)}, {p(1, tI)}, {p(1, tF)}, {p(1, tY)}, {p(1, tD)}, {p(1, tT)}, {p(1, tJ)}, {p(1, tAI)},
	}
	for _, name := range names {
		for _, kind := range kinds {
			for n := 0; n <= 4; n++ {
				args := make([]Arg, n)
				for i := range args {
					args[i] = kind[0]
				}
				x, err := Function(Call{Name: name, Args: args})
				if err != nil {
					continue
				}
				if _, err := Eval(t, x, nil); err != nil && !failsOnNull[name] {
					t.Errorf("%s(%d x %s) = %s: %v", name, n, typeList(kind), x.SQL, err)
				}
			}
		}
	}
	for name := range aggregates {
		for _, kind := range kinds {
			c := Call{Name: name, Args: []Arg{{SQL: "x", Type: kind[0].Type}}}
			x, err := Aggregate(c)
			if err != nil {
				continue
			}
			var v any
			q := "SELECT " + x.SQL + " FROM (SELECT NULL AS x UNION ALL SELECT NULL)"
			if err := db(t).QueryRow(q).Scan(&v); err != nil && !strings.Contains(err.Error(), "no such column") {
				t.Errorf("%s: %s: %v", name, q, err)
			}
		}
	}
}

// TestEveryFunctionWithValues is the smoke test with sample values: any failure must be a
// runtime error of this library (prefix and code), never a panic or a SQLite error.
func TestEveryFunctionWithValues(t *testing.T) {
	samples := []struct {
		arg Arg
		val any
	}{
		{p(1, tS), "a,b"}, {p(1, tS), ""}, {p(1, tI), int64(3)}, {p(1, tI), int64(-1)}, {p(1, tI), int64(0)},
		{p(1, tF), 1.5}, {p(1, tF), "NaN"}, {p(1, tN), "2.5"}, {p(1, tY), []byte{0xff, 'a'}}, {p(1, tD), "2020-02-29"},
		{p(1, tT), "2020-02-29T12:00:00.000000001Z"}, {p(1, tJ), `{"a":[1,2]}`}, {p(1, tAI), "[1,null,3]"},
		{p(1, tAS), `["x","y"]`}, {p(1, tB), int64(1)}, {lit("$.a"), nil}, {lit("DAY"), nil},
	}
	var names []string
	for n := range scalars {
		names = append(names, n)
	}
	sort.Strings(names)
	evaluated := 0
	defer func() {
		if evaluated < 200 {
			t.Errorf("only %d calls translated; the smoke test is not exercising much", evaluated)
		}
	}()
	for _, name := range names {
		for _, s := range samples {
			for n := 1; n <= 3; n++ {
				args := make([]Arg, n)
				for i := range args {
					args[i] = s.arg
				}
				x, err := Function(Call{Name: name, Args: args})
				if err != nil {
					continue
				}
				evaluated++
				_, err = Eval(t, x, s.val)
				if err != nil {
					if _, _, ok := ParseRuntimeError(err); !ok {
						t.Errorf("%s(%d x %v) = %s: %v", name, n, s.val, x.SQL, err)
					}
				}
			}
		}
	}
}

func TestRegisterIsIdempotent(t *testing.T) {
	db(t) // registers once
	Register()
	Register()
	x, err := Function(Call{Name: "SAFE.FROM_HEX", Args: []Arg{lit("zz")}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Eval(t, x)
	if err != nil || got != nil {
		t.Errorf("SAFE.FROM_HEX('zz') = %v, %v; want NULL", got, err)
	}
}
