package consoletest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spanmart/spanmart/internal/adminclient"
	"github.com/spanmart/spanmart/internal/adminclient/adminclienttest"
	"github.com/spanmart/spanmart/internal/topology"
)

// Ids of the scenario.
const (
	OrderID    = "0b0c6f2e-5d1a-4c8e-9f3b-2a7d4e6c8b10"
	CustomerID = "cust-4711"
	ShipmentID = "5e8f1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b"
	PaymentID  = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"

	// StuckOrderID and StuckCustomerID: a stuck order (a konbini slip not paid yet) and its customer.
	StuckOrderID     = "7c1d9e40-2b3a-4f5e-9d8c-6b5a4e3d2c1b"
	StuckCustomerID  = "cust-0815"
	CancellingID     = "3f2a8b1c-9d0e-4a7b-8c6d-5e4f3a2b1c0d"
	MismatchOrderID  = "e4d3c2b1-a0f9-4e8d-9c7b-6a5f4e3d2c1b"
	AttentionOrderID = "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"

	// QuarantinedID is orders' quarantined outbox event.
	QuarantinedID = "c0ffee00-1111-4222-8333-444455556666"
	// StockDeadLetters are fulfillment's two dead letters, whose errors normalize alike.
	StockDeadLetter1 = "d1e2a3d4-0001-4b5c-8d6e-7f8091a2b3c4"
	StockDeadLetter2 = "d1e2a3d4-0002-4b5c-8d6e-7f8091a2b3c4"
	// UnknownTypeDeadLetter is notifications' dead letter of an event type it has no handler for.
	UnknownTypeDeadLetter = "d1e2a3d4-0003-4b5c-8d6e-7f8091a2b3c4"

	// RelayOwner is the relay instance holding every shard.
	RelayOwner = "relay-00042-7f3a"
)

// Scenario is what Install put on the fakes.
type Scenario struct {
	Now time.Time
	// Events are the traced order's events, by commit time, and Processed when each subscriber
	// applied each (event id → subscriber → time).
	Events    []adminclient.OutboxEvent
	Processed map[string]map[string]time.Time
	// SlowestEvent and SlowestSubscriber are the trace's slowest delivery end to end.
	SlowestEvent, SlowestSubscriber string
}

