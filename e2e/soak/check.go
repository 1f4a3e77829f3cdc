package soak

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/spanmart/spanmart/e2e/harness"
	"github.com/spanmart/spanmart/internal/topology"
)

// Check is one invariant: how many things it looked at, how many broke it (with the first few),
// and what would have broken it but a fault of the soak explains.
type Check struct {
	Name      string
	Checked   int
	Failed    int
	Examples  []string
	Explained []string
	// Note adds what the count does not say ("3 e-mails resent with the same Message-ID").
	Note string
}

// maxExamples is how many offenders a check names.
const maxExamples = 5

func (c *Check) fail(format string, args ...any) {
	c.Failed++
	if len(c.Examples) < maxExamples {
		c.Examples = append(c.Examples, fmt.Sprintf(format, args...))
	}
}

func (c *Check) explain(format string, args ...any) {
	c.Explained = append(c.Explained, fmt.Sprintf(format, args...))
}

// Passed reports whether nothing broke the invariant.
func (c *Check) Passed() bool { return c.Failed == 0 }

func (c *Check) String() string {
	verdict := "PASS"
	if !c.Passed() {
		verdict = "FAIL"
	}
	s := fmt.Sprintf("%s  %-58s %6d checked", verdict, c.Name, c.Checked)
	if c.Failed > 0 {
		s += fmt.Sprintf(", %d failed: %s", c.Failed, strings.Join(c.Examples, "; "))
	}
	if len(c.Explained) > 0 {
		ex := c.Explained
		more := ""
		if len(ex) > maxExamples {
			ex, more = ex[:maxExamples], fmt.Sprintf(" and %d more", len(c.Explained)-maxExamples)
		}
		s += fmt.Sprintf("; %d explained: %s%s", len(c.Explained), strings.Join(ex, "; "), more)
	}
	if c.Note != "" {
		s += "; " + c.Note
	}
	return s
}

// check runs every invariant on the world the drain left, and fills res.Counts.
func check(ctx context.Context, s *harness.Stack, w *world, res *Result) []*Check {
	for _, o := range res.Orders {
		if d := w.orders[o.ID]; d != nil {
			o.Final = d.state()
		}
	}
	checks := []*Check{
		checkDrained(res),
		checkPlacedOnce(w, res.Orders),
		checkTerminal(w, res.Orders),
		checkAsExpected(w, res.Orders),
		checkConsistent(w, res.Orders),
		checkPublished(w),
	}
	routed, err := checkRouted(w, &res.Counts)
	if err != nil {
		res.Err = err
		return checks
	}
	checks = append(checks,
		routed,
		checkLedger(ctx, s, w),
		checkEventsOnce(w),
		checkReservations(w),
		checkStock(w),
		checkPaymentsOnce(w),
		checkMoney(w),
		checkWallets(s, w),
		checkMail(w, &res.Counts),
		checkAudit(ctx, s, w, res.Orders),
		checkDeadLetters(res.DeadLetters),
		checkProcesses(s, res.Faults),
	)
	res.Counts.Failures, res.Counts.Deferrals = w.failures.Failures, w.failures.Deferrals
	return checks
}

func checkDrained(res *Result) *Check {
	c := &Check{Name: "the system drained after the faults cleared", Checked: 1}
	if !res.Drain.Drained {
		c.fail("%s", strings.Join(res.Drain.NotDrained, " "))
	}
	return c
}

// byID indexes the load's orders by order id.
func byID(orders []*Order) map[string]*Order {
	out := map[string]*Order{}
	for _, o := range orders {
		if o.ID != "" {
			out[o.ID] = o
		}
	}
	return out
}

