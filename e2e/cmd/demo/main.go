// Command demo shows the order → stock → payment flow of Spanmart end to end on a stack of its own
// (free ports, a temporary state directory, the payment sandbox in-process, so it runs on a fresh
// clone and beside a running dev stack):
//
//  1. product A1 with 8 in stock;
//  2. an order of 2 paid by card (pm_card_visa) is reserved, authorized and CONFIRMED;
//  3. an order paid by a declined card is CANCELLED (payment_declined) and its stock released;
//  4. a konbini order waits in AWAITING_PAYMENT with its slip until the customer pays it at the
//     store (the sandbox), then is CONFIRMED; another konbini slip is never paid: the sandbox's
//     clock moves 4 days, the slip expires and the order is CANCELLED (payment_expired), its stock
//     released;
//  5. an order of 10 is cancelled as out of stock, the stock untouched;
//  6. the relay crashes mid-batch (SPANMART_FAULTS=relay.after_enqueue: after creating the tasks,
//     before marking them published), is restarted clean, and the duplicates are visibly skipped
//     (its re-enqueue hits ALREADY_EXISTS; a redelivery of the event is a no-op at the consumer);
//  7. it prints every order with its timeline, the stock, the reservations and the outbox state.
//
// Run it with `go run ./e2e/cmd/demo` (or `make demo`). It exits 0 when every step behaved, and
// non-zero with the failed step otherwise. -keep keeps the state directory (process logs).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/spanner"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spanmart/spanmart/e2e/harness"
	"github.com/spanmart/spanmart/internal/topology"
	"github.com/spanmart/spanmart/pkg/faults"
	"github.com/spanmart/spanmart/pkg/outboxlib/relay"
)

func main() {
	keep := flag.Bool("keep", false, "keep the state directory (process logs) after the demo")
	verbose := flag.Bool("v", false, "print the harness's progress lines")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	err := run(ctx, *keep, *verbose)
	if err != nil {
		fmt.Fprintf(os.Stderr, "\ndemo FAILED: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("\ndemo OK in %s\n", time.Since(start).Round(100*time.Millisecond))
}

// demo is the running demo: the stack and what it printed.
type demo struct {
	s      *harness.Stack
	orders []string // ids, in the order they were placed
}

func step(format string, args ...any) { fmt.Printf("\n==> "+format+"\n", args...) }
func say(format string, args ...any)  { fmt.Printf("    "+format+"\n", args...) }

func run(ctx context.Context, keep, verbose bool) (err error) {
	opts := harness.Options{KeepState: keep, Seed: []harness.Product{{SKU: "A1", Name: "Anchor mug", PriceMinor: 1200, Currency: "JPY", OnHand: 8}}}
	if verbose {
		opts.Logf = func(f string, a ...any) { fmt.Printf("    [harness] "+f+"\n", a...) }
	}
	step("starting the stack: both emulators in-process, 4 databases, 4 queues, 5 processes (first run builds them)")
	s, err := harness.New(ctx, opts)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			fmt.Fprintf(os.Stderr, "\nlogs of the processes are in %s/logs; the last lines:\n", s.StateDir())
			s.DumpLogs(func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }, 10)
		}
		if keep {
			fmt.Printf("state kept in %s\n", s.StateDir())
		}
		s.Close()
	}()
	say("up in %s (build %s, emulators and schema %s, services %s); state in %s",
		s.Timings["total"].Round(100*time.Millisecond), s.Timings["build"].Round(100*time.Millisecond),
		s.Timings["setup"].Round(100*time.Millisecond), s.Timings["services"].Round(100*time.Millisecond), s.StateDir())
	d := &demo{s: s}

	step("catalog: product A1")
	if err := d.printStock(ctx); err != nil {
		return err
	}

	step("order of 2 × A1, paid by card (pm_card_visa)")
	a, err := d.place(ctx, 2, card("pm_card_visa"))
	if err != nil {
		return err
	}
	if err := d.waitStatus(ctx, a, "CONFIRMED"); err != nil {
		return err
	}
	say("order %s: reserved, authorized by the card provider, CONFIRMED", a)

	step("order of 1 × A1, paid by a card that is declined (pm_card_chargeDeclined)")
	declined, err := d.place(ctx, 1, card("pm_card_chargeDeclined"))
	if err != nil {
		return err
	}
	if err := d.waitStatus(ctx, declined, "CANCELLED"); err != nil {
		return err
	}
	say("order %s: CANCELLED (%s), its reservation released", declined, d.reason(ctx, declined))

	if err := d.konbini(ctx); err != nil {
		return err
	}

	step("order of 10 × A1 (only 5 left)")
	b, err := d.place(ctx, 10, card("pm_card_visa"))
	if err != nil {
		return err
	}
	if err := d.waitStatus(ctx, b, "CANCELLED"); err != nil {
		return err
	}
	say("order %s: CANCELLED (out of stock), stock untouched", b)

	step("relay crash mid-batch: restart the relay with %s=%s", faults.EnvVar, faults.RelayAfterEnqueue)
	if err := d.relayCrash(ctx); err != nil {
		return err
	}

	step("final state")
	if err := d.waitSettled(ctx); err != nil {
		return err
	}
	if err := d.printOrders(ctx); err != nil {
		return err
	}
	if err := d.printStock(ctx); err != nil {
		return err
	}
	if err := d.printReservations(ctx); err != nil {
		return err
	}
	if err := d.printOutbox(ctx); err != nil {
		return err
	}
	return d.check(ctx)
}

