package e2e

import (
	"fmt"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/e2e/harness"
)

// The order → stock → payment flow as the services implement it, per order, once it has come to
// rest short of shipping (the drills do not ship), with the relay's routing (relay/routes.yaml).
// An order that fits is reserved and, paid by a card that authorizes (the drills' orderRequest),
// confirmed: fulfillment creates its shipment (PENDING) and the customer gets the confirmation
// e-mail. One that does not fit is cancelled: fulfillment answers its order.cancelled with an
// inventory.released although it held nothing (orders notes it: the order is already cancelled),
// the gateway has no payment to settle, and the customer is told.
type outcome int

const (
	reserved outcome = iota
	rejected
)

// placed is an order a drill placed: its id, the quantity of A1 and how it must end.
type placed struct {
	id  string
	qty int64
	is  outcome
}

// wantSnapshot is the state of every database after the flow of each order has come to rest, with
// product A1 seeded at onHand.
func wantSnapshot(onHand int64, orders ...placed) snapshot {
	w := snapshot{
		Orders: map[string]string{}, Stock: map[string]string{}, Reservations: map[string]string{},
		Outbox: map[string]map[string]int64{}, Unpublished: map[string]int64{},
		Processed: map[string]int64{}, DeadLetters: map[string]int64{}, Payments: map[string]string{},
		Shipments: map[string]string{}, Mail: map[string][]string{},
	}
	add := func(db, typ string) {
		if w.Outbox[db] == nil {
			w.Outbox[db] = map[string]int64{}
		}
		w.Outbox[db][typ]++
	}
	var held int64
	for _, o := range orders {
		add("orders", "order.created")
		w.Processed["fulfillment/fulfillment"]++     // order.created
		w.Processed["notifications/notifications"]++ // order.created: the contact
		w.Processed["orders/orders"]++               // inventory.reserved or inventory.rejected
		switch o.is {
		case reserved:
			w.Orders[o.id] = "CONFIRMED"
			w.Payments[o.id] = "AUTHORIZED"
			w.Reservations[o.id+" A1"] = fmt.Sprintf("%d HELD", o.qty)
			held += o.qty
			add("orders", "order.awaiting_payment")
			add("orders", "order.confirmed")
			add("fulfillment", "inventory.reserved")
			add("payments", "payment.authorized")
			w.Processed["payments/gateway-abstraction"]++ // order.awaiting_payment
			w.Processed["orders/orders"]++                // payment.authorized
			w.Processed["fulfillment/fulfillment"]++      // order.confirmed: the shipment
			w.Processed["notifications/notifications"]++  // order.confirmed: the e-mail
			w.Shipments[o.id] = "PENDING"
			w.Mail[o.id] = []string{"order_confirmed SENT"}
		case rejected:
			w.Orders[o.id] = "CANCELLED out_of_stock"
			add("orders", "order.cancelled")
			add("fulfillment", "inventory.rejected")
			add("fulfillment", "inventory.released")
			w.Processed["fulfillment/fulfillment"]++      // order.cancelled
			w.Processed["payments/gateway-abstraction"]++ // order.cancelled: no payment to settle
			w.Processed["notifications/notifications"]++  // order.cancelled: the e-mail
			w.Processed["orders/orders"]++                // inventory.released
			w.Mail[o.id] = []string{"order_cancelled SENT"}
		}
	}
	w.Stock["A1"] = fmt.Sprintf("%d/%d", onHand, held)
	return w
}

// checkSnapshot compares the databases with want.
func checkSnapshot(t *testing.T, want, got snapshot) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("final state of the databases (-want +got):\n%s", diff)
	}
}

// checkNoDuplicateEvents fails if any aggregate emitted an event type twice: a second side effect.
func checkNoDuplicateEvents(t *testing.T, s *harness.Stack) {
	t.Helper()
	for _, db := range []string{"orders", "fulfillment"} {
		rows := query(t, s, db, `SELECT AggregateId, EventType, CAST(COUNT(*) AS STRING) FROM OutboxEvents
			GROUP BY AggregateId, EventType HAVING COUNT(*) > 1`, nil)
		for _, r := range rows {
			t.Errorf("%s: aggregate %s emitted %s %s times", db, r[0], r[1], r[2])
		}
	}
}

// timelineTypes lists the event types of an order's timeline, "emitted:" or "consumed:" first.
func timelineTypes(o order) []string {
	var out []string
	for _, e := range o.Timeline {
		out = append(out, e.Direction+":"+e.EventType)
	}
	sort.Strings(out)
	return out
}
