package paysim

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stripe/stripe-go/v82"
)

const testSecret = "whsec_test_secret"

// fastRetry is a scaled-down retry policy so that retries happen within milliseconds.
var fastRetry = RetryPolicy{MaxAttempts: 5, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}

func webhookSandbox(t *testing.T) (*Server, *stripe.Client, *receiver) {
	t.Helper()
	rc := newReceiver(t, testSecret)
	srv, c := startSandbox(t, Options{WebhookURL: rc.URL, WebhookSecret: testSecret, WebhookRetry: fastRetry})
	return srv, c, rc
}

func TestWebhooksSignedAndComplete(t *testing.T) {
	_, c, rc := webhookSandbox(t)
	ctx := context.Background()
	pi, err := authorize(t, c, "pm_card_visa", 2000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.V1PaymentIntents.Capture(ctx, pi.ID, nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"payment_intent.created", "charge.succeeded", "payment_intent.amount_capturable_updated", "charge.captured", "payment_intent.succeeded"}
	eventually(t, "all events delivered", func() bool { return len(rc.eventsFor(pi.ID)) == len(want) })
	got := rc.eventsFor(pi.ID)
	slices.Sort(got) // deliveries run concurrently, so arrival order is not promised
	wantSorted := slices.Clone(want)
	slices.Sort(wantSorted)
	if diff := cmp.Diff(wantSorted, got); diff != "" {
		t.Errorf("delivered events (-want +got):\n%s", diff)
	}
	rc.mu.Lock()
	invalid := rc.invalid
	rc.mu.Unlock()
	if len(invalid) > 0 {
		t.Errorf("deliveries that failed verification: %v", invalid)
	}

	// The delivered event is the one the API serves, and the events list has them all.
	var succeeded stripe.Event
	for _, e := range rc.received() {
		if e.Type == "payment_intent.succeeded" && objectID(e) == pi.ID {
			succeeded = e
		}
	}
	if succeeded.GetObjectValue("status") != "succeeded" || succeeded.Request == nil || succeeded.Request.ID == "" {
		t.Errorf("succeeded event: status %q, request %+v", succeeded.GetObjectValue("status"), succeeded.Request)
	}
	fetched, err := c.V1Events.Retrieve(ctx, succeeded.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fetched.Type != succeeded.Type || fetched.GetObjectValue("id") != pi.ID {
		t.Errorf("retrieved event %s about %s", fetched.Type, fetched.GetObjectValue("id"))
	}
	var listed []string
	for e, err := range c.V1Events.List(ctx, &stripe.EventListParams{ListParams: stripe.ListParams{Limit: stripe.Int64(2)}, Type: stripe.String("payment_intent.*")}) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, string(e.Type))
	}
	// Newest first, paginated two at a time by stripe-go.
	if diff := cmp.Diff([]string{"payment_intent.succeeded", "payment_intent.amount_capturable_updated", "payment_intent.created"}, listed); diff != "" {
		t.Errorf("listed events (-want +got):\n%s", diff)
	}
}

// An endpoint subscribed to some event types (Stripe's enabled_events) is sent only those; the
// other events are still created and listed by the API.
func TestWebhookEventsFilter(t *testing.T) {
	rc := newReceiver(t, testSecret)
	srv, c := startSandbox(t, Options{WebhookURL: rc.URL, WebhookSecret: testSecret, WebhookRetry: fastRetry,
		WebhookEvents: []string{"payment_intent.amount_capturable_updated", "payment_intent.succeeded"}})
	ctx := context.Background()
	pi, err := authorize(t, c, "pm_card_visa", 2000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.V1PaymentIntents.Capture(ctx, pi.ID, nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"payment_intent.amount_capturable_updated", "payment_intent.succeeded"}
	eventually(t, "the subscribed events delivered", func() bool { return len(rc.eventsFor(pi.ID)) == len(want) })
	got := rc.eventsFor(pi.ID)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("delivered %v, want %v", got, want)
	}
	for _, d := range srv.Deliveries() {
		if !slices.Contains(want, d.EventType) {
			t.Errorf("a delivery of %s, which the endpoint is not subscribed to", d.EventType)
		}
	}
	n := 0
	for e, err := range c.V1Events.List(ctx, &stripe.EventListParams{}) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == "charge.succeeded" || e.Type == "payment_intent.created" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("the API lists %d of the unsubscribed events, want 2 (they exist, they are only not sent)", n)
	}
}