func card(pm string) map[string]any { return map[string]any{"method": "card", "payment_method": pm} }

// konbini shows two konbini orders: one paid at the store days later, one whose slip expires.
func (d *demo) konbini(ctx context.Context) error {
	step("two orders of 1 × A1 to be paid at a convenience store (konbini)")
	paid, err := d.place(ctx, 1, map[string]any{"method": "konbini", "store": "lawson"})
	if err != nil {
		return err
	}
	unpaid, err := d.place(ctx, 1, map[string]any{"method": "konbini", "store": "family-mart"})
	if err != nil {
		return err
	}
	var o orderView
	if err := harness.Poll(ctx, 30*time.Second, "the slip reaches order "+paid, func() bool {
		o, err = d.order(ctx, paid)
		return err == nil && o.Payment.Instructions != nil
	}); err != nil {
		return err
	}
	in := o.Payment.Instructions
	say("order %s: %s, slip for %s: payment code %s, pay before %s", paid, o.Status, in.Store, in.PaymentCode, in.ExpiresAt)
	var providerID string
	if err := d.s.DB("payments").Single().Query(ctx, spanner.Statement{
		SQL: "SELECT ProviderPaymentId FROM Payments WHERE OrderId = @id", Params: map[string]any{"id": paid},
	}).Do(func(r *spanner.Row) error { return r.Column(0, &providerID) }); err != nil {
		return err
	}
	if _, err := d.s.Paysim.AdvanceClock(24 * time.Hour); err != nil {
		return err
	}
	if err := d.s.Paysim.PayKomojuSlip(providerID); err != nil {
		return err
	}
	say("a day later the customer pays at the store (sandbox: POST /_sandbox/komoju/payments/%s/pay)", providerID)
	if err := d.waitStatus(ctx, paid, "CONFIRMED"); err != nil {
		return err
	}
	say("order %s: KOMOJU's webhook → payment.authorized → CONFIRMED", paid)
	if _, err := d.s.Paysim.AdvanceClock(3 * 24 * time.Hour); err != nil {
		return err
	}
	say("3 more days pass (sandbox: POST /_sandbox/clock/advance): the other slip expires")
	if err := d.waitStatus(ctx, unpaid, "CANCELLED"); err != nil {
		return err
	}
	say("order %s: CANCELLED (%s), its reservation released", unpaid, d.reason(ctx, unpaid))
	return nil
}

// reason is an order's cancel reason, for printing.
func (d *demo) reason(ctx context.Context, id string) string {
	o, err := d.order(ctx, id)
	if err != nil || o.CancelReason == nil {
		return "?"
	}
	return *o.CancelReason
}

