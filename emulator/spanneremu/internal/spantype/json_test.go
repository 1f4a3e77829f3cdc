package spantype

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
)

func TestNormalizeJSON(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"b": 1, "a": [true, false, null], "c": {}}`, `{"a":[true,false,null],"b":1,"c":{}}`},
		{` {"a":1,"a":2} `, `{"a":1}`},                      // the first of duplicate keys
		{`{"b":1,"a":2,"b":3,"a":4}`, `{"a":2,"b":1}`},      // duplicates out of order
		{`[1.50, -0, 1e+10, 2E-3]`, `[1.50,-0,1e+10,2E-3]`}, // numbers as written
		{`"<a & b>"`, `"<a & b>"`},                          // no HTML escapes
		{`"\u00e9\n\/"`, `"é\n/"`},                          // escapes decoded and encoded again
		{`"\u2028"`, `"\u2028"`},
		{"\"\xff\"", "\"\uFFFD\""},         // invalid UTF-8 becomes U+FFFD
		{`{"é":1,"e":2}`, `{"e":2,"é":1}`}, // keys by their bytes
		{`[]`, `[]`}, {`[ ]`, `[]`}, {`{ }`, `{}`}, {`0`, `0`}, {`"x"`, `"x"`}, {`null`, `null`},
	} {
		got, err := NormalizeJSON(c.in)
		if err != nil || got != c.want {
			t.Errorf("NormalizeJSON(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{
		``, ` `, `{`, `[1,]`, `{"a"}`, `{"a":1,}`, `{1:2}`, `01`, `1.`, `.5`, `-`, `1e`, `tru`, `truex`,
		`{"a":1} }`, `[1] 2`, "\"a\tb\"", `"\x"`, `"abc`, `[1 2]`, strings.Repeat("[", maxJSONDepth+1),
	} {
		if got, err := NormalizeJSON(in); err == nil {
			t.Errorf("NormalizeJSON(%q) = %q, want an error", in, got)
		}
	}
}

// FuzzNormalizeJSON holds NormalizeJSON to the reference normalizer and to encoding/json's
// validity: it takes exactly the valid documents, and renders them as the reference does.
func FuzzNormalizeJSON(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[true,false,null],"c":{"y":"x","x":"y"}}`, `{"a":1,"a":2}`, `[1.50,-0,1e+10]`,
		`"<a & b>\u00e9\u2028"`, "\"\xff\"", ` {"z" : [ {"b":2,"a":1} ] } `, `{"a":1} }`, `truex`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := NormalizeJSON(s)
		if valid := json.Valid([]byte(s)); (err == nil) != valid {
			t.Fatalf("NormalizeJSON(%q): error %v, but json.Valid says %v", s, err, valid)
		}
		if err != nil {
			return
		}
		want, werr := referenceNormalizeJSON(s)
		if werr != nil || got != want {
			t.Fatalf("NormalizeJSON(%q) = %q; the reference gives %q, %v", s, got, want, werr)
		}
		if again, err := NormalizeJSON(got); err != nil || again != got {
			t.Fatalf("NormalizeJSON is not idempotent on %q: %q, %v", got, again, err)
		}
	})
}

// BenchmarkNormalizeJSON normalizes an outbox payload as the services write one.
func BenchmarkNormalizeJSON(b *testing.B) {
	payload := `{"orderId":"4f9c2a8e-1c3b-4e2f-9a7d-5b6c7d8e9f01","customerId":"c-12345","status":"CONFIRMED",` +
		`"totalMinor":129900,"currency":"JPY","items":[{"sku":"SKU-0001","quantity":2,"unitPriceMinor":64950}],` +
		`"email":"someone@example.com","occurredAt":"2026-12-06T21:43:11.123456Z"}`
	for _, impl := range []struct {
		name string
		fn   func(string) (string, error)
	}{{"new", NormalizeJSON}, {"reference", referenceNormalizeJSON}} {
		b.Run(impl.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := impl.fn(payload); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// referenceNormalizeJSON is the normalizer NormalizeJSON replaced: a document decoded into a tree
// with encoding/json's tokenizer and rendered again. It is slow and clear, and the tests hold the
// new one to it.
func referenceNormalizeJSON(s string) (string, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	v, err := decodeJSONValue(dec)
	if err != nil {
		return "", fmt.Errorf("invalid JSON: %v", err)
	}
	if _, err := dec.Token(); err == nil {
		return "", fmt.Errorf("invalid JSON: trailing data")
	}
	var b bytes.Buffer
	writeJSON(&b, v)
	return b.String(), nil
}

type jsonObject struct {
	keys []string
	vals map[string]any
}

func decodeJSONValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &jsonObject{vals: map[string]any{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				v, err := decodeJSONValue(dec)
				if err != nil {
					return nil, err
				}
				if _, dup := o.vals[k]; !dup {
					o.keys = append(o.keys, k)
					o.vals[k] = v
				}
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			sort.Strings(o.keys)
			return o, nil
		case '[':
			var arr []any
			for dec.More() {
				v, err := decodeJSONValue(dec)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			if arr == nil {
				arr = []any{}
			}
			return arr, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		return tok, nil
	}
}

func writeJSON(b *bytes.Buffer, v any) {
	switch x := v.(type) {
	case *jsonObject:
		b.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(b, k)
			b.WriteByte(':')
			writeJSON(b, x.vals[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSON(b, e)
		}
		b.WriteByte(']')
	case string:
		writeJSONString(b, x)
	case json.Number:
		b.WriteString(normalizeJSONNumber(string(x)))
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case nil:
		b.WriteString("null")
	}
}

// normalizeJSONNumber keeps a number as written: Spanner returns JSON numbers with the digits
// they were stored with.
func normalizeJSONNumber(s string) string { return s }

func writeJSONString(b *bytes.Buffer, s string) { b.Write(appendJSONString(nil, s)) }
