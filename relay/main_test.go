package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/spanmart/spanmart/internal/topology"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/uuid"
	"go.yaml.in/yaml/v3"

	"github.com/spanmart/spanmart/emulator/tasksemu"
	"github.com/spanmart/spanmart/emulator/tasksemu/retry"
	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/outboxlib/outboxapi"
	"github.com/spanmart/spanmart/pkg/outboxlib/relay"
	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/pkg/platform/platformtest"
	"github.com/spanmart/spanmart/pkg/spannertest"
)

var env *spannertest.Env

func TestMain(m *testing.M) { os.Exit(platformtest.Main(m, &env, main)) }

const (
	location       = "projects/spanmart-local/locations/us-central1"
	serviceAccount = "relay@spanmart-local.iam.gserviceaccount.com"
)

// baseEnv is a complete environment apart from RELAY_SOURCES (and RELAY_ROUTES).
// The accounts the relay's own endpoints take in the tests, and its audience.
const (
	operatorSA    = "operator@spanmart-test.iam.gserviceaccount.com"
	ordersSA      = "orders@spanmart-test.iam.gserviceaccount.com"
	relayAudience = "https://relay.test"
)

func baseEnv(tasksHost, consumerURL string) map[string]string {
	return map[string]string{
		"OIDC_AUDIENCE":             relayAudience,
		"ADMIN_ALLOWED_EMAILS":      operatorSA,
		"NUDGE_ALLOWED_EMAILS":      ordersSA,
		"RELAY_SERVICE_ACCOUNT":     serviceAccount,
		"CLOUD_TASKS_EMULATOR_HOST": tasksHost,
		"TASKS_LOCATION":            location,
		"ORDERS_URL":                consumerURL + "/orders",
		"FULFILLMENT_URL":           consumerURL + "/fulfillment",
		"GATEWAY_URL":               consumerURL + "/gateway",
		"NOTIFICATIONS_URL":         consumerURL + "/notifications",
	}
}

