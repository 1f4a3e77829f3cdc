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
