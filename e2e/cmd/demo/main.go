// Command demo tells the order saga of Spanmart end to end on a stack of its own (free ports, a
// temporary state directory, the payment sandbox and a mail server in-process, so it runs on a
// fresh clone and beside a running dev stack). It is the classic saga lab's story:
//
//  1. product A1 with 5 in stock at ¥10,000; ali's PayPay wallet holds ¥50,000, sara's ¥2,000;
//  2. ali orders 2 (wallet): reserved, authorized, CONFIRMED; the warehouse ships it, the money
//     is captured only then, COMPLETED;
//  3. sara orders 1 (wallet): insufficient funds, the stock released, CANCELLED;
//  4. ali orders 10: out of stock, CANCELLED, the stock untouched;
//  5. kenji orders 1 to pay at a konbini: the order waits with its slip (e-mailed) until he pays
//     at the store (the sandbox), then CONFIRMED, shipped, COMPLETED;
//  6. mia orders 1 by card and cancels it once confirmed: CANCELLING while the authorization is
//     voided and the stock released, then CANCELLED;
//  7. the relay crashes mid-batch (SPANMART_FAULTS=relay.after_enqueue: after creating the tasks,
//     before marking them published), is restarted clean, and the duplicates are visibly skipped;
//  8. why the outbox exists: one order written the naive way (straight into the database, no
//     outbox row, as a dual-writing service that died before publishing would leave it) stays
//     PENDING, nothing downstream hears of it, and the stuck-order detector flags it;
//  9. it prints every order with its timeline, the stock, the payments, the shipments and the
//     e-mails sent, and checks that the final state is consistent across the four databases
//     (orders' reconciliation, and each e-mail once).
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
	"github.com/spanmart/spanmart/gen/dao/ordersdb"
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
	orders []string          // ids, in the order they were placed
	want   map[string]string // order id → the status it must end in
	owner  map[string]string // order id → its customer, who reads and cancels it
	naive  string            // the order written without an outbox row
}

// as returns the Authorization header of customer, signed in (the stack's stand-in of Identity
// Platform mints the token, as the customer's app would get it after signing in).
func (d *demo) as(ctx context.Context, customer string) (string, error) {
	tok, err := d.s.CustomerToken(ctx, customer)
	return "Bearer " + tok, err
}

func step(format string, args ...any) { fmt.Printf("\n==> "+format+"\n", args...) }
func say(format string, args ...any)  { fmt.Printf("    "+format+"\n", args...) }

func run(ctx context.Context, keep, verbose bool) (err error) {
	opts := harness.Options{
		KeepState: keep,
		Seed:      []harness.Product{{SKU: "A1", Name: "Anchor mug", PriceMinor: 10000, Currency: "JPY", OnHand: 5}},
		// The detector's threshold for PENDING, short enough for the naive order to be flagged
		// while the demo watches; orders are compared across the services a second after they
		// settle.
		Env: map[string][]string{"orders": {"STUCK_AFTER=PENDING=3s", "RECONCILE_SETTLE=1s"}},
	}
	if verbose {
		opts.Logf = func(f string, a ...any) { fmt.Printf("    [harness] "+f+"\n", a...) }
	}
	step("starting the stack: both emulators in-process, 4 databases, 4 queues, 5 processes, the payment sandbox, a mail server and the customers' sign-in (first run builds them)")
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
	d := &demo{s: s, want: map[string]string{}, owner: map[string]string{}}

	step("catalog: product A1; the wallets")
	if err := d.printStock(ctx); err != nil {
		return err
	}
	for _, c := range []string{"ali", "sara"} {
		avail, _ := s.Paysim.WalletBalance(c)
		say("%s's PayPay wallet: ¥%d", c, avail)
	}

	step("ali orders 2 × A1, paid from his wallet")
	ali, err := d.place(ctx, "ali", 2, wallet)
	if err != nil {
		return err
	}
	if err := d.waitStatus(ctx, ali, "CONFIRMED"); err != nil {
		return err
	}
	say("order %s: reserved, authorized (¥20,000 held in the wallet), CONFIRMED", ali)
	if err := d.shipAndComplete(ctx, ali); err != nil {
		return err
	}

	step("sara orders 1 × A1, paid from her wallet (¥2,000 for a ¥10,000 order)")
	sara, err := d.place(ctx, "sara", 1, wallet)
	if err != nil {
		return err
	}
	if err := d.waitStatus(ctx, sara, "CANCELLED"); err != nil {
		return err
	}
	say("order %s: CANCELLED (%s), its reservation released", sara, d.reason(ctx, sara))

	step("ali orders 10 × A1 (3 left)")
	big, err := d.place(ctx, "ali", 10, wallet)
	if err != nil {
		return err
	}
	if err := d.waitStatus(ctx, big, "CANCELLED"); err != nil {
		return err
	}
	say("order %s: CANCELLED (%s), the stock untouched", big, d.reason(ctx, big))

	if err := d.konbini(ctx); err != nil {
		return err
	}
	if err := d.customerCancel(ctx); err != nil {
		return err
	}

	step("relay crash mid-batch: restart the relay with %s=%s", faults.EnvVar, faults.RelayAfterEnqueue)
	if err := d.relayCrash(ctx); err != nil {
		return err
	}
	if err := d.naiveOrder(ctx); err != nil {
		return err
	}

	step("final state")
	if err := d.waitSettled(ctx); err != nil {
		return err
	}
	for _, print := range []func(context.Context) error{d.printOrders, d.printStock, d.printPayments, d.printShipments, d.printMail, d.printOutbox} {
		if err := print(ctx); err != nil {
			return err
		}
	}
	return d.check(ctx)
}