// Install makes the fakes answer as a small live system would, as of now: an order traced
// through every service (one slow e-mail delivery), orders' outbox with a quarantined event,
// fulfillment with two dead letters of one cause and notifications with one of another, two
// stuck orders, a mismatch and an order that needs attention. Every replay route of the
// scenario's failed messages answers success.
func Install(st *adminclienttest.Stack, now time.Time) *Scenario {
	sc := &Scenario{Now: now.UTC(), Processed: map[string]map[string]time.Time{}}
	at := func(d time.Duration) time.Time { return sc.Now.Add(-d) }

	st.Reply(topology.Relay, "GET /v1/outbox", http.StatusOK, mustJSON(adminclient.OutboxStatus{
		Owner: RelayOwner,
		Sources: []adminclient.SourceStatus{
			source("orders", "orders", 2, 1.8, 1, RelayOwner, now),
			source("fulfillment", "fulfillment", 0, 0, 0, RelayOwner, now),
			source(topology.Gateway, "payments", 1, 0.4, 0, RelayOwner, now),
			source("notifications", "notifications", 0, 0, 0, RelayOwner, now),
		},
	}))
	status := func(name string, dead, failing, early, applied int64, p50, p99 float64) {
		st.Reply(name, "GET /admin/status", http.StatusOK, mustJSON(adminclient.ConsumerStatus{
			Consumer: name, DeadLetters: dead, Failing: failing, Since: at(3 * time.Hour),
			Events: adminclient.EventCounts{Applied: applied, Duplicate: applied / 20, Early: early, DeadLettered: dead},
			Lag:    adminclient.LagSummary{Count: applied, P50: p50, P99: p99},
		}))
	}
	status(topology.Orders, 0, 0, 3, 412, 0.041, 0.220)
	status(topology.Fulfillment, 2, 1, 0, 230, 0.035, 0.180)
	status(topology.Gateway, 0, 0, 1, 188, 0.052, 0.410)
	status(topology.Notifications, 1, 0, 0, 305, 0.061, 2.450)

	st.Reply(topology.Relay, "GET /v1/outbox/quarantined", http.StatusOK, mustJSON(map[string]any{"events": []adminclient.QuarantinedEvent{{
		Source: topology.Orders, EventID: QuarantinedID, Type: "order.confirmed", AggregateType: "order",
		AggregateID: CancellingID, AggregateVersion: 3, Attempts: 12,
		LastError:   "create task fulfillment-inbox/8f0e2c1d9b7a6f5e4d3c2b1a: rpc error: code = InvalidArgument desc = task size 104857 exceeds 102400 bytes",
		CommittedAt: at(75 * time.Minute), Payload: json.RawMessage(`{"order_id":"` + CancellingID + `","total_minor":12800,"currency":"JPY","note":"<script>alert(1)</script>"}`),
	}}}))
	deadLetter := func(id, typ, source, aggType, aggID, errText string, attempts int64, deadAgo time.Duration, body string) adminclient.DeadLetter {
		return adminclient.DeadLetter{
			EventID: id, EventType: typ, Source: "//spanmart/" + source, Attempts: attempts, LastError: errText, DeadAt: at(deadAgo),
			Attributes: map[string]string{
				"Ce-Id": id, "Ce-Type": typ, "Ce-Subject": aggID, "Ce-Aggregatetype": aggType, "Ce-Aggregateversion": "1",
				"Ce-Committime": at(deadAgo + 12*time.Minute).Format(time.RFC3339Nano),
			},
			Body: json.RawMessage(body),
		}
	}
	st.Reply(topology.Fulfillment, "GET /admin/deadletters", http.StatusOK, mustJSON(map[string]any{"dead_letters": []adminclient.DeadLetter{
		deadLetter(StockDeadLetter1, "order.created", "orders", "order", "11111111-2222-4333-8444-555555555555",
			`reserve order 11111111-2222-4333-8444-555555555555: sku "TEE-M" unknown to inventory (catalog version 41)`, 20, 20*time.Minute,
			`{"order_id":"11111111-2222-4333-8444-555555555555","lines":[{"sku":"TEE-M","quantity":2}]}`),
		deadLetter(StockDeadLetter2, "order.created", "orders", "order", "66666666-7777-4888-8999-aaaaaaaaaaaa",
			`reserve order 66666666-7777-4888-8999-aaaaaaaaaaaa: sku "TEE-M" unknown to inventory (catalog version 42)`, 20, 8*time.Minute,
			`{"order_id":"66666666-7777-4888-8999-aaaaaaaaaaaa","lines":[{"sku":"TEE-M","quantity":1}]}`),
	}}))
	st.Reply(topology.Notifications, "GET /admin/deadletters", http.StatusOK, mustJSON(map[string]any{"dead_letters": []adminclient.DeadLetter{
		deadLetter(UnknownTypeDeadLetter, "order.gift_wrapped", "orders", "order", OrderID,
			`unknown_type: consumer notifications has no handler for "order.gift_wrapped"`, 1, 40*time.Minute, `{"order_id":"`+OrderID+`","wrap":"kraft"}`),
	}}))
	st.Reply(topology.Orders, "GET /admin/deadletters", http.StatusOK, `{"dead_letters":[]}`)
	st.Reply(topology.Gateway, "GET /admin/deadletters", http.StatusOK, `{"dead_letters":[]}`)

	for _, id := range []string{StockDeadLetter1, StockDeadLetter2} {
		st.Reply(topology.Fulfillment, "POST /admin/deadletters/"+id+"/replay", http.StatusOK, `{"outcome":"applied"}`)
	}
	st.Reply(topology.Notifications, "POST /admin/deadletters/"+UnknownTypeDeadLetter+"/replay", http.StatusConflict,
		adminclienttest.Problem(http.StatusConflict, `outboxlib: no handler: consumer notifications has no handler for "order.gift_wrapped"`, ""))
	st.Reply(topology.Relay, "POST /v1/outbox/orders/events/"+QuarantinedID+"/replay", http.StatusAccepted,
		`{"source":"orders","event_id":"`+QuarantinedID+`","status":"replayed"}`)

	sc.installOrder(st, at)
	installStuck(st, sc.Now)
	return sc
}

