package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/spanner"
	"github.com/google/uuid"
	"github.com/googleapis/gax-go/v2"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/spanmart/spanmart/emulator/tasksemu"
	"github.com/spanmart/spanmart/gen/dao"
	"github.com/spanmart/spanmart/gen/dao/fulfillmentdb"
	"github.com/spanmart/spanmart/gen/dao/outboxdb"
	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/outboxlib/outboxapi"
	"github.com/spanmart/spanmart/pkg/outboxlib/relay"
	"github.com/spanmart/spanmart/pkg/platform"
)

// appCounter is a real outboxlib consumer (inbox, versions, dead letters) over a fresh fulfillment
// database, served over HTTP: each applied event adds one to Inventory[aggregate id].OnHand, in
// the library's default order. Its handler can be swapped (a redeployment) while it serves.
type appCounter struct {
	name     string
	client   *spanner.Client
	srv      *httptest.Server
	tasks    *tasksemu.Server
	handler  atomic.Pointer[http.Handler]
	consumer atomic.Pointer[outboxlib.Consumer]
	mu       sync.Mutex
	answers  map[string][]string // event id → outcomes ("" for a failure) in order
}

// newAppCounter starts the consumer; audience is the audience its verifier accepts (its own URL
// when "", a wrong one to simulate a misconfiguration).
func newAppCounter(t *testing.T, name string, tasks *tasksemu.Server, maxAttempts int) *appCounter {
	t.Helper()
	c := &appCounter{name: name, tasks: tasks, answers: map[string][]string{}}
	c.client, _ = env.NewDatabase(t, dbschema.Fulfillment)
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*c.handler.Load()).ServeHTTP(w, r) }))
	t.Cleanup(c.srv.Close)
	c.deploy(t, c.srv.URL, maxAttempts)
	return c
}

// deploy replaces the running consumer by one whose verifier accepts audience.
func (c *appCounter) deploy(t *testing.T, audience string, maxAttempts int) {
	t.Helper()
	v, err := outboxlib.NewVerifier(outboxlib.VerifierConfig{Issuer: c.tasks.Issuer(), Audiences: []string{audience}, AllowedEmails: []string{serviceAccount}})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := outboxlib.NewConsumer(outboxlib.ConsumerConfig{Name: c.name, Client: c.client, Verifier: v, MaxAttempts: maxAttempts})
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"order.created", "order.cancelled"} {
		cons.Handle(typ, c.count)
	}
	srv := platform.NewServer(platform.ServerOptions{Service: c.name, Logger: zap.NewNop()})
	srv.Echo.Use(c.record)
	cons.Register(srv.Echo)
	var h http.Handler = srv.Echo
	c.handler.Store(&h)
	c.consumer.Store(cons)
}

func (c *appCounter) count(ctx context.Context, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
	inv, err := fulfillmentdb.ReadInventory(ctx, txn, d.AggregateID)
	if errors.Is(err, dao.ErrNotFound) {
		inv, err = &fulfillmentdb.Inventory{Sku: d.AggregateID}, nil
	}
	if err != nil {
		return err
	}
	inv.OnHand++
	inv.UpdatedAt = spanner.CommitTimestamp
	return txn.BufferWrite([]*spanner.Mutation{inv.InsertOrUpdate()})
}

func (c *appCounter) subscriber() relay.Subscriber {
	return relay.Subscriber{Name: c.name, Queues: []string{queue(c.name + "-inbox")}, URL: c.srv.URL + outboxlib.PathEvents,
		Audience: c.srv.URL, LedgerURL: c.srv.URL + outboxlib.PathLedger}
}

func (c *appCounter) outcomes(id string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.answers[id]...)
}

func (c *appCounter) applied(t *testing.T, aggregateID string) int64 {
	t.Helper()
	inv, err := fulfillmentdb.ReadInventory(context.Background(), c.client.Single(), aggregateID)
	if errors.Is(err, dao.ErrNotFound) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return inv.OnHand
}

func (c *appCounter) deadLetters(t *testing.T) int {
	t.Helper()
	rows, err := outboxdb.ReadDeadLetterRows(context.Background(), c.client.Single(), spanner.AllKeys())
	if err != nil {
		t.Fatal(err)
	}
	return len(rows)
}

