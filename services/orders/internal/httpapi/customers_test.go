package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/spanmart/spanmart/emulator/authemu"
	"github.com/spanmart/spanmart/services/orders/api"
	"github.com/spanmart/spanmart/services/orders/internal/app"
	"github.com/spanmart/spanmart/services/orders/internal/orderstest"
)

// badTokens are Authorization headers that must not pass, each for its own reason, all real
// tokens but for the malformed ones: signed by another key under the issuer's kid, expired, for
// another audience (another project), from another issuer, or not a token at all. "" sends no
// header.
func badTokens(t *testing.T) map[string]string {
	t.Helper()
	mint := func(c authemu.Claims, forge bool) string {
		t.Helper()
		c.Subject = defaultCustomer
		mint := issuer.Mint
		if forge {
			mint = issuer.Forge
		}
		tok, err := mint(c)
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + tok
	}
	good := bearer(t, defaultCustomer)
	return map[string]string{
		"no token":         "",
		"another scheme":   "Basic " + strings.TrimPrefix(good, "Bearer "),
		"malformed":        "Bearer not.a.jwt",
		"truncated":        good[:len(good)-10],
		"forged":           mint(authemu.Claims{}, true),
		"expired":          mint(authemu.Claims{IssuedAt: time.Now().Add(-2 * time.Hour)}, false),
		"another audience": mint(authemu.Claims{Audience: "another-project"}, false),
		"another issuer":   mint(authemu.Claims{Issuer: "https://securetoken.google.com/" + issuer.Audience()}, false),
		"a day long":       mint(authemu.Claims{Lifetime: 24 * time.Hour}, false),
	}
}

// TestUnauthenticated: every order route refuses a request without a valid customer token with a
// 401 problem and the challenge of RFC 6750, logs why at WARN (never the token), and stores
// nothing; the catalog stays public.
func TestUnauthenticated(t *testing.T) {
	f := newFixture(t)
	id := f.place(t)
	before := orderstest.Read(t, f.client)
	for name, auth := range badTokens(t) {
		for _, route := range []struct{ method, path, body string }{
			{http.MethodPost, "/v1/orders", orderBody},
			{http.MethodGet, "/v1/orders/" + id, ""},
			{http.MethodPost, "/v1/orders/" + id + "/cancel", ""},
		} {
			t.Run(name+" "+route.method+" "+route.path, func(t *testing.T) {
				headers := map[string]string{"Authorization": auth, api.HeaderIdempotencyKey: uuid.NewString()}
				if route.body != "" {
					headers["Content-Type"] = "application/json"
				}
				r := f.send(t, route.method, route.path, headers, route.body)
				checkProblem(t, r, http.StatusUnauthorized, "a valid ID token of a signed-in customer is required")
				want := `Bearer realm="orders", error="invalid_token"`
				if auth == "" {
					want = `Bearer realm="orders"` // RFC 6750 §3.1: no error code without credentials
				}
				if got := r.header.Get("WWW-Authenticate"); got != want {
					t.Errorf("WWW-Authenticate = %q, want %q", got, want)
				}
			})
		}
	}
	after := orderstest.Read(t, f.client)
	if len(after.Orders) != len(before.Orders) || len(after.Keys) != len(before.Keys) || len(after.Outbox) != len(before.Outbox) || len(after.Timeline) != len(before.Timeline) {
		t.Errorf("refused requests wrote rows: %d→%d orders, %d→%d keys, %d→%d outbox, %d→%d timeline",
			len(before.Orders), len(after.Orders), len(before.Keys), len(after.Keys), len(before.Outbox), len(after.Outbox), len(before.Timeline), len(after.Timeline))
	}
	if got := after.Orders[0].Status; got != "PENDING" {
		t.Errorf("the order is %s after refused cancels, want PENDING", got)
	}

	// The log says why, at WARN, and never shows a token.
	refusals := 0
	for _, e := range f.logs.Entries(t) {
		line, _ := json.Marshal(e)
		for name, auth := range badTokens(t) {
			if tok := strings.TrimPrefix(auth, "Bearer "); len(tok) > 20 && strings.Contains(string(line), tok) {
				t.Errorf("a log line shows the %s token: %s", name, line)
			}
		}
		if e["message"] == "order API refused: no valid customer token" {
			refusals++
			if e["severity"] != "WARNING" || e["reason"] == "" {
				t.Errorf("refusal logged as %s", line)
			}
		}
	}
	if want := len(badTokens(t)) * 3; refusals != want {
		t.Errorf("%d refusals logged, want %d", refusals, want)
	}
	reasons := map[string]bool{}
	for _, e := range f.logs.Entries(t) {
		if r, ok := e["reason"].(string); ok && e["message"] == "order API refused: no valid customer token" {
			reasons[r] = true
		}
	}
	for _, why := range []string{"no bearer token", "token is expired", "invalid audience", "invalid issuer", "lifetime", "error in cryptographic primitive"} {
		found := false
		for r := range reasons {
			found = found || strings.Contains(r, why)
		}
		if !found {
			t.Errorf("no refusal logged with reason %q among %v", why, reasons)
		}
	}

	if r := f.send(t, http.MethodGet, "/v1/products", map[string]string{"Authorization": ""}, ""); r.status != http.StatusOK {
		t.Errorf("GET /v1/products without a token = %d %s, want 200", r.status, r.body)
	}
}