// routesFor writes the embedded routes.yaml with its sources replaced by the test databases (whose
// ids carry a random suffix), mapped in order to services, and returns its path.
func routesFor(t *testing.T, databases []string, services ...string) string {
	t.Helper()
	var f map[string]any
	if err := yaml.Unmarshal(defaultRoutes, &f); err != nil {
		t.Fatal(err)
	}
	sources := map[string]string{}
	for i, db := range databases {
		if db == "" {
			continue
		}
		sources[db[strings.LastIndex(db, "/")+1:]] = services[i]
	}
	f["sources"] = sources
	data, err := yaml.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "routes.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// startTasks starts a Cloud Tasks emulator with the four subscriber queues of the dev stack.
func startTasks(t *testing.T) *tasksemu.Server {
	t.Helper()
	var queues []tasksemu.QueueConfig
	for _, q := range topology.Queues() {
		queues = append(queues, tasksemu.QueueConfig{Name: location + "/queues/" + q, Retry: retry.Policy{
			MaxAttempts: -1, MaxRetryDuration: 72 * time.Hour, MinBackoff: 10 * time.Millisecond, MaxBackoff: time.Second, MaxDoublings: 4,
		}})
	}
	srv, err := tasksemu.Start(context.Background(), tasksemu.Options{Queues: queues})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

func TestLoadConfig(t *testing.T) {
	_, err := loadConfig(platformtest.Getenv(map[string]string{"MAX_BODY_BYTES": "lots"}))
	want := `missing RELAY_SOURCES, RELAY_SERVICE_ACCOUNT, FULFILLMENT_URL, GATEWAY_URL, NOTIFICATIONS_URL, ORDERS_URL, TASKS_LOCATION, OIDC_AUDIENCE; invalid MAX_BODY_BYTES "lots": not an integer`
	if err == nil || err.Error() != want {
		t.Errorf("loadConfig error = %v, want %s", err, want)
	}

	vars := baseEnv("127.0.0.1:8123", "https://svc")
	vars["RELAY_SOURCES"] = "projects/shop-prod/instances/main/databases/orders, projects/shop-prod/instances/main/databases/payments"
	vars["PORT"] = "9000"
	got, err := loadConfig(platformtest.Getenv(vars))
	if err != nil {
		t.Fatal(err)
	}
	sub := func(name, queue, url string) relay.Subscriber {
		return relay.Subscriber{Name: name, Queues: []string{location + "/queues/" + queue}, URL: "https://svc/" + url + "/events", Audience: "https://svc/" + url,
			LedgerURL: "https://svc/" + url + "/admin/ledger"}
	}
	orders, fulfillment := sub("orders", "orders-inbox", "orders"), sub("fulfillment", "fulfillment-inbox", "fulfillment")
	gateway, notifications := sub("gateway-abstraction", "gateway-inbox", "gateway"), sub("notifications", "notifications-inbox", "notifications")
	wantCfg := config{
		Config: platform.Config{Service: "relay", Port: 9000, LogLevel: "info", Project: "shop-prod", MaxBodyBytes: 1 << 20,
			MaxInFlight: platform.DefaultMaxInFlight, AdmissionWait: platform.DefaultAdmissionWait, AdmissionWaitCustomer: platform.DefaultAdmissionWaitCustomer},
		Sources: []platform.DatabaseName{
			{Project: "shop-prod", Instance: "main", Database: "orders"},
			{Project: "shop-prod", Instance: "main", Database: "payments"},
		},
		Services:       map[string]string{"orders": "orders", "payments": "gateway-abstraction"},
		ServiceAccount: serviceAccount,
		TasksEmulator:  "127.0.0.1:8123",
		Ledger:         true,
		LedgerInterval: time.Minute,
		LedgerMinAge:   time.Minute,
		LedgerGrace:    10 * time.Minute,
		Issuer:         outboxlib.GoogleIssuer,
		Audience:       relayAudience,
		Operators:      []string{operatorSA},
		Nudgers:        []string{ordersSA},
		Routing: routing{
			Services: map[string]string{"orders": "orders", "fulfillment": "fulfillment", "payments": "gateway-abstraction", "notifications": "notifications"},
			Routes: relay.Routes{
				"order.created":            {fulfillment, notifications},
				"inventory.reserved":       {orders},
				"inventory.rejected":       {orders},
				"order.awaiting_payment":   {gateway},
				"payment.authorized":       {orders},
				"payment.pending":          {orders, notifications},
				"payment.failed":           {orders},
				"payment.expired":          {orders},
				"order.confirmed":          {fulfillment, notifications},
				"shipment.shipped":         {orders},
				"shipment.failed":          {orders},
				"order.shipped":            {gateway, notifications},
				"payment.captured":         {orders},
				"payment.capture_failed":   {orders},
				"order.cancelled":          {fulfillment, gateway, notifications},
				"inventory.released":       {orders},
				"inventory.release_failed": {orders},
				"payment.voided":           {orders},
				"payment.refunded":         {orders, notifications},
				"payment.void_failed":      {orders},
				"payment.refund_failed":    {orders},
			},
		},
	}
	if diff := cmp.Diff(wantCfg, got, cmpopts.IgnoreFields(platform.Config{}, "Version")); diff != "" {
		t.Errorf("loadConfig mismatch (-want +got):\n%s", diff)
	}
}

func TestLoadConfigRoutesFile(t *testing.T) {
	write := func(text string) string {
		path := filepath.Join(t.TempDir(), "routes.yaml")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	load := func(routes string) error {
		vars := map[string]string{
			"RELAY_SOURCES":         "projects/p/instances/inst/databases/orders,projects/p/instances/inst/databases/other",
			"RELAY_SERVICE_ACCOUNT": serviceAccount,
			"RELAY_ROUTES":          routes,
			"HOOK_URL":              "https://hook",
			"OIDC_AUDIENCE":         relayAudience,
		}
		_, err := loadConfig(platformtest.Getenv(vars))
		return err
	}
	tests := []struct {
		name, file, want string
	}{
		{"custom file", `
sources: {orders: orders, other: other}
subscribers:
  hook: {queues: ["projects/p/locations/l/queues/hook"], url: "${HOOK_URL}/events"}
routes:
  order.created: [hook]
`, ""},
		{"a subscriber over two queues", `
sources: {orders: orders, other: other}
subscribers:
  hook: {queues: ["projects/p/locations/l/queues/hook", "projects/p/locations/l/queues/hook-2"], url: "${HOOK_URL}/events"}
routes:
  order.created: [hook]
`, ""},
		{"a queue listed twice", `
sources: {orders: orders, other: other}
subscribers:
  hook: {queues: ["projects/p/locations/l/queues/hook", "projects/p/locations/l/queues/hook"], url: "${HOOK_URL}/events"}
routes: {}
`, "subscriber hook lists queue projects/p/locations/l/queues/hook twice"},
		{"no queue", `
sources: {orders: orders, other: other}
subscribers:
  hook: {queues: [], url: "${HOOK_URL}/events"}
routes: {}
`, "subscriber hook needs a queue and a url"},
		{"the single queue key of before 2026-12-02", `
sources: {orders: orders, other: other}
subscribers:
  hook: {queue: "projects/p/locations/l/queues/hook", url: "${HOOK_URL}/events"}
routes: {}
`, "field queue not found"},
		{"missing variables, all at once", `
sources: {orders: orders, other: other}
subscribers:
  a: {queues: ["${QUEUE_A}"], url: "${URL_A}"}
  b: {queues: ["${QUEUE_A}"], url: "${URL_B}", audience: "${HOOK_URL}"}
routes: {}
`, "missing QUEUE_A, URL_A, URL_B"},
		{"unknown subscriber and source", `
sources: {orders: orders}
subscribers: {}
routes:
  order.created: [nobody]
`, `invalid RELAY_ROUTES "PATH": route order.created: unknown subscriber nobody; invalid RELAY_SOURCES "projects/p/instances/inst/databases/other": database other is not among the routes file's sources`},
		{"unknown field", `
sources: {orders: orders, other: other}
subscribers:
  a: {queues: [q], url: u, retries: 3}
routes: {}
`, "field retries not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := write(tt.file)
			err := load(path)
			want := strings.ReplaceAll(tt.want, "PATH", path)
			switch {
			case want == "" && err != nil:
				t.Errorf("loadConfig = %v, want nil", err)
			case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
				t.Errorf("loadConfig = %v, want an error containing %q", err, want)
			}
		})
	}
	if err := load(filepath.Join(t.TempDir(), "nosuch.yaml")); err == nil || !strings.Contains(err.Error(), "invalid RELAY_ROUTES") {
		t.Errorf("loadConfig with a missing routes file = %v, want invalid RELAY_ROUTES", err)
	}
}

func TestMainExits(t *testing.T) {
	out, code := platformtest.RunMain(t, "RELAY_SOURCES=orders", "RELAY_SERVICE_ACCOUNT=", "TASKS_LOCATION=x",
		"ORDERS_URL=", "FULFILLMENT_URL=", "GATEWAY_URL=", "NOTIFICATIONS_URL=", "RELAY_ROUTES=")
	if code != 2 {
		t.Errorf("exit code = %d, want 2", code)
	}
	want := "relay: configuration: missing RELAY_SERVICE_ACCOUNT, FULFILLMENT_URL, GATEWAY_URL, NOTIFICATIONS_URL, ORDERS_URL, OIDC_AUDIENCE; " +
		"invalid RELAY_SOURCES \"orders\": orders: want projects/PROJECT/instances/INSTANCE/databases/DATABASE\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("output mismatch (-want +got):\n%s", diff)
	}
}

func TestBinary(t *testing.T) {
	tasks := startTasks(t)
	platformtest.TestBinary(t, env, platformtest.Binary[config]{
		Name:    serviceName,
		Schemas: []string{dbschema.Orders, dbschema.Payments},
		Env: func(dbs []string) map[string]string {
			vars := baseEnv(tasks.Addr(), "http://127.0.0.1:1")
			vars["RELAY_SOURCES"] = strings.Join(dbs, ",")
			vars["RELAY_ROUTES"] = routesFor(t, dbs, "orders", "gateway-abstraction")
			return vars
		},
		Load: loadConfig,
		Run:  run,
	})
}

// consumers records the deliveries to every consumer path.
type consumers struct {
	srv *httptest.Server
	mu  sync.Mutex
	got map[string][]http.Header // path → headers of each delivery
}

func newConsumers(t *testing.T) *consumers {
	c := &consumers{got: map[string][]http.Header{}}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		c.mu.Lock()
		c.got[r.URL.Path] = append(c.got[r.URL.Path], r.Header.Clone())
		c.mu.Unlock()
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *consumers) count(path, eventID string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, h := range c.got[path] {
		if h.Get(outboxlib.HeaderID) == eventID {
			n++
		}
	}
	return n
}

// post sends body with "Bearer token" when token is not empty.
func post(t *testing.T, url, body string, token ...string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if len(token) > 0 {
		req.Header.Set("Authorization", "Bearer "+token[0])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestRun(t *testing.T) {
	ordersClient, orders := env.NewDatabase(t, dbschema.Orders)
	_, payments := env.NewDatabase(t, dbschema.Payments)
	tasks := startTasks(t)
	cons := newConsumers(t)
	vars := baseEnv(tasks.Addr(), cons.srv.URL)
	vars["RELAY_SOURCES"] = orders + "," + payments
	vars["RELAY_ROUTES"] = routesFor(t, []string{orders, payments}, "orders", "gateway-abstraction")
	vars["PORT"] = "0"
	vars["OIDC_ISSUER"] = tasks.Issuer()
	cfg, err := loadConfig(platformtest.Getenv(vars))
	if err != nil {
		t.Fatal(err)
	}
	log, logs := platformtest.NewLogger(t, serviceName)
	r := platformtest.Start(t, func(ctx context.Context) error { return run(ctx, cfg, log) })
	url := platformtest.StartedURL(t, logs)
	token := func(account string) string {
		t.Helper()
		tok, err := tasks.IDToken(account, relayAudience)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	operator, service := token(operatorSA), token(ordersSA)
	get := func(path string) []byte { // an operator's GET that must answer 200
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url+path, nil)
		req.Header.Set("Authorization", "Bearer "+operator)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d %s", path, resp.StatusCode, b)
		}
		return b
	}

	started := logs.Find(t, "starting")
	if diff := cmp.Diff([]any{orders, payments}, started["sources"]); started["service"] != "relay" || diff != "" {
		t.Errorf("starting line = %v, want service relay and both sources", started)
	}
	platformtest.WaitStatus(t, url+"/healthz", 200)
	var ready struct{ Checks map[string]string }
	if err := json.Unmarshal(platformtest.WaitStatus(t, url+"/readyz", 200), &ready); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"spanner " + orders: "ok", "spanner " + payments: "ok"}
	if diff := cmp.Diff(want, ready.Checks); diff != "" {
		t.Errorf("/readyz checks mismatch (-want +got):\n%s", diff)
	}

	// An order.created committed in the orders database reaches fulfillment, once.
	ctx := context.Background()
	ev, err := outboxlib.NewEvent(ctx, "order.created", "order", uuid.NewString(), 1, map[string]string{"status": "PENDING"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ordersClient.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		return outboxlib.Append(ctx, txn, ev)
	}); err != nil {
		t.Fatal(err)
	}
	// The relay's endpoints take the right accounts' tokens only: a nudge the services', the
	// rest an operator's.
	for _, tt := range []struct {
		path, token string
		want        int
	}{
		{"/nudge", "", http.StatusUnauthorized},
		{"/nudge", operator, http.StatusForbidden},
		{"/v1/outbox/orders/events/" + ev.ID + "/replay", "", http.StatusUnauthorized},
		{"/v1/outbox/orders/events/" + ev.ID + "/replay", service, http.StatusForbidden},
		{"/v1/ledger/audit", service, http.StatusForbidden},
	} {
		if code, body := post(t, url+tt.path, `{"reason": "let me"}`, tt.token); code != tt.want {
			t.Errorf("POST %s (token: %t) = %d %v, want %d", tt.path, tt.token != "", code, body, tt.want)
		}
	}
	for _, bad := range []string{"?source=orders", "?shard=1", "?source=inventory&shard=1", "?source=orders&shard=16", "?source=orders&shard=x", "?source=orders&shard=1&shard=16"} {
		if code, body := post(t, url+"/nudge"+bad, "", service); code != http.StatusBadRequest {
			t.Errorf("POST /nudge%s = %d %v, want 400", bad, code, body)
		}
	}
	if code, _ := post(t, url+"/nudge", "", service); code != http.StatusNoContent {
		t.Errorf("POST /nudge = %d, want 204", code)
	}
	// A nudge names the shards of the events its service committed since its last one.
	other := (outboxlib.ShardOf(ev.AggregateID) + 1) % outboxlib.Shards
	if code, _ := post(t, fmt.Sprintf("%s/nudge?source=orders&shard=%d&shard=%d", url, other, outboxlib.ShardOf(ev.AggregateID)), "", service); code != http.StatusNoContent {
		t.Errorf("POST /nudge?source=orders&shard=...&shard=... = %d, want 204", code)
	}
	platformtest.Eventually(t, "order.created to reach fulfillment", func() bool { return cons.count("/fulfillment/events", ev.ID) == 1 })

	var status outboxapi.OutboxStatus
	platformtest.Eventually(t, "the event to be published", func() bool {
		if err := json.Unmarshal(get("/v1/outbox"), &status); err != nil {
			t.Fatal(err)
		}
		return len(status.Sources) == 2 && status.Sources[0].Pending == 0
	})
	if s := status.Sources[0]; s.PublishLag.Count != 1 || s.PublishLag.P99 <= 0 {
		t.Errorf("publish lag of orders = %+v, want the one publication", s.PublishLag)
	}
	if s := status.Sources[0]; s.Source != "orders" || s.Database != orders || len(s.Shards) != outboxlib.Shards || s.Shards[0].Owner != status.Owner {
		t.Errorf("status of orders = %+v, want every shard held by %s", s, status.Owner)
	}
	if s := status.Sources[1]; s.Source != "gateway-abstraction" || s.Database != payments {
		t.Errorf("status of payments = %+v, want source gateway-abstraction", s)
	}

	// Replay: a reason is required; unknown sources and events are 404; a replay re-delivers.
	replay := url + "/v1/outbox/orders/events/" + ev.ID + "/replay"
	for _, tt := range []struct {
		url, body string
		status    int
	}{
		{replay, `{}`, 400},
		{replay, `not json`, 400},
		{url + "/v1/outbox/nosuch/events/" + ev.ID + "/replay", `{"reason": "x"}`, 404},
		{url + "/v1/outbox/orders/events/" + uuid.NewString() + "/replay", `{"reason": "x"}`, 404},
		{replay, `{"reason": "fulfillment restored from backup"}`, 202},
	} {
		code, body := post(t, tt.url, tt.body, operator)
		if code != tt.status {
			t.Errorf("POST %s %s = %d %v, want %d", tt.url, tt.body, code, body, tt.status)
		}
	}
	platformtest.Eventually(t, "the replayed event to reach fulfillment again", func() bool { return cons.count("/fulfillment/events", ev.ID) == 2 })
	var by spanner.NullString
	row, err := ordersClient.Single().ReadRow(ctx, "OutboxEvents", spanner.Key{ev.ID}, []string{"ReplayedBy"})
	if err == nil {
		err = row.Columns(&by)
	}
	if err != nil || by.StringVal != operatorSA {
		t.Errorf("ReplayedBy = %v (%v), want the operator's verified account", by, err)
	}

	// An aggregate's events across the sources, with where they are; no quarantined row.
	var trace outboxapi.EventList
	platformtest.Eventually(t, "the replayed event to be published again", func() bool {
		if err := json.Unmarshal(get("/v1/outbox/events?aggregate_type=order&aggregate_id="+ev.AggregateID), &trace); err != nil {
			t.Fatal(err)
		}
		return len(trace.Events) == 1 && trace.Events[0].PublishedAt != nil
	})
	if e := trace.Events[0]; e.EventID != ev.ID || e.Source != "orders" || e.CommittedAt.IsZero() || !cmp.Equal(e.Subscribers, []string{"fulfillment", "notifications"}) {
		t.Errorf("events of the order = %+v", trace.Events)
	}
	var quarantined outboxapi.EventList
	if err := json.Unmarshal(get("/v1/outbox/quarantined"), &quarantined); err != nil || quarantined.Events == nil || len(quarantined.Events) != 0 {
		t.Errorf("quarantined = %+v (%v), want an empty list", quarantined, err)
	}
	// The counter grows when the replayed row is marked, just after the task was created.
	platformtest.Eventually(t, "/metrics to count both publications", func() bool {
		return strings.Contains(string(platformtest.WaitStatus(t, url+"/metrics", 200)), `outbox_published_events_total{source="orders",subscriber="fulfillment"} 2`)
	})
	metrics := string(platformtest.WaitStatus(t, url+"/metrics", 200))
	for _, m := range []string{"outbox_publish_lag_seconds_bucket", `outbox_pending_events{source="orders"} 0`, `outbox_quarantined_events{source="gateway-abstraction"} 0`} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}

	if err := r.Stop(t); err != nil {
		t.Errorf("run = %v, want nil after cancellation", err)
	}
	logs.Find(t, "released shard leases")
}