// appendOf commits events of one aggregate, versions 1, 2, ... in the order of types.
func appendOf(t *testing.T, client *spanner.Client, aggregateID string, types ...string) []outboxlib.Event {
	t.Helper()
	ctx := context.Background()
	var evs []outboxlib.Event
	for i, typ := range types {
		ev, err := outboxlib.NewEvent(ctx, typ, "order", aggregateID, int64(i+1), map[string]any{"order_id": aggregateID})
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	if _, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		return outboxlib.Append(ctx, txn, evs...)
	}); err != nil {
		t.Fatal(err)
	}
	return evs
}

// holdBack fails CreateTask for one event id until released (codes.Internal: retried per event).
type holdBack struct {
	relay.Tasks
	id       string
	released atomic.Bool
	held     atomic.Int64
	mu       sync.Mutex
	requests []*cloudtaskspb.CreateTaskRequest
}

func (h *holdBack) CreateTask(ctx context.Context, req *cloudtaskspb.CreateTaskRequest, opts ...gax.CallOption) (*cloudtaskspb.Task, error) {
	if req.GetTask().GetHttpRequest().GetHeaders()[outboxlib.HeaderID] == h.id && !h.released.Load() {
		h.held.Add(1)
		return nil, status.Error(codes.Internal, "held back by the test")
	}
	h.mu.Lock()
	h.requests = append(h.requests, req)
	h.mu.Unlock()
	return h.Tasks.CreateTask(ctx, req, opts...)
}

func (h *holdBack) header(id, name string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.requests {
		if hs := r.GetTask().GetHttpRequest().GetHeaders(); hs[outboxlib.HeaderID] == id {
			return hs[name]
		}
	}
	return ""
}

// A predecessor held back in the relay (its enqueue failing) for longer than the consumer's
// attempt limit: its successor, delivered meanwhile, is deferred (not dead-lettered), and both
// are applied, in order. The successor's task names its predecessor among the events routed to
// this subscriber (version 1, not 2, which goes elsewhere).
func TestPredecessorHeldBackInRelay(t *testing.T) {
	client, db := env.NewDatabase(t, dbschema.Orders)
	other := newConsumer(t, "gateway")
	srv, tc := startTasks(t, tasksemu.Options{ServiceAccount: serviceAccount}, other)
	const maxAttempts = 3
	c := newAppCounter(t, "fulfillment", srv, maxAttempts)
	createQueue(t, tc, c.subscriber().Queues[0], nil)
	id := uuid.NewString()
	evs := appendOf(t, client, id, "order.created", "order.awaiting_payment", "order.cancelled")
	held := &holdBack{Tasks: tc, id: evs[0].ID}
	routes := relay.Routes{
		"order.created":          {c.subscriber()},
		"order.awaiting_payment": {other.subscriber()},
		"order.cancelled":        {c.subscriber()},
	}
	start(t, testConfig(client, db, held, routes))

	// Deferred more often than the attempt limit: early answers are bounded by time, not count.
	eventually(t, "order.cancelled deferred more than MaxAttempts times", func() bool {
		return len(c.outcomes(evs[2].ID)) > 2*maxAttempts
	})
	if n := c.applied(t, id); n != 0 || c.deadLetters(t) != 0 {
		t.Fatalf("applied %d, %d dead letters while the predecessor is held back; want 0 and 0", n, c.deadLetters(t))
	}
	if got := held.header(evs[2].ID, outboxlib.HeaderPredecessorVersion); got != "1" {
		t.Errorf("order.cancelled's ce-predecessorversion = %q, want 1 (version 2 is routed elsewhere)", got)
	}
	held.released.Store(true)
	eventually(t, "both events applied", func() bool { return c.applied(t, id) == 2 })
	v, err := outboxdb.ReadConsumerVersion(context.Background(), c.client.Single(), id, "order", c.name)
	if err != nil || v.Version != 3 || v.EventId != evs[2].ID {
		t.Errorf("version = %+v (%v), want 3 set by order.cancelled", v, err)
	}
	if n := c.deadLetters(t); n != 0 {
		t.Errorf("%d dead letters, want 0", n)
	}
	if got := held.header(evs[0].ID, outboxlib.HeaderPredecessorVersion); got != "0" {
		t.Errorf("order.created's ce-predecessorversion = %q, want 0", got)
	}
	// Every task carries its row's commit timestamp, for latencies measured from the commit.
	if got, want := held.header(evs[0].ID, outboxlib.HeaderCommitTime), readEvent(t, client, evs[0].ID).CreatedAt.UTC().Format(time.RFC3339Nano); got != want {
		t.Errorf("ce-committime = %q, want the row's CreatedAt %q", got, want)
	}
}