// checkPlacedOnce: every placement got its order and one only (retries with the same
// Idempotency-Key while orders was being killed included), a placement refused as overloaded
// until its customer gave up made none, and no order exists that no customer placed.
func checkPlacedOnce(w *world, orders []*Order) *Check {
	c := &Check{Name: "every placement made one order, and only one; a shed one none", Checked: len(orders)}
	seen := map[string]int{}
	for _, o := range orders {
		switch {
		case o.Shed && w.placements[o.Key] != "" && !o.Unsure:
			c.fail("order #%d (%s) was refused as overloaded, yet made order %s", o.N, o.Scenario, w.placements[o.Key])
		case o.Shed && w.placements[o.Key] != "":
			// Made by an attempt whose answer was lost; its customer gave up without knowing
			// (the confirmation e-mail tells them). checkTerminal checks how it ended.
			c.explain("order #%d (%s) made %s by an attempt that went unanswered, then refused as overloaded", o.N, o.Scenario, w.placements[o.Key])
			seen[w.placements[o.Key]]++
			continue
		case o.Shed:
			c.explain("order #%d (%s) not placed: %s", o.N, o.Scenario, strings.Join(o.Notes, ", "))
			continue
		case o.ID == "":
			c.fail("order #%d (%s) never placed: %s", o.N, o.Scenario, o.Problem)
		case w.orders[o.ID] == nil:
			c.fail("order %s (#%d) answered but not in the orders database", o.ID, o.N)
		}
		seen[o.ID]++
	}
	for id, n := range seen {
		if id != "" && n > 1 {
			c.fail("order %s answered to %d placements", id, n)
		}
	}
	for id := range w.orders {
		if seen[id] == 0 {
			c.fail("order %s in the database, placed by no customer", id)
		}
	}
	return c
}

// checkTerminal: every order ended: COMPLETED or CANCELLED, or NEEDS_ATTENTION where its customer
// explains it (a cancel that raced the carrier).
func checkTerminal(w *world, orders []*Order) *Check {
	c := &Check{Name: "every order terminal (NEEDS_ATTENTION only where explained)", Checked: len(w.orders)}
	known := byID(orders)
	for _, id := range sortedKeys(w.orders) {
		d := w.orders[id]
		switch {
		case d.Status == "COMPLETED" || d.Status == "CANCELLED":
		case d.Status == "NEEDS_ATTENTION" && known[id] != nil && slices.Contains(known[id].Expect, d.state()):
			c.explain("%s %s (%s)", id, d.state(), strings.Join(known[id].Notes, ", "))
		default:
			c.fail("%s %s", id, d.state())
		}
	}
	return c
}

// checkAsExpected: every order ended as its customer's journey says it must (a declined card
// cancelled payment_declined, a paid slip completed, ...), and no customer saw an answer the API
// must not give.
func checkAsExpected(w *world, orders []*Order) *Check {
	c := &Check{Name: "every order ended as its customer expects", Checked: len(orders)}
	for _, o := range orders {
		if o.ID == "" {
			continue // checkPlacedOnce reports it
		}
		d := w.orders[o.ID]
		switch {
		case d == nil:
		case o.Problem != "":
			c.fail("%s (%s): %s", o.ID, o.Scenario, o.Problem)
		case !slices.Contains(o.Expect, d.state()):
			c.fail("%s (%s) is %s, want %s", o.ID, o.Scenario, d.state(), strings.Join(o.Expect, " or "))
		}
	}
	return c
}

// checkConsistent: each order's state agrees with fulfillment's reservation and shipment and the
// gateway's payment, read from their own databases.
func checkConsistent(w *world, orders []*Order) *Check {
	c := &Check{Name: "each order consistent across orders, fulfillment and payments", Checked: len(w.orders)}
	for _, id := range sortedKeys(w.orders) {
		if problems := consistency(w.orders[id], w); len(problems) > 0 {
			c.fail("%s %s: %s", id, w.orders[id].state(), strings.Join(problems, ", "))
		}
	}
	return c
}