var wallet = map[string]any{"method": "wallet"}

func card(pm string) map[string]any { return map[string]any{"method": "card", "payment_method": pm} }

// konbini shows kenji's konbini order: it waits with its slip until he pays at the store days
// later, then completes like any other.
func (d *demo) konbini(ctx context.Context) error {
	step("kenji orders 1 × A1, to be paid at a convenience store (konbini)")
	id, err := d.place(ctx, "kenji", 1, map[string]any{"method": "konbini", "store": "lawson"})
	if err != nil {
		return err
	}
	var o orderView
	if err := harness.Poll(ctx, 30*time.Second, "the slip reaches order "+id, func() bool {
		o, err = d.order(ctx, id)
		return err == nil && o.Payment.Instructions != nil
	}); err != nil {
		return err
	}
	in := o.Payment.Instructions
	say("order %s: %s, slip for %s: payment code %s, pay before %s (e-mailed to kenji)", id, o.Status, in.Store, in.PaymentCode, in.ExpiresAt)
	var providerID string
	if err := d.s.DB("payments").Single().Query(ctx, spanner.Statement{
		SQL: "SELECT ProviderPaymentId FROM Payments WHERE OrderId = @id", Params: map[string]any{"id": id},
	}).Do(func(r *spanner.Row) error { return r.Column(0, &providerID) }); err != nil {
		return err
	}
	if _, err := d.s.Paysim.AdvanceClock(24 * time.Hour); err != nil {
		return err
	}
	if err := d.s.Paysim.PayKomojuSlip(providerID); err != nil {
		return err
	}
	say("a day later kenji pays at the store (sandbox: POST /_sandbox/komoju/payments/%s/pay)", providerID)
	if err := d.waitStatus(ctx, id, "CONFIRMED"); err != nil {
		return err
	}
	say("order %s: KOMOJU's webhook → payment.authorized → CONFIRMED", id)
	return d.shipAndComplete(ctx, id)
}

// shipAndComplete has the warehouse ship an order's shipment (POST /v1/shipments/{id}/ship on
// fulfillment with the warehouse account's ID token; the dev stack's simulated carrier ships by
// itself) and waits for the capture.
func (d *demo) shipAndComplete(ctx context.Context, id string) error {
	var list struct {
		Items []struct {
			ShipmentID string `json:"shipment_id"`
		} `json:"items"`
	}
	if err := harness.Poll(ctx, 30*time.Second, "order "+id+" has a shipment", func() bool {
		err := d.s.GetJSON(ctx, "fulfillment", "/v1/shipments?order_id="+id, &list)
		return err == nil && len(list.Items) == 1
	}); err != nil {
		return err
	}
	sh := list.Items[0].ShipmentID
	body := map[string]string{"carrier": "yamato", "tracking_number": "YT-" + id[:8]}
	r, err := d.s.WarehouseDo(ctx, http.MethodPost, "/v1/shipments/"+sh+"/ship", body)
	if err != nil || r.Status != http.StatusOK {
		return fmt.Errorf("ship %s: %v %v", sh, r, err)
	}
	say("the warehouse ships it: POST /v1/shipments/%s/ship (yamato YT-%s) with %s's ID token → shipment.shipped, the stock leaves",
		sh, id[:8], harness.Warehouse)
	if err := d.waitStatus(ctx, id, "COMPLETED"); err != nil {
		return err
	}
	say("order %s: SHIPPED → order.shipped → the gateway captures → payment.captured → COMPLETED", id)
	d.want[id] = "COMPLETED"
	return nil
}

