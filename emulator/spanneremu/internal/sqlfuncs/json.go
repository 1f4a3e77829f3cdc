package sqlfuncs

import (
	"bytes"
	"database/sql/driver"
	"encoding/base64"
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

// JSON values are decoded with json.Number, so numbers keep the text they were stored with;
// objects become maps, which encoding/json writes back with sorted keys, matching the
// normalized storage form.

func decodeJSON(s string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, outOfRange("Invalid JSON: %v", err)
	}
	if dec.More() {
		return nil, outOfRange("Invalid JSON: trailing data")
	}
	return v, nil
}

// jsonPathStep is one step of a JSONPath: an object member or an array index.
type jsonPathStep struct {
	key   string
	index int
	isIdx bool
}

var jsonPathCache memo[[]jsonPathStep]

// parseJSONPath parses $, .name, ."quoted", ['name'], ["name"] and [N].
func parseJSONPath(p string) ([]jsonPathStep, error) {
	if steps, ok := jsonPathCache.Load(p); ok {
		return steps, nil
	}
	bad := outOfRange("Invalid JSONPath: %s", p)
	if !strings.HasPrefix(p, "$") {
		return nil, outOfRange("JSONPath must start with '$': %s", p)
	}
	var steps []jsonPathStep
	rest := p[1:]
	for rest != "" {
		switch rest[0] {
		case '.':
			rest = rest[1:]
			if strings.HasPrefix(rest, `"`) {
				end := strings.Index(rest[1:], `"`)
				if end < 0 {
					return nil, bad
				}
				steps = append(steps, jsonPathStep{key: rest[1 : end+1]})
				rest = rest[end+2:]
				continue
			}
			end := strings.IndexAny(rest, ".[")
			if end < 0 {
				end = len(rest)
			}
			if end == 0 {
				return nil, bad
			}
			steps = append(steps, jsonPathStep{key: rest[:end]})
			rest = rest[end:]
		case '[':
			end := strings.Index(rest, "]")
			if end < 0 {
				return nil, bad
			}
			inner := strings.TrimSpace(rest[1:end])
			rest = rest[end+1:]
			if len(inner) >= 2 && (inner[0] == '\'' || inner[0] == '"') && inner[len(inner)-1] == inner[0] {
				steps = append(steps, jsonPathStep{key: inner[1 : len(inner)-1]})
				continue
			}
			n, err := strconv.Atoi(inner)
			if err != nil || n < 0 {
				return nil, bad
			}
			steps = append(steps, jsonPathStep{index: n, isIdx: true})
		default:
			return nil, bad
		}
	}
	jsonPathCache.Store(p, steps)
	return steps, nil
}

// jsonAt follows path in doc; ok=false when a step is missing.
func jsonAt(doc any, path string) (any, bool, error) {
	steps, err := parseJSONPath(path)
	if err != nil {
		return nil, false, err
	}
	cur := doc
	for _, s := range steps {
		switch x := cur.(type) {
		case map[string]any:
			if s.isIdx {
				return nil, false, nil
			}
			v, ok := x[s.key]
			if !ok {
				return nil, false, nil
			}
			cur = v
		case []any:
			if !s.isIdx || s.index >= len(x) {
				return nil, false, nil
			}
			cur = x[s.index]
		default:
			return nil, false, nil
		}
	}
	return cur, true, nil
}

// jsonScalarString renders a JSON scalar as JSON_VALUE does; objects, arrays and null are NULL.
func jsonScalarString(v any) driver.Value {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return string(x)
	case bool:
		return strconv.FormatBool(x)
	}
	return nil
}

// docArg reads a JSON or STRING argument.
func docArg(v driver.Value) (any, error) { return decodeJSON(asString(v)) }

func jsonFuncSig(goName string, jsonRet, stringRet spantype.Type) []overload {
	return []overload{
		sig(jsonRet, goCall(goName), tJ, tS).opt(1),
		sig(stringRet, goCall(goName), tS, tS).opt(1),
	}
}

func pathOf(a []driver.Value) string {
	if len(a) > 1 {
		return asString(a[1])
	}
	return "$"
}

// defJSONAt registers the Go function name(json[, path]): it finds the value at the JSONPath
// and renders it; a missing value, or one render rejects, is NULL.
func defJSONAt(name string, render func(v any) (driver.Value, bool)) {
	defStrict(name, -1, func(a []driver.Value) (driver.Value, error) {
		doc, err := docArg(a[0])
		if err != nil {
			return nil, err
		}
		v, ok, err := jsonAt(doc, pathOf(a))
		if err != nil || !ok {
			return nil, err
		}
		out, ok := render(v)
		if !ok {
			return nil, nil
		}
		return out, nil
	})
}

