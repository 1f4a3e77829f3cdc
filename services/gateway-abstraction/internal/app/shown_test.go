package app_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/app"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/payment"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/provider"
)

// spyRepo records what each read-write transaction of the use cases did (the last attempt of
// each, as the client may retry one).
type spyRepo struct {
	app.Repository
	mu  sync.Mutex
	txs []*spyTx
}

// spyTx counts a transaction's reads and writes of payment rows, and the provider events it recorded.
type spyTx struct {
	app.Tx
	paymentReads, paymentSaves, events int
}

func (r *spyRepo) Update(ctx context.Context, fn func(ctx context.Context, tx app.Tx) error) error {
	var last *spyTx
	err := r.Repository.Update(ctx, func(ctx context.Context, tx app.Tx) error {
		last = &spyTx{Tx: tx}
		return fn(ctx, last)
	})
	r.mu.Lock()
	r.txs = append(r.txs, last)
	r.mu.Unlock()
	return err
}

func (r *spyRepo) transactions() []spyTx {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]spyTx, len(r.txs))
	for i, t := range r.txs {
		out[i] = *t
		out[i].Tx = nil
	}
	r.txs = nil
	return out
}

func (t *spyTx) Payment(ctx context.Context, id string) (*payment.Payment, error) {
	t.paymentReads++
	return t.Tx.Payment(ctx, id)
}

func (t *spyTx) PaymentByProviderID(ctx context.Context, providerName, providerPaymentID string) (*payment.Payment, error) {
	t.paymentReads++
	return t.Tx.PaymentByProviderID(ctx, providerName, providerPaymentID)
}

func (t *spyTx) Save(ctx context.Context, p *payment.Payment, created bool, checkAfter time.Time) error {
	t.paymentSaves++
	return t.Tx.Save(ctx, p, created, checkAfter)
}

func (t *spyTx) RecordProviderEvent(ctx context.Context, e app.ProviderEvent) (bool, error) {
	t.events++
	return t.Tx.RecordProviderEvent(ctx, e)
}

// The provider reports an authorization twice, in its answer and in a webhook sent as it answers.
// Whichever the gateway records second finds the payment already AUTHORIZED before its
// transaction and records itself without reading or writing the payment row, so it cannot
// conflict with the first one's transaction on that row: the answer only finishes the intent,
// the webhook only keeps its event id. The payment moves once.
func TestTheSecondReportOfAnOutcomeLeavesThePaymentRowAlone(t *testing.T) {
	setUp := func(t *testing.T) (*fixture, *spyRepo, *prometheus.Registry) {
		spy := &spyRepo{}
		f := newFixture(t, func(c *app.Config) { spy.Repository = c.Repo; c.Repo = spy })
		return f, spy, f.reg
	}
	movedOnce := func(t *testing.T, reg *prometheus.Registry) {
		t.Helper()
		if got := counterSum(t, reg, "gateway_payments_total"); got != 1 {
			t.Errorf("gateway_payments_total = %v, want 1", got)
		}
	}
	recordsAlone := func(t *testing.T, what string, tx spyTx) {
		t.Helper()
		if tx.paymentReads != 0 || tx.paymentSaves != 0 {
			t.Errorf("%s's transaction read the payment %d times and wrote it %d times, want neither", what, tx.paymentReads, tx.paymentSaves)
		}
	}

	t.Run("answer first", func(t *testing.T) {
		f, spy, reg := setUp(t)
		release := f.holdWebhooks()
		_, id := f.request(t, "pm_card_visa")
		if err := f.svc.Resume(context.Background(), app.IntentKey(id, app.OpAuthorize)); err != nil {
			t.Fatal(err)
		}
		if p := f.payment(t, id); p.Status != string(payment.Authorized) {
			t.Fatalf("after the answer: %s, want AUTHORIZED", p.Status)
		}
		spy.transactions()
		release()
		f.waitHooks(t, 2) // payment_intent.created, .amount_capturable_updated (+ charge events)
		var webhooks []spyTx
		for _, tx := range spy.transactions() {
			if tx.events > 0 {
				webhooks = append(webhooks, tx)
			}
		}
		if len(webhooks) == 0 {
			t.Fatal("no webhook recorded a provider event")
		}
		for _, tx := range webhooks {
			recordsAlone(t, "a webhook", tx)
		}
		movedOnce(t, reg)
		if diff := cmp.Diff([]string{"payment.authorized@1"}, f.events(t, id)); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
	})

	t.Run("webhook first", func(t *testing.T) {
		f, spy, reg := setUp(t)
		_, id := f.request(t, "pm_card_visa")
		var req provider.AuthorizeRequest
		b, _ := json.Marshal(f.intent(t, id).Request.Value)
		if err := json.Unmarshal(b, &req); err != nil {
			t.Fatal(err)
		}
		if _, err := f.adapter.Authorize(context.Background(), req); err != nil { // the answer is not recorded yet
			t.Fatal(err)
		}
		f.waitStatus(t, id, payment.Authorized) // by the webhook
		spy.transactions()
		if err := f.svc.Resume(context.Background(), app.IntentKey(id, app.OpAuthorize)); err != nil {
			t.Fatal(err)
		}
		txs := spy.transactions()
		if len(txs) != 1 {
			t.Fatalf("resuming ran %d transactions, want 1", len(txs))
		}
		recordsAlone(t, "the answer", txs[0])
		if in := f.intent(t, id); in.Status != string(app.IntentSucceeded) || in.Attempts != 1 {
			t.Errorf("intent %s after %d attempts, want SUCCEEDED after 1", in.Status, in.Attempts)
		}
		movedOnce(t, reg)
		if diff := cmp.Diff([]string{"payment.authorized@1"}, f.events(t, id)); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
	})
}
