package sqlfuncs

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

func errorf(format string, args ...any) error {
	return &Error{Code: "INVALID_ARGUMENT", Msg: fmt.Sprintf(format, args...)}
}

func unimplemented(format string, args ...any) error {
	return &Error{Code: "UNIMPLEMENTED", Msg: fmt.Sprintf(format, args...)}
}

// sqlString quotes s as a SQLite string literal.
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// sqlCall renders fn(args...).
func sqlCall(fn string, args ...string) string {
	return fn + "(" + strings.Join(args, ", ") + ")"
}

// argSQL returns the SQL of each argument.
func argSQL(args []Arg) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a.SQL
	}
	return out
}

// typeTag renders t for Go functions that need a type at run time. Struct field names are left
// out: storage form is positional, so no Go function needs them.
func typeTag(t spantype.Type) string {
	switch t.Code {
	case spantype.Array:
		return "ARRAY<" + typeTag(*t.Elem) + ">"
	case spantype.Struct:
		parts := make([]string, len(t.Fields))
		for i, f := range t.Fields {
			parts[i] = typeTag(f.Type)
		}
		return "STRUCT<" + strings.Join(parts, ",") + ">"
	}
	return t.String()
}

// tagSQL is typeTag as a SQL string literal.
func tagSQL(t spantype.Type) string { return sqlString(typeTag(t)) }

var tagCache memo[spantype.Type]

// parseTag is the inverse of typeTag.
func parseTag(s string) (spantype.Type, error) {
	if t, ok := tagCache.Load(s); ok {
		return t, nil
	}
	t, rest, err := parseTagPrefix(s)
	if err != nil || rest != "" {
		return spantype.TUnknown, internalErr("bad type tag %q", s)
	}
	tagCache.Store(s, t)
	return t, nil
}

func parseTagPrefix(s string) (spantype.Type, string, error) {
	switch {
	case strings.HasPrefix(s, "ARRAY<"):
		e, rest, err := parseTagPrefix(s[len("ARRAY<"):])
		if err != nil || !strings.HasPrefix(rest, ">") {
			return spantype.TUnknown, "", fmt.Errorf("bad tag")
		}
		return spantype.ArrayOf(e), rest[1:], nil
	case strings.HasPrefix(s, "STRUCT<"):
		rest := s[len("STRUCT<"):]
		var fields []spantype.Field
		for !strings.HasPrefix(rest, ">") {
			if len(fields) > 0 {
				if !strings.HasPrefix(rest, ",") {
					return spantype.TUnknown, "", fmt.Errorf("bad tag")
				}
				rest = rest[1:]
			}
			ft, r, err := parseTagPrefix(rest)
			if err != nil {
				return spantype.TUnknown, "", err
			}
			fields = append(fields, spantype.Field{Type: ft})
			rest = r
		}
		return spantype.StructOf(fields...), rest[1:], nil
	}
	end := strings.IndexAny(s, ",>")
	if end < 0 {
		end = len(s)
	}
	name := s[:end]
	if name == "UNKNOWN" {
		return spantype.TUnknown, s[end:], nil
	}
	t, ok := spantype.ParseScalarName(name)
	if !ok {
		return spantype.TUnknown, "", fmt.Errorf("bad tag")
	}
	return t, s[end:], nil
}

func isNumericCode(c spantype.Code) bool {
	switch c {
	case spantype.Int64, spantype.Float64, spantype.Float32, spantype.Numeric:
		return true
	}
	return false
}

func isFloat(t spantype.Type) bool {
	return t.Code == spantype.Float64 || t.Code == spantype.Float32
}

// numericSupertype is the common type of two numeric types: INT64 < NUMERIC < FLOAT64, and
// FLOAT32 joins INT64/NUMERIC as FLOAT64.
func numericSupertype(a, b spantype.Type) spantype.Type {
	if a.Code == b.Code {
		return a
	}
	if a.Code == spantype.Float64 || b.Code == spantype.Float64 || isFloat(a) || isFloat(b) {
		return spantype.TFloat64
	}
	return spantype.TNumeric
}