// withoutRequestID is a problem body without its request_id, and with the order id replaced, so
// that two answers can be compared byte for byte.
func withoutRequestID(t *testing.T, body []byte, id string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(strings.ReplaceAll(string(body), id, "ORDER_ID")), &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "request_id")
	return m
}

// TestOtherCustomersOrder: another customer's order is a 404 answered exactly as for an order that
// does not exist (status, headers, body but the request id), for GET and for a cancellation,
// which changes nothing.
func TestOtherCustomersOrder(t *testing.T) {
	f := newFixture(t)
	id := f.place(t) // the default customer's
	unknown := uuid.NewString()
	before := orderstest.Read(t, f.client)
	for _, route := range []struct{ method, suffix string }{{http.MethodGet, ""}, {http.MethodPost, "/cancel"}, {http.MethodHead, ""}} {
		key := uuid.NewString()
		foreign := f.doAs(t, "cust-2", route.method, "/v1/orders/"+id+route.suffix, key, "")
		none := f.doAs(t, "cust-2", route.method, "/v1/orders/"+unknown+route.suffix, uuid.NewString(), "")
		if foreign.status != http.StatusNotFound || none.status != http.StatusNotFound {
			t.Errorf("%s another's order = %d %s, an unknown order = %d; want 404 both", route.method, foreign.status, foreign.body, none.status)
			continue
		}
		for _, h := range []string{"Content-Type", "WWW-Authenticate", "Location"} {
			if a, b := foreign.header.Get(h), none.header.Get(h); a != b {
				t.Errorf("%s: %s %q, for an unknown order %q", route.method, h, a, b)
			}
		}
		if len(foreign.body) != len(none.body) {
			t.Errorf("%s: bodies of %d and %d bytes", route.method, len(foreign.body), len(none.body))
		}
		if route.method != http.MethodHead {
			if diff := cmp.Diff(withoutRequestID(t, none.body, unknown), withoutRequestID(t, foreign.body, id)); diff != "" {
				t.Errorf("%s: another's order and an unknown one differ (-unknown +another's):\n%s", route.method, diff)
			}
		}
	}
	after := orderstest.Read(t, f.client)
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("another customer's requests changed rows (-before +after):\n%s", diff)
	}
	// The owner still reads and cancels it.
	if r := f.do(t, http.MethodGet, "/v1/orders/"+id, "", ""); r.status != http.StatusOK {
		t.Errorf("the owner's GET = %d %s", r.status, r.body)
	}
	if r := f.do(t, http.MethodPost, "/v1/orders/"+id+"/cancel", uuid.NewString(), ""); r.status != http.StatusAccepted {
		t.Errorf("the owner's cancel = %d %s", r.status, r.body)
	}
}

