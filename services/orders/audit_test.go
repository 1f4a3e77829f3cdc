package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/spanmart/spanmart/emulator/tasksemu"
	"github.com/spanmart/spanmart/gen/dao/ordersdb"
	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/pkg/platform/platformtest"
	"github.com/spanmart/spanmart/services/orders/internal/app"
	"github.com/spanmart/spanmart/services/orders/internal/orderstest"
)

const (
	operatorEmail = "operator@spanmart.test"
	ordersAccount = "orders@spanmart-local.iam.gserviceaccount.com"
)

// peerCalls records the Authorization header of each call a fake peer got.
type peerCalls struct {
	mu   sync.Mutex
	auth []string
}

func (p *peerCalls) record(r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.auth = append(p.auth, r.Header.Get("Authorization"))
}

func (p *peerCalls) headers() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.auth...)
}

// TestAuditAsWired runs the service as run wires it, with the Tasks emulator as the OIDC issuer
// of operator tokens and as the metadata server (GCE_METADATA_HOST, as the dev stack sets it):
// the audit's routes take only an operator's token, and the reconciliation calls each peer with
// an ID token of SERVICE_ACCOUNT for the peer's URL, which the gateway's verifier accepts.
func TestAuditAsWired(t *testing.T) {
	ctx := context.Background()
	emu, err := tasksemu.Start(ctx, tasksemu.Options{ServiceAccount: "default@spanmart.test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emu.Close() })
	t.Setenv("GCE_METADATA_HOST", emu.HTTPAddr())

	// The peers answer in their real shapes (services/fulfillment/internal/httpapi,
	// services/gateway-abstraction/internal/httpapi): no reservation, one voided payment.
	var fulfillmentCalls, gatewayCalls peerCalls
	fulfillment := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fulfillmentCalls.record(r)
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"type":"about:blank","title":"Not Found","status":404}`)
	}))
	t.Cleanup(fulfillment.Close)
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gatewayCalls.record(r)
		id := r.URL.Query().Get("order_id")
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"payments":[{"id":"`+uuid.NewString()+`","order_id":"`+id+`","customer_id":"cust-1","method":"card",`+
			`"provider":"stripe","status":"VOIDED","amount_minor":300,"currency":"JPY","version":3}]}`)
	}))
	t.Cleanup(gateway.Close)

	client, name := env.NewDatabase(t, dbschema.Orders)
	orderstest.Seed(t, client)
	customers := startCustomers(t)
	cfg, err := loadConfig(platformtest.Getenv(map[string]string{
		"SPANNER_DATABASE": name, "PORT": "0",
		"OIDC_ISSUER": emu.Issuer(), "OIDC_AUDIENCE": audience, "OIDC_ALLOWED_EMAILS": relayEmail,
		"CUSTOMER_ISSUER": customers.URL(), "CUSTOMER_AUDIENCE": customers.Audience(),
		"ADMIN_ALLOWED_EMAILS": operatorEmail,
		"FULFILLMENT_URL":      fulfillment.URL, "GATEWAY_URL": gateway.URL + "/", "SERVICE_ACCOUNT": ordersAccount,
	}))
	if err != nil {
		t.Fatal(err)
	}
	log, logs := platformtest.NewLogger(t, serviceName)
	platformtest.Start(t, func(ctx context.Context) error { return run(ctx, cfg, log) })
	url := platformtest.StartedURL(t, logs)

	// One order that settled as CANCELLED ten minutes ago.
	s := &system{url: url, client: client, customers: customers}
	id := s.placeOrder(t)
	row := ordersdb.Order{OrderId: id, Status: "CANCELLED", UpdatedAt: time.Now().Add(-10 * time.Minute)}
	m, err := row.UpdateColumns(ordersdb.OrderColStatus, ordersdb.OrderColUpdatedAt)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Apply(ctx, []*spanner.Mutation{m}); err != nil {
		t.Fatal(err)
	}

	token := func(account string) string {
		t.Helper()
		tok, err := platform.NewIDTokenSource(nil, platform.WithServiceAccount(account)).Token(ctx, audience)
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + tok
	}
	call := func(method, path, auth string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}

	for _, route := range []struct{ method, path string }{
		{http.MethodGet, "/admin/stuck-orders"}, {http.MethodGet, "/admin/reconciliation"}, {http.MethodPost, "/admin/audit"},
		{http.MethodGet, "/admin/orders/" + id},
	} {
		if status, body := call(route.method, route.path, ""); status != http.StatusUnauthorized {
			t.Errorf("%s %s without a token = %d %s, want 401", route.method, route.path, status, body)
		}
		if status, body := call(route.method, route.path, token(ordersAccount)); status != http.StatusForbidden {
			t.Errorf("%s %s with a token of another account = %d %s, want 403", route.method, route.path, status, body)
		}
		if status, body := call(route.method, route.path, s.customerAuth(t)); status != http.StatusUnauthorized {
			t.Errorf("%s %s with a customer's token = %d %s, want 401", route.method, route.path, status, body)
		}
	}

	// An operator reads any customer's order on /admin/orders/{id}, as the customer does on
	// /v1/orders/{id}; an operator's token is no customer's there.
	status, adminBody := call(http.MethodGet, "/admin/orders/"+id, token(operatorEmail))
	resp := s.get(t, "/v1/orders/"+id)
	customerBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if status != http.StatusOK || resp.StatusCode != http.StatusOK || string(adminBody) != string(customerBody) {
		t.Errorf("GET /admin/orders/%s = %d %s; the customer's GET = %d %s; want the same 200", id, status, adminBody, resp.StatusCode, customerBody)
	}
	if status, body := call(http.MethodGet, "/v1/orders/"+id, token(operatorEmail)); status != http.StatusUnauthorized {
		t.Errorf("GET /v1/orders/%s with an operator's token = %d %s, want 401", id, status, body)
	}
	if n := len(fulfillmentCalls.headers()) + len(gatewayCalls.headers()); n != 0 {
		t.Fatalf("refused requests called the peers %d times", n)
	}

	status, body := call(http.MethodPost, "/admin/audit", token(operatorEmail))
	if status != http.StatusOK {
		t.Fatalf("POST /admin/audit as an operator = %d %s", status, body)
	}
	var rep struct {
		Stuck struct {
			Counts map[string]int `json:"counts"`
		} `json:"stuck"`
		Reconciliation struct {
			Configured bool  `json:"configured"`
			Checked    int   `json:"checked"`
			Partial    bool  `json:"partial"`
			Mismatches []any `json:"mismatches"`
		} `json:"reconciliation"`
	}
	if err := json.Unmarshal(body, &rep); err != nil {
		t.Fatal(err)
	}
	r := rep.Reconciliation
	if !r.Configured || r.Checked != 1 || r.Partial || len(r.Mismatches) != 0 {
		t.Errorf("reconciliation = %+v, want configured, 1 checked, complete, no mismatch (%s)", r, body)
	}
	if rep.Stuck.Counts["PENDING"] != 0 {
		t.Errorf("stuck counts = %v", rep.Stuck.Counts)
	}

	// Each peer got an ID token of the service's account for its own URL.
	for _, p := range []struct {
		name  string
		url   string
		calls *peerCalls
	}{{"fulfillment", fulfillment.URL, &fulfillmentCalls}, {"gateway", gateway.URL, &gatewayCalls}} {
		v, err := outboxlib.NewVerifier(outboxlib.VerifierConfig{Issuer: emu.Issuer(), Audiences: []string{p.url}, AllowedEmails: []string{ordersAccount}})
		if err != nil {
			t.Fatal(err)
		}
		headers := p.calls.headers()
		if len(headers) != 1 {
			t.Fatalf("%s was called %d times, want once", p.name, len(headers))
		}
		email, err := v.Verify(ctx, headers[0])
		if err != nil || email != ordersAccount {
			t.Errorf("%s got %q: %q, %v; want a token of %s for %s", p.name, headers[0], email, err, ordersAccount, p.url)
		}
	}

	metrics, err := http.Get(url + platform.PathMetrics)
	if err != nil {
		t.Fatal(err)
	}
	defer metrics.Body.Close()
	text, _ := io.ReadAll(metrics.Body)
	for _, want := range []string{`orders_stuck{status="PENDING"} 0`, `orders_reconciliation_mismatches{check="cancelled"} 0`} {
		if !strings.Contains(string(text), want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
}

func TestLoadConfigAudit(t *testing.T) {
	base := map[string]string{
		"SPANNER_DATABASE":    "projects/test-project/instances/test-instance/databases/orders",
		"OIDC_AUDIENCE":       "https://orders.example",
		"OIDC_ALLOWED_EMAILS": "relay@p.iam.gserviceaccount.com",
		"CUSTOMER_ISSUER":     "https://securetoken.google.com/p",
		"CUSTOMER_AUDIENCE":   "p",
	}
	with := func(vars map[string]string) func(string) string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range vars {
			m[k] = v
		}
		return platformtest.Getenv(m)
	}

	cfg, err := loadConfig(with(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := auditConfig{StuckAfter: app.DefaultStuckAfter(), Settle: 2 * time.Minute, Window: 24 * time.Hour}
	if diff := cmp.Diff(want, cfg.Audit); diff != "" || cfg.Audit.reconciles() {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}

	cfg, err = loadConfig(with(map[string]string{
		"STUCK_AFTER": "PENDING=10m,CANCELLING=2h", "RECONCILE_SETTLE": "5m", "RECONCILE_WINDOW": "6h",
		"FULFILLMENT_URL": "https://fulfillment-1.a.run.app/", "GATEWAY_URL": "https://gateway-abstraction-1.a.run.app",
		"SERVICE_ACCOUNT": ordersAccount,
	}))
	if err != nil {
		t.Fatal(err)
	}
	after := app.DefaultStuckAfter()
	after["PENDING"], after["CANCELLING"] = 10*time.Minute, 2*time.Hour
	want = auditConfig{
		StuckAfter: after, Settle: 5 * time.Minute, Window: 6 * time.Hour,
		FulfillmentURL: "https://fulfillment-1.a.run.app", GatewayURL: "https://gateway-abstraction-1.a.run.app", ServiceAccount: ordersAccount,
	}
	if diff := cmp.Diff(want, cfg.Audit); diff != "" || !cfg.Audit.reconciles() {
		t.Errorf("set (-want +got):\n%s", diff)
	}

	// Every problem is listed at once.
	_, err = loadConfig(with(map[string]string{
		"STUCK_AFTER": "PENDING=5m,COMPLETED=1h,SHIPPED=soon", "RECONCILE_SETTLE": "2h", "RECONCILE_WINDOW": "1h",
		"FULFILLMENT_URL": "https://fulfillment-1.a.run.app", "SERVICE_ACCOUNT": "orders",
	}))
	if err == nil {
		t.Fatal("loadConfig accepted a bad audit configuration")
	}
	for _, want := range []string{
		`invalid STUCK_AFTER "PENDING=5m,COMPLETED=1h,SHIPPED=soon"`, `"COMPLETED" is not a status an order can be stuck in`,
		`SHIPPED: "soon" is not a positive duration`, `invalid RECONCILE_WINDOW "1h0m0s": must be longer than RECONCILE_SETTLE (2h0m0s)`,
		"missing GATEWAY_URL", `invalid SERVICE_ACCOUNT "orders"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %s", err, want)
		}
	}
}
