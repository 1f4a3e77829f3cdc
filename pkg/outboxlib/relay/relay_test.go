package relay_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/spanner"
	"github.com/google/uuid"
	"github.com/googleapis/gax-go/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/spanmart/spanmart/emulator/tasksemu"
	"github.com/spanmart/spanmart/emulator/tasksemu/retry"
	"github.com/spanmart/spanmart/gen/dao/outboxdb"
	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/outboxlib/outboxapi"
	"github.com/spanmart/spanmart/pkg/outboxlib/relay"
	"github.com/spanmart/spanmart/pkg/spannertest"
)

var env *spannertest.Env

func TestMain(m *testing.M) { os.Exit(spannertest.Main(m, &env)) }

const (
	location       = "projects/spanmart-test/locations/us-central1"
	serviceAccount = "relay@spanmart-test.iam.gserviceaccount.com"
	timeout        = 20 * time.Second
)

func queue(id string) string { return location + "/queues/" + id }

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// consumer is an HTTP endpoint that records every delivery and answers 200.
type consumer struct {
	name string
	srv  *httptest.Server
	mu   sync.Mutex
	got  []delivery
}

type delivery struct {
	header http.Header
	body   []byte
}

func newConsumer(t *testing.T, name string) *consumer {
	c := &consumer{name: name}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.got = append(c.got, delivery{r.Header.Clone(), body})
		c.mu.Unlock()
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *consumer) subscriber() relay.Subscriber {
	return relay.Subscriber{Name: c.name, Queues: []string{queue(c.name + "-inbox")}, URL: c.srv.URL + "/events", Audience: c.srv.URL}
}

func (c *consumer) deliveries() []delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]delivery(nil), c.got...)
}

// perEvent counts deliveries by ce-id.
func (c *consumer) perEvent() map[string]int {
	n := map[string]int{}
	for _, d := range c.deliveries() {
		n[d.header.Get(outboxlib.HeaderID)]++
	}
	return n
}

// startTasks starts a Cloud Tasks emulator with a queue per consumer and returns it with a client.
func startTasks(t *testing.T, opts tasksemu.Options, consumers ...*consumer) (*tasksemu.Server, *cloudtasks.Client) {
	t.Helper()
	for _, c := range consumers {
		opts.Queues = append(opts.Queues, tasksemu.QueueConfig{Name: queue(c.name + "-inbox"), Retry: retry.Policy{
			MaxAttempts: -1, MaxRetryDuration: 72 * time.Hour, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, MaxDoublings: 4,
		}})
	}
	ctx := context.Background()
	srv, err := tasksemu.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	client, err := cloudtasks.NewClient(ctx, srv.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return srv, client
}

// countingTasks records the gRPC code of every CreateTask.
type countingTasks struct {
	relay.Tasks
	mu    sync.Mutex
	codes map[codes.Code]int
}

func (c *countingTasks) CreateTask(ctx context.Context, req *cloudtaskspb.CreateTaskRequest, opts ...gax.CallOption) (*cloudtaskspb.Task, error) {
	task, err := c.Tasks.CreateTask(ctx, req, opts...)
	c.mu.Lock()
	if c.codes == nil {
		c.codes = map[codes.Code]int{}
	}
	c.codes[status.Code(err)]++
	c.mu.Unlock()
	return task, err
}

func (c *countingTasks) count(code codes.Code) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.codes[code]
}

// testConfig is a relay configuration scaled down for tests.
func testConfig(client *spanner.Client, db string, tasks relay.Tasks, routes relay.Routes) relay.Config {
	return relay.Config{
		Sources:        []relay.Source{{Name: "orders", Client: client, Database: db}},
		Routes:         routes,
		Tasks:          tasks,
		ServiceAccount: serviceAccount,
		LeaseDuration:  1500 * time.Millisecond,
		PollInterval:   20 * time.Millisecond,
		MaxIdle:        200 * time.Millisecond,
		BaseBackoff:    20 * time.Millisecond,
		MaxBackoff:     100 * time.Millisecond,
		TasksDownMax:   300 * time.Millisecond,
		CallTimeout:    2 * time.Second,
	}
}

// start runs a relay until the returned stop is called (or the test ends).
func start(t *testing.T, cfg relay.Config) (*relay.Relay, func()) {
	t.Helper()
	r, err := relay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run = %v, want nil", err)
				}
			case <-time.After(timeout):
				t.Errorf("relay did not stop")
			}
		})
	}
	t.Cleanup(stop)
	return r, stop
}

