package sqlfuncs

import (
	"bytes"
	"database/sql/driver"
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

// maxGeneratedArray bounds GENERATE_ARRAY and friends so a typo cannot exhaust memory.
const maxGeneratedArray = 16_000_000

func rawElems(v driver.Value) ([]json.RawMessage, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(asString(v)), &raw); err != nil {
		return nil, internalErr("corrupt ARRAY value: %v", err)
	}
	return raw, nil
}

// elemFromRaw converts one JSON element of type t to storage form.
func elemFromRaw(t spantype.Type, raw json.RawMessage) (driver.Value, error) {
	if string(raw) == "null" {
		return nil, nil
	}
	if t.Code == spantype.Array || t.Code == spantype.Struct {
		return string(raw), nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var j any
	if err := dec.Decode(&j); err != nil {
		return nil, internalErr("corrupt element: %v", err)
	}
	v, err := spantype.JSONElemToStorage(t, j)
	if err != nil {
		return nil, internalErr("%v", err)
	}
	return v, nil
}

func rawArray(raw []json.RawMessage) string {
	if raw == nil {
		raw = []json.RawMessage{}
	}
	b, _ := json.Marshal(raw)
	return string(b)
}

// arrayArg checks that a is an array (or NULL) and returns its type.
func arrayArg(c Call, a Arg) (spantype.Type, error) {
	switch a.Type.Code {
	case spantype.Array:
		return a.Type, nil
	case spantype.Unknown:
		return spantype.ArrayOf(spantype.TUnknown), nil
	}
	return spantype.Type{}, errorf("No matching signature for function %s for argument types: %s", c.Name, typeList(c.Args))
}

// arrayFunc declares a function whose first argument is any ARRAY; body renders the call.
func arrayFunc(name string, nargs []int, body func(c Call, at spantype.Type) (Arg, error)) {
	scalars[name] = func(c Call) (Arg, error) {
		ok := false
		for _, n := range nargs {
			ok = ok || len(c.Args) == n
		}
		if !ok {
			return Arg{}, errorf("Number of arguments does not match for function %s", name)
		}
		at, err := arrayArg(c, c.Args[0])
		if err != nil {
			return Arg{}, err
		}
		return body(c, at)
	}
}

func init() {
	arrayFunc("ARRAY_LENGTH", []int{1}, func(c Call, _ spantype.Type) (Arg, error) {
		return Arg{SQL: sqlCall("json_array_length", c.Args[0].SQL), Type: tI}, nil
	})
	scalars["ARRAY_CONCAT"] = func(c Call) (Arg, error) {
		if len(c.Args) == 0 {
			return Arg{}, arity(c, "at least 1")
		}
		for _, a := range c.Args {
			if _, err := arrayArg(c, a); err != nil {
				return Arg{}, err
			}
		}
		vals, t, err := unifyArgs(c, c.Args)
		if err != nil {
			return Arg{}, err
		}
		if t.Code == spantype.Unknown {
			t = spantype.ArrayOf(spantype.TUnknown)
		}
		return Arg{SQL: sqlCall("spf_array_concat", argSQL(vals)...), Type: t}, nil
	}
	defStrict("spf_array_concat", -1, func(a []driver.Value) (driver.Value, error) {
		var out []json.RawMessage
		for _, v := range a {
			raw, err := rawElems(v)
			if err != nil {
				return nil, err
			}
			out = append(out, raw...)
		}
		return rawArray(out), nil
	})

	arrayFunc("ARRAY_TO_STRING", []int{2, 3}, func(c Call, at spantype.Type) (Arg, error) {
		et := *at.Elem
		if et.Code == spantype.Unknown {
			et = tS
		}
		if et.Code != spantype.String && et.Code != spantype.Bytes {
			return Arg{}, errorf("ARRAY_TO_STRING requires an ARRAY<STRING> or ARRAY<BYTES>, got %s", at)
		}
		args := []string{c.Args[0].SQL, tagSQL(et)}
		for _, a := range c.Args[1:] {
			x, err := Coerce(a, et)
			if err != nil {
				return Arg{}, err
			}
			args = append(args, x.SQL)
		}
		return Arg{SQL: sqlCall("spf_array_to_string", args...), Type: et}, nil
	})
	defStrict("spf_array_to_string", -1, func(a []driver.Value) (driver.Value, error) {
		et, err := parseTag(asString(a[1]))
		if err != nil {
			return nil, err
		}
		elems, err := decodeArray(spantype.ArrayOf(et), a[0])
		if err != nil {
			return nil, err
		}
		var parts []string
		for _, e := range elems {
			switch {
			case e != nil:
				parts = append(parts, asString(e))
			case len(a) > 3:
				parts = append(parts, asString(a[3]))
			}
		}
		s := strings.Join(parts, asString(a[2]))
		if et.Code == spantype.Bytes {
			return []byte(s), nil
		}
		return s, nil
	})

	arrayFunc("ARRAY_REVERSE", []int{1}, func(c Call, at spantype.Type) (Arg, error) {
		return Arg{SQL: sqlCall("spf_array_reverse", c.Args[0].SQL), Type: at}, nil
	})
	defStrict("spf_array_reverse", 1, func(a []driver.Value) (driver.Value, error) {
		raw, err := rawElems(a[0])
		if err != nil {
			return nil, err
		}
		for i, j := 0, len(raw)-1; i < j; i, j = i+1, j-1 {
			raw[i], raw[j] = raw[j], raw[i]
		}
		return rawArray(raw), nil
	})

	arrayFunc("ARRAY_INCLUDES", []int{2}, func(c Call, at spantype.Type) (Arg, error) {
		x, err := Coerce(c.Args[1], *at.Elem)
		if err != nil {
			return Arg{}, err
		}
		if at.Elem.Code == spantype.Array || at.Elem.Code == spantype.JSON {
			return Arg{}, errorf("ARRAY_INCLUDES does not support elements of type %s", at.Elem)
		}
		return Arg{SQL: sqlCall("spf_array_includes", c.Args[0].SQL, x.SQL, tagSQL(at)), Type: tB}, nil
	})
	defStrict("spf_array_includes", 3, func(a []driver.Value) (driver.Value, error) {
		at, elems, err := typedElems(a[2], a[0])
		if err != nil {
			return nil, err
		}
		for _, e := range elems {
			if e == nil {
				continue
			}
			c, err := compareStorage(*at.Elem, e, a[1])
			if err != nil {
				return nil, err
			}
			if c == 0 && !isNaNValue(*at.Elem, e) {
				return int64(1), nil
			}
		}
		return int64(0), nil
	})

	// ARRAY_INCLUDES_ANY/ALL(arr, search_values): NULL when either array is NULL; NULL
	// elements never match.
	for _, name := range []string{"ARRAY_INCLUDES_ANY", "ARRAY_INCLUDES_ALL"} {
		goName := "spf_" + strings.ToLower(name)
		arrayFunc(name, []int{2}, func(c Call, at spantype.Type) (Arg, error) {
			vals, t, err := unifyArgs(c, c.Args)
			if err != nil {
				return Arg{}, err
			}
			if t.Code == spantype.Unknown || t.Elem.Code == spantype.Unknown {
				t = spantype.ArrayOf(tI)
			}
			if t.Elem.Code == spantype.Array || t.Elem.Code == spantype.JSON {
				return Arg{}, errorf("%s does not support elements of type %s", name, t.Elem)
			}
			return Arg{SQL: sqlCall(goName, vals[0].SQL, vals[1].SQL, tagSQL(t)), Type: tB}, nil
		})
		all := name == "ARRAY_INCLUDES_ALL"
		defStrict(goName, 3, func(a []driver.Value) (driver.Value, error) {
			at, elems, err := typedElems(a[2], a[0])
			if err != nil {
				return nil, err
			}
			search, err := decodeArray(at, a[1])
			if err != nil {
				return nil, err
			}
			present := map[string]bool{}
			for _, e := range elems {
				if e != nil && !isNaNValue(*at.Elem, e) {
					present[distinctKey(*at.Elem, e)] = true
				}
			}
			for _, v := range search {
				found := v != nil && present[distinctKey(*at.Elem, v)]
				if found && !all {
					return int64(1), nil
				}
				if !found && all {
					return int64(0), nil
				}
			}
			return boolValue(all), nil
		})
	}

	for _, name := range []string{"ARRAY_MIN", "ARRAY_MAX"} {
		goName := "spf_" + strings.ToLower(name)
		arrayFunc(name, []int{1}, func(c Call, at spantype.Type) (Arg, error) {
			if !at.Elem.Orderable() {
				return Arg{}, errorf("%s does not support elements of type %s", name, at.Elem)
			}
			return Arg{SQL: sqlCall(goName, c.Args[0].SQL, tagSQL(at)), Type: *at.Elem}, nil
		})
		want := 1
		if name == "ARRAY_MIN" {
			want = -1
		}
		defStrict(goName, 2, func(a []driver.Value) (driver.Value, error) {
			at, elems, err := typedElems(a[1], a[0])
			if err != nil {
				return nil, err
			}
			var best driver.Value
			for _, e := range elems {
				switch {
				case e == nil:
					continue
				case isNaNValue(*at.Elem, e):
					return "NaN", nil
				case best == nil:
					best = e
					continue
				}
				c, err := compareStorage(*at.Elem, e, best)
				if err != nil {
					return nil, err
				}
				if c == want {
					best = e
				}
			}
			return best, nil
		})
	}

	arrayFunc("ARRAY_IS_DISTINCT", []int{1}, func(c Call, at spantype.Type) (Arg, error) {
		return Arg{SQL: sqlCall("spf_array_is_distinct", c.Args[0].SQL, tagSQL(at)), Type: tB}, nil
	})
	defStrict("spf_array_is_distinct", 2, func(a []driver.Value) (driver.Value, error) {
		at, elems, err := typedElems(a[1], a[0])
		if err != nil {
			return nil, err
		}
		seen := map[string]bool{}
		for _, e := range elems {
			k := distinctKey(*at.Elem, e)
			if seen[k] {
				return int64(0), nil
			}
			seen[k] = true
		}
		return int64(1), nil
	})

	for _, name := range []string{"ARRAY_FIRST", "ARRAY_LAST"} {
		arrayFunc(name, []int{1}, func(c Call, at spantype.Type) (Arg, error) {
			idx := "0"
			if name == "ARRAY_LAST" {
				idx = "-1"
			}
			return Arg{SQL: sqlCall("spf_array_at", c.Args[0].SQL, idx, tagSQL(at), "'END'"), Type: *at.Elem}, nil
		})
	}
	arrayFunc("ARRAY_SLICE", []int{3}, func(c Call, at spantype.Type) (Arg, error) {
		args := []string{c.Args[0].SQL}
		for _, a := range c.Args[1:] {
			x, err := Coerce(a, tI)
			if err != nil {
				return Arg{}, err
			}
			args = append(args, x.SQL)
		}
		return Arg{SQL: sqlCall("spf_array_slice", args...), Type: at}, nil
	})
	defStrict("spf_array_slice", 3, func(a []driver.Value) (driver.Value, error) {
		raw, err := rawElems(a[0])
		if err != nil {
			return nil, err
		}
		n := int64(len(raw))
		norm := func(v driver.Value) (int64, error) {
			i, err := asInt(v)
			if i < 0 {
				i += n
			}
			return i, err
		}
		from, err := norm(a[1])
		if err != nil {
			return nil, err
		}
		to, err := norm(a[2])
		if err != nil {
			return nil, err
		}
		from, to = max(from, 0), min(to, n-1)
		if from > to {
			return rawArray(nil), nil
		}
		return rawArray(raw[from : to+1]), nil
	})
	// spf_array_at(arr, index, type, mode): mode is OFFSET, ORDINAL, SAFE_OFFSET, SAFE_ORDINAL,
	// or END (ARRAY_FIRST/LAST: index 0 or -1, error on an empty array).
	defLax("spf_array_at", 4, func(a []driver.Value) (driver.Value, error) {
		if a[0] == nil || a[1] == nil {
			return nil, nil
		}
		at, err := parseTag(asString(a[2]))
		if err != nil {
			return nil, err
		}
		raw, err := rawElems(a[0])
		if err != nil {
			return nil, err
		}
		i, err := asInt(a[1])
		if err != nil {
			return nil, err
		}
		mode := asString(a[3])
		pos := i
		switch mode {
		case "ORDINAL", "SAFE_ORDINAL":
			pos = i - 1
		case "END":
			if len(raw) == 0 {
				return nil, outOfRange("The input array to ARRAY_FIRST/ARRAY_LAST must not be empty")
			}
			if i < 0 {
				pos = int64(len(raw)) - 1
			}
		}
		if pos < 0 || pos >= int64(len(raw)) {
			if strings.HasPrefix(mode, "SAFE_") {
				return nil, nil
			}
			return nil, outOfRange("Array index %d is out of bounds", i)
		}
		return elemFromRaw(elemType(at, int(pos)), raw[pos])
	})

	scalars["GENERATE_ARRAY"] = func(c Call) (Arg, error) {
		if len(c.Args) != 2 && len(c.Args) != 3 {
			return Arg{}, arity(c, "2 or 3")
		}
		vals, t, err := unifyArgs(c, c.Args)
		if err != nil {
			return Arg{}, err
		}
		switch t.Code {
		case spantype.Unknown:
			t = tI
		case spantype.Int64, spantype.Numeric, spantype.Float64:
		default:
			return Arg{}, errorf("GENERATE_ARRAY requires numeric arguments, got %s", typeList(c.Args))
		}
		step := "1"
		if len(vals) == 3 {
			step = vals[2].SQL
		}
		return Arg{SQL: sqlCall("spf_generate_array", vals[0].SQL, vals[1].SQL, step, tagSQL(t)), Type: spantype.ArrayOf(t)}, nil
	}
	defStrict("spf_generate_array", 4, func(a []driver.Value) (driver.Value, error) {
		t, err := parseTag(asString(a[3]))
		if err != nil {
			return nil, err
		}
		return generateArray(t, a[0], a[1], a[2])
	})

	scalars["GENERATE_DATE_ARRAY"] = func(c Call) (Arg, error) {
		part := "DAY"
		step := Arg{SQL: "1", Type: tI}
		switch len(c.Args) {
		case 2:
		case 4:
			p, err := partArg(c, c.Args[3], dateAddParts...)
			if err != nil {
				return Arg{}, err
			}
			part, step = p, c.Args[2]
		default:
			return Arg{}, arity(c, "2 or 4")
		}
		return resolve(Call{Name: c.Name, Args: []Arg{c.Args[0], c.Args[1], step}}, []overload{
			sig(spantype.ArrayOf(tD), func(a []Arg) string {
				return sqlCall("spf_generate_date_array", a[0].SQL, a[1].SQL, a[2].SQL, sqlString(part))
			}, tD, tD, tI)})
	}
	defStrict("spf_generate_date_array", 4, func(a []driver.Value) (driver.Value, error) {
		start, err := asDate(a[0])
		if err != nil {
			return nil, err
		}
		end, err := asDate(a[1])
		if err != nil {
			return nil, err
		}
		step, err := asInt(a[2])
		if err != nil {
			return nil, err
		}
		if step == 0 {
			return nil, outOfRange("Sequence step cannot be 0.")
		}
		// Any step beyond the span of valid dates reaches past the end at once; clamping it
		// keeps i*step from overflowing.
		const span = 4_000_000
		step = max(min(step, span), -span)
		var out []any
		for i := int64(0); ; i++ {
			d := addDate(start, int(i*step), asString(a[3]))
			if (step > 0 && d.After(end)) || (step < 0 && d.Before(end)) || d.Year() > 9999 || d.Year() < 1 {
				break
			}
			if len(out) >= maxGeneratedArray {
				return nil, outOfRange("GENERATE_DATE_ARRAY would produce too many elements")
			}
			out = append(out, spantype.FormatDate(d))
		}
		return encodeArray(tD, out), nil
	})
}

func typedElems(tag, arr driver.Value) (spantype.Type, []any, error) {
	at, err := parseTag(asString(tag))
	if err != nil {
		return at, nil, err
	}
	elems, err := decodeArray(at, arr)
	return at, elems, err
}

// distinctKey maps a value to a string equal for values GoogleSQL treats as not distinct.
func distinctKey(t spantype.Type, v driver.Value) string {
	if v == nil {
		return "\x00null"
	}
	switch t.Code {
	case spantype.Float64, spantype.Float32:
		f, _ := asFloat(v)
		return string(floatKey(f))
	case spantype.Numeric:
		r, err := asNumeric(v)
		if err == nil {
			return numericKey(r)
		}
	case spantype.Int64, spantype.Bool:
		n, _ := asInt(v)
		return "\x02" + strconv.FormatInt(n, 10)
	}
	return "\x01" + asString(v)
}

func generateArray(t spantype.Type, startV, endV, stepV driver.Value) (driver.Value, error) {
	var out []any
	tooMany := func() error { return outOfRange("GENERATE_ARRAY would produce too many elements") }
	switch t.Code {
	case spantype.Int64:
		start, _ := asInt(startV)
		end, _ := asInt(endV)
		step, err := asInt(stepV)
		if err != nil {
			return nil, err
		}
		if step == 0 {
			return nil, outOfRange("Sequence step cannot be 0.")
		}
		for x := start; (step > 0 && x <= end) || (step < 0 && x >= end); {
			if len(out) >= maxGeneratedArray {
				return nil, tooMany()
			}
			out = append(out, x)
			next, ok := intOps["add"](x, step)
			if !ok {
				break
			}
			x = next
		}
	case spantype.Float64:
		start, _ := asFloat(startV)
		end, _ := asFloat(endV)
		step, _ := asFloat(stepV)
		if step == 0 || math.IsNaN(step) || math.IsNaN(start) || math.IsNaN(end) || math.IsInf(step, 0) {
			return nil, outOfRange("Sequence step cannot be 0, NaN or infinite.")
		}
		for i := 0; ; i++ {
			x := start + float64(i)*step
			if (step > 0 && x > end) || (step < 0 && x < end) {
				break
			}
			if len(out) >= maxGeneratedArray {
				return nil, tooMany()
			}
			out = append(out, x)
		}
	case spantype.Numeric:
		start, err := asNumeric(startV)
		if err != nil {
			return nil, err
		}
		end, _ := asNumeric(endV)
		step, _ := asNumeric(stepV)
		if step.Sign() == 0 {
			return nil, outOfRange("Sequence step cannot be 0.")
		}
		for x := new(big.Rat).Set(start); (step.Sign() > 0 && x.Cmp(end) <= 0) || (step.Sign() < 0 && x.Cmp(end) >= 0); x = new(big.Rat).Add(x, step) {
			if len(out) >= maxGeneratedArray {
				return nil, tooMany()
			}
			s, err := storeNumeric(x)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
	}
	return encodeArray(t, out), nil
}

// ArrayElement translates arr[OFFSET(i)], [ORDINAL(i)], [SAFE_OFFSET(i)], [SAFE_ORDINAL(i)] and
// plain arr[i] (mode "", meaning OFFSET). Out of range is an OUT_OF_RANGE error ("Array index N
// is out of bounds") except for the SAFE_ modes, which give NULL.
func ArrayElement(arr Arg, index Arg, mode string) (Arg, error) {
	mode = strings.ToUpper(mode)
	if mode == "" {
		mode = "OFFSET"
	}
	switch mode {
	case "OFFSET", "ORDINAL", "SAFE_OFFSET", "SAFE_ORDINAL":
	default:
		return Arg{}, errorf("Unsupported array subscript %s", mode)
	}
	at, err := arrayArg(Call{Name: "array subscript", Args: []Arg{arr}}, arr)
	if err != nil {
		return Arg{}, errorf("Element access using [] is not supported on values of type %s", arr.Type)
	}
	idx, err := Coerce(index, tI)
	if err != nil {
		return Arg{}, errorf("Array position in [] must be coercible to INT64 type, but has type %s", index.Type)
	}
	return Arg{SQL: sqlCall("spf_array_at", arr.SQL, idx.SQL, tagSQL(at), sqlString(mode)), Type: *at.Elem}, nil
}

// StructField translates access to field i (0-based) of a STRUCT value.
func StructField(s Arg, i int) (Arg, error) {
	if s.Type.Code != spantype.Struct {
		return Arg{}, errorf("Field access is not supported on values of type %s", s.Type)
	}
	if i < 0 || i >= len(s.Type.Fields) {
		return Arg{}, errorf("Field index %d out of range for %s", i, s.Type)
	}
	return Arg{SQL: sqlCall("spf_array_at", s.SQL, itoa(i), tagSQL(s.Type), "'OFFSET'"), Type: s.Type.Fields[i].Type}, nil
}

func itoa(i int) string { return strconv.Itoa(i) }
