package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/spanmart/spanmart/pkg/platform/platformtest"
	"github.com/spanmart/spanmart/services/orders/api"
	"github.com/spanmart/spanmart/services/orders/internal/orderstest"
)

// orderHeaders are the headers of the default customer's request with a fresh Idempotency-Key and
// contentType ("" sends none).
func orderHeaders(t *testing.T, contentType string) map[string]string {
	t.Helper()
	h := map[string]string{"Authorization": bearer(t, defaultCustomer), api.HeaderIdempotencyKey: uuid.NewString()}
	if contentType != "" {
		h["Content-Type"] = contentType
	}
	return h
}

// TestHostileOrderRequests: every request below is refused with a 4xx problem that says what is
// wrong in the API's words, and nothing is stored.
func TestHostileOrderRequests(t *testing.T) {
	f := newFixture(t)
	const orders, wallet = "/v1/orders", `"payment": {"method": "wallet"}`
	cases := []platformtest.Hostile{
		{Name: "no Content-Type", Path: orders, Header: orderHeaders(t, ""), Body: orderBody, Status: 415, Detail: "Content-Type must be application/json"},
		{Name: "text/plain", Path: orders, Header: orderHeaders(t, "text/plain"), Body: orderBody, Status: 415, Detail: `got "text/plain"`},
		{Name: "form", Path: orders, Header: orderHeaders(t, "application/x-www-form-urlencoded"), Body: orderBody, Status: 415, Detail: "must be application/json"},
		{Name: "latin-1", Path: orders, Header: orderHeaders(t, "application/json; charset=iso-8859-1"), Body: orderBody, Status: 415, Detail: "must be application/json"},
		{Name: "customer_id in another case", Path: orders, Header: orderHeaders(t, "application/json"), Body: `{"Customer_ID": "c", "lines": [{"sku": "A1", "quantity": 1}], ` + wallet + `}`, Status: 400, Detail: `unknown field "Customer_ID"`},
		{Name: "sku in another case", Path: orders, Header: orderHeaders(t, "application/json"), Body: `{"customer_id": "cust-1", "lines": [{"SKU": "A1", "quantity": 1}], ` + wallet + `}`, Status: 400, Detail: `unknown field "lines[0].SKU"`},
		{Name: "duplicate customer_id", Path: orders, Header: orderHeaders(t, "application/json"), Body: `{"customer_id": "cust-1", "customer_id": "d", "lines": [{"sku": "A1", "quantity": 1}], ` + wallet + `}`, Status: 400, Detail: "customer_id is given twice"},
		{Name: "duplicate quantity", Path: orders, Header: orderHeaders(t, "application/json"), Body: `{"customer_id": "cust-1", "lines": [{"sku": "A1", "quantity": 1, "quantity": 100}], ` + wallet + `}`, Status: 400, Detail: "lines[0].quantity is given twice"},
		{Name: "duplicate payment method", Path: orders, Header: orderHeaders(t, "application/json"), Body: `{"customer_id": "cust-1", "lines": [{"sku": "A1", "quantity": 1}], "payment": {"method": "card", "method": "wallet"}}`, Status: 400, Detail: "payment.method is given twice"},
		{Name: "quantity as a string", Path: orders, Header: orderHeaders(t, "application/json"), Body: `{"customer_id": "cust-1", "lines": [{"sku": "A1", "quantity": "2"}], ` + wallet + `}`, Status: 400, Detail: "lines[0].quantity must be an integer, got a string"},
		{Name: "quantity with a fraction", Path: orders, Header: orderHeaders(t, "application/json"), Body: `{"customer_id": "cust-1", "lines": [{"sku": "A1", "quantity": 1.5}], ` + wallet + `}`, Status: 400, Detail: "lines[0].quantity must be an integer, got 1.5"},
		{Name: "quantity overflowing", Path: orders, Header: orderHeaders(t, "application/json"), Body: `{"customer_id": "cust-1", "lines": [{"sku": "A1", "quantity": 9223372036854775808}], ` + wallet + `}`, Status: 400, Detail: "out of range"},
		{Name: "customer_id a number", Path: orders, Header: orderHeaders(t, "application/json"), Body: `{"customer_id": 7, "lines": [{"sku": "A1", "quantity": 1}], ` + wallet + `}`, Status: 400, Detail: "customer_id must be a string, got a number"},
		{Name: "lines an object", Path: orders, Header: orderHeaders(t, "application/json"), Body: `{"customer_id": "cust-1", "lines": {"sku": "A1"}, ` + wallet + `}`, Status: 400, Detail: "lines must be an array, got an object"},
		{Name: "payment an array", Path: orders, Header: orderHeaders(t, "application/json"), Body: `{"customer_id": "cust-1", "lines": [{"sku": "A1", "quantity": 1}], "payment": []}`, Status: 400, Detail: "payment must be an object, got an array"},
		{Name: "payment method a number", Path: orders, Header: orderHeaders(t, "application/json"), Body: `{"customer_id": "cust-1", "lines": [{"sku": "A1", "quantity": 1}], "payment": {"method": 1}}`, Status: 400, Detail: "payment.method is not a string"},
		{Name: "body an array", Path: orders, Header: orderHeaders(t, "application/json"), Body: `[]`, Status: 400, Detail: "the body must be an object, got an array"},
		{Name: "invalid UTF-8 in customer_id", Path: orders, Header: orderHeaders(t, "application/json"), Body: "{\"customer_id\": \"c\xff\", \"lines\": [{\"sku\": \"A1\", \"quantity\": 1}], " + wallet + "}", Status: 400, Detail: "customer_id is not valid UTF-8"},
		{Name: "invalid UTF-8 in email", Path: orders, Header: orderHeaders(t, "application/json"), Body: "{\"customer_id\": \"cust-1\", \"email\": \"\xe3\x81a@example.com\", \"lines\": [{\"sku\": \"A1\", \"quantity\": 1}], " + wallet + "}", Status: 400, Detail: "email is not valid UTF-8"},
		{Name: "unpaired surrogate in customer_id", Path: orders, Header: orderHeaders(t, "application/json"), Body: `{"customer_id": "c\udc00", "lines": [{"sku": "A1", "quantity": 1}], ` + wallet + `}`, Status: 400, Detail: "customer_id has a \\u escape of an unpaired UTF-16 surrogate"},
		{Name: "NUL in customer_id", Path: orders, Header: orderHeaders(t, "application/json"), Body: `{"customer_id": "c\u0000d", "lines": [{"sku": "A1", "quantity": 1}], ` + wallet + `}`, Status: 400, Detail: "customer_id has the control or format character U+0000 at byte 1"},
		{Name: "escape in customer_id", Path: orders, Header: orderHeaders(t, "application/json"), Body: `{"customer_id": "\u001b[2J", "lines": [{"sku": "A1", "quantity": 1}], ` + wallet + `}`, Status: 400, Detail: "customer_id has the control or format character U+001B"},
		{Name: "right-to-left override in sku", Path: orders, Header: orderHeaders(t, "application/json"), Body: `{"customer_id": "cust-1", "lines": [{"sku": "A1\u202e", "quantity": 1}], ` + wallet + `}`, Status: 400, Detail: "lines[0]: sku has the control or format character U+202E"},
		{Name: "newline in email", Path: orders, Header: orderHeaders(t, "application/json"), Body: `{"customer_id": "cust-1", "email": "a@example.com\nBcc: b@example.com", "lines": [{"sku": "A1", "quantity": 1}], ` + wallet + `}`, Status: 400, Detail: "email has the control or format character U+000A"},
		{Name: "control in store", Path: orders, Header: orderHeaders(t, "application/json"), Body: `{"customer_id": "cust-1", "email": "a@example.com", "lines": [{"sku": "A1", "quantity": 1}], "payment": {"method": "konbini", "store": "lawson\u0007"}}`, Status: 400, Detail: "payment.store has the control or format character U+0007"},
		{Name: "control in payment_method", Path: orders, Header: orderHeaders(t, "application/json"), Body: `{"customer_id": "cust-1", "lines": [{"sku": "A1", "quantity": 1}], "payment": {"method": "card", "payment_method": "pm_\u0000"}}`, Status: 400, Detail: "payment.payment_method has the control or format character U+0000"},
	}
	platformtest.RefuseAll(t, f.url, cases)
	if s := orderstest.Read(t, f.client); len(s.Orders) != 0 || len(s.Outbox) != 0 || len(s.Keys) != 0 {
		t.Errorf("rejected requests wrote %d orders, %d outbox rows, %d keys", len(s.Orders), len(s.Outbox), len(s.Keys))
	}
}