func TestRunOneSourceMissing(t *testing.T) {
	_, orders := env.NewDatabase(t, dbschema.Orders)
	missing := spannertest.Instance + "/databases/nosuch"
	tasks := startTasks(t)
	vars := baseEnv(tasks.Addr(), "http://127.0.0.1:1")
	vars["RELAY_SOURCES"] = orders + "," + missing
	vars["RELAY_ROUTES"] = routesFor(t, []string{orders, missing}, "orders", "gateway-abstraction")
	vars["PORT"] = "0"
	cfg, err := loadConfig(platformtest.Getenv(vars))
	if err != nil {
		t.Fatal(err)
	}
	log, logs := platformtest.NewLogger(t, serviceName)
	r := platformtest.Start(t, func(ctx context.Context) error { return run(ctx, cfg, log) })
	url := platformtest.StartedURL(t, logs)
	var problem map[string]any
	if err := json.Unmarshal(platformtest.WaitStatus(t, url+"/readyz", 503), &problem); err != nil {
		t.Fatal(err)
	}
	if got, want := problem["detail"], "not ready: spanner "+missing; got != want {
		t.Errorf("detail = %v, want %s", got, want)
	}
	// The count is recorded just after the response is written, so poll.
	platformtest.Eventually(t, "/metrics to count the failed readiness probe", func() bool {
		return strings.Contains(string(platformtest.WaitStatus(t, url+"/metrics", 200)), `route="/readyz",status="503"`)
	})
	if err := r.Stop(t); err != nil {
		t.Errorf("run = %v, want nil after cancellation", err)
	}
}