// consistency lists how an order's peers disagree with its final state.
func consistency(o *dbOrder, w *world) []string {
	var problems []string
	want := func(what, got string, ok ...string) {
		if !slices.Contains(ok, got) {
			problems = append(problems, fmt.Sprintf("%s %q (want %s)", what, got, strings.Join(ok, "|")))
		}
	}
	resv := w.orderReservations[o.ID]
	lines := ""
	for _, r := range w.reservations[o.ID] {
		if lines == "" || lines == r.Status {
			lines = r.Status
		} else {
			lines = "mixed"
		}
	}
	ship := w.shipments[o.ID].Status
	pay := ""
	if ps := w.payments[o.ID]; len(ps) == 1 {
		pay = ps[0].Status
	} else if len(ps) > 1 {
		pay = fmt.Sprintf("%d payments", len(ps))
	}
	switch {
	case o.Status == "COMPLETED":
		want("reservation", resv, "SHIPPED")
		want("reserved lines", lines, "SHIPPED")
		want("shipment", ship, "SHIPPED")
		want("payment", pay, "CAPTURED")
	case o.Status == "CANCELLED":
		want("reservation", resv, "", "REJECTED", "RELEASED")
		want("reserved lines", lines, "", "RELEASED")
		want("shipment", ship, "", "CANCELLED", "FAILED")
		want("payment", pay, "", "FAILED", "VOIDED", "EXPIRED", "REFUNDED")
		switch o.CancelReason {
		case "out_of_stock":
			want("reservation", resv, "REJECTED")
			want("payment", pay, "")
		case "shipment_failed":
			want("shipment", ship, "FAILED")
			want("payment", pay, "VOIDED", "REFUNDED")
		case "payment_expired":
			want("payment", pay, "EXPIRED")
		case "payment_declined", "payment_insufficient_funds":
			want("payment", pay, "FAILED")
		}
	case o.Status+" "+o.AttentionReason == raced:
		want("reservation", resv, "SHIPPED")
		want("shipment", ship, "SHIPPED")
		want("payment", pay, "VOIDED", "REFUNDED")
	}
	return problems
}

// checkPublished: no outbox row was left behind.
func checkPublished(w *world) *Check {
	c := &Check{Name: "every outbox row published"}
	for _, db := range sortedKeys(w.outbox) {
		for _, e := range w.outbox[db] {
			c.Checked++
			if !e.Published {
				c.fail("%s %s %s", db, e.Type, e.EventID)
			}
		}
	}
	return c
}

// routes reads relay/routes.yaml: event type → subscribers.
func routes() (map[string][]string, error) {
	root, err := harness.RepoRoot()
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(root, "relay", "routes.yaml"))
	if err != nil {
		return nil, err
	}
	var f struct {
		Routes map[string][]string `yaml:"routes"`
	}
	if err := yaml.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("relay/routes.yaml: %w", err)
	}
	return f.Routes, nil
}

// checkRouted: every published event reached every subscriber relay/routes.yaml routes its type
// to (the relay created a task for each: PublishedTo) and each of them applied it (a
// ProcessedEvents row in the subscriber's database, which a dead letter also writes).
func checkRouted(w *world, counts *Counts) (*Check, error) {
	rt, err := routes()
	if err != nil {
		return nil, err
	}
	c := &Check{Name: "every event applied by each subscriber routes.yaml names"}
	for _, db := range sortedKeys(w.outbox) {
		for _, e := range w.outbox[db] {
			if !e.Published {
				continue
			}
			counts.Published++
			counts.Deliveries += int64(len(e.PublishedTo))
			subs := slices.Clone(rt[e.Type])
			sort.Strings(subs)
			to := slices.Clone(e.PublishedTo)
			sort.Strings(to)
			if !slices.Equal(subs, to) {
				c.fail("%s %s %s published to %v, routed to %v", db, e.Type, e.EventID, to, subs)
			}
			for _, sub := range subs {
				c.Checked++
				svc, ok := topology.Lookup(sub)
				if !ok || !w.processed[svc.Database][e.EventID+"/"+sub] {
					c.fail("%s %s %s not applied by %s", db, e.Type, e.EventID, sub)
				}
			}
		}
	}
	for _, db := range sortedKeys(w.processed) {
		counts.Applied += int64(len(w.processed[db]))
	}
	return c, nil
}