// Content-Type parameters are allowed; a charset must be UTF-8.
func TestContentTypeWithParameters(t *testing.T) {
	f := newFixture(t)
	for _, ct := range []string{"application/json; charset=utf-8", "application/json;charset=UTF-8"} {
		r := f.send(t, http.MethodPost, "/v1/orders", map[string]string{api.HeaderIdempotencyKey: uuid.NewString(), "Content-Type": ct}, orderBody)
		if r.status != http.StatusCreated {
			t.Errorf("Content-Type %q: %d %s, want 201", ct, r.status, r.body)
		}
	}
}

// A body shorter than its Content-Length is a 400 and not an error in the log.
func TestShortOrderBody(t *testing.T) {
	f := newFixture(t)
	platformtest.Refuse(t, f.url, platformtest.Hostile{Path: "/v1/orders", Header: orderHeaders(t, "application/json"), Body: orderBody, ShortBy: 10,
		Status: http.StatusBadRequest, Detail: "the request body could not be read"})
	if line := f.logs.Find(t, "POST /v1/orders 400"); line["severity"] != "WARNING" {
		t.Errorf("access line severity = %v, want WARNING", line["severity"])
	}
	for _, e := range f.logs.Entries(t) {
		if e["severity"] == "ERROR" {
			t.Errorf("logged at ERROR: %v", e)
		}
	}
	if s := orderstest.Read(t, f.client); len(s.Orders) != 0 || len(s.Keys) != 0 {
		t.Errorf("a cut body wrote %d orders, %d keys", len(s.Orders), len(s.Keys))
	}
}

