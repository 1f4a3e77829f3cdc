package komoju_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/provider"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/provider/komoju"
)

// FuzzParseWebhook: whatever arrives at POST /webhooks/komoju, the parser never panics; an
// unsigned or wrongly signed body is ErrSignature, a signed one is a notification with an id or
// ErrMalformed, never anything else.
func FuzzParseWebhook(f *testing.F) {
	f.Add([]byte(`{"id":"ev_1","type":"payment.captured","data":{"id":"p_1","status":"captured","amount":1200,"currency":"JPY","payment_details":{"type":"konbini"},"metadata":{"payment_id":"x"}}}`), true)
	f.Add([]byte(`{"id":"ev_2","type":"ping"}`), true)
	f.Add([]byte(`{"id":"ev_3","type":"payment.updated","data":null}`), true)
	f.Add([]byte(`{"id":"","type":"payment.captured"}`), true)
	f.Add([]byte(`not json`), true)
	f.Add([]byte(`{"id":"ev_4","type":"payment.captured","data":{"id":"p_4","status":"captured"}}`), false)
	const secret = "whsec_fuzz"
	p, err := komoju.New(komoju.Config{SecretKey: "sk", WebhookSecret: secret})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, sign bool) {
		h := http.Header{}
		if sign {
			mac := hmac.New(sha256.New, []byte(secret))
			mac.Write(body)
			h.Set("X-Komoju-Signature", hex.EncodeToString(mac.Sum(nil)))
		} else {
			h.Set("X-Komoju-Signature", hex.EncodeToString(body))
		}
		n, err := p.ParseWebhook(h, body, time.Now())
		switch {
		case !sign && !errors.Is(err, provider.ErrSignature):
			t.Fatalf("a body signed with the wrong key: %v, want ErrSignature", err)
		case sign && err == nil && n.EventID == "":
			t.Fatal("a notification without an event id")
		case sign && err != nil && !errors.Is(err, provider.ErrMalformed):
			t.Fatalf("a signed body: %v, want nil or ErrMalformed", err)
		}
	})
}