func source(name, db string, pending int64, age float64, quarantined int64, owner string, now time.Time) adminclient.SourceStatus {
	s := adminclient.SourceStatus{Source: name, Database: "projects/spanmart-local/instances/dev/databases/" + db,
		Pending: pending, OldestPendingAgeSeconds: age, Quarantined: quarantined,
		PublishLag: adminclient.LagSummary{Count: 500, P50: 0.018, P99: 0.09}}
	exp := now.Add(8 * time.Second)
	for shard := range int64(16) {
		s.Shards = append(s.Shards, adminclient.ShardStatus{Shard: shard, Owner: owner, Epoch: 3, ExpiresAt: &exp, Live: true})
	}
	return s
}

// installOrder is the traced order: placed 30 minutes ago, completed; every event published
// within tens of milliseconds and applied soon after, except the shipping e-mail (2.4 s).
func (sc *Scenario) installOrder(st *adminclienttest.Stack, at func(time.Duration) time.Time) {
	type hop struct {
		sub   string
		after time.Duration // published → processed
	}
	type event struct {
		source, typ, aggType, aggID string
		version                     int64
		ago                         time.Duration // committed, before now
		publish                     time.Duration // committed → published
		hops                        []hop
	}
	ms := time.Millisecond
	events := []event{
		{topology.Orders, "order.created", "order", OrderID, 1, 30 * time.Minute, 18 * ms, []hop{{topology.Fulfillment, 42 * ms}, {topology.Notifications, 55 * ms}}},
		{topology.Fulfillment, "inventory.reserved", "reservation", OrderID, 1, 30*time.Minute - 200*ms, 21 * ms, []hop{{topology.Orders, 38 * ms}}},
		{topology.Orders, "order.awaiting_payment", "order", OrderID, 2, 30*time.Minute - 400*ms, 15 * ms, []hop{{topology.Gateway, 61 * ms}}},
		{topology.Gateway, "payment.authorized", "payment", PaymentID, 1, 29*time.Minute - 100*ms, 24 * ms, []hop{{topology.Orders, 44 * ms}}},
		{topology.Orders, "order.confirmed", "order", OrderID, 3, 29*time.Minute - 300*ms, 17 * ms, []hop{{topology.Fulfillment, 40 * ms}, {topology.Notifications, 72 * ms}}},
		{topology.Fulfillment, "shipment.shipped", "shipment", ShipmentID, 1, 12 * time.Minute, 19 * ms, []hop{{topology.Orders, 36 * ms}}},
		{topology.Orders, "order.shipped", "order", OrderID, 4, 12*time.Minute - 200*ms, 16 * ms, []hop{{topology.Gateway, 58 * ms}, {topology.Notifications, 2400 * ms}}},
		{topology.Gateway, "payment.captured", "payment", PaymentID, 2, 12*time.Minute - 500*ms, 22 * ms, []hop{{topology.Orders, 41 * ms}}},
		{topology.Orders, "order.completed", "order", OrderID, 5, 12*time.Minute - 700*ms, 14 * ms, []hop{{topology.Notifications, 63 * ms}}},
	}
	byAggregate := map[string][]adminclient.OutboxEvent{}
	var timeline []adminclient.TimelineEntry
	for i, e := range events {
		id := fmt.Sprintf("e%07d-0000-4000-8000-%012d", i+1, i+1)
		committed := at(e.ago)
		published := committed.Add(e.publish)
		ev := adminclient.OutboxEvent{Source: e.source, EventID: id, Type: e.typ, AggregateType: e.aggType, AggregateID: e.aggID,
			AggregateVersion: e.version, CommittedAt: committed, PublishedAt: &published}
		for _, h := range e.hops {
			ev.Subscribers = append(ev.Subscribers, h.sub)
			if sc.Processed[id] == nil {
				sc.Processed[id] = map[string]time.Time{}
			}
			sc.Processed[id][h.sub] = published.Add(h.after)
		}
		sc.Events = append(sc.Events, ev)
		byAggregate[e.aggType+"/"+e.aggID] = append(byAggregate[e.aggType+"/"+e.aggID], ev)
		dir := "consumed"
		if e.source == topology.Orders {
			dir = "emitted"
		}
		timeline = append(timeline, adminclient.TimelineEntry{Seq: int64(i + 1), Direction: dir, EventType: e.typ, EventID: id,
			AggregateType: e.aggType, AggregateVersion: e.version, At: committed})
	}
	sc.SlowestEvent, sc.SlowestSubscriber = sc.Events[6].EventID, topology.Notifications

	// The stuck order: placed 50 hours ago, waiting for its konbini slip to be paid.
	stuck := []adminclient.OutboxEvent{
		{Source: topology.Orders, EventID: "f0000001-0000-4000-8000-000000000001", Type: "order.created", AggregateType: "order",
			AggregateID: StuckOrderID, AggregateVersion: 1, CommittedAt: at(50 * time.Hour), Subscribers: []string{topology.Fulfillment, topology.Notifications}},
		{Source: topology.Orders, EventID: "f0000002-0000-4000-8000-000000000002", Type: "order.awaiting_payment", AggregateType: "order",
			AggregateID: StuckOrderID, AggregateVersion: 2, CommittedAt: at(50*time.Hour - time.Second), Subscribers: []string{topology.Gateway}},
	}
	for i := range stuck {
		p := stuck[i].CommittedAt.Add(20 * ms)
		stuck[i].PublishedAt = &p
		sc.Processed[stuck[i].EventID] = map[string]time.Time{}
		for _, sub := range stuck[i].Subscribers {
			sc.Processed[stuck[i].EventID][sub] = p.Add(50 * ms)
		}
	}
	byAggregate["order/"+StuckOrderID] = stuck
	st.Handle(topology.Orders, "GET /admin/orders/"+StuckOrderID, func(w http.ResponseWriter, r *http.Request) {
		reply(w, adminclient.Order{ID: StuckOrderID, CustomerID: StuckCustomerID, Status: "AWAITING_PAYMENT", Currency: "JPY", TotalMinor: 3200,
			Version: 2, Language: "ja", Payment: &adminclient.OrderPayment{Method: "konbini", Store: "lawson"},
			Lines: []adminclient.OrderLine{{SKU: "TEA-GREEN", Quantity: 1, UnitPriceMinor: 3200, LineTotalMinor: 3200}}})
	})

	st.Handle(topology.Relay, "GET /v1/outbox/events", func(w http.ResponseWriter, r *http.Request) {
		evs := byAggregate[r.URL.Query().Get("aggregate_type")+"/"+r.URL.Query().Get("aggregate_id")]
		if evs == nil {
			evs = []adminclient.OutboxEvent{}
		}
		reply(w, map[string]any{"events": evs})
	})
	for _, c := range topology.Consumers() {
		st.Handle(c.Name, "GET /admin/processed", func(w http.ResponseWriter, r *http.Request) {
			out := []map[string]any{}
			for _, id := range r.URL.Query()["event_id"] {
				if t, ok := sc.Processed[id][c.Name]; ok {
					out = append(out, map[string]any{"event_id": id, "processed_at": t})
				}
			}
			reply(w, map[string]any{"consumer": c.Name, "processed": out})
		})
	}
	carrier, tracking := "yamato", "4455-6677-8899"
	st.Handle(topology.Orders, "GET /admin/orders/"+OrderID, func(w http.ResponseWriter, r *http.Request) {
		reply(w, adminclient.Order{
			ID: OrderID, CustomerID: CustomerID, Status: "COMPLETED", Currency: "JPY", TotalMinor: 12800, Version: 5, Language: "en",
			Payment:  &adminclient.OrderPayment{Method: "card"},
			Shipment: &adminclient.OrderShipment{ShipmentID: ShipmentID, Carrier: carrier, TrackingNumber: tracking},
			Lines:    []adminclient.OrderLine{{SKU: "MUG-BLUE", Quantity: 2, UnitPriceMinor: 6400, LineTotalMinor: 12800}},
			Timeline: timeline,
		})
	})
	shipped := at(12 * time.Minute)
	st.Handle(topology.Fulfillment, "GET /v1/shipments", ofOrder("items", []adminclient.Shipment{{
		ShipmentID: ShipmentID, OrderID: OrderID, Status: "SHIPPED", Version: 1, Carrier: &carrier, TrackingNumber: &tracking,
		CreatedAt: at(29 * time.Minute), UpdatedAt: shipped, ShippedAt: &shipped,
	}}))
	st.Handle(topology.Gateway, "GET /admin/payments", ofOrder("payments", []adminclient.Payment{{
		ID: PaymentID, OrderID: OrderID, CustomerID: CustomerID, Method: "card", Provider: "stripe", Status: "CAPTURED",
		AmountMinor: 12800, Currency: "JPY", ProviderPaymentID: "pi_3QxYz0Spanmart", Version: 2,
	}}))
	sent := func(d time.Duration) *time.Time { t := at(d); return &t }
	st.Handle(topology.Notifications, "GET /admin/notifications", ofOrder("notifications", []adminclient.Notification{
		{EventID: sc.Events[4].EventID, EventType: "order.confirmed", Template: "order_confirmed", Language: "en", Subject: "Your order is confirmed",
			Status: "SENT", Attempts: 1, MessageID: "<" + sc.Events[4].EventID + ".order_confirmed@notifications.spanmart>", CreatedAt: at(29 * time.Minute), SentAt: sent(29 * time.Minute)},
		{EventID: sc.Events[6].EventID, EventType: "order.shipped", Template: "order_shipped", Language: "en", Subject: "Your order is on its way",
			Status: "SENT", Attempts: 2, MessageID: "<" + sc.Events[6].EventID + ".order_shipped@notifications.spanmart>", CreatedAt: at(12 * time.Minute), SentAt: sent(12*time.Minute - 2*time.Second)},
	}))
}

