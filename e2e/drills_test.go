package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/spanmart/spanmart/e2e/harness"
	"github.com/spanmart/spanmart/pkg/faults"
	"github.com/spanmart/spanmart/pkg/outboxlib"
)

// The failure drills of issue 5. Each starts its own stack (product A1 with 5 in stock), breaks
// something, and asserts the final state of every database involved once the flow has come to rest.

// (a) An order that fits is reserved, paid (a card that authorizes) and confirmed; one that does
// not is cancelled as out of stock and leaves the stock untouched.
func TestHappyPath(t *testing.T) {
	s := harness.Start(t, harness.Options{})
	a := placeOrder(t, s, "A1", 2)
	waitStatus(t, s, a, "CONFIRMED")
	b := placeOrder(t, s, "A1", 10)
	waitStatus(t, s, b, "CANCELLED out_of_stock")

	checkSnapshot(t, wantSnapshot(5, placed{a, 2, reserved}, placed{b, 10, rejected}), waitSettled(t, s))
	checkNoDuplicateEvents(t, s)

	// The public API tells the same story.
	if o := getOrder(t, s, a); o.Status != "CONFIRMED" {
		t.Errorf("GET /v1/orders/%s: status %s", a, o.Status)
	} else {
		want := []string{"consumed:inventory.reserved", "consumed:payment.authorized", "emitted:order.awaiting_payment", "emitted:order.confirmed", "emitted:order.created"}
		if got := timelineTypes(o); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("timeline of %s: %v, want %v", a, got, want)
		}
	}
	if o := getOrder(t, s, b); o.Status != "CANCELLED" || o.CancelReason == nil || *o.CancelReason != "out_of_stock" {
		t.Errorf("GET /v1/orders/%s: %+v, want CANCELLED out_of_stock", b, o)
	}
}

// (b) orders dies inside the create-order transaction, after buffering its writes: the client sees
// a broken connection, and neither the order nor its event exists. A retry with the same
// Idempotency-Key after the restart creates the order once.
func TestOrdersDiesBeforeCommit(t *testing.T) {
	s := harness.Start(t, harness.Options{})
	ctx := context.Background()
	if err := s.Restart(ctx, "orders", faults.EnvVar+"="+faults.OrdersBeforeCommit); err != nil {
		t.Fatal(err)
	}
	key, body := uuid.NewString(), orderRequest("cust-b", "A1", 2)
	if r, err := postOrder(ctx, s, key, body); err == nil {
		t.Fatalf("POST /v1/orders answered %s although orders was to die before commit (is faults.Hit(%q) called?)", r, faults.OrdersBeforeCommit)
	}
	if code, err := s.WaitExit(ctx, "orders", 10*time.Second); err != nil || code != faults.ExitCode {
		t.Fatalf("orders exit: %d, %v; want %d", code, err, faults.ExitCode)
	}
	for _, table := range []string{"Orders", "OrderItems", "OutboxEvents", "IdempotencyKeys"} {
		if n := count(t, s, "orders", "SELECT COUNT(*) FROM "+table, nil); n != 0 {
			t.Errorf("orders.%s has %d rows after a crash before commit, want 0", table, n)
		}
	}

	if err := s.Start(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	r, err := postOrder(ctx, s, key, body)
	if err != nil || (r.Status != http.StatusCreated && r.Status != http.StatusOK) {
		t.Fatalf("retry of POST /v1/orders: %v %v", r, err)
	}
	var o order
	if err := r.JSON(&o); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, s, o.ID, "CONFIRMED") // its resting state: AWAITING_PAYMENT lasts only until the card is authorized
	checkSnapshot(t, wantSnapshot(5, placed{o.ID, 2, reserved}), waitSettled(t, s))
}

