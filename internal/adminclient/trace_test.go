package adminclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/internal/adminclient"
	"github.com/spanmart/spanmart/internal/adminclient/adminclienttest"
	"github.com/spanmart/spanmart/internal/topology"
)

func ms(n int) *time.Duration {
	d := time.Duration(n) * time.Millisecond
	return &d
}

// hop is a delivery of the scenario's trace with its latencies in milliseconds.
func hop(id, typ, source, aggType, aggID string, version int64, committed, published, sub, processed string, pub, del, e2e int) adminclient.Hop {
	h := adminclient.Hop{EventID: id, EventType: typ, Source: source, AggregateType: aggType, AggregateID: aggID, AggregateVersion: version,
		CommittedAt: ts(committed), PublishedAt: tp(published), Subscriber: sub, PublishLatency: ms(pub)}
	if processed != "" {
		h.ProcessedAt, h.DeliveryLatency, h.EndToEnd = tp(processed), ms(del), ms(e2e)
	}
	return h
}

// wantHops are the scenario's deliveries, with the latencies worked out by hand.
func wantHops() []adminclient.Hop {
	const (
		o = adminclienttest.OrderID
		p = adminclienttest.PaymentID
	)
	return []adminclient.Hop{
		hop(adminclienttest.EventOrderCreated, "order.created", "orders", "order", o, 1, "2026-03-01T10:00:00Z", "2026-03-01T10:00:00.04Z", "fulfillment", "2026-03-01T10:00:00.09Z", 40, 50, 90),
		hop(adminclienttest.EventOrderCreated, "order.created", "orders", "order", o, 1, "2026-03-01T10:00:00Z", "2026-03-01T10:00:00.04Z", "notifications", "2026-03-01T10:00:00.15Z", 40, 110, 150),
		hop(adminclienttest.EventInventoryReserved, "inventory.reserved", "fulfillment", "reservation", o, 1, "2026-03-01T10:00:00.09Z", "2026-03-01T10:00:00.12Z", "orders", "2026-03-01T10:00:00.17Z", 30, 50, 80),
		hop(adminclienttest.EventAwaitingPayment, "order.awaiting_payment", "orders", "order", o, 2, "2026-03-01T10:00:00.17Z", "2026-03-01T10:00:00.21Z", "gateway-abstraction", "2026-03-01T10:00:00.26Z", 40, 50, 90),
		hop(adminclienttest.EventPaymentAuthorized, "payment.authorized", "gateway-abstraction", "payment", p, 1, "2026-03-01T10:00:01.26Z", "2026-03-01T10:00:01.3Z", "orders", "2026-03-01T10:00:01.35Z", 40, 50, 90),
		hop(adminclienttest.EventOrderConfirmed, "order.confirmed", "orders", "order", o, 3, "2026-03-01T10:00:01.35Z", "2026-03-01T10:00:01.39Z", "fulfillment", "2026-03-01T10:00:01.44Z", 40, 50, 90),
		hop(adminclienttest.EventOrderConfirmed, "order.confirmed", "orders", "order", o, 3, "2026-03-01T10:00:01.35Z", "2026-03-01T10:00:01.39Z", "notifications", "2026-03-01T10:00:04.39Z", 40, 3000, 3040),
	}
}

var stuckProblem = adminclient.Problem{Service: "orders", Kind: adminclient.ProblemStuck, Subject: adminclienttest.OrderID,
	Detail: "stuck in CONFIRMED for 48h59m58s, waiting for shipment"}