func TestWebhookDeclineEvents(t *testing.T) {
	_, c, rc := webhookSandbox(t)
	_, err := authorize(t, c, "pm_card_chargeDeclinedInsufficientFunds", 2000)
	pi := stripeError(t, err).PaymentIntent
	eventually(t, "payment_failed delivered", func() bool { return slices.Contains(rc.eventsFor(pi.ID), "payment_intent.payment_failed") })
	for _, e := range rc.received() {
		if e.Type == "payment_intent.payment_failed" {
			if got := e.GetObjectValue("last_payment_error", "decline_code"); got != "insufficient_funds" {
				t.Errorf("decline_code in event = %q", got)
			}
		}
	}
}

func TestWebhookRetriedAfter500(t *testing.T) {
	srv, c, rc := webhookSandbox(t)
	rc.fail = func(e stripe.Event, nth int) bool { return nth <= 2 } // two 500s, then 200
	pi, err := authorize(t, c, "pm_card_threeDSecure2Required", 2000)
	if err != nil {
		t.Fatal(err)
	}
	var d Delivery
	// The log records an attempt once its answer is back, just after the receiver has the event.
	eventually(t, "requires_action delivered", func() bool {
		for _, d = range srv.Deliveries() {
			if d.EventType == "payment_intent.requires_action" && d.State == "delivered" {
				return true
			}
		}
		return false
	})
	var statuses []int
	for _, a := range d.Attempts {
		statuses = append(statuses, a.Status)
	}
	if diff := cmp.Diff([]int{500, 500, 200}, statuses); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
	if !slices.Contains(rc.eventsFor(pi.ID), "payment_intent.requires_action") {
		t.Error("receiver did not accept the event")
	}
}

func TestWebhookGivesUpAfterMaxAttempts(t *testing.T) {
	srv, c, rc := webhookSandbox(t)
	rc.fail = func(stripe.Event, int) bool { return true }
	if _, err := authorize(t, c, "pm_card_visa", 2000); err != nil {
		t.Fatal(err)
	}
	eventually(t, "deliveries failed", func() bool {
		ds := srv.Deliveries()
		return len(ds) == 3 && !slices.ContainsFunc(ds, func(d Delivery) bool { return d.State != "failed" })
	})
	for _, d := range srv.Deliveries() {
		if len(d.Attempts) != fastRetry.MaxAttempts {
			t.Errorf("%s: %d attempts, want %d", d.EventType, len(d.Attempts), fastRetry.MaxAttempts)
		}
	}
}