// createQueue creates a queue with short retries (or rc).
func createQueue(t *testing.T, tc interface {
	CreateQueue(context.Context, *cloudtaskspb.CreateQueueRequest, ...gax.CallOption) (*cloudtaskspb.Queue, error)
}, name string, rc *cloudtaskspb.RetryConfig) {
	t.Helper()
	if rc == nil {
		rc = &cloudtaskspb.RetryConfig{MaxRetryDuration: durationpb.New(time.Hour), MinBackoff: durationpb.New(10 * time.Millisecond), MaxBackoff: durationpb.New(100 * time.Millisecond)}
	}
	if _, err := tc.CreateQueue(context.Background(), &cloudtaskspb.CreateQueueRequest{Parent: location, Queue: &cloudtaskspb.Queue{Name: name, RetryConfig: rc}}); err != nil {
		t.Fatal(err)
	}
}

// A lease lost between the enqueue and the mark: the mark writes nothing (fenced by the epoch),
// and the next owner's enqueue is ALREADY_EXISTS, so each subscriber still gets one task per event.
func TestLeaseLostMidBatch(t *testing.T) {
	client, db := env.NewDatabase(t, dbschema.Orders)
	fulfillment := newConsumer(t, "fulfillment")
	_, tc := startTasks(t, tasksemu.Options{}, fulfillment)
	counting := &countingTasks{Tasks: tc}
	evs := appendEvents(t, client, "order.created", 5)
	cfg := testConfig(client, db, counting, relay.Routes{"order.created": {fulfillment.subscriber()}})
	var stolen atomic.Int64
	cfg.BeforeMark = func(ctx context.Context, _ string, shard int64, ids []string) error {
		if len(ids) == 0 || stolen.Load() > 0 {
			return nil
		}
		// Another instance takes the shard (a new epoch) while this batch is in flight; its lease
		// runs out soon, and this instance takes the shard back with yet another epoch.
		_, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
			l, err := outboxdb.ReadOutboxLease(ctx, txn, shard)
			if err != nil {
				return err
			}
			l.Owner = spanner.NullString{StringVal: "thief", Valid: true}
			l.Epoch++
			l.ExpiresAt = spanner.NullTime{Time: time.Now().Add(300 * time.Millisecond), Valid: true}
			l.UpdatedAt = spanner.CommitTimestamp
			return txn.BufferWrite([]*spanner.Mutation{l.Update()})
		})
		stolen.Add(int64(len(ids)))
		return err
	}
	r, _ := start(t, cfg)
	eventually(t, "every event published", func() bool { return stolen.Load() > 0 && status1(t, r).Pending == 0 })
	// The batch whose lease was stolen was not marked: its rows were enqueued again.
	if got := counting.count(codes.AlreadyExists); int64(got) < stolen.Load() {
		t.Errorf("%d ALREADY_EXISTS, want at least the %d rows of the batch whose lease was lost", got, stolen.Load())
	}
	eventually(t, "every delivery", func() bool { return len(fulfillment.perEvent()) == len(evs) })
	exactlyOnce(t, fulfillment, evs)
}

// One subscriber failing while another succeeds: the row stays pending for both; on the retry the
// one that succeeded gets ALREADY_EXISTS (no second task), and each gets the event once.
func TestOneSubscriberFailsWhileAnotherSucceeds(t *testing.T) {
	client, db := env.NewDatabase(t, dbschema.Orders)
	fulfillment, gateway := newConsumer(t, "fulfillment"), newConsumer(t, "gateway")
	_, tc := startTasks(t, tasksemu.Options{}, fulfillment) // no gateway queue yet: NOT_FOUND
	counting := &countingTasks{Tasks: tc}
	ev := appendEvents(t, client, "order.created", 1)[0]
	r, _ := start(t, testConfig(client, db, counting, relay.Routes{"order.created": {fulfillment.subscriber(), gateway.subscriber()}}))
	eventually(t, "two failed attempts", func() bool { return readEvent(t, client, ev.ID).Attempts >= 2 })
	if row := readEvent(t, client, ev.ID); !row.PendingShard.Valid || row.PublishedAt.Valid {
		t.Fatalf("row while one subscriber fails: PendingShard %v PublishedAt %v, want pending", row.PendingShard, row.PublishedAt)
	}
	if got := counting.count(codes.AlreadyExists); got < 1 {
		t.Errorf("%d ALREADY_EXISTS, want the succeeded subscriber's task found again on each retry", got)
	}
	createQueue(t, tc, gateway.subscriber().Queues[0], nil)
	eventually(t, "published", func() bool { return status1(t, r).Pending == 0 })
	eventually(t, "both deliveries", func() bool { return gateway.perEvent()[ev.ID] == 1 })
	exactlyOnce(t, fulfillment, []outboxlib.Event{ev})
	exactlyOnce(t, gateway, []outboxlib.Event{ev})
	row := readEvent(t, client, ev.ID)
	if got := fmt.Sprint(row.PublishedTo); got != "[fulfillment gateway]" {
		t.Errorf("PublishedTo = %s, want [fulfillment gateway]", got)
	}
}