func TestRunRefusesLongRedeliveryWindow(t *testing.T) {
	_, orders := env.NewDatabase(t, dbschema.Orders)
	// A queue created with only a name retries up to 100 times with back-off up to an hour, and
	// tasksemu's 1 h cap makes that 100 h; a 29-day max_retry_duration does not fit in 30 days.
	srv, err := tasksemu.Start(context.Background(), tasksemu.Options{Queues: []tasksemu.QueueConfig{{
		Name: location + "/queues/fulfillment-inbox", Retry: retry.Policy{MaxAttempts: -1, MaxRetryDuration: 29 * 24 * time.Hour, MinBackoff: time.Second, MaxBackoff: time.Hour, MaxDoublings: 4},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	vars := baseEnv(srv.Addr(), "http://127.0.0.1:1")
	vars["RELAY_SOURCES"] = orders
	vars["RELAY_ROUTES"] = routesFor(t, []string{orders}, "orders")
	vars["PORT"] = "0"
	cfg, err := loadConfig(platformtest.Getenv(vars))
	if err != nil {
		t.Fatal(err)
	}
	log, _ := platformtest.NewLogger(t, serviceName)
	err = run(context.Background(), cfg, log)
	if err == nil || !strings.Contains(err.Error(), "fulfillment-inbox") || !strings.Contains(err.Error(), "dedup retention") {
		t.Errorf("run = %v, want a refusal naming the queue and the dedup retention", err)
	}
}
