package sqlfuncs

import (
	"database/sql/driver"
	"encoding/binary"
	"math"
	"math/big"
	"strings"
	"unicode/utf8"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

// Arithmetic runs in Go: SQLite silently turns INT64 overflow into REAL, turns NaN into NULL,
// and knows nothing of NUMERIC.

type intOp func(a, b int64) (int64, bool) // ok=false on overflow

var intOps = map[string]intOp{
	"add": func(a, b int64) (int64, bool) { c := a + b; return c, (c > a) == (b > 0) },
	"sub": func(a, b int64) (int64, bool) { c := a - b; return c, (c < a) == (b > 0) },
	"mul": func(a, b int64) (int64, bool) {
		if a == 0 || b == 0 {
			return 0, true
		}
		c := a * b
		return c, c/b == a && !(a == -1 && b == math.MinInt64) && !(b == -1 && a == math.MinInt64)
	},
}

var opSymbols = map[string]string{"add": "+", "sub": "-", "mul": "*", "div": "/"}

func init() {
	for name, op := range intOps {
		defStrict("spf_"+name+"_int64", 2, func(args []driver.Value) (driver.Value, error) {
			a, err := asInt(args[0])
			if err != nil {
				return nil, err
			}
			b, err := asInt(args[1])
			if err != nil {
				return nil, err
			}
			c, ok := op(a, b)
			if !ok {
				return nil, outOfRange("int64 overflow: %d %s %d", a, opSymbols[name], b)
			}
			return c, nil
		})
	}
	floatOps := map[string]func(a, b float64) float64{
		"add": func(a, b float64) float64 { return a + b },
		"sub": func(a, b float64) float64 { return a - b },
		"mul": func(a, b float64) float64 { return a * b },
		"div": func(a, b float64) float64 { return a / b },
	}
	for name, op := range floatOps {
		defStrict("spf_"+name+"_float64", 2, func(args []driver.Value) (driver.Value, error) {
			a, err := asFloat(args[0])
			if err != nil {
				return nil, err
			}
			b, err := asFloat(args[1])
			if err != nil {
				return nil, err
			}
			if name == "div" && b == 0 {
				return nil, outOfRange("division by zero: %s / %s", spantype.FormatFloat(a, 64), spantype.FormatFloat(b, 64))
			}
			c := op(a, b)
			if math.IsInf(c, 0) && !math.IsInf(a, 0) && !math.IsInf(b, 0) {
				return nil, outOfRange("double overflow: %s %s %s", spantype.FormatFloat(a, 64), opSymbols[name], spantype.FormatFloat(b, 64))
			}
			return storeFloat(c), nil
		})
	}
	numOps := map[string]func(a, b *big.Rat) *big.Rat{
		"add": func(a, b *big.Rat) *big.Rat { return new(big.Rat).Add(a, b) },
		"sub": func(a, b *big.Rat) *big.Rat { return new(big.Rat).Sub(a, b) },
		"mul": func(a, b *big.Rat) *big.Rat { return new(big.Rat).Mul(a, b) },
		"div": func(a, b *big.Rat) *big.Rat { return new(big.Rat).Quo(a, b) },
	}
	for name, op := range numOps {
		defStrict("spf_"+name+"_numeric", 2, func(args []driver.Value) (driver.Value, error) {
			a, err := asNumeric(args[0])
			if err != nil {
				return nil, err
			}
			b, err := asNumeric(args[1])
			if err != nil {
				return nil, err
			}
			if name == "div" && b.Sign() == 0 {
				return nil, outOfRange("division by zero: %s / %s", a.FloatString(0), "0")
			}
			return storeNumeric(op(a, b))
		})
	}
	defStrict("spf_neg_int64", 1, func(args []driver.Value) (driver.Value, error) {
		a, err := asInt(args[0])
		if err != nil {
			return nil, err
		}
		if a == math.MinInt64 {
			return nil, outOfRange("int64 overflow: -(%d)", a)
		}
		return -a, nil
	})
	defStrict("spf_neg_float64", 1, func(args []driver.Value) (driver.Value, error) {
		a, err := asFloat(args[0])
		return storeFloat(-a), err
	})
	defStrict("spf_neg_numeric", 1, func(args []driver.Value) (driver.Value, error) {
		a, err := asNumeric(args[0])
		if err != nil {
			return nil, err
		}
		return storeNumeric(a.Neg(a))
	})
	defStrict("spf_numeric_key", 1, func(args []driver.Value) (driver.Value, error) {
		r, err := asNumeric(args[0])
		if err != nil {
			return nil, err
		}
		return numericKey(r), nil
	})
	defStrict("spf_float_key", 1, func(args []driver.Value) (driver.Value, error) {
		f, err := asFloat(args[0])
		if err != nil {
			return nil, err
		}
		return floatKey(f), nil
	})
	for op := range floatCmps {
		defStrict("spf_fcmp_"+op, 2, func(args []driver.Value) (driver.Value, error) {
			a, err := asFloat(args[0])
			if err != nil {
				return nil, err
			}
			b, err := asFloat(args[1])
			if err != nil {
				return nil, err
			}
			return boolValue(floatCmps[op](a, b)), nil
		})
	}
	defStrict("spf_struct_eq", 3, func(args []driver.Value) (driver.Value, error) {
		t, err := parseTag(asString(args[2]))
		if err != nil {
			return nil, err
		}
		return structEqual(t, args[0], args[1])
	})
	defStrict("spf_like", 2, func(args []driver.Value) (driver.Value, error) {
		_, isBytes := args[0].([]byte)
		m, err := likeMatcher(asString(args[1]), isBytes)
		if err != nil {
			return nil, err
		}
		return boolValue(m.match(asString(args[0]))), nil
	})
	defStrict("spf_concat_bytes", -1, func(args []driver.Value) (driver.Value, error) {
		out := []byte{}
		for _, a := range args {
			out = append(out, asBytes(a)...)
		}
		return out, nil
	})
	bitOps := map[string]func(a, b uint64) uint64{
		"and": func(a, b uint64) uint64 { return a & b },
		"or":  func(a, b uint64) uint64 { return a | b },
		"xor": func(a, b uint64) uint64 { return a ^ b },
	}
	for name, op := range bitOps {
		defStrict("spf_bit"+name, 2, func(args []driver.Value) (driver.Value, error) {
			if a, ok := args[0].([]byte); ok {
				b := asBytes(args[1])
				if len(a) != len(b) {
					return nil, outOfRange("Bitwise binary operator for BYTES requires equal length of the inputs. Got %d bytes on the left hand side and %d bytes on the right hand side.", len(a), len(b))
				}
				out := make([]byte, len(a))
				for i := range a {
					out[i] = byte(op(uint64(a[i]), uint64(b[i])))
				}
				return out, nil
			}
			a, err := asInt(args[0])
			if err != nil {
				return nil, err
			}
			b, err := asInt(args[1])
			if err != nil {
				return nil, err
			}
			return int64(op(uint64(a), uint64(b))), nil
		})
	}
	defStrict("spf_bitnot", 1, func(args []driver.Value) (driver.Value, error) {
		if a, ok := args[0].([]byte); ok {
			out := make([]byte, len(a))
			for i := range a {
				out[i] = ^a[i]
			}
			return out, nil
		}
		a, err := asInt(args[0])
		return ^a, err
	})
	for _, dir := range []string{"shl", "shr"} {
		defStrict("spf_"+dir, 2, func(args []driver.Value) (driver.Value, error) {
			n, err := asInt(args[1])
			if err != nil {
				return nil, err
			}
			if n < 0 {
				return nil, outOfRange("Bit shift by negative offset %d", n)
			}
			if a, ok := args[0].([]byte); ok {
				return shiftBytes(a, n, dir == "shl"), nil
			}
			a, err := asInt(args[0])
			if err != nil {
				return nil, err
			}
			if n >= 64 {
				return int64(0), nil
			}
			if dir == "shl" {
				return int64(uint64(a) << n), nil
			}
			// GoogleSQL's >> does not extend the sign bit.
			return int64(uint64(a) >> n), nil
		})
	}
}

func shiftBytes(a []byte, n int64, left bool) []byte {
	bitsLen := int64(len(a)) * 8
	out := make([]byte, len(a))
	for i := int64(0); i < bitsLen; i++ {
		src := i + n
		if !left {
			src = i - n
		}
		if src < 0 || src >= bitsLen {
			continue
		}
		// Bit i counts from the most significant bit of the first byte.
		if a[src/8]&(0x80>>(src%8)) != 0 {
			out[i/8] |= 0x80 >> (i % 8)
		}
	}
	return out
}

// floatCmps compare with IEEE semantics: every comparison with NaN is false except !=.
var floatCmps = map[string]func(a, b float64) bool{
	"eq": func(a, b float64) bool { return a == b },
	"ne": func(a, b float64) bool { return a != b },
	"lt": func(a, b float64) bool { return a < b },
	"le": func(a, b float64) bool { return a <= b },
	"gt": func(a, b float64) bool { return a > b },
	"ge": func(a, b float64) bool { return a >= b },
}

var cmpNames = map[string]string{"=": "eq", "!=": "ne", "<>": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}

// numericKey encodes r as text whose byte order is numeric order: a sign digit, then 29 integer
// and 9 fraction digits, nines-complemented for negatives.
func numericKey(r *big.Rat) string {
	q := roundRat(r, 9)
	neg := q.Sign() < 0
	digits := new(big.Int).Abs(q).String()
	if len(digits) < 38 {
		digits = strings.Repeat("0", 38-len(digits)) + digits
	}
	if !neg {
		return "1" + digits
	}
	b := []byte(digits)
	for i := range b {
		b[i] = '9' - (b[i] - '0')
	}
	return "0" + string(b)
}

// floatKey encodes f as a BLOB whose byte order is GoogleSQL order: NaN first, then -Inf up to
// +Inf, with -0 equal to 0.
func floatKey(f float64) []byte {
	if math.IsNaN(f) {
		return []byte{0}
	}
	if f == 0 {
		f = 0 // folds -0 into +0
	}
	u := math.Float64bits(f)
	if u&(1<<63) != 0 {
		u = ^u
	} else {
		u |= 1 << 63
	}
	out := make([]byte, 9)
	out[0] = 1
	binary.BigEndian.PutUint64(out[1:], u)
	return out
}

// OrderKey returns a SQLite expression whose SQLite ordering is the GoogleSQL ordering of x.
func OrderKey(x Arg) (string, error) {
	switch x.Type.Code {
	case spantype.Numeric:
		return sqlCall("spf_numeric_key", x.SQL), nil
	case spantype.Float64, spantype.Float32:
		return sqlCall("spf_float_key", x.SQL), nil
	case spantype.Array, spantype.Struct, spantype.JSON:
		return "", errorf("ORDER BY does not support expressions of type %s", x.Type)
	}
	return x.SQL, nil
}

// Binary translates a binary operator.
func Binary(op string, l, r Arg) (Arg, error) {
	op = strings.ToUpper(strings.TrimSpace(op))
	switch op {
	case "AND", "OR":
		if err := expectBool(op, l, r); err != nil {
			return Arg{}, err
		}
		return Arg{SQL: "(" + l.SQL + " " + op + " " + r.SQL + ")", Type: spantype.TBool}, nil
	case "=", "!=", "<>", "<", "<=", ">", ">=":
		return compare(op, l, r)
	case "IS DISTINCT FROM", "IS NOT DISTINCT FROM":
		return distinct(op == "IS DISTINCT FROM", l, r)
	case "+", "-", "*", "/":
		return arithmetic(op, l, r)
	case "||":
		return concatOp(l, r)
	case "LIKE", "NOT LIKE":
		return like(op == "NOT LIKE", l, r)
	case "&", "|", "^":
		return bitwise(map[string]string{"&": "spf_bitand", "|": "spf_bitor", "^": "spf_bitxor"}[op], op, l, r)
	case "<<", ">>":
		if !isBitType(l.Type) || !isIntLike(r.Type) {
			return Arg{}, noSignature(op, l, r)
		}
		t := l.Type
		if t.Code == spantype.Unknown {
			t = spantype.TInt64
		}
		fn := map[string]string{"<<": "spf_shl", ">>": "spf_shr"}[op]
		return Arg{SQL: sqlCall(fn, l.SQL, r.SQL), Type: t}, nil
	}
	return Arg{}, unimplemented("Unsupported operator %s", op)
}

func expectBool(op string, args ...Arg) error {
	for _, a := range args {
		if a.Type.Code != spantype.Bool && a.Type.Code != spantype.Unknown {
			return errorf("No matching signature for operator %s for argument types: %s", op, typeList(args))
		}
	}
	return nil
}

func typeList(args []Arg) string {
	parts := make([]string, len(args))
	for i, a := range args {
		if a.Type.Code == spantype.Unknown {
			parts[i] = "NULL"
		} else {
			parts[i] = a.Type.String()
		}
	}
	return strings.Join(parts, ", ")
}

func noSignature(op string, args ...Arg) error {
	return errorf("No matching signature for operator %s for argument types: %s", op, typeList(args))
}

func isIntLike(t spantype.Type) bool {
	return t.Code == spantype.Int64 || t.Code == spantype.Unknown
}

func isBitType(t spantype.Type) bool {
	return isIntLike(t) || t.Code == spantype.Bytes
}

// unifyPair coerces two operands to their common type, letting a STRING literal take the type
// of the other side (d = '2020-01-01').
func unifyPair(op string, l, r Arg) (Arg, Arg, spantype.Type, error) {
	st, err := SupertypeArgs(l, r)
	if err != nil {
		return l, r, st, noSignature(op, l, r)
	}
	lc, err := Coerce(l, st)
	if err != nil {
		return l, r, st, err
	}
	rc, err := Coerce(r, st)
	if err != nil {
		return l, r, st, err
	}
	return lc, rc, st, nil
}

func compare(op string, l, r Arg) (Arg, error) {
	l, r, st, err := unifyPair(op, l, r)
	if err != nil {
		return Arg{}, err
	}
	out := Arg{Type: spantype.TBool}
	sqlOp := op
	if op == "!=" {
		sqlOp = "<>"
	}
	switch st.Code {
	case spantype.Array, spantype.JSON:
		return Arg{}, errorf("Equality is not defined for arguments of type %s", st)
	case spantype.Struct:
		if op != "=" && op != "!=" && op != "<>" {
			return Arg{}, errorf("Less than is not defined for arguments of type %s", st)
		}
		if !structComparable(st) {
			return Arg{}, errorf("Equality is not defined for arguments of type %s", st)
		}
		out.SQL = sqlCall("spf_struct_eq", l.SQL, r.SQL, tagSQL(st))
		if op != "=" {
			out.SQL = "(NOT " + out.SQL + ")"
		}
	case spantype.Float64, spantype.Float32:
		out.SQL = sqlCall("spf_fcmp_"+cmpNames[op], l.SQL, r.SQL)
	case spantype.Numeric:
		out.SQL = "(" + sqlCall("spf_numeric_key", l.SQL) + " " + sqlOp + " " + sqlCall("spf_numeric_key", r.SQL) + ")"
	default:
		out.SQL = "(" + l.SQL + " " + sqlOp + " " + r.SQL + ")"
	}
	return out, nil
}

// structComparable reports whether = is defined on every field (no ARRAY or JSON inside).
func structComparable(t spantype.Type) bool {
	for _, f := range t.Fields {
		switch f.Type.Code {
		case spantype.Array, spantype.JSON:
			return false
		case spantype.Struct:
			if !structComparable(f.Type) {
				return false
			}
		}
	}
	return true
}

// structEqual compares two STRUCT values field by field with three-valued logic: FALSE if any
// pair differs, else NULL if any pair involves a NULL, else TRUE.
func structEqual(t spantype.Type, a, b driver.Value) (driver.Value, error) {
	xs, err := decodeArray(t, a)
	if err != nil {
		return nil, err
	}
	ys, err := decodeArray(t, b)
	if err != nil {
		return nil, err
	}
	sawNull := false
	for i := range xs {
		ft := elemType(t, i)
		x, y := xs[i], ys[i]
		if x == nil || y == nil {
			sawNull = true
			continue
		}
		if ft.Code == spantype.Struct {
			eq, err := structEqual(ft, x, y)
			if err != nil {
				return nil, err
			}
			if eq == nil {
				sawNull = true
			} else if eq == int64(0) {
				return int64(0), nil
			}
			continue
		}
		c, err := compareStorage(ft, x, y)
		if err != nil {
			return nil, err
		}
		if c != 0 || isNaNValue(ft, x) {
			return int64(0), nil
		}
	}
	if sawNull {
		return nil, nil
	}
	return int64(1), nil
}

func distinct(isDistinct bool, l, r Arg) (Arg, error) {
	op := "IS NOT DISTINCT FROM"
	sqlOp := "IS"
	if isDistinct {
		op, sqlOp = "IS DISTINCT FROM", "IS NOT"
	}
	l, r, st, err := unifyPair(op, l, r)
	if err != nil {
		return Arg{}, err
	}
	if st.Code == spantype.Array || st.Code == spantype.JSON {
		return Arg{}, errorf("Equality is not defined for arguments of type %s", st)
	}
	ls, rs := l.SQL, r.SQL
	switch st.Code {
	case spantype.Numeric:
		ls, rs = sqlCall("spf_numeric_key", ls), sqlCall("spf_numeric_key", rs)
	case spantype.Float64, spantype.Float32:
		// Keys make NaN equal to NaN and -0 equal to 0, as grouping does.
		ls, rs = sqlCall("spf_float_key", ls), sqlCall("spf_float_key", rs)
	}
	return Arg{SQL: "(" + ls + " " + sqlOp + " " + rs + ")", Type: spantype.TBool}, nil
}

var arithNames = map[string]string{"+": "add", "-": "sub", "*": "mul", "/": "div"}

func arithmetic(op string, l, r Arg) (Arg, error) {
	if !isNumOrNull(l.Type) || !isNumOrNull(r.Type) {
		return Arg{}, noSignature(op, l, r)
	}
	st, _ := Supertype(l.Type, r.Type)
	switch st.Code {
	case spantype.Unknown:
		st = spantype.TInt64
	case spantype.Float32:
		st = spantype.TFloat64
	}
	if op == "/" && st.Code == spantype.Int64 {
		// 5/2 is 2.5: INT64 division is FLOAT64 division.
		st = spantype.TFloat64
	}
	l, _ = Coerce(l, st)
	r, _ = Coerce(r, st)
	fn := "spf_" + arithNames[op] + "_" + strings.ToLower(st.String())
	return Arg{SQL: sqlCall(fn, l.SQL, r.SQL), Type: st}, nil
}

func isNumOrNull(t spantype.Type) bool {
	return t.Code == spantype.Unknown || isNumericCode(t.Code)
}

func concatOp(l, r Arg) (Arg, error) {
	switch {
	case l.Type.Code == spantype.Array || r.Type.Code == spantype.Array:
		return Function(Call{Name: "ARRAY_CONCAT", Args: []Arg{l, r}})
	default:
		return Function(Call{Name: "CONCAT", Args: []Arg{l, r}})
	}
}

func like(negate bool, l, r Arg) (Arg, error) {
	st, err := Supertype(l.Type, r.Type)
	if err != nil || (st.Code != spantype.String && st.Code != spantype.Bytes && st.Code != spantype.Unknown) {
		return Arg{}, noSignature("LIKE", l, r)
	}
	if r.StringLiteral != nil {
		// Report a bad pattern now rather than on the first row.
		if _, err := likeMatcher(*r.StringLiteral, false); err != nil {
			return Arg{}, errorf("%s", strings.TrimPrefix(err.Error(), RuntimeErrorPrefix+"OUT_OF_RANGE: "))
		}
	}
	sql := sqlCall("spf_like", l.SQL, r.SQL)
	if negate {
		sql = "(NOT " + sql + ")"
	}
	return Arg{SQL: sql, Type: spantype.TBool}, nil
}

func bitwise(fn, op string, l, r Arg) (Arg, error) {
	st, err := Supertype(l.Type, r.Type)
	if err != nil || !isBitType(st) {
		return Arg{}, noSignature(op, l, r)
	}
	if st.Code == spantype.Unknown {
		st = spantype.TInt64
	}
	return Arg{SQL: sqlCall(fn, l.SQL, r.SQL), Type: st}, nil
}

// Unary translates - + NOT ~.
func Unary(op string, x Arg) (Arg, error) {
	switch strings.ToUpper(strings.TrimSpace(op)) {
	case "NOT":
		if err := expectBool("NOT", x); err != nil {
			return Arg{}, err
		}
		return Arg{SQL: "(NOT " + x.SQL + ")", Type: spantype.TBool}, nil
	case "+":
		if !isNumOrNull(x.Type) {
			return Arg{}, noSignature("+", x)
		}
		return x, nil
	case "-":
		t := x.Type
		switch t.Code {
		case spantype.Unknown, spantype.Int64:
			return Arg{SQL: sqlCall("spf_neg_int64", x.SQL), Type: spantype.TInt64}, nil
		case spantype.Float64, spantype.Float32:
			return Arg{SQL: sqlCall("spf_neg_float64", x.SQL), Type: t}, nil
		case spantype.Numeric:
			return Arg{SQL: sqlCall("spf_neg_numeric", x.SQL), Type: t}, nil
		}
		return Arg{}, noSignature("-", x)
	case "~":
		if !isBitType(x.Type) {
			return Arg{}, noSignature("~", x)
		}
		t := x.Type
		if t.Code == spantype.Unknown {
			t = spantype.TInt64
		}
		return Arg{SQL: sqlCall("spf_bitnot", x.SQL), Type: t}, nil
	}
	return Arg{}, unimplemented("Unsupported unary operator %s", op)
}

// LIKE matching. A pattern compiles to tokens over units: runes for STRING, bytes for BYTES.

type likeToken struct {
	kind byte // 'l' literal, '_' any one, '%' any run
	unit rune
}

type likePattern struct {
	tokens []likeToken
	bytes  bool
}

var likeCache memo[*likePattern] // by "s:" or "b:" + pattern

func likeMatcher(pattern string, isBytes bool) (*likePattern, error) {
	key := "s:" + pattern
	if isBytes {
		key = "b:" + pattern
	}
	if p, ok := likeCache.Load(key); ok {
		return p, nil
	}
	units := toUnits(pattern, isBytes)
	p := &likePattern{bytes: isBytes}
	for i := 0; i < len(units); i++ {
		switch u := units[i]; u {
		case '%':
			if n := len(p.tokens); n == 0 || p.tokens[n-1].kind != '%' {
				p.tokens = append(p.tokens, likeToken{kind: '%'})
			}
		case '_':
			p.tokens = append(p.tokens, likeToken{kind: '_'})
		case '\\':
			if i+1 == len(units) {
				return nil, outOfRange("LIKE pattern ends with a backslash")
			}
			i++
			p.tokens = append(p.tokens, likeToken{kind: 'l', unit: units[i]})
		default:
			p.tokens = append(p.tokens, likeToken{kind: 'l', unit: u})
		}
	}
	likeCache.Store(key, p)
	return p, nil
}

func toUnits(s string, isBytes bool) []rune {
	if isBytes {
		out := make([]rune, len(s))
		for i := 0; i < len(s); i++ {
			out[i] = rune(s[i])
		}
		return out
	}
	out := make([]rune, 0, utf8.RuneCountInString(s))
	for _, r := range s {
		out = append(out, r)
	}
	return out
}

// match runs the classic two-pointer wildcard match with backtracking to the last %.
func (p *likePattern) match(s string) bool {
	units := toUnits(s, p.bytes)
	ti, si := 0, 0
	star, mark := -1, 0
	for si < len(units) {
		if ti < len(p.tokens) {
			switch t := p.tokens[ti]; t.kind {
			case '%':
				star, mark = ti, si
				ti++
				continue
			case '_':
				ti++
				si++
				continue
			default:
				if t.unit == units[si] {
					ti++
					si++
					continue
				}
			}
		}
		if star < 0 {
			return false
		}
		ti = star + 1
		mark++
		si = mark
	}
	for ti < len(p.tokens) && p.tokens[ti].kind == '%' {
		ti++
	}
	return ti == len(p.tokens)
}