// place posts an order of qty × A1 paid as payment and returns its id.
func (d *demo) place(ctx context.Context, qty int64, payment map[string]any) (string, error) {
	body := map[string]any{
		"customer_id": "demo-customer", "email": "demo@example.com",
		"lines": []map[string]any{{"sku": "A1", "quantity": qty}}, "payment": payment,
	}
	r, err := d.s.Do(ctx, http.MethodPost, "orders", "/v1/orders", body, "Idempotency-Key", uuid.NewString())
	if err != nil {
		return "", fmt.Errorf("POST /v1/orders: %w", err)
	}
	if r.Status/100 != 2 {
		return "", fmt.Errorf("POST /v1/orders: %s", r)
	}
	var o struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if err := r.JSON(&o); err != nil || o.ID == "" {
		return "", fmt.Errorf("POST /v1/orders: no id in %s", r)
	}
	say("POST /v1/orders → %d, order %s %s", r.Status, o.ID, o.Status)
	d.orders = append(d.orders, o.ID)
	return o.ID, nil
}

type orderView struct {
	ID           string  `json:"id"`
	Status       string  `json:"status"`
	CancelReason *string `json:"cancel_reason"`
	TotalMinor   int64   `json:"total_minor"`
	Currency     string  `json:"currency"`
	Lines        []struct {
		SKU      string `json:"sku"`
		Quantity int64  `json:"quantity"`
	} `json:"lines"`
	Payment struct {
		Method       string `json:"method"`
		Instructions *struct {
			Store       string `json:"store"`
			PaymentCode string `json:"payment_code"`
			ExpiresAt   string `json:"expires_at"`
		} `json:"instructions"`
	} `json:"payment"`
	Timeline []struct {
		Seq              int64     `json:"seq"`
		Direction        string    `json:"direction"`
		EventType        string    `json:"event_type"`
		AggregateVersion int64     `json:"aggregate_version"`
		At               time.Time `json:"at"`
	} `json:"timeline"`
}

func (d *demo) order(ctx context.Context, id string) (orderView, error) {
	var o orderView
	err := d.s.GetJSON(ctx, "orders", "/v1/orders/"+id, &o)
	return o, err
}

func (d *demo) waitStatus(ctx context.Context, id, want string) error {
	last := ""
	err := harness.Poll(ctx, 30*time.Second, fmt.Sprintf("order %s becomes %s", id, want), func() bool {
		o, err := d.order(ctx, id)
		if err != nil {
			last = err.Error()
			return false
		}
		last = o.Status
		return o.Status == want
	})
	if err != nil {
		return fmt.Errorf("%w (last: %s)", err, last)
	}
	return nil
}