// Supertype returns the common supertype of the given types (Unknown entries are ignored), or
// an error when there is none. All Unknown yields Unknown.
func Supertype(ts ...spantype.Type) (spantype.Type, error) {
	cur := spantype.TUnknown
	for _, t := range ts {
		next, ok := supertype2(cur, t)
		if !ok {
			return spantype.TUnknown, errorf("No matching signature: types %s and %s have no common supertype", cur, t)
		}
		cur = next
	}
	return cur, nil
}

func supertype2(a, b spantype.Type) (spantype.Type, bool) {
	switch {
	case a.Code == spantype.Unknown:
		return stripLength(b), true
	case b.Code == spantype.Unknown:
		return stripLength(a), true
	case isNumericCode(a.Code) && isNumericCode(b.Code):
		return numericSupertype(a, b), true
	case a.Code == spantype.Array && b.Code == spantype.Array:
		// Arrays only unify when their element types are equal (or one is still unknown, as
		// for the empty array literal []); GoogleSQL does not coerce ARRAY<INT64> to
		// ARRAY<FLOAT64>.
		ae, be := stripLength(*a.Elem), stripLength(*b.Elem)
		switch {
		case ae.Code == spantype.Unknown:
			return spantype.ArrayOf(be), true
		case be.Code == spantype.Unknown, ae.Equal(be):
			return spantype.ArrayOf(ae), true
		}
		return spantype.TUnknown, false
	case a.Code == spantype.Struct && b.Code == spantype.Struct:
		if len(a.Fields) != len(b.Fields) {
			return spantype.TUnknown, false
		}
		fields := make([]spantype.Field, len(a.Fields))
		for i := range a.Fields {
			ft, ok := supertype2(a.Fields[i].Type, b.Fields[i].Type)
			if !ok {
				return spantype.TUnknown, false
			}
			name := a.Fields[i].Name
			if name == "" {
				name = b.Fields[i].Name
			}
			fields[i] = spantype.Field{Name: name, Type: ft}
		}
		return spantype.StructOf(fields...), true
	case a.Code == b.Code:
		return stripLength(a), true
	}
	return spantype.TUnknown, false
}

func stripLength(t spantype.Type) spantype.Type {
	t.Length = 0
	return t
}

// SupertypeArgs is Supertype for arguments: it also lets a STRING literal join DATE, TIMESTAMP,
// NUMERIC or JSON, as GoogleSQL coerces such literals (CASE WHEN c THEN d ELSE '2020-01-01' END).
func SupertypeArgs(args ...Arg) (spantype.Type, error) {
	var ts []spantype.Type
	for _, a := range args {
		if a.StringLiteral == nil {
			ts = append(ts, a.Type)
		}
	}
	st, err := Supertype(ts...)
	if err != nil {
		return st, err
	}
	if len(ts) == len(args) {
		return st, nil
	}
	switch st.Code {
	case spantype.Unknown:
		return spantype.TString, nil
	case spantype.String, spantype.Date, spantype.Timestamp, spantype.Numeric, spantype.JSON:
		return st, nil
	}
	return Supertype(st, spantype.TString)
}

// Coerce converts x implicitly to type to (as for INSERT values, UNION columns, IN lists, CASE
// branches), or fails with INVALID_ARGUMENT when GoogleSQL would not coerce.
func Coerce(x Arg, to spantype.Type) (Arg, error) {
	out, ok, err := coerce(x, to)
	if err != nil {
		return Arg{}, err
	}
	if !ok {
		return Arg{}, errorf("Cannot coerce %s to %s", argTypeName(x), to)
	}
	return out, nil
}

func argTypeName(x Arg) string {
	if x.StringLiteral != nil {
		return "STRING literal"
	}
	return x.Type.String()
}

