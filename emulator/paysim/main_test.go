package paysim

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

	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"
)

// sandbox is shared by tests that need no webhooks or clock changes of their own; every test
// creates its own PaymentIntents.
var (
	sandbox *Server
	sc      *stripe.Client
)

const testKey = "sk_test_paysim"

func TestMain(m *testing.M) {
	var err error
	sandbox, err = Start(context.Background(), Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sc = newClient(sandbox.URL(), testKey)
	code := m.Run()
	sandbox.Close()
	os.Exit(code)
}

// newClient is stripe-go pointed at a sandbox, exactly as an application would point it.
func newClient(url, key string) *stripe.Client {
	backends := stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		URL:           stripe.String(url),
		LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
	})
	return stripe.NewClient(key, stripe.WithBackends(backends))
}

// startSandbox starts a sandbox of the test's own, closed at the end of the test.
func startSandbox(t *testing.T, opts Options) (*Server, *stripe.Client) {
	t.Helper()
	s, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, newClient(s.URL(), testKey)
}

// stripeError returns err as the *stripe.Error stripe-go produces for an API error.
func stripeError(t *testing.T, err error) *stripe.Error {
	t.Helper()
	var se *stripe.Error
	if !errors.As(err, &se) {
		t.Fatalf("error %v (%T) is not a *stripe.Error", err, err)
	}
	return se
}

// receiver is a webhook endpoint that verifies every delivery with webhook.ConstructEvent and
// records the events. fail, if set, decides per delivery whether to answer 500 instead.
type receiver struct {
	*httptest.Server
	secret string

	mu      sync.Mutex
	events  []stripe.Event
	invalid []string
	fail    func(e stripe.Event, nth int) bool // nth: how many times this event was seen, 1-based
	seen    map[string]int
}

func newReceiver(t *testing.T, secret string) *receiver {
	rc := &receiver{secret: secret, seen: map[string]int{}}
	rc.Server = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	e, err := webhook.ConstructEvent(body, r.Header.Get("Stripe-Signature"), rc.secret)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if err != nil {
		rc.invalid = append(rc.invalid, err.Error())
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	rc.seen[e.ID]++
	if rc.fail != nil && rc.fail(e, rc.seen[e.ID]) {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	rc.events = append(rc.events, e)
	w.WriteHeader(http.StatusOK)
}

// received returns the events accepted so far, in arrival order.
func (rc *receiver) received() []stripe.Event {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]stripe.Event(nil), rc.events...)
}

// eventsFor returns the types of accepted events about the object with id, in arrival order.
func (rc *receiver) eventsFor(id string) []string {
	var types []string
	for _, e := range rc.received() {
		if objectID(e) == id {
			types = append(types, string(e.Type))
		}
	}
	return types
}

func objectID(e stripe.Event) string {
	var obj struct {
		ID            string `json:"id"`
		PaymentIntent string `json:"payment_intent"`
	}
	json.Unmarshal(e.Data.Raw, &obj)
	if strings.HasPrefix(obj.ID, "pi_") {
		return obj.ID
	}
	return obj.PaymentIntent
}

// eventually polls cond until it holds or 10 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// authorize creates and confirms a manual-capture PaymentIntent with a test payment method.
func authorize(t *testing.T, c *stripe.Client, pm string, amount int64) (*stripe.PaymentIntent, error) {
	t.Helper()
	return c.V1PaymentIntents.Create(context.Background(), &stripe.PaymentIntentCreateParams{
		Amount:        stripe.Int64(amount),
		Currency:      stripe.String("usd"),
		PaymentMethod: stripe.String(pm),
		CaptureMethod: stripe.String("manual"),
		Confirm:       stripe.Bool(true),
	})
}
