package soak

import (
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/spanmart/spanmart/internal/mailtest"
)

// The checker must see what it claims to: each test builds the world one healthy card order
// leaves (ordered, reserved, shipped, captured, e-mailed, every event applied) and breaks one thing.

const (
	orderID   = "0b6c4c2e-8d1a-4f57-9a51-5c1f0e3e6a01"
	paymentID = "7f7e4a35-2f6a-5d2e-b6a0-7b7f3c8b9a11"
	intentID  = "pi_soak1"
)

func healthyWorld() *world {
	w := &world{
		orders: map[string]*dbOrder{orderID: {ID: orderID, Customer: "c1", Status: "COMPLETED", Method: "card", Currency: "JPY",
			TotalMinor: 2400, Items: []Line{{"MUG", 2}}}},
		orderReservations: map[string]string{orderID: "SHIPPED"},
		reservations:      map[string][]dbReservation{orderID: {{SKU: "MUG", Quantity: 2, Status: "SHIPPED"}}},
		shipments:         map[string]dbShipment{orderID: {ID: "s1", Status: "SHIPPED"}},
		stock:             map[string]dbStock{},
		payments: map[string][]dbPayment{orderID: {{ID: paymentID, OrderID: orderID, Provider: "stripe", Method: "CARD",
			Status: "CAPTURED", ProviderID: intentID, AmountMinor: 2400}}},
		paymentOrder: map[string]string{paymentID: orderID},
		mails: map[string][]dbMail{orderID: {
			{EventID: "e-confirmed", Template: "order_confirmed", Status: "SENT", MessageID: "<e-confirmed.order_confirmed@notifications.spanmart>"},
			{EventID: "e-shipped", Template: "order_shipped", Status: "SENT", MessageID: "<e-shipped.order_shipped@notifications.spanmart>"},
		}},
		outbox: map[string][]outboxRow{
			"orders": {
				{EventID: "e-created", Type: "order.created", AggregateType: "order", AggregateID: orderID, Version: 1, Published: true, PublishedTo: []string{"fulfillment", "notifications"}},
				{EventID: "e-confirmed", Type: "order.confirmed", AggregateType: "order", AggregateID: orderID, Version: 3, Published: true, PublishedTo: []string{"notifications", "fulfillment"}},
			},
			"fulfillment": {
				{EventID: "e-reserved", Type: "inventory.reserved", AggregateType: "reservation", AggregateID: orderID, Version: 1, Published: true, PublishedTo: []string{"orders"}},
			},
		},
		processed: map[string]map[string]bool{
			"orders":        {"e-reserved/orders": true},
			"fulfillment":   {"e-created/fulfillment": true, "e-confirmed/fulfillment": true},
			"notifications": {"e-created/notifications": true, "e-confirmed/notifications": true},
		},
		intents: []sandboxIntent{{ID: intentID, Status: "succeeded", Amount: 2400, AmountReceived: 2400, Metadata: map[string]string{"spanmart_payment_id": paymentID}}},
	}
	for _, p := range catalog {
		w.stock[p.SKU] = dbStock{OnHand: p.OnHand}
	}
	w.stock["MUG"] = dbStock{OnHand: 1_000_000 - 2}
	w.smtp = []mailtest.Message{sentMail("order_confirmed", "e-confirmed"), sentMail("order_shipped", "e-shipped")}
	return w
}

func sentMail(template, eventID string) mailtest.Message {
	return mailtest.Message{Header: mail.Header{
		"X-Spanmart-Order": {orderID}, "X-Spanmart-Template": {template},
		"Message-Id": {"<" + eventID + "." + template + "@notifications.spanmart>"},
	}}
}

// run runs the checks that need nothing but the world.
func runChecks(t *testing.T, w *world) map[string]*Check {
	t.Helper()
	var counts Counts
	routed, err := checkRouted(w, &counts)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*Check{}
	for _, c := range []*Check{
		checkConsistent(w, nil), checkPublished(w), routed, checkEventsOnce(w), checkReservations(w),
		checkStock(w), checkPaymentsOnce(w), checkMoney(w), checkMail(w, &counts),
	} {
		out[c.Name] = c
	}
	return out
}