// (c) orders dies right after the commit, before answering: the client sees an error, yet the order
// exists and its event is delivered; the retry with the same Idempotency-Key returns that order.
func TestOrdersDiesAfterCommit(t *testing.T) {
	s := harness.Start(t, harness.Options{})
	ctx := context.Background()
	if err := s.Restart(ctx, "orders", faults.EnvVar+"="+faults.OrdersAfterCommit); err != nil {
		t.Fatal(err)
	}
	key, body := uuid.NewString(), orderRequest("cust-c", "A1", 2)
	if r, err := postOrder(ctx, s, key, body); err == nil {
		t.Fatalf("POST /v1/orders answered %s although orders was to die after commit (is faults.Hit(%q) called?)", r, faults.OrdersAfterCommit)
	}
	if code, err := s.WaitExit(ctx, "orders", 10*time.Second); err != nil || code != faults.ExitCode {
		t.Fatalf("orders exit: %d, %v; want %d", code, err, faults.ExitCode)
	}
	rows := query(t, s, "orders", "SELECT OrderId FROM Orders", nil)
	if len(rows) != 1 {
		t.Fatalf("%d orders after a crash right after commit, want 1", len(rows))
	}
	id := rows[0][0]
	// The event is delivered while orders is down: fulfillment reserves the stock.
	harness.Eventually(t, "fulfillment reserves the order's stock while orders is down", func() bool {
		n, err := countErr(s, "fulfillment", "SELECT COUNT(*) FROM Reservations WHERE OrderId = @id", map[string]any{"id": id})
		return err == nil && n == 1
	})

	if err := s.Start(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	r, err := postOrder(ctx, s, key, body)
	if err != nil || (r.Status != http.StatusCreated && r.Status != http.StatusOK) {
		t.Fatalf("retry of POST /v1/orders: %v %v", r, err)
	}
	var o order
	if err := r.JSON(&o); err != nil {
		t.Fatal(err)
	}
	if o.ID != id {
		t.Errorf("the retry returned order %s, want the committed %s", o.ID, id)
	}
	waitStatus(t, s, id, "CONFIRMED")
	checkSnapshot(t, wantSnapshot(5, placed{id, 2, reserved}), waitSettled(t, s))
}

// (d) The relay dies after creating a batch's tasks, before marking them published: the restarted
// relay enqueues the same rows again (ALREADY_EXISTS), consumers absorb any duplicate, and there is
// exactly one reservation.
func TestRelayDiesAfterEnqueue(t *testing.T) {
	s := harness.Start(t, harness.Options{})
	ctx := context.Background()
	if err := s.Restart(ctx, "relay", faults.EnvVar+"="+faults.RelayAfterEnqueue); err != nil {
		t.Fatal(err)
	}
	id := placeOrder(t, s, "A1", 2)
	if code, err := s.WaitExit(ctx, "relay", 20*time.Second); err != nil || code != faults.ExitCode {
		t.Fatalf("relay exit: %d, %v; want %d (is faults.Hit(%q) called?)", code, err, faults.ExitCode, faults.RelayAfterEnqueue)
	}
	// The order's order.created row was enqueued and never marked. (Later rows of the order may be
	// unpublished too: the relay creates a batch's tasks one per subscriber and dies after the
	// last, and the first, delivered at once, can carry the saga a hop on meanwhile.)
	if n := count(t, s, "orders", "SELECT COUNT(*) FROM OutboxEvents WHERE PublishedAt IS NULL AND EventType = 'order.created' AND AggregateId = @id",
		map[string]any{"id": id}); n != 1 {
		t.Errorf("%d unpublished order.created rows of the order after the relay died before marking, want 1", n)
	}
	// The task it created is delivered anyway.
	harness.Eventually(t, "fulfillment reserves the stock from the task created before the crash", func() bool {
		n, err := countErr(s, "fulfillment", "SELECT COUNT(*) FROM Reservations WHERE OrderId = @id", map[string]any{"id": id})
		return err == nil && n == 1
	})

	if err := s.Start(ctx, "relay"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, s, id, "CONFIRMED")
	checkSnapshot(t, wantSnapshot(5, placed{id, 2, reserved}), waitSettled(t, s))
	checkNoDuplicateEvents(t, s)
}

// (e) The same event delivered twice at the same moment (two tasks, different names, same event
// id and headers): one reservation, the other delivery is a duplicate. The relay's own delivery of
// it later is a third, also absorbed.
func TestConcurrentDuplicate(t *testing.T) {
	s := harness.Start(t, harness.Options{})
	ctx := context.Background()
	s.Stop("relay")
	id := placeOrder(t, s, "A1", 2)
	ev := outboxEvent(t, s, "orders", id, "order.created")
	at := time.Now().Add(500 * time.Millisecond)
	deliver(t, s, "fulfillment", "fulfillment-inbox", ev, "dup-a-"+ev.ID, at)
	deliver(t, s, "fulfillment", "fulfillment-inbox", ev, "dup-b-"+ev.ID, at)
	harness.Until(t, "both deliveries acknowledged", func() (bool, string) {
		qs, err := queues(s)
		if err != nil {
			return false, err.Error()
		}
		q := qs["fulfillment-inbox"]
		return q.Depth == 0 && q.InFlight == 0, fmt.Sprintf("depth %d in flight %d", q.Depth, q.InFlight)
	})
	if n := count(t, s, "fulfillment", "SELECT COUNT(*) FROM Reservations WHERE OrderId = @id", map[string]any{"id": id}); n != 1 {
		t.Errorf("%d reservations after two concurrent deliveries, want 1", n)
	}
	if n := count(t, s, "fulfillment", "SELECT COUNT(*) FROM OutboxEvents", nil); n != 1 {
		t.Errorf("fulfillment emitted %d events after two concurrent deliveries, want 1", n)
	}
	if dup, err := metric(s, "fulfillment", "outbox_consumer_events_total", `outcome="duplicate"`); err != nil || dup < 1 {
		t.Errorf("fulfillment counted %v duplicates (%v), want at least 1", dup, err)
	}

	if err := s.Start(ctx, "relay"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, s, id, "CONFIRMED")
	checkSnapshot(t, wantSnapshot(5, placed{id, 2, reserved}), waitSettled(t, s))
	checkNoDuplicateEvents(t, s)
}

// cancelBeforeReserving places an order while the relay is stopped and has the customer cancel it
// at once: orders' outbox then holds the order's order.created (version 1) and order.cancelled
// (version 2), both unpublished. It returns the order and its order.cancelled as the relay would
// send it.
func cancelBeforeReserving(t *testing.T, s *harness.Stack) (string, outboxlib.Event) {
	t.Helper()
	s.Stop("relay")
	id := placeOrder(t, s, "A1", 2)
	if r := cancelOrder(t, s, id); r.Status != http.StatusAccepted {
		t.Fatalf("cancel: %s", r)
	}
	return id, outboxEvent(t, s, "orders", id, "order.cancelled")
}

// cancelledBeforeReserving is the state after such an order came to rest: fulfillment reserved
// its stock (order.created) and released it (order.cancelled), orders noted the reservation (the
// order was already cancelling) and finished the cancellation on the release; the gateway had no
// payment to settle; the customer was told once.
func cancelledBeforeReserving(id string) snapshot {
	w := wantSnapshot(5)
	w.Orders[id] = "CANCELLED customer_request"
	w.Reservations[id+" A1"] = "2 RELEASED"
	w.Outbox["orders"] = map[string]int64{"order.created": 1, "order.cancelled": 1, "order.cancellation_completed": 1}
	w.Outbox["fulfillment"] = map[string]int64{"inventory.reserved": 1, "inventory.released": 1}
	w.Processed["fulfillment/fulfillment"] = 2      // order.created, order.cancelled
	w.Processed["orders/orders"] = 2                // inventory.reserved (noted), inventory.released
	w.Processed["payments/gateway-abstraction"] = 1 // order.cancelled: no payment
	w.Processed["notifications/notifications"] = 2  // order.created, order.cancelled
	w.Mail[id] = []string{"order_cancelled SENT"}
	return w
}

// (f) A later version of an aggregate arrives first: the order.cancelled (version 2) of an order
// the customer cancelled at once reaches fulfillment before its order.created (version 1), as
// Cloud Tasks may deliver them. fulfillment defers it (409, nothing recorded) until order.created
// has been applied, then applies it: reserved, then released, in order; the order ends CANCELLED.
func TestLaterVersionFirst(t *testing.T) {
	s := harness.Start(t, harness.Options{})
	ctx := context.Background()
	id, cancel := cancelBeforeReserving(t, s)
	deliver(t, s, "fulfillment", "fulfillment-inbox", cancel, "", time.Time{})
	harness.Eventually(t, "fulfillment defers order.cancelled at least twice", func() bool {
		n, err := metric(s, "fulfillment", "outbox_consumer_events_total", `outcome="early"`)
		return err == nil && n >= 2
	})
	if n := count(t, s, "fulfillment", "SELECT COUNT(*) FROM ProcessedEvents", nil); n != 0 {
		t.Errorf("fulfillment recorded %d events while deferring, want 0", n)
	}
	if n := count(t, s, "fulfillment", "SELECT COUNT(*) FROM OrderReservations", nil); n != 0 {
		t.Errorf("fulfillment decided %d orders while deferring, want 0", n)
	}

	if err := s.Start(ctx, "relay"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, s, id, "CANCELLED customer_request")
	checkSnapshot(t, cancelledBeforeReserving(id), waitSettled(t, s))
	// Applied in order: the version fulfillment recorded for the order is the cancellation's.
	rows := query(t, s, "fulfillment", "SELECT CAST(Version AS STRING), EventId FROM ConsumerVersions WHERE AggregateId = @id AND Consumer = 'fulfillment'", map[string]any{"id": id})
	if len(rows) != 1 || rows[0][0] != "2" || rows[0][1] != cancel.ID {
		t.Errorf("fulfillment's version of order %s: %v, want 2 set by %s", id, rows, cancel.ID)
	}
	checkNoDuplicateEvents(t, s)
}

// (g) The Tasks emulator is down for a while: orders are accepted and stay PENDING, the relay's
// oldest pending age grows; once it is back on the same ports and data, everything drains.
// Locally the Tasks emulator is also the identity provider whose keys the relay checks operators'
// tokens with (in production Google's are elsewhere), so the operator reads the relay once before
// the outage: the relay has the keys, the operator a token.
func TestTasksDown(t *testing.T) {
	s := harness.Start(t, harness.Options{})
	ctx := context.Background()
	if _, err := outboxStatus(s, "relay"); err != nil {
		t.Fatal(err)
	}
	if err := s.StopTasks(); err != nil {
		t.Fatal(err)
	}
	a := placeOrder(t, s, "A1", 1)
	b := placeOrder(t, s, "A1", 1)
	var first float64
	harness.Until(t, "the relay reports both orders' events pending", func() (bool, string) {
		st, err := outboxStatus(s, "relay")
		if err != nil {
			return false, err.Error()
		}
		o := st["orders"]
		first = o.OldestPendingAgeSeconds
		return o.Pending >= 2, fmt.Sprintf("%+v", o)
	})
	harness.Until(t, "the oldest pending age grows while Tasks is down", func() (bool, string) {
		st, err := outboxStatus(s, "relay")
		if err != nil {
			return false, err.Error()
		}
		o := st["orders"]
		return o.Pending >= 2 && o.OldestPendingAgeSeconds >= first+1, fmt.Sprintf("%+v (first %.2fs)", o, first)
	})
	for _, id := range []string{a, b} {
		if o := getOrder(t, s, id); o.Status != "PENDING" {
			t.Errorf("order %s is %s while Tasks is down, want PENDING", id, o.Status)
		}
	}

	if err := s.StartTasks(ctx); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, s, a, "CONFIRMED")
	waitStatus(t, s, b, "CONFIRMED")
	checkSnapshot(t, wantSnapshot(5, placed{a, 1, reserved}, placed{b, 1, reserved}), waitSettled(t, s))
	harness.Until(t, "the relay reports nothing pending", func() (bool, string) {
		st, err := outboxStatus(s, "relay")
		if err != nil {
			return false, err.Error()
		}
		for name, src := range st {
			if src.Pending != 0 || src.Quarantined != 0 {
				return false, fmt.Sprintf("%s: %+v", name, src)
			}
		}
		return len(st) == 4, fmt.Sprintf("%d sources", len(st))
	})
}