// An order id in upper case is the same order: GET and cancel find it.
func TestUpperCaseOrderID(t *testing.T) {
	f := newFixture(t)
	id := f.place(t)
	upper := strings.ToUpper(id)
	g := f.do(t, http.MethodGet, "/v1/orders/"+upper, "", "")
	if g.status != http.StatusOK || decode[api.Order](t, g.body).ID != id {
		t.Fatalf("GET %s = %d %s, want 200 with order %s", upper, g.status, g.body, id)
	}
	c := f.do(t, http.MethodPost, "/v1/orders/"+upper+"/cancel", "cancel-upper", "")
	if c.status != http.StatusAccepted || decode[api.Order](t, c.body).ID != id {
		t.Fatalf("cancel %s = %d %s, want 202 with order %s", upper, c.status, c.body, id)
	}
	// The same key with the id in lower case is the same cancellation, replayed.
	again := f.do(t, http.MethodPost, "/v1/orders/"+id+"/cancel", "cancel-upper", "")
	if again.status != http.StatusAccepted || again.header.Get(api.HeaderIdempotentReplayed) != "true" {
		t.Errorf("cancel again in lower case = %d %q %s, want the replay", again.status, again.header.Get(api.HeaderIdempotentReplayed), again.body)
	}
}

// HEAD answers on GET /v1/orders/{id} as GET does, without the body.
func TestHeadOrder(t *testing.T) {
	f := newFixture(t)
	id := f.place(t)
	for path, want := range map[string]int{
		"/v1/orders/" + id: http.StatusOK,
		"/v1/orders/7d444840-9dc0-11d1-b245-5ffdce74fad2": http.StatusNotFound,
		"/v1/products": http.StatusOK,
		"/healthz":     http.StatusOK,
	} {
		r := f.send(t, http.MethodHead, path, nil, "")
		if r.status != want || len(r.body) != 0 {
			t.Errorf("HEAD %s = %d with %d body bytes, want %d and none", path, r.status, len(r.body), want)
		}
	}
}