func TestWebhookFaults(t *testing.T) {
	t.Run("duplicate", func(t *testing.T) {
		srv, c, rc := webhookSandbox(t)
		pi, err := authorize(t, c, "pm_card_threeDSecure2Required", 2000)
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "requires_action", func() bool { return len(rc.eventsFor(pi.ID)) == 2 })
		setFault(t, srv, `{"mode":"duplicate","count":1}`)
		if _, err := c.V1PaymentIntents.Cancel(context.Background(), pi.ID, nil); err != nil {
			t.Fatal(err)
		}
		eventually(t, "canceled twice", func() bool { return countOf(rc.eventsFor(pi.ID), "payment_intent.canceled") == 2 })
		rc.mu.Lock()
		defer rc.mu.Unlock()
		for id, n := range rc.seen {
			if e := findEvent(rc.events, id); e.Type == "payment_intent.canceled" && n != 2 {
				t.Errorf("canceled event seen %d times", n)
			}
		}
	})
	t.Run("drop", func(t *testing.T) {
		srv, c, rc := webhookSandbox(t)
		setFault(t, srv, `{"mode":"drop","count":2}`)
		pi, err := authorize(t, c, "pm_card_threeDSecure2Required", 2000) // created + requires_action: dropped
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.V1PaymentIntents.Cancel(context.Background(), pi.ID, nil); err != nil {
			t.Fatal(err)
		}
		want := []string{"payment_intent.created:dropped", "payment_intent.requires_action:dropped", "payment_intent.canceled:delivered"}
		var states []string
		eventually(t, "canceled delivered", func() bool {
			states = states[:0]
			for _, d := range srv.Deliveries() {
				states = append(states, d.EventType+":"+d.State)
			}
			return slices.Equal(want, states)
		})
		if diff := cmp.Diff([]string{"payment_intent.canceled"}, rc.eventsFor(pi.ID)); diff != "" {
			t.Errorf("delivered (-want +got):\n%s", diff)
		}
	})
	t.Run("reorder", func(t *testing.T) {
		srv, c, rc := webhookSandbox(t)
		pi, err := authorize(t, c, "pm_card_threeDSecure2Required", 2000)
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "first events", func() bool { return len(rc.eventsFor(pi.ID)) == 2 })
		setFault(t, srv, `{"mode":"reorder"}`)
		pi, err = c.V1PaymentIntents.Confirm(context.Background(), pi.ID, nil) // charge.succeeded, amount_capturable_updated
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "both delivered", func() bool { return len(rc.eventsFor(pi.ID)) == 4 })
		if diff := cmp.Diff([]string{"payment_intent.amount_capturable_updated", "charge.succeeded"}, rc.eventsFor(pi.ID)[2:]); diff != "" {
			t.Errorf("arrival order (-want +got):\n%s", diff)
		}
	})
	t.Run("delay", func(t *testing.T) {
		srv, c, rc := webhookSandbox(t)
		if err := srv.SetWebhookFault(WebhookFault{Mode: FaultDelay, Delay: 200 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		pi, err := authorize(t, c, "pm_card_threeDSecure2Required", 2000)
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "delayed events", func() bool {
			ds := srv.Deliveries()
			return len(ds) == 2 && !slices.ContainsFunc(ds, func(d Delivery) bool { return d.State != "delivered" })
		})
		if len(rc.eventsFor(pi.ID)) != 2 {
			t.Errorf("received %v", rc.eventsFor(pi.ID))
		}
		for _, d := range srv.Deliveries() {
			if d.Attempts[0].At.Sub(start) < 200*time.Millisecond {
				t.Errorf("%s attempted %v after the request, before the delay", d.EventType, d.Attempts[0].At.Sub(start))
			}
		}
	})
	t.Run("bad mode", func(t *testing.T) {
		srv, _, _ := webhookSandbox(t)
		resp, err := http.Post(srv.URL()+"/_sandbox/webhooks", "application/json", bytes.NewReader([]byte(`{"mode":"explode"}`)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("status %d, want 400", resp.StatusCode)
		}
	})
}

func setFault(t *testing.T, srv *Server, body string) {
	t.Helper()
	resp, err := http.Post(srv.URL()+"/_sandbox/webhooks", "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /_sandbox/webhooks %s: status %d", body, resp.StatusCode)
	}
	var got struct {
		Fault struct{ Mode string } `json:"fault"`
	}
	json.NewDecoder(resp.Body).Decode(&got)
	if got.Fault.Mode == "" {
		t.Fatalf("POST /_sandbox/webhooks answered no fault")
	}
}

func countOf(types []string, typ string) int {
	n := 0
	for _, t := range types {
		if t == typ {
			n++
		}
	}
	return n
}

func findEvent(evs []stripe.Event, id string) stripe.Event {
	for _, e := range evs {
		if e.ID == id {
			return e
		}
	}
	return stripe.Event{}
}
