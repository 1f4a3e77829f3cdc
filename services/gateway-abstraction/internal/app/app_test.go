package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spanmart/spanmart/emulator/paysim"
	"github.com/spanmart/spanmart/gen/dao/outboxdb"
	"github.com/spanmart/spanmart/gen/dao/paymentsdb"
	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/pkg/platform/platformtest"
	"github.com/spanmart/spanmart/pkg/spannertest"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/app"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/payment"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/provider"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/provider/komoju"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/provider/stripe"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/store"
)

var env *spannertest.Env

func TestMain(m *testing.M) { os.Exit(spannertest.Main(m, &env)) }

const (
	apiKey              = "sk_test_gateway_app"
	webhookSecret       = "whsec_gateway_app"
	komojuKey           = "sk_test_komoju_gateway_app"
	komojuWebhookSecret = "komoju_whsec_gateway_app"
)

// fixture is the gateway's use cases over a fresh payments database, with the real Stripe and
// KOMOJU adapters talking to an in-process sandbox whose webhooks reach HandleWebhook over HTTP.
type fixture struct {
	client  *spanner.Client
	db      string // the database's name, for env.DatabaseStats
	svc     *app.Service
	sandbox *paysim.Server
	adapter *stripe.Provider
	komoju  *komoju.Provider
	reg     *prometheus.Registry // the service's metrics, unless the test gave its own
	mu      sync.Mutex
	now     time.Time // the use cases' clock (Config.Now), moved by advance
	hooks   []string  // results of the webhooks received
}

func (f *fixture) clock() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fixture) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