// TestCustomerFromToken: an order without customer_id is the signed-in customer's, and is the same
// request as one naming that customer (one key, one order); naming another customer is a 403
// problem that says nothing of that customer, and stores nothing.
func TestCustomerFromToken(t *testing.T) {
	f := newFixture(t)
	implicit := strings.Replace(orderBody, `"customer_id": "cust-1", `, "", 1)
	r := f.doAs(t, "uid-Zx81", http.MethodPost, "/v1/orders", "k-implicit", implicit)
	if r.status != http.StatusCreated || decode[api.Order](t, r.body).CustomerID != "uid-Zx81" {
		t.Fatalf("POST without customer_id = %d %s, want 201 for uid-Zx81", r.status, r.body)
	}
	r = f.do(t, http.MethodPost, "/v1/orders", "k-explicit", implicit)
	again := f.do(t, http.MethodPost, "/v1/orders", "k-explicit", orderBody)
	if r.status != http.StatusCreated || again.status != http.StatusCreated || again.header.Get(api.HeaderIdempotentReplayed) != "true" ||
		decode[api.Order](t, again.body).ID != decode[api.Order](t, r.body).ID {
		t.Errorf("the same order without and with customer_id under one key = %d, %d %q; want one order, replayed", r.status, again.status, again.header.Get(api.HeaderIdempotentReplayed))
	}
	before := orderstest.Read(t, f.client)
	p := checkProblem(t, f.doAs(t, "cust-2", http.MethodPost, "/v1/orders", "k-other", orderBody), http.StatusForbidden, "customer_id must be the signed-in customer's id")
	if strings.Contains(p.Detail, "cust-1") {
		t.Errorf("the 403 names the other customer: %q", p.Detail)
	}
	if diff := cmp.Diff(before, orderstest.Read(t, f.client)); diff != "" {
		t.Errorf("a 403 wrote rows (-before +after):\n%s", diff)
	}
}

// TestIdempotencyKeyPerCustomer: an Idempotency-Key is the customer's own. Another customer
// sending the same key (with the same order, or another) makes its own order and never gets the
// first customer's back; likewise for a cancellation.
func TestIdempotencyKeyPerCustomer(t *testing.T) {
	f := newFixture(t)
	const key = "order-1" // a client library's counter: every customer's first order
	implicit := strings.Replace(orderBody, `"customer_id": "cust-1", `, "", 1)
	first := f.do(t, http.MethodPost, "/v1/orders", key, implicit)
	second := f.doAs(t, "cust-2", http.MethodPost, "/v1/orders", key, implicit)
	if first.status != http.StatusCreated || second.status != http.StatusCreated {
		t.Fatalf("POST = %d, %d %s; want 201, 201", first.status, second.status, second.body)
	}
	a, b := decode[api.Order](t, first.body), decode[api.Order](t, second.body)
	if a.ID == b.ID || b.CustomerID != "cust-2" || second.header.Get(api.HeaderIdempotentReplayed) != "" {
		t.Errorf("the second customer's order under the same key = %+v (replayed %q); the first's %s", b, second.header.Get(api.HeaderIdempotentReplayed), a.ID)
	}
	// A third customer replaying the first customer's exact request, its customer_id included.
	checkProblem(t, f.doAs(t, "cust-3", http.MethodPost, "/v1/orders", key, orderBody), http.StatusForbidden, "signed-in customer")
	s := orderstest.Read(t, f.client)
	if len(s.Orders) != 2 || len(s.Keys) != 2 {
		t.Errorf("%d orders, %d keys; want 2 and 2", len(s.Orders), len(s.Keys))
	}
	for _, k := range s.Keys {
		if k.ClientKey != key || (k.KeyHash != app.KeyHash(app.IdempotencyScope, "cust-1", key) && k.KeyHash != app.KeyHash(app.IdempotencyScope, "cust-2", key)) {
			t.Errorf("key row %+v", k)
		}
	}
	// Cancellations: each customer cancels its own order under the same key.
	if r := f.do(t, http.MethodPost, "/v1/orders/"+a.ID+"/cancel", "cancel-1", ""); r.status != http.StatusAccepted {
		t.Errorf("cust-1's cancel = %d %s", r.status, r.body)
	}
	r := f.doAs(t, "cust-2", http.MethodPost, "/v1/orders/"+b.ID+"/cancel", "cancel-1", "")
	if r.status != http.StatusAccepted || decode[api.Order](t, r.body).ID != b.ID || r.header.Get(api.HeaderIdempotentReplayed) != "" {
		t.Errorf("cust-2's cancel under cust-1's key = %d %q %s, want its own 202", r.status, r.header.Get(api.HeaderIdempotentReplayed), r.body)
	}
}
