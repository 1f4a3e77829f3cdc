package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"cloud.google.com/go/spanner"
	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/emulator/authemu"
	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/pkg/platform/platformtest"
	"github.com/spanmart/spanmart/pkg/spannertest"
	"github.com/spanmart/spanmart/services/orders/api"
	"github.com/spanmart/spanmart/services/orders/internal/app"
	"github.com/spanmart/spanmart/services/orders/internal/httpapi"
	"github.com/spanmart/spanmart/services/orders/internal/orderstest"
	"github.com/spanmart/spanmart/services/orders/internal/store"
)

var (
	env *spannertest.Env
	// issuer is the customers' identity provider of every test: the local stand-in of Identity
	// Platform, whose tokens the API verifies as it verifies Identity Platform's.
	issuer *authemu.Server
)

func TestMain(m *testing.M) {
	var err error
	if issuer, err = authemu.Start(context.Background(), authemu.Options{Audience: "spanmart-test"}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := spannertest.Main(m, &env)
	issuer.Close()
	os.Exit(code)
}

// defaultCustomer is whom the fixture's requests are signed in as.
const defaultCustomer = "cust-1"

type fixture struct {
	url    string
	client *spanner.Client
	nudges *atomic.Int64
	nudger *outboxlib.Nudger
	logs   *platformtest.Logs
}

// nudgeCount is the relay's count of nudge requests once every nudge made so far has gone out.
func (f *fixture) nudgeCount(t *testing.T) int64 {
	t.Helper()
	if err := f.nudger.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	return f.nudges.Load()
}

// tokens caches one token per customer: minting costs an RSA signature.
var tokens sync.Map

// bearer is the Authorization header of customer, signed in.
func bearer(t *testing.T, customer string) string {
	t.Helper()
	if tok, ok := tokens.Load(customer); ok {
		return tok.(string)
	}
	tok, err := issuer.Token(customer, customer+"@example.com")
	if err != nil {
		t.Fatal(err)
	}
	tokens.Store(customer, "Bearer "+tok)
	return "Bearer " + tok
}

// customersOf returns the guard of the order routes, trusting the test issuer.
func customersOf(t *testing.T) *httpapi.Customers {
	t.Helper()
	v, err := platform.NewIDTokenVerifier(platform.IDTokenVerifierConfig{Issuer: issuer.URL(), Audiences: []string{issuer.Audience()}})
	if err != nil {
		t.Fatal(err)
	}
	return httpapi.NewCustomers(v)
}

// newFixture serves the public API on a real platform server against a fresh, seeded database,
// with a fake relay counting nudges.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	client, _ := env.NewDatabase(t, dbschema.Orders)
	orderstest.Seed(t, client)
	nudges := new(atomic.Int64)
	relay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/nudge" {
			nudges.Add(1)
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(relay.Close)
	log, logs := platformtest.NewLogger(t, "orders")
	srv := platform.NewServer(platform.ServerOptions{Service: "orders", ErrorMapper: httpapi.ErrorMapper, Logger: log})
	nudger := outboxlib.NewNudger(relay.URL, "orders")
	httpapi.Register(srv.Echo, app.New(store.New(client), nudger), customersOf(t))
	ts := httptest.NewServer(srv.Echo)
	t.Cleanup(ts.Close)
	return &fixture{url: ts.URL, client: client, nudges: nudges, nudger: nudger, logs: logs}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request as the default customer.
func (f *fixture) do(t *testing.T, method, path, key, body string) response {
	t.Helper()
	return f.doAs(t, defaultCustomer, method, path, key, body)
}

// doAs sends a request signed in as customer ("": with no Authorization header).
func (f *fixture) doAs(t *testing.T, customer, method, path, key, body string) response {
	t.Helper()
	headers := map[string]string{"Authorization": ""}
	if customer != "" {
		headers["Authorization"] = bearer(t, customer)
	}
	if body != "" {
		headers["Content-Type"] = "application/json"
	}
	if key != "" {
		headers[api.HeaderIdempotencyKey] = key
	}
	return f.send(t, method, path, headers, body)
}

// send is do with the request's headers as given (no Content-Type unless headers has one): the
// default customer's Authorization unless headers has one ("" sends none).
func (f *fixture) send(t *testing.T, method, path string, headers map[string]string, body string) response {
	t.Helper()
	req, err := http.NewRequest(method, f.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := headers["Authorization"]; !ok {
		req.Header.Set("Authorization", bearer(t, defaultCustomer))
	}
	for k, v := range headers {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

const orderBody = `{"customer_id": "cust-1", "email": "ali@example.com", "lines": [{"sku": "A1", "quantity": 2}, {"sku": "B2", "quantity": 1}],
	"payment": {"method": "card", "payment_method": "pm_card_visa"}}`

func TestPlaceOrder(t *testing.T) {
	f := newFixture(t)
	resp := f.do(t, http.MethodPost, "/v1/orders", "key-1", orderBody)
	if resp.status != http.StatusCreated {
		t.Fatalf("POST = %d %s, want 201", resp.status, resp.body)
	}
	got := decode[api.Order](t, resp.body)
	want := api.Order{
		ID: got.ID, CustomerID: "cust-1", Email: "ali@example.com", Status: "PENDING", Currency: "JPY", TotalMinor: 1300, Version: 1,
		Language: "ja", Payment: &api.Payment{Method: "card", PaymentMethod: "pm_card_visa"},
		Lines: []api.Line{{SKU: "A1", Quantity: 2, UnitPriceMinor: 150, LineTotalMinor: 300}, {SKU: "B2", Quantity: 1, UnitPriceMinor: 1000, LineTotalMinor: 1000}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
	if loc := resp.header.Get("Location"); loc != "/v1/orders/"+got.ID {
		t.Errorf("Location = %q", loc)
	}
	if resp.header.Get(api.HeaderIdempotentReplayed) != "" {
		t.Error("a first response is marked replayed")
	}
	if n := f.nudgeCount(t); n != 1 {
		t.Errorf("relay nudged %d times, want 1", n)
	}

	s := orderstest.Read(t, f.client)
	if len(s.Orders) != 1 || len(s.Items) != 2 || len(s.Outbox) != 1 || len(s.Timeline) != 1 || len(s.Keys) != 1 {
		t.Fatalf("rows: %d orders, %d items, %d outbox, %d timeline, %d keys; want 1, 2, 1, 1, 1", len(s.Orders), len(s.Items), len(s.Outbox), len(s.Timeline), len(s.Keys))
	}
	o := s.Orders[0]
	if o.OrderId != got.ID || o.Status != "PENDING" || o.Version != 1 || o.TotalMinor != 1300 || o.Currency != "JPY" || o.CustomerId != "cust-1" || o.CreatedAt.IsZero() {
		t.Errorf("order row = %+v", o)
	}
	if o.PaymentMethod.StringVal != "card" || o.PaymentDetail.StringVal != "pm_card_visa" || o.Email.StringVal != "ali@example.com" || o.PaymentInstructions.Valid {
		t.Errorf("order row's payment = %v %v %v %v", o.PaymentMethod, o.PaymentDetail, o.Email, o.PaymentInstructions)
	}
	if it := s.Items[1]; it.LineNo != 2 || it.Sku != "B2" || it.Quantity != 1 || it.UnitPriceMinor != 1000 {
		t.Errorf("item row = %+v", it)
	}
	e := s.Outbox[0]
	if e.EventType != "order.created" || e.AggregateType != "order" || e.AggregateId != got.ID || e.AggregateVersion != 1 || !e.PendingShard.Valid || e.PublishedAt.Valid {
		t.Errorf("outbox row = %+v", e)
	}
	wantPayload := map[string]any{
		"order_id": got.ID, "customer_id": "cust-1", "status": "PENDING", "currency": "JPY", "total_minor": float64(1300),
		"email": "ali@example.com", "language": "ja",
		"lines": []any{
			map[string]any{"sku": "A1", "quantity": float64(2), "unit_price_minor": float64(150)},
			map[string]any{"sku": "B2", "quantity": float64(1), "unit_price_minor": float64(1000)},
		},
	}
	if diff := cmp.Diff(wantPayload, orderstest.Payload(t, e)); diff != "" {
		t.Errorf("order.created payload (-want +got):\n%s", diff)
	}
	if tl := s.Timeline[0]; tl.OrderId != got.ID || tl.Seq != 1 || tl.Direction != "emitted" || tl.EventType != "order.created" || tl.EventId != e.EventId || tl.AggregateVersion != 1 {
		t.Errorf("timeline row = %+v", tl)
	}
	if k := s.Keys[0]; k.KeyHash != app.KeyHash("POST /v1/orders", "cust-1", "key-1") || k.ClientKey != "key-1" || k.OrderId.StringVal != got.ID || k.ResponseStatus.Int64 != 201 {
		t.Errorf("idempotency row = %+v", k)
	}

	// GET shows the same order with its timeline.
	g := f.do(t, http.MethodGet, "/v1/orders/"+got.ID, "", "")
	if g.status != http.StatusOK {
		t.Fatalf("GET = %d %s", g.status, g.body)
	}
	read := decode[api.Order](t, g.body)
	if len(read.Timeline) != 1 || read.Timeline[0].EventID != e.EventId || read.Timeline[0].At.IsZero() || read.Timeline[0].Direction != "emitted" {
		t.Errorf("timeline = %+v", read.Timeline)
	}
	read.Timeline = nil
	if diff := cmp.Diff(got, read); diff != "" {
		t.Errorf("GET differs from POST (-post +get):\n%s", diff)
	}
}

func TestReplay(t *testing.T) {
	f := newFixture(t)
	first := f.do(t, http.MethodPost, "/v1/orders", "key-r", orderBody)
	// The same request with different whitespace and key order is the same canonical request.
	again := `{"payment":{"payment_method":"pm_card_visa","method":"card"},"lines":[{"quantity":2,"sku":"A1"},{"quantity":1,"sku":"B2"}],"email":"ali@example.com","customer_id":"cust-1"}`
	second := f.do(t, http.MethodPost, "/v1/orders", "key-r", again)
	if first.status != 201 || second.status != 201 {
		t.Fatalf("statuses %d, %d; want 201, 201 (%s)", first.status, second.status, second.body)
	}
	if !bytes.Equal(compact(t, first.body), compact(t, second.body)) {
		t.Errorf("replayed body differs:\n%s\n%s", first.body, second.body)
	}
	if second.header.Get(api.HeaderIdempotentReplayed) != "true" || second.header.Get("Location") != first.header.Get("Location") {
		t.Errorf("replay headers = %v", second.header)
	}
	s := orderstest.Read(t, f.client)
	if len(s.Orders) != 1 || len(s.Outbox) != 1 || len(s.Keys) != 1 {
		t.Errorf("after a replay: %d orders, %d outbox rows, %d keys; want 1 each", len(s.Orders), len(s.Outbox), len(s.Keys))
	}
	if n := f.nudgeCount(t); n != 1 {
		t.Errorf("relay nudged %d times, want 1 (not on replays)", n)
	}

	// The same key with another request is refused and changes nothing: the hash covers the lines,
	// the payment and the e-mail address.
	for name, body := range map[string]string{
		"other lines":  `{"customer_id": "cust-1", "email": "ali@example.com", "lines": [{"sku": "A1", "quantity": 3}], "payment": {"method": "card", "payment_method": "pm_card_visa"}}`,
		"other card":   strings.Replace(orderBody, "pm_card_visa", "pm_card_mastercard", 1),
		"other method": strings.Replace(orderBody, `{"method": "card", "payment_method": "pm_card_visa"}`, `{"method": "wallet"}`, 1),
		"other email":  strings.Replace(orderBody, "ali@example.com", "bob@example.com", 1),
		"no email":     strings.Replace(orderBody, `"email": "ali@example.com", `, "", 1),
	} {
		t.Run(name, func(t *testing.T) {
			checkProblem(t, f.do(t, http.MethodPost, "/v1/orders", "key-r", body), http.StatusUnprocessableEntity, "idempotency key")
		})
	}
	if s := orderstest.Read(t, f.client); len(s.Orders) != 1 || len(s.Outbox) != 1 {
		t.Errorf("after a conflicting key: %d orders, %d outbox rows", len(s.Orders), len(s.Outbox))
	}
}

func compact(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestConcurrentDuplicates(t *testing.T) {
	f := newFixture(t)
	const n = 20
	resps := make([]response, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { resps[i] = f.do(t, http.MethodPost, "/v1/orders", "key-c", orderBody) })
	}
	wg.Wait()
	ids := map[string]bool{}
	replays := 0
	for _, r := range resps {
		if r.status != http.StatusCreated {
			t.Fatalf("a concurrent duplicate got %d %s", r.status, r.body)
		}
		ids[decode[api.Order](t, r.body).ID] = true
		if r.header.Get(api.HeaderIdempotentReplayed) == "true" {
			replays++
		}
	}
	if len(ids) != 1 || replays != n-1 {
		t.Errorf("%d distinct order ids and %d replays, want 1 and %d", len(ids), replays, n-1)
	}
	s := orderstest.Read(t, f.client)
	if len(s.Orders) != 1 || len(s.Items) != 2 || len(s.Outbox) != 1 || len(s.Timeline) != 1 || len(s.Keys) != 1 {
		t.Errorf("rows: %d orders, %d items, %d outbox, %d timeline, %d keys; want 1, 2, 1, 1, 1", len(s.Orders), len(s.Items), len(s.Outbox), len(s.Timeline), len(s.Keys))
	}
}

type problem struct {
	Type   string   `json:"type"`
	Title  string   `json:"title"`
	Status int      `json:"status"`
	Detail string   `json:"detail"`
	Errors []string `json:"errors"`
}

func checkProblem(t *testing.T, r response, status int, detail string) problem {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d %s, want %d", r.status, r.body, status)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, platform.ContentTypeProblem) {
		t.Errorf("Content-Type = %q, want %s", ct, platform.ContentTypeProblem)
	}
	p := decode[problem](t, r.body)
	text := p.Detail + " " + strings.Join(p.Errors, "; ")
	if p.Status != status || p.Title == "" || !strings.Contains(text, detail) {
		t.Errorf("problem = %+v, want status %d mentioning %q", p, status, detail)
	}
	return p
}

func TestValidation(t *testing.T) {
	f := newFixture(t)
	lines := func(n int) string {
		var parts []string
		for i := range n {
			parts = append(parts, fmt.Sprintf(`{"sku": "S%d", "quantity": 1}`, i))
		}
		return `{"customer_id": "cust-1", "lines": [` + strings.Join(parts, ",") + `], "payment": {"method": "wallet"}}`
	}
	tests := []struct {
		name   string
		key    string
		body   string
		status int
		detail string
	}{
		{"no idempotency key", "", orderBody, 400, "Idempotency-Key"},
		{"long idempotency key", strings.Repeat("k", 256), orderBody, 400, "Idempotency-Key"},
		{"not json", "k", `{"customer_id":`, 400, "not a valid order"},
		{"unknown field", "k", `{"customer_id": "cust-1", "lines": [{"sku": "A1", "quantity": 1, "qty": 2}], "payment": {"method": "wallet"}}`, 400, "unknown field"},
		{"wrong type", "k", `{"customer_id": "cust-1", "lines": [{"sku": "A1", "quantity": "2"}], "payment": {"method": "wallet"}}`, 400, "not a valid order"},
		{"trailing data", "k", orderBody + `{}`, 400, "after the JSON object"},
		{"no lines", "k", `{"customer_id": "cust-1", "lines": [], "payment": {"method": "wallet"}}`, 400, "1 to 50 lines, got 0"},
		{"51 lines", "k", lines(51), 400, "1 to 50 lines, got 51"},
		{"quantity 0", "k", `{"customer_id": "cust-1", "lines": [{"sku": "A1", "quantity": 0}], "payment": {"method": "wallet"}}`, 400, "quantity 0 is not in 1..100"},
		{"quantity 101", "k", `{"customer_id": "cust-1", "lines": [{"sku": "A1", "quantity": 101}], "payment": {"method": "wallet"}}`, 400, "quantity 101 is not in 1..100"},
		{"duplicate sku", "k", `{"customer_id": "cust-1", "lines": [{"sku": "A1", "quantity": 1}, {"sku": "A1", "quantity": 1}], "payment": {"method": "wallet"}}`, 400, `duplicate sku "A1"`},
		{"unknown sku", "k", `{"customer_id": "cust-1", "lines": [{"sku": "A1", "quantity": 1}, {"sku": "NOPE", "quantity": 1}], "payment": {"method": "wallet"}}`, 422, `sku "NOPE"`},
		{"inactive sku", "k", `{"customer_id": "cust-1", "lines": [{"sku": "OLD", "quantity": 1}], "payment": {"method": "wallet"}}`, 422, `sku "OLD"`},
		{"mixed currencies", "k", `{"customer_id": "cust-1", "lines": [{"sku": "A1", "quantity": 1}, {"sku": "C3", "quantity": 1}], "payment": {"method": "wallet"}}`, 422, "USD"},
		{"PayPay in dollars", "k", `{"customer_id": "cust-1", "lines": [{"sku": "C3", "quantity": 1}], "payment": {"method": "wallet"}}`, 422, "JPY only"},
		{"konbini in dollars", "k", `{"customer_id": "cust-1", "email": "c@example.com", "lines": [{"sku": "C3", "quantity": 1}], "payment": {"method": "konbini", "store": "lawson"}}`, 422, "JPY only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkProblem(t, f.do(t, http.MethodPost, "/v1/orders", tt.key, tt.body), tt.status, tt.detail)
		})
	}
	if s := orderstest.Read(t, f.client); len(s.Orders) != 0 || len(s.Outbox) != 0 || len(s.Keys) != 0 {
		t.Errorf("rejected requests wrote %d orders, %d outbox rows, %d keys", len(s.Orders), len(s.Outbox), len(s.Keys))
	}
	if n := f.nudgeCount(t); n != 0 {
		t.Errorf("relay nudged %d times for rejected requests", n)
	}
}

func TestGetOrderErrors(t *testing.T) {
	f := newFixture(t)
	checkProblem(t, f.do(t, http.MethodGet, "/v1/orders/7d444840-9dc0-11d1-b245-5ffdce74fad2", "", ""), 404, "not found")
	checkProblem(t, f.do(t, http.MethodGet, "/v1/orders/not-a-uuid", "", ""), 400, "not a UUID")
}

func TestListProducts(t *testing.T) {
	f := newFixture(t)
	r := f.do(t, http.MethodGet, "/v1/products", "", "")
	if r.status != 200 {
		t.Fatalf("GET /v1/products = %d %s", r.status, r.body)
	}
	got := decode[struct{ Products []api.Product }](t, r.body)
	want := []api.Product{
		{SKU: "A1", Name: "Alpha", Description: "the first", PriceMinor: 150, Currency: "JPY"},
		{SKU: "B2", Name: "Beta", PriceMinor: 1000, Currency: "JPY"},
		{SKU: "C3", Name: "Gamma", PriceMinor: 999, Currency: "USD"},
	}
	if diff := cmp.Diff(want, got.Products); diff != "" {
		t.Errorf("products (-want +got):\n%s", diff)
	}
}

// TestRelayDown: the nudge is best effort; an unreachable relay does not fail the order.
func TestRelayDown(t *testing.T) {
	client, _ := env.NewDatabase(t, dbschema.Orders)
	orderstest.Seed(t, client)
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	srv := platform.NewServer(platform.ServerOptions{ErrorMapper: httpapi.ErrorMapper})
	httpapi.Register(srv.Echo, app.New(store.New(client), outboxlib.NewNudger(dead.URL, "orders")), customersOf(t))
	ts := httptest.NewServer(srv.Echo)
	defer ts.Close()
	f := &fixture{url: ts.URL, client: client}
	if r := f.do(t, http.MethodPost, "/v1/orders", "k", orderBody); r.status != 201 {
		t.Errorf("POST with the relay down = %d %s, want 201", r.status, r.body)
	}
}