// checkLedger: the relay's delivery ledger agrees: nothing missing, every published pair
// confirmed by its subscriber's own answer.
func checkLedger(ctx context.Context, s *harness.Stack, w *world) *Check {
	c := &Check{Name: "delivery ledger: every delivery confirmed, none missing"}
	for _, db := range sortedKeys(w.outbox) {
		for _, e := range w.outbox[db] {
			c.Checked++
			if e.Unaudited {
				c.fail("%s %s %s not confirmed", db, e.Type, e.EventID)
			}
		}
	}
	if w.missing > 0 {
		c.fail("%d missing deliveries recorded", w.missing)
	}
	var ledger struct {
		Sources []struct {
			Source  string `json:"source"`
			Missing []struct {
				EventID    string `json:"event_id"`
				Subscriber string `json:"subscriber"`
			} `json:"missing"`
		} `json:"sources"`
	}
	if err := adminGet(ctx, s, topology.Relay, "/v1/ledger", &ledger); err != nil {
		c.fail("GET /v1/ledger: %v", err)
	}
	for _, src := range ledger.Sources {
		for _, m := range src.Missing {
			c.fail("the relay reports %s of %s missing at %s", m.EventID, src.Source, m.Subscriber)
		}
	}
	return c
}

// checkEventsOnce: no aggregate emitted an event type twice or a version twice: a redelivered
// event never caused a second state change (one reservation, one authorization, one capture, one
// refund per aggregate, as events).
func checkEventsOnce(w *world) *Check {
	c := &Check{Name: "no aggregate emitted an event type or a version twice"}
	for _, db := range sortedKeys(w.outbox) {
		types, versions := map[string]int{}, map[string]int{}
		for _, e := range w.outbox[db] {
			c.Checked++
			agg := db + " " + e.AggregateType + " " + e.AggregateID
			types[agg+" "+e.Type]++
			versions[fmt.Sprintf("%s v%d", agg, e.Version)]++
		}
		for _, k := range sortedKeys(types) {
			if types[k] > 1 {
				c.fail("%s emitted %d times", k, types[k])
			}
		}
		for _, k := range sortedKeys(versions) {
			if versions[k] > 1 {
				c.fail("%s emitted %d times", k, versions[k])
			}
		}
	}
	return c
}

// checkReservations: fulfillment decided once per order and reserved exactly the order's lines.
func checkReservations(w *world) *Check {
	c := &Check{Name: "one reservation per order, of exactly its lines", Checked: len(w.orders)}
	for _, id := range sortedKeys(w.orders) {
		o := w.orders[id]
		rs := w.reservations[id]
		if len(rs) == 0 {
			continue // rejected, or cancelled before fulfillment decided
		}
		got, want := map[string]int64{}, map[string]int64{}
		for _, r := range rs {
			got[r.SKU] += r.Quantity
		}
		for _, l := range o.Items {
			want[l.SKU] += l.Quantity
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			c.fail("%s reserved %v, ordered %v", id, got, want)
		}
	}
	for id := range w.reservations {
		if w.orders[id] == nil {
			c.fail("reservation of unknown order %s", id)
		}
	}
	return c
}

// checkStock: per SKU, what left the warehouse is what shipped and what is held is what the
// reservations hold: OnHand = seed - shipped, Reserved = held.
func checkStock(w *world) *Check {
	c := &Check{Name: "stock arithmetic: on hand = seed - shipped, reserved = held"}
	shipped, held := map[string]int64{}, map[string]int64{}
	for _, rs := range w.reservations {
		for _, r := range rs {
			switch r.Status {
			case "SHIPPED":
				shipped[r.SKU] += r.Quantity
			case "HELD":
				held[r.SKU] += r.Quantity
			}
		}
	}
	for _, p := range catalog {
		c.Checked++
		st, ok := w.stock[p.SKU]
		switch {
		case !ok:
			c.fail("%s: no inventory row", p.SKU)
		case st.OnHand != p.OnHand-shipped[p.SKU] || st.Reserved != held[p.SKU]:
			c.fail("%s: on hand %d, reserved %d; want %d - %d shipped = %d, and %d held",
				p.SKU, st.OnHand, st.Reserved, p.OnHand, shipped[p.SKU], p.OnHand-shipped[p.SKU], held[p.SKU])
		}
	}
	return c
}

// provider objects of a gateway payment at the sandbox.
func stripeIntents(w *world, paymentID string) []sandboxIntent {
	var out []sandboxIntent
	for _, pi := range w.intents {
		if pi.Metadata["spanmart_payment_id"] == paymentID {
			out = append(out, pi)
		}
	}
	return out
}

func komojuOf(k sandboxKomoju) string {
	if id, ok := k.Metadata["payment_id"].(string); ok && id != "" {
		return id
	}
	if k.ExternalOrderNum != nil {
		return *k.ExternalOrderNum
	}
	return ""
}

