package sqlfuncs

import (
	"bytes"
	"database/sql/driver"
	"math"
	"strings"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

// decodeArray splits a storage ARRAY of type t into element storage values.
func decodeArray(t spantype.Type, v driver.Value) ([]any, error) {
	elems, err := spantype.DecodeArray(t, asString(v))
	if err != nil {
		return nil, internalErr("%v", err)
	}
	return elems, nil
}

// encodeArray builds a storage ARRAY of element type elem.
func encodeArray(elem spantype.Type, elems []any) string {
	if elems == nil {
		elems = []any{}
	}
	return spantype.EncodeArray(spantype.ArrayOf(elem), elems)
}

// compareStorage orders two non-NULL storage values of orderable type t as GoogleSQL does
// (NaN before every other FLOAT64). It returns -1, 0 or 1.
func compareStorage(t spantype.Type, a, b driver.Value) (int, error) {
	switch t.Code {
	case spantype.Int64, spantype.Bool:
		x, err := asInt(a)
		if err != nil {
			return 0, err
		}
		y, err := asInt(b)
		if err != nil {
			return 0, err
		}
		return cmp3(x < y, x > y), nil
	case spantype.Float64, spantype.Float32:
		x, err := asFloat(a)
		if err != nil {
			return 0, err
		}
		y, err := asFloat(b)
		if err != nil {
			return 0, err
		}
		return bytes.Compare(floatKey(x), floatKey(y)), nil
	case spantype.Numeric:
		x, err := asNumeric(a)
		if err != nil {
			return 0, err
		}
		y, err := asNumeric(b)
		if err != nil {
			return 0, err
		}
		return x.Cmp(y), nil
	case spantype.Bytes:
		return bytes.Compare(asBytes(a), asBytes(b)), nil
	case spantype.Array, spantype.Struct:
		return compareComposite(t, a, b)
	}
	return strings.Compare(asString(a), asString(b)), nil
}

// compareComposite orders ARRAY and STRUCT values element by element (NULL first), which
// GoogleSQL uses for DISTINCT and GROUP BY but not for <.
func compareComposite(t spantype.Type, a, b driver.Value) (int, error) {
	xs, err := decodeArray(t, a)
	if err != nil {
		return 0, err
	}
	ys, err := decodeArray(t, b)
	if err != nil {
		return 0, err
	}
	for i := 0; i < len(xs) && i < len(ys); i++ {
		et := elemType(t, i)
		x, y := xs[i], ys[i]
		switch {
		case x == nil && y == nil:
			continue
		case x == nil:
			return -1, nil
		case y == nil:
			return 1, nil
		}
		c, err := compareStorage(et, x, y)
		if err != nil || c != 0 {
			return c, err
		}
	}
	return cmp3(len(xs) < len(ys), len(xs) > len(ys)), nil
}

func elemType(t spantype.Type, i int) spantype.Type {
	if t.Code == spantype.Array {
		return *t.Elem
	}
	if i < len(t.Fields) {
		return t.Fields[i].Type
	}
	return spantype.TUnknown
}

func cmp3(less, greater bool) int {
	switch {
	case less:
		return -1
	case greater:
		return 1
	}
	return 0
}

func isNaNValue(t spantype.Type, v driver.Value) bool {
	if t.Code != spantype.Float64 && t.Code != spantype.Float32 {
		return false
	}
	f, err := asFloat(v)
	return err == nil && math.IsNaN(f)
}

func init() {
	// GREATEST/LEAST: NULL if any argument is NULL; NaN if any is NaN.
	for _, name := range []string{"GREATEST", "LEAST"} {
		goName := "spf_" + strings.ToLower(name)
		scalars[name] = func(c Call) (Arg, error) {
			if len(c.Args) == 0 {
				return Arg{}, arity(c, "at least 1")
			}
			vals, t, err := unifyArgs(c, c.Args)
			if err != nil {
				return Arg{}, err
			}
			if t.Code != spantype.Unknown && !t.Orderable() {
				return Arg{}, errorf("%s does not support arguments of type %s", name, t)
			}
			return Arg{SQL: sqlCall(goName, append([]string{tagSQL(t)}, argSQL(vals)...)...), Type: t}, nil
		}
		want := 1
		if name == "LEAST" {
			want = -1
		}
		defLax(goName, -1, func(a []driver.Value) (driver.Value, error) {
			t, err := parseTag(asString(a[0]))
			if err != nil {
				return nil, err
			}
			var best driver.Value
			for _, v := range a[1:] {
				if v == nil {
					return nil, nil
				}
				if isNaNValue(t, v) {
					return "NaN", nil
				}
			}
			for _, v := range a[1:] {
				if best == nil {
					best = v
					continue
				}
				c, err := compareStorage(t, v, best)
				if err != nil {
					return nil, err
				}
				if c == want {
					best = v
				}
			}
			return best, nil
		})
	}
}