// appendEvents commits n events of type typ, each of its own aggregate, in one transaction.
func appendEvents(t *testing.T, client *spanner.Client, typ string, n int) []outboxlib.Event {
	t.Helper()
	ctx := context.Background()
	var evs []outboxlib.Event
	for i := range n {
		ev, err := outboxlib.NewEvent(ctx, typ, "order", uuid.NewString(), 1, map[string]any{"n": i, "big": int64(1) << 60})
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	_, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		return outboxlib.Append(ctx, txn, evs...)
	})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func readEvent(t *testing.T, client *spanner.Client, id string) *outboxdb.OutboxEvent {
	t.Helper()
	row, err := outboxdb.ReadOutboxEvent(context.Background(), client.Single(), id)
	if err != nil {
		t.Fatal(err)
	}
	return row
}

func status1(t *testing.T, r *relay.Relay) outboxapi.SourceStatus {
	t.Helper()
	st, err := r.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 {
		t.Fatalf("Status = %d sources, want 1", len(st))
	}
	return st[0]
}

// exactlyOnce fails unless c got every event of evs exactly once and nothing else.
func exactlyOnce(t *testing.T, c *consumer, evs []outboxlib.Event) {
	t.Helper()
	got := c.perEvent()
	if len(got) != len(evs) {
		t.Errorf("%s got %d distinct events, want %d", c.name, len(got), len(evs))
	}
	for _, ev := range evs {
		if got[ev.ID] != 1 {
			t.Errorf("%s got event %s %d times, want 1", c.name, ev.ID, got[ev.ID])
		}
	}
}