func TestChecksPassAHealthyWorld(t *testing.T) {
	for name, c := range runChecks(t, healthyWorld()) {
		if !c.Passed() || c.Checked == 0 {
			t.Errorf("%s: %s", name, c)
		}
	}
}

func TestChecksCatchEachBreak(t *testing.T) {
	for _, tc := range []struct {
		name  string
		check string // the check that must fail (a prefix of its name)
		want  string // in its first example
		brk   func(w *world)
	}{
		{"completed but not captured", "each order consistent", "payment", func(w *world) { w.payments[orderID][0].Status = "AUTHORIZED" }},
		{"completed but the stock never left", "each order consistent", "reservation", func(w *world) { w.orderReservations[orderID] = "HELD" }},
		{"a row left unpublished", "every outbox row published", "order.confirmed", func(w *world) { w.outbox["orders"][1].Published = false }},
		{"a subscriber never applied an event", "every event applied", "not applied by notifications",
			func(w *world) { delete(w.processed["notifications"], "e-confirmed/notifications") }},
		{"published to fewer subscribers than routed", "every event applied", "published to [fulfillment]",
			func(w *world) { w.outbox["orders"][0].PublishedTo = []string{"fulfillment"} }},
		{"an event emitted twice", "no aggregate emitted", "order.confirmed emitted 2 times", func(w *world) {
			w.outbox["orders"] = append(w.outbox["orders"], outboxRow{EventID: "e-again", Type: "order.confirmed", AggregateType: "order", AggregateID: orderID, Version: 4, Published: true, PublishedTo: []string{"fulfillment", "notifications"}})
			w.processed["fulfillment"]["e-again/fulfillment"], w.processed["notifications"]["e-again/notifications"] = true, true
		}},
		{"reserved more than ordered", "one reservation per order", "reserved map[MUG:3]", func(w *world) { w.reservations[orderID][0].Quantity = 3 }},
		{"stock off by one", "stock arithmetic", "MUG", func(w *world) { w.stock["MUG"] = dbStock{OnHand: 1_000_000 - 3} }},
		{"two PaymentIntents for one payment", "one payment per order", "2 provider payments", func(w *world) {
			w.intents = append(w.intents, sandboxIntent{ID: "pi_soak2", Status: "requires_capture", Amount: 2400, Metadata: map[string]string{"spanmart_payment_id": paymentID}})
		}},
		{"captured less than the total", "money", "received 1200", func(w *world) { w.intents[0].AmountReceived = 1200 }},
		{"refunded twice", "money", "refunded 2 times", func(w *world) {
			w.payments[orderID][0].Status = "REFUNDED"
			w.refunds = []sandboxRefund{{ID: "re1", Amount: 1200, PaymentIntent: intentID}, {ID: "re2", Amount: 1200, PaymentIntent: intentID}}
		}},
		{"an e-mail sent twice under two Message-IDs", "e-mails", "Message-IDs", func(w *world) {
			w.smtp = append(w.smtp, sentMail("order_shipped", "e-other"))
		}},
		{"an e-mail never sent", "e-mails", "PENDING", func(w *world) { w.mails[orderID][1].Status = "PENDING" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := healthyWorld()
			tc.brk(w)
			failed := false
			for name, c := range runChecks(t, w) {
				if !strings.HasPrefix(name, tc.check) {
					continue
				}
				failed = true
				if c.Passed() || !strings.Contains(strings.Join(c.Examples, "; "), tc.want) {
					t.Errorf("%s", c)
				}
			}
			if !failed {
				t.Fatalf("no check named %q", tc.check)
			}
		})
	}
}

// A resend with the same Message-ID (the documented crash window) is counted, not failed.
func TestResendIsNotADoubleEmail(t *testing.T) {
	w := healthyWorld()
	w.smtp = append(w.smtp, sentMail("order_shipped", "e-shipped"))
	var counts Counts
	if c := checkMail(w, &counts); !c.Passed() || counts.Resends != 1 {
		t.Errorf("%s; resends %d, want 1", c, counts.Resends)
	}
}

