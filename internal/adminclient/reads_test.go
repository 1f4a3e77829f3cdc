package adminclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/internal/adminclient"
	"github.com/spanmart/spanmart/internal/adminclient/adminclienttest"
	"github.com/spanmart/spanmart/internal/topology"
	"github.com/spanmart/spanmart/pkg/outboxlib/outboxapi"
	fulfillmentapi "github.com/spanmart/spanmart/services/fulfillment/api"
	gatewayapi "github.com/spanmart/spanmart/services/gateway-abstraction/api"
	notificationsapi "github.com/spanmart/spanmart/services/notifications/api"
	ordersapi "github.com/spanmart/spanmart/services/orders/api"
)

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

func tp(s string) *time.Time {
	t := ts(s)
	return &t
}

// The scenario's answers, hand-written JSON in adminclienttest, have the shapes the servers write:
// each decodes into the server's wire type (services/*/api for the services' own routes,
// pkg/outboxlib/outboxapi for the relay's and the consumers') with no unknown member, and has
// every member the type always writes. (The fake gateway's sweep lacked refunds_pending while the
// client's own copy of the type did; the fake relay's sources lacked publish_lag_seconds.)
func TestScenarioWritesTheServicesShapes(t *testing.T) {
	stack := adminclienttest.Start(t)
	stack.Scenario()
	ofOrder := "?order_id=" + adminclienttest.OrderID
	var processed string // an event fulfillment processed
	for _, h := range adminclienttest.Hops {
		if h.Subscriber == topology.Fulfillment && h.ProcessedAt != "" {
			processed = h.EventID
			break
		}
	}
	replay := `{"reason":"the cause is fixed"}`
	for _, tt := range []struct {
		service, method, path string
		into                  any
		body                  string
	}{
		{service: topology.Relay, method: http.MethodGet, path: outboxapi.PathOutbox, into: &outboxapi.OutboxStatus{}},
		{service: topology.Relay, method: http.MethodGet, path: outboxapi.PathQuarantined, into: &outboxapi.EventList{}},
		{service: topology.Relay, method: http.MethodGet, path: outboxapi.PathOutboxEvents + "?aggregate_type=order&aggregate_id=" + adminclienttest.OrderID,
			into: &outboxapi.EventList{}},
		{service: topology.Relay, method: http.MethodPost, path: outboxapi.PathOutbox + "/" + topology.Gateway + "/events/" + adminclienttest.EventQuarantined + "/replay",
			into: &outboxapi.Replay{}, body: replay},
		{service: topology.Relay, method: http.MethodGet, path: outboxapi.PathLedger, into: &outboxapi.LedgerList{}},
		{service: topology.Relay, method: http.MethodPost, path: outboxapi.PathLedgerAudit, into: &outboxapi.AuditList{}},
		{service: topology.Fulfillment, method: http.MethodGet, path: outboxapi.PathStatus, into: &outboxapi.ConsumerStatus{}},
		{service: topology.Fulfillment, method: http.MethodGet, path: outboxapi.PathDeadLetters + "?all=true", into: &outboxapi.DeadLetterList{}},
		{service: topology.Fulfillment, method: http.MethodPost, path: outboxapi.PathDeadLetters + "/" + adminclienttest.DeadLetterSKU1 + "/replay",
			into: &outboxapi.ReplayOutcome{}, body: replay},
		{service: topology.Fulfillment, method: http.MethodGet, path: outboxapi.PathProcessed + "?event_id=" + processed, into: &outboxapi.ProcessedList{}},
		{service: topology.Orders, method: http.MethodGet, path: ordersapi.PathAdminOrders + "/" + adminclienttest.OrderID, into: &ordersapi.Order{}},
		{service: topology.Orders, method: http.MethodGet, path: ordersapi.PathStuckOrders, into: &ordersapi.StuckReport{}},
		{service: topology.Orders, method: http.MethodGet, path: ordersapi.PathReconciliation, into: &ordersapi.Reconciliation{}},
		{service: topology.Orders, method: http.MethodPost, path: ordersapi.PathAudit, into: &ordersapi.AuditReport{}},
		{service: topology.Fulfillment, method: http.MethodGet, path: fulfillmentapi.PathReservations + "/" + adminclienttest.OrderID, into: &fulfillmentapi.Reservation{}},
		{service: topology.Fulfillment, method: http.MethodGet, path: fulfillmentapi.PathShipments + ofOrder, into: &fulfillmentapi.ShipmentList{}},
		{service: topology.Gateway, method: http.MethodGet, path: gatewayapi.PathPayments + ofOrder, into: &gatewayapi.PaymentList{}},
		{service: topology.Gateway, method: http.MethodPost, path: gatewayapi.PathSweep, into: &gatewayapi.Sweep{}},
		{service: topology.Notifications, method: http.MethodGet, path: notificationsapi.PathNotifications + ofOrder, into: &notificationsapi.NotificationList{}},
		{service: topology.Notifications, method: http.MethodPost, path: notificationsapi.PathSweep, into: &notificationsapi.Sweep{}},
	} {
		t.Run(tt.service+" "+tt.method+" "+tt.path, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, stack.URL(tt.service)+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode/100 != 2 {
				t.Fatalf("%d %s, %v", resp.StatusCode, body, err)
			}
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(tt.into); err != nil {
				t.Fatalf("the answer does not decode into %T: %v", tt.into, err)
			}
			written, err := json.Marshal(tt.into)
			if err != nil {
				t.Fatal(err)
			}
			var want, got any
			if err := json.Unmarshal(written, &want); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			if missing := missingMembers(want, got, ""); len(missing) > 0 {
				t.Errorf("the answer lacks %v, which %T always writes", missing, tt.into)
			}
		})
	}
}