func init() {
	defFunc("JSON_VALUE", jsonFuncSig("spf_json_value", tS, tS)...)
	defJSONAt("spf_json_value", func(v any) (driver.Value, bool) { return jsonScalarString(v), true })
	defFunc("JSON_QUERY", jsonFuncSig("spf_json_query", tJ, tS)...)
	defJSONAt("spf_json_query", func(v any) (driver.Value, bool) { return jsonText(v), true })
	defFunc("JSON_VALUE_ARRAY", jsonFuncSig("spf_json_value_array", tAS, tAS)...)
	defJSONAt("spf_json_value_array", func(v any) (driver.Value, bool) {
		arr, isArr := v.([]any)
		if !isArr {
			return nil, false
		}
		out := make([]any, len(arr))
		for i, e := range arr {
			switch e.(type) {
			case map[string]any, []any:
				return nil, false
			}
			out[i] = jsonScalarString(e)
		}
		return encodeArray(tS, out), true
	})
	defFunc("JSON_QUERY_ARRAY", jsonFuncSig("spf_json_query_array", spantype.ArrayOf(tJ), tAS)...)
	defJSONAt("spf_json_query_array", func(v any) (driver.Value, bool) {
		arr, isArr := v.([]any)
		if !isArr {
			return nil, false
		}
		out := make([]any, len(arr))
		for i, e := range arr {
			out[i] = jsonText(e)
		}
		return encodeArray(tS, out), true
	})
	defFunc("PARSE_JSON", sig(tJ, func(a []Arg) string { return sqlCall("spf_parse_json", a[0].SQL) }, tS))
	defStrict("spf_parse_json", 1, func(a []driver.Value) (driver.Value, error) {
		s, err := spantype.NormalizeJSON(asString(a[0]))
		if err != nil {
			return nil, outOfRange("%v", err)
		}
		return s, nil
	})
	defFunc("JSON_TYPE", sig(tS, goCall("spf_json_type"), tJ))
	defStrict("spf_json_type", 1, func(a []driver.Value) (driver.Value, error) {
		doc, err := docArg(a[0])
		if err != nil {
			return nil, err
		}
		switch doc.(type) {
		case map[string]any:
			return "object", nil
		case []any:
			return "array", nil
		case string:
			return "string", nil
		case json.Number:
			return "number", nil
		case bool:
			return "boolean", nil
		}
		return "null", nil
	})
	defFunc("JSON_KEYS", sig(tAS, goCall("spf_json_keys"), tJ))
	defStrict("spf_json_keys", 1, func(a []driver.Value) (driver.Value, error) {
		doc, err := docArg(a[0])
		if err != nil {
			return nil, err
		}
		var keys []string
		var walk func(prefix string, v any)
		walk = func(prefix string, v any) {
			switch x := v.(type) {
			case map[string]any:
				for k, e := range x {
					p := k
					if prefix != "" {
						p = prefix + "." + k
					}
					keys = append(keys, p)
					walk(p, e)
				}
			case []any:
				for _, e := range x {
					walk(prefix, e)
				}
			}
		}
		walk("", doc)
		sort.Strings(keys)
		out := []any{}
		for i, k := range keys {
			if i == 0 || keys[i-1] != k {
				out = append(out, k)
			}
		}
		return encodeArray(tS, out), nil
	})

	// JSON → SQL scalar converters.
	converters := map[string]spantype.Type{"BOOL": tB, "INT64": tI, "FLOAT64": tF, "STRING": tS}
	for name, t := range converters {
		goName := "spf_json_to_" + strings.ToLower(name)
		ovs := []overload{sig(t, goCall(goName), tJ)}
		if name == "STRING" {
			// STRING(timestamp[, zone]) renders a TIMESTAMP like CAST AS STRING, in a zone.
			ovs = append(ovs, sig(tS, goCall("spf_timestamp_to_string"), tT, tS).opt(1))
		}
		defFunc(name, ovs...)
		laxName := "spf_json_lax_" + strings.ToLower(name)
		defFunc("LAX_"+name, sig(t, goCall(laxName), tJ))
		defStrict(laxName, 1, func(a []driver.Value) (driver.Value, error) {
			doc, err := docArg(a[0])
			if err != nil {
				return nil, err
			}
			return jsonLax(name, doc), nil
		})
		defStrict(goName, 1, func(a []driver.Value) (driver.Value, error) {
			doc, err := docArg(a[0])
			if err != nil {
				return nil, err
			}
			return jsonToScalar(name, doc)
		})
	}

	scalars["TO_JSON"] = func(c Call) (Arg, error) {
		if len(c.Args) != 1 {
			return Arg{}, arity(c, "1")
		}
		return Arg{SQL: sqlCall("spf_to_json", c.Args[0].SQL, fullTagSQL(c.Args[0].Type)), Type: tJ}, nil
	}
	scalars["TO_JSON_STRING"] = func(c Call) (Arg, error) {
		if len(c.Args) != 1 && len(c.Args) != 2 {
			return Arg{}, arity(c, "1 or 2")
		}
		pretty := "0"
		if len(c.Args) == 2 {
			b, err := Coerce(c.Args[1], tB)
			if err != nil {
				return Arg{}, err
			}
			pretty = b.SQL
		}
		return Arg{SQL: sqlCall("spf_to_json_string", c.Args[0].SQL, fullTagSQL(c.Args[0].Type), pretty), Type: tS}, nil
	}
	toJSON := func(a []driver.Value) (any, error) {
		t, err := parseFullTag(asString(a[1]))
		if err != nil {
			return nil, err
		}
		return storageToJSONValue(t, a[0])
	}
	defLax("spf_to_json", 2, func(a []driver.Value) (driver.Value, error) {
		v, err := toJSON(a)
		if err != nil {
			return nil, err
		}
		return jsonText(v), nil
	})
	defLax("spf_to_json_string", 3, func(a []driver.Value) (driver.Value, error) {
		v, err := toJSON(a)
		if err != nil {
			return nil, err
		}
		if a[2] != nil && toBool(a[2]) {
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			_ = enc.Encode(v)
			return strings.TrimSuffix(b.String(), "\n"), nil
		}
		return jsonText(v), nil
	})
	scalars["JSON_ARRAY"] = func(c Call) (Arg, error) {
		args := []string{}
		for _, a := range c.Args {
			args = append(args, a.SQL, fullTagSQL(a.Type))
		}
		return Arg{SQL: sqlCall("spf_json_array", args...), Type: tJ}, nil
	}
	defLax("spf_json_array", -1, func(a []driver.Value) (driver.Value, error) {
		out := []any{}
		for i := 0; i+1 < len(a); i += 2 {
			v, err := toJSON(a[i : i+2])
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return jsonText(out), nil
	})
	scalars["JSON_OBJECT"] = func(c Call) (Arg, error) {
		if len(c.Args)%2 != 0 {
			return Arg{}, errorf("JSON_OBJECT requires an even number of arguments")
		}
		args := []string{}
		for i := 0; i < len(c.Args); i += 2 {
			k, err := Coerce(c.Args[i], tS)
			if err != nil {
				return Arg{}, errorf("JSON_OBJECT keys must be STRING")
			}
			args = append(args, k.SQL, c.Args[i+1].SQL, fullTagSQL(c.Args[i+1].Type))
		}
		return Arg{SQL: sqlCall("spf_json_object", args...), Type: tJ}, nil
	}
	defLax("spf_json_object", -1, func(a []driver.Value) (driver.Value, error) {
		out := map[string]any{}
		for i := 0; i+2 < len(a); i += 3 {
			if a[i] == nil {
				return nil, outOfRange("A key of JSON_OBJECT cannot be NULL")
			}
			k := asString(a[i])
			if _, dup := out[k]; dup {
				continue // the first of duplicate keys wins
			}
			v, err := toJSON(a[i+1 : i+3])
			if err != nil {
				return nil, err
			}
			out[k] = v
		}
		return jsonText(out), nil
	})
}

// jsonLax converts a JSON value as the LAX_ functions do: across JSON types where a sensible
// conversion exists, NULL otherwise.
func jsonLax(name string, doc any) driver.Value {
	switch name {
	case "BOOL":
		switch x := doc.(type) {
		case bool:
			return boolValue(x)
		case string:
			switch strings.ToLower(x) {
			case "true":
				return int64(1)
			case "false":
				return int64(0)
			}
		case json.Number:
			if f, err := x.Float64(); err == nil {
				return boolValue(f != 0)
			}
		}
	case "INT64":
		var f float64
		switch x := doc.(type) {
		case bool:
			return boolValue(x)
		case json.Number:
			if i, err := x.Int64(); err == nil {
				return i
			}
			f, _ = x.Float64()
		case string:
			p, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
			if err != nil {
				return nil
			}
			f = p
		default:
			return nil
		}
		if n, err := floatToInt(f); err == nil {
			return n
		}
	case "FLOAT64":
		switch x := doc.(type) {
		case json.Number:
			if f, err := x.Float64(); err == nil {
				return storeFloat(f)
			}
		case string:
			if f, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil {
				return storeFloat(f)
			}
		}
	case "STRING":
		switch x := doc.(type) {
		case string:
			return x
		case json.Number:
			return string(x)
		case bool:
			return strconv.FormatBool(x)
		}
	}
	return nil
}

func toBool(v driver.Value) bool {
	n, err := asInt(v)
	return err == nil && n != 0
}

func jsonToScalar(name string, doc any) (driver.Value, error) {
	switch name {
	case "BOOL":
		if b, ok := doc.(bool); ok {
			return boolValue(b), nil
		}
	case "STRING":
		if s, ok := doc.(string); ok {
			return s, nil
		}
	case "INT64":
		if n, ok := doc.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				return i, nil
			}
			if f, err := n.Float64(); err == nil && f == math.Trunc(f) && math.Abs(f) < 9.2e18 {
				return int64(f), nil
			}
			return nil, outOfRange("The provided JSON number: %s cannot be converted to an int64", n)
		}
	case "FLOAT64":
		if n, ok := doc.(json.Number); ok {
			f, err := n.Float64()
			if err != nil {
				return nil, outOfRange("The provided JSON number %s cannot be converted to FLOAT64", n)
			}
			return storeFloat(f), nil
		}
	}
	if doc == nil {
		return nil, nil
	}
	return nil, outOfRange("The provided JSON input is not of type %s", strings.ToLower(name))
}

