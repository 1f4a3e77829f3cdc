package sqlfuncs

import (
	"bytes"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strings"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

// IsAggregate reports whether name (case-insensitive) is an aggregate function.
func IsAggregate(name string) bool {
	_, ok := aggregates[strings.ToUpper(name)]
	return ok
}

// aggregates maps upper-cased names to their translators. Aggregates whose state is a single
// argument accept DISTINCT through SQLite (agg(DISTINCT x)); that is why type information is
// folded into the argument (ARRAY_AGG) or the function name (SUM) instead of extra arguments.
var aggregates = map[string]func(c Call) (Arg, error){}

// Aggregate translates an aggregate call. COUNT(*) arrives as Name "COUNT" with no Args.
func Aggregate(c Call) (Arg, error) {
	prepare()
	name := strings.ToUpper(c.Name)
	h, ok := aggregates[name]
	if !ok {
		return Arg{}, errorf("Aggregate function not found: %s", c.Name)
	}
	c.Name = name
	if err := prepareModifiers(&c); err != nil {
		return Arg{}, err
	}
	return h(c)
}

// prepareModifiers checks HAVING, ORDER BY and LIMIT and replaces their expressions' SQL with
// what spf_agg_mod needs: ordering keys and an INT64 limit.
func prepareModifiers(c *Call) error {
	if c.Having != nil {
		key, err := OrderKey(c.Having.Expr)
		if err != nil {
			return errorf("HAVING %s does not support expressions of type %s", havingDir(c.Having), c.Having.Expr.Type)
		}
		c.Having = &Having{Max: c.Having.Max, Expr: Arg{SQL: key, Type: c.Having.Expr.Type}}
	}
	if len(c.OrderBy) > 0 {
		items := make([]OrderItem, len(c.OrderBy))
		for i, o := range c.OrderBy {
			key, err := OrderKey(o.Expr)
			if err != nil {
				return errorf("ORDER BY in %s does not support expressions of type %s", c.Name, o.Expr.Type)
			}
			items[i] = OrderItem{Expr: Arg{SQL: key, Type: o.Expr.Type}, Desc: o.Desc}
		}
		c.OrderBy = items
	}
	if c.Limit != nil {
		l, err := Coerce(*c.Limit, tI)
		if err != nil {
			return errorf("LIMIT in %s must be an INT64, got %s", c.Name, c.Limit.Type)
		}
		c.Limit = &l
	}
	return nil
}

func havingDir(h *Having) string {
	if h.Max {
		return "MAX"
	}
	return "MIN"
}

// aggSQL renders fn([DISTINCT] args...). With HAVING, ORDER BY or LIMIT it renders
// spf_agg_mod(spec, 'fn', keys..., args...), which buffers the group's rows, applies the
// modifiers and runs the Go version of fn over what is left.
func aggSQL(fn string, c Call, args ...string) string {
	// SQLite's own DISTINCT takes a single argument, so STRING_AGG(DISTINCT s, delim) goes
	// through spf_agg_mod too.
	if c.Having != nil || len(c.OrderBy) > 0 || c.Limit != nil || (c.Distinct && len(args) > 1) {
		var spec []string
		var lead []string
		if c.Distinct {
			spec = append(spec, "D")
		}
		if c.Having != nil {
			spec = append(spec, "H"+havingDir(c.Having))
			lead = append(lead, c.Having.Expr.SQL)
		}
		for _, o := range c.OrderBy {
			if o.Desc {
				spec = append(spec, "ODESC")
			} else {
				spec = append(spec, "OASC")
			}
			lead = append(lead, o.Expr.SQL)
		}
		if c.Limit != nil {
			spec = append(spec, "L")
			lead = append(lead, c.Limit.SQL)
		}
		all := append([]string{sqlString(strings.Join(spec, " ")), sqlString(fn)}, lead...)
		sql := sqlCall("spf_agg_mod", append(all, args...)...)
		if fn == "COUNT" {
			// spf_agg_mod learns fn from its first row, so over no rows it cannot know that
			// COUNT's answer is 0 rather than NULL.
			sql = "COALESCE(" + sql + ", 0)"
		}
		return sql
	}
	if c.Distinct {
		return fn + "(DISTINCT " + strings.Join(args, ", ") + ")"
	}
	return sqlCall(fn, args...)
}

// unary adapts an aggregate of exactly one argument.
func unary(f func(c Call, x Arg) (Arg, error)) func(Call) (Arg, error) {
	return func(c Call) (Arg, error) {
		x, err := oneArg(c)
		if err != nil {
			return Arg{}, err
		}
		return f(c, x)
	}
}

func oneArg(c Call) (Arg, error) {
	if len(c.Args) != 1 {
		return Arg{}, arity(c, "1")
	}
	return c.Args[0], nil
}

func aggNoSignature(c Call) error {
	return errorf("No matching signature for aggregate function %s for argument types: %s", c.Name, typeList(c.Args))
}

// checkDistinct rejects DISTINCT on types GoogleSQL cannot group.
func checkDistinct(c Call, t spantype.Type) error {
	if c.Distinct && (t.Code == spantype.JSON || t.Code == spantype.Array) {
		return errorf("Aggregate functions with DISTINCT cannot be used with arguments of type %s", t)
	}
	return nil
}

func init() {
	aggregates["COUNT"] = func(c Call) (Arg, error) {
		if len(c.Args) == 0 {
			if c.Having != nil {
				return Arg{SQL: aggSQL("COUNT", c), Type: tI}, nil
			}
			return Arg{SQL: "COUNT(*)", Type: tI}, nil
		}
		x, err := oneArg(c)
		if err != nil {
			return Arg{}, err
		}
		if err := checkDistinct(c, x.Type); err != nil {
			return Arg{}, err
		}
		arg := x.SQL
		if c.Distinct && x.Type.Code == spantype.Numeric {
			arg = sqlCall("spf_numeric_key", arg)
		}
		return Arg{SQL: aggSQL("COUNT", c, arg), Type: tI}, nil
	}
	aggregates["APPROX_COUNT_DISTINCT"] = func(c Call) (Arg, error) {
		c.Distinct = true
		return aggregates["COUNT"](c)
	}
	aggregates["COUNTIF"] = unary(func(c Call, x Arg) (Arg, error) {
		if err := expectBool("COUNTIF", x); err != nil {
			return Arg{}, aggNoSignature(c)
		}
		// COUNTIF(DISTINCT x) counts distinct TRUE values, so it is 0 or 1, like
		// COUNT(DISTINCT CASE WHEN x THEN 1 END).
		return Arg{SQL: aggSQL("COUNT", c, "CASE WHEN "+x.SQL+" THEN 1 END"), Type: tI}, nil
	})
	for _, name := range []string{"SUM", "AVG"} {
		aggregates[name] = unary(func(c Call, x Arg) (Arg, error) {
			t := x.Type
			switch t.Code {
			case spantype.Unknown:
				t = tI
			case spantype.Float32:
				t = tF
			case spantype.Int64, spantype.Float64, spantype.Numeric:
			default:
				return Arg{}, aggNoSignature(c)
			}
			ret := t
			if name == "AVG" && t.Code == spantype.Int64 {
				ret = tF
			}
			fn := "spf_" + strings.ToLower(name) + "_" + strings.ToLower(t.String())
			return Arg{SQL: aggSQL(fn, c, x.SQL), Type: ret}, nil
		})
	}
	for _, name := range []string{"MIN", "MAX"} {
		aggregates[name] = unary(func(c Call, x Arg) (Arg, error) {
			switch x.Type.Code {
			case spantype.Float64, spantype.Float32, spantype.Numeric:
				fn := "spf_" + strings.ToLower(name) + "_" + strings.ToLower(stripLength(x.Type).String())
				if x.Type.Code == spantype.Float32 {
					fn = "spf_" + strings.ToLower(name) + "_float64"
				}
				return Arg{SQL: aggSQL(fn, c, x.SQL), Type: x.Type}, nil
			}
			if !x.Type.Orderable() {
				return Arg{}, errorf("%s does not support arguments of type %s", name, x.Type)
			}
			// SQLite's min/max order INTEGER, TEXT and BLOB values exactly as GoogleSQL orders
			// INT64, BOOL, STRING, BYTES, DATE and TIMESTAMP in their storage forms.
			return Arg{SQL: aggSQL(name, c, x.SQL), Type: x.Type}, nil
		})
	}
	for _, name := range []string{"LOGICAL_AND", "LOGICAL_OR"} {
		sqlName := map[string]string{"LOGICAL_AND": "MIN", "LOGICAL_OR": "MAX"}[name]
		aggregates[name] = unary(func(c Call, x Arg) (Arg, error) {
			if err := expectBool(c.Name, x); err != nil {
				return Arg{}, aggNoSignature(c)
			}
			// On 0/1 values, MIN is AND and MAX is OR, both skipping NULLs.
			return Arg{SQL: aggSQL(sqlName, c, x.SQL), Type: tB}, nil
		})
	}
	for _, name := range []string{"STDDEV", "STDDEV_SAMP", "VARIANCE", "VAR_SAMP"} {
		fn := "spf_var_samp"
		if strings.HasPrefix(name, "STDDEV") {
			fn = "spf_stddev_samp"
		}
		aggregates[name] = unary(func(c Call, x Arg) (Arg, error) {
			if !isNumOrNull(x.Type) {
				return Arg{}, aggNoSignature(c)
			}
			return Arg{SQL: aggSQL(fn, c, x.SQL), Type: tF}, nil
		})
	}
	aggregates["ANY_VALUE"] = unary(func(c Call, x Arg) (Arg, error) {
		return Arg{SQL: aggSQL("spf_any_value", c, x.SQL), Type: x.Type}, nil
	})
	for _, name := range []string{"BIT_AND", "BIT_OR", "BIT_XOR"} {
		fn := "spf_" + strings.ToLower(name)
		aggregates[name] = unary(func(c Call, x Arg) (Arg, error) {
			if !isIntLike(x.Type) {
				return Arg{}, aggNoSignature(c)
			}
			return Arg{SQL: aggSQL(fn, c, x.SQL), Type: tI}, nil
		})
	}
	aggregates["ARRAY_AGG"] = unary(func(c Call, x Arg) (Arg, error) {
		if x.Type.Code == spantype.Array {
			return Arg{}, errorf("ARRAY_AGG does not support arguments of type %s: arrays of arrays are not allowed", x.Type)
		}
		if err := checkDistinct(c, x.Type); err != nil {
			return Arg{}, err
		}
		// The element is turned into its JSON form first, so the aggregate needs no type and
		// DISTINCT compares JSON forms (one per value).
		elem := "spf_json_elem"
		if c.IgnoreNulls {
			elem = "spf_json_elem_or_null"
		}
		t := x.Type
		if t.Code == spantype.Unknown {
			t = tI
		}
		return Arg{SQL: aggSQL("spf_array_agg", c, sqlCall(elem, x.SQL, tagSQL(t))), Type: spantype.ArrayOf(t)}, nil
	})
	aggregates["ARRAY_CONCAT_AGG"] = unary(func(c Call, x Arg) (Arg, error) {
		t := x.Type
		switch t.Code {
		case spantype.Unknown:
			t = spantype.ArrayOf(tI)
		case spantype.Array:
		default:
			return Arg{}, aggNoSignature(c)
		}
		if c.Distinct {
			return Arg{}, errorf("ARRAY_CONCAT_AGG does not support DISTINCT")
		}
		return Arg{SQL: aggSQL("spf_array_concat_agg", c, x.SQL), Type: t}, nil
	})
	aggregates["STRING_AGG"] = func(c Call) (Arg, error) {
		if len(c.Args) != 1 && len(c.Args) != 2 {
			return Arg{}, arity(c, "1 or 2")
		}
		t := c.Args[0].Type
		if t.Code == spantype.Unknown {
			t = tS
		}
		if t.Code != spantype.String && t.Code != spantype.Bytes {
			return Arg{}, aggNoSignature(c)
		}
		args := []string{c.Args[0].SQL}
		if len(c.Args) == 2 {
			d, err := Coerce(c.Args[1], t)
			if err != nil {
				return Arg{}, aggNoSignature(c)
			}
			args = append(args, d.SQL)
		}
		return Arg{SQL: aggSQL("spf_string_agg", c, args...), Type: t}, nil
	}

	// Go implementations.
	defAgg("spf_sum_int64", 1, func() aggState { return &sumInt{} })
	defAgg("spf_sum_float64", 1, func() aggState { return &sumFloat{} })
	defAgg("spf_sum_numeric", 1, func() aggState { return &sumNumeric{} })
	defAgg("spf_avg_int64", 1, func() aggState { return &sumFloat{avg: true} })
	defAgg("spf_avg_float64", 1, func() aggState { return &sumFloat{avg: true} })
	defAgg("spf_avg_numeric", 1, func() aggState { return &sumNumeric{avg: true} })
	for _, t := range []spantype.Type{tF, tN} {
		for _, name := range []string{"min", "max"} {
			t, want := t, 1
			if name == "min" {
				want = -1
			}
			defAgg("spf_"+name+"_"+strings.ToLower(t.String()), 1, func() aggState { return &extreme{t: t, want: want} })
		}
	}
	defAgg("spf_any_value", 1, func() aggState { return &anyValue{} })
	bitOps := map[string]func(a, b int64) int64{
		"spf_bit_and": func(a, b int64) int64 { return a & b },
		"spf_bit_or":  func(a, b int64) int64 { return a | b },
		"spf_bit_xor": func(a, b int64) int64 { return a ^ b },
	}
	for name, op := range bitOps {
		defAgg(name, 1, func() aggState { return &bitAgg{op: op} })
	}
	defAgg("spf_array_agg", 1, func() aggState { return &arrayAgg{} })
	defAgg("spf_string_agg", -1, func() aggState { return &stringAgg{} })
	defAgg("spf_array_concat_agg", 1, func() aggState { return &arrayConcatAgg{} })

	defAgg("spf_var_samp", 1, func() aggState { return &variance{} })
	defAgg("spf_stddev_samp", 1, func() aggState { return &variance{sqrt: true} })
	defAgg("spf_agg_mod", -1, func() aggState { return &modAgg{} })

	defLax("spf_json_elem", 2, func(a []driver.Value) (driver.Value, error) { return jsonElemText(a, "null") })
	defLax("spf_json_elem_or_null", 2, func(a []driver.Value) (driver.Value, error) { return jsonElemText(a, nil) })
}

// jsonElemText renders a[0] (of type tag a[1]) as its JSON element text; NULL becomes ifNull.
func jsonElemText(a []driver.Value, ifNull driver.Value) (driver.Value, error) {
	if a[0] == nil {
		return ifNull, nil
	}
	t, err := parseTag(asString(a[1]))
	if err != nil {
		return nil, err
	}
	if t.Code == spantype.Array || t.Code == spantype.Struct {
		return asString(a[0]), nil
	}
	return jsonText(spantype.StorageToJSONElem(t, normalizeStorage(t, a[0]))), nil
}

// normalizeStorage fixes values SQLite may hand back in another class (an INT64 from a REAL
// expression, BYTES as TEXT).
func normalizeStorage(t spantype.Type, v driver.Value) driver.Value {
	switch t.Code {
	case spantype.Bytes:
		return asBytes(v)
	case spantype.Float64, spantype.Float32:
		if f, err := asFloat(v); err == nil {
			return storeFloat(f)
		}
	}
	return v
}

type sumInt struct {
	sum  int64
	seen bool
}

func (s *sumInt) step(a []driver.Value) error {
	if a[0] == nil {
		return nil
	}
	n, err := asInt(a[0])
	if err != nil {
		return err
	}
	sum, ok := intOps["add"](s.sum, n)
	if !ok {
		return outOfRange("int64 overflow in SUM")
	}
	s.sum, s.seen = sum, true
	return nil
}

func (s *sumInt) result() (driver.Value, error) {
	if !s.seen {
		return nil, nil
	}
	return s.sum, nil
}

type sumFloat struct {
	sum   float64
	count int64
	avg   bool
}

func (s *sumFloat) step(a []driver.Value) error {
	if a[0] == nil {
		return nil
	}
	f, err := asFloat(a[0])
	if err != nil {
		return err
	}
	s.sum += f
	s.count++
	return nil
}

func (s *sumFloat) result() (driver.Value, error) {
	if s.count == 0 {
		return nil, nil
	}
	if s.avg {
		return storeFloat(s.sum / float64(s.count)), nil
	}
	return storeFloat(s.sum), nil
}

type sumNumeric struct {
	sum   big.Rat
	count int64
	avg   bool
}

func (s *sumNumeric) step(a []driver.Value) error {
	if a[0] == nil {
		return nil
	}
	r, err := asNumeric(a[0])
	if err != nil {
		return err
	}
	s.sum.Add(&s.sum, r)
	s.count++
	return nil
}

func (s *sumNumeric) result() (driver.Value, error) {
	if s.count == 0 {
		return nil, nil
	}
	if s.avg {
		return storeNumeric(new(big.Rat).Quo(&s.sum, big.NewRat(s.count, 1)))
	}
	return storeNumeric(&s.sum)
}

// extreme is MIN/MAX for FLOAT64 (NaN wins, as in GoogleSQL) and NUMERIC (numeric order).
type extreme struct {
	t    spantype.Type
	want int
	best driver.Value
	nan  bool
}

func (e *extreme) step(a []driver.Value) error {
	v := a[0]
	switch {
	case v == nil:
		return nil
	case isNaNValue(e.t, v):
		e.nan = true
		return nil
	case e.best == nil:
		e.best = v
		return nil
	}
	c, err := compareStorage(e.t, v, e.best)
	if c == e.want {
		e.best = v
	}
	return err
}

func (e *extreme) result() (driver.Value, error) {
	if e.nan {
		return "NaN", nil
	}
	return e.best, nil
}

type anyValue struct{ v driver.Value }

func (s *anyValue) step(a []driver.Value) error {
	if s.v == nil {
		s.v = a[0]
	}
	return nil
}

func (s *anyValue) result() (driver.Value, error) { return s.v, nil }

type bitAgg struct {
	op   func(a, b int64) int64
	acc  int64
	seen bool
}

func (s *bitAgg) step(a []driver.Value) error {
	if a[0] == nil {
		return nil
	}
	n, err := asInt(a[0])
	if err != nil {
		return err
	}
	if !s.seen {
		s.acc, s.seen = n, true
		return nil
	}
	s.acc = s.op(s.acc, n)
	return nil
}

func (s *bitAgg) result() (driver.Value, error) {
	if !s.seen {
		return nil, nil
	}
	return s.acc, nil
}

// arrayAgg collects JSON element texts; a SQL NULL input (IGNORE NULLS) is skipped.
type arrayAgg struct {
	elems []json.RawMessage
	seen  bool
}

func (s *arrayAgg) step(a []driver.Value) error {
	s.seen = true
	if a[0] == nil {
		return nil
	}
	s.elems = append(s.elems, json.RawMessage(asString(a[0])))
	return nil
}

func (s *arrayAgg) result() (driver.Value, error) {
	if len(s.elems) == 0 {
		// ARRAY_AGG over no rows (or only ignored NULLs) is NULL.
		return nil, nil
	}
	return rawArray(s.elems), nil
}

type stringAgg struct {
	b       strings.Builder
	n       int
	isBytes bool
}

func (s *stringAgg) step(a []driver.Value) error {
	if a[0] == nil {
		return nil
	}
	if s.n > 0 {
		delim := ","
		if len(a) > 1 {
			if a[1] == nil {
				return nil
			}
			delim = asString(a[1])
		}
		s.b.WriteString(delim)
	}
	_, s.isBytes = a[0].([]byte)
	s.b.WriteString(asString(a[0]))
	s.n++
	return nil
}

func (s *stringAgg) result() (driver.Value, error) {
	if s.n == 0 {
		return nil, nil
	}
	if s.isBytes {
		return []byte(s.b.String()), nil
	}
	return s.b.String(), nil
}

// goAggregate returns a fresh Go state for the aggregate SQL function fn, including Go
// equivalents of the SQLite builtins COUNT, MIN and MAX.
func goAggregate(fn string) (aggState, error) {
	switch fn {
	case "COUNT":
		return &countAgg{}, nil
	case "MIN":
		return &plainExtreme{want: -1}, nil
	case "MAX":
		return &plainExtreme{want: 1}, nil
	}
	for _, a := range aggregateFns {
		if a.name == fn {
			return a.make(), nil
		}
	}
	return nil, internalErr("no Go implementation of aggregate %s", fn)
}

// modAgg implements the HAVING, ORDER BY, LIMIT (and, with them, DISTINCT) modifiers of an
// aggregate: spf_agg_mod(spec, fn, [having key], [order keys...], [limit], args...). spec lists
// the modifiers in that order: "D", "HMAX"/"HMIN", "OASC"/"ODESC" per key, "L".
type modAgg struct {
	fn       string
	distinct bool
	having   string // "", "MAX" or "MIN"
	desc     []bool // one per ORDER BY key
	hasLimit bool
	limit    *int64
	best     driver.Value // the extreme HAVING key so far
	rows     []modRow
}

type modRow struct {
	keys []driver.Value
	args []driver.Value
}

func (m *modAgg) step(a []driver.Value) error {
	if m.fn == "" {
		m.fn = asString(a[1])
		for _, f := range strings.Fields(asString(a[0])) {
			switch {
			case f == "D":
				m.distinct = true
			case strings.HasPrefix(f, "H"):
				m.having = f[1:]
			case strings.HasPrefix(f, "O"):
				m.desc = append(m.desc, f == "ODESC")
			case f == "L":
				m.hasLimit = true
			}
		}
	}
	rest := a[2:]
	if m.having != "" {
		key := rest[0]
		rest = rest[1:]
		if key == nil {
			return nil // a NULL key is never the maximum or minimum
		}
		c := 0
		if m.best != nil {
			c = sqliteCompare(key, m.best)
			if m.having == "MIN" {
				c = -c
			}
		}
		switch {
		case c < 0:
			return nil
		case m.best == nil || c > 0:
			m.best, m.rows = key, nil
		}
	}
	keys := append([]driver.Value(nil), rest[:len(m.desc)]...)
	rest = rest[len(m.desc):]
	if m.hasLimit {
		n, err := asInt(rest[0])
		if err != nil || n < 0 {
			return outOfRange("LIMIT in an aggregate must be a non-negative INT64")
		}
		m.limit = &n
		rest = rest[1:]
	}
	m.rows = append(m.rows, modRow{keys: keys, args: append([]driver.Value(nil), rest...)})
	return nil
}

func (m *modAgg) result() (driver.Value, error) {
	if m.fn == "" {
		// No rows reached step, so the inner function is unknown; every aggregate except
		// COUNT is NULL over no rows, and aggSQL wraps COUNT in COALESCE(..., 0).
		return nil, nil
	}
	rows := m.rows
	if m.distinct {
		seen := map[string]bool{}
		kept := rows[:0:0]
		for _, r := range rows {
			k := fmt.Sprintf("%#v", r.args)
			if !seen[k] {
				seen[k] = true
				kept = append(kept, r)
			}
		}
		rows = kept
	}
	if len(m.desc) > 0 {
		sort.SliceStable(rows, func(i, j int) bool {
			for k, desc := range m.desc {
				c := sqliteCompare(rows[i].keys[k], rows[j].keys[k])
				if desc {
					c = -c
				}
				if c != 0 {
					return c < 0
				}
			}
			return false
		})
	}
	if m.limit != nil && int64(len(rows)) > *m.limit {
		rows = rows[:*m.limit]
	}
	inner, err := goAggregate(m.fn)
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		if err := inner.step(r.args); err != nil {
			return nil, err
		}
	}
	return inner.result()
}