// customerCancel shows mia cancelling her confirmed order, and the compensations it waits for.
func (d *demo) customerCancel(ctx context.Context) error {
	step("mia orders 1 × A1 by card, then cancels it once it is confirmed")
	id, err := d.place(ctx, "mia", 1, card("pm_card_visa"))
	if err != nil {
		return err
	}
	if err := d.waitStatus(ctx, id, "CONFIRMED"); err != nil {
		return err
	}
	auth, err := d.as(ctx, "mia")
	if err != nil {
		return err
	}
	r, err := d.s.Do(ctx, http.MethodPost, "orders", "/v1/orders/"+id+"/cancel", nil, "Authorization", auth, "Idempotency-Key", uuid.NewString())
	if err != nil || r.Status != http.StatusAccepted {
		return fmt.Errorf("cancel %s: %v %v", id, r, err)
	}
	var o orderView
	if err := r.JSON(&o); err != nil {
		return err
	}
	say("POST /v1/orders/%s/cancel → %d: %s, waiting for %s", id, r.Status, o.Status, compensations(o))
	if err := d.waitStatus(ctx, id, "CANCELLED"); err != nil {
		return err
	}
	o, err = d.order(ctx, id)
	if err != nil {
		return err
	}
	say("order %s: CANCELLED once both were confirmed: %s", id, compensations(o))
	d.want[id] = "CANCELLED"
	return nil
}

// compensations prints what a cancellation waits for: "stock (pending), payment (done: voided)".
func compensations(o orderView) string {
	var parts []string
	for _, c := range o.Compensations {
		p := c.Kind + " (" + c.State
		if c.Outcome != "" {
			p += ": " + c.Outcome
		}
		parts = append(parts, p+")")
	}
	return strings.Join(parts, ", ")
}

