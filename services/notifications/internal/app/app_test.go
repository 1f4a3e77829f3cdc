package app_test

import (
	"context"
	"net/mail"
	"os"
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
	orderID, created, confirmed := uuid.NewString(), app.Event{ID: uuid.NewString(), Type: "order.created"}, app.Event{ID: uuid.NewString(), Type: "order.confirmed"}
	for _, apply := range []func(context.Context, *spanner.ReadWriteTransaction) error{
		func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
			_, err := svc.RecordContact(ctx, txn, created, notification.Contact{OrderID: orderID, CustomerID: "ali", Email: "ali@example.com", Language: "en"})
			return err
		},
		func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
			_, err := svc.Notify(ctx, txn, confirmed, orderID, templates.OrderConfirmed{OrderID: orderID, Total: templates.Money{Minor: 1200, Currency: "JPY"}})
			return err
		},
	} {
		if _, err := client.ReadWriteTransaction(ctx, apply); err != nil {
			t.Fatal(err)
		}
	}

	if err := svc.Deliver(ctx, confirmed.ID); err != nil {
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
	if err := svc.Deliver(rest, confirmed.ID); err != nil {
		t.Errorf("redelivery: %v", err)
	}
	if n := len(srv.Messages()); n != 1 {
		t.Errorf("the mail server got %d messages, want 1", n)
	}
}