// fullTagSQL is a type tag that keeps struct field names, for TO_JSON's object keys.
func fullTagSQL(t spantype.Type) string {
	b, _ := json.Marshal(t)
	return sqlString(string(b))
}

var fullTagCache memo[spantype.Type]

func parseFullTag(s string) (spantype.Type, error) {
	if t, ok := fullTagCache.Load(s); ok {
		return t, nil
	}
	var t spantype.Type
	if err := json.Unmarshal([]byte(s), &t); err != nil {
		return t, internalErr("bad type tag %q", s)
	}
	fullTagCache.Store(s, t)
	return t, nil
}

// storageToJSONValue converts a storage value of type t to a JSON value (TO_JSON).
func storageToJSONValue(t spantype.Type, v driver.Value) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch t.Code {
	case spantype.Bool:
		return toBool(v), nil
	case spantype.Int64:
		n, err := asInt(v)
		return json.Number(strconv.FormatInt(n, 10)), err
	case spantype.Float64, spantype.Float32:
		f, err := asFloat(v)
		switch {
		case err != nil:
			return nil, err
		case math.IsNaN(f):
			return "NaN", nil
		case math.IsInf(f, 1):
			return "Infinity", nil
		case math.IsInf(f, -1):
			return "-Infinity", nil
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), nil
	case spantype.Numeric:
		return json.Number(asString(v)), nil
	case spantype.Bytes:
		return base64.StdEncoding.EncodeToString(asBytes(v)), nil
	case spantype.Timestamp:
		ts, err := asTime(v)
		return ts.UTC().Format(time.RFC3339Nano), err
	case spantype.JSON:
		return decodeJSON(asString(v))
	case spantype.Array, spantype.Struct:
		elems, err := spantype.DecodeArray(t, asString(v))
		if err != nil {
			return nil, internalErr("%v", err)
		}
		if t.Code == spantype.Array {
			out := make([]any, len(elems))
			for i, e := range elems {
				if out[i], err = storageToJSONValue(*t.Elem, e); err != nil {
					return nil, err
				}
			}
			return out, nil
		}
		obj := map[string]any{}
		for i, e := range elems {
			name := t.Fields[i].Name
			if _, dup := obj[name]; dup {
				continue
			}
			if obj[name], err = storageToJSONValue(t.Fields[i].Type, e); err != nil {
				return nil, err
			}
		}
		return obj, nil
	}
	return asString(v), nil
}