// A replay that lands between the scan and the mark moves the row to a new generation: the mark
// must not publish it with the old generation's tasks; it is published once the new generation's
// tasks exist.
func TestMarkRereadsReplayGeneration(t *testing.T) {
	client, db := env.NewDatabase(t, dbschema.Orders)
	fulfillment := newConsumer(t, "fulfillment")
	_, tc := startTasks(t, tasksemu.Options{}, fulfillment)
	ev := appendEvents(t, client, "order.created", 1)[0]
	cfg := testConfig(client, db, tc, relay.Routes{"order.created": {fulfillment.subscriber()}})
	var once sync.Once
	cfg.BeforeMark = func(ctx context.Context, _ string, _ int64, ids []string) error {
		var err error
		once.Do(func() {
			// What a replay does to a published row, landing after this batch's scan.
			_, err = client.Apply(ctx, []*spanner.Mutation{spanner.Update(outboxdb.OutboxEventsTable,
				[]string{outboxdb.OutboxEventColEventId, outboxdb.OutboxEventColReplayGeneration, outboxdb.OutboxEventColReplayReason},
				[]any{ev.ID, int64(1), "replayed during the batch"})})
		})
		return err
	}
	r, _ := start(t, cfg)
	eventually(t, "published", func() bool { return status1(t, r).Pending == 0 })
	eventually(t, "both generations delivered", func() bool { return fulfillment.perEvent()[ev.ID] == 2 })
	want := map[string]bool{
		taskID(relay.TaskName(fulfillment.subscriber().Queues[0], ev.ID, "fulfillment", 0)): true,
		taskID(relay.TaskName(fulfillment.subscriber().Queues[0], ev.ID, "fulfillment", 1)): true,
	}
	for _, d := range fulfillment.deliveries() {
		delete(want, d.header.Get("X-Cloudtasks-Taskname"))
	}
	if len(want) != 0 {
		t.Errorf("no delivery under task ids %v: the row was published without its new generation's task", want)
	}
}

func taskID(name string) string { return name[strings.LastIndex(name, "/")+1:] }

// A quarantined row keeps the alarm on: the oldest pending age counts it.
func TestQuarantinedRowKeepsOldestPendingAge(t *testing.T) {
	client, db := env.NewDatabase(t, dbschema.Orders)
	gateway := newConsumer(t, "gateway")
	_, tc := startTasks(t, tasksemu.Options{}) // no queue: NOT_FOUND until quarantined
	cfg := testConfig(client, db, tc, relay.Routes{"order.created": {gateway.subscriber()}})
	cfg.MaxAttempts = 2
	appendEvents(t, client, "order.created", 1)
	r, _ := start(t, cfg)
	eventually(t, "quarantined", func() bool { return status1(t, r).Quarantined == 1 })
	if st := status1(t, r); st.Pending != 0 || st.OldestPendingAgeSeconds <= 0 {
		t.Errorf("status = %+v, want no pending row but an oldest pending age (the quarantined row's)", st)
	}
}

// record keeps the consumer's outcome of each delivery (by ce-id).
func (c *appCounter) record(next echo.HandlerFunc) echo.HandlerFunc {
	return func(ec echo.Context) error {
		if ec.Path() != outboxlib.PathEvents {
			return next(ec)
		}
		rec := &outcomeWriter{ResponseWriter: ec.Response().Writer}
		ec.Response().Writer = rec
		err := next(ec)
		if err != nil {
			ec.Error(err)
		}
		var out struct{ Outcome string }
		json.Unmarshal(rec.body, &out)
		id := ec.Request().Header.Get(outboxlib.HeaderID)
		c.mu.Lock()
		c.answers[id] = append(c.answers[id], out.Outcome)
		c.mu.Unlock()
		return nil
	}
}

type outcomeWriter struct {
	http.ResponseWriter
	body []byte
}

func (w *outcomeWriter) Write(b []byte) (int, error) {
	w.body = append(w.body, b...)
	return w.ResponseWriter.Write(b)
}

// gauge returns the value of a relay gauge or counter with the given labels from reg (-1: none).
func gauge(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue series
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return -1
}