// relayCrash restarts the relay with the failpoint, places an order, waits for the relay to die
// after creating the tasks, restarts it clean and shows that nothing was delivered twice.
func (d *demo) relayCrash(ctx context.Context) error {
	s := d.s
	// Let the first two orders' flows finish, so that the crashing relay's first batch is the new
	// order's order.created (events of other aggregates may sit in other shards).
	if err := d.waitSettled(ctx); err != nil {
		return err
	}
	if err := s.Restart(ctx, "relay", faults.EnvVar+"="+faults.RelayAfterEnqueue); err != nil {
		return err
	}
	id, err := d.place(ctx, 1, card("pm_card_visa"))
	if err != nil {
		return err
	}
	code, err := s.WaitExit(ctx, "relay", 20*time.Second)
	if err != nil {
		return fmt.Errorf("the relay did not crash (is faults.Hit(%q) called after a batch's tasks are created?): %w", faults.RelayAfterEnqueue, err)
	}
	unpublished, err := d.count(ctx, "orders", "SELECT COUNT(*) FROM OutboxEvents WHERE PublishedAt IS NULL")
	if err != nil {
		return err
	}
	say("relay died after creating the tasks (exit %d); orders outbox rows still unpublished: %d", code, unpublished)
	if err := harness.Poll(ctx, 30*time.Second, "fulfillment reserves the order from the task created before the crash", func() bool {
		r, err := s.Do(ctx, http.MethodGet, "fulfillment", "/v1/reservations/"+id, nil)
		return err == nil && r.Status == http.StatusOK
	}); err != nil {
		return err
	}
	say("the task created before the crash was delivered anyway: fulfillment reserved order %s", id)

	if err := s.Start(ctx, "relay"); err != nil {
		return err
	}
	say("relay restarted without the fault; it re-enqueues the unpublished rows")
	if err := d.waitStatus(ctx, id, "CONFIRMED"); err != nil {
		return err
	}
	say("order %s: CONFIRMED (inventory.reserved relayed by the restarted relay, then paid)", id)
	if err := d.waitSettled(ctx); err != nil {
		return err
	}
	ev, err := d.s.OutboxEvent(ctx, "orders", id, "order.created")
	if err != nil {
		return err
	}
	// The name the relay gave the task: re-creating it is what the restarted relay did.
	tc, err := s.TasksClient(ctx)
	if err != nil {
		return err
	}
	queue := harness.QueueName("fulfillment-inbox")
	name := relay.TaskName(queue, ev.ID, "fulfillment", 0) // the relay's own name for it: no replay yet
	_, err = tc.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queue, Task: &cloudtaskspb.Task{
		Name: name,
		MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
			Url: s.URL("fulfillment") + "/events", Headers: ev.Headers(), Body: ev.Payload,
			AuthorizationHeader: &cloudtaskspb.HttpRequest_OidcToken{OidcToken: &cloudtaskspb.OidcToken{
				ServiceAccountEmail: harness.ServiceAccount, Audience: s.URL("fulfillment")}},
		}},
	}})
	answer := status.Code(err).String()
	if status.Code(err) == codes.AlreadyExists {
		answer = "ALREADY_EXISTS (the restarted relay got the same answer: no second task)"
	}
	say("re-enqueue of order.created %s for fulfillment under the relay's task name …%s: %s", ev.ID[:8], name[len(name)-12:], answer)
	if status.Code(err) != codes.AlreadyExists {
		say("(expected ALREADY_EXISTS: the relay names its tasks differently, so the consumer's inbox de-duplicates instead)")
	}

	// At-least-once means a consumer may still see an event twice (e.g. after the name-reuse
	// window): deliver the same event once more under another task name.
	before, err := d.metric(ctx, "fulfillment", `outbox_consumer_events_total`, `outcome="duplicate"`)
	if err != nil {
		return err
	}
	ev.Source = "//spanmart/orders"
	_, err = tc.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queue, Task: &cloudtaskspb.Task{
		MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
			Url: s.URL("fulfillment") + "/events", Headers: ev.Headers(), Body: ev.Payload,
			AuthorizationHeader: &cloudtaskspb.HttpRequest_OidcToken{OidcToken: &cloudtaskspb.OidcToken{
				ServiceAccountEmail: harness.ServiceAccount, Audience: s.URL("fulfillment")}},
		}},
	}})
	if err != nil {
		return fmt.Errorf("redeliver order.created: %w", err)
	}
	var after float64
	if err := harness.Poll(ctx, 20*time.Second, "fulfillment counts the redelivery as a duplicate", func() bool {
		after, _ = d.metric(ctx, "fulfillment", `outbox_consumer_events_total`, `outcome="duplicate"`)
		return after > before
	}); err != nil {
		return err
	}
	say("a second delivery of the same event: fulfillment's outbox_consumer_events_total{outcome=\"duplicate\"} %v → %v, nothing reserved twice", before, after)
	return d.waitSettled(ctx)
}

func (d *demo) count(ctx context.Context, db, sql string) (int64, error) {
	var n int64
	err := d.s.DB(db).Single().Query(ctx, spanner.Statement{SQL: sql}).Do(func(r *spanner.Row) error { return r.Column(0, &n) })
	return n, err
}

func (d *demo) metric(ctx context.Context, process, name string, labels ...string) (float64, error) {
	r, err := d.s.Do(ctx, http.MethodGet, process, "/metrics", nil)
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, line := range strings.Split(string(r.Body), "\n") {
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if ok {
			var v float64
			fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v)
			sum += v
		}
	}
	return sum, nil
}