// naiveOrder writes one order the way a service without an outbox would (the order row, no event,
// as if the process died before it published) and shows that nothing downstream hears of it, and
// that the stuck-order detector flags it.
func (d *demo) naiveOrder(ctx context.Context) error {
	step("why the outbox: an order written the naive way (the row only, no outbox event)")
	id := uuid.NewString()
	row := ordersdb.Order{OrderId: id, CustomerId: "naive", Status: "PENDING", Currency: "JPY", TotalMinor: 10000, Version: 1}
	row.SetCommitTimestamps()
	item := ordersdb.OrderItem{OrderId: id, LineNo: 1, Sku: "A1", Quantity: 1, UnitPriceMinor: 10000}
	if _, err := d.s.DB("orders").Apply(ctx, []*spanner.Mutation{row.Insert(), item.Insert()}); err != nil {
		return err
	}
	d.orders, d.naive, d.owner[id] = append(d.orders, id), id, "naive"
	say("order %s inserted PENDING with its line, and no order.created: fulfillment, the gateway and the mail never hear of it", id)
	var found bool
	if err := harness.Poll(ctx, 30*time.Second, "the stuck-order detector flags order "+id, func() bool {
		a, err := d.s.Audit(ctx)
		if err != nil {
			return false
		}
		for _, o := range a.Stuck.Orders {
			if o.OrderID == id {
				found = true
				say("POST /admin/audit on orders: order %s stuck %s for %s, waiting for %s", id, o.Status, o.For, o.WaitingFor)
			}
		}
		return found
	}); err != nil {
		return err
	}
	d.want[id] = "PENDING"
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

// place posts customer's order of qty × A1 paid as payment and returns its id.
func (d *demo) place(ctx context.Context, customer string, qty int64, payment map[string]any) (string, error) {
	body := map[string]any{
		"customer_id": customer, "email": customer + "@example.com",
		"lines": []map[string]any{{"sku": "A1", "quantity": qty}}, "payment": payment,
	}
	auth, err := d.as(ctx, customer)
	if err != nil {
		return "", err
	}
	r, err := d.s.Do(ctx, http.MethodPost, "orders", "/v1/orders", body, "Authorization", auth, "Idempotency-Key", uuid.NewString())
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
	d.owner[o.ID] = customer
	d.want[o.ID] = "CANCELLED" // until a step says otherwise
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
	Compensations []struct {
		Kind    string `json:"kind"`
		State   string `json:"state"`
		Outcome string `json:"outcome"`
	} `json:"compensations"`
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

// order reads order id as its customer.
func (d *demo) order(ctx context.Context, id string) (orderView, error) {
	var o orderView
	auth, err := d.as(ctx, d.owner[id])
	if err != nil {
		return o, err
	}
	r, err := d.s.Do(ctx, http.MethodGet, "orders", "/v1/orders/"+id, nil, "Authorization", auth)
	if err != nil {
		return o, err
	}
	if r.Status != http.StatusOK {
		return o, fmt.Errorf("GET /v1/orders/%s: %s", id, r)
	}
	return o, r.JSON(&o)
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
	id, err := d.place(ctx, "noor", 1, card("pm_card_visa"))
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
	say("order %s: CONFIRMED (inventory.reserved relayed by the restarted relay, then paid); it waits for the warehouse", id)
	d.want[id] = "CONFIRMED"
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

// waitSettled waits until every outbox is published, every queue is empty and every e-mail is
// sent.
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
		if n, err := d.count(ctx, "notifications", "SELECT COUNT(*) FROM Notifications WHERE Status = 'PENDING'"); err != nil || n > 0 {
			last = fmt.Sprintf("%d e-mails pending (%v)", n, err)
			return false
		}
		qs, err := d.s.Queues(ctx)
		if err != nil {
			last = err.Error()
			return false
		}
		for _, id := range topology.Queues() {
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
	fmt.Println("\n  ORDERS (GET /v1/orders/{id} on orders, as each order's customer)")
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

func (d *demo) printPayments(ctx context.Context) error {
	token, err := d.s.OperatorToken(ctx, topology.Gateway)
	if err != nil {
		return err
	}
	fmt.Println("\n  PAYMENTS (GET /admin/payments?order_id= on the gateway, as the operator)")
	w := table("  ORDER\tMETHOD\tPROVIDER\tSTATUS\tREASON\tAMOUNT")
	for _, id := range d.orders {
		var list struct {
			Payments []struct {
				Method        string `json:"method"`
				Provider      string `json:"provider"`
				Status        string `json:"status"`
				FailureReason string `json:"failure_reason"`
				AmountMinor   int64  `json:"amount_minor"`
				Currency      string `json:"currency"`
			} `json:"payments"`
		}
		r, err := d.s.Do(ctx, http.MethodGet, topology.Gateway, "/admin/payments?order_id="+id, nil, "Authorization", "Bearer "+token)
		if err != nil {
			return err
		}
		if r.Status != http.StatusOK || r.JSON(&list) != nil {
			return fmt.Errorf("GET /admin/payments: %s", r)
		}
		if len(list.Payments) == 0 {
			fmt.Fprintf(w, "  %s\t(none)\t\t\t\t\n", id)
		}
		for _, p := range list.Payments {
			fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\t%d %s\n", id, p.Method, p.Provider, p.Status, dash(p.FailureReason), p.AmountMinor, p.Currency)
		}
	}
	return w.Flush()
}

func (d *demo) printShipments(ctx context.Context) error {
	fmt.Println("\n  SHIPMENTS (GET /v1/shipments?order_id= on fulfillment)")
	w := table("  ORDER\tSHIPMENT\tSTATUS\tCARRIER\tTRACKING")
	for _, id := range d.orders {
		var list struct {
			Items []struct {
				ShipmentID     string  `json:"shipment_id"`
				Status         string  `json:"status"`
				Carrier        *string `json:"carrier"`
				TrackingNumber *string `json:"tracking_number"`
			} `json:"items"`
		}
		if err := d.s.GetJSON(ctx, "fulfillment", "/v1/shipments?order_id="+id, &list); err != nil {
			return err
		}
		if len(list.Items) == 0 {
			fmt.Fprintf(w, "  %s\t(none)\t\t\t\n", id)
		}
		for _, sh := range list.Items {
			fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\n", id, sh.ShipmentID, sh.Status, deref(sh.Carrier), deref(sh.TrackingNumber))
		}
	}
	return w.Flush()
}

// printMail lists the e-mails the mail server accepted, oldest first.
func (d *demo) printMail(context.Context) error {
	fmt.Println("\n  E-MAILS (accepted by the mail server over SMTP)")
	w := table("  TO\tORDER\tTEMPLATE\tSUBJECT")
	for _, m := range d.s.Mail.Messages() {
		subject, _ := m.Subject()
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", strings.Join(m.To, ","), m.Header.Get("X-Spanmart-Order"), m.Header.Get("X-Spanmart-Template"), subject)
	}
	return w.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func deref(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

func (d *demo) printOutbox(ctx context.Context) error {
	r, err := d.s.AdminDo(ctx, http.MethodGet, "relay", "/v1/outbox", nil)
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

// check verifies the outcome the demo promises: each order in the state its step left it, the
// stock (ali's 2 and kenji's 1 shipped, noor's 1 held), each e-mail sent once, nothing emitted
// twice, and orders' reconciliation finding every settled order consistent across the services.
func (d *demo) check(ctx context.Context) error {
	var problems []string
	for _, id := range d.orders {
		o, err := d.order(ctx, id)
		if err != nil {
			return err
		}
		if o.Status != d.want[id] {
			problems = append(problems, fmt.Sprintf("order %s is %s, want %s", id, o.Status, d.want[id]))
		}
	}
	onHand, err := d.count(ctx, "fulfillment", "SELECT OnHand FROM Inventory WHERE Sku = 'A1'")
	if err != nil {
		return err
	}
	reserved, err := d.count(ctx, "fulfillment", "SELECT Reserved FROM Inventory WHERE Sku = 'A1'")
	if err != nil {
		return err
	}
	if onHand != 2 || reserved != 1 {
		problems = append(problems, fmt.Sprintf("A1: %d on hand, %d reserved; want 2 and 1", onHand, reserved))
	}
	seen := map[string]int{}
	for _, m := range d.s.Mail.Messages() {
		seen[m.Header.Get("X-Spanmart-Order")+" "+m.Header.Get("X-Spanmart-Template")]++
	}
	for k, n := range seen {
		if n != 1 {
			problems = append(problems, fmt.Sprintf("e-mail %s sent %d times", k, n))
		}
	}
	if len(seen) != 10 {
		problems = append(problems, fmt.Sprintf("%d e-mails, want 10 (ali 2, sara 1, the order of 10 1, kenji 3, mia 2, noor 1)", len(seen)))
	}
	for _, db := range topology.Databases() {
		dup, err := d.count(ctx, db, "SELECT COUNT(*) FROM (SELECT AggregateId, EventType FROM OutboxEvents GROUP BY AggregateId, EventType HAVING COUNT(*) > 1)")
		if err != nil {
			return err
		}
		if dup > 0 {
			problems = append(problems, fmt.Sprintf("%s emitted %d events twice", db, dup))
		}
	}
	var a harness.AuditReport
	settled := len(d.orders) - 1 // every order but the naive one, which never left PENDING
	if err := harness.Poll(ctx, 30*time.Second, "orders' reconciliation has compared every settled order", func() bool {
		a, err = d.s.Audit(ctx)
		return err == nil && a.Reconciliation.Checked != nil && *a.Reconciliation.Checked >= settled
	}); err != nil {
		return err
	}
	say("reconciliation (POST /admin/audit on orders): %d orders compared with fulfillment and the gateway, %d mismatches; stuck: %d (the naive order)",
		*a.Reconciliation.Checked, len(a.Reconciliation.Mismatches), len(a.Stuck.Orders))
	for _, m := range a.Reconciliation.Mismatches {
		problems = append(problems, fmt.Sprintf("reconciliation: order %s %s: %s", m.OrderID, m.Check, strings.Join(m.Problems, "; ")))
	}
	if a.Reconciliation.Partial != nil && *a.Reconciliation.Partial {
		problems = append(problems, "the reconciliation could not reach every service")
	}
	if len(a.Stuck.Orders) != 1 || a.Stuck.Orders[0].OrderID != d.naive {
		problems = append(problems, fmt.Sprintf("stuck orders %+v, want the naive order only", a.Stuck.Orders))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}
