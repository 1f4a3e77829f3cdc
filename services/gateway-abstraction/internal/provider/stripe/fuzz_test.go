package stripe_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/spanmart/spanmart/emulator/paysim"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/provider"
)

// FuzzParseWebhook: whatever arrives at POST /webhooks/stripe, the parser never panics; a body
// signed with another secret, or signed too long ago, is ErrSignature; a body signed now is a
// notification with an id or ErrMalformed, never anything else.
func FuzzParseWebhook(f *testing.F) {
	f.Add([]byte(`{"id":"evt_1","object":"event","type":"payment_intent.succeeded","api_version":"2025-03-31.basil","data":{"object":{"id":"pi_1","object":"payment_intent","status":"succeeded","amount":1200,"currency":"jpy","metadata":{"spanmart_payment_id":"x"}}}}`), 0)
	f.Add([]byte(`{"id":"evt_2","object":"event","type":"charge.refunded","data":{"object":{"id":"ch_1","object":"charge","payment_intent":"pi_1"}}}`), 0)
	f.Add([]byte(`{"id":"evt_3","object":"event","type":"payment_intent.canceled","data":{"object":null}}`), 0)
	f.Add([]byte(`{}`), 0)
	f.Add([]byte(`not json`), 1)
	f.Add([]byte(`{"id":"evt_4","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_4"}}}`), 2)
	p := newProvider(f, "http://127.0.0.1:1", nil)
	f.Fuzz(func(t *testing.T, body []byte, how int) {
		now := time.Now()
		secret, at := webhookSecret, now
		mode := (how%3 + 3) % 3 // 0 signed now, 1 another secret, 2 ten minutes ago
		switch mode {
		case 1:
			secret = "whsec_another"
		case 2:
			at = now.Add(-10 * time.Minute)
		}
		h := http.Header{"Stripe-Signature": {paysim.SignatureHeader(body, secret, at)}}
		n, err := p.ParseWebhook(h, body, now)
		switch {
		case mode != 0 && !errors.Is(err, provider.ErrSignature):
			t.Fatalf("a body signed with another secret or 10 minutes ago: %v, want ErrSignature", err)
		case mode == 0 && err == nil && n.EventID == "":
			t.Fatal("a notification without an event id")
		case mode == 0 && err != nil && !errors.Is(err, provider.ErrMalformed):
			t.Fatalf("a body signed now: %v, want nil or ErrMalformed", err)
		}
	})
}
