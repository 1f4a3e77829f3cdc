package app_test

import (
	"context"
	"errors"
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
	srv, err := mailtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	sender, err := mailer.New(mailer.Config{Addr: srv.Addr(), From: &mail.Address{Name: "Spanmart", Address: "no-reply@spanmart.example"}, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	renderer, err := templates.New()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc, err := app.New(app.Config{Repo: store.New(client), Sender: givingUp{sender, cancel}, Templates: renderer, ResumeAfter: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	orderID, confirmed := uuid.NewString(), app.Event{ID: uuid.NewString(), Type: "order.confirmed"}
	record(t, ctx, client, svc, orderID, confirmed)

	if err := svc.Deliver(ctx, confirmed.ID, false); err != nil {
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
	if err := svc.Deliver(rest, confirmed.ID, true); err != nil {
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

// While one attempt is sending an e-mail, neither a redelivery of its event nor the sweep sends it
// too: the delivery that committed the notification holds its first attempt, and an attempt made
// after that lease has run out claims it before it sends. Each way, the server gets one message.
func TestOneSenderAtATime(t *testing.T) {
	for _, c := range []struct {
		name  string
		first bool // the attempt in flight is the first one (redelivery false), not a claimed one
	}{{"first attempt in flight", true}, {"claimed attempt in flight", false}} {
		t.Run(c.name, func(t *testing.T) {
			client, _ := env.NewDatabase(t, dbschema.Notifications)
			srv, err := mailtest.Start()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { srv.Close() })
			real, err := mailer.New(mailer.Config{Addr: srv.Addr(), From: &mail.Address{Address: "no-reply@spanmart.example"}, Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			renderer, err := templates.New()
			if err != nil {
				t.Fatal(err)
			}
			g := gated{real, make(chan struct{}), make(chan struct{})}
			now := &clock{now: time.Now()}
			const sendTimeout = 10 * time.Second // the lease: 2 × 10 s
			svc, err := app.New(app.Config{Repo: store.New(client), Sender: g, Templates: renderer, Now: now.Now,
				ResumeAfter: time.Second, SendTimeout: sendTimeout})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			orderID, confirmed := uuid.NewString(), app.Event{ID: uuid.NewString(), Type: "order.confirmed"}
			record(t, ctx, client, svc, orderID, confirmed)
			if !c.first {
				now.Advance(2*sendTimeout + time.Second) // the first attempt's lease has run out
			}

			inFlight := make(chan error, 1)
			go func() { inFlight <- svc.Deliver(ctx, confirmed.ID, !c.first) }()
			<-g.entered // the attempt holds the notification and is about to send
			if err := svc.Deliver(ctx, confirmed.ID, true); !errors.Is(err, notification.ErrNotDue) {
				t.Errorf("a redelivery during the attempt: %v, want it to wait (notification.ErrNotDue)", err)
			}
			now.Advance(2*sendTimeout - time.Second) // still inside the lease, past any back-off
			if rep, err := svc.Sweep(ctx); err != nil || rep.Resumed != 0 {
				t.Errorf("a sweep during the attempt: %+v %v, want nothing resumed", rep, err)
			}
			close(g.release)
			if err := <-inFlight; err != nil {
				t.Fatalf("the attempt: %v", err)
			}
			if n := len(srv.Messages()); n != 1 {
				t.Errorf("the mail server got %d messages, want 1", n)
			}
			ns, err := svc.NotificationsOfOrder(ctx, orderID)
			if err != nil || len(ns) != 1 || ns[0].Status() != notification.Sent || ns[0].Attempts() != 1 {
				t.Errorf("notifications %v (%v), want one SENT after 1 attempt", ns, err)
			}
		})
	}
}

// record applies order.created and then the event in their own consumer transactions, as the
// event handlers do.
func record(t *testing.T, ctx context.Context, client *spanner.Client, svc *app.Service, orderID string, ev app.Event) {
	t.Helper()
	for _, apply := range []func(context.Context, *spanner.ReadWriteTransaction) error{
		func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
			_, err := svc.RecordContact(ctx, txn, app.Event{ID: uuid.NewString(), Type: "order.created"},
				notification.Contact{OrderID: orderID, CustomerID: "ali", Email: "ali@example.com", Language: "en"})
			return err
		},
		func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
			_, err := svc.Notify(ctx, txn, ev, orderID, templates.OrderConfirmed{OrderID: orderID, Total: templates.Money{Minor: 1200, Currency: "JPY"}})
			return err
		},
	} {
		if _, err := client.ReadWriteTransaction(ctx, apply); err != nil {
			t.Fatal(err)
		}
	}
}