// countAgg is COUNT(x) (non-NULL x) or, with no arguments, COUNT(*).
type countAgg struct{ n int64 }

func (s *countAgg) step(a []driver.Value) error {
	if len(a) == 0 || a[0] != nil {
		s.n++
	}
	return nil
}

func (s *countAgg) result() (driver.Value, error) { return s.n, nil }

// plainExtreme is SQLite's MIN/MAX over values of one storage class.
type plainExtreme struct {
	want int
	best driver.Value
}

func (s *plainExtreme) step(a []driver.Value) error {
	if a[0] != nil && (s.best == nil || sqliteCompare(a[0], s.best) == s.want) {
		s.best = a[0]
	}
	return nil
}

func (s *plainExtreme) result() (driver.Value, error) { return s.best, nil }

// sqliteCompare orders values as SQLite does: NULL, then numbers (numerically), then TEXT,
// then BLOB (bytewise).
func sqliteCompare(a, b driver.Value) int {
	class := func(v driver.Value) int {
		switch v.(type) {
		case nil:
			return 0
		case int64, float64:
			return 1
		case string:
			return 2
		}
		return 3
	}
	ca, cb := class(a), class(b)
	if ca != cb {
		return cmp3(ca < cb, ca > cb)
	}
	switch ca {
	case 1:
		if x, ok := a.(int64); ok {
			if y, ok := b.(int64); ok {
				return cmp3(x < y, x > y)
			}
		}
		x, _ := asFloat(a)
		y, _ := asFloat(b)
		return cmp3(x < y, x > y)
	case 2:
		return strings.Compare(a.(string), b.(string))
	case 3:
		return bytes.Compare(asBytes(a), asBytes(b))
	}
	return 0
}

