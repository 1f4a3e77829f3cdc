package outboxlib_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/spanner"
	"cloud.google.com/go/spanner/apiv1/spannerpb"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/spanmart/spanmart/gen/dao"
	"github.com/spanmart/spanmart/gen/dao/fulfillmentdb"
	"github.com/spanmart/spanmart/gen/dao/outboxdb"
	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/outboxlib/outboxapi"
	"github.com/spanmart/spanmart/pkg/platform"
)

const (
	relaySA    = "relay@spanmart-test.iam.gserviceaccount.com"
	operator   = "alice@spanmart-test.iam.gserviceaccount.com"
	console    = "console@spanmart-test.iam.gserviceaccount.com" // a delegate: acts on behalf of operators
	location   = "projects/spanmart-test/locations/us-central1"
	consumerID = "fulfillment"
	stockType  = "stock.received"
	effectType = "stock.shipped" // receiveStock, then an After effect (fixture.effect)
	waitLimit  = 15 * time.Second
)

// stockPayload is the payload of the test event type: Inventory[sku = aggregate id].OnHand += Qty.
// Mode picks the handler's behaviour, so that the handler stays a pure function of the delivery.
type stockPayload struct {
	Qty  int64  `json:"qty"`
	Mode string `json:"mode,omitempty"`
}

// Modes of the test handler.
const (
	modeTransientOnce = "transient-once"  // fails on the first delivery (after buffering its write)
	modeAlwaysFail    = "always-fail"     // fails every time (transient)
	modeUntilFixed    = "permanent-until" // Permanent error until fixture.fixed is set
	modeNoteAborted   = "note-aborted"    // notes its try; the first try's transaction aborts
	modeEmit          = "emit"            // appends a stock.noted event of the same sku
)

// fixture is a consumer of a fresh fulfillment database served over HTTP, fed by a fresh queue of
// the shared Cloud Tasks emulator whose tasks carry real OIDC tokens.
type fixture struct {
	client   *spanner.Client
	consumer *outboxlib.Consumer
	url      string // the consumer's base URL
	queue    string
	rec      *recorder
	reg      *prometheus.Registry
	logs     *observer.ObservedLogs
	verifier *outboxlib.Verifier
	fixed    atomic.Bool
	tries    atomic.Int64 // handler runs in modeNoteAborted
	// committedTry is the try whose OnCommit ran (modeNoteAborted), 0 before.
	committedTry atomic.Int64
	effects      atomic.Int64 // runs of the After effect of effectType; the first one fails
	effectMu     sync.Mutex
	effectSaw    []outboxlib.Delivery // what each run of the After effect was given
}

// sawEffects returns what each run of the After effect was given, in order.
func (f *fixture) sawEffects() []outboxlib.Delivery {
	f.effectMu.Lock()
	defer f.effectMu.Unlock()
	return slices.Clone(f.effectSaw)
}

func newFixture(t *testing.T, maxAttempts int) *fixture {
	t.Helper()
	return newFixtureConfig(t, func(c *outboxlib.ConsumerConfig) { c.MaxAttempts = maxAttempts })
}

// Event types of the fixture besides stockType: the same quantity as a whole new level
// (Snapshot) and as a delta the handler accepts in any order (AnyOrder).
const (
	levelType  = "stock.counted"
	adjustType = "stock.adjusted"
)

