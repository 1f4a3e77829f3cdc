package paysim

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
)

func TestAuthorizationLapsesAfterSevenDays(t *testing.T) {
	start := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	rc := newReceiver(t, testSecret)
	srv, c := startSandbox(t, Options{WebhookURL: rc.URL, WebhookSecret: testSecret, WebhookRetry: fastRetry, ClockStart: start})
	ctx := context.Background()
	pi, err := authorize(t, c, "pm_card_visa", 3000)
	if err != nil {
		t.Fatal(err)
	}
	if pi.Created < start.Unix() || pi.Created > start.Add(time.Minute).Unix() {
		t.Errorf("created %d, want about %d (the virtual clock)", pi.Created, start.Unix())
	}

	advance(t, srv, `{"duration":"167h"}`)
	if got, err := c.V1PaymentIntents.Retrieve(ctx, pi.ID, nil); err != nil || got.Status != stripe.PaymentIntentStatusRequiresCapture {
		t.Fatalf("after 167 h: %v, %v", got.Status, err)
	}
	now := advance(t, srv, `{"seconds":3600}`)
	if now < start.Add(168*time.Hour).Unix() {
		t.Errorf("clock at %d, want at least %d", now, start.Add(168*time.Hour).Unix())
	}
	got, err := c.V1PaymentIntents.Retrieve(ctx, pi.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != stripe.PaymentIntentStatusCanceled || got.CancellationReason != stripe.PaymentIntentCancellationReasonAutomatic || got.AmountCapturable != 0 {
		t.Errorf("after 7 days: status %s, reason %s, capturable %d", got.Status, got.CancellationReason, got.AmountCapturable)
	}
	if _, err := c.V1PaymentIntents.Capture(ctx, pi.ID, nil); stripeError(t, err).Code != "payment_intent_unexpected_state" {
		t.Errorf("capture after lapse: %v", err)
	}
	eventually(t, "canceled event delivered", func() bool { return slices.Contains(rc.eventsFor(pi.ID), "payment_intent.canceled") })
	for _, e := range rc.received() {
		if e.Type == "payment_intent.canceled" && e.Request.ID != "" {
			t.Errorf("automatic cancellation carries request %q, want none", e.Request.ID)
		}
	}
}

func TestReadBack(t *testing.T) {
	srv, c := startSandbox(t, Options{})
	ctx := context.Background()
	pi, err := c.V1PaymentIntents.Create(ctx, &stripe.PaymentIntentCreateParams{
		Amount: stripe.Int64(500), Currency: stripe.String("usd"), PaymentMethod: stripe.String("pm_card_visa"), Confirm: stripe.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	rf, err := c.V1Refunds.Create(ctx, &stripe.RefundCreateParams{PaymentIntent: stripe.String(pi.ID), Amount: stripe.Int64(100)})
	if err != nil {
		t.Fatal(err)
	}
	var intents struct{ Data []stripe.PaymentIntent }
	getJSON(t, srv.URL()+"/_sandbox/payment_intents", &intents)
	if len(intents.Data) != 1 || intents.Data[0].ID != pi.ID || intents.Data[0].AmountReceived != 500 {
		t.Errorf("payment intents %+v", intents.Data)
	}
	var refunds struct{ Data []stripe.Refund }
	getJSON(t, srv.URL()+"/_sandbox/refunds", &refunds)
	if len(refunds.Data) != 1 || refunds.Data[0].ID != rf.ID || refunds.Data[0].Amount != 100 {
		t.Errorf("refunds %+v", refunds.Data)
	}
	var log struct {
		Fault      map[string]any
		Deliveries []Delivery
	}
	getJSON(t, srv.URL()+"/_sandbox/webhooks", &log)
	if log.Fault["mode"] != FaultNone || len(log.Deliveries) != 0 {
		t.Errorf("webhooks without a URL: %+v", log)
	}
}

func advance(t *testing.T, srv *Server, body string) int64 {
	t.Helper()
	resp, err := http.Post(srv.URL()+"/_sandbox/clock/advance", "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct{ Now int64 }
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("advance %s: status %d, %v", body, resp.StatusCode, err)
	}
	return got.Now
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d", url, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}