func TestDeliversOncePerSubscriberAndMarksPublished(t *testing.T) {
	client, db := env.NewDatabase(t, dbschema.Orders)
	fulfillment, notifications, orders := newConsumer(t, "fulfillment"), newConsumer(t, "notifications"), newConsumer(t, "orders")
	_, tc := startTasks(t, tasksemu.Options{ServiceAccount: "default@emulator"}, fulfillment, notifications, orders)
	routes := relay.Routes{
		"order.created":      {fulfillment.subscriber(), notifications.subscriber()},
		"inventory.reserved": {orders.subscriber()},
	}
	created := appendEvents(t, client, "order.created", 30)
	reserved := appendEvents(t, client, "inventory.reserved", 5)
	unrouted := appendEvents(t, client, "order.nobody.listens", 3)

	r, _ := start(t, testConfig(client, db, tc, routes))
	r.Nudge()
	eventually(t, "every event to be published", func() bool { return status1(t, r).Pending == 0 })
	eventually(t, "every delivery", func() bool {
		return len(fulfillment.deliveries()) >= 30 && len(notifications.deliveries()) >= 30 && len(orders.deliveries()) >= 5
	})
	exactlyOnce(t, fulfillment, created)
	exactlyOnce(t, notifications, created)
	exactlyOnce(t, orders, reserved)

	for _, ev := range append(append(created, reserved...), unrouted...) {
		row := readEvent(t, client, ev.ID)
		if row.PendingShard.Valid || !row.PublishedAt.Valid || row.Attempts != 0 || row.ReplayGeneration != 0 || row.ReplayReason.Valid {
			t.Errorf("event %s: PendingShard %v, PublishedAt %v, Attempts %d, ReplayGeneration %d, ReplayReason %v; want NULL, set, 0, 0, NULL",
				ev.ID, row.PendingShard, row.PublishedAt, row.Attempts, row.ReplayGeneration, row.ReplayReason)
		}
	}

	// The request as the consumer sees it: CloudEvents headers, the payload's exact text, an OIDC
	// token for the consumer's audience from the relay's service account.
	byID := map[string]outboxlib.Event{}
	for _, ev := range created {
		byID[ev.ID] = ev
	}
	for _, d := range fulfillment.deliveries() {
		ev := byID[d.header.Get(outboxlib.HeaderID)]
		parsed, err := outboxlib.ParseRequest(d.header, d.body)
		if err != nil {
			t.Fatal(err)
		}
		if parsed.Source != "//spanmart/orders" || parsed.Type != "order.created" || parsed.AggregateID != ev.AggregateID || !parsed.OccurredAt.Equal(ev.OccurredAt) {
			t.Errorf("delivered event = %+v, want source //spanmart/orders and the fields of %+v", parsed, ev)
		}
		if !strings.Contains(string(d.body), strconv.FormatInt(1<<60, 10)) {
			t.Errorf("body %s lost the exact integer %d", d.body, int64(1)<<60)
		}
		claims := jwtClaims(t, d.header.Get("Authorization"))
		if claims["aud"] != fulfillment.srv.URL || claims["email"] != serviceAccount {
			t.Errorf("OIDC token claims = %v, want aud %s and email %s", claims, fulfillment.srv.URL, serviceAccount)
		}
	}

	// A replay of a published event delivers it again under the same id, with fresh task names.
	ctx := context.Background()
	ev := created[0]
	if err := r.Replay(ctx, "orders", ev.ID, "consumer lost its state"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the replayed event to be delivered again", func() bool {
		return fulfillment.perEvent()[ev.ID] == 2 && notifications.perEvent()[ev.ID] == 2
	})
	eventually(t, "the replayed event to be published", func() bool { return readEvent(t, client, ev.ID).PublishedAt.Valid })
	if row := readEvent(t, client, ev.ID); row.ReplayGeneration != 1 || row.ReplayReason.StringVal != "consumer lost its state" || row.LastError.Valid {
		t.Errorf("after a replay: ReplayGeneration %d, ReplayReason %v, LastError %v; want 1, the reason, NULL", row.ReplayGeneration, row.ReplayReason, row.LastError)
	}
	// Every replay of a published event is a generation of its own.
	if err := r.Replay(ctx, "orders", ev.ID, "again"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the second replay to be delivered", func() bool {
		return fulfillment.perEvent()[ev.ID] == 3 && notifications.perEvent()[ev.ID] == 3
	})
	eventually(t, "the second replay to be published", func() bool { return readEvent(t, client, ev.ID).PublishedAt.Valid })
	if row := readEvent(t, client, ev.ID); row.ReplayGeneration != 2 || row.ReplayReason.StringVal != "again" {
		t.Errorf("after a second replay: ReplayGeneration %d, ReplayReason %v; want 2, the new reason", row.ReplayGeneration, row.ReplayReason)
	}

	// Operator errors.
	if err := r.Replay(ctx, "orders", ev.ID, " "); !errors.Is(err, relay.ErrNoReason) {
		t.Errorf("Replay without reason = %v, want ErrNoReason", err)
	}
	if err := r.Replay(ctx, "orders", uuid.NewString(), "x"); !errors.Is(err, relay.ErrEventNotFound) {
		t.Errorf("Replay of a missing event = %v, want ErrEventNotFound", err)
	}
	if err := r.Replay(ctx, "nosuch", ev.ID, "x"); !errors.Is(err, relay.ErrUnknownSource) {
		t.Errorf("Replay in an unknown source = %v, want ErrUnknownSource", err)
	}
}