// newFixtureConfig is newFixture with the consumer's configuration changed by edit.
func newFixtureConfig(t *testing.T, edit func(*outboxlib.ConsumerConfig)) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{rec: &recorder{byID: map[string][]response{}}, reg: prometheus.NewRegistry()}
	f.client, _ = env.NewDatabase(t, dbschema.Fulfillment)
	core, logs := observer.New(zapcore.DebugLevel)
	f.logs = logs
	srv := platform.NewServer(platform.ServerOptions{Service: "outboxlib-test", Logger: zap.New(core)})
	srv.Echo.Use(f.rec.middleware)
	ts := httptest.NewServer(srv.Echo)
	t.Cleanup(ts.Close)
	f.url = ts.URL

	v, err := outboxlib.NewVerifier(outboxlib.VerifierConfig{
		Issuer: tasks.Issuer(), Audiences: []string{f.url + outboxlib.PathEvents}, AllowedEmails: []string{relaySA},
	})
	if err != nil {
		t.Fatal(err)
	}
	ops, err := outboxlib.NewOperators(tasks.Issuer(), f.url, []string{operator, console}, []string{console})
	if err != nil {
		t.Fatal(err)
	}
	cfg := outboxlib.ConsumerConfig{Name: consumerID, Client: f.client, Verifier: v, Operators: ops, Registerer: f.reg}
	edit(&cfg)
	f.verifier = v
	f.consumer, err = outboxlib.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.consumer.Handle(stockType, f.receiveStock)
	f.consumer.Handle(levelType, f.countStock, outboxlib.Snapshot)
	f.consumer.Handle(adjustType, f.receiveStock, outboxlib.AnyOrder)
	f.consumer.Handle(effectType, f.receiveStock, outboxlib.After(func(ctx context.Context, d outboxlib.Delivery) error {
		f.effectMu.Lock()
		f.effectSaw = append(f.effectSaw, d)
		f.effectMu.Unlock()
		if f.effects.Add(1) == 1 {
			return errors.New("the provider did not answer")
		}
		return nil
	}))
	f.consumer.Register(srv.Echo)

	q, err := ct.CreateQueue(ctx, &cloudtaskspb.CreateQueueRequest{Parent: location, Queue: &cloudtaskspb.Queue{
		Name: fmt.Sprintf("%s/queues/%s", location, strings.ReplaceAll(strings.ToLower(t.Name()), "_", "-")+fmt.Sprint(time.Now().UnixNano()%1e9)),
		RetryConfig: &cloudtaskspb.RetryConfig{
			MaxAttempts: 100, MinBackoff: durationpb.New(10 * time.Millisecond), MaxBackoff: durationpb.New(100 * time.Millisecond),
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	f.queue = q.Name
	// Runs before ts.Close (cleanups run last-in first-out): no delivery outlives the test.
	t.Cleanup(func() { ct.DeleteQueue(context.Background(), &cloudtaskspb.DeleteQueueRequest{Name: q.Name}) })
	return f
}

// receiveStock is the test handler (see stockPayload).
func (f *fixture) receiveStock(ctx context.Context, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
	var p stockPayload
	if err := json.Unmarshal(d.Payload, &p); err != nil {
		return outboxlib.Permanent(err)
	}
	inv, err := fulfillmentdb.ReadInventory(ctx, txn, d.AggregateID)
	if errors.Is(err, dao.ErrNotFound) {
		inv, err = &fulfillmentdb.Inventory{Sku: d.AggregateID}, nil
	}
	if err != nil {
		return err
	}
	inv.OnHand += p.Qty
	inv.UpdatedAt = spanner.CommitTimestamp
	if err := txn.BufferWrite([]*spanner.Mutation{inv.InsertOrUpdate()}); err != nil {
		return err
	}
	outboxlib.HandToAfter(ctx, inv.OnHand)
	if p.Mode == modeNoteAborted {
		try := f.tries.Add(1)
		outboxlib.Note(ctx, fmt.Sprintf("try %d", try))
		outboxlib.OnCommit(ctx, func() { f.committedTry.Store(try) })
		if try == 1 {
			// What Spanner answers when a concurrent transaction wins: the client runs the
			// whole transaction function again.
			return status.Error(codes.Aborted, "transaction aborted by a concurrent one")
		}
	}
	if p.Mode == modeEmit {
		ev, err := outboxlib.NewEvent(ctx, "stock.noted", "sku-note", d.AggregateID, d.AggregateVersion, map[string]int64{"qty": p.Qty})
		if err != nil {
			return err
		}
		if err := outboxlib.Append(ctx, txn, ev); err != nil {
			return err
		}
	}
	// The failures come after the write: the consumer must discard what the handler buffered.
	switch {
	case p.Mode == modeTransientOnce && d.Attempt == 0, p.Mode == modeAlwaysFail:
		return errors.New("inventory service hiccup")
	case p.Mode == modeUntilFixed && !f.fixed.Load():
		return outboxlib.Permanent(fmt.Errorf("sku %s is blocked", d.AggregateID))
	}
	return nil
}

// countStock is the Snapshot handler: Inventory[sku].OnHand = Qty.
func (f *fixture) countStock(ctx context.Context, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
	var p stockPayload
	if err := json.Unmarshal(d.Payload, &p); err != nil {
		return outboxlib.Permanent(err)
	}
	inv := fulfillmentdb.Inventory{Sku: d.AggregateID, OnHand: p.Qty, UpdatedAt: spanner.CommitTimestamp}
	return txn.BufferWrite([]*spanner.Mutation{inv.InsertOrUpdate()})
}

// stockEvent returns a stock.received event for sku.
func stockEvent(t *testing.T, sku string, version, qty int64, mode string) outboxlib.Event {
	t.Helper()
	return typedEvent(t, stockType, sku, version, qty, mode)
}

// typedEvent returns an event of type typ for sku.
func typedEvent(t *testing.T, typ, sku string, version, qty int64, mode string) outboxlib.Event {
	t.Helper()
	ev, err := outboxlib.NewEvent(context.Background(), typ, "sku", sku, version, stockPayload{Qty: qty, Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	ev.Source = "//spanmart/warehouse"
	return ev
}

// send creates a task delivering ev to the consumer as the relay would: the CloudEvents headers,
// the payload and an OIDC token for the relay's account with the consumer's URL as audience;
// change may alter the request first.
func (f *fixture) send(t *testing.T, ev outboxlib.Event, change func(*cloudtaskspb.HttpRequest)) {
	t.Helper()
	req := &cloudtaskspb.HttpRequest{
		Url: f.url + outboxlib.PathEvents, HttpMethod: cloudtaskspb.HttpMethod_POST,
		Headers: ev.Headers(), Body: ev.Payload,
		AuthorizationHeader: &cloudtaskspb.HttpRequest_OidcToken{OidcToken: &cloudtaskspb.OidcToken{
			ServiceAccountEmail: relaySA, Audience: f.url + outboxlib.PathEvents,
		}},
	}
	if change != nil {
		change(req)
	}
	_, err := ct.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{
		Parent: f.queue, Task: &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: req}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// response is what the consumer answered to one delivery.
type response struct {
	Status      int
	Outcome     string // of a 200
	RetryAfter  string
	ContentType string
	Attempt     string // X-CloudTasks-TaskRetryCount of the request
	auth        string
}

// recorder keeps the consumer's answers per ce-id.
type recorder struct {
	mu   sync.Mutex
	byID map[string][]response
}

type teeWriter struct {
	http.ResponseWriter
	buf *bytes.Buffer
}

func (w teeWriter) Write(b []byte) (int, error) {
	w.buf.Write(b)
	return w.ResponseWriter.Write(b)
}

func (r *recorder) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if c.Path() != outboxlib.PathEvents {
			return next(c)
		}
		var body bytes.Buffer
		c.Response().Writer = teeWriter{c.Response().Writer, &body}
		if err := next(c); err != nil {
			c.Error(err) // the platform's problem+json, written now so that the status is final
		}
		res := response{
			Status: c.Response().Status, RetryAfter: c.Response().Header().Get("Retry-After"),
			ContentType: c.Response().Header().Get("Content-Type"),
			Attempt:     c.Request().Header.Get("X-CloudTasks-TaskRetryCount"),
			auth:        c.Request().Header.Get("Authorization"),
		}
		var out struct{ Outcome string }
		if json.Unmarshal(body.Bytes(), &out) == nil {
			res.Outcome = out.Outcome
		}
		id := c.Request().Header.Get(outboxlib.HeaderID)
		r.mu.Lock()
		r.byID[id] = append(r.byID[id], res)
		r.mu.Unlock()
		return nil
	}
}

func (r *recorder) get(id string) []response {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.byID[id])
}

// waitResponses waits until the consumer has answered id n times, or one answer satisfies until.
func (f *fixture) waitResponses(t *testing.T, id string, until func([]response) bool) []response {
	t.Helper()
	var got []response
	waitFor(t, waitLimit, func() (bool, string) {
		got = f.rec.get(id)
		return until(got), fmt.Sprintf("responses to %s: %+v", id, got)
	})
	return got
}

func count(n int) func([]response) bool {
	return func(rs []response) bool { return len(rs) >= n }
}

func statuses(rs []response) []int {
	var s []int
	for _, r := range rs {
		s = append(s, r.Status)
	}
	return s
}

func outcomes(rs []response) []string {
	var s []string
	for _, r := range rs {
		s = append(s, r.Outcome)
	}
	return s
}

func (f *fixture) onHand(t *testing.T, sku string) int64 {
	t.Helper()
	inv, err := fulfillmentdb.ReadInventory(context.Background(), f.client.Single(), sku)
	if errors.Is(err, dao.ErrNotFound) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return inv.OnHand
}

func (f *fixture) processed(t *testing.T, id string) bool {
	t.Helper()
	_, err := outboxdb.ReadProcessedEvent(context.Background(), f.client.Single(), id, consumerID)
	if errors.Is(err, dao.ErrNotFound) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

func (f *fixture) version(t *testing.T, sku string) (int64, string) {
	t.Helper()
	cv, err := outboxdb.ReadConsumerVersion(context.Background(), f.client.Single(), sku, "sku", consumerID)
	if errors.Is(err, dao.ErrNotFound) {
		return 0, ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return cv.Version, cv.EventId
}

// family returns the series of the metric called name.
func (f *fixture) family(t *testing.T, name string) []*dto.Metric {
	t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()
		}
	}
	return nil
}

// deadLetterReasons are the reason label's values, each present (at 0) from the start so that an
// alert on the counter's increase sees the first dead letter.
var deadLetterReasons = []string{outboxlib.ReasonPermanent, outboxlib.ReasonMaxAttempts, outboxlib.ReasonPatience, outboxlib.ReasonUnknownType, outboxlib.ReasonOutOfOrder}

// deadLetters returns outbox_consumer_dead_letters_total{consumer, reason}.
func (f *fixture) deadLetters(t *testing.T, reason string) float64 {
	t.Helper()
	for _, m := range f.family(t, "outbox_consumer_dead_letters_total") {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["consumer"] == consumerID && labels["reason"] == reason {
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// metric returns outbox_consumer_events_total{consumer, type, outcome}.
func (f *fixture) metric(t *testing.T, typ, outcome string) float64 {
	t.Helper()
	for _, m := range f.family(t, "outbox_consumer_events_total") {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["consumer"] == consumerID && labels["type"] == typ && labels["outcome"] == outcome {
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func TestConsumerAppliesOnceAndAcknowledgesRedelivery(t *testing.T) {
	f := newFixture(t, 10)
	ev := stockEvent(t, "sku-apply", 1, 5, "")
	// Committed 30 s after it occurred (a slow producer transaction), as the relay says: the lag
	// counts from the commit.
	ev.OccurredAt = time.Now().Add(-10 * time.Minute)
	ev.CommittedAt = time.Now().Add(-30 * time.Second)
	f.send(t, ev, nil)
	got := f.waitResponses(t, ev.ID, count(1))
	if diff := cmp.Diff([]string{outboxlib.OutcomeApplied}, outcomes(got)); diff != "" || got[0].Status != 200 {
		t.Fatalf("first delivery: status %d, outcomes (-want +got):\n%s", got[0].Status, diff)
	}
	if n := f.onHand(t, "sku-apply"); n != 5 {
		t.Errorf("OnHand = %d, want 5", n)
	}
	if v, id := f.version(t, "sku-apply"); v != 1 || id != ev.ID {
		t.Errorf("ConsumerVersions = (%d, %s), want (1, %s)", v, id, ev.ID)
	}
	if !f.processed(t, ev.ID) {
		t.Error("no ProcessedEvents row")
	}

	// The relay may publish the same event again (a new task): nothing changes.
	f.send(t, ev, nil)
	got = f.waitResponses(t, ev.ID, count(2))
	if diff := cmp.Diff([]string{outboxlib.OutcomeApplied, outboxlib.OutcomeDuplicate}, outcomes(got)); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
	if n := f.onHand(t, "sku-apply"); n != 5 {
		t.Errorf("OnHand after a redelivery = %d, want 5", n)
	}

	if got := f.metric(t, stockType, outboxlib.OutcomeApplied); got != 1 {
		t.Errorf("applied counter = %v, want 1", got)
	}
	if got := f.metric(t, stockType, outboxlib.OutcomeDuplicate); got != 1 {
		t.Errorf("duplicate counter = %v, want 1", got)
	}
	if lag := f.family(t, "outbox_consumer_lag_seconds"); len(lag) != 1 || lag[0].GetHistogram().GetSampleCount() != 1 {
		t.Errorf("lag histogram %v, want one series with one sample", lag)
	} else if sum := lag[0].GetHistogram().GetSampleSum(); sum < 30 || sum > 60 {
		t.Errorf("lag = %.1f s, want about 30 s: from ce-committime, not ce-time", sum)
	}
	entries := f.logs.FilterMessage("event applied").AllUntimed()
	if len(entries) != 1 {
		t.Fatalf("%d 'event applied' log lines, want 1", len(entries))
	}
	fields := entries[0].ContextMap()
	want := map[string]any{"event_id": ev.ID, "event_type": stockType, "aggregate_id": "sku-apply", "attempt": int64(0), "outcome": "applied"}
	for k, v := range want {
		if fields[k] != v {
			t.Errorf("log field %s = %v, want %v", k, fields[k], v)
		}
	}
}

// An event applied in order costs its transaction one round trip before the handler's own: the
// inbox row and the order check go in one batch of DML, and the version is not read. Only an
// event the check does not let through reads it, to tell early from stale.
func TestConsumerChecksOrderWithoutReadingTheVersion(t *testing.T) {
	rpcs := &rpcCounts{n: map[string]int{}}
	f := newFixtureConfig(t, func(c *outboxlib.ConsumerConfig) {
		c.MaxAttempts = 10
		c.Client = rpcs.client(t, c.Client.DatabaseName())
	})
	const versionRead = "StreamingRead(ConsumerVersions)"
	v1, v2, v3 := stockEvent(t, "sku-rt", 1, 1, ""), stockEvent(t, "sku-rt", 2, 2, ""), stockEvent(t, "sku-rt", 3, 4, "")
	for _, ev := range []outboxlib.Event{v1, v2} {
		f.send(t, ev, nil)
		if r := f.waitResponses(t, ev.ID, count(1))[0]; r.Outcome != outboxlib.OutcomeApplied {
			t.Fatalf("v%d: %+v, want applied", ev.AggregateVersion, r)
		}
	}
	if n := rpcs.get(versionRead); n != 0 {
		t.Errorf("%d reads of ConsumerVersions for two events in order, want 0", n)
	}
	if n := rpcs.get("ExecuteBatchDml"); n != 2 {
		t.Errorf("%d ExecuteBatchDml for two events, want 2", n)
	}
	if v, id := f.version(t, "sku-rt"); v != 2 || id != v2.ID {
		t.Errorf("version = (%d, %s), want (2, %s)", v, id, v2.ID)
	}

	// v1 again under a new id: out of order, found out by reading the version.
	again := stockEvent(t, "sku-rt", 1, 1, "")
	f.send(t, again, nil)
	if r := f.waitResponses(t, again.ID, count(1))[0]; r.Outcome != outboxlib.OutcomeDeadLettered {
		t.Errorf("version 1 under a new id after version 2: %+v, want dead_lettered", r)
	}
	if n := rpcs.get(versionRead); n < 1 {
		t.Errorf("%d reads of ConsumerVersions for an event out of order, want at least 1", n)
	}
	f.send(t, v3, nil)
	if r := f.waitResponses(t, v3.ID, count(1))[0]; r.Outcome != outboxlib.OutcomeApplied {
		t.Errorf("v3: %+v, want applied", r)
	}
	if v, id := f.version(t, "sku-rt"); v != 3 || id != v3.ID {
		t.Errorf("version = (%d, %s), want (3, %s)", v, id, v3.ID)
	}
	if n := f.onHand(t, "sku-rt"); n != 7 {
		t.Errorf("OnHand = %d, want 7", n)
	}
}

// rpcCounts counts the Spanner requests a client sends, by method, reads by table.
type rpcCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *rpcCounts) add(method string) {
	c.mu.Lock()
	c.n[method]++
	c.mu.Unlock()
}

func (c *rpcCounts) get(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[method]
}

// client returns a client of database db whose requests c counts.
func (c *rpcCounts) client(t *testing.T, db string) *spanner.Client {
	t.Helper()
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		c.add(path.Base(method))
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		return &countedStream{ClientStream: s, counts: c, method: path.Base(method)}, err
	}
	client, err := spanner.NewClient(context.Background(), db,
		option.WithGRPCDialOption(grpc.WithChainUnaryInterceptor(unary)),
		option.WithGRPCDialOption(grpc.WithChainStreamInterceptor(stream)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return client
}

// countedStream counts its request: a read as "StreamingRead(Table)".
type countedStream struct {
	grpc.ClientStream
	counts *rpcCounts
	method string
}

func (s *countedStream) SendMsg(m any) error {
	if r, ok := m.(*spannerpb.ReadRequest); ok {
		s.counts.add(s.method + "(" + r.GetTable() + ")")
	} else {
		s.counts.add(s.method)
	}
	return s.ClientStream.SendMsg(m)
}

// A dead-lettered event has its inbox row but never set the version: delivered again, it is a
// duplicate, and the claim of its version that went with the inbox statement is rolled back.
func TestConsumerRedeliveredDeadLetterLeavesTheVersion(t *testing.T) {
	f := newFixture(t, 10)
	ev := stockEvent(t, "sku-dl-again", 1, 6, modeUntilFixed)
	f.send(t, ev, nil)
	if r := f.waitResponses(t, ev.ID, count(1))[0]; r.Outcome != outboxlib.OutcomeDeadLettered {
		t.Fatalf("delivery: %+v, want dead_lettered", r)
	}
	f.fixed.Store(true) // the handler would apply it now, but only a replay may
	f.send(t, ev, nil)
	if r := f.waitResponses(t, ev.ID, count(2))[1]; r.Status != 200 || r.Outcome != outboxlib.OutcomeDuplicate {
		t.Fatalf("redelivery: %+v, want 200 duplicate", r)
	}
	if v, id := f.version(t, "sku-dl-again"); v != 0 {
		t.Errorf("version = (%d, %s), want none: the event was not applied", v, id)
	}
	if n := f.onHand(t, "sku-dl-again"); n != 0 {
		t.Errorf("OnHand = %d, want 0", n)
	}
}

// A handler's notes reach the event's one log line, and its OnCommit functions run, from the
// transaction attempt that committed only: an aborted attempt that the client retried leaves no
// trace.
func TestConsumerLogsNotesOfTheCommittedAttempt(t *testing.T) {
	f := newFixture(t, 10)
	ev := stockEvent(t, "sku-notes", 1, 2, modeNoteAborted)
	f.send(t, ev, nil)
	got := f.waitResponses(t, ev.ID, count(1))
	if diff := cmp.Diff([]string{outboxlib.OutcomeApplied}, outcomes(got)); diff != "" {
		t.Fatalf("outcomes (-want +got):\n%s", diff)
	}
	if n := f.tries.Load(); n != 2 {
		t.Fatalf("handler ran %d times, want 2 (the first transaction aborted)", n)
	}
	if n := f.onHand(t, "sku-notes"); n != 2 {
		t.Errorf("OnHand = %d, want 2", n)
	}
	entries := f.logs.FilterMessage("event applied").AllUntimed()
	if len(entries) != 1 {
		t.Fatalf("%d 'event applied' log lines, want 1", len(entries))
	}
	if notes := entries[0].ContextMap()["notes"]; !cmp.Equal(notes, []any{"try 2"}) {
		t.Errorf("notes = %#v, want [try 2]", notes)
	}
	if n := f.logs.FilterMessageSnippet("try 1").Len(); n != 0 {
		t.Errorf("%d log lines mention the aborted try", n)
	}
	// OnCommit ran for the attempt that committed only.
	if got := f.committedTry.Load(); got != 2 {
		t.Errorf("OnCommit ran for try %d, want 2", got)
	}
}

func TestConsumerConcurrentDuplicatesApplyOnce(t *testing.T) {
	f := newFixture(t, 10)
	ev := stockEvent(t, "sku-dup", 1, 7, "")
	const copies = 4
	var wg sync.WaitGroup
	for range copies {
		wg.Go(func() { f.send(t, ev, nil) })
	}
	wg.Wait()
	got := f.waitResponses(t, ev.ID, count(copies))
	want := []string{outboxlib.OutcomeApplied, outboxlib.OutcomeDuplicate, outboxlib.OutcomeDuplicate, outboxlib.OutcomeDuplicate}
	if diff := cmp.Diff(want, outcomes(got), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
	if n := f.onHand(t, "sku-dup"); n != 7 {
		t.Errorf("OnHand = %d, want 7 (one application)", n)
	}
}

// A later delta of an aggregate arriving first waits for its predecessor (the library's default:
// the handler does not check versions), and both are applied, in order: none is lost.
func TestConsumerDefersGapAndAppliesInOrder(t *testing.T) {
	f := newFixture(t, 3)
	v1, v2 := stockEvent(t, "sku-gap", 1, 1, ""), stockEvent(t, "sku-gap", 2, 10, "")
	f.send(t, v2, nil)
	// Deferred more often than MaxAttempts: early answers do not count towards it.
	first := f.waitResponses(t, v2.ID, count(5))[0]
	want := response{Status: http.StatusConflict, RetryAfter: "1", ContentType: platform.ContentTypeProblem, Attempt: "0"}
	if diff := cmp.Diff(want, first, cmpopts.IgnoreUnexported(response{})); diff != "" {
		t.Fatalf("early v2 (-want +got):\n%s", diff)
	}
	if f.processed(t, v2.ID) || f.onHand(t, "sku-gap") != 0 {
		t.Fatal("an early event left a trace")
	}
	f.send(t, v1, nil)
	got := f.waitResponses(t, v2.ID, func(rs []response) bool { return len(rs) > 0 && rs[len(rs)-1].Status == 200 })
	if last := got[len(got)-1]; last.Outcome != outboxlib.OutcomeApplied {
		t.Errorf("v2 finally: %+v, want applied", last)
	}
	for _, r := range got[:len(got)-1] {
		if r.Status != http.StatusConflict {
			t.Errorf("v2 before v1 was applied answered %d, want 409", r.Status)
		}
	}
	if n := f.onHand(t, "sku-gap"); n != 11 {
		t.Errorf("OnHand = %d, want 11 (both deltas)", n)
	}
	if v, id := f.version(t, "sku-gap"); v != 2 || id != v2.ID {
		t.Errorf("version = (%d, %s), want (2, %s)", v, id, v2.ID)
	}
	if got := f.metric(t, stockType, outboxlib.OutcomeEarly); got < 5 {
		t.Errorf("early counter = %v, want >= 5", got)
	}
	for _, r := range deadLetterReasons {
		if n := f.deadLetters(t, r); n != 0 {
			t.Errorf("dead letters (%s) = %v, want none", r, n)
		}
	}
	if n := len(f.family(t, "outbox_consumer_dead_letters_total")); n != len(deadLetterReasons) {
		t.Errorf("%d dead letter series, want one per reason from the start (at 0)", n)
	}
}

// The relay's ce-predecessorversion names the version a consumer must have applied first (it
// sees only some of an aggregate's events): version 5 after version 2 is not a gap.
func TestConsumerFollowsPredecessorAttribute(t *testing.T) {
	f := newFixture(t, 10)
	v2, v5 := stockEvent(t, "sku-pred", 2, 1, ""), stockEvent(t, "sku-pred", 5, 4, "")
	withPred := func(p string) func(*cloudtaskspb.HttpRequest) {
		return func(r *cloudtaskspb.HttpRequest) { r.Headers[outboxlib.HeaderPredecessorVersion] = p }
	}
	f.send(t, v5, withPred("2"))
	f.waitResponses(t, v5.ID, count(2)) // early while version 2 is missing
	f.send(t, v2, withPred("0"))
	got := f.waitResponses(t, v5.ID, func(rs []response) bool { return len(rs) > 0 && rs[len(rs)-1].Status == 200 })
	if last := got[len(got)-1]; last.Outcome != outboxlib.OutcomeApplied {
		t.Fatalf("v5: %+v, want applied", last)
	}
	if n := f.onHand(t, "sku-pred"); n != 5 {
		t.Errorf("OnHand = %d, want 5", n)
	}
	// An attribute that cannot be a predecessor is a malformed delivery.
	bad := stockEvent(t, "sku-pred-bad", 3, 1, "")
	f.send(t, bad, withPred("3"))
	if r := f.waitResponses(t, bad.ID, count(1))[0]; r.Status != http.StatusBadRequest {
		t.Errorf("predecessor 3 of version 3: %+v, want 400", r)
	}
}

// Snapshot handlers get the newest state only: an older version is stale (recorded, skipped).
// AnyOrder handlers get every event as it comes, and the version never goes back.
func TestConsumerSnapshotAndAnyOrderHandlers(t *testing.T) {
	f := newFixture(t, 10)
	l1, l2 := typedEvent(t, levelType, "sku-level", 1, 3, ""), typedEvent(t, levelType, "sku-level", 2, 8, "")
	f.send(t, l2, nil)
	if r := f.waitResponses(t, l2.ID, count(1))[0]; r.Outcome != outboxlib.OutcomeApplied {
		t.Fatalf("snapshot v2: %+v, want applied (a gap is not waited for)", r)
	}
	f.send(t, l1, nil)
	if r := f.waitResponses(t, l1.ID, count(1))[0]; r.Status != 200 || r.Outcome != outboxlib.OutcomeStale {
		t.Fatalf("snapshot v1 after v2: %+v, want 200 stale", r)
	}
	if n := f.onHand(t, "sku-level"); n != 8 {
		t.Errorf("OnHand = %d, want 8 (v2's level)", n)
	}
	if !f.processed(t, l1.ID) {
		t.Error("stale snapshot has no ProcessedEvents row: a redelivery would be checked again")
	}

	a1, a2 := typedEvent(t, adjustType, "sku-adjust", 1, 2, ""), typedEvent(t, adjustType, "sku-adjust", 2, 5, "")
	f.send(t, a2, nil)
	f.waitResponses(t, a2.ID, count(1))
	f.send(t, a1, nil)
	for _, ev := range []outboxlib.Event{a1, a2} {
		if r := f.waitResponses(t, ev.ID, count(1))[0]; r.Outcome != outboxlib.OutcomeApplied {
			t.Errorf("any-order v%d: %+v, want applied", ev.AggregateVersion, r)
		}
	}
	if n := f.onHand(t, "sku-adjust"); n != 7 {
		t.Errorf("OnHand = %d, want 7", n)
	}
	if v, id := f.version(t, "sku-adjust"); v != 2 || id != a2.ID {
		t.Errorf("version = (%d, %s), want (2, %s): it never goes back", v, id, a2.ID)
	}
}

// An event still early after EarlyPatience (its predecessor never came) is dead-lettered, with
// what it waited for.
func TestConsumerEarlyPatienceDeadLetters(t *testing.T) {
	f := newFixtureConfig(t, func(c *outboxlib.ConsumerConfig) { c.EarlyPatience = 300 * time.Millisecond })
	v2 := stockEvent(t, "sku-orphan", 2, 1, "")
	f.send(t, v2, nil)
	got := f.waitResponses(t, v2.ID, func(rs []response) bool { return len(rs) > 0 && rs[len(rs)-1].Status == 200 })
	if last := got[len(got)-1]; last.Outcome != outboxlib.OutcomeDeadLettered || len(got) < 2 {
		t.Fatalf("answers %v, want 409s then dead_lettered", statuses(got))
	}
	dl, err := outboxdb.ReadDeadLetter(context.Background(), f.client.Single(), v2.ID, consumerID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(dl.LastError, "still early") || !strings.Contains(dl.LastError, "needs version 1 first") {
		t.Errorf("dead letter error %q, want the patience and the missing version", dl.LastError)
	}
	if got := f.deadLetters(t, outboxlib.ReasonPatience); got != 1 {
		t.Errorf("dead letters{reason=patience} = %v, want 1", got)
	}
}

func TestConsumerTransientFailureIsRetried(t *testing.T) {
	f := newFixture(t, 10)
	ev := stockEvent(t, "sku-transient", 1, 2, modeTransientOnce)
	f.send(t, ev, nil)
	got := f.waitResponses(t, ev.ID, count(2))
	if diff := cmp.Diff([]int{503, 200}, statuses(got)); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if got[1].Outcome != outboxlib.OutcomeApplied || got[1].Attempt != "1" {
		t.Errorf("retry: %+v, want applied on attempt 1", got[1])
	}
	if n := f.onHand(t, "sku-transient"); n != 2 {
		t.Errorf("OnHand = %d, want 2 (the failed attempt's write discarded)", n)
	}
}

// An After effect runs once the handler's transaction committed; when it fails the delivery is
// answered 503 although the event is applied, and the redelivery (a duplicate) runs the effect
// again without applying the event twice or counting a failed delivery.
func TestConsumerAfterEffectIsResumedByRedelivery(t *testing.T) {
	f := newFixture(t, 2)
	ev := typedEvent(t, effectType, "sku-effect", 1, 4, "")
	f.send(t, ev, nil)
	got := f.waitResponses(t, ev.ID, count(2))
	if diff := cmp.Diff([]int{503, 200}, statuses(got)); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"", outboxlib.OutcomeDuplicate}, outcomes(got)); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
	if n := f.effects.Load(); n != 2 {
		t.Errorf("effect ran %d times, want 2 (after the commit, again on the redelivery)", n)
	}
	if n := f.onHand(t, "sku-effect"); n != 4 {
		t.Errorf("OnHand = %d, want 4 (applied once)", n)
	}
	// The run after the commit is handed what the handler wrote and when it committed; the
	// redelivery's, a duplicate, nothing.
	var processedAt time.Time
	if err := f.client.Single().Query(context.Background(), spanner.Statement{
		SQL: "SELECT ProcessedAt FROM ProcessedEvents WHERE EventId = @id", Params: map[string]any{"id": ev.ID},
	}).Do(func(r *spanner.Row) error { return r.Columns(&processedAt) }); err != nil {
		t.Fatal(err)
	}
	saw := f.sawEffects()
	if len(saw) != 2 {
		t.Fatalf("effect saw %d deliveries, want 2", len(saw))
	}
	if d := saw[0]; d.Duplicate || !d.AppliedAt.Equal(processedAt) || !cmp.Equal(d.Handed, []any{int64(4)}) {
		t.Errorf("first run: duplicate %v, applied at %v, handed %v; want false, %v (the commit), [4]", d.Duplicate, d.AppliedAt, d.Handed, processedAt)
	}
	if d := saw[1]; !d.Duplicate || !d.AppliedAt.IsZero() || d.Handed != nil {
		t.Errorf("redelivery: duplicate %v, applied at %v, handed %v; want true, zero, nothing", d.Duplicate, d.AppliedAt, d.Handed)
	}
	var failures int64
	err := f.client.Single().Query(context.Background(), spanner.Statement{
		SQL: "SELECT COUNT(*) FROM DeliveryFailures WHERE EventId = @id", Params: map[string]any{"id": ev.ID},
	}).Do(func(r *spanner.Row) error { return r.Columns(&failures) })
	if err != nil {
		t.Fatal(err)
	}
	if failures != 0 {
		t.Errorf("%d DeliveryFailures rows, want none: the event was applied", failures)
	}
}

// A replayed dead letter runs the handler's After effect too, as its delivery would have: an
// intent recorded by the replayed handler is carried out at once, not left for a sweep.
func TestReplayRunsTheAfterEffect(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 10)
	ev := typedEvent(t, effectType, "sku-effect-replay", 1, 3, modeUntilFixed)
	f.send(t, ev, nil)
	if got := f.waitResponses(t, ev.ID, count(1)); got[0].Outcome != outboxlib.OutcomeDeadLettered {
		t.Fatalf("delivery: %+v, want dead_lettered", got[0])
	}
	if n := f.effects.Load(); n != 0 {
		t.Fatalf("effect ran %d times for a dead-lettered event, want 0", n)
	}
	f.fixed.Store(true)
	if err := f.consumer.ReplayDeadLetter(ctx, ev.ID, "the sku is unblocked", "alice"); err != nil {
		t.Fatal(err)
	}
	if n := f.effects.Load(); n != 1 {
		t.Errorf("effect ran %d times after the replay, want 1", n)
	}
	if saw := f.sawEffects(); len(saw) != 1 || saw[0].Duplicate || saw[0].AppliedAt.IsZero() || !cmp.Equal(saw[0].Handed, []any{int64(3)}) {
		t.Errorf("the replay's effect saw %+v, want the replay's commit and what its handler handed ([3])", saw)
	}
	if n := f.onHand(t, "sku-effect-replay"); n != 3 {
		t.Errorf("OnHand = %d, want 3", n)
	}
}

func TestConsumerDeadLettersAfterMaxAttempts(t *testing.T) {
	f := newFixture(t, 3)
	ev := stockEvent(t, "sku-flaky", 1, 2, modeAlwaysFail)
	f.send(t, ev, nil)
	got := f.waitResponses(t, ev.ID, count(3))
	if diff := cmp.Diff([]int{503, 503, 200}, statuses(got)); diff != "" {
		t.Fatalf("statuses (-want +got):\n%s", diff)
	}
	if got[2].Outcome != outboxlib.OutcomeDeadLettered {
		t.Errorf("third delivery: %+v, want dead_lettered", got[2])
	}
	dl, err := outboxdb.ReadDeadLetter(context.Background(), f.client.Single(), ev.ID, consumerID)
	if err != nil {
		t.Fatal(err)
	}
	if dl.Attempts != 3 || !strings.Contains(dl.LastError, "hiccup") {
		t.Errorf("dead letter: attempts %d, last error %q; want 3 and the handler's error", dl.Attempts, dl.LastError)
	}
	if n := f.onHand(t, "sku-flaky"); n != 0 {
		t.Errorf("OnHand = %d, want 0", n)
	}
	for _, r := range deadLetterReasons {
		if want := map[bool]float64{true: 1}[r == outboxlib.ReasonMaxAttempts]; f.deadLetters(t, r) != want {
			t.Errorf("dead letters (%s) = %v, want %v", r, f.deadLetters(t, r), want)
		}
	}
}

func TestConsumerPermanentErrorDeadLettersThenReplay(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 10)
	ev := stockEvent(t, "sku-blocked", 1, 6, modeUntilFixed)
	f.send(t, ev, nil)
	got := f.waitResponses(t, ev.ID, count(1))
	if got[0].Status != 200 || got[0].Outcome != outboxlib.OutcomeDeadLettered {
		t.Fatalf("delivery: %+v, want 200 dead_lettered at once", got[0])
	}
	dl, err := outboxdb.ReadDeadLetter(ctx, f.client.Single(), ev.ID, consumerID)
	if err != nil {
		t.Fatal(err)
	}
	var attrs map[string]string
	if err := json.Unmarshal([]byte(dl.Attributes.String()), &attrs); err != nil {
		t.Fatal(err)
	}
	wantAttrs := map[string]string{}
	for k, v := range ev.Headers() {
		if strings.HasPrefix(strings.ToLower(k), "ce-") {
			wantAttrs[strings.ToLower(k)] = v
		}
	}
	if diff := cmp.Diff(wantAttrs, attrs); diff != "" {
		t.Errorf("attributes (-want +got):\n%s", diff)
	}
	wantRow := outboxdb.DeadLetter{
		EventId: ev.ID, Consumer: consumerID, EventType: stockType, Source: "//spanmart/warehouse",
		Body: ev.Payload, Attempts: 1, LastError: "permanent: sku sku-blocked is blocked",
	}
	if diff := cmp.Diff(wantRow, *dl, cmpopts.IgnoreFields(outboxdb.DeadLetter{}, "Attributes", "DeadAt")); diff != "" {
		t.Errorf("dead letter (-want +got):\n%s", diff)
	}
	if dl.DeadAt.IsZero() || !f.processed(t, ev.ID) || f.onHand(t, "sku-blocked") != 0 {
		t.Errorf("DeadAt %v, processed %v, OnHand %d; want a time, true, 0", dl.DeadAt, f.processed(t, ev.ID), f.onHand(t, "sku-blocked"))
	}

	// A redelivery of a dead-lettered event is a duplicate.
	f.send(t, ev, nil)
	got = f.waitResponses(t, ev.ID, count(2))
	if got[1].Outcome != outboxlib.OutcomeDuplicate {
		t.Errorf("redelivery: %+v, want duplicate", got[1])
	}

	// Operators list it over HTTP, and a replay needs a reason.
	var list outboxapi.DeadLetterList
	status, _ := f.admin(t, "GET", "/admin/deadletters", "", &list)
	if status != 200 || len(list.DeadLetters) != 1 || list.DeadLetters[0].EventID != ev.ID || string(list.DeadLetters[0].Body) != string(ev.Payload) {
		t.Fatalf("GET /admin/deadletters = %d %+v, want the one dead letter", status, list)
	}
	status, ctype := f.admin(t, "POST", "/admin/deadletters/"+ev.ID+"/replay", `{}`, nil)
	if status != http.StatusBadRequest || ctype != platform.ContentTypeProblem {
		t.Errorf("replay without a reason = %d %s, want 400 problem+json", status, ctype)
	}
	// Before the fix, a replay fails and changes nothing.
	if err := f.consumer.ReplayDeadLetter(ctx, ev.ID, "try", "alice"); !outboxlib.IsPermanent(err) {
		t.Errorf("replay before the fix = %v, want the handler's permanent error", err)
	}
	if n := f.onHand(t, "sku-blocked"); n != 0 {
		t.Errorf("OnHand after a failed replay = %d, want 0", n)
	}

	f.fixed.Store(true)
	var res struct{ Outcome string }
	status, _ = f.admin(t, "POST", "/admin/deadletters/"+ev.ID+"/replay", `{"reason":"sku unblocked (INC-42)"}`, &res)
	if status != 200 || res.Outcome != outboxlib.OutcomeApplied {
		t.Fatalf("replay = %d %+v, want 200 applied", status, res)
	}
	if n := f.onHand(t, "sku-blocked"); n != 6 {
		t.Errorf("OnHand after replay = %d, want 6", n)
	}
	if v, _ := f.version(t, "sku-blocked"); v != 1 {
		t.Errorf("version after replay = %d, want 1", v)
	}
	dl, err = outboxdb.ReadDeadLetter(ctx, f.client.Single(), ev.ID, consumerID)
	if err != nil {
		t.Fatal(err)
	}
	if !dl.ReplayedAt.Valid || dl.ReplayReason.StringVal != "sku unblocked (INC-42)" || dl.ReplayedBy.StringVal != operator {
		t.Errorf("dead letter after replay: %v %v %v", dl.ReplayedAt, dl.ReplayReason, dl.ReplayedBy)
	}
	if err := f.consumer.ReplayDeadLetter(ctx, ev.ID, "again", "bob"); !errors.Is(err, outboxlib.ErrAlreadyReplayed) {
		t.Errorf("second replay = %v, want ErrAlreadyReplayed", err)
	}
	if n := f.onHand(t, "sku-blocked"); n != 6 {
		t.Errorf("OnHand after a second replay = %d, want 6", n)
	}
	if err := f.consumer.ReplayDeadLetter(ctx, "00000000-0000-4000-8000-000000000000", "x", "bob"); !errors.Is(err, outboxlib.ErrDeadLetterNotFound) {
		t.Errorf("replay of an unknown id = %v, want ErrDeadLetterNotFound", err)
	}
	pending, err := f.consumer.DeadLetters(ctx, false, 0)
	if err != nil || len(pending) != 0 {
		t.Errorf("pending dead letters after replay = %v, %v; want none", pending, err)
	}
	all, err := f.consumer.DeadLetters(ctx, true, 0)
	if err != nil || len(all) != 1 || all[0].ReplayedBy != operator {
		t.Errorf("all dead letters = %+v, %v; want the replayed one", all, err)
	}
}

// idToken gets an ID token of account for audience from the Tasks emulator's metadata endpoint
// (what the metadata server gives an operator's or a service's account in production).
func idToken(t *testing.T, account, audience string) string {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+tasks.HTTPAddr()+"/computeMetadata/v1/instance/service-accounts/"+account+"/identity?audience="+url.QueryEscape(audience), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Metadata-Flavor", "Google")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("id token: %s %s %v", resp.Status, b, err)
	}
	return string(b)
}

// admin calls an operators' endpoint of the consumer with the operator's ID token.
func (f *fixture) admin(t *testing.T, method, path, body string, out any) (status int, contentType string) {
	t.Helper()
	return doJSON(t, method, f.url+path, body, out, "Bearer "+idToken(t, operator, f.url))
}

// doJSON sends a request and decodes a JSON answer into out (if not nil); auth, when given, is
// the Authorization header.
// doJSON sends body; auth is the Authorization header's value, then more header name and value
// pairs, if any.
func doJSON(t *testing.T, method, url, body string, out any, auth ...string) (status int, contentType string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if len(auth) > 0 {
		req.Header.Set("Authorization", auth[0])
	}
	for i := 1; i+1 < len(auth); i += 2 {
		req.Header.Set(auth[i], auth[i+1])
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
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, url, err, b)
		}
	}
	return resp.StatusCode, resp.Header.Get("Content-Type")
}

func TestConsumerRejectsBadTokensAndMalformedEvents(t *testing.T) {
	f := newFixture(t, 10)
	events := map[string]outboxlib.Event{}
	cases := []struct {
		name   string
		change func(*cloudtaskspb.HttpRequest)
		status int
	}{
		{"wrong audience", func(r *cloudtaskspb.HttpRequest) {
			r.GetOidcToken().Audience = "https://someone-else.example.com/events"
		}, 401},
		{"wrong email", func(r *cloudtaskspb.HttpRequest) {
			r.GetOidcToken().ServiceAccountEmail = "intruder@spanmart-test.iam.gserviceaccount.com"
		}, 401},
		{"no token", func(r *cloudtaskspb.HttpRequest) { r.AuthorizationHeader = nil }, 401},
		{"malformed", func(r *cloudtaskspb.HttpRequest) { delete(r.Headers, outboxlib.HeaderSpecVersion) }, 400},
		{"unknown type", func(r *cloudtaskspb.HttpRequest) { r.Headers[outboxlib.HeaderType] = "sku.renamed" }, 200},
	}
	for _, tc := range cases {
		ev := stockEvent(t, "sku-"+strings.ReplaceAll(tc.name, " ", "-"), 1, 1, "")
		events[tc.name] = ev
		f.send(t, ev, tc.change)
	}
	for _, tc := range cases {
		ev := events[tc.name]
		got := f.waitResponses(t, ev.ID, count(1))[0]
		if got.Status != tc.status {
			t.Errorf("%s: status %d, want %d", tc.name, got.Status, tc.status)
		}
		if tc.status >= 400 && got.ContentType != platform.ContentTypeProblem {
			t.Errorf("%s: content type %q, want problem+json", tc.name, got.ContentType)
		}
		if f.processed(t, ev.ID) != (tc.status == 200) {
			t.Errorf("%s: recorded in ProcessedEvents: %v", tc.name, !(tc.status == 200))
		}
	}
	if got := f.rec.get(events["unknown type"].ID)[0].Outcome; got != outboxlib.OutcomeDeadLettered {
		t.Errorf("unknown type outcome %q, want %q", got, outboxlib.OutcomeDeadLettered)
	}
	if got := f.metric(t, "", outboxlib.OutcomeRejected); got < 4 {
		t.Errorf("rejected counter = %v, want >= 4", got)
	}

	// A real token with its signature altered, sent directly with a valid event.
	good := f.rec.get(events["unknown type"].ID)[0].auth
	parts := strings.Split(strings.TrimPrefix(good, "Bearer "), ".")
	if len(parts) != 3 {
		t.Fatalf("recorded token has %d parts", len(parts))
	}
	sig := []byte(parts[2])
	sig[10] ^= 'A' ^ 'B' // flips a base64url character between A and B (or changes another)
	if sig[10] == parts[2][10] {
		t.Fatal("signature unchanged")
	}
	tampered := "Bearer " + parts[0] + "." + parts[1] + "." + string(sig)
	// The claims altered with the original signature kept.
	claims := []byte(parts[1])
	claims[len(claims)/2] ^= 1
	forged := "Bearer " + parts[0] + "." + string(claims) + "." + parts[2]
	for name, auth := range map[string]string{"bad signature": tampered, "altered claims": forged, "not a JWT": "Bearer abc", "basic": "Basic cmVsYXk6cHc="} {
		ev := stockEvent(t, "sku-direct", 1, 1, "")
		req, err := http.NewRequest("POST", f.url+outboxlib.PathEvents, bytes.NewReader(ev.Payload))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range ev.Headers() {
			req.Header.Set(k, v)
		}
		req.Header.Set("Authorization", auth)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Content-Type") != platform.ContentTypeProblem {
			t.Errorf("%s: %d %s, want 401 problem+json", name, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
	if f.onHand(t, "sku-direct") != 0 {
		t.Error("a rejected request was applied")
	}
	// Why is logged at WARNING, the token never.
	for _, e := range f.logs.FilterMessage("event rejected: bad token").AllUntimed() {
		if e.Level != zapcore.WarnLevel {
			t.Errorf("rejection logged at %s, want warn", e.Level)
		}
		if r, _ := e.ContextMap()["reason"].(string); r == "" || strings.Contains(r, parts[2][:20]) {
			t.Errorf("rejection reason %q is empty or holds the token", r)
		}
	}
}

func TestNewConsumerAndVerifierValidate(t *testing.T) {
	if _, err := outboxlib.NewVerifier(outboxlib.VerifierConfig{Issuer: "https://accounts.google.com"}); err == nil {
		t.Error("NewVerifier without audiences or e-mails succeeded")
	}
	v, err := outboxlib.NewVerifier(outboxlib.VerifierConfig{Issuer: "https://x", Audiences: []string{"a"}, AllowedEmails: []string{"e"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := outboxlib.NewConsumer(outboxlib.ConsumerConfig{Name: "c", Verifier: v}); err == nil {
		t.Error("NewConsumer without a client succeeded")
	}
	if _, err := outboxlib.NewConsumer(outboxlib.ConsumerConfig{Name: "c"}); err == nil {
		t.Error("NewConsumer without a verifier succeeded")
	}
}

func TestConsumerDeadLettersMalformedEventOnLastAttempt(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 2)
	ev := stockEvent(t, "sku-garbled", 1, 1, "")
	f.send(t, ev, func(r *cloudtaskspb.HttpRequest) { r.Body = []byte("{not json") })
	got := f.waitResponses(t, ev.ID, count(2))
	if diff := cmp.Diff([]int{400, 200}, statuses(got)); diff != "" {
		t.Fatalf("statuses (-want +got):\n%s", diff)
	}
	if got[1].Outcome != outboxlib.OutcomeDeadLettered {
		t.Errorf("last attempt: %+v, want dead_lettered", got[1])
	}
	list, err := f.consumer.DeadLetters(ctx, false, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || string(list[0].BodyBytes) != "{not json" || list[0].Body != nil || list[0].Attempts != 2 {
		t.Fatalf("dead letters = %+v, want the garbled body kept as bytes, 2 attempts", list)
	}
	if err := f.consumer.ReplayDeadLetter(ctx, ev.ID, "try anyway", "alice"); !errors.Is(err, outboxlib.ErrMalformed) {
		t.Errorf("replay of a malformed event = %v, want ErrMalformed", err)
	}
}

// A dead-lettered event holds its aggregate's successors back (they are early, then dead-lettered
// after the patience): replayed in order, both apply; a replay of the successor first is early.
func TestReplayOfDeadLetteredPredecessorKeepsOrder(t *testing.T) {
	ctx := context.Background()
	f := newFixtureConfig(t, func(c *outboxlib.ConsumerConfig) { c.EarlyPatience = 200 * time.Millisecond })
	v1, v2 := stockEvent(t, "sku-held", 1, 1, modeUntilFixed), stockEvent(t, "sku-held", 2, 20, "")
	f.send(t, v1, nil)
	if r := f.waitResponses(t, v1.ID, count(1))[0]; r.Outcome != outboxlib.OutcomeDeadLettered {
		t.Fatalf("v1: %+v, want dead_lettered", r)
	}
	f.send(t, v2, nil)
	f.waitResponses(t, v2.ID, func(rs []response) bool { return len(rs) > 0 && rs[len(rs)-1].Outcome == outboxlib.OutcomeDeadLettered })
	if n := f.onHand(t, "sku-held"); n != 0 {
		t.Fatalf("OnHand = %d, want 0: v2 must not be applied before v1", n)
	}
	f.fixed.Store(true)
	if err := f.consumer.ReplayDeadLetter(ctx, v2.ID, "fixed", "alice"); !errors.Is(err, outboxlib.ErrEarly) {
		t.Errorf("replay of v2 before v1 = %v, want ErrEarly", err)
	}
	for _, ev := range []outboxlib.Event{v1, v2} {
		var res struct{ Outcome string }
		status, _ := f.admin(t, "POST", "/admin/deadletters/"+ev.ID+"/replay", `{"reason":"fixed"}`, &res)
		if status != 200 || res.Outcome != outboxlib.OutcomeApplied {
			t.Fatalf("replay of v%d = %d %+v, want 200 applied", ev.AggregateVersion, status, res)
		}
	}
	if n := f.onHand(t, "sku-held"); n != 21 {
		t.Errorf("OnHand = %d, want 21 (both deltas)", n)
	}
	if v, id := f.version(t, "sku-held"); v != 2 || id != v2.ID {
		t.Errorf("version = (%d, %s), want (2, %s)", v, id, v2.ID)
	}
}

// Concurrent replays of one dead letter apply it once: one succeeds, the others are told it was
// replayed already.
func TestConcurrentDeadLetterReplaysApplyOnce(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 10)
	ev := stockEvent(t, "sku-replays", 1, 4, modeUntilFixed)
	f.send(t, ev, nil)
	f.waitResponses(t, ev.ID, count(1))
	f.fixed.Store(true)
	const n = 5
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = f.consumer.ReplayDeadLetter(ctx, ev.ID, "fixed", fmt.Sprintf("operator-%d", i)) })
	}
	wg.Wait()
	ok, already := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, outboxlib.ErrAlreadyReplayed):
			already++
		default:
			t.Errorf("replay: %v", err)
		}
	}
	if ok != 1 || already != n-1 {
		t.Errorf("%d replays succeeded and %d were already replayed, want 1 and %d", ok, already, n-1)
	}
	if got := f.onHand(t, "sku-replays"); got != 4 {
		t.Errorf("OnHand = %d, want 4 (one application)", got)
	}
}

// An event whose type has no handler (a route shipped before its handler, a consumer rolled back)
// is dead-lettered at once with the reason, never acknowledged and forgotten; once a deployment
// has the handler, a replay applies it.
func TestUnknownTypeIsDeadLetteredAndReplayedOnceHandled(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 10)
	const newType = "stock.transferred"
	ev := typedEvent(t, newType, "sku-new-type", 1, 9, "")
	f.send(t, ev, nil)
	if r := f.waitResponses(t, ev.ID, count(1))[0]; r.Status != 200 || r.Outcome != outboxlib.OutcomeDeadLettered {
		t.Fatalf("delivery of an unknown type: %+v, want 200 dead_lettered", r)
	}
	dl, err := outboxdb.ReadDeadLetter(ctx, f.client.Single(), ev.ID, consumerID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(dl.LastError, `no handler for "stock.transferred"`) {
		t.Errorf("dead letter error %q, want the missing handler", dl.LastError)
	}
	if got := f.deadLetters(t, outboxlib.ReasonUnknownType); got != 1 {
		t.Errorf("dead letters{reason=unknown_type} = %v, want 1", got)
	}
	status, _ := f.admin(t, "POST", "/admin/deadletters/"+ev.ID+"/replay", `{"reason":"handler deployed?"}`, nil)
	if status != http.StatusConflict {
		t.Errorf("replay while no handler exists = %d, want 409", status)
	}

	// The next deployment of the consumer has the handler.
	next, err := outboxlib.NewConsumer(outboxlib.ConsumerConfig{Name: consumerID, Client: f.client, Verifier: f.verifier})
	if err != nil {
		t.Fatal(err)
	}
	next.Handle(newType, f.receiveStock)
	if err := next.ReplayDeadLetter(ctx, ev.ID, "handler for stock.transferred deployed", "alice"); err != nil {
		t.Fatalf("replay with the handler: %v", err)
	}
	if n := f.onHand(t, "sku-new-type"); n != 9 {
		t.Errorf("OnHand = %d, want 9", n)
	}
}

// The consumer dead-letters by the failed answers it gave itself, not by
// X-CloudTasks-TaskRetryCount: that header also counts attempts made while the consumer was
// down, and a caller can set it. Both kinds of failure that MaxAttempts counts are checked: a
// handler's transient error and a malformed event (which used to be dead-lettered on the
// header's "last attempt").
func TestConsumerCountsItsOwnAnswers(t *testing.T) {
	f := newFixture(t, 20)
	probe := stockEvent(t, "sku-probe", 1, 1, "")
	f.send(t, probe, nil)
	token := f.waitResponses(t, probe.ID, count(1))[0].auth

	tests := []struct {
		name       string
		ev         outboxlib.Event
		body       []byte // nil: the event's payload
		wantStatus int
		wantError  string // in DeliveryFailures.LastError
	}{
		{name: "transient", ev: stockEvent(t, "sku-spoofed", 1, 2, modeAlwaysFail),
			wantStatus: http.StatusServiceUnavailable, wantError: "hiccup"},
		{name: "malformed", ev: stockEvent(t, "sku-spoofed-garbled", 1, 2, ""), body: []byte("{not json"),
			wantStatus: http.StatusBadRequest, wantError: "malformed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.body
			if body == nil {
				body = tc.ev.Payload
			}
			req, err := http.NewRequest("POST", f.url+outboxlib.PathEvents, bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.ev.Headers() {
				req.Header.Set(k, v)
			}
			req.Header.Set("Authorization", token)
			// The 20th attempt as Cloud Tasks counts, but the consumer's first answer.
			req.Header.Set("X-CloudTasks-TaskRetryCount", "19")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("first answer with retry count 19 = %d, want %d (not dead-lettered)", resp.StatusCode, tc.wantStatus)
			}
			row, err := outboxdb.ReadDeliveryFailure(context.Background(), f.client.Single(), tc.ev.ID, consumerID)
			if err != nil {
				t.Fatal(err)
			}
			if row.Failures != 1 || row.Deferrals != 0 || !strings.Contains(row.LastError, tc.wantError) {
				t.Errorf("failures row %+v, want 1 failure with an error containing %q", row, tc.wantError)
			}
			if _, err := outboxdb.ReadDeadLetter(context.Background(), f.client.Single(), tc.ev.ID, consumerID); !errors.Is(err, dao.ErrNotFound) {
				t.Errorf("dead letter after one answer: %v, want none", err)
			}
		})
	}
}

// The ledger asks a consumer which events it applied or dead-lettered, with the relay's token.
func TestConsumerAnswersTheLedger(t *testing.T) {
	f := newFixture(t, 10)
	applied, dead := stockEvent(t, "sku-ledger", 1, 1, ""), stockEvent(t, "sku-ledger-dead", 1, 1, modeUntilFixed)
	f.send(t, applied, nil)
	f.send(t, dead, nil)
	token := f.waitResponses(t, applied.ID, count(1))[0].auth
	f.waitResponses(t, dead.ID, count(1))
	unknown := uuid.NewString()

	ask := func(auth, body string) (int, outboxlib.LedgerResponse) {
		req, err := http.NewRequest("POST", f.url+outboxlib.PathLedger, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out outboxlib.LedgerResponse
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	status, got := ask(token, fmt.Sprintf(`{"event_ids":[%q,%q,%q]}`, applied.ID, dead.ID, unknown))
	want := outboxlib.LedgerResponse{Consumer: consumerID, Deliveries: map[string]string{
		applied.ID: outboxlib.DeliveryApplied, dead.ID: outboxlib.DeliveryDeadLettered, unknown: outboxlib.DeliveryUnknown,
	}}
	if diff := cmp.Diff(want, got); status != 200 || diff != "" {
		t.Errorf("ledger answer %d (-want +got):\n%s", status, diff)
	}
	if status, _ := ask("", `{"event_ids":[]}`); status != http.StatusUnauthorized {
		t.Errorf("ledger without a token = %d, want 401", status)
	}
	if status, _ := ask(token, `{"event_ids":["not-a-uuid"]}`); status != http.StatusBadRequest {
		t.Errorf("ledger with a bad id = %d, want 400", status)
	}
	if status, _ := ask(token, `{"ids":[]}`); status != http.StatusBadRequest {
		t.Errorf("ledger with an unknown field = %d, want 400", status)
	}
}

// A consumer whose handler appended events nudges the relay for their shard after the commit, so
// the next hop does not wait for a poll; a duplicate, which commits nothing new, does not nudge.
func TestConsumerNudgesTheRelayAfterAppending(t *testing.T) {
	relay := newRelayStub(t)
	nudger := outboxlib.NewNudger(relay.srv.URL, consumerID)
	nudges := func() []string { // once every nudge made so far has gone out
		t.Helper()
		if err := nudger.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		return relay.nudges()
	}
	f := newFixtureConfig(t, func(c *outboxlib.ConsumerConfig) { c.Nudger = nudger })
	plain, emitting := stockEvent(t, "sku-quiet", 1, 1, ""), stockEvent(t, "sku-noted", 1, 1, modeEmit)
	f.send(t, plain, nil)
	f.waitResponses(t, plain.ID, count(1))
	if got := nudges(); len(got) != 0 {
		t.Errorf("nudges after a handler that appended nothing: %v, want none", got)
	}
	f.send(t, emitting, nil)
	if r := f.waitResponses(t, emitting.ID, count(1))[0]; r.Outcome != outboxlib.OutcomeApplied {
		t.Fatalf("delivery: %+v", r)
	}
	want := []string{fmt.Sprintf("POST /nudge?source=%s&shard=%d", consumerID, outboxlib.ShardOf("sku-noted"))}
	if diff := cmp.Diff(want, nudges()); diff != "" {
		t.Errorf("nudges (-want +got):\n%s", diff)
	}
	f.send(t, emitting, nil)
	f.waitResponses(t, emitting.ID, count(2))
	if diff := cmp.Diff(want, nudges()); diff != "" {
		t.Errorf("nudges after a duplicate (-want +got):\n%s", diff)
	}
}

// The operators' endpoints need an operator's ID token: none is 401, another account's is 403, and
// neither lists or replays anything.
func TestAdminEndpointsNeedAnOperator(t *testing.T) {
	f := newFixture(t, 10)
	ev := stockEvent(t, "sku-admin", 1, 3, modeUntilFixed)
	f.send(t, ev, nil)
	f.waitResponses(t, ev.ID, count(1))
	f.fixed.Store(true)
	for name, auth := range map[string]string{
		"no token":          "",
		"the relay's token": "Bearer " + idToken(t, relaySA, f.url),
		"another audience":  "Bearer " + idToken(t, operator, "https://elsewhere.example"),
	} {
		want := http.StatusUnauthorized
		if name == "the relay's token" {
			want = http.StatusForbidden
		}
		for _, call := range []struct{ method, path, body string }{
			{"GET", "/admin/deadletters", ""},
			{"POST", "/admin/deadletters/" + ev.ID + "/replay", `{"reason":"let me"}`},
		} {
			var a []string
			if auth != "" {
				a = []string{auth}
			}
			status, ctype := doJSON(t, call.method, f.url+call.path, call.body, nil, a...)
			if status != want || ctype != platform.ContentTypeProblem {
				t.Errorf("%s: %s %s = %d %s, want %d problem+json", name, call.method, call.path, status, ctype, want)
			}
		}
	}
	if n := f.onHand(t, "sku-admin"); n != 0 {
		t.Errorf("OnHand = %d after refused replays, want 0", n)
	}
	if status, _ := f.admin(t, "POST", "/admin/deadletters/"+ev.ID+"/replay", `{"reason":"fixed","by":"mallory"}`, nil); status != http.StatusBadRequest {
		t.Errorf("replay naming its own 'by' = %d, want 400 (who replays is the token's account)", status)
	}
	var res struct{ Outcome string }
	if status, _ := f.admin(t, "POST", "/admin/deadletters/"+ev.ID+"/replay", `{"reason":"fixed"}`, &res); status != 200 || res.Outcome != outboxlib.OutcomeApplied {
		t.Fatalf("operator's replay = %d %+v, want 200 applied", status, res)
	}
	dl, err := outboxdb.ReadDeadLetter(context.Background(), f.client.Single(), ev.ID, consumerID)
	if err != nil || dl.ReplayedBy.StringVal != operator {
		t.Errorf("ReplayedBy = %v (%v), want the operator's e-mail %s", dl.ReplayedBy, err, operator)
	}
}

// A delegate (the console) acts on behalf of the operator it names; the replay records both. The
// header from an account that is no delegate is refused, and so is a header that is no address.
func TestAdminEndpointsByADelegate(t *testing.T) {
	f := newFixture(t, 10)
	ev := stockEvent(t, "sku-delegate", 1, 3, modeUntilFixed)
	f.send(t, ev, nil)
	f.waitResponses(t, ev.ID, count(1))
	f.fixed.Store(true)
	replay := `{"reason":"fixed by bob"}`
	for name, c := range map[string]struct {
		account, onBehalf string
	}{
		"an operator naming another":   {operator, "mallory@example.com"},
		"the delegate naming nonsense": {console, "bob, mallory"},
	} {
		status, _ := doJSON(t, "POST", f.url+"/admin/deadletters/"+ev.ID+"/replay", replay, nil,
			"Bearer "+idToken(t, c.account, f.url), outboxlib.HeaderOnBehalfOf, c.onBehalf)
		if status != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, status)
		}
	}
	var res struct{ Outcome string }
	status, _ := doJSON(t, "POST", f.url+"/admin/deadletters/"+ev.ID+"/replay", replay, &res,
		"Bearer "+idToken(t, console, f.url), outboxlib.HeaderOnBehalfOf, "bob@example.com")
	if status != http.StatusOK || res.Outcome != outboxlib.OutcomeApplied {
		t.Fatalf("the delegate's replay = %d %+v, want 200 applied", status, res)
	}
	dl, err := outboxdb.ReadDeadLetter(context.Background(), f.client.Single(), ev.ID, consumerID)
	if want := "bob@example.com via " + console; err != nil || dl.ReplayedBy.StringVal != want {
		t.Errorf("ReplayedBy = %v (%v), want %q", dl.ReplayedBy, err, want)
	}
}

// GET /admin/status counts the consumer's answers and its backlog of trouble; GET
// /admin/processed says when each event was applied. Both are for operators only.
func TestAdminStatusAndProcessed(t *testing.T) {
	f := newFixture(t, 10)
	ok := stockEvent(t, "sku-status", 1, 2, "")
	f.send(t, ok, nil)
	f.waitResponses(t, ok.ID, count(1))
	poison := stockEvent(t, "sku-poison", 1, 2, modeUntilFixed) // permanent: dead-lettered
	f.send(t, poison, nil)
	f.waitResponses(t, poison.ID, count(1))

	var st outboxapi.ConsumerStatus
	if status, _ := f.admin(t, "GET", "/admin/status", "", &st); status != http.StatusOK {
		t.Fatalf("GET /admin/status = %d", status)
	}
	if st.Consumer != consumerID || st.DeadLetters != 1 || st.Events.Applied != 1 ||
		st.Events.DeadLettered != 1 || st.Lag.Count != 1 || st.Lag.P50 <= 0 || st.Since.IsZero() {
		t.Errorf("status = %+v", st)
	}
	var got outboxapi.ProcessedList
	path := "/admin/processed?event_id=" + ok.ID + "&event_id=" + uuid.NewString()
	if status, _ := f.admin(t, "GET", path, "", &got); status != http.StatusOK {
		t.Fatalf("GET %s = %d", path, status)
	}
	if len(got.Processed) != 1 || got.Processed[0].EventID != ok.ID || got.Processed[0].ProcessedAt.IsZero() {
		t.Errorf("processed = %+v, want the applied event only", got)
	}
	if status, _ := f.admin(t, "GET", "/admin/processed", "", nil); status != http.StatusBadRequest {
		t.Errorf("GET /admin/processed without ids = %d, want 400", status)
	}
	for _, p := range []string{"/admin/status", "/admin/processed?event_id=" + ok.ID} {
		if status, _ := doJSON(t, "GET", f.url+p, "", nil); status != http.StatusUnauthorized {
			t.Errorf("GET %s without a token = %d, want 401", p, status)
		}
	}
}
