package stripe_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/spanmart/spanmart/emulator/paysim"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/payment"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/provider"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/provider/stripe"
)

const (
	apiKey        = "sk_test_spanmart"
	webhookSecret = "whsec_spanmart_test"
)

// sandbox is shared by the tests that do not move its clock; each test makes its own payments
// (fresh payment ids and idempotency keys) and looks only at those. hooks receives its webhooks.
var (
	sandbox *paysim.Server
	hooks   *receiver
)

func TestMain(m *testing.M) {
	hooks = newReceiver()
	var err error
	sandbox, err = startSandbox(hooks)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	sandbox.Close()
	hooks.Close()
	os.Exit(code)
}

func startSandbox(hooks *receiver) (*paysim.Server, error) {
	return paysim.Start(context.Background(), paysim.Options{
		APIKey:        apiKey,
		WebhookURL:    hooks.URL,
		WebhookSecret: webhookSecret,
		WebhookRetry:  paysim.RetryPolicy{MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond},
	})
}

// newProvider is the adapter pointed at baseURL (the sandbox, or a proxy in front of it).
func newProvider(t testing.TB, baseURL string, client *http.Client) *stripe.Provider {
	t.Helper()
	p, err := stripe.New(stripe.Config{APIKey: apiKey, BaseURL: baseURL, WebhookSecret: webhookSecret, HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// cardRequest is an authorization of a new payment with a test card.
func cardRequest(instrument string) provider.AuthorizeRequest {
	id := "pay-" + rand.Text()
	return provider.AuthorizeRequest{
		IdempotencyKey: "authorize-" + id,
		PaymentID:      id,
		OrderID:        "ord-" + id,
		CustomerID:     "cus-1",
		Method:         payment.Card,
		AmountMinor:    2400,
		Currency:       "JPY",
		Instrument:     instrument,
	}
}

// authorized authorizes a new visa payment and returns its request and the PaymentIntent id.
func authorized(t *testing.T, p *stripe.Provider) (provider.AuthorizeRequest, string) {
	t.Helper()
	r := cardRequest("pm_card_visa")
	o, err := p.Authorize(context.Background(), r)
	if err != nil || o.Status != payment.Authorized {
		t.Fatalf("Authorize(visa) = %+v, %v; want AUTHORIZED", o, err)
	}
	return r, o.ProviderPaymentID
}

// sandboxIntent is a PaymentIntent as the sandbox's read-back shows it.
type sandboxIntent struct {
	ID             string            `json:"id"`
	Status         string            `json:"status"`
	Amount         int64             `json:"amount"`
	AmountReceived int64             `json:"amount_received"`
	Currency       string            `json:"currency"`
	CaptureMethod  string            `json:"capture_method"`
	Metadata       map[string]string `json:"metadata"`
}

// intentsOf reads back, from the sandbox at srv, every PaymentIntent made for the payment.
func intentsOf(t *testing.T, srv *paysim.Server, paymentID string) []sandboxIntent {
	t.Helper()
	var out []sandboxIntent
	for _, pi := range readBack[sandboxIntent](t, srv, "/_sandbox/payment_intents") {
		if pi.Metadata["spanmart_payment_id"] == paymentID {
			out = append(out, pi)
		}
	}
	return out
}

// readBack is the data of one of the sandbox's read-back endpoints (path, under /_sandbox/).
func readBack[T any](t *testing.T, srv *paysim.Server, path string) []T {
	t.Helper()
	res, err := http.Get(srv.URL() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var all struct {
		Data []T `json:"data"`
	}
	if err := json.NewDecoder(res.Body).Decode(&all); err != nil {
		t.Fatal(err)
	}
	return all.Data
}

// onlyIntent is the one PaymentIntent of the payment in the sandbox; more or fewer fail the test.
func onlyIntent(t *testing.T, srv *paysim.Server, paymentID string) sandboxIntent {
	t.Helper()
	pis := intentsOf(t, srv, paymentID)
	if len(pis) != 1 {
		t.Fatalf("the sandbox holds %d payment intents for payment %s, want 1: %+v", len(pis), paymentID, pis)
	}
	return pis[0]
}

// providerError returns err as a *provider.Error or fails the test.
func providerError(t *testing.T, err error) *provider.Error {
	t.Helper()
	var pe *provider.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *provider.Error", err, err)
	}
	return pe
}

// eventually polls cond until it holds, failing the test after a deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// receiver is a webhook endpoint that keeps every delivery as it came, for ParseWebhook.
type receiver struct {
	*httptest.Server
	mu  sync.Mutex
	got []delivery
}

type delivery struct {
	header http.Header
	body   []byte
}

func newReceiver() *receiver {
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.got = append(r.got, delivery{header: req.Header.Clone(), body: body})
		r.mu.Unlock()
	}))
	return r
}

func (r *receiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

// notifications parses every delivery so far with p (each must verify and decode: they are the
// sandbox's real, signed deliveries) and returns those about the PaymentIntent, by event type.
func notifications(t *testing.T, p *stripe.Provider, r *receiver, providerPaymentID string) map[string]provider.Notification {
	t.Helper()
	out := map[string]provider.Notification{}
	for _, d := range r.deliveries() {
		n, err := p.ParseWebhook(d.header, d.body, time.Now())
		if err != nil {
			t.Fatalf("ParseWebhook of a real delivery: %v\n%s", err, d.body)
		}
		if n.ProviderPaymentID == providerPaymentID {
			out[n.EventType] = n
		}
	}
	return out
}

// waitNotifications waits until events of every type in types about the PaymentIntent have
// arrived at r, and returns them.
func waitNotifications(t *testing.T, p *stripe.Provider, r *receiver, providerPaymentID string, types ...string) map[string]provider.Notification {
	t.Helper()
	var got map[string]provider.Notification
	eventually(t, fmt.Sprintf("webhooks %v about %s", types, providerPaymentID), func() bool {
		got = notifications(t, p, r, providerPaymentID)
		for _, typ := range types {
			if _, ok := got[typ]; !ok {
				return false
			}
		}
		return true
	})
	return got
}
