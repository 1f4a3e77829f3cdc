package adminclienttest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/spanmart/spanmart/internal/topology"
)

// The scenario's identifiers.
const (
	// OrderID is a card order, CONFIRMED (stuck: waiting for its shipment), traced through five
	// events (hops below).
	OrderID      = "0b0c6f4e-3c1a-4c8e-9a55-6f7d2a1b9e01"
	ShipmentID   = "5f0e6c1d-2b3a-4c9d-8e7f-6a5b4c3d2e1f" // its shipment, PENDING at fulfillment
	PaymentID    = "9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d" // its payment, AUTHORIZED at the gateway
	OtherOrderID = "7d1e2f3a-4b5c-4d6e-8f90-a1b2c3d4e5f6" // a cancelled order the reconciliation flags
	OtherPayment = "3c2b1a09-8f7e-4d6c-9b5a-493827161504" // its payment

	EventOrderCreated      = "e1000000-0000-4000-8000-000000000001"
	EventInventoryReserved = "e1000000-0000-4000-8000-000000000002"
	EventAwaitingPayment   = "e1000000-0000-4000-8000-000000000003"
	EventPaymentAuthorized = "e1000000-0000-4000-8000-000000000004"
	EventOrderConfirmed    = "e1000000-0000-4000-8000-000000000005"
	// EventQuarantined is the gateway's quarantined payment.voided of OtherOrderID.
	EventQuarantined = "e1000000-0000-4000-8000-000000000006"

	// DeadLetterSKU1 and DeadLetterSKU2 are fulfillment's unreplayed dead letters, both with a
	// last error containing DeadLetterGroup; DeadLetterReplayed is a third, replayed (listed
	// with all=true only).
	DeadLetterSKU1     = "d1000000-0000-4000-8000-000000000001"
	DeadLetterSKU2     = "d1000000-0000-4000-8000-000000000002"
	DeadLetterReplayed = "d1000000-0000-4000-8000-000000000003"
	DeadLetterGroup    = "unknown sku"
)

// Hop is one delivery of the scenario's trace, as Scenario serves it: the event's times and the
// subscriber's processed time ("" when it has not processed the event).
type Hop struct {
	EventID, Type, Source, AggregateType, AggregateID string
	Version                                           int64
	CommittedAt, PublishedAt                          string
	Subscriber, ProcessedAt                           string
}

// Hops are the deliveries of OrderID's trace, in commit order. The slowest (end to end) is
// order.confirmed's to notifications: 3.04 s.
var Hops = []Hop{
	{EventOrderCreated, "order.created", topology.Orders, "order", OrderID, 1, "2026-03-01T10:00:00Z", "2026-03-01T10:00:00.04Z", topology.Fulfillment, "2026-03-01T10:00:00.09Z"},
	{EventOrderCreated, "order.created", topology.Orders, "order", OrderID, 1, "2026-03-01T10:00:00Z", "2026-03-01T10:00:00.04Z", topology.Notifications, "2026-03-01T10:00:00.15Z"},
	{EventInventoryReserved, "inventory.reserved", topology.Fulfillment, "reservation", OrderID, 1, "2026-03-01T10:00:00.09Z", "2026-03-01T10:00:00.12Z", topology.Orders, "2026-03-01T10:00:00.17Z"},
	{EventAwaitingPayment, "order.awaiting_payment", topology.Orders, "order", OrderID, 2, "2026-03-01T10:00:00.17Z", "2026-03-01T10:00:00.21Z", topology.Gateway, "2026-03-01T10:00:00.26Z"},
	{EventPaymentAuthorized, "payment.authorized", topology.Gateway, "payment", PaymentID, 1, "2026-03-01T10:00:01.26Z", "2026-03-01T10:00:01.3Z", topology.Orders, "2026-03-01T10:00:01.35Z"},
	{EventOrderConfirmed, "order.confirmed", topology.Orders, "order", OrderID, 3, "2026-03-01T10:00:01.35Z", "2026-03-01T10:00:01.39Z", topology.Fulfillment, "2026-03-01T10:00:01.44Z"},
	{EventOrderConfirmed, "order.confirmed", topology.Orders, "order", OrderID, 3, "2026-03-01T10:00:01.35Z", "2026-03-01T10:00:01.39Z", topology.Notifications, "2026-03-01T10:00:04.39Z"},
}