// A cancellation's body, when there is one, is JSON and strict like an order's.
func TestCancelBody(t *testing.T) {
	f := newFixture(t)
	id := f.place(t)
	path := "/v1/orders/" + id + "/cancel"
	platformtest.RefuseAll(t, f.url, []platformtest.Hostile{
		{Name: "text body", Path: path, Header: orderHeaders(t, "text/plain"), Body: "{}", Status: http.StatusUnsupportedMediaType},
		{Name: "no Content-Type", Path: path, Header: orderHeaders(t, ""), Body: "{}", Status: http.StatusUnsupportedMediaType},
		{Name: "a member", Path: path, Header: orderHeaders(t, "application/json"), Body: `{"reason": "x"}`, Status: http.StatusBadRequest},
		{Name: "trailing data", Path: path, Header: orderHeaders(t, "application/json"), Body: `{} {}`, Status: http.StatusBadRequest},
		{Name: "invalid UTF-8", Path: path, Header: orderHeaders(t, "application/json"), Body: "{\"\xff\": 1}", Status: http.StatusBadRequest},
	})
	if r := f.do(t, http.MethodPost, path, uuid.NewString(), "{}"); r.status != http.StatusAccepted {
		t.Errorf("cancel with {} = %d %s, want 202", r.status, r.body)
	}
}

