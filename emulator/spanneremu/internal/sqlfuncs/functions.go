package sqlfuncs

import (
	"database/sql/driver"
	"strings"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

// scalarHandler translates one scalar function call.
type scalarHandler func(c Call) (Arg, error)

// scalars maps upper-cased function names to their handlers.
var scalars = map[string]scalarHandler{}

// overload is one signature of a function with fixed parameter types.
type overload struct {
	params []spantype.Type
	// optional is how many trailing params may be left out.
	optional int
	// variadic: the last param repeats any number of times (including zero when optional).
	variadic bool
	ret      spantype.Type
	// sql renders the call from the coerced arguments.
	sql func(args []Arg) string
}

// goCall renders a call of the registered Go function name.
func goCall(name string) func(args []Arg) string {
	return func(args []Arg) string { return sqlCall(name, argSQL(args)...) }
}

// defFunc declares a function whose overloads are tried in order; the first whose parameters
// the arguments coerce to wins, so list narrower types first (INT64 before NUMERIC before
// FLOAT64).
func defFunc(name string, ovs ...overload) {
	scalars[name] = func(c Call) (Arg, error) { return resolve(c, ovs) }
}

func sig(ret spantype.Type, sql func([]Arg) string, params ...spantype.Type) overload {
	return overload{params: params, ret: ret, sql: sql}
}

func (o overload) opt(n int) overload { o.optional = n; return o }
func (o overload) rep() overload      { o.variadic = true; return o }

func resolve(c Call, ovs []overload) (Arg, error) {
	// An exact match wins over one that needs coercion, so ROUND(NUMERIC) stays NUMERIC even
	// though NUMERIC also coerces to FLOAT64.
	for _, exact := range []bool{true, false} {
		for _, o := range ovs {
			if exact && !o.matchesExactly(c.Args) {
				continue
			}
			args, ok, err := o.bind(c.Args)
			if err != nil {
				return Arg{}, err
			}
			if ok {
				return Arg{SQL: o.sql(args), Type: o.ret}, nil
			}
		}
	}
	return Arg{}, errorf("No matching signature for function %s for argument types: %s", strings.ToUpper(c.Name), typeList(c.Args))
}

func (o overload) matchesExactly(args []Arg) bool {
	n := len(o.params)
	if len(args) < n-o.optional || (len(args) > n && !o.variadic) {
		return false
	}
	for i, a := range args {
		p := o.params[min(i, n-1)]
		if a.Type.Code != spantype.Unknown && !stripLength(a.Type).Equal(p) {
			return false
		}
	}
	return true
}

func (o overload) bind(args []Arg) ([]Arg, bool, error) {
	n := len(o.params)
	if len(args) < n-o.optional || (len(args) > n && !o.variadic) {
		return nil, false, nil
	}
	out := make([]Arg, len(args))
	for i, a := range args {
		p := o.params[min(i, n-1)]
		c, ok, err := coerce(a, p)
		if err != nil || !ok {
			return nil, false, err
		}
		out[i] = c
	}
	return out, true, nil
}

// Function translates a scalar function call.
func Function(c Call) (Arg, error) {
	prepare()
	name := strings.ToUpper(c.Name)
	safe := false
	if rest, ok := strings.CutPrefix(name, "SAFE."); ok {
		name, safe = rest, true
	}
	h, ok := scalars[name]
	if !ok {
		if IsAggregate(name) {
			return Arg{}, errorf("Aggregate function %s not allowed in this context", name)
		}
		return Arg{}, errorf("Function not found: %s", c.Name)
	}
	c.Name = name
	out, err := h(c)
	if err != nil || !safe {
		return out, err
	}
	// SAFE.F(...) returns NULL where F would raise an error. Every Go function has a twin with
	// the suffix _safe that does exactly that; only the outermost call is F itself (errors in
	// F's arguments still fail, as in GoogleSQL). Functions rendered as plain SQLite cannot fail.
	return safeOuter(out), nil
}

func init() {
	// The _safe twins are declared after every other init has run its def* calls (a
	// package's init functions run in file-name order, and this file sorts before most).
	lateInits = append(lateInits, func() {
		for _, f := range scalarFuncs[:len(scalarFuncs):len(scalarFuncs)] {
			inner := f.fn
			f.name += "_safe"
			f.fn = func(args []driver.Value) (driver.Value, error) {
				if v, err := inner(args); err == nil {
					return v, nil
				}
				return nil, nil
			}
			scalarFuncs = append(scalarFuncs, f)
		}
	})
}

// lateInits run once, before the first registration or translation needs their results.
var lateInits []func()

func init() {
	// Conditional expressions are rendered as SQLite CASE/COALESCE, which are lazy and
	// NULL-correct; GoogleSQL only adds the supertype rule.
	scalars["IF"] = func(c Call) (Arg, error) {
		if len(c.Args) != 3 {
			return Arg{}, arity(c, "3")
		}
		if err := expectBool("IF", c.Args[0]); err != nil {
			return Arg{}, errorf("IF condition must be BOOL, got %s", c.Args[0].Type)
		}
		vals, t, err := unifyArgs(c, c.Args[1:])
		if err != nil {
			return Arg{}, err
		}
		return Arg{SQL: "(CASE WHEN " + c.Args[0].SQL + " THEN " + vals[0].SQL + " ELSE " + vals[1].SQL + " END)", Type: t}, nil
	}
	scalars["IFNULL"] = func(c Call) (Arg, error) {
		if len(c.Args) != 2 {
			return Arg{}, arity(c, "2")
		}
		return coalesce(c)
	}
	scalars["COALESCE"] = func(c Call) (Arg, error) {
		if len(c.Args) == 0 {
			return Arg{}, arity(c, "at least 1")
		}
		return coalesce(c)
	}
	scalars["NULLIF"] = func(c Call) (Arg, error) {
		if len(c.Args) != 2 {
			return Arg{}, arity(c, "2")
		}
		vals, t, err := unifyArgs(c, c.Args)
		if err != nil {
			return Arg{}, err
		}
		eq, err := compare("=", vals[0], vals[1])
		if err != nil {
			return Arg{}, err
		}
		return Arg{SQL: "(CASE WHEN " + eq.SQL + " THEN NULL ELSE " + vals[0].SQL + " END)", Type: t}, nil
	}
}

func coalesce(c Call) (Arg, error) {
	vals, t, err := unifyArgs(c, c.Args)
	if err != nil {
		return Arg{}, err
	}
	if len(vals) == 1 {
		return vals[0], nil
	}
	return Arg{SQL: sqlCall("COALESCE", argSQL(vals)...), Type: t}, nil
}

// unifyArgs coerces args to their common supertype.
func unifyArgs(c Call, args []Arg) ([]Arg, spantype.Type, error) {
	t, err := SupertypeArgs(args...)
	if err != nil {
		return nil, t, errorf("No matching signature for function %s for argument types: %s", c.Name, typeList(c.Args))
	}
	out := make([]Arg, len(args))
	for i, a := range args {
		if out[i], err = Coerce(a, t); err != nil {
			return nil, t, err
		}
	}
	return out, t, nil
}

func arity(c Call, want string) error {
	return errorf("Number of arguments does not match for function %s: expected %s, got %d", c.Name, want, len(c.Args))
}