func TestOrdersEndAsExpected(t *testing.T) {
	w := healthyWorld()
	w.orders[orderID].Status, w.orders[orderID].AttentionReason = "NEEDS_ATTENTION", "stock_release_failed_already_shipped"
	raced := &Order{ID: orderID, Scenario: "cancel confirmed", Expect: []string{"CANCELLED customer_request", raced}}
	if c := checkTerminal(w, []*Order{raced}); !c.Passed() || len(c.Explained) != 1 {
		t.Errorf("a cancel that raced the carrier: %s", c)
	}
	plain := &Order{ID: orderID, Scenario: "card", Expect: []string{"COMPLETED"}}
	if c := checkTerminal(w, []*Order{plain}); c.Passed() {
		t.Errorf("an unexplained NEEDS_ATTENTION passed: %s", c)
	}
	if c := checkAsExpected(w, []*Order{plain}); c.Passed() {
		t.Errorf("NEEDS_ATTENTION for an order that must complete passed: %s", c)
	}
}

// The schedule is the seed's, has every kind of fault in a short window (the short soak's), and
// never breaks one target twice at once.
func TestPlanFaults(t *testing.T) {
	plan := planFaults(14, 40*time.Second, 2*time.Second, 3500*time.Millisecond)
	again := planFaults(14, 40*time.Second, 2*time.Second, 3500*time.Millisecond)
	if len(plan) != len(again) {
		t.Fatalf("two plans of one seed: %d and %d faults", len(plan), len(again))
	}
	seen := map[string]bool{}
	for i, f := range plan {
		if *f != *again[i] {
			t.Errorf("fault %d: %+v and %+v", i, f, again[i])
		}
		seen[f.Name()] = true
		if f.At+f.For > 40*time.Second || f.For <= 0 {
			t.Errorf("%s at %s for %s: outside the window", f, f.At, f.For)
		}
		for _, g := range plan[:i] {
			if g.key() == f.key() && f.At < g.At+g.For {
				t.Errorf("%s at %s overlaps %s at %s", f, f.At, g, g.At)
			}
		}
	}
	if len(seen) != len(FaultNames()) {
		t.Errorf("the plan has %d kinds of %d: %v", len(seen), len(FaultNames()), seen)
	}
}

// A placement refused as overloaded until its customer gave up is fine if it made no order, and a
// failure if it made one (the customer was told "no" and will be charged).
func TestShedPlacementMadeNoOrder(t *testing.T) {
	w := healthyWorld()
	w.placements = map[string]string{"k-placed": orderID}
	placed := &Order{N: 1, Scenario: "card", Key: "k-placed", ID: orderID, Expect: []string{"COMPLETED"}}
	shed := &Order{N: 2, Scenario: "card", Key: "k-shed", Shed: true, Notes: []string{"place: refused as overloaded"}}
	if c := checkPlacedOnce(w, []*Order{placed, shed}); !c.Passed() || len(c.Explained) != 1 {
		t.Errorf("a shed placement that made no order: %s", c)
	}
	made := "5e0d5c53-0000-4000-8000-000000000002"
	w.placements["k-shed"] = made
	w.orders[made] = &dbOrder{ID: made, Status: "COMPLETED"}
	if c := checkPlacedOnce(w, []*Order{placed, shed}); c.Passed() || !strings.Contains(strings.Join(c.Examples, "; "), "refused as overloaded, yet made order") {
		t.Errorf("a shed placement that made an order passed: %s", c)
	}
	// Unless an attempt went unanswered first: then the order is its, made unbeknown to it.
	shed.Unsure = true
	if c := checkPlacedOnce(w, []*Order{placed, shed}); !c.Passed() || len(c.Explained) != 1 {
		t.Errorf("a shed placement whose first attempt went unanswered and made an order: %s", c)
	}
}
