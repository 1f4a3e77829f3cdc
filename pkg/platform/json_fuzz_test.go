package platform_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/spanmart/spanmart/pkg/platform"
)

// fuzzRequest has the shapes an API request has: strings, integers, a list of objects, a nested
// object, a map and an optional pointer.
type fuzzRequest struct {
	Name  string `json:"name"`
	Count int64  `json:"count"`
	Lines []struct {
		SKU      string `json:"sku"`
		Quantity int64  `json:"quantity"`
	} `json:"lines"`
	Meta  map[string]string `json:"meta,omitempty"`
	Inner *struct {
		On bool `json:"on"`
	} `json:"inner,omitempty"`
}

// FuzzDecodeJSONStrict: the strict decoder never panics, every error it returns is a
// *JSONError (a 400 in the API's words), and what it accepts the standard decoder reads the
// same way: strict only ever refuses more.
func FuzzDecodeJSONStrict(f *testing.F) {
	for _, seed := range []string{
		`{"name":"a","count":1,"lines":[{"sku":"A1","quantity":2}],"meta":{"k":"v"},"inner":{"on":true}}`,
		`{"name":"a","name":"b"}`, `{"Name":"a"}`, `{"count":1.5}`, `{"count":"1"}`, `{"lines":[{"sku":1}]}`,
		`{"meta":{"k":1}}`, `{"inner":null}`, `{} {}`, `[]`, `"\ud800"`, "{\"name\":\"\xff\"}", `{"count":99999999999999999999}`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var strict fuzzRequest
		err := platform.DecodeJSONStrict(data, &strict)
		if err != nil {
			var je *platform.JSONError
			if !errors.As(err, &je) {
				t.Fatalf("error %T %v is not a *platform.JSONError", err, err)
			}
			return
		}
		var lenient fuzzRequest
		if err := json.Unmarshal(data, &lenient); err != nil {
			t.Fatalf("strict accepted %q, which encoding/json refuses: %v", data, err)
		}
		if !reflect.DeepEqual(strict, lenient) {
			t.Fatalf("strict read %q as %+v, encoding/json as %+v", data, strict, lenient)
		}
	})
}
