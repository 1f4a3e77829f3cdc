package spantype

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// arrayTypes are the types DecodeArray is held to the reference with: every kind of element,
// nested arrays and structs, and a struct of more fields than its text has (and fewer).
var arrayTypes = []Type{
	ArrayOf(TInt64), ArrayOf(TString), ArrayOf(TFloat64), ArrayOf(TBool), ArrayOf(TBytes),
	ArrayOf(TTimestamp), ArrayOf(TJSON), ArrayOf(TNumeric), ArrayOf(ArrayOf(TInt64)),
	ArrayOf(StructOf(Field{"A", TInt64}, Field{"B", TString})),
	StructOf(Field{"A", TInt64}, Field{"B", TString}, Field{"C", ArrayOf(TString)}),
	StructOf(Field{"A", TFloat64}), ArrayOf(TUnknown),
}

func TestDecodeArray(t *testing.T) {
	row := StructOf(Field{"V", TInt64}, Field{"T", TString}, Field{"E", ArrayOf(StructOf(Field{"V", TInt64}, Field{"T", TString}))})
	for _, c := range []struct {
		t    Type
		in   string
		want []any
	}{
		{ArrayOf(TInt64), `[1, -2 ,null, "3"]`, []any{int64(1), int64(-2), nil, int64(3)}},
		{ArrayOf(TString), `["a","é\n\"b\"","\u00e9", "", null]`, []any{"a", "é\n\"b\"", "é", "", nil}},
		{ArrayOf(TFloat64), `[1.5,"NaN","Infinity","-Infinity",2]`, []any{1.5, "NaN", math.Inf(1), math.Inf(-1), 2.0}},
		{ArrayOf(TBool), `[true,false,1,0]`, []any{int64(1), int64(0), int64(1), int64(0)}},
		{ArrayOf(TBytes), `["aGk="]`, []any{[]byte("hi")}},
		{row, `[3,"order.created",[[1,"a"],[2,"b]"]]]`, []any{int64(3), "order.created", `[[1,"a"],[2,"b]"]]`}},
		{row, `[3, "x", null]`, []any{int64(3), "x", nil}},
		{ArrayOf(TInt64), `[]`, []any{}}, {ArrayOf(TInt64), ` [ ] `, []any{}}, {ArrayOf(TInt64), `null`, []any{}},
	} {
		got, err := DecodeArray(c.t, c.in)
		if err != nil {
			t.Errorf("DecodeArray(%s, %q): %v", c.t, c.in, err)
			continue
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("DecodeArray(%s, %q) (-want +got):\n%s", c.t, c.in, diff)
		}
	}
	for _, in := range []string{``, `[`, `[1,]`, `[1 2]`, `{"a":1}`, `"x"`, `1`, `[1] 2`, `[1]]`, `["a]`} {
		if got, err := DecodeArray(ArrayOf(TInt64), in); err == nil {
			t.Errorf("DecodeArray(%q) = %v, want an error", in, got)
		}
	}
}

// FuzzDecodeArray holds DecodeArray to the reference (the encoding/json decoder it replaced) on
// every type of arrayTypes: where the reference decodes a valid JSON text, DecodeArray gives the
// same elements or the same failure; where DecodeArray decodes, the reference agrees.
func FuzzDecodeArray(f *testing.F) {
	for _, s := range []string{
		`[1,-2,null,"3"]`, `["a","é\n\"b\"","\u00e9",""]`, `[1.5,"NaN","Infinity"]`, `[true,false]`,
		`[[1,"a"],[2,"b]"]]`, `[3,"x",["p","q"]]`, `[]`, ` [ 1 , 2 ] `, `null`, "[\"\xff\"]", `[{"a":[1]}]`,
		`["2026-12-06T21:43:11.123456Z"]`, `[1e400]`, `["\\"]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, typ := range arrayTypes {
			got, err := DecodeArray(typ, s)
			want, werr := referenceDecodeArray(typ, s)
			if !json.Valid([]byte(s)) {
				if err == nil {
					t.Fatalf("DecodeArray(%s, %q) = %v of no valid JSON", typ, s, got)
				}
				continue
			}
			if (err == nil) != (werr == nil) {
				t.Fatalf("DecodeArray(%s, %q): error %v; the reference's %v", typ, s, err, werr)
			}
			if err == nil && !cmp.Equal(want, got, cmp.Comparer(sameFloat)) {
				t.Fatalf("DecodeArray(%s, %q) = %#v; the reference gives %#v", typ, s, got, want)
			}
		}
	})
}

// sameFloat compares float64 elements, NaN equal to NaN.
func sameFloat(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }

// BenchmarkDecodeArray decodes the relay scan's Earlier column (an aggregate's earlier events)
// and an order's lines.
func BenchmarkDecodeArray(b *testing.B) {
	earlier := ArrayOf(StructOf(Field{"AggregateVersion", TInt64}, Field{"EventType", TString}))
	text := `[[1,"order.created"],[2,"order.awaiting_payment"],[3,"order.confirmed"],[4,"order.shipped"]]`
	for _, impl := range []struct {
		name string
		fn   func(Type, string) ([]any, error)
	}{{"new", DecodeArray}, {"reference", referenceDecodeArray}} {
		b.Run(impl.name, func(b *testing.B) {
			for b.Loop() {
				// As FromStorage does: the array, then each struct in it.
				elems, err := impl.fn(earlier, text)
				if err != nil {
					b.Fatal(err)
				}
				for _, e := range elems {
					if _, err := impl.fn(*earlier.Elem, e.(string)); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// referenceDecodeArray is DecodeArray as it was before it read the text in one pass: the
// reference FuzzDecodeArray holds it to.
func referenceDecodeArray(t Type, s string) ([]any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var raw []json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("corrupt %s value: %v", t, err)
	}
	out := make([]any, len(raw))
	for i, r := range raw {
		et := TUnknown
		if t.Code == Array {
			et = *t.Elem
		} else if i < len(t.Fields) {
			et = t.Fields[i].Type
		}
		if et.Code == Array || et.Code == Struct {
			if string(r) == "null" {
				out[i] = nil
			} else {
				out[i] = string(r)
			}
			continue
		}
		d := json.NewDecoder(bytes.NewReader(r))
		d.UseNumber()
		var j any
		if err := d.Decode(&j); err != nil {
			return nil, err
		}
		v, err := JSONElemToStorage(et, j)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}