// The delivery ledger: a consumer answering 401 (its audience misconfigured) until its queue gives
// up loses the delivery inside Cloud Tasks. The ledger shows the delivery unconfirmed while the
// consumer cannot answer, reports it missing once the consumer answers and the queue's horizon has
// passed, and an operator's replay delivers it; the other subscriber's copy is absorbed by its
// inbox. A healthy delivery is confirmed and reports nothing.
func TestLedgerReportsDroppedDelivery(t *testing.T) {
	ctx := context.Background()
	client, db := env.NewDatabase(t, dbschema.Orders)
	srv, tc := startTasks(t, tasksemu.Options{ServiceAccount: serviceAccount})
	t.Setenv("GCE_METADATA_HOST", srv.HTTPAddr()) // the ledger's ID tokens, as on Cloud Run
	healthy := newAppCounter(t, "orders", srv, 10)
	broken := newAppCounter(t, "fulfillment", srv, 10)
	broken.deploy(t, "https://wrong-audience.example", 10)
	createQueue(t, tc, healthy.subscriber().Queues[0], nil)
	// The broken consumer's queue gives up after three attempts (a 150 ms retry horizon).
	createQueue(t, tc, broken.subscriber().Queues[0], &cloudtaskspb.RetryConfig{
		MaxAttempts: 3, MinBackoff: durationpb.New(10 * time.Millisecond), MaxBackoff: durationpb.New(50 * time.Millisecond),
	})
	reg := prometheus.NewRegistry()
	cfg := testConfig(client, db, tc, relay.Routes{"order.created": {broken.subscriber(), healthy.subscriber()}})
	cfg.Tokens = platform.NewIDTokenSource(nil)
	cfg.Registerer = reg
	cfg.LedgerInterval = time.Hour // the test runs the passes
	cfg.LedgerMinAge = time.Millisecond
	cfg.LedgerGrace = 100 * time.Millisecond
	r, _ := start(t, cfg)
	audit := func() outboxapi.LedgerAudit {
		t.Helper()
		res, err := r.Audit(ctx)
		if err != nil || len(res) != 1 {
			t.Fatalf("Audit = %v, %v", res, err)
		}
		return res[0]
	}

	ev := appendEvents(t, client, "order.created", 1)[0]
	eventually(t, "the healthy subscriber applied it", func() bool { return healthy.applied(t, ev.AggregateID) == 1 })
	eventually(t, "the broken subscriber's queue gave up", func() bool {
		it := tc.ListTasks(ctx, &cloudtaskspb.ListTasksRequest{Parent: broken.subscriber().Queues[0]})
		_, err := it.Next()
		return errors.Is(err, iterator.Done) && len(broken.outcomes(ev.ID)) >= 3
	})
	eventually(t, "the event published", func() bool { return status1(t, r).Pending == 0 })
	if n := broken.applied(t, ev.AggregateID); n != 0 {
		t.Fatalf("the misconfigured consumer applied the event %d times", n)
	}
	res := audit()
	if res.Confirmed != 1 || res.Missing != 0 || res.Unconfirmed["fulfillment"].Count != 1 || !strings.Contains(res.Errors["fulfillment"], "401") {
		t.Errorf("audit while the consumer cannot answer = %+v, want 1 confirmed, fulfillment unconfirmed with its 401", res)
	}
	labels := map[string]string{"source": "orders", "subscriber": "fulfillment"}
	if got := gauge(t, reg, "outbox_ledger_oldest_unconfirmed_age_seconds", labels); got <= 0 {
		t.Errorf("oldest unconfirmed age = %v, want > 0", got)
	}

	broken.deploy(t, broken.srv.URL, 10) // the audience is fixed; the task is gone
	var found outboxapi.LedgerAudit
	eventually(t, "the ledger to report the delivery missing", func() bool {
		found = audit()
		return found.Missing == 1
	})
	if found.Rows != 1 || found.Confirmed != 1 || len(found.Unconfirmed) != 0 {
		t.Errorf("audit that found it = %+v, want the row settled: 1 confirmed, 1 missing", found)
	}
	missing, err := r.Missing(ctx, "orders", false, 0)
	if err != nil || len(missing) != 1 || missing[0].EventID != ev.ID || missing[0].Subscriber != "fulfillment" || missing[0].EventType != "order.created" {
		t.Fatalf("Missing = %+v, %v; want the fulfillment delivery of %s", missing, err, ev.ID)
	}
	if got := gauge(t, reg, "outbox_ledger_missing_deliveries", labels); got != 1 {
		t.Errorf("missing gauge = %v, want 1", got)
	}
	if res := audit(); res.Rows != 0 || res.Missing != 0 {
		t.Errorf("audit after settling = %+v, want nothing left to examine", res)
	}

	if err := r.ReplayMissing(ctx, "orders", ev.ID, "fulfillment's audience fixed (INC-7)"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the replay applied", func() bool { return broken.applied(t, ev.AggregateID) == 1 })
	eventually(t, "the healthy subscriber's copy absorbed", func() bool {
		o := healthy.outcomes(ev.ID)
		return len(o) == 2 && o[1] == outboxlib.OutcomeDuplicate
	})
	if n := healthy.applied(t, ev.AggregateID); n != 1 {
		t.Errorf("healthy subscriber applied %d times, want 1", n)
	}
	if err := r.ReplayMissing(ctx, "orders", ev.ID, "again"); !errors.Is(err, relay.ErrNotMissing) {
		t.Errorf("second ReplayMissing = %v, want ErrNotMissing", err)
	}

	// The replayed event and a new one are confirmed by both; nothing is missing any more.
	more := appendEvents(t, client, "order.created", 1)[0]
	eventually(t, "both subscribers applied the new event", func() bool {
		return broken.applied(t, more.AggregateID) == 1 && healthy.applied(t, more.AggregateID) == 1
	})
	var clean outboxapi.LedgerAudit
	eventually(t, "every row settled", func() bool {
		clean = audit()
		return clean.Rows == 0 || (clean.Confirmed == 2*clean.Rows && clean.Rows == 2)
	})
	if clean.Missing != 0 || len(clean.Unconfirmed) != 0 || len(clean.Errors) != 0 {
		t.Errorf("healthy audit = %+v, want nothing missing, unconfirmed or failing", clean)
	}
	if got := gauge(t, reg, "outbox_ledger_missing_deliveries", labels); got != 0 {
		t.Errorf("missing gauge after the replay = %v, want 0", got)
	}
	all, err := r.Missing(ctx, "orders", true, 0)
	if err != nil || len(all) != 1 || all[0].ReplayedAt == nil || all[0].ReplayReason != "fulfillment's audience fixed (INC-7)" {
		t.Errorf("Missing(all) = %+v, %v; want the replayed record with its reason", all, err)
	}
}

// What the task-name window does not give: a quarantined event keeps its generation, but
// quarantine takes long enough that Cloud Tasks has freed the names of the tasks created before
// the failure (an hour after they ran). The subscriber that got it then gets it again on the
// replay, and its inbox absorbs the copy.
func TestReplayAfterNameReuseWindowIsAbsorbed(t *testing.T) {
	ctx := context.Background()
	client, db := env.NewDatabase(t, dbschema.Orders)
	gateway := newConsumer(t, "gateway")
	const window = 200 * time.Millisecond
	srv, tc := startTasks(t, tasksemu.Options{ServiceAccount: serviceAccount, NameReuseWindow: window}) // no gateway queue yet
	fulfillment := newAppCounter(t, "fulfillment", srv, 10)
	createQueue(t, tc, fulfillment.subscriber().Queues[0], nil)
	cfg := testConfig(client, db, tc, relay.Routes{"order.created": {fulfillment.subscriber(), gateway.subscriber()}})
	cfg.MaxAttempts = 2
	r, _ := start(t, cfg)
	ev := appendEvents(t, client, "order.created", 1)[0]
	eventually(t, "applied by fulfillment and quarantined for the gateway", func() bool {
		return fulfillment.applied(t, ev.AggregateID) == 1 && status1(t, r).Quarantined == 1
	})
	// The window runs from the task's completion, which the emulator records after fulfillment
	// answered (on a loaded machine, well after the commit seen above): wait until the queue
	// holds no task, then for the window. Waits for a deadline, not for an outcome: the window is
	// the emulator's clock rule under test.
	eventually(t, "fulfillment's task completed", func() bool {
		_, err := tc.ListTasks(ctx, &cloudtaskspb.ListTasksRequest{Parent: fulfillment.subscriber().Queues[0]}).Next()
		return errors.Is(err, iterator.Done)
	})
	completedBy := time.Now()
	eventually(t, "the name-reuse window to pass", func() bool { return time.Since(completedBy) > 2*window })

	createQueue(t, tc, gateway.subscriber().Queues[0], nil)
	if err := r.Replay(ctx, "orders", ev.ID, "gateway queue created"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the gateway got it", func() bool { return gateway.perEvent()[ev.ID] == 1 })
	eventually(t, "fulfillment got a second delivery, a duplicate", func() bool {
		o := fulfillment.outcomes(ev.ID)
		return len(o) == 2 && o[0] == outboxlib.OutcomeApplied && o[1] == outboxlib.OutcomeDuplicate
	})
	if n := fulfillment.applied(t, ev.AggregateID); n != 1 {
		t.Errorf("fulfillment applied the event %d times, want 1", n)
	}
	eventually(t, "the replayed row marked published", func() bool { return readEvent(t, client, ev.ID).PublishedAt.Valid })
	if row := readEvent(t, client, ev.ID); row.ReplayGeneration != 0 {
		t.Errorf("replayed row: generation %d, want 0 (quarantined rows keep theirs)", row.ReplayGeneration)
	}
}

// The relay refuses a back-off that could hold an event longer than a consumer's patience with its
// successors, and (with the ledger on) a queue whose horizon leaves no time to replay a lost
// delivery before the outbox TTL deletes its row.
func TestRefusesHorizonsBeyondTheGuarantees(t *testing.T) {
	client, db := env.NewDatabase(t, dbschema.Orders)
	_, tc := startTasks(t, tasksemu.Options{})
	cfg := testConfig(client, db, tc, nil)
	cfg.BaseBackoff, cfg.MaxBackoff, cfg.MaxAttempts = time.Second, time.Hour, 20
	if _, err := relay.New(cfg); err == nil || !strings.Contains(err.Error(), "patience") {
		t.Errorf("New with hours of back-off = %v, want a refusal naming the consumers' patience", err)
	}
	if h := (relay.Config{}).QuarantineHorizon(); h < time.Hour || h >= outboxlib.DefaultEarlyPatience {
		t.Errorf("default quarantine horizon %s, want between 1 h and the %s patience", h, outboxlib.DefaultEarlyPatience)
	}

	q := queue("slow-inbox")
	createQueue(t, tc, q, &cloudtaskspb.RetryConfig{MaxRetryDuration: durationpb.New(6 * 24 * time.Hour)})
	sub := relay.Subscriber{Name: "slow", Queues: []string{q}, URL: "http://127.0.0.1:1/events", LedgerURL: "http://127.0.0.1:1/admin/ledger"}
	cfg = testConfig(client, db, tc, relay.Routes{"order.created": {sub}})
	cfg.ReplayWindow = time.Hour
	cfg.Tokens = platform.NewIDTokenSource(nil)
	r, err := relay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.CheckQueues(context.Background()); err == nil || !strings.Contains(err.Error(), "delivery ledger") {
		t.Errorf("CheckQueues with a 6-day horizon and the ledger = %v, want a refusal", err)
	}
	cfg.Tokens = nil // no ledger: nothing to refuse
	if r, err = relay.New(cfg); err != nil {
		t.Fatal(err)
	}
	if err := r.CheckQueues(context.Background()); err != nil {
		t.Errorf("CheckQueues without the ledger = %v, want nil", err)
	}
}

// One audit settles more than a batch, in several transactions: a busy source publishes more
// rows per interval than one pass reads, and a pass settles its rows 50 at a time. The audit asked
// for now settles them all in one call; the scheduled one, its passes paced, gets there too.
func TestLedgerAuditsMoreThanABatch(t *testing.T) {
	for _, scheduled := range []bool{false, true} {
		t.Run(map[bool]string{false: "now", true: "scheduled"}[scheduled], func(t *testing.T) {
			ctx := context.Background()
			client, db := env.NewDatabase(t, dbschema.Orders)
			srv, tc := startTasks(t, tasksemu.Options{ServiceAccount: serviceAccount})
			t.Setenv("GCE_METADATA_HOST", srv.HTTPAddr())
			c := newAppCounter(t, "fulfillment", srv, 10)
			createQueue(t, tc, c.subscriber().Queues[0], nil)
			cfg := testConfig(client, db, tc, relay.Routes{"order.created": {c.subscriber()}})
			cfg.Tokens = platform.NewIDTokenSource(nil)
			cfg.LedgerInterval, cfg.LedgerMinAge, cfg.LedgerBatch = time.Hour, time.Millisecond, 100
			if scheduled {
				cfg.LedgerInterval = time.Second // passes 20 ms apart
			}
			r, _ := start(t, cfg)
			evs := appendEvents(t, client, "order.created", 230)
			eventually(t, "every event applied", func() bool {
				for _, ev := range evs {
					if c.applied(t, ev.AggregateID) != 1 {
						return false
					}
				}
				return true
			})
			eventually(t, "every event published", func() bool { return status1(t, r).Pending == 0 })
			unaudited := func() int64 {
				var left int64
				if err := client.Single().Query(ctx, spanner.Statement{SQL: "SELECT COUNT(*) FROM OutboxEvents WHERE AuditShard IS NOT NULL"}).Do(func(r *spanner.Row) error {
					return r.Columns(&left)
				}); err != nil {
					t.Fatal(err)
				}
				return left
			}
			if scheduled {
				eventually(t, "every row audited by the scheduled audit", func() bool { return unaudited() == 0 })
				return
			}
			res, err := r.Audit(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if res[0].Rows != 230 || res[0].Confirmed != 230 || res[0].Missing != 0 {
				t.Errorf("audit = %+v, want 230 rows examined and confirmed in one call (batches of 100)", res[0])
			}
			if left := unaudited(); left != 0 {
				t.Errorf("%d rows left unaudited, want 0", left)
			}
		})
	}
}

// The marks of several shards' batches share one transaction (group commit: their rows carry one
// PublishedAt), and the fence holds per batch: a batch whose shard this instance no longer holds
// at the epoch it was scanned under writes nothing, while the others in its transaction are marked.
func TestMarksOfSeveralShardsShareOneCommit(t *testing.T) {
	ctx := context.Background()
	client, db := env.NewDatabase(t, dbschema.Orders)
	fulfillment := newConsumer(t, "fulfillment")
	r, err := relay.New(testConfig(client, db, &countingTasks{}, relay.Routes{"order.created": {fulfillment.subscriber()}}))
	if err != nil {
		t.Fatal(err)
	}
	byShard := map[int64][]string{}
	for len(byShard) < 3 {
		for _, ev := range appendEvents(t, client, "order.created", 4) {
			byShard[outboxlib.ShardOf(ev.AggregateID)] = append(byShard[outboxlib.ShardOf(ev.AggregateID)], ev.ID)
		}
	}
	var shards []int64
	for shard := range byShard {
		shards = append(shards, shard)
	}
	held, lost := shards[:2], shards[2]
	batches := map[int64][]string{held[0]: byShard[held[0]], held[1]: byShard[held[1]], lost: byShard[lost]}
	// This instance holds two of the shards at epoch 4; the third was taken over since (epoch 5).
	var ms []*spanner.Mutation
	for shard, epoch := range map[int64]int64{held[0]: 4, held[1]: 4, lost: 5} {
		l := outboxdb.OutboxLease{Shard: shard, Owner: spanner.NullString{StringVal: r.Owner(), Valid: true}, Epoch: epoch,
			ExpiresAt: spanner.NullTime{Time: time.Now().Add(time.Minute), Valid: true}, UpdatedAt: spanner.CommitTimestamp}
		ms = append(ms, l.Insert())
	}
	if _, err := client.Apply(ctx, ms); err != nil {
		t.Fatal(err)
	}

	errs := relay.MarkTogether(ctx, r, "orders", "fulfillment", 4, batches)
	if errs[held[0]] != nil || errs[held[1]] != nil || !errors.Is(errs[lost], relay.ErrLeaseLost) {
		t.Fatalf("outcomes %v; want nil for shards %v and the lost lease for shard %d", errs, held, lost)
	}
	var publishedAt []time.Time
	for _, shard := range held {
		for _, id := range batches[shard] {
			row := readEvent(t, client, id)
			if row.PendingShard.Valid || !row.PublishedAt.Valid || !slices.Equal(row.PublishedTo, []spanner.NullString{{StringVal: "fulfillment", Valid: true}}) {
				t.Errorf("event %s of held shard %d: pending %v, published %v to %v; want published to fulfillment",
					id, shard, row.PendingShard, row.PublishedAt, row.PublishedTo)
			}
			publishedAt = append(publishedAt, row.PublishedAt.Time)
		}
	}
	for _, at := range publishedAt {
		if !at.Equal(publishedAt[0]) {
			t.Errorf("PublishedAt %v, want every row of the group at one commit (%v)", publishedAt, publishedAt[0])
			break
		}
	}
	for _, id := range batches[lost] {
		if row := readEvent(t, client, id); !row.PendingShard.Valid || row.PendingShard.Int64 != lost || row.PublishedAt.Valid {
			t.Errorf("event %s of the lost shard %d: pending %v, published %v; want untouched", id, lost, row.PendingShard, row.PublishedAt)
		}
	}
}