// Scenario installs answers on every route the client reads, in the shapes the services write
// (pkg/outboxlib, pkg/outboxlib/relay, relay/api.go, services/*/api):
//
//   - the relay: OutboxStatus with the gateway's source holding one quarantined event and one
//     pending for 7 minutes; the quarantined list; the events of OrderID's aggregates (Hops); the
//     replays (202); the ledger;
//   - the consumers: each one's status (fulfillment with 2 dead letters and 1 failing event), dead
//     letters (fulfillment's three), processed times (Hops), replays (200 applied);
//   - orders: OrderID (CONFIRMED, with its timeline), 404 for other orders; the stuck orders
//     (OrderID), the reconciliation (a mismatch of OtherOrderID), the audit (both);
//   - the gateway's payments, notifications' notifications and fulfillment's shipments and
//     reservation of OrderID.
func (s *Stack) Scenario() {
	s.relayScenario()
	for _, c := range topology.Consumers() {
		s.consumerScenario(c.Name)
	}
	s.ordersScenario()
	s.peersScenario()
}

func (s *Stack) relayScenario() {
	var sources []string
	for _, src := range []struct {
		name, db    string
		pending     int
		oldest      float64
		quarantined int
	}{
		{topology.Orders, "orders", 0, 0, 0},
		{topology.Fulfillment, "fulfillment", 0, 0, 0},
		{topology.Gateway, "payments", 1, 420.5, 1},
		{topology.Notifications, "notifications", 0, 0, 0},
	} {
		var shards []string
		for i := range 16 {
			shards = append(shards, fmt.Sprintf(`{"shard":%d,"owner":"relay-00001-abc/7f3e","epoch":4,"expires_at":"2026-03-03T11:00:20Z","live":true}`, i))
		}
		sources = append(sources, fmt.Sprintf(`{"source":%q,"database":"projects/spanmart/instances/main/databases/%s","pending":%d,"oldest_pending_age_seconds":%g,"quarantined":%d,"shards":[%s],`+
			`"publish_lag_seconds":{"count":412,"p50":0.021,"p99":0.12}}`,
			src.name, src.db, src.pending, src.oldest, src.quarantined, strings.Join(shards, ",")))
	}
	s.Reply(topology.Relay, "GET /v1/outbox", 200, `{"owner":"relay-00001-abc/7f3e","sources":[`+strings.Join(sources, ",")+`]}`)
	s.Reply(topology.Relay, "GET /v1/outbox/quarantined", 200, `{"events":[{"source":"gateway-abstraction","event_id":"`+EventQuarantined+
		`","type":"payment.voided","aggregate_type":"payment","aggregate_id":"`+OtherPayment+`","aggregate_version":3,`+
		`"committed_at":"2026-03-03T10:53:00Z","published_at":null,"quarantined":true,"attempts":12,`+
		`"last_error":"create task: rpc error: code = InvalidArgument desc = Task size too large","subscribers":["orders"],`+
		`"payload":{"payment_id":"`+OtherPayment+`","order_id":"`+OtherOrderID+`","method":"card","provider":"stripe","status":"VOIDED","amount_minor":1200,"currency":"JPY"}}]}`)
	s.Handle(topology.Relay, "GET /v1/outbox/events", func(w http.ResponseWriter, r *http.Request) {
		typ, id := r.URL.Query().Get("aggregate_type"), r.URL.Query().Get("aggregate_id")
		if typ == "" || id == "" {
			write(w, 400, Problem(400, "aggregate_type and aggregate_id are required", r.URL.Path))
			return
		}
		write(w, 200, `{"events":[`+strings.Join(eventsOf(typ, id), ",")+`]}`)
	})
	replayed := func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Reason string `json:"reason"`
		}
		if json.NewDecoder(r.Body).Decode(&body) != nil || strings.TrimSpace(body.Reason) == "" {
			write(w, 400, Problem(400, "reason is required", r.URL.Path))
			return
		}
		parts := strings.Split(r.URL.Path, "/") // /v1/outbox/{source}/events/{id}/replay
		write(w, 202, fmt.Sprintf(`{"source":%q,"event_id":%q,"status":"replayed"}`, parts[3], parts[5]))
	}
	s.Handle(topology.Relay, "POST /v1/outbox/"+topology.Gateway+"/events/"+EventQuarantined+"/replay", replayed)
	s.Reply(topology.Relay, "GET /v1/ledger", 200, `{"sources":[{"source":"orders","missing":[]},{"source":"fulfillment","missing":[]},`+
		`{"source":"gateway-abstraction","missing":[{"source":"gateway-abstraction","event_id":"`+EventPaymentAuthorized+`","subscriber":"orders",`+
		`"event_type":"payment.authorized","aggregate_id":"`+PaymentID+`","replay_generation":0,"published_at":"2026-03-01T10:00:01.3Z","detected_at":"2026-03-02T10:05:00Z"}]},`+
		`{"source":"notifications","missing":[]}]}`)
	s.Reply(topology.Relay, "POST /v1/ledger/audit", 200, `{"audits":[{"source":"orders","rows":3,"confirmed":5,"missing":0,`+
		`"unconfirmed":{"fulfillment":{"count":1,"oldest_age_seconds":12.5}},"errors":{"notifications":"status 503"}}]}`)
}