func newFixture(t *testing.T, edit func(*app.Config)) *fixture {
	t.Helper()
	f := &fixture{now: time.Now(), reg: prometheus.NewRegistry()}
	f.client, f.db = env.NewDatabase(t, dbschema.Payments)
	ready := make(chan struct{})
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-ready
		body, _ := io.ReadAll(r.Body)
		res, err := f.svc.HandleWebhook(r.Context(), strings.TrimPrefix(r.URL.Path, "/"), r.Header, body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.hooks = append(f.hooks, string(res))
		f.mu.Unlock()
	}))
	t.Cleanup(recv.Close)
	var err error
	f.sandbox, err = paysim.Start(context.Background(), paysim.Options{
		APIKey: apiKey, WebhookURL: recv.URL + "/stripe", WebhookSecret: webhookSecret,
		KomojuSecretKey: komojuKey, KomojuWebhookURL: recv.URL + "/komoju", KomojuWebhookSecret: komojuWebhookSecret,
		WebhookRetry: paysim.RetryPolicy{MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.sandbox.Close() })
	f.adapter, err = stripe.New(stripe.Config{APIKey: apiKey, BaseURL: f.sandbox.URL(), WebhookSecret: webhookSecret,
		HTTPClient: &http.Client{Timeout: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	f.komoju, err = komoju.New(komoju.Config{BaseURL: f.sandbox.URL(), SecretKey: komojuKey, WebhookSecret: komojuWebhookSecret,
		HTTPClient: &http.Client{Timeout: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := app.Config{
		Repo: store.New(f.client), Providers: []provider.Provider{f.adapter, f.komoju},
		Calls:   app.CallPolicy{MinBackoff: 10 * time.Millisecond, Timeout: 2 * time.Second},
		Now:     f.clock,
		Metrics: app.NewMetrics(f.reg),
	}
	if edit != nil {
		edit(&cfg)
	}
	if f.svc, err = app.New(cfg); err != nil {
		t.Fatal(err)
	}
	close(ready)
	return f
}

// request records a card payment for a new order in its own transaction, as the consumer does.
func (f *fixture) request(t *testing.T, pm string) (orderID, paymentID string) {
	t.Helper()
	orderID = uuid.NewString()
	_, err := f.client.ReadWriteTransaction(context.Background(), func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		var err error
		paymentID, _, err = f.svc.RequestPayment(ctx, store.Tx(txn), app.PaymentRequest{
			OrderID: orderID, CustomerID: "ali", Method: payment.Card, Instrument: pm, AmountMinor: 1800, Currency: "JPY",
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return orderID, paymentID
}

func (f *fixture) payment(t *testing.T, id string) *paymentsdb.Payment {
	t.Helper()
	p, err := paymentsdb.ReadPayment(context.Background(), f.client.Single(), id)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (f *fixture) intent(t *testing.T, paymentID string) *paymentsdb.ProviderRequest {
	t.Helper()
	in, err := paymentsdb.ReadProviderRequest(context.Background(), f.client.Single(), app.IntentKey(paymentID, app.OpAuthorize))
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// events are the payment's outbox events, "type@version", in version order.
func (f *fixture) events(t *testing.T, paymentID string) []string {
	t.Helper()
	rows, err := outboxdb.ReadOutboxEventRows(context.Background(), f.client.Single(), spanner.AllKeys())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for v := int64(1); v <= int64(len(rows)); v++ {
		for _, r := range rows {
			if r.AggregateId == paymentID && r.AggregateVersion == v {
				out = append(out, fmt.Sprintf("%s@%d", r.EventType, v))
			}
		}
	}
	return out
}

// intentsAtProvider are the sandbox's PaymentIntents for a payment.
func (f *fixture) intentsAtProvider(t *testing.T, paymentID string) []string {
	t.Helper()
	ids, err := f.sandbox.PaymentIntentIDs("spanmart_payment_id", paymentID)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// waitHooks waits until n webhooks were handled and returns their results.
func (f *fixture) waitHooks(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.mu.Lock()
		got := append([]string(nil), f.hooks...)
		f.mu.Unlock()
		if len(got) >= n || time.Now().After(deadline) {
			if len(got) < n {
				t.Fatalf("%d webhooks handled, want %d: %v", len(got), n, got)
			}
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A visa card is authorized once: the answer (or the webhook that beats it) moves the payment and
// emits payment.authorized, the other is late and changes nothing; resuming a finished intent
// calls nobody; the order has one payment id however often it is requested.
func TestCardIsAuthorizedOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newFixture(t, func(c *app.Config) { c.Metrics = app.NewMetrics(reg) })
	orderID, id := f.request(t, "pm_card_visa")
	if p := f.payment(t, id); p.Status != string(payment.Requested) || p.Version != 0 {
		t.Fatalf("after the request: %s v%d, want REQUESTED v0", p.Status, p.Version)
	}
	if err := f.svc.Resume(context.Background(), app.IntentKey(id, app.OpAuthorize)); err != nil {
		t.Fatal(err)
	}
	p := f.payment(t, id)
	if p.Status != string(payment.Authorized) || p.Version != 1 || !p.ProviderPaymentId.Valid {
		t.Fatalf("after the answer: %+v, want AUTHORIZED v1 with the provider's id", p)
	}
	in := f.intent(t, id)
	if in.Status != string(app.IntentSucceeded) || in.Attempts != 1 || in.RetryAfter.Valid {
		t.Errorf("intent %+v, want SUCCEEDED after 1 attempt, no retry", in)
	}
	if !p.CheckAfter.Valid {
		t.Error("an authorized payment has no CheckAfter: the sweep would never ask about it")
	}
	// The webhooks race the answer: amount_capturable_updated may arrive first and apply the
	// authorization, making the answer late; either way it is applied once.
	hooks := f.waitHooks(t, 2) // payment_intent.created, .amount_capturable_updated (+ charge events)
	applied := 0
	for _, h := range hooks {
		if h == string(app.WebhookApplied) {
			applied++
		}
	}
	if applied > 1 {
		t.Errorf("webhooks %v: the authorization was applied %d times", hooks, applied)
	}
	if err := f.svc.Resume(context.Background(), app.IntentKey(id, app.OpAuthorize)); err != nil {
		t.Fatal(err)
	}
	_, again, _ := f.requestFor(t, orderID)
	if again != id {
		t.Errorf("second request for the order: payment %s, want %s", again, id)
	}
	if diff := cmp.Diff([]string{"payment.authorized@1"}, f.events(t, id)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if pis := f.intentsAtProvider(t, id); len(pis) != 1 {
		t.Errorf("the provider holds %v, want one PaymentIntent", pis)
	}
	// Counted once, although the webhook's and the answer's transactions race and one may be
	// aborted and run again.
	if got := counterSum(t, reg, "gateway_payments_total"); got != 1 {
		t.Errorf("gateway_payments_total = %v, want 1", got)
	}
}

func (f *fixture) requestFor(t *testing.T, orderID string) (string, string, bool) {
	t.Helper()
	var (
		id      string
		created bool
	)
	_, err := f.client.ReadWriteTransaction(context.Background(), func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		var err error
		var rec *app.Recorded
		id, rec, err = f.svc.RequestPayment(ctx, store.Tx(txn), app.PaymentRequest{
			OrderID: orderID, CustomerID: "ali", Method: payment.Card, Instrument: "pm_card_visa", AmountMinor: 1800, Currency: "JPY",
		})
		created = rec != nil
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return orderID, id, created
}

// Declines are answers in Spanmart's vocabulary.
func TestDeclinedCardsFailWithTheirReason(t *testing.T) {
	f := newFixture(t, nil)
	for pm, want := range map[string]payment.Reason{
		"pm_card_chargeDeclined":                  payment.ReasonDeclined,
		"pm_card_chargeDeclinedInsufficientFunds": payment.ReasonInsufficientFunds,
	} {
		_, id := f.request(t, pm)
		if err := f.svc.Resume(context.Background(), app.IntentKey(id, app.OpAuthorize)); err != nil {
			t.Fatal(err)
		}
		p := f.payment(t, id)
		if p.Status != string(payment.Failed) || p.FailureReason.StringVal != string(want) || p.CheckAfter.Valid {
			t.Errorf("%s: %s %q (check after %v), want FAILED %q, nothing to check", pm, p.Status, p.FailureReason.StringVal, p.CheckAfter, want)
		}
		if diff := cmp.Diff([]string{"payment.failed@1"}, f.events(t, id)); diff != "" {
			t.Errorf("%s: events (-want +got):\n%s", pm, diff)
		}
	}
}

// The gateway dies after the provider acted and before the answer was recorded: the intent is
// still STARTED; resuming it sends the same request with the same key, the provider replays its
// first answer, and there is one authorization.
func TestCallLostAfterTheProviderActedIsResumedWithTheSameKey(t *testing.T) {
	f := newFixture(t, nil)
	_, id := f.request(t, "pm_card_visa")
	in := f.intent(t, id)
	var req provider.AuthorizeRequest
	b, _ := json.Marshal(in.Request.Value)
	if err := json.Unmarshal(b, &req); err != nil {
		t.Fatal(err)
	}
	first, err := f.adapter.Authorize(context.Background(), req) // the call whose answer was lost
	if err != nil || first.Status != payment.Authorized {
		t.Fatalf("the lost call: %+v, %v", first, err)
	}
	if err := f.svc.Resume(context.Background(), in.IdempotencyKey); err != nil {
		t.Fatal(err)
	}
	p := f.payment(t, id)
	if p.Status != string(payment.Authorized) || p.ProviderPaymentId.StringVal != first.ProviderPaymentID {
		t.Errorf("resumed: %s at %s, want AUTHORIZED at %s", p.Status, p.ProviderPaymentId.StringVal, first.ProviderPaymentID)
	}
	if pis := f.intentsAtProvider(t, id); len(pis) != 1 {
		t.Errorf("the provider holds %v, want one PaymentIntent", pis)
	}
}

// The provider answers 500s: each Resume retries within its bound and leaves the intent STARTED
// with its error and a retry time; the circuit opens after consecutive failures and refuses calls
// without reaching the provider; once the provider is back and the cooldown passed, the sweep
// resumes the intent, which authorizes once.
func TestProviderOutageIsRetriedBehindTheCircuitBreaker(t *testing.T) {
	f := newFixture(t, func(c *app.Config) {
		c.Calls.Attempts, c.Calls.BreakerThreshold, c.Calls.BreakerCooldown = 2, 4, 200*time.Millisecond
		c.ResumeAfter = time.Millisecond
	})
	_, id := f.request(t, "pm_card_visa")
	if err := f.sandbox.SetAPIFault(paysim.APIFault{Mode: paysim.FaultError, Dialect: paysim.DialectStripe}); err != nil {
		t.Fatal(err)
	}
	key := app.IntentKey(id, app.OpAuthorize)
	for i := 0; i < 3; i++ {
		err := f.svc.Resume(context.Background(), key)
		if !provider.Temporary(err) {
			t.Fatalf("Resume %d during the outage: %v, want a temporary error", i+1, err)
		}
	}
	in := f.intent(t, id)
	if in.Status != string(app.IntentStarted) || in.Attempts != 2 || !in.LastError.Valid || !in.RetryAfter.Valid {
		t.Errorf("intent after the outage: %+v, want STARTED, 2 attempts (the third met the open circuit: no call), an error and a retry time", in)
	}
	if !strings.Contains(in.LastError.StringVal, "circuit open") {
		t.Errorf("last error %q: the third Resume should have met the open circuit (2+2 failures)", in.LastError.StringVal)
	}
	if pis := f.intentsAtProvider(t, id); len(pis) != 0 {
		t.Errorf("the provider acted during the outage: %v", pis)
	}
	if err := f.sandbox.SetAPIFault(paysim.APIFault{Mode: paysim.FaultNone}); err != nil {
		t.Fatal(err)
	}
	if rep, err := f.svc.Sweep(context.Background()); err != nil || rep.Resumed != 0 || len(rep.Failures) != 0 {
		t.Fatalf("sweep before the intent's retry time = %+v, %v; want nothing done", rep, err)
	}
	f.advance(time.Second) // past the circuit's cooldown and the intent's retry time
	if rep, err := f.svc.Sweep(context.Background()); err != nil || rep.Resumed != 1 {
		t.Fatalf("sweep after the cooldown = %+v, %v; want the intent resumed", rep, err)
	}
	if p := f.payment(t, id); p.Status != string(payment.Authorized) {
		t.Errorf("after the sweep: %s, want AUTHORIZED", p.Status)
	}
	if pis := f.intentsAtProvider(t, id); len(pis) != 1 {
		t.Errorf("the provider holds %v, want one PaymentIntent", pis)
	}
}

// A webhook that does not verify changes nothing and stores nothing.
func TestForgedWebhookIsRefused(t *testing.T) {
	f := newFixture(t, nil)
	body := []byte(`{"id":"evt_forged","type":"payment_intent.succeeded","data":{"object":{"id":"pi_x","object":"payment_intent"}}}`)
	h := http.Header{"Stripe-Signature": {paysim.SignatureHeader(body, "whsec_not_ours", time.Now())}}
	if _, err := f.svc.HandleWebhook(context.Background(), "stripe", h, body); !errors.Is(err, provider.ErrSignature) {
		t.Fatalf("forged webhook: %v, want ErrSignature", err)
	}
	if _, err := f.svc.HandleWebhook(context.Background(), "nope", h, body); !errors.Is(err, app.ErrUnknownProvider) {
		t.Fatalf("unknown provider: %v, want ErrUnknownProvider", err)
	}
	rows, err := paymentsdb.ReadProviderEventRows(context.Background(), f.client.Single(), spanner.AllKeys())
	if err != nil || len(rows) != 0 {
		t.Errorf("ProviderEvents = %d rows, %v; want none", len(rows), err)
	}
}

// 3-D Secure: the provider's first answer is "the customer must act" (the payment stays
// REQUESTED, with the provider's id); the customer completes it but every webhook is dropped; the
// reconciliation sweep asks the provider and applies the authorization.
func TestSweepFindsWhatAMissedWebhookSaid(t *testing.T) {
	f := newFixture(t, func(c *app.Config) { c.ReconcileAfter = time.Millisecond })
	if err := f.sandbox.SetWebhookFault(paysim.WebhookFault{Mode: "drop"}); err != nil {
		t.Fatal(err)
	}
	_, id := f.request(t, "pm_card_threeDSecure2Required")
	if err := f.svc.Resume(context.Background(), app.IntentKey(id, app.OpAuthorize)); err != nil {
		t.Fatal(err)
	}
	p := f.payment(t, id)
	if p.Status != string(payment.Requested) || !p.ProviderPaymentId.Valid || !p.CheckAfter.Valid {
		t.Fatalf("after 3-D Secure was asked for: %+v, want REQUESTED with the provider's id and a check time", p)
	}
	// The customer completes the challenge (the sandbox: confirming again).
	resp, err := postForm(f.sandbox.URL()+"/v1/payment_intents/"+p.ProviderPaymentId.StringVal+"/confirm", apiKey)
	if err != nil || resp != http.StatusOK {
		t.Fatalf("confirm: %d, %v", resp, err)
	}
	f.advance(time.Second) // past ReconcileAfter
	rep, err := f.svc.Sweep(context.Background())
	if err != nil || rep.Checked != 1 || rep.Changed != 1 {
		t.Fatalf("sweep = %+v, %v; want one payment checked and changed", rep, err)
	}
	if p := f.payment(t, id); p.Status != string(payment.Authorized) {
		t.Errorf("after the sweep: %s, want AUTHORIZED", p.Status)
	}
	if diff := cmp.Diff([]string{"payment.authorized@1"}, f.events(t, id)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func postForm(url, key string) (int, error) {
	req, err := http.NewRequest(http.MethodPost, url, nil)
	if err != nil {
		return 0, err
	}
	req.SetBasicAuth(key, "")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// A provider that stays unreachable: the intent is retried until GiveUpAfter (inside the
// provider's idempotency-key retention), then given up: the payment fails with
// provider_unavailable, and its event lets orders cancel the order.
func TestIntentIsGivenUpInsideTheKeyRetention(t *testing.T) {
	f := newFixture(t, func(c *app.Config) { c.GiveUpAfter, c.Calls.Attempts = time.Hour, 1 })
	_, id := f.request(t, "pm_card_visa")
	if err := f.sandbox.SetAPIFault(paysim.APIFault{Mode: paysim.FaultError, Dialect: paysim.DialectStripe}); err != nil {
		t.Fatal(err)
	}
	key := app.IntentKey(id, app.OpAuthorize)
	if err := f.svc.Resume(context.Background(), key); !provider.Temporary(err) {
		t.Fatalf("Resume during the outage: %v, want a temporary error", err)
	}
	f.advance(2 * time.Hour)
	if err := f.svc.Resume(context.Background(), key); err != nil {
		t.Fatalf("Resume after GiveUpAfter: %v, want nil (the intent is finished: given up)", err)
	}
	p := f.payment(t, id)
	if p.Status != string(payment.Failed) || p.FailureReason.StringVal != string(payment.ReasonProviderUnavailable) {
		t.Errorf("payment %s %q, want FAILED provider_unavailable", p.Status, p.FailureReason.StringVal)
	}
	if in := f.intent(t, id); in.Status != string(app.IntentFailed) || in.RetryAfter.Valid {
		t.Errorf("intent %+v, want FAILED with nothing to resume", in)
	}
	if diff := cmp.Diff([]string{"payment.failed@1"}, f.events(t, id)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// The gateway gave a payment up, and later the provider says it holds the money: nothing is
// applied (the payment stays FAILED and emits nothing more), and the conflict is counted for an
// operator to void, rather than passed off as a late callback.
func TestMoneyHeldForAGivenUpPaymentIsAConflict(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newFixture(t, func(c *app.Config) {
		c.GiveUpAfter, c.Calls.Attempts, c.Metrics = time.Hour, 1, app.NewMetrics(reg)
	})
	_, id := f.request(t, "pm_card_visa")
	if err := f.sandbox.SetAPIFault(paysim.APIFault{Mode: paysim.FaultError, Dialect: paysim.DialectStripe}); err != nil {
		t.Fatal(err)
	}
	key := app.IntentKey(id, app.OpAuthorize)
	f.svc.Resume(context.Background(), key)
	f.advance(2 * time.Hour)
	if err := f.svc.Resume(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	body := []byte(fmt.Sprintf(`{"id":"evt_held_1","object":"event","api_version":%q,"type":"payment_intent.amount_capturable_updated","created":%d,"livemode":false,"pending_webhooks":1,"data":{"object":{"id":"pi_held_1","object":"payment_intent","status":"requires_capture","amount":1800,"amount_capturable":1800,"currency":"jpy","capture_method":"manual","metadata":{"spanmart_payment_id":%q}}}}`,
		paysim.DefaultAPIVersion, time.Now().Unix(), id))
	h := http.Header{"Stripe-Signature": {paysim.SignatureHeader(body, webhookSecret, f.clock())}} // the gateway's clock moved
	res, err := f.svc.HandleWebhook(context.Background(), "stripe", h, body)
	if err != nil || res != app.WebhookIgnored {
		t.Fatalf("webhook = %s, %v; want ignored", res, err)
	}
	if p := f.payment(t, id); p.Status != string(payment.Failed) {
		t.Errorf("payment %s, want still FAILED", p.Status)
	}
	if diff := cmp.Diff([]string{"payment.failed@1"}, f.events(t, id)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if got := counterSum(t, reg, "gateway_provider_conflicts_total"); got != 1 {
		t.Errorf("gateway_provider_conflicts_total = %v, want 1", got)
	}
}

// counterSum sums a counter family of reg.
func counterSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range fams {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// holdAtProvider is a transport that holds every request to the provider until let is closed,
// and closes held when the first one arrives.
type holdAtProvider struct {
	held, let chan struct{}
	once      *sync.Once
}

func (h holdAtProvider) RoundTrip(r *http.Request) (*http.Response, error) {
	h.once.Do(func() { close(h.held) })
	<-h.let
	return http.DefaultTransport.RoundTrip(r)
}

// While the gateway waits on a payment provider it holds no admission slot (platform.Away):
// with one slot, a request resuming an authorization, held at the provider, lets another
// request in meanwhile; then it comes back and records the answer.
func TestProviderCallHoldsNoSlot(t *testing.T) {
	f := newFixture(t, nil)
	hold := holdAtProvider{held: make(chan struct{}), let: make(chan struct{}), once: &sync.Once{}}
	held, err := stripe.New(stripe.Config{APIKey: apiKey, BaseURL: f.sandbox.URL(), WebhookSecret: webhookSecret,
		HTTPClient: &http.Client{Timeout: platformtest.Timeout, Transport: hold}})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := app.New(app.Config{Repo: store.New(f.client), Providers: []provider.Provider{held, f.komoju},
		Now: f.clock, Metrics: app.NewMetrics(prometheus.NewRegistry())})
	if err != nil {
		t.Fatal(err)
	}
	_, id := f.request(t, "pm_card_visa")

	log, _ := platformtest.NewLogger(t, "gateway-abstraction")
	srv := platform.NewServer(platform.ServerOptions{Logger: log, Service: "gateway-abstraction", Project: "proj",
		MaxInFlight: 1, AdmissionWait: time.Hour})
	srv.Echo.POST("/resume", func(c echo.Context) error {
		if err := svc.Resume(c.Request().Context(), app.IntentKey(id, app.OpAuthorize)); err != nil {
			return err
		}
		return c.NoContent(http.StatusNoContent)
	})
	srv.Echo.GET("/other", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) })
	ln := platformtest.Listen(t)
	platformtest.Start(t, func(ctx context.Context) error { return srv.Serve(ctx, ln) })
	url := "http://" + ln.Addr().String()
	client := &http.Client{Timeout: platformtest.Timeout}

	resumed := make(chan error, 1)
	go func() {
		resp, err := client.Post(url+"/resume", "", nil)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
		}
		resumed <- err
	}()
	<-hold.held
	resp, err := client.Get(url + "/other")
	if err != nil {
		close(hold.let)
		t.Fatalf("a request while the only slot's holder waits on the provider: %v; want it admitted at once", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("a request while the only slot's holder waits on the provider: %d, want 204", resp.StatusCode)
	}
	close(hold.let)
	if err := <-resumed; err != nil {
		t.Fatalf("resume: %v", err)
	}
	if p := f.payment(t, id); p.Status != string(payment.Authorized) {
		t.Errorf("after the provider answered: %s, want AUTHORIZED", p.Status)
	}
}