// missingMembers lists, by JSON path, the object members in want that got lacks.
func missingMembers(want, got any, path string) []string {
	var out []string
	switch w := want.(type) {
	case map[string]any:
		g, _ := got.(map[string]any)
		for k, v := range w {
			if gv, ok := g[k]; ok {
				out = append(out, missingMembers(v, gv, path+"."+k)...)
			} else {
				out = append(out, path+"."+k)
			}
		}
	case []any:
		g, _ := got.([]any)
		for i := range min(len(w), len(g)) {
			out = append(out, missingMembers(w[i], g[i], fmt.Sprintf("%s[%d]", path, i))...)
		}
	}
	sort.Strings(out)
	return out
}

// The reads decode the services' answers (the scenario's, in the services' shapes).
func TestReads(t *testing.T) {
	ctx := context.Background()
	c, stack, _ := newClient(t, adminclient.Config{})

	t.Run("outbox status", func(t *testing.T) {
		st, err := c.OutboxStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Owner != "relay-00001-abc/7f3e" || len(st.Sources) != 4 {
			t.Fatalf("got %+v", st)
		}
		g := st.Sources[2]
		if g.Source != topology.Gateway || g.Pending != 1 || g.Quarantined != 1 || g.OldestPendingAge() != 420500*time.Millisecond ||
			len(g.Shards) != 16 || g.LiveShards() != 16 || !g.Shards[3].ExpiresAt.Equal(ts("2026-03-03T11:00:20Z")) {
			t.Errorf("gateway's source: %+v", g)
		}
	})
	t.Run("quarantined", func(t *testing.T) {
		evs, err := c.Quarantined(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := []adminclient.QuarantinedEvent{{Source: topology.Gateway, EventID: adminclienttest.EventQuarantined, Type: "payment.voided",
			AggregateType: "payment", AggregateID: adminclienttest.OtherPayment, AggregateVersion: 3, Quarantined: true, Attempts: 12, Subscribers: []string{"orders"},
			LastError: "create task: rpc error: code = InvalidArgument desc = Task size too large", CommittedAt: ts("2026-03-03T10:53:00Z"),
			Payload: json.RawMessage(`{"payment_id":"` + adminclienttest.OtherPayment + `","order_id":"` + adminclienttest.OtherOrderID +
				`","method":"card","provider":"stripe","status":"VOIDED","amount_minor":1200,"currency":"JPY"}`)}}
		if diff := cmp.Diff(want, evs); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("aggregate events", func(t *testing.T) {
		evs, err := c.AggregateEvents(ctx, "order", adminclienttest.OrderID)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 3 || evs[2].Type != "order.confirmed" || !evs[2].PublishedAt.Equal(ts("2026-03-01T10:00:01.39Z")) ||
			!cmp.Equal(evs[2].Subscribers, []string{topology.Fulfillment, topology.Notifications}) {
			t.Errorf("got %+v", evs)
		}
		q := stack.Requests(topology.Relay)[len(stack.Requests(topology.Relay))-1].Query
		if q.Get("aggregate_type") != "order" || q.Get("aggregate_id") != adminclienttest.OrderID {
			t.Errorf("query %v", q)
		}
	})
	t.Run("consumer status", func(t *testing.T) {
		st, err := c.ConsumerStatus(ctx, topology.Fulfillment)
		if err != nil {
			t.Fatal(err)
		}
		want := adminclient.ConsumerStatus{Consumer: topology.Fulfillment, DeadLetters: 2, Failing: 1, Since: ts("2026-03-03T08:00:00Z"),
			Events: adminclient.EventCounts{Applied: 412, Duplicate: 3, Early: 3, Transient: 1, DeadLettered: 2},
			Lag:    adminclient.LagSummary{Count: 412, P50: 0.048, P99: 0.31}}
		if diff := cmp.Diff(want, st); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("dead letters", func(t *testing.T) {
		open, err := c.DeadLetters(ctx, topology.Fulfillment, adminclient.DeadLetterQuery{})
		if err != nil {
			t.Fatal(err)
		}
		all, err := c.DeadLetters(ctx, topology.Fulfillment, adminclient.DeadLetterQuery{All: true, Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		if len(open) != 2 || len(all) != 3 || open[0].EventID != adminclienttest.DeadLetterSKU2 || open[0].Replayed() || !all[2].Replayed() {
			t.Fatalf("open %+v\nall %+v", open, all)
		}
		d := open[1]
		if d.EventType != "order.created" || d.Source != "//spanmart/orders" || d.Attempts != 1 || d.LastError != `permanent: inventory: unknown sku "Z9"` ||
			d.Attributes["ce-type"] != "order.created" || !json.Valid(d.Body) || !d.DeadAt.Equal(ts("2026-03-03T09:10:00Z")) {
			t.Errorf("dead letter %+v", d)
		}
		reqs := stack.Requests(topology.Fulfillment)
		if q := reqs[len(reqs)-1].Query; q.Get("all") != "true" || q.Get("limit") != "50" {
			t.Errorf("query %v", q)
		}
		if q := reqs[len(reqs)-2].Query; len(q) != 0 {
			t.Errorf("query %v, want none", q)
		}
	})
	t.Run("one dead letter", func(t *testing.T) {
		d, err := c.DeadLetter(ctx, topology.Fulfillment, adminclienttest.DeadLetterReplayed)
		if err != nil {
			t.Fatal(err)
		}
		if d.ReplayReason != "catalog fixed" || d.ReplayedBy != "operator@spanmart-local.iam.gserviceaccount.com" || !d.ReplayedAt.Equal(ts("2026-03-02T09:30:00Z")) {
			t.Errorf("got %+v", d)
		}
		_, err = c.DeadLetter(ctx, topology.Fulfillment, "no-such-event")
		if !errors.Is(err, adminclient.ErrNotFound) {
			t.Errorf("unknown dead letter: %v, want ErrNotFound", err)
		}
	})
	t.Run("replays", func(t *testing.T) {
		r, err := c.ReplayDeadLetter(ctx, topology.Fulfillment, adminclienttest.DeadLetterSKU1, "catalog fixed")
		if err != nil {
			t.Fatal(err)
		}
		if want := (adminclient.DeadLetterReplay{Consumer: topology.Fulfillment, EventID: adminclienttest.DeadLetterSKU1, Outcome: "applied"}); r != want {
			t.Errorf("got %+v, want %+v", r, want)
		}
		o, err := c.ReplayOutboxEvent(ctx, topology.Gateway, adminclienttest.EventQuarantined, "task size fixed")
		if err != nil {
			t.Fatal(err)
		}
		if want := (adminclient.OutboxReplay{Source: topology.Gateway, EventID: adminclienttest.EventQuarantined, Status: "replayed"}); o != want {
			t.Errorf("got %+v, want %+v", o, want)
		}
		posts := stack.Posts(topology.Relay, "/v1/outbox/gateway-abstraction/events/"+adminclienttest.EventQuarantined+"/replay")
		if len(posts) != 1 || posts[0].Body != `{"reason":"task size fixed"}` {
			t.Errorf("relay replays %+v", posts)
		}
	})
	t.Run("processed, in pages of 100", func(t *testing.T) {
		ids := []string{adminclienttest.EventOrderCreated, adminclienttest.EventOrderConfirmed}
		for i := range 150 {
			ids = append(ids, fmt.Sprintf("unknown-%03d", i))
		}
		ids = append(ids, adminclienttest.EventOrderCreated) // twice: asked once
		before := len(stack.Requests(topology.Notifications))
		got, err := c.Processed(ctx, topology.Notifications, ids)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]time.Time{adminclienttest.EventOrderCreated: ts("2026-03-01T10:00:00.15Z"), adminclienttest.EventOrderConfirmed: ts("2026-03-01T10:00:04.39Z")}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		reqs := stack.Requests(topology.Notifications)[before:]
		if len(reqs) != 2 || len(reqs[0].Query["event_id"]) != 100 || len(reqs[1].Query["event_id"]) != 52 {
			t.Errorf("%d requests, want 2 of 100 and 52 ids", len(reqs))
		}
	})
	t.Run("order", func(t *testing.T) {
		o, err := c.Order(ctx, adminclienttest.OrderID)
		if err != nil {
			t.Fatal(err)
		}
		if o.Status != "CONFIRMED" || o.Version != 3 || o.Payment.Method != "card" || len(o.Timeline) != 5 ||
			o.Timeline[3] != (adminclient.TimelineEntry{Seq: 4, Direction: "consumed", EventType: "payment.authorized", EventID: adminclienttest.EventPaymentAuthorized,
				AggregateType: "payment", AggregateVersion: 1, At: ts("2026-03-01T10:00:01.35Z")}) {
			t.Errorf("got %+v", o)
		}
	})
	t.Run("audit", func(t *testing.T) {
		stuck, err := c.StuckOrders(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := adminclient.StuckOrder{OrderID: adminclienttest.OrderID, CustomerID: "ali", Status: "CONFIRMED", Since: ts("2026-03-01T10:00:01.35Z"),
			For: "48h59m58s", ForSeconds: 176398, WaitingFor: "shipment"}
		if len(stuck.Orders) != 1 || !cmp.Equal(want, stuck.Orders[0]) || stuck.Counts["CONFIRMED"] != 1 || stuck.StuckAfter["CONFIRMED"] != "48h0m0s" {
			t.Errorf("stuck %+v", stuck)
		}
		rec, err := c.Reconciliation(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held := "HELD"
		wantM := adminclient.Mismatch{OrderID: adminclienttest.OtherOrderID, Status: "CANCELLED", Since: ts("2026-03-03T10:50:00Z"), Check: "cancelled",
			Problems: []string{"fulfillment still holds the stock (HELD)"}, Fulfillment: adminclient.PeerFulfillment{Reservation: &held},
			Gateway: adminclient.PeerGateway{Payments: []adminclient.PeerPayment{{ID: adminclienttest.OtherPayment, Status: "VOIDED"}}}}
		if !rec.Configured || rec.Checked != 12 || rec.Partial || len(rec.Mismatches) != 1 || !cmp.Equal(wantM, rec.Mismatches[0]) {
			t.Errorf("reconciliation %+v", rec)
		}
		rep, err := c.Audit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(adminclient.AuditReport{Stuck: stuck, Reconciliation: rec}, rep); diff != "" {
			t.Errorf("audit (-want +got):\n%s", diff)
		}
		if len(stack.Posts(topology.Orders, "/admin/audit")) != 1 {
			t.Error("the audit is not a POST")
		}
	})
	t.Run("an unconfigured reconciliation", func(t *testing.T) {
		stack.Reply(topology.Orders, "GET /admin/reconciliation", 200, `{"configured":false,"detail":"no peers to compare with: FULFILLMENT_URL and GATEWAY_URL are not set"}`)
		rec, err := c.Reconciliation(ctx)
		if err != nil || rec.Configured || rec.Detail == "" {
			t.Errorf("got %+v, %v", rec, err)
		}
	})
	t.Run("peers", func(t *testing.T) {
		ps, err := c.Payments(ctx, adminclienttest.OrderID)
		if err != nil || len(ps) != 1 || ps[0].ID != adminclienttest.PaymentID || ps[0].Status != "AUTHORIZED" || ps[0].Provider != "stripe" {
			t.Errorf("payments %+v, %v", ps, err)
		}
		ns, err := c.Notifications(ctx, adminclienttest.OrderID)
		if err != nil || len(ns) != 1 || ns[0].Status != "SENT" || !ns[0].SentAt.Equal(ts("2026-03-01T10:00:00.4Z")) {
			t.Errorf("notifications %+v, %v", ns, err)
		}
		ss, err := c.Shipments(ctx, adminclienttest.OrderID)
		if err != nil || len(ss) != 1 || ss[0].ShipmentID != adminclienttest.ShipmentID || ss[0].Carrier != nil || ss[0].ShippedAt != nil || ss[0].ShippedBy != nil {
			t.Errorf("shipments %+v, %v", ss, err)
		}
		r, err := c.Reservation(ctx, adminclienttest.OrderID)
		if err != nil || r.Status != "HELD" || len(r.Lines) != 1 {
			t.Errorf("reservation %+v, %v", r, err)
		}
		if _, err := c.Reservation(ctx, adminclienttest.OtherOrderID); !errors.Is(err, adminclient.ErrNotFound) {
			t.Errorf("no reservation: %v, want ErrNotFound", err)
		}
		none, err := c.Payments(ctx, adminclienttest.OtherOrderID)
		if err != nil || none == nil || len(none) != 0 {
			t.Errorf("payments of an unknown order %#v, %v: want an empty list", none, err)
		}
		sw, err := c.SweepPayments(ctx)
		if err != nil || sw.Checked != 1 || sw.RefundsPending != 1 {
			t.Errorf("gateway sweep %+v, %v", sw, err)
		}
		nsw, err := c.SweepNotifications(ctx)
		if err != nil || nsw.Failures == nil {
			t.Errorf("notifications sweep %+v, %v", nsw, err)
		}
	})
	t.Run("ledger", func(t *testing.T) {
		srcs, err := c.Ledger(ctx, false)
		if err != nil || len(srcs) != 4 || len(srcs[2].Missing) != 1 || srcs[2].Missing[0].Subscriber != topology.Orders {
			t.Errorf("ledger %+v, %v", srcs, err)
		}
		audits, err := c.AuditLedger(ctx)
		if err != nil || len(audits) != 1 || audits[0].Unconfirmed[topology.Fulfillment].Count != 1 || audits[0].Errors[topology.Notifications] == "" {
			t.Errorf("ledger audit %+v, %v", audits, err)
		}
		if len(stack.Posts(topology.Relay, "/v1/ledger/audit")) != 1 {
			t.Error("the ledger audit is not a POST")
		}
	})
}