// variance is the sample variance (or standard deviation) by Welford's method, which stays
// accurate when the values are large and close together.
type variance struct {
	n        int64
	mean, m2 float64
	sqrt     bool
}

func (s *variance) step(a []driver.Value) error {
	if a[0] == nil {
		return nil
	}
	x, err := asFloat(a[0])
	if err != nil {
		if r, nerr := asNumeric(a[0]); nerr == nil {
			x, _ = r.Float64()
			err = nil
		}
	}
	if err != nil {
		return err
	}
	s.n++
	d := x - s.mean
	s.mean += d / float64(s.n)
	s.m2 += d * (x - s.mean)
	return nil
}

func (s *variance) result() (driver.Value, error) {
	if s.n < 2 {
		return nil, nil
	}
	v := s.m2 / float64(s.n-1)
	if s.sqrt {
		v = math.Sqrt(v)
	}
	return storeFloat(v), nil
}

// arrayConcatAgg concatenates the elements of non-NULL arrays; NULL over no arrays.
type arrayConcatAgg struct {
	elems []json.RawMessage
	seen  bool
}

func (s *arrayConcatAgg) step(a []driver.Value) error {
	if a[0] == nil {
		return nil
	}
	raw, err := rawElems(a[0])
	if err != nil {
		return err
	}
	s.elems = append(s.elems, raw...)
	s.seen = true
	return nil
}

func (s *arrayConcatAgg) result() (driver.Value, error) {
	if !s.seen {
		return nil, nil
	}
	return rawArray(s.elems), nil
}
