package platform_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/pkg/platform"
)

type testLine struct {
	SKU      string `json:"sku"`
	Quantity int64  `json:"quantity"`
}

// testOpaque decodes itself, as orders' payment object does: the scan checks only its encoding
// and keys, its own errors are passed on.
type testOpaque struct{ Fields map[string]string }

func (o *testOpaque) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("payment: %w", err)
	}
	o.Fields = map[string]string{}
	for k, v := range raw {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return fmt.Errorf("payment.%s is not a string", k)
		}
		o.Fields[k] = s
	}
	return nil
}

type testRequest struct {
	CustomerID string      `json:"customer_id"`
	Gift       bool        `json:"gift,omitempty"`
	Weight     float64     `json:"weight,omitempty"`
	Small      int8        `json:"small,omitempty"`
	Lines      []testLine  `json:"lines"`
	Payment    *testOpaque `json:"payment"`
	Ignored    string      `json:"-"`
}

func TestDecodeJSONStrict(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want string // the error, "" for success
	}{
		{name: "valid", body: `{"customer_id": "c", "lines": [{"sku": "A1", "quantity": 2}], "payment": {"method": "card"}}`},
		{name: "nulls", body: `{"customer_id": null, "lines": null, "payment": null}`},
		{name: "escapes and a surrogate pair", body: `{"customer_id": "caf\u00e9 \ud83d\ude00 \\ud800"}`},
		{name: "empty", body: ``, want: "the body is empty"},
		{name: "blank", body: " \n", want: "the body is empty"},
		{name: "truncated array", body: `{"lines": [`, want: "the body ends before its JSON value does"},
		{name: "truncated", body: `{"customer_id":`, want: "the body ends before its JSON value does"},
		{name: "syntax", body: `{"customer_id" 1}`, want: "the body is not valid JSON: invalid character '1' after object key (at byte 15)"},
		{name: "trailing data", body: `{} {}`, want: "the body has data after the JSON object"},
		{name: "not an object", body: `[1]`, want: "the body must be an object, got an array"},
		{name: "duplicate key", body: `{"customer_id": "a", "customer_id": "b"}`, want: "customer_id is given twice (each key once)"},
		{name: "duplicate key deep", body: `{"lines": [{"sku": "A1", "quantity": 1}, {"sku": "B", "sku": "C"}]}`, want: "lines[1].sku is given twice (each key once)"},
		{name: "duplicate key in an opaque value", body: `{"payment": {"method": "card", "method": "wallet"}}`, want: "payment.method is given twice (each key once)"},
		{name: "other case", body: `{"Customer_ID": "c"}`, want: `unknown field "Customer_ID" (field names are exact, case included)`},
		{name: "other case deep", body: `{"lines": [{"SKU": "A1"}]}`, want: `unknown field "lines[0].SKU" (field names are exact, case included)`},
		{name: "unknown field", body: `{"lines": [{"sku": "A1", "qty": 1}]}`, want: `unknown field "lines[0].qty" (field names are exact, case included)`},
		{name: "ignored field is unknown", body: `{"Ignored": "x"}`, want: `unknown field "Ignored" (field names are exact, case included)`},
		{name: "string for integer", body: `{"lines": [{"sku": "A1", "quantity": "2"}]}`, want: "lines[0].quantity must be an integer, got a string"},
		{name: "fraction", body: `{"lines": [{"quantity": 1.5}]}`, want: "lines[0].quantity must be an integer, got 1.5"},
		{name: "overflow", body: `{"lines": [{"quantity": 99999999999999999999}]}`, want: "lines[0].quantity must be an integer, got 99999999999999999999, which is out of range"},
		{name: "int8 range", body: `{"small": 200}`, want: "small must be an integer, got 200, which is out of range"},
		{name: "number for string", body: `{"customer_id": 7}`, want: "customer_id must be a string, got a number"},
		{name: "object for string", body: `{"customer_id": {}}`, want: "customer_id must be a string, got an object"},
		{name: "string for bool", body: `{"gift": "yes"}`, want: "gift must be true or false, got a string"},
		{name: "bool for number", body: `{"weight": true}`, want: "weight must be a number, got a boolean"},
		{name: "object for array", body: `{"lines": {}}`, want: "lines must be an array, got an object"},
		{name: "opaque value of the wrong kind", body: `{"payment": []}`, want: "payment must be an object, got an array"},
		{name: "opaque value's own error", body: `{"payment": {"method": 1}}`, want: "payment.method is not a string"},
		{name: "invalid UTF-8", body: "{\"customer_id\": \"a\xffb\"}", want: "customer_id is not valid UTF-8"},
		{name: "invalid UTF-8 deep", body: "{\"lines\": [{\"sku\": \"\xc3\"}]}", want: "lines[0].sku is not valid UTF-8"},
		{name: "invalid UTF-8 in a key", body: "{\"lines\": [{\"s\xffku\": \"A\"}]}", want: "lines[0] is not valid UTF-8"},
		{name: "lone high surrogate", body: `{"customer_id": "a\ud800b"}`, want: `customer_id has a \u escape of an unpaired UTF-16 surrogate`},
		{name: "lone low surrogate", body: `{"payment": {"store": "\udc00"}}`, want: `payment.store has a \u escape of an unpaired UTF-16 surrogate`},
		{name: "reversed pair", body: `{"customer_id": "\ude00\ud83d"}`, want: `customer_id has a \u escape of an unpaired UTF-16 surrogate`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v testRequest
			err := platform.DecodeJSONStrict([]byte(tc.body), &v)
			got := ""
			if err != nil {
				got = err.Error()
				var je *platform.JSONError
				if !errors.As(err, &je) {
					t.Errorf("error %T is not a *JSONError", err)
				}
			}
			if got != tc.want {
				t.Errorf("DecodeJSONStrict(%s) = %q, want %q", tc.body, got, tc.want)
			}
			for _, goTerm := range []string{"Go ", "int64", "int8", "float64", "map[", "RawMessage", "testRequest", "testLine", "json: "} {
				if strings.Contains(got, goTerm) {
					t.Errorf("error %q speaks Go (%q)", got, goTerm)
				}
			}
		})
	}
}