func komojuPayments(w *world, paymentID string) []sandboxKomoju {
	var out []sandboxKomoju
	for _, k := range w.komoju {
		if komojuOf(k) == paymentID {
			out = append(out, k)
		}
	}
	return out
}

// checkPaymentsOnce: one payment per order, and the provider holds one PaymentIntent or KOMOJU
// payment per payment (a resumed or retried authorization reused its idempotency key), none of
// which belongs to no payment.
func checkPaymentsOnce(w *world) *Check {
	c := &Check{Name: "one payment per order, one provider payment per payment"}
	for _, id := range sortedKeys(w.payments) {
		ps := w.payments[id]
		c.Checked++
		if len(ps) > 1 {
			c.fail("order %s has %d payments", id, len(ps))
		}
		for _, p := range ps {
			n := len(stripeIntents(w, p.ID)) + len(komojuPayments(w, p.ID))
			if n > 1 || p.ProviderID != "" && n != 1 {
				c.fail("payment %s (order %s) has %d provider payments", p.ID, id, n)
			}
		}
	}
	for _, pi := range w.intents {
		if _, ok := w.paymentOrder[pi.Metadata["spanmart_payment_id"]]; !ok {
			c.fail("PaymentIntent %s belongs to no payment", pi.ID)
		}
	}
	for _, k := range w.komoju {
		if _, ok := w.paymentOrder[komojuOf(k)]; !ok {
			c.fail("KOMOJU payment %s belongs to no payment", k.ID)
		}
	}
	return c
}

// The provider's statuses each gateway status may stand beside at the end. A void that finds the
// slip already expired (the sandbox's clock jumped while the customer cancelled) is VOIDED, as the
// KOMOJU adapter documents: nothing is held either way.
var (
	stripeStatus = map[string][]string{
		"CAPTURED": {"succeeded"}, "VOIDED": {"canceled"}, "EXPIRED": {"canceled"}, "FAILED": {"requires_payment_method"},
		"REFUNDED": {"succeeded"}, "AUTHORIZED": {"requires_capture"},
	}
	komojuStatus = map[string][]string{
		"CAPTURED": {"captured"}, "VOIDED": {"cancelled", "expired"}, "EXPIRED": {"expired"}, "FAILED": {"failed"},
		"REFUNDED": {"refunded"}, "AUTHORIZED": {"authorized", "captured"},
	}
)

// checkMoney: what the provider holds agrees with the gateway, a completed order's money was
// captured once and exactly, a cancelled order kept none, and no payment was refunded twice.
func checkMoney(w *world) *Check {
	c := &Check{Name: "money: captured once and exactly, refunded at most once"}
	refundsOf := map[string][]sandboxRefund{}
	for _, r := range w.refunds {
		refundsOf[r.PaymentIntent] = append(refundsOf[r.PaymentIntent], r)
	}
	for _, id := range sortedKeys(w.payments) {
		o := w.orders[id]
		for _, p := range w.payments[id] {
			c.Checked++
			if o != nil && p.AmountMinor != o.TotalMinor {
				c.fail("payment %s of order %s: %d, the order totals %d", p.ID, id, p.AmountMinor, o.TotalMinor)
			}
			for _, pi := range stripeIntents(w, p.ID) {
				refunded := int64(0)
				for _, r := range refundsOf[pi.ID] {
					refunded += r.Amount
				}
				switch {
				case !slices.Contains(stripeStatus[p.Status], pi.Status):
					c.fail("payment %s %s, its PaymentIntent %s %s", p.ID, p.Status, pi.ID, pi.Status)
				case len(refundsOf[pi.ID]) > 1:
					c.fail("PaymentIntent %s refunded %d times", pi.ID, len(refundsOf[pi.ID]))
				case p.Status == "CAPTURED" && (pi.AmountReceived != p.AmountMinor || refunded != 0):
					c.fail("payment %s CAPTURED, PaymentIntent %s received %d (refunded %d) of %d", p.ID, pi.ID, pi.AmountReceived, refunded, p.AmountMinor)
				case p.Status == "REFUNDED" && refunded != pi.AmountReceived:
					c.fail("payment %s REFUNDED, PaymentIntent %s received %d, refunded %d", p.ID, pi.ID, pi.AmountReceived, refunded)
				case p.Status != "CAPTURED" && p.Status != "REFUNDED" && pi.AmountReceived != 0:
					c.fail("payment %s %s, yet PaymentIntent %s received %d", p.ID, p.Status, pi.ID, pi.AmountReceived)
				}
			}
			for _, k := range komojuPayments(w, p.ID) {
				switch {
				case !slices.Contains(komojuStatus[p.Status], k.Status):
					c.fail("payment %s %s, its KOMOJU payment %s %s", p.ID, p.Status, k.ID, k.Status)
				case len(k.Refunds) > 1:
					c.fail("KOMOJU payment %s refunded %d times", k.ID, len(k.Refunds))
				case k.Amount != p.AmountMinor:
					c.fail("payment %s of %d, its KOMOJU payment %s of %d", p.ID, p.AmountMinor, k.ID, k.Amount)
				case p.Status == "REFUNDED" && k.AmountRefunded != k.Amount:
					c.fail("payment %s REFUNDED, KOMOJU payment %s refunded %d of %d", p.ID, k.ID, k.AmountRefunded, k.Amount)
				}
			}
		}
	}
	return c
}