// eventsOf are the relay's answers for an aggregate: the scenario's events of it, in commit order.
func eventsOf(typ, id string) []string {
	out := []string{}
	seen := map[string]bool{}
	for _, h := range Hops {
		if h.AggregateType != typ || h.AggregateID != id || seen[h.EventID] {
			continue
		}
		seen[h.EventID] = true
		var subs []string
		for _, o := range Hops {
			if o.EventID == h.EventID {
				subs = append(subs, `"`+o.Subscriber+`"`)
			}
		}
		out = append(out, fmt.Sprintf(`{"source":%q,"event_id":%q,"type":%q,"aggregate_type":%q,"aggregate_id":%q,"aggregate_version":%d,`+
			`"committed_at":%q,"published_at":%q,"quarantined":false,"attempts":1,"subscribers":[%s]}`,
			h.Source, h.EventID, h.Type, h.AggregateType, h.AggregateID, h.Version, h.CommittedAt, h.PublishedAt, strings.Join(subs, ",")))
	}
	return out
}

func (s *Stack) consumerScenario(name string) {
	deadLetters, failing, early := 0, 0, 1
	if name == topology.Fulfillment {
		deadLetters, failing, early = 2, 1, 3
	}
	s.Reply(name, "GET /admin/status", 200, fmt.Sprintf(`{"consumer":%q,"dead_letters":%d,"failing":%d,"since":"2026-03-03T08:00:00Z",`+
		`"events":{"applied":412,"duplicate":3,"early":%d,"transient":%d,"dead_lettered":%d,"stale":0,"rejected":0},`+
		`"lag_seconds":{"count":412,"p50":0.048,"p99":0.31}}`, name, deadLetters, failing, early, failing, deadLetters))
	s.Handle(name, "GET /admin/deadletters", func(w http.ResponseWriter, r *http.Request) {
		list := []string{}
		if name == topology.Fulfillment {
			list = append(list, deadLetter(DeadLetterSKU2, "2026-03-03T09:12:00Z", `Z8`, ""), deadLetter(DeadLetterSKU1, "2026-03-03T09:10:00Z", `Z9`, ""))
			if r.URL.Query().Get("all") == "true" {
				list = append(list, deadLetter(DeadLetterReplayed, "2026-03-02T09:00:00Z", `Z7`,
					`,"replayed_at":"2026-03-02T09:30:00Z","replay_reason":"catalog fixed","replayed_by":"operator@spanmart-local.iam.gserviceaccount.com"`))
			}
		}
		write(w, 200, `{"dead_letters":[`+strings.Join(list, ",")+`]}`)
	})
	s.Handle(name, "GET /admin/processed", func(w http.ResponseWriter, r *http.Request) {
		ids := r.URL.Query()["event_id"]
		if len(ids) == 0 || len(ids) > 100 {
			write(w, 400, Problem(400, "between 1 and 100 event_id parameters are required", r.URL.Path))
			return
		}
		var processed []string
		for _, id := range ids {
			for _, h := range Hops {
				if h.EventID == id && h.Subscriber == name && h.ProcessedAt != "" {
					processed = append(processed, fmt.Sprintf(`{"event_id":%q,"processed_at":%q}`, id, h.ProcessedAt))
				}
			}
		}
		write(w, 200, fmt.Sprintf(`{"consumer":%q,"processed":[%s]}`, name, strings.Join(processed, ",")))
	})
	if name == topology.Fulfillment {
		for _, id := range []string{DeadLetterSKU1, DeadLetterSKU2} {
			s.Reply(name, "POST /admin/deadletters/"+id+"/replay", 200, `{"outcome":"applied"}`)
		}
		s.Reply(name, "POST /admin/deadletters/"+DeadLetterReplayed+"/replay", 409, Problem(409,
			"outboxlib: dead letter already replayed: "+DeadLetterReplayed+" at 2026-03-02T09:30:00Z by operator@spanmart-local.iam.gserviceaccount.com",
			"/admin/deadletters/"+DeadLetterReplayed+"/replay"))
	}
}