func TestDecodeJSONStrictValue(t *testing.T) {
	var v testRequest
	body := `{"customer_id": "caf\u00e9", "lines": [{"sku": "A1", "quantity": 2}], "payment": {"method": "card"}}`
	if err := platform.DecodeJSONStrict([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	want := testRequest{CustomerID: "café", Lines: []testLine{{SKU: "A1", Quantity: 2}}, Payment: &testOpaque{Fields: map[string]string{"method": "card"}}}
	if diff := cmp.Diff(want, v); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
}

func TestRequireJSON(t *testing.T) {
	for ct, ok := range map[string]bool{
		"application/json":                  true,
		"application/json; charset=utf-8":   true,
		"Application/JSON; charset=UTF-8":   true,
		"application/json;v=1":              true,
		"":                                  false,
		"text/plain":                        false,
		"application/json-seq":              false,
		"application/x-www-form-urlencoded": false,
		"application/json; charset=latin1":  false,
		"application/json; charset":         false,
	} {
		t.Run(ct, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/", nil)
			if ct != "" {
				req.Header.Set("Content-Type", ct)
			}
			err := platform.RequireJSON(req)
			if ok {
				if err != nil {
					t.Errorf("RequireJSON = %v, want nil", err)
				}
				return
			}
			var p *platform.Problem
			if !errors.As(err, &p) || p.Status != http.StatusUnsupportedMediaType || !strings.Contains(p.Detail, "must be application/json") {
				t.Errorf("RequireJSON = %v, want a 415 problem", err)
			}
		})
	}
}

// Fields of embedded structs are the outer object's, as in encoding/json.
func TestDecodeJSONStrictEmbedded(t *testing.T) {
	type Extra struct { // exported: encoding/json cannot set a pointer to an unexported one
		Note string `json:"note"`
	}
	type withEmbedded struct {
		testLine
		*Extra
	}
	var v withEmbedded
	if err := platform.DecodeJSONStrict([]byte(`{"sku": "A1", "quantity": 2, "note": "gift"}`), &v); err != nil {
		t.Fatal(err)
	}
	if v.SKU != "A1" || v.Quantity != 2 || v.Extra == nil || v.Note != "gift" {
		t.Errorf("decoded %+v", v)
	}
	if err := platform.DecodeJSONStrict([]byte(`{"testLine": {}}`), &v); err == nil || !strings.Contains(err.Error(), `unknown field "testLine"`) {
		t.Errorf("embedded struct's own name: %v, want unknown field", err)
	}
}