// TestHostileRequestsPerEndpoint: each order endpoint, given what an attacker or a broken client
// sends (malformed or truncated JSON, wrong types, unknown fields, a price of its own, huge bodies,
// too many lines, negative or overflowing quantities, unknown SKUs, bad ids, a missing or reused
// Idempotency-Key, another customer's id or order, and tokens that are forged, expired, for
// another audience or from another issuer), answers a 4xx problem that says what is wrong, and
// stores nothing: every table orders writes has the rows it had before, and the orders are as
// they were.
func TestHostileRequestsPerEndpoint(t *testing.T) {
	f := newFixture(t)
	mine := f.place(t)
	theirs := decode[api.Order](t, f.doAs(t, "cust-2", http.MethodPost, "/v1/orders", uuid.NewString(), strings.Replace(orderBody, `"customer_id": "cust-1", `, "", 1)).body).ID
	if r := f.do(t, http.MethodPost, "/v1/orders", "used-key", orderBody); r.status != http.StatusCreated {
		t.Fatalf("POST = %d %s", r.status, r.body)
	}
	cancelled := f.place(t)
	if r := f.do(t, http.MethodPost, "/v1/orders/"+cancelled+"/cancel", "used-cancel-key", ""); r.status != http.StatusAccepted {
		t.Fatalf("cancel = %d %s", r.status, r.body)
	}
	before := orderstest.Read(t, f.client)

	lines := func(n int) string {
		var ls []string
		for i := range n {
			ls = append(ls, fmt.Sprintf(`{"sku": "S%d", "quantity": 1}`, i))
		}
		return `{"lines": [` + strings.Join(ls, ", ") + `], "payment": {"method": "wallet"}}`
	}
	line := func(l string) string { return `{"lines": [` + l + `], "payment": {"method": "wallet"}}` }
	huge := `{"lines": [{"sku": "A1", "quantity": 1}], "payment": {"method": "wallet"}, "email": "` + strings.Repeat("a", 2<<20) + `@example.com"}`
	bad := badTokens(t)
	const orders, unknown = "/v1/orders", "/v1/orders/7d444840-9dc0-11d1-b245-5ffdce74fad2"
	type request struct {
		name, method, path string
		auth               string // "" is the default customer's token; "none" sends none
		key                string // "" is a fresh key; "none" sends none
		body               string
		status             int
		detail             string
	}
	tests := []request{
		// POST /v1/orders
		{name: "malformed JSON", method: "POST", path: orders, body: `{"lines": [{"sku": "A1",, }]}`, status: 400, detail: "not a valid order"},
		{name: "truncated JSON", method: "POST", path: orders, body: orderBody[:len(orderBody)/2], status: 400, detail: "not a valid order"},
		{name: "empty body", method: "POST", path: orders, body: " ", status: 400, detail: "not a valid order"},
		{name: "quantity a string", method: "POST", path: orders, body: line(`{"sku": "A1", "quantity": "1"}`), status: 400, detail: "lines[0].quantity must be an integer, got a string"},
		{name: "lines a string", method: "POST", path: orders, body: `{"lines": "A1", "payment": {"method": "wallet"}}`, status: 400, detail: "lines must be an array, got a string"},
		{name: "unknown field", method: "POST", path: orders, body: `{"lines": [{"sku": "A1", "quantity": 1}], "payment": {"method": "wallet"}, "coupon": "FREE"}`, status: 400, detail: `unknown field "coupon"`},
		{name: "a price of the client's", method: "POST", path: orders, body: line(`{"sku": "A1", "quantity": 1, "unit_price_minor": -1000}`), status: 400, detail: `unknown field "lines[0].unit_price_minor"`},
		{name: "a total of the client's", method: "POST", path: orders, body: `{"lines": [{"sku": "A1", "quantity": 1}], "payment": {"method": "wallet"}, "total_minor": 1}`, status: 400, detail: `unknown field "total_minor"`},
		{name: "huge body", method: "POST", path: orders, body: huge, status: 413, detail: "request body exceeds"},
		{name: "51 lines", method: "POST", path: orders, body: lines(51), status: 400, detail: "1 to 50 lines, got 51"},
		{name: "negative quantity", method: "POST", path: orders, body: line(`{"sku": "A1", "quantity": -1}`), status: 400, detail: "quantity -1 is not in 1..100"},
		{name: "zero quantity", method: "POST", path: orders, body: line(`{"sku": "A1", "quantity": 0}`), status: 400, detail: "quantity 0 is not in 1..100"},
		{name: "overflowing quantity", method: "POST", path: orders, body: line(`{"sku": "A1", "quantity": 18446744073709551617}`), status: 400, detail: "out of range"},
		{name: "quantity in exponent", method: "POST", path: orders, body: line(`{"sku": "A1", "quantity": 1e3}`), status: 400, detail: "lines[0].quantity"},
		{name: "unknown SKU", method: "POST", path: orders, body: line(`{"sku": "NOPE", "quantity": 1}`), status: 422, detail: `sku "NOPE"`},
		{name: "no Idempotency-Key", method: "POST", path: orders, key: "none", body: orderBody, status: 400, detail: "Idempotency-Key is required"},
		{name: "Idempotency-Key too long", method: "POST", path: orders, key: strings.Repeat("k", 256), body: orderBody, status: 400, detail: "Idempotency-Key is required (1 to 255 characters)"},
		{name: "Idempotency-Key reused for another order", method: "POST", path: orders, key: "used-key", body: line(`{"sku": "A1", "quantity": 3}`), status: 422, detail: "idempotency key reused with a different request"},
		{name: "another customer's id", method: "POST", path: orders, body: strings.Replace(orderBody, "cust-1", "cust-2", 1), status: 403, detail: "customer_id must be the signed-in customer's id"},
		// GET /v1/orders/{id}
		{name: "not a UUID", method: "GET", path: "/v1/orders/not-a-uuid", status: 400, detail: "is not a UUID"},
		{name: "a UUID and more", method: "GET", path: "/v1/orders/" + mine + "0", status: 400, detail: "is not a UUID"},
		{name: "a UUID without hyphens", method: "GET", path: "/v1/orders/" + strings.ReplaceAll(mine, "-", ""), status: 400, detail: "is not a UUID"},
		{name: "an encoded NUL", method: "GET", path: "/v1/orders/%00", status: 400, detail: "is not a UUID"},
		{name: "unknown order", method: "GET", path: unknown, status: 404, detail: "order not found"},
		{name: "another customer's order", method: "GET", path: "/v1/orders/" + theirs, status: 404, detail: "order not found"},
		// POST /v1/orders/{id}/cancel
		{name: "cancel: not a UUID", method: "POST", path: "/v1/orders/x/cancel", status: 400, detail: "is not a UUID"},
		{name: "cancel: unknown order", method: "POST", path: unknown + "/cancel", status: 404, detail: "order not found"},
		{name: "cancel: another customer's order", method: "POST", path: "/v1/orders/" + theirs + "/cancel", status: 404, detail: "order not found"},
		{name: "cancel: no Idempotency-Key", method: "POST", path: "/v1/orders/" + mine + "/cancel", key: "none", status: 400, detail: "Idempotency-Key is required"},
		{name: "cancel: key reused for another order", method: "POST", path: "/v1/orders/" + mine + "/cancel", key: "used-cancel-key", status: 422, detail: "idempotency key reused with a different request"},
		{name: "cancel: a body", method: "POST", path: "/v1/orders/" + mine + "/cancel", body: `{"refund_to": "elsewhere"}`, status: 400, detail: "takes no body, or an empty JSON object"},
		{name: "cancel: truncated JSON", method: "POST", path: "/v1/orders/" + mine + "/cancel", body: `{`, status: 400, detail: "takes no body, or an empty JSON object"},
		{name: "cancel: huge body", method: "POST", path: "/v1/orders/" + mine + "/cancel", body: huge, status: 413, detail: "request body exceeds"},
	}
	for name, auth := range bad {
		if auth == "" {
			auth = "none"
		}
		tests = append(tests,
			request{name: name + " token: place", method: "POST", path: orders, auth: auth, body: orderBody, status: 401, detail: "ID token"},
			request{name: name + " token: read", method: "GET", path: "/v1/orders/" + mine, auth: auth, status: 401, detail: "ID token"},
			request{name: name + " token: cancel", method: "POST", path: "/v1/orders/" + mine + "/cancel", auth: auth, status: 401, detail: "ID token"})
	}
	var cases []platformtest.Hostile
	for _, tt := range tests {
		contentType := ""
		if tt.body != "" {
			contentType = "application/json"
		}
		h := orderHeaders(t, contentType)
		switch tt.key {
		case "":
		case "none":
			delete(h, api.HeaderIdempotencyKey)
		default:
			h[api.HeaderIdempotencyKey] = tt.key
		}
		switch tt.auth {
		case "":
		case "none":
			delete(h, "Authorization")
		default:
			h["Authorization"] = tt.auth
		}
		cases = append(cases, platformtest.Hostile{Name: tt.name, Method: tt.method, Path: tt.path, Header: h, Body: tt.body, Status: tt.status, Detail: tt.detail})
	}
	platformtest.RefuseAll(t, f.url, cases)
	after := orderstest.Read(t, f.client)
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("hostile requests changed rows (-before +after):\n%s", diff)
	}
	if len(after.Orders) != 4 || len(after.Keys) != 5 {
		t.Errorf("%d orders and %d keys, want the 4 and 5 made before", len(after.Orders), len(after.Keys))
	}
}