// deadLetter is a dead letter of an order.created that names an unknown SKU.
func deadLetter(id, at, sku, replay string) string {
	return fmt.Sprintf(`{"event_id":%q,"event_type":"order.created","source":"//spanmart/orders",`+
		`"attributes":{"ce-aggregatetype":"order","ce-aggregateversion":"1","ce-id":%q,"ce-source":"//spanmart/orders","ce-specversion":"1.0","ce-type":"order.created"},`+
		`"body":{"order_id":%q,"customer_id":"ali","status":"PENDING","currency":"JPY","total_minor":1200,"lines":[{"sku":%q,"quantity":1,"unit_price_minor":1200}]},`+
		`"attempts":1,"last_error":"permanent: inventory: unknown sku \"%s\"","dead_at":%q%s}`, id, id, OtherOrderID, sku, sku, at, replay)
}

func (s *Stack) ordersScenario() {
	order := `{"id":"` + OrderID + `","customer_id":"ali","email":"ali@example.com","status":"CONFIRMED","currency":"JPY","total_minor":2400,` +
		`"version":3,"cancel_reason":null,"language":"ja","payment":{"method":"card","payment_method":"pm_card_visa"},` +
		`"lines":[{"sku":"A1","quantity":2,"unit_price_minor":1200,"line_total_minor":2400}],"timeline":[` +
		`{"seq":1,"direction":"emitted","event_type":"order.created","event_id":"` + EventOrderCreated + `","aggregate_type":"order","aggregate_version":1,"at":"2026-03-01T10:00:00Z"},` +
		`{"seq":2,"direction":"consumed","event_type":"inventory.reserved","event_id":"` + EventInventoryReserved + `","aggregate_type":"reservation","aggregate_version":1,"at":"2026-03-01T10:00:00.17Z"},` +
		`{"seq":3,"direction":"emitted","event_type":"order.awaiting_payment","event_id":"` + EventAwaitingPayment + `","aggregate_type":"order","aggregate_version":2,"at":"2026-03-01T10:00:00.17Z"},` +
		`{"seq":4,"direction":"consumed","event_type":"payment.authorized","event_id":"` + EventPaymentAuthorized + `","aggregate_type":"payment","aggregate_version":1,"at":"2026-03-01T10:00:01.35Z"},` +
		`{"seq":5,"direction":"emitted","event_type":"order.confirmed","event_id":"` + EventOrderConfirmed + `","aggregate_type":"order","aggregate_version":3,"at":"2026-03-01T10:00:01.35Z"}]}`
	s.Handle(topology.Orders, "GET /admin/orders/"+OrderID, func(w http.ResponseWriter, r *http.Request) { write(w, 200, order) })
	stuck := `{"checked_at":"2026-03-03T11:00:00Z","stuck_after":{"AWAITING_PAYMENT":"1h0m0s","CANCELLING":"30m0s","CONFIRMED":"48h0m0s","PENDING":"5m0s","SHIPPED":"1h0m0s"},` +
		`"counts":{"AWAITING_PAYMENT":0,"CANCELLING":0,"CONFIRMED":1,"PENDING":0,"SHIPPED":0},"truncated":[],"orders":[` +
		`{"order_id":"` + OrderID + `","customer_id":"ali","status":"CONFIRMED","since":"2026-03-01T10:00:01.35Z","for":"48h59m58s","for_seconds":176398,"waiting_for":"shipment"}]}`
	rec := `{"configured":true,"checked_at":"2026-03-03T11:00:00Z","window":{"from":"2026-03-02T11:00:00Z","to":"2026-03-03T10:58:00Z"},"checked":12,"partial":false,` +
		`"mismatches":[{"order_id":"` + OtherOrderID + `","status":"CANCELLED","since":"2026-03-03T10:50:00Z","check":"cancelled",` +
		`"problems":["fulfillment still holds the stock (HELD)"],"fulfillment":{"reservation":"HELD"},"gateway":{"payments":[{"id":"` + OtherPayment + `","status":"VOIDED"}]}}],"flagged":[]}`
	s.Reply(topology.Orders, "GET /admin/stuck-orders", 200, stuck)
	s.Reply(topology.Orders, "GET /admin/reconciliation", 200, rec)
	s.Reply(topology.Orders, "POST /admin/audit", 200, `{"stuck":`+stuck+`,"reconciliation":`+rec+`}`)
}