// checkWallets: the rich wallet gave exactly what the captured wallet payments took and holds
// nothing; the poor one was never touched.
func checkWallets(s *harness.Stack, w *world) *Check {
	c := &Check{Name: "wallets: spent = captured, nothing held", Checked: 2}
	var captured int64
	for _, ps := range w.payments {
		for _, p := range ps {
			if p.Method == "WALLET" && p.Status == "CAPTURED" {
				captured += p.AmountMinor
			}
		}
	}
	if avail, held := s.Paysim.WalletBalance(richWallet); richBalance-avail-held != captured || held != 0 {
		c.fail("%s: spent %d, holds %d; the captured wallet payments total %d", richWallet, richBalance-avail-held, held, captured)
	}
	if avail, held := s.Paysim.WalletBalance(poorWallet); avail != poorBalance || held != 0 {
		c.fail("%s: %d available, %d held; want %d untouched", poorWallet, avail, held, poorBalance)
	}
	return c
}

// checkMail: each e-mail intent is one per order and template, sent, and the mail server got it
// under one Message-ID (copies with that Message-ID are counted, not failed: see the note below);
// a completed order's customer was told of the confirmation and the shipment.
func checkMail(w *world, counts *Counts) *Check {
	c := &Check{Name: "e-mails: one per order and template, each sent once"}
	type key struct{ order, template string }
	ids := map[key]map[string]int{}
	accepted := map[key][]string{} // when the server accepted each copy, for the note
	for _, m := range w.smtp {
		k := key{m.Header.Get("X-Spanmart-Order"), m.Header.Get("X-Spanmart-Template")}
		if ids[k] == nil {
			ids[k] = map[string]int{}
		}
		ids[k][strings.Trim(m.MessageID(), "<>")]++
		accepted[k] = append(accepted[k], m.At.Format("15:04:05.000"))
	}
	rows := map[key]int{}
	var resent []string
	for _, id := range sortedKeys(w.mails) {
		for _, m := range w.mails[id] {
			c.Checked++
			k := key{id, m.Template}
			rows[k]++
			if m.Status != "SENT" {
				c.fail("order %s %s: %s", id, m.Template, m.Status)
			}
			got := ids[k]
			if len(got) != 1 || m.MessageID != "" && got[strings.Trim(m.MessageID, "<>")] == 0 {
				c.fail("order %s %s: the mail server got Message-IDs %v, want %s", id, m.Template, got, m.MessageID)
			}
			for _, n := range got {
				if n > 1 {
					counts.Resends += n - 1
					resent = append(resent, fmt.Sprintf("%s %s at %s", id, m.Template, strings.Join(accepted[k], ", ")))
				}
			}
		}
	}
	for k, n := range rows {
		if n > 1 {
			c.fail("order %s: %d %s e-mails", k.order, n, k.template)
		}
	}
	for k := range ids {
		if rows[k] == 0 {
			c.fail("the mail server got a %s e-mail about order %s that notifications has no record of", k.template, k.order)
		}
	}
	for _, id := range sortedKeys(w.orders) {
		if w.orders[id].Status != "COMPLETED" {
			continue
		}
		for _, t := range []string{"order_confirmed", "order_shipped"} {
			if rows[key{id, t}] == 0 {
				c.fail("completed order %s: no %s e-mail", id, t)
			}
		}
	}
	if counts.Resends > 0 {
		if len(resent) > maxExamples {
			resent = append(resent[:maxExamples], "...")
		}
		// A copy with the same Message-ID is de-duplicated by mail clients: a crash between the
		// server's acceptance and the mark (documented), or a redelivery and the sweep sending a
		// PENDING e-mail at once (nothing claims it first).
		c.Note = fmt.Sprintf("%d sent again with the same Message-ID (%s)", counts.Resends, strings.Join(resent, ", "))
	}
	return c
}