// coerce reports ok=false when no implicit coercion exists; err is set when one exists but a
// literal cannot be converted (an invalid DATE literal).
func coerce(x Arg, to spantype.Type) (Arg, bool, error) {
	to = stripLength(to)
	from := x.Type
	retyped := func(sql string) (Arg, bool, error) {
		return Arg{SQL: sql, Type: to, IsNullLiteral: x.IsNullLiteral}, true, nil
	}
	switch {
	case to.Code == spantype.Unknown:
		return x, true, nil
	case from.Code == spantype.Unknown:
		return retyped(x.SQL)
	case from.Equal(to):
		out := x
		out.Type = to
		return out, true, nil
	case x.StringLiteral != nil:
		switch to.Code {
		case spantype.JSON:
			j, err := spantype.NormalizeJSON(*x.StringLiteral)
			if err != nil {
				return Arg{}, false, errorf("Could not cast literal %q to type JSON", *x.StringLiteral)
			}
			return retyped(sqlString(j))
		case spantype.Date, spantype.Timestamp, spantype.Numeric, spantype.UUID:
			v, err := castValue(*x.StringLiteral, spantype.TString, to)
			if err != nil {
				return Arg{}, false, errorf("Could not cast literal %q to type %s", *x.StringLiteral, to)
			}
			return retyped(storageLiteral(v))
		}
	case from.Code == spantype.Float64 && to.Code == spantype.Numeric && isFloatLiteral(x.SQL):
		// GoogleSQL coerces a FLOAT64 *literal* to NUMERIC (INSERT ... VALUES (1.5) into a
		// NUMERIC column); the literal's text is exact, so convert it now.
		r, ok := new(big.Rat).SetString(x.SQL)
		if !ok {
			return Arg{}, false, nil
		}
		v, err := spantype.FormatNumeric(r)
		if err != nil {
			return Arg{}, false, errorf("Could not cast literal %s to type NUMERIC", x.SQL)
		}
		return retyped(sqlString(v))
	case isNumericCode(from.Code) && isNumericCode(to.Code):
		// Widening only: INT64 → NUMERIC/FLOAT64, NUMERIC → FLOAT64, FLOAT32 → FLOAT64.
		if numericSupertype(from, to).Code == to.Code {
			return retyped(castSQL(x.SQL, from, to, false))
		}
	case from.Code == spantype.Array && to.Code == spantype.Array:
		fe, te := *from.Elem, stripLength(*to.Elem)
		switch {
		case fe.Code == spantype.Unknown || fe.Equal(te):
			return retyped(x.SQL)
		case isNumericCode(fe.Code) && isNumericCode(te.Code) && numericSupertype(fe, te).Code == te.Code:
			// Assignment of an array literal [1, 2] to ARRAY<FLOAT64> widens element-wise.
			return retyped(castSQL(x.SQL, from, to, false))
		}
	case from.Code == spantype.Struct && to.Code == spantype.Struct:
		if len(from.Fields) != len(to.Fields) {
			return Arg{}, false, nil
		}
		needCast := false
		for i := range from.Fields {
			ft, tt := from.Fields[i].Type, to.Fields[i].Type
			if ft.Equal(tt) || ft.Code == spantype.Unknown {
				continue
			}
			if !isNumericCode(ft.Code) || !isNumericCode(tt.Code) || numericSupertype(ft, tt).Code != tt.Code {
				return Arg{}, false, nil
			}
			needCast = true
		}
		if needCast {
			return retyped(castSQL(x.SQL, from, to, false))
		}
		return retyped(x.SQL)
	}
	return Arg{}, false, nil
}

// isFloatLiteral reports whether sql is a bare floating point literal (as the translator
// renders FLOAT64 literals), as opposed to an expression of type FLOAT64.
func isFloatLiteral(sql string) bool {
	if _, err := strconv.ParseFloat(sql, 64); err != nil {
		return false
	}
	return decimalRE.MatchString(sql)
}

// storageLiteral renders a storage value as a SQLite literal.
func storageLiteral(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case int64:
		return fmt.Sprint(x)
	case float64:
		return floatLiteral(x)
	case string:
		return sqlString(x)
	case []byte:
		return fmt.Sprintf("X'%X'", x)
	}
	return sqlString(fmt.Sprint(v))
}