func TestTrace(t *testing.T) {
	ctx := context.Background()
	c, stack, _ := newClient(t, adminclient.Config{})
	tr, err := c.Trace(ctx, adminclienttest.OrderID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantHops(), tr.Hops); diff != "" {
		t.Errorf("hops (-want +got):\n%s", diff)
	}
	if got := tr.Slowest(); got != 6 {
		t.Errorf("Slowest() = %d, want 6 (order.confirmed to notifications)", got)
	}
	wantAggs := []adminclient.AggregateRef{{"order", adminclienttest.OrderID}, {"reservation", adminclienttest.OrderID},
		{"shipment", adminclienttest.ShipmentID}, {"payment", adminclienttest.PaymentID}}
	if diff := cmp.Diff(wantAggs, tr.Aggregates); diff != "" {
		t.Errorf("aggregates (-want +got):\n%s", diff)
	}
	if tr.Status != "CONFIRMED" || tr.Order == nil || tr.Mismatch != nil || tr.Flagged != nil || len(tr.Gaps) != 0 {
		t.Errorf("status %q, order %v, mismatch %v, flagged %v, gaps %+v", tr.Status, tr.Order != nil, tr.Mismatch, tr.Flagged, tr.Gaps)
	}
	if tr.Stuck == nil || tr.Stuck.WaitingFor != "shipment" {
		t.Errorf("stuck %+v", tr.Stuck)
	}
	if diff := cmp.Diff([]adminclient.Problem{stuckProblem}, tr.Problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	// Each aggregate was asked for once, and each subscriber once for all its events.
	asked := map[string]int{}
	for _, r := range stack.Requests(topology.Relay) {
		asked[r.Query.Get("aggregate_type")+" "+r.Query.Get("aggregate_id")]++
	}
	for _, a := range wantAggs {
		if asked[a.Type+" "+a.ID] != 1 {
			t.Errorf("events of %s %s asked for %d times", a.Type, a.ID, asked[a.Type+" "+a.ID])
		}
	}
	for _, sub := range []string{topology.Orders, topology.Fulfillment, topology.Gateway, topology.Notifications} {
		var processed []string
		for _, r := range stack.Requests(sub) {
			if r.Path == "/admin/processed" {
				processed = append(processed, strings.Join(r.Query["event_id"], ","))
			}
		}
		if len(processed) != 1 {
			t.Errorf("%s asked %d times which events it processed: %q", sub, len(processed), processed)
		}
	}

	// JSON: the latencies in seconds, null when unknown; it decodes back.
	data, err := json.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Hops []map[string]any `json:"hops"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	last := raw.Hops[6]
	if last["committed_to_published_seconds"] != 0.04 || last["published_to_processed_seconds"] != 3.0 || last["committed_to_processed_seconds"] != 3.04 ||
		last["subscriber"] != "notifications" || last["processed_at"] != "2026-03-01T10:00:04.39Z" {
		t.Errorf("hop JSON %v", last)
	}
	var back adminclient.Trace
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(tr.Hops, back.Hops); diff != "" {
		t.Errorf("hops after a JSON round trip (-want +got):\n%s", diff)
	}
}

// A subscriber that is down leaves its hops' processed times unknown, and the rest of the trace
// stands.
func TestTraceSubscriberDown(t *testing.T) {
	c, stack, _ := newClient(t, adminclient.Config{})
	stack.Down(topology.Notifications)
	tr, err := c.Trace(context.Background(), adminclienttest.OrderID)
	if err != nil {
		t.Fatal(err)
	}
	want := wantHops()
	for i := range want {
		if want[i].Subscriber == topology.Notifications {
			want[i].ProcessedAt, want[i].DeliveryLatency, want[i].EndToEnd, want[i].ProcessedUnknown = nil, nil, nil, true
		}
	}
	if diff := cmp.Diff(want, tr.Hops); diff != "" {
		t.Errorf("hops (-want +got):\n%s", diff)
	}
	if got := tr.Slowest(); got != 0 {
		t.Errorf("Slowest() = %d, want 0 (the first of the 90 ms hops)", got)
	}
	var gaps []string
	for _, g := range tr.Gaps {
		gaps = append(gaps, g.Service+" "+g.What)
		if g.Refused() || g.Err == nil {
			t.Errorf("gap %+v: want a transport error", g)
		}
	}
	if diff := cmp.Diff([]string{"notifications dead letters", "notifications processed events"}, gaps); diff != "" {
		t.Errorf("gaps (-want +got):\n%s", diff)
	}
}

// A relay that refuses leaves no hop, and says so four times (one per aggregate); the order and
// the audit are still there.
func TestTraceRelayRefuses(t *testing.T) {
	c, stack, _ := newClient(t, adminclient.Config{})
	stack.Refuse(topology.Relay, "GET /v1/outbox/events", 403)
	tr, err := c.Trace(context.Background(), adminclienttest.OrderID)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Hops) != 0 || tr.Status != "CONFIRMED" || tr.Stuck == nil || len(tr.Gaps) != 4 {
		t.Fatalf("hops %d, status %q, stuck %v, gaps %+v", len(tr.Hops), tr.Status, tr.Stuck, tr.Gaps)
	}
	for _, g := range tr.Gaps {
		if g.Service != topology.Relay || !g.Refused() || !errors.Is(g.Err, adminclient.ErrForbidden) {
			t.Errorf("gap %+v", g)
		}
	}
	if tr.Slowest() != -1 {
		t.Errorf("Slowest() = %d with no hop", tr.Slowest())
	}
}

// An order neither orders nor the relay knows is ErrNotFound.
func TestTraceUnknownOrder(t *testing.T) {
	c, _, _ := newClient(t, adminclient.Config{})
	tr, err := c.Trace(context.Background(), "no-such-order")
	if !errors.Is(err, adminclient.ErrNotFound) {
		t.Fatalf("error %v, want ErrNotFound", err)
	}
	if tr.OrderID != "no-such-order" || len(tr.Hops) != 0 {
		t.Errorf("trace %+v", tr)
	}
}

// A dead-lettered delivery, a quarantined event, an event routed to nobody and the order's
// mismatch are all reported.
func TestTraceProblems(t *testing.T) {
	c, stack, _ := newClient(t, adminclient.Config{})
	stack.Reply(topology.Notifications, "GET /admin/deadletters", 200, `{"dead_letters":[{"event_id":"`+adminclienttest.EventOrderConfirmed+
		`","event_type":"order.confirmed","source":"//spanmart/orders","attributes":{},"body":{},"attempts":5,"last_error":"smtp: 550","dead_at":"2026-03-01T10:00:04.39Z"}]}`)
	stack.Handle(topology.Relay, "GET /v1/outbox/events", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("aggregate_type") {
		case "shipment":
			io.WriteString(w, `{"events":[{"source":"fulfillment","event_id":"s1","type":"shipment.created","aggregate_type":"shipment","aggregate_id":"`+
				adminclienttest.ShipmentID+`","aggregate_version":1,"committed_at":"2026-03-01T10:00:01.44Z","published_at":"2026-03-01T10:00:01.45Z","quarantined":false,"subscribers":[]}]}`)
		case "order":
			io.WriteString(w, `{"events":[{"source":"orders","event_id":"`+adminclienttest.EventOrderConfirmed+`","type":"order.confirmed","aggregate_type":"order","aggregate_id":"`+
				adminclienttest.OrderID+`","aggregate_version":3,"committed_at":"2026-03-01T10:00:01.35Z","published_at":null,"quarantined":true,"subscribers":["notifications"]}]}`)
		default:
			io.WriteString(w, `{"events":[]}`)
		}
	})
	stack.Reply(topology.Orders, "GET /admin/reconciliation", 200, `{"configured":true,"checked":1,"partial":false,"mismatches":[{"order_id":"`+adminclienttest.OrderID+
		`","status":"CONFIRMED","since":"2026-03-01T10:00:01.35Z","check":"confirmed","problems":["no payment","no reservation"],"fulfillment":{"reservation":null},"gateway":{"payments":[]}}],`+
		`"flagged":[{"order_id":"`+adminclienttest.OrderID+`","since":"2026-03-01T10:00:01.35Z","attention_reason":"capture_failed","fulfillment":{"reservation":null},"gateway":{"payments":[]}}]}`)
	tr, err := c.Trace(context.Background(), adminclienttest.OrderID)
	if err != nil {
		t.Fatal(err)
	}
	want := []adminclient.Hop{
		{EventID: adminclienttest.EventOrderConfirmed, EventType: "order.confirmed", Source: "orders", AggregateType: "order", AggregateID: adminclienttest.OrderID,
			AggregateVersion: 3, CommittedAt: ts("2026-03-01T10:00:01.35Z"), Quarantined: true, Subscriber: "notifications",
			ProcessedAt: tp("2026-03-01T10:00:04.39Z"), EndToEnd: ms(3040), DeadLettered: true},
		{EventID: "s1", EventType: "shipment.created", Source: "fulfillment", AggregateType: "shipment", AggregateID: adminclienttest.ShipmentID,
			AggregateVersion: 1, CommittedAt: ts("2026-03-01T10:00:01.44Z"), PublishedAt: tp("2026-03-01T10:00:01.45Z"), PublishLatency: ms(10)},
	}
	if diff := cmp.Diff(want, tr.Hops); diff != "" {
		t.Errorf("hops (-want +got):\n%s", diff)
	}
	wantProblems := []adminclient.Problem{
		stuckProblem,
		{Service: "orders", Kind: adminclient.ProblemMismatch, Subject: adminclienttest.OrderID, Detail: "reconciliation mismatch (confirmed): no payment; no reservation"},
		{Service: "orders", Kind: adminclient.ProblemNeedsAttention, Subject: adminclienttest.OrderID, Detail: "needs attention: capture_failed"},
		{Service: "orders", Kind: adminclient.ProblemQuarantined, Subject: adminclienttest.EventOrderConfirmed, Detail: "event " + adminclienttest.EventOrderConfirmed + " (order.confirmed) is quarantined in the outbox"},
		{Service: "notifications", Kind: adminclient.ProblemDeadLetters, Subject: adminclienttest.EventOrderConfirmed, Detail: "dead-lettered event " + adminclienttest.EventOrderConfirmed + " (order.confirmed)"},
	}
	if diff := cmp.Diff(wantProblems, tr.Problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

func TestOverview(t *testing.T) {
	ctx := context.Background()
	c, stack, _ := newClient(t, adminclient.Config{})
	ov := c.Overview(ctx, adminclient.OverviewOptions{})
	want := []adminclient.Problem{
		{Service: "gateway-abstraction", Kind: adminclient.ProblemQuarantined, Detail: "1 quarantined event(s) in the outbox, waiting for a replay"},
		{Service: "gateway-abstraction", Kind: adminclient.ProblemPendingAge, Detail: "1 pending event(s), the oldest unpublished for 7m1s (over 5m0s)"},
		{Service: "fulfillment", Kind: adminclient.ProblemDeadLetters, Detail: "2 dead letter(s) not replayed"},
		{Service: "fulfillment", Kind: adminclient.ProblemFailing, Detail: "1 event(s) failing (answered with an error, not applied yet)"},
	}
	if diff := cmp.Diff(want, ov.Problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	if ov.Relay == nil || len(ov.Relay.Sources) != 4 || len(ov.Consumers) != 4 || len(ov.Gaps) != 0 {
		t.Errorf("overview %+v", ov)
	}
	var names []string
	for _, st := range ov.Consumers {
		names = append(names, st.Consumer)
	}
	if diff := cmp.Diff([]string{"orders", "fulfillment", "gateway-abstraction", "notifications"}, names); diff != "" {
		t.Errorf("consumers, in roster order (-want +got):\n%s", diff)
	}

	if got := c.Overview(ctx, adminclient.OverviewOptions{MaxPendingAge: 10 * time.Minute}).Problems; len(got) != 3 {
		t.Errorf("with a 10m MaxPendingAge: %+v, want the pending age left out", got)
	}

	stack.Down(topology.Notifications)
	stack.Refuse(topology.Relay, "GET /v1/outbox", 401)
	ov = c.Overview(ctx, adminclient.OverviewOptions{})
	if ov.Relay != nil || len(ov.Consumers) != 3 || len(ov.Gaps) != 2 {
		t.Fatalf("overview %+v", ov)
	}
	if g := ov.Gaps[0]; g.Service != topology.Notifications || g.What != "consumer status" || g.Refused() {
		t.Errorf("gap %+v", g)
	}
	if g := ov.Gaps[1]; g.Service != topology.Relay || !g.Refused() || !errors.Is(g.Err, adminclient.ErrUnauthenticated) {
		t.Errorf("gap %+v", g)
	}
}