// checkAudit: orders' own audit finds nothing: its stuck-order detector lists no order, and its
// reconciliation (each order against fulfillment's reservation and the gateway's payments, read
// through their APIs) no contradiction. POST /admin/audit reconciles at most a batch per status,
// so every order is also reconciled on its own (GET /admin/reconciliation?order_id=, what an
// order's trace asks). An order flagged NEEDS_ATTENTION is explained when its customer's cancel
// raced the carrier.
func checkAudit(ctx context.Context, s *harness.Stack, w *world, orders []*Order) *Check {
	c := &Check{Name: "orders' audit: nothing stuck, every order reconciled clean"}
	a, err := s.Audit(ctx)
	if err != nil {
		c.fail("POST /admin/audit: %v", err)
		return c
	}
	for _, o := range a.Stuck.Orders {
		c.fail("stuck: %s %s for %s, waiting for %s", o.OrderID, o.Status, o.For, o.WaitingFor)
	}
	known := byID(orders)
	ids := sortedKeys(w.orders)
	reports := make([]orderReconciliation, len(ids))
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = adminGet(ctx, s, topology.Orders, "/admin/reconciliation?order_id="+id, &reports[i])
		}()
	}
	wg.Wait()
	for i, id := range ids {
		rep := reports[i]
		switch {
		case errs[i] != nil:
			c.fail("%s: %v", id, errs[i])
			continue
		case !rep.Configured || rep.Partial != nil && *rep.Partial || rep.Checked == nil || *rep.Checked != 1:
			c.fail("%s: not reconciled (configured %v, partial %v, checked %v)", id, rep.Configured, rep.Partial, rep.Checked)
			continue
		}
		c.Checked++
		for _, m := range rep.Mismatches {
			c.fail("mismatch: %s %s: %s", m.OrderID, m.Check, strings.Join(m.Problems, ", "))
		}
		for _, f := range rep.Flagged {
			if o := known[f.OrderID]; o != nil && slices.Contains(o.Expect, "NEEDS_ATTENTION "+f.AttentionReason) {
				c.explain("flagged %s %s (a cancel that raced the carrier)", f.OrderID, f.AttentionReason)
				continue
			}
			c.fail("flagged: %s %s", f.OrderID, f.AttentionReason)
		}
	}
	return c
}

// orderReconciliation is GET /admin/reconciliation?order_id=, the harness's type.
type orderReconciliation = harness.Reconciliation

// checkDeadLetters: every dead letter is explained by a fault (and was replayed).
func checkDeadLetters(dead []DeadLetter) *Check {
	c := &Check{Name: "dead letters: each explained by a fault", Checked: len(dead)}
	for _, d := range dead {
		if d.Explanation == "" {
			c.fail("%s", d)
			continue
		}
		c.explain("%s", d)
	}
	return c
}

// checkProcesses: every fault was repaired and every process still runs (none died by itself).
func checkProcesses(s *harness.Stack, faults []*Fault) *Check {
	c := &Check{Name: "every fault repaired, every process running", Checked: len(faults) + len(killable)}
	for _, f := range faults {
		if f.Err != "" {
			c.fail("%s: %s", f, f.Err)
		}
	}
	for _, p := range killable {
		if !s.Running(p) {
			c.fail("%s is not running", p)
		}
	}
	return c
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
