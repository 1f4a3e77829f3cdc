package httpapi_test

import (
	"net/http"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/labstack/echo/v4"
	"go.yaml.in/yaml/v3"

	"github.com/spanmart/spanmart/services/orders/api"
	"github.com/spanmart/spanmart/services/orders/internal/app"
	"github.com/spanmart/spanmart/services/orders/internal/httpapi"
	"github.com/spanmart/spanmart/services/orders/internal/order"
)

// TestOpenAPIMatchesRoutes: every public route is in api/openapi.yaml and every operation of the
// document is a route. Operational endpoints (/healthz, /metrics, ...) and POST /events (the
// CloudEvents consumer, not public) are registered elsewhere and not part of the document.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	data, err := os.ReadFile("../../api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string                               `yaml:"openapi"`
		Paths   map[string]map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Errorf("openapi = %q, want 3.1.x", doc.OpenAPI)
	}
	methods := map[string]bool{"get": true, "put": true, "post": true, "delete": true, "patch": true, "head": true, "options": true}
	var documented []string
	for path, ops := range doc.Paths {
		for m := range ops {
			if methods[m] {
				documented = append(documented, strings.ToUpper(m)+" "+path)
			}
		}
	}

	e := echo.New()
	httpapi.Register(e, app.New(nil, nil), httpapi.NewCustomers(nil))
	param := regexp.MustCompile(`:(\w+)`)
	var routes []string
	for _, r := range e.Routes() {
		if r.Method == echo.RouteNotFound {
			continue
		}
		routes = append(routes, r.Method+" "+param.ReplaceAllString(r.Path, "{$1}"))
	}
	sort.Strings(documented)
	sort.Strings(routes)
	if diff := cmp.Diff(documented, routes); diff != "" {
		t.Errorf("openapi.yaml (-) and the router (+) differ:\n%s", diff)
	}
	if len(routes) == 0 || !strings.Contains(strings.Join(routes, ","), http.MethodPost+" /v1/orders") {
		t.Errorf("routes = %v", routes)
	}
}

// TestOpenAPISchemas: the request and response schemas name exactly the JSON fields of the types
// the handler decodes and encodes, and the payment schemas state the domain's rules (the methods,
// the one field each takes, the konbini stores, the limits, when the e-mail is required).
func TestOpenAPISchemas(t *testing.T) {
	data, err := os.ReadFile("../../api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]map[string]any `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	schema := func(name string) map[string]any {
		t.Helper()
		s, ok := doc.Components.Schemas[name]
		if !ok {
			t.Fatalf("no schema %s", name)
		}
		return s
	}
	props := func(s map[string]any) map[string]any {
		p, _ := s["properties"].(map[string]any)
		return p
	}
	names := func(s map[string]any) []string {
		var out []string
		for k := range props(s) {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	strs := func(v any) []string {
		var out []string
		for _, x := range v.([]any) {
			out = append(out, x.(string))
		}
		return out
	}

	for name, v := range map[string]any{
		"PlaceOrderRequest":   app.PlaceOrderRequest{},
		"Order":               api.Order{},
		"OrderPayment":        api.Payment{},
		"PaymentInstructions": api.Instructions{},
	} {
		if diff := cmp.Diff(jsonFields(reflect.TypeOf(v)), names(schema(name))); diff != "" {
			t.Errorf("%s: Go fields (-) and schema properties (+) differ:\n%s", name, diff)
		}
	}
	bank := props(schema("PaymentInstructions"))["bank"].(map[string]any)
	if diff := cmp.Diff(jsonFields(reflect.TypeOf(api.BankAccount{})), names(bank)); diff != "" {
		t.Errorf("PaymentInstructions.bank differs:\n%s", diff)
	}
	req := schema("PlaceOrderRequest")
	if diff := cmp.Diff([]string{"lines", "payment"}, strs(req["required"])); diff != "" {
		t.Errorf("PlaceOrderRequest.required:\n%s", diff)
	}
	if got := props(req)["email"].(map[string]any)["maxLength"]; got != order.MaxEmailLen {
		t.Errorf("email maxLength = %v, want %d", got, order.MaxEmailLen)
	}
	var slip []string
	for _, m := range order.PaymentMethods() {
		if m.UsesSlip() {
			slip = append(slip, string(m))
		}
	}
	ifMethod := req["if"].(map[string]any)["properties"].(map[string]any)["payment"].(map[string]any)["properties"].(map[string]any)["method"].(map[string]any)
	if diff := cmp.Diff(slip, strs(ifMethod["enum"])); diff != "" || !cmp.Equal([]string{"email"}, strs(req["then"].(map[string]any)["required"])) {
		t.Errorf("email is required for the slip methods %v: if/then differs:\n%s", slip, diff)
	}

	// One variant per method, with the method and its one detail field, closed to any other.
	variants := map[string]map[string]any{}
	for _, ref := range schema("PaymentRequest")["oneOf"].([]any) {
		name := strings.TrimPrefix(ref.(map[string]any)["$ref"].(string), "#/components/schemas/")
		v := schema(name)
		method := props(v)["method"].(map[string]any)["const"].(string)
		variants[method] = v
		if mapped := schema("PaymentRequest")["discriminator"].(map[string]any)["mapping"].(map[string]any)[method]; mapped != ref.(map[string]any)["$ref"] {
			t.Errorf("discriminator maps %s to %v, oneOf has %v", method, mapped, ref)
		}
	}
	for _, m := range order.PaymentMethods() {
		v, ok := variants[string(m)]
		if !ok {
			t.Errorf("no payment variant for method %s", m)
			continue
		}
		want := []string{"method"}
		if f := m.DetailField(); f != "" {
			want = append(want, f)
		}
		sort.Strings(want)
		if diff := cmp.Diff(want, names(v)); diff != "" || v["additionalProperties"] != false {
			t.Errorf("%s variant: properties differ (additionalProperties %v):\n%s", m, v["additionalProperties"], diff)
		}
		required := strs(v["required"])
		sort.Strings(required)
		if !cmp.Equal(want, required) {
			t.Errorf("%s variant: required = %v, want %v", m, required, want)
		}
	}
	if len(variants) != len(order.PaymentMethods()) {
		t.Errorf("payment variants %v, want one per method", variants)
	}
	if diff := cmp.Diff(order.KonbiniStores(), strs(props(variants["konbini"])["store"].(map[string]any)["enum"])); diff != "" {
		t.Errorf("konbini stores differ:\n%s", diff)
	}
	if got := props(variants["card"])["payment_method"].(map[string]any)["maxLength"]; got != order.MaxPaymentMethodIDLen {
		t.Errorf("card payment_method maxLength = %v, want %d", got, order.MaxPaymentMethodIDLen)
	}
	var methods []string
	for _, m := range order.PaymentMethods() {
		methods = append(methods, string(m))
	}
	if diff := cmp.Diff(methods, strs(props(schema("OrderPayment"))["method"].(map[string]any)["enum"])); diff != "" {
		t.Errorf("OrderPayment.method enum differs:\n%s", diff)
	}
}

// jsonFields returns the JSON names of a struct's fields, sorted (a field with a custom encoding
// counts as one name).
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}