// jwtClaims decodes (without verifying: tasksemu's own tests do that) the claims of a bearer token.
func jwtClaims(t *testing.T, authorization string) map[string]any {
	t.Helper()
	token, ok := strings.CutPrefix(authorization, "Bearer ")
	parts := strings.Split(token, ".")
	if !ok || len(parts) != 3 {
		t.Fatalf("Authorization = %q, want a bearer JWT", authorization)
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(raw, &claims); err != nil {
		t.Fatal(err)
	}
	return claims
}

// oneRoute is an orders database holding n order.created events, routed to one consumer
// (fulfillment) through a Tasks emulator: what most of these tests start from.
type oneRoute struct {
	client   *spanner.Client
	db       string
	consumer *consumer
	tasks    *cloudtasks.Client
	routes   relay.Routes
	evs      []outboxlib.Event
}

func toFulfillment(t *testing.T, n int) oneRoute {
	t.Helper()
	client, db := env.NewDatabase(t, dbschema.Orders)
	fulfillment := newConsumer(t, "fulfillment")
	_, tc := startTasks(t, tasksemu.Options{}, fulfillment)
	return oneRoute{client: client, db: db, consumer: fulfillment, tasks: tc,
		routes: relay.Routes{"order.created": {fulfillment.subscriber()}}, evs: appendEvents(t, client, "order.created", n)}
}

func TestCrashAfterEnqueueIsAlreadyExists(t *testing.T) {
	f := toFulfillment(t, 10)
	client, db, fulfillment, tc, routes, evs := f.client, f.db, f.consumer, f.tasks, f.routes, f.evs

	// The first relay "crashes" after creating the tasks, before marking the rows.
	crashing := testConfig(client, db, tc, routes)
	crashing.BeforeMark = func(context.Context, string, int64, []string) error { return errors.New("crash") }
	r1, stop1 := start(t, crashing)
	eventually(t, "the tasks to be delivered", func() bool { return len(fulfillment.perEvent()) == 10 })
	stop1()
	if st := status1(t, r1); st.Pending != 10 {
		t.Fatalf("pending after the crash = %d, want 10", st.Pending)
	}

	counting := &countingTasks{Tasks: tc}
	r2, _ := start(t, testConfig(client, db, counting, routes))
	eventually(t, "the second relay to publish every event", func() bool { return status1(t, r2).Pending == 0 })
	if got := counting.count(codes.AlreadyExists); got != 10 {
		t.Errorf("second relay: %d ALREADY_EXISTS, want 10 (one per event); codes %v", got, counting.codes)
	}
	if got := counting.count(codes.OK); got != 0 {
		t.Errorf("second relay created %d new tasks, want 0", got)
	}
	exactlyOnce(t, fulfillment, evs)
}

func TestTwoInstancesShareShards(t *testing.T) {
	f := toFulfillment(t, 100)
	client, db, fulfillment, tc, routes, evs := f.client, f.db, f.consumer, f.tasks, f.routes, f.evs

	a := testConfig(client, db, tc, routes)
	a.Owner = "relay-a"
	b := testConfig(client, db, tc, routes)
	b.Owner = "relay-b"
	ra, _ := start(t, a)
	start(t, b)

	eventually(t, "both instances to hold half the shards", func() bool {
		held := map[string]int{}
		for _, s := range status1(t, ra).Shards {
			if s.Live {
				held[s.Owner]++
			}
		}
		return held["relay-a"] == outboxlib.Shards/2 && held["relay-b"] == outboxlib.Shards/2
	})
	eventually(t, "every event to be published", func() bool { return status1(t, ra).Pending == 0 })
	eventually(t, "every delivery", func() bool { return len(fulfillment.deliveries()) >= len(evs) })
	exactlyOnce(t, fulfillment, evs)

	more := appendEvents(t, client, "order.created", 20)
	eventually(t, "later events to be delivered", func() bool { return len(fulfillment.deliveries()) >= len(evs)+len(more) })
	exactlyOnce(t, fulfillment, append(evs, more...))
}

// A shard's loop that looked before its instance held the shard sleeps for MaxIdle; taking the
// lease wakes it. With an idle cap of an hour, events waiting when the relay starts are published
// only because of that wake-up.
func TestTakingALeaseWakesTheShard(t *testing.T) {
	f := toFulfillment(t, 40)
	fulfillment, evs := f.consumer, f.evs
	cfg := testConfig(f.client, f.db, f.tasks, f.routes)
	cfg.MaxIdle = time.Hour
	r, _ := start(t, cfg)
	eventually(t, "every event to be published", func() bool { return status1(t, r).Pending == 0 })
	eventually(t, "every delivery", func() bool { return len(fulfillment.deliveries()) >= len(evs) })
	exactlyOnce(t, fulfillment, evs)
}

// A shard's backlog bigger than a batch drains although marks are deferred: a full scan that
// found only rows waiting for their mark (BatchSize 2, a mark each 300 ms) sleeps, and the mark
// wakes it. With MaxIdle an hour, no probe would.
func TestBacklogDrainsPastRowsWaitingForTheirMark(t *testing.T) {
	f := toFulfillment(t, 5*outboxlib.Shards+1) // some shard holds at least six: three batches
	fulfillment, evs := f.consumer, f.evs
	cfg := testConfig(f.client, f.db, f.tasks, f.routes)
	cfg.BatchSize, cfg.MarkEvery, cfg.MaxIdle = 2, 300*time.Millisecond, time.Hour
	r, _ := start(t, cfg)
	eventually(t, "every event to be published", func() bool { return status1(t, r).Pending == 0 })
	eventually(t, "every delivery", func() bool { return len(fulfillment.deliveries()) >= len(evs) })
	exactlyOnce(t, fulfillment, evs)
}

// Idle shards do not scan on their own: the source's probe finds the shards with due rows once
// each MaxIdle and wakes them. Events committed while the relay idles, with no nudge, are
// published that way (without the probe their shards would wait for a nudge that never comes).
func TestProbeWakesShardsNoNudgeAnnounced(t *testing.T) {
	client, db := env.NewDatabase(t, dbschema.Orders)
	fulfillment := newConsumer(t, "fulfillment")
	_, tc := startTasks(t, tasksemu.Options{}, fulfillment)
	routes := relay.Routes{"order.created": {fulfillment.subscriber()}}
	r, _ := start(t, testConfig(client, db, tc, routes))
	eventually(t, "the relay to hold every shard", func() bool {
		held := 0
		for _, sh := range status1(t, r).Shards {
			if sh.Owner != "" {
				held++
			}
		}
		return held == outboxlib.Shards
	})
	evs := appendEvents(t, client, "order.created", 20) // no nudge
	eventually(t, "every event to be published", func() bool { return status1(t, r).Pending == 0 })
	eventually(t, "every delivery", func() bool { return len(fulfillment.deliveries()) >= len(evs) })
	exactlyOnce(t, fulfillment, evs)
}

// A nudge that names several shards costs one scan: the relay reads the due rows of every shard
// due at one moment in one query, and publishes them all.
func TestANudgeOfSeveralShardsIsOneScan(t *testing.T) {
	client, db := env.NewDatabase(t, dbschema.Orders)
	fulfillment := newConsumer(t, "fulfillment")
	_, tc := startTasks(t, tasksemu.Options{}, fulfillment)
	reg := prometheus.NewRegistry()
	cfg := testConfig(client, db, tc, relay.Routes{"order.created": {fulfillment.subscriber()}})
	cfg.MaxIdle = time.Hour // no probe: only nudges (and the leases taken) wake shards
	cfg.Registerer = reg
	r, _ := start(t, cfg)
	scans := func() float64 {
		return gauge(t, reg, "outbox_relay_scans_total", map[string]string{"source": "orders"})
	}
	nudge := func(evs []outboxlib.Event) {
		t.Helper()
		var shards []int64
		for _, ev := range evs {
			shards = append(shards, outboxlib.ShardOf(ev.AggregateID))
		}
		if !r.NudgeShards("orders", shards...) {
			t.Fatal("NudgeShards refused the events' shards")
		}
	}
	// The first event is published once the relay holds its shard (by a nudge, or by the scan of
	// the shards its leases woke); then every wake-up so far has had its scan.
	first := appendEvents(t, client, "order.created", 1)
	eventually(t, "the first event", func() bool {
		if len(fulfillment.deliveries()) >= 1 && status1(t, r).Pending == 0 {
			return true
		}
		nudge(first)
		return false
	})
	evs := appendEvents(t, client, "order.created", 12)
	shards := map[int64]bool{}
	for _, ev := range evs {
		shards[outboxlib.ShardOf(ev.AggregateID)] = true
	}
	if len(shards) < 3 {
		t.Fatalf("12 random aggregates fell into %d shards; the test needs several", len(shards))
	}
	before := scans()
	nudge(evs)
	eventually(t, "every event to be published", func() bool { return status1(t, r).Pending == 0 })
	eventually(t, "every delivery", func() bool { return len(fulfillment.deliveries()) >= 1+len(evs) })
	exactlyOnce(t, fulfillment, append(first, evs...))
	if n := scans() - before; n != 1 {
		t.Errorf("%v scans for one nudge of %d shards, want 1", n, len(shards))
	}
}

func TestReleasesLeasesOnShutdown(t *testing.T) {
	client, db := env.NewDatabase(t, dbschema.Orders)
	_, tc := startTasks(t, tasksemu.Options{})
	r, stop := start(t, testConfig(client, db, tc, nil))
	eventually(t, "every shard to be leased", func() bool {
		for _, s := range status1(t, r).Shards {
			if !s.Live || s.Owner != r.Owner() || s.Epoch != 1 {
				return false
			}
		}
		return true
	})
	stop()
	for _, s := range status1(t, r).Shards {
		if s.Live || s.Owner != "" {
			t.Errorf("shard %d after shutdown: owner %q, live %v; want free", s.Shard, s.Owner, s.Live)
		}
	}
	// The next owner gets a new epoch (fencing of the old one).
	r2, _ := start(t, testConfig(client, db, tc, nil))
	eventually(t, "a new owner with epoch 2", func() bool {
		for _, s := range status1(t, r2).Shards {
			if !s.Live || s.Owner != r2.Owner() || s.Epoch != 2 {
				return false
			}
		}
		return true
	})
}

func TestTasksDownBacksOffAndDrains(t *testing.T) {
	client, db := env.NewDatabase(t, dbschema.Orders)
	fulfillment := newConsumer(t, "fulfillment")
	dir := t.TempDir()
	srv, _ := startTasks(t, tasksemu.Options{DataDir: dir}, fulfillment)
	_, port, _ := net.SplitHostPort(srv.Addr())
	portN, _ := strconv.Atoi(port)
	// The relay's client keeps pointing at the address; the emulator comes back there.
	tc, err := cloudtasks.NewClient(context.Background(), srv.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tc.Close() })
	counting := &countingTasks{Tasks: tc}
	routes := relay.Routes{"order.created": {fulfillment.subscriber()}}
	first := appendEvents(t, client, "order.created", 5)
	r, _ := start(t, testConfig(client, db, counting, routes))
	eventually(t, "the first events", func() bool { return len(fulfillment.deliveries()) >= 5 && status1(t, r).Pending == 0 })

	srv.Close()
	down := appendEvents(t, client, "order.created", 10)
	r.Nudge()
	eventually(t, "UNAVAILABLE from the stopped emulator", func() bool { return counting.count(codes.Unavailable) > 0 })
	// The relay backs off as a whole and probes with one shard at a time: a handful of calls in
	// this window (the sleep measures a rate; it decides nothing about correctness), not one per
	// event per poll (hundreds at a 20 ms poll interval).
	before := counting.count(codes.Unavailable)
	time.Sleep(500 * time.Millisecond)
	if calls := counting.count(codes.Unavailable) - before; calls > 20 {
		t.Errorf("%d failing CreateTask calls in 500 ms while Cloud Tasks is down, want a back-off", calls)
	}
	st := status1(t, r)
	if st.Pending != 10 || st.Quarantined != 0 || st.OldestPendingAgeSeconds <= 0 {
		t.Errorf("status while down = %+v, want 10 pending, none quarantined, an oldest age", st)
	}
	for _, ev := range down {
		if row := readEvent(t, client, ev.ID); row.Attempts != 0 || row.NextAttemptAt.Valid {
			t.Errorf("event %s was charged for the outage: Attempts %d, NextAttemptAt %v", ev.ID, row.Attempts, row.NextAttemptAt)
		}
	}

	srv2, err := tasksemu.Start(context.Background(), tasksemu.Options{Port: portN, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv2.Close() })
	eventually(t, "the backlog to drain", func() bool { return status1(t, r).Pending == 0 })
	eventually(t, "every delivery", func() bool { return len(fulfillment.deliveries()) >= 15 })
	exactlyOnce(t, fulfillment, append(first, down...))
}