// waitSettled waits until every outbox is published and the orders and fulfillment queues are
// empty.
func (d *demo) waitSettled(ctx context.Context) error {
	last := ""
	err := harness.Poll(ctx, 30*time.Second, "every outbox published and the queues empty", func() bool {
		for _, db := range topology.Databases() {
			n, err := d.count(ctx, db, "SELECT COUNT(*) FROM OutboxEvents WHERE PublishedAt IS NULL")
			if err != nil || n > 0 {
				last = fmt.Sprintf("%s: %d unpublished (%v)", db, n, err)
				return false
			}
		}
		qs, err := d.s.Queues(ctx)
		if err != nil {
			last = err.Error()
			return false
		}
		for _, id := range []string{"orders-inbox", "fulfillment-inbox", "gateway-inbox"} {
			if q := qs[id]; q.Depth+q.InFlight > 0 {
				last = fmt.Sprintf("%s: depth %d", id, q.Depth)
				return false
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("%w (last: %s)", err, last)
	}
	return nil
}

func table(header string) *tabwriter.Writer {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, header)
	return w
}

func (d *demo) printOrders(ctx context.Context) error {
	fmt.Println("\n  ORDERS (GET /v1/orders/{id} on orders)")
	w := table("  ORDER\tSTATUS\tREASON\tLINES\tTOTAL\tTIMELINE")
	for _, id := range d.orders {
		o, err := d.order(ctx, id)
		if err != nil {
			return err
		}
		reason := "-"
		if o.CancelReason != nil {
			reason = *o.CancelReason
		}
		var lines, tl []string
		for _, l := range o.Lines {
			lines = append(lines, fmt.Sprintf("%d×%s", l.Quantity, l.SKU))
		}
		for _, e := range o.Timeline {
			arrow := "→"
			if e.Direction == "consumed" {
				arrow = "←"
			}
			tl = append(tl, fmt.Sprintf("%s%s v%d", arrow, e.EventType, e.AggregateVersion))
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%d %s\t%s\n", o.ID, o.Status, reason, strings.Join(lines, ","), o.TotalMinor, o.Currency, strings.Join(tl, "  "))
	}
	return w.Flush()
}

func (d *demo) printStock(ctx context.Context) error {
	var inv struct {
		Items []struct {
			SKU       string `json:"sku"`
			OnHand    int64  `json:"on_hand"`
			Reserved  int64  `json:"reserved"`
			Available int64  `json:"available"`
		} `json:"items"`
	}
	if err := d.s.GetJSON(ctx, "fulfillment", "/v1/inventory", &inv); err != nil {
		return err
	}
	fmt.Println("\n  STOCK (GET /v1/inventory on fulfillment)")
	w := table("  SKU\tON HAND\tRESERVED\tAVAILABLE")
	for _, i := range inv.Items {
		fmt.Fprintf(w, "  %s\t%d\t%d\t%d\n", i.SKU, i.OnHand, i.Reserved, i.Available)
	}
	return w.Flush()
}

func (d *demo) printReservations(ctx context.Context) error {
	fmt.Println("\n  RESERVATIONS (GET /v1/reservations/{order_id} on fulfillment)")
	w := table("  ORDER\tSTATUS\tVERSION\tLINES")
	for _, id := range d.orders {
		var res struct {
			Status  string `json:"status"`
			Version int64  `json:"version"`
			Lines   []struct {
				SKU      string `json:"sku"`
				Quantity int64  `json:"quantity"`
				Status   string `json:"status"`
			} `json:"lines"`
		}
		r, err := d.s.Do(ctx, http.MethodGet, "fulfillment", "/v1/reservations/"+id, nil)
		if err != nil {
			return err
		}
		if r.Status == http.StatusNotFound {
			fmt.Fprintf(w, "  %s\t(none)\t\t\n", id)
			continue
		}
		if r.Status != http.StatusOK {
			return fmt.Errorf("GET /v1/reservations/%s: %s", id, r)
		}
		if err := r.JSON(&res); err != nil {
			return err
		}
		var lines []string
		for _, l := range res.Lines {
			lines = append(lines, fmt.Sprintf("%d×%s %s", l.Quantity, l.SKU, l.Status))
		}
		if len(lines) == 0 {
			lines = []string{"-"}
		}
		fmt.Fprintf(w, "  %s\t%s\t%d\t%s\n", id, res.Status, res.Version, strings.Join(lines, ", "))
	}
	return w.Flush()
}

func (d *demo) printOutbox(ctx context.Context) error {
	r, err := d.s.Do(ctx, http.MethodGet, "relay", "/v1/outbox", nil)
	if err != nil {
		return err
	}
	if r.Status != http.StatusOK {
		return fmt.Errorf("GET /v1/outbox: %s", r)
	}
	type src struct {
		Source                  string  `json:"source"`
		Pending                 int64   `json:"pending"`
		OldestPendingAgeSeconds float64 `json:"oldest_pending_age_seconds"`
		Quarantined             int64   `json:"quarantined"`
		Shards                  []struct {
			Owner string `json:"owner"`
			Live  bool   `json:"live"`
		} `json:"shards"`
	}
	var list []src
	if err := json.Unmarshal(r.Body, &list); err != nil {
		var wrapped struct {
			Sources []src `json:"sources"`
		}
		if err := r.JSON(&wrapped); err != nil {
			return err
		}
		list = wrapped.Sources
	}
	fmt.Println("\n  OUTBOX (GET /v1/outbox on the relay; events per database from OutboxEvents)")
	w := table("  SOURCE\tPENDING\tOLDEST PENDING\tQUARANTINED\tLEASED SHARDS\tEVENTS (published/total)")
	for _, st := range list {
		live := 0
		for _, sh := range st.Shards {
			if sh.Live {
				live++
			}
		}
		db := st.Source
		if svc, ok := topology.Lookup(st.Source); ok {
			db = svc.Database
		}
		events, err := d.eventCounts(ctx, db)
		if err != nil {
			events = err.Error()
		}
		fmt.Fprintf(w, "  %s\t%d\t%.1fs\t%d\t%d/%d\t%s\n", st.Source, st.Pending, st.OldestPendingAgeSeconds, st.Quarantined, live, len(st.Shards), events)
	}
	return w.Flush()
}

// eventCounts summarises a database's outbox as "type published/total, ...".
func (d *demo) eventCounts(ctx context.Context, db string) (string, error) {
	var parts []string
	err := d.s.DB(db).Single().Query(ctx, spanner.Statement{SQL: `SELECT EventType, COUNTIF(PublishedAt IS NOT NULL), COUNT(*)
		FROM OutboxEvents GROUP BY EventType ORDER BY EventType`}).Do(func(r *spanner.Row) error {
		var typ string
		var pub, total int64
		if err := r.Columns(&typ, &pub, &total); err != nil {
			return err
		}
		parts = append(parts, fmt.Sprintf("%s %d/%d", typ, pub, total))
		return nil
	})
	if len(parts) == 0 {
		return "-", err
	}
	return strings.Join(parts, ", "), err
}

// check verifies the outcome the demo promises: the card (2), the paid konbini slip (1) and the
// relay-crash order (1) confirmed and holding their stock, the declined, expired and out-of-stock
// orders cancelled and holding none, nothing emitted twice.
func (d *demo) check(ctx context.Context) error {
	var problems []string
	want := []string{"CONFIRMED", "CANCELLED", "CONFIRMED", "CANCELLED", "CANCELLED", "CONFIRMED"}
	for i, id := range d.orders {
		o, err := d.order(ctx, id)
		if err != nil {
			return err
		}
		if o.Status != want[i] {
			problems = append(problems, fmt.Sprintf("order %s is %s, want %s", id, o.Status, want[i]))
		}
	}
	held, err := d.count(ctx, "fulfillment", "SELECT IFNULL(SUM(Quantity), 0) FROM Reservations WHERE Status = 'HELD'")
	if err != nil {
		return err
	}
	reserved, err := d.count(ctx, "fulfillment", "SELECT Reserved FROM Inventory WHERE Sku = 'A1'")
	if err != nil {
		return err
	}
	if held != 4 || reserved != 4 {
		problems = append(problems, fmt.Sprintf("A1: %d held in reservations, %d reserved in stock; want 4 and 4", held, reserved))
	}
	for _, db := range []string{"orders", "fulfillment", "payments"} {
		dup, err := d.count(ctx, db, "SELECT COUNT(*) FROM (SELECT AggregateId, EventType FROM OutboxEvents GROUP BY AggregateId, EventType HAVING COUNT(*) > 1)")
		if err != nil {
			return err
		}
		if dup > 0 {
			problems = append(problems, fmt.Sprintf("%s emitted %d events twice", db, dup))
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}