// (h) A consumer is down: its queue retries until it is back, and the reservation happens then.
func TestConsumerDown(t *testing.T) {
	s := harness.Start(t, harness.Options{})
	ctx := context.Background()
	s.Kill("fulfillment")
	id := placeOrder(t, s, "A1", 2)
	harness.Until(t, "order.created is published to the fulfillment queue", func() (bool, string) {
		n, err := countErr(s, "orders", "SELECT COUNT(*) FROM OutboxEvents WHERE PublishedAt IS NULL", nil)
		if err != nil || n != 0 {
			return false, fmt.Sprintf("%d unpublished (%v)", n, err)
		}
		qs, err := queues(s)
		if err != nil {
			return false, err.Error()
		}
		return qs["fulfillment-inbox"].Depth >= 1, fmt.Sprintf("%+v", qs["fulfillment-inbox"])
	})
	if o := getOrder(t, s, id); o.Status != "PENDING" {
		t.Errorf("order is %s while fulfillment is down, want PENDING", o.Status)
	}
	if err := s.Start(ctx, "fulfillment"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, s, id, "CONFIRMED")
	checkSnapshot(t, wantSnapshot(5, placed{id, 2, reserved}), waitSettled(t, s))
}

// (i) A poison event: an order.cancelled that reaches fulfillment long before its order.created
// (held back) is early on every attempt, so once the consumer's patience with early events has
// passed (EVENTS_EARLY_PATIENCE, 2 s here; 2 h in production, longer than the relay may hold a
// predecessor back) it is parked in DeadLetters and acknowledged. Its later delivery by the relay
// is then a duplicate: the order reserves its stock and sits CANCELLING, which the stuck-order
// detector reports, until an operator replays the dead letter; then it completes.
func TestPoisonEvent(t *testing.T) {
	s := harness.Start(t, harness.Options{Env: map[string][]string{
		"fulfillment": {"EVENTS_EARLY_PATIENCE=2s"},
		"orders":      {"STUCK_AFTER=CANCELLING=1s"},
	}})
	ctx := context.Background()
	id, poison := cancelBeforeReserving(t, s)
	deliver(t, s, "fulfillment", "fulfillment-inbox", poison, "", time.Time{})
	harness.Until(t, "the poison event is dead-lettered and acknowledged", func() (bool, string) {
		rows, err := queryErr(s, "fulfillment", "SELECT CAST(Attempts AS STRING), LastError FROM DeadLetters WHERE EventId = @id", map[string]any{"id": poison.ID})
		if err != nil || len(rows) == 0 {
			return false, fmt.Sprint("no dead letter ", err)
		}
		qs, err := queues(s)
		if err != nil {
			return false, err.Error()
		}
		q := qs["fulfillment-inbox"]
		return q.Depth == 0, fmt.Sprintf("dead letter %v; queue depth %d", rows[0], q.Depth)
	})
	rows := query(t, s, "fulfillment", "SELECT CAST(Attempts AS STRING), LastError FROM DeadLetters WHERE EventId = @id", map[string]any{"id": poison.ID})
	if n, _ := strconv.Atoi(rows[0][0]); n < 2 || !strings.Contains(rows[0][1], "still early") {
		t.Errorf("dead letter after %s answers with %q, want several early answers and the patience", rows[0][0], rows[0][1])
	}

	// The order.created it was waiting for arrives; the relay's own delivery of the cancellation
	// is a duplicate of the dead letter. The order is stuck waiting for its stock.
	if err := s.Start(ctx, "relay"); err != nil {
		t.Fatal(err)
	}
	waitSettled(t, s)
	if o := getOrder(t, s, id); o.Status != "CANCELLING" || len(o.Compensations) != 1 || o.Compensations[0].State != "pending" {
		t.Fatalf("order before the replay: %s %+v, want CANCELLING waiting for its stock", o.Status, o.Compensations)
	}
	harness.Until(t, "the stuck-order detector reports the order", func() (bool, string) {
		stuck := stuckOrders(t, s)
		return slices.Contains(stuck, id), fmt.Sprint(stuck)
	})

	token, err := s.OperatorToken(ctx, "fulfillment")
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Do(ctx, http.MethodPost, "fulfillment", "/admin/deadletters/"+poison.ID+"/replay",
		map[string]string{"reason": "order.created has arrived"}, "Authorization", "Bearer "+token)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status/100 != 2 {
		t.Fatalf("replay of the dead letter: %s", r.String())
	}
	waitStatus(t, s, id, "CANCELLED customer_request")
	checkSnapshot(t, cancelledBeforeReserving(id), waitSettled(t, s))
	if n := count(t, s, "fulfillment", "SELECT COUNT(*) FROM DeadLetters WHERE EventId = @id AND ReplayedAt IS NOT NULL", map[string]any{"id": poison.ID}); n != 1 {
		t.Errorf("the dead letter is not marked replayed")
	}
	if stuck := stuckOrders(t, s); slices.Contains(stuck, id) {
		t.Errorf("the order is still reported stuck once cancelled: %v", stuck)
	}
}