func TestBackoffQuarantineAndReplay(t *testing.T) {
	client, db := env.NewDatabase(t, dbschema.Orders)
	fulfillment, gateway := newConsumer(t, "fulfillment"), newConsumer(t, "gateway")
	// No queue for the gateway yet: CreateTask answers NOT_FOUND, which is retried per event.
	_, tc := startTasks(t, tasksemu.Options{}, fulfillment)
	counting := &countingTasks{Tasks: tc}
	broken := fulfillment.subscriber()
	broken.URL = "not a url"
	routes := relay.Routes{"order.awaiting_payment": {gateway.subscriber()}, "order.created": {broken}}
	cfg := testConfig(client, db, counting, routes)
	cfg.MaxAttempts = 3
	cfg.Logger = zaptest.NewLogger(t)
	ctx := context.Background()

	noQueue := appendEvents(t, client, "order.awaiting_payment", 1)[0]
	badURL := appendEvents(t, client, "order.created", 1)[0]
	fine := appendEvents(t, client, "order.nobody.listens", 1)[0]
	r, stop := start(t, cfg)

	eventually(t, "both failing events to be quarantined", func() bool { return status1(t, r).Quarantined == 2 })
	st := status1(t, r)
	if st.Pending != 0 {
		t.Errorf("pending = %d, want 0 (quarantined rows are not pending)", st.Pending)
	}
	row := readEvent(t, client, noQueue.ID)
	if row.Attempts != 3 || !row.QuarantinedAt.Valid || !row.PendingShard.Valid || !strings.HasPrefix(row.LastError.StringVal, "enqueue ") ||
		!strings.Contains(row.LastError.StringVal, "NotFound") {
		t.Errorf("missing queue: Attempts %d, QuarantinedAt %v, PendingShard %v, LastError %q; want 3 attempts, quarantined, still pending, the error",
			row.Attempts, row.QuarantinedAt, row.PendingShard, row.LastError.StringVal)
	}
	quarantinedAt(t, row)
	row = readEvent(t, client, badURL.ID)
	if row.Attempts != 1 || !row.QuarantinedAt.Valid || !strings.Contains(row.LastError.StringVal, "InvalidArgument") {
		t.Errorf("bad URL: Attempts %d, QuarantinedAt %v, LastError %q; want quarantined at the first (permanent) error",
			row.Attempts, row.QuarantinedAt, row.LastError.StringVal)
	}
	quarantinedAt(t, row)
	if !readEvent(t, client, fine.ID).PublishedAt.Valid {
		t.Errorf("an event behind the failing ones was not published")
	}
	if got := counting.count(codes.NotFound); got != 3 {
		t.Errorf("%d NOT_FOUND calls, want 3 (no calls after quarantine)", got)
	}

	// Fix the queue, then replay: delivered under its own id.
	if _, err := tc.CreateQueue(ctx, &cloudtaskspb.CreateQueueRequest{Parent: location, Queue: &cloudtaskspb.Queue{
		Name: gateway.subscriber().Queues[0], RetryConfig: &cloudtaskspb.RetryConfig{MaxRetryDuration: durationpb.New(time.Hour)},
	}}); err != nil {
		t.Fatal(err)
	}
	if err := r.Replay(ctx, "orders", noQueue.ID, "queue created"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the replayed event to be delivered", func() bool { return gateway.perEvent()[noQueue.ID] == 1 })
	eventually(t, "the replayed event to be published", func() bool { return readEvent(t, client, noQueue.ID).PublishedAt.Valid })
	// A quarantined event was never published: it keeps its generation (its names are free).
	if row := readEvent(t, client, noQueue.ID); row.LastError.Valid || row.Attempts != 0 || row.QuarantinedAt.Valid ||
		row.ReplayGeneration != 0 || row.ReplayReason.StringVal != "queue created" {
		t.Errorf("after replay: LastError %v, Attempts %d, QuarantinedAt %v, ReplayGeneration %d, ReplayReason %v; want NULL, 0, NULL, 0, the reason",
			row.LastError, row.Attempts, row.QuarantinedAt, row.ReplayGeneration, row.ReplayReason)
	}

	// Fix the route (configuration), restart, replay.
	stop()
	routes["order.created"] = []relay.Subscriber{fulfillment.subscriber()}
	r2, _ := start(t, testConfig(client, db, tc, routes))
	if err := r2.Replay(ctx, "orders", badURL.ID, "route fixed"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the fixed event to be delivered", func() bool { return fulfillment.perEvent()[badURL.ID] == 1 })
	eventually(t, "nothing pending or quarantined", func() bool {
		st := status1(t, r2)
		return st.Pending == 0 && st.Quarantined == 0
	})
	if row := readEvent(t, client, badURL.ID); row.ReplayGeneration != 0 || row.ReplayReason.StringVal != "route fixed" || row.LastError.Valid {
		t.Errorf("fixed event: ReplayGeneration %d, ReplayReason %v, LastError %v; want 0, the reason, NULL", row.ReplayGeneration, row.ReplayReason, row.LastError)
	}
}

// quarantinedAt fails unless row's QuarantinedAt is a commit timestamp of the relay: after the
// row's own commit (CreatedAt), not ahead of the clock.
func quarantinedAt(t *testing.T, row *outboxdb.OutboxEvent) {
	t.Helper()
	if q := row.QuarantinedAt; !q.Valid || q.Time.Before(row.CreatedAt) || q.Time.After(time.Now()) {
		t.Errorf("event %s: QuarantinedAt %v, want a commit timestamp after CreatedAt %v", row.EventId, q, row.CreatedAt)
	}
}

func TestRefusesLongRedeliveryWindow(t *testing.T) {
	client, db := env.NewDatabase(t, dbschema.Orders)
	fulfillment := newConsumer(t, "fulfillment")
	_, tc := startTasks(t, tasksemu.Options{}, fulfillment)
	ctx := context.Background()
	long := &cloudtaskspb.Queue{Name: queue("long-inbox"), RetryConfig: &cloudtaskspb.RetryConfig{MaxRetryDuration: durationpb.New(25 * 24 * time.Hour)}}
	if _, err := tc.CreateQueue(ctx, &cloudtaskspb.CreateQueueRequest{Parent: location, Queue: long}); err != nil {
		t.Fatal(err)
	}
	sub := relay.Subscriber{Name: "long", Queues: []string{long.Name}, URL: fulfillment.srv.URL}
	r, err := relay.New(testConfig(client, db, tc, relay.Routes{"order.created": {sub}}))
	if err != nil {
		t.Fatal(err)
	}
	// 25 days of retries plus the 7-day replay window reach past the 30-day dedup retention.
	if err := r.Run(ctx); err == nil || !strings.Contains(err.Error(), long.Name) {
		t.Errorf("Run = %v, want a refusal naming %s", err, long.Name)
	}
	cfg := testConfig(client, db, tc, relay.Routes{"order.created": {sub}})
	cfg.ReplayWindow = 24 * time.Hour
	r, err = relay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.CheckQueues(ctx); err != nil {
		t.Errorf("CheckQueues with a 1-day replay window = %v, want nil", err)
	}
}

func TestTaskName(t *testing.T) {
	q := queue("fulfillment-inbox")
	a := relay.TaskName(q, "e1", "fulfillment", 0)
	if a != relay.TaskName(q, "e1", "fulfillment", 0) {
		t.Error("TaskName is not deterministic")
	}
	for _, other := range []string{relay.TaskName(q, "e1", "orders", 0), relay.TaskName(q, "e2", "fulfillment", 0), relay.TaskName(q, "e1", "fulfillment", 1)} {
		if other == a {
			t.Errorf("TaskName collision: %s", a)
		}
	}
	if id := strings.TrimPrefix(a, q+"/tasks/"); len(id) != 64 {
		t.Errorf("task id %q, want 64 hex digits", id)
	}
}

func TestNewRejectsIncompleteConfig(t *testing.T) {
	_, err := relay.New(relay.Config{Routes: relay.Routes{"x": {{Name: "s"}}}})
	if err == nil {
		t.Fatal("New with an empty config succeeded")
	}
	for _, want := range []string{"no sources", "no Cloud Tasks client", "no service account", `subscriber "s" needs`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("New error %q does not mention %q", err, want)
		}
	}
}

// A subscriber with several queues gets each event once, through the queue its aggregate id
// hashes to: every queue takes a share, and all of one aggregate's events go through one queue.
func TestSubscriberOverSeveralQueues(t *testing.T) {
	client, db := env.NewDatabase(t, dbschema.Orders)
	orders := newConsumer(t, "orders")
	_, tc := startTasks(t, tasksemu.Options{})
	names := []string{"orders-inbox", "orders-inbox-2", "orders-inbox-3"}
	sub := relay.Subscriber{Name: "orders", URL: orders.srv.URL + "/events", Audience: orders.srv.URL}
	for _, name := range names {
		createQueue(t, tc, queue(name), nil)
		sub.Queues = append(sub.Queues, queue(name))
	}
	aggregateOf := map[string]string{}
	var evs []outboxlib.Event
	for range 30 {
		for _, ev := range appendOf(t, client, uuid.NewString(), "order.created", "order.confirmed") {
			aggregateOf[ev.ID] = ev.AggregateID
			evs = append(evs, ev)
		}
	}
	start(t, testConfig(client, db, tc, relay.Routes{"order.created": {sub}, "order.confirmed": {sub}}))
	eventually(t, "every event delivered", func() bool { return len(orders.perEvent()) == len(evs) })
	exactlyOnce(t, orders, evs)

	perQueue := map[string]int{}
	queueOf := map[string]string{} // aggregate id → queue its events came through
	for _, d := range orders.deliveries() {
		q, agg := d.header.Get("X-CloudTasks-QueueName"), aggregateOf[d.header.Get(outboxlib.HeaderID)]
		perQueue[q]++
		if want := sub.QueueFor(agg); queue(q) != want {
			t.Errorf("event of %s came through %s, want %s", agg, q, want)
		}
		if prev, ok := queueOf[agg]; ok && prev != q {
			t.Errorf("the events of %s came through %s and %s, want one queue", agg, prev, q)
		}
		queueOf[agg] = q
	}
	for _, name := range names {
		if perQueue[name] == 0 {
			t.Errorf("queue %s took no task (per queue: %v), want a share of the 60", name, perQueue)
		}
	}
}
