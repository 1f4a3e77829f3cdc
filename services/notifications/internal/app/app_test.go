package app_test

import (
	"context"
	"net/mail"
	"os"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/uuid"

	"github.com/spanmart/spanmart/internal/mailtest"
	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/spannertest"
	"github.com/spanmart/spanmart/services/notifications/internal/app"
	"github.com/spanmart/spanmart/services/notifications/internal/mailer"
	"github.com/spanmart/spanmart/services/notifications/internal/notification"
	"github.com/spanmart/spanmart/services/notifications/internal/store"
	"github.com/spanmart/spanmart/services/notifications/internal/templates"
)

var env *spannertest.Env

func TestMain(m *testing.M) { os.Exit(spannertest.Main(m, &env)) }

// mailParts starts a real SMTP server for the test and returns it, the real mailer sending to it
// with timeout, and the templates.
func mailParts(t *testing.T, timeout time.Duration) (*mailtest.Server, *mailer.Sender, *templates.Renderer) {
	t.Helper()
	srv, err := mailtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	sender, err := mailer.New(mailer.Config{Addr: srv.Addr(), From: &mail.Address{Name: "Spanmart", Address: "no-reply@spanmart.example"}, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	renderer, err := templates.New()
	if err != nil {
		t.Fatal(err)
	}
	return srv, sender, renderer
}

// givingUp is the real mailer whose caller gives up the moment the mail server has accepted the
// message: what Cloud Tasks does to a delivery it stops waiting for (a dispatch deadline, or its
// emulator stopped, which the soak of e2e/soak found).
type givingUp struct {
	*mailer.Sender
	cancel context.CancelFunc
}

func (g givingUp) Send(ctx context.Context, m mailer.Message) (mailer.Receipt, error) {
	r, err := g.Sender.Send(ctx, m)
	g.cancel()
	return r, err
}

// An e-mail the server accepted is recorded SENT even though the delivery that sent it was
// cancelled right then, so no redelivery or sweep sends it a second time.
func TestAcceptedEmailIsRecordedWhenTheCallerGivesUp(t *testing.T) {
	client, _ := env.NewDatabase(t, dbschema.Notifications)
	srv, sender, renderer := mailParts(t, 10*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc, err := app.New(app.Config{Repo: store.New(client), Sender: givingUp{sender, cancel}, Templates: renderer, ResumeAfter: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	orderID, confirmed := uuid.NewString(), app.Event{ID: uuid.NewString(), Type: "order.confirmed"}
	rec := record(t, ctx, client, svc, orderID, confirmed)

	if err := svc.Deliver(ctx, confirmed.ID, rec); err != nil {
		t.Fatalf("Deliver: %v, want the accepted e-mail recorded although its caller gave up", err)
	}
	if ctx.Err() == nil {
		t.Fatal("the caller did not give up: the test proves nothing")
	}
	rest := context.Background()
	ns, err := svc.NotificationsOfOrder(rest, orderID)
	if err != nil || len(ns) != 1 || ns[0].Status() != notification.Sent {
		t.Fatalf("notifications %v (%v), want one SENT", ns, err)
	}
	if rep, err := svc.Sweep(rest); err != nil || rep.Sent != 0 {
		t.Errorf("sweep: %+v %v, want nothing left to send", rep, err)
	}
	if err := svc.Deliver(rest, confirmed.ID, nil); err != nil {
		t.Errorf("redelivery: %v", err)
	}
	if n := len(srv.Messages()); n != 1 {
		t.Errorf("the mail server got %d messages, want 1", n)
	}
}

// gated is the real mailer held at the door: Send says it has begun (entered) and waits for
// release before it talks to the server, so a test can run a second sender meanwhile.
type gated struct {
	*mailer.Sender
	entered, release chan struct{}
}

func (g gated) Send(ctx context.Context, m mailer.Message) (mailer.Receipt, error) {
	g.entered <- struct{}{}
	<-g.release
	return g.Sender.Send(ctx, m)
}

// clock is a time the test moves.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Advance(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }

// leaseStack is a service with a gated mailer, a clock the test moves and a 21 s lease
// (ResumeAfter 1 s + 2 × SendTimeout 10 s), and an order whose order.confirmed e-mail is
// recorded at the clock's start.
type leaseStack struct {
	svc   *app.Service
	mail  *mailtest.Server
	gate  gated
	now   *clock
	event app.Event
	order string
	rec   *app.Recorded // what the event's delivery recorded
}

const (
	sendTimeout = 10 * time.Second
	lease       = time.Second + 2*sendTimeout
)

func newLeaseStack(t *testing.T) *leaseStack {
	t.Helper()
	client, _ := env.NewDatabase(t, dbschema.Notifications)
	srv, real, renderer := mailParts(t, sendTimeout)
	st := &leaseStack{mail: srv, gate: gated{real, make(chan struct{}), make(chan struct{})}, now: &clock{now: time.Now()},
		event: app.Event{ID: uuid.NewString(), Type: "order.confirmed"}, order: uuid.NewString()}
	var err error
	st.svc, err = app.New(app.Config{Repo: store.New(client), Sender: st.gate, Templates: renderer, Now: st.now.Now,
		ResumeAfter: time.Second, SendTimeout: sendTimeout})
	if err != nil {
		t.Fatal(err)
	}
	st.rec = record(t, context.Background(), client, st.svc, st.order, st.event)
	return st
}

// sentOnce checks that the server got one message and the notification is SENT after 1 attempt.
func (st *leaseStack) sentOnce(t *testing.T) {
	t.Helper()
	if n := len(st.mail.Messages()); n != 1 {
		t.Errorf("the mail server got %d messages, want 1", n)
	}
	ns, err := st.svc.NotificationsOfOrder(context.Background(), st.order)
	if err != nil || len(ns) != 1 || ns[0].Status() != notification.Sent || ns[0].Attempts() != 1 {
		t.Errorf("notifications %v (%v), want one SENT after 1 attempt", ns, err)
	}
}

// While one attempt is sending an e-mail, neither a redelivery of its event nor the sweep sends it
// too: the delivery that committed the notification holds its first attempt, and an attempt made
// after that lease has run out claims it before it sends. Each way, the server gets one message.
func TestOneSenderAtATime(t *testing.T) {
	for _, c := range []struct {
		name  string
		first bool // the attempt in flight is the first one (the recording delivery's), not a claimed one
	}{{"first attempt in flight", true}, {"claimed attempt in flight", false}} {
		t.Run(c.name, func(t *testing.T) {
			st := newLeaseStack(t)
			ctx := context.Background()
			if !c.first {
				st.now.Advance(lease) // the first attempt's lease has run out
			}
			inFlight := make(chan error, 1)
			var rec *app.Recorded
			if c.first {
				rec = st.rec
			}
			go func() { inFlight <- st.svc.Deliver(ctx, st.event.ID, rec) }()
			<-st.gate.entered // the attempt holds the notification and is about to send
			// The redelivery is answered 200: the attempt that holds the e-mail, or the sweep once its
			// lease has run out, sends it.
			if err := st.svc.Deliver(ctx, st.event.ID, nil); err != nil {
				t.Errorf("a redelivery during the attempt: %v, want nil (it leaves the e-mail to the attempt)", err)
			}
			st.now.Advance(lease - time.Second) // still inside the lease, past any back-off
			if rep, err := st.svc.Sweep(ctx); err != nil || rep.Resumed != 0 {
				t.Errorf("a sweep during the attempt: %+v %v, want nothing resumed", rep, err)
			}
			close(st.gate.release)
			if err := <-inFlight; err != nil {
				t.Fatalf("the attempt: %v", err)
			}
			st.sentOnce(t)
		})
	}
}

// A first attempt whose delivery comes so late that the rest of the lease could not cover an
// attempt does not send (a sweep may take the e-mail over when the lease ends); once the lease
// has run out, the next delivery (or the sweep) claims the e-mail and sends it.
func TestLateFirstAttemptWaitsForTheLease(t *testing.T) {
	st := newLeaseStack(t)
	ctx := context.Background()
	close(st.gate.release)
	st.now.Advance(lease - sendTimeout + time.Second) // 9 s left: less than recording an outcome may take
	if err := st.svc.Deliver(ctx, st.event.ID, st.rec); err != nil {
		t.Errorf("the late first attempt: %v, want nil (it leaves the e-mail to a later attempt)", err)
	}
	if n := len(st.mail.Messages()); n != 0 {
		t.Fatalf("the late first attempt sent %d messages", n)
	}
	st.now.Advance(lease)
	go func() { <-st.gate.entered }()
	if err := st.svc.Deliver(ctx, st.event.ID, nil); err != nil {
		t.Fatalf("after the lease: %v", err)
	}
	st.sentOnce(t)
}

// record applies order.created and then the event in their own consumer transactions, as the
// event handlers do, and returns what the event's transaction recorded, as its delivery hands it
// to Deliver.
func record(t *testing.T, ctx context.Context, client *spanner.Client, svc *app.Service, orderID string, ev app.Event) *app.Recorded {
	t.Helper()
	rec := &app.Recorded{}
	for _, apply := range []func(context.Context, *spanner.ReadWriteTransaction) error{
		func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
			_, err := svc.RecordContact(ctx, txn, app.Event{ID: uuid.NewString(), Type: "order.created"},
				notification.Contact{OrderID: orderID, CustomerID: "ali", Email: "ali@example.com", Language: "en"})
			return err
		},
		func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
			out, err := svc.Notify(ctx, txn, ev, orderID, templates.OrderConfirmed{OrderID: orderID, Total: templates.Money{Minor: 1200, Currency: "JPY"}})
			rec.Notifications = []*notification.Notification{out.Created}
			return err
		},
	} {
		var err error
		if rec.At, err = client.ReadWriteTransaction(ctx, apply); err != nil {
			t.Fatal(err)
		}
	}
	if rec.Notifications[0] == nil {
		t.Fatal("Notify recorded no notification")
	}
	return rec
}

// The outcomes of attempts that end together are recorded in one transaction: two orders'
// confirmation e-mails, sent at once, are marked SENT with one commit timestamp (the group is
// recorded as soon as it is full, so the test does not wait out the window).
func TestOutcomesOfConcurrentAttemptsShareOneCommit(t *testing.T) {
	client, _ := env.NewDatabase(t, dbschema.Notifications)
	srv, sender, renderer := mailParts(t, 10*time.Second)
	svc, err := app.New(app.Config{Repo: store.New(client), Sender: sender, Templates: renderer, OutcomeWindow: time.Minute, MaxOutcomeGroup: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	events := []app.Event{{ID: uuid.NewString(), Type: "order.confirmed"}, {ID: uuid.NewString(), Type: "order.confirmed"}}
	errs := make(chan error, len(events))
	for _, ev := range events {
		rec := record(t, ctx, client, svc, uuid.NewString(), ev)
		go func() { errs <- svc.Deliver(ctx, ev.ID, rec) }()
	}
	for range events {
		if err := <-errs; err != nil {
			t.Fatalf("Deliver: %v", err)
		}
	}
	marked := map[time.Time]int{}
	err = client.Single().Query(ctx, spanner.Statement{SQL: "SELECT Status, UpdatedAt FROM Notifications"}).Do(func(r *spanner.Row) error {
		var status string
		var at time.Time
		if err := r.Columns(&status, &at); err != nil {
			return err
		}
		if status != string(notification.Sent) {
			t.Errorf("a notification is %s, want SENT", status)
		}
		marked[at]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(marked) != 1 {
		t.Errorf("SENT marked at %v, want both in one commit", marked)
	}
	if n := len(srv.Messages()); n != 2 {
		t.Errorf("the mail server got %d messages, want 2", n)
	}
}