func (s *Stack) peersScenario() {
	// byOrder answers ok for OrderID and the route's empty list for any other order, as the
	// services do for an order they do not know.
	byOrder := func(ok, empty string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if _, given := r.URL.Query()["order_id"]; !given {
				write(w, 400, Problem(400, "query parameter order_id is required", r.URL.Path))
				return
			}
			if r.URL.Query().Get("order_id") == OrderID {
				write(w, 200, ok)
				return
			}
			write(w, 200, empty)
		}
	}
	s.Handle(topology.Gateway, "GET /admin/payments", byOrder(`{"payments":[{"id":"`+PaymentID+`","order_id":"`+OrderID+`","customer_id":"ali",`+
		`"method":"card","provider":"stripe","status":"AUTHORIZED","amount_minor":2400,"currency":"JPY","provider_payment_id":"pi_3Pq","cancel_requested":false,"version":2}]}`, `{"payments":[]}`))
	s.Reply(topology.Gateway, "POST /admin/sweep", 200, `{"resumed":0,"checked":1,"changed":0,"refunds_pending":1,"failures":[]}`)
	s.Handle(topology.Notifications, "GET /admin/notifications", byOrder(`{"notifications":[{"event_id":"`+EventOrderCreated+`","event_type":"order.created",`+
		`"template":"order_received","language":"ja","subject":"ご注文を承りました","status":"SENT","attempts":1,"message_id":"<m1@spanmart.example>",`+
		`"created_at":"2026-03-01T10:00:00.15Z","sent_at":"2026-03-01T10:00:00.4Z"}]}`, `{"notifications":[]}`))
	s.Reply(topology.Notifications, "POST /admin/sweep", 200, `{"resumed":0,"sent":0,"bounced":0,"failed":0,"retry":0,"failures":[]}`)
	s.Handle(topology.Fulfillment, "GET /v1/shipments", byOrder(`{"items":[{"shipment_id":"`+ShipmentID+`","order_id":"`+OrderID+`","status":"PENDING","version":1,`+
		`"carrier":null,"tracking_number":null,"failure_reason":null,"shipped_by":null,"failed_by":null,"lines":[{"sku":"A1","quantity":2}],"created_at":"2026-03-01T10:00:01.44Z","updated_at":"2026-03-01T10:00:01.44Z","shipped_at":null}]}`, `{"items":[]}`))
	s.Reply(topology.Fulfillment, "GET /v1/reservations/"+OrderID, 200, `{"order_id":"`+OrderID+`","status":"HELD","version":2,`+
		`"lines":[{"sku":"A1","quantity":2,"status":"HELD"}],"created_at":"2026-03-01T10:00:00.09Z","updated_at":"2026-03-01T10:00:01.44Z"}`)
}