// (j) Two relay instances at once share the shards through leases: every event is delivered once
// in effect, and no side effect happens twice.
func TestTwoRelays(t *testing.T) {
	s := harness.Start(t, harness.Options{})
	ctx := context.Background()
	if err := s.StartInstance(ctx, "relay-2", "relay"); err != nil {
		t.Fatal(err)
	}
	var (
		mu  sync.Mutex
		ids []placed
		wg  sync.WaitGroup
	)
	for i := 0; i < 5; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := postOrder(ctx, s, uuid.NewString(), orderRequest("cust-j", "A1", 1))
			if err != nil || (r.Status != http.StatusCreated && r.Status != http.StatusOK) {
				t.Errorf("POST /v1/orders: %v %v", r, err)
				return
			}
			var o order
			if err := r.JSON(&o); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			ids = append(ids, placed{o.ID, 1, reserved})
			mu.Unlock()
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for _, p := range ids {
		waitStatus(t, s, p.id, "CONFIRMED")
	}
	checkSnapshot(t, wantSnapshot(5, ids...), waitSettled(t, s))
	checkNoDuplicateEvents(t, s)
	for _, name := range []string{"relay", "relay-2"} {
		if !s.Running(name) {
			t.Errorf("%s is not running", name)
		}
	}
}