// installStuck is orders' audit: two stuck orders, a mismatch and an order that needs attention.
func installStuck(st *adminclienttest.Stack, now time.Time) {
	expires := now.Add(46 * time.Hour)
	st.Reply(topology.Orders, "GET /admin/stuck-orders", http.StatusOK, mustJSON(adminclient.StuckReport{
		CheckedAt:  now,
		StuckAfter: map[string]string{"PENDING": "5m0s", "AWAITING_PAYMENT": "30m0s", "CONFIRMED": "72h0m0s", "CANCELLING": "30m0s"},
		Counts:     map[string]int{"PENDING": 0, "AWAITING_PAYMENT": 1, "CONFIRMED": 0, "CANCELLING": 1},
		Truncated:  []string{},
		Orders: []adminclient.StuckOrder{
			{OrderID: StuckOrderID, CustomerID: StuckCustomerID, Status: "AWAITING_PAYMENT", Since: now.Add(-50 * time.Hour), For: "50h0m0s",
				ForSeconds: 180000, WaitingFor: "the konbini slip to be paid", SlipExpiresAt: &expires},
			{OrderID: CancellingID, CustomerID: CustomerID, Status: "CANCELLING", Since: now.Add(-75 * time.Minute), For: "1h15m0s",
				ForSeconds: 4500, WaitingFor: "compensations", PendingCompensations: []string{"payment"}, CancelReason: "customer"},
		},
	}))
	reserved, released := "HELD", "RELEASED"
	st.Reply(topology.Orders, "GET /admin/reconciliation", http.StatusOK, mustJSON(adminclient.Reconciliation{
		Configured: true, CheckedAt: now, Window: adminclient.Window{From: now.Add(-24 * time.Hour), To: now.Add(-2 * time.Minute)},
		Checked: 42,
		Mismatches: []adminclient.Mismatch{{OrderID: MismatchOrderID, Status: "CANCELLED", Since: now.Add(-3 * time.Hour), Check: "cancelled",
			Problems:    []string{"fulfillment still holds the reservation (HELD)"},
			Fulfillment: adminclient.PeerFulfillment{Reservation: &reserved},
			Gateway:     adminclient.PeerGateway{Payments: []adminclient.PeerPayment{{ID: "b1c2d3e4-0000-4000-8000-000000000001", Status: "VOIDED"}}}}},
		Flagged: []adminclient.Flagged{{OrderID: AttentionOrderID, Since: now.Add(-5 * time.Hour), AttentionReason: "payment_capture_failed_card_declined",
			Fulfillment: adminclient.PeerFulfillment{Reservation: &released},
			Gateway:     adminclient.PeerGateway{Payments: []adminclient.PeerPayment{{ID: "b1c2d3e4-0000-4000-8000-000000000002", Status: "CAPTURE_FAILED"}}}}},
	}))
}

// mustJSON encodes v without escaping <, > and &, so that the payloads reach the console as a
// service could send them, and the console's escaping is what keeps them inert.
func mustJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return b.String()
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, mustJSON(v))
}

// ofOrder answers v for the scenario's order and an empty list (under key) for any other.
func ofOrder(key string, v any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("order_id") != OrderID {
			reply(w, map[string]any{key: []any{}})
			return
		}
		reply(w, map[string]any{key: v})
	}
}
