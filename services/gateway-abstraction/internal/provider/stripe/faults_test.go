package stripe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/payment"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/provider"
)

// Answers that say nothing about the payment are temporary, with the status they came with; they
// never reach the sandbox here, and the same key then authorizes once.
func TestUnavailable(t *testing.T) {
	refused := httptest.NewServer(http.NotFoundHandler())
	refusedURL := refused.URL
	refused.Close() // nothing listens there any more: connection refused

	for _, tc := range []struct {
		name        string
		status      int
		contentType string
		body        string
	}{
		{"500 api_error", 500, "application/json", `{"error": {"type": "api_error", "message": "An unknown error occurred"}}`},
		{"503 api_error", 503, "application/json", `{"error": {"type": "api_error", "message": "Stripe is unavailable"}}`},
		{"502 page of a load balancer", 502, "text/html", "<html><body><h1>502 Bad Gateway</h1></body></html>"},
		{"429 rate limit", 429, "application/json", `{"error": {"type": "invalid_request_error", "code": "rate_limit", "message": "Too many requests"}}`},
		{"409 key in use", 409, "application/json", `{"error": {"type": "idempotency_error", "code": "idempotency_key_in_use", "message": "There is currently another in-progress request using this Idempotent Key"}}`},
		{"connection refused", 0, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := refusedURL
			var hits atomic.Int32
			if tc.status != 0 {
				fault := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					hits.Add(1)
					w.Header().Set("Content-Type", tc.contentType)
					w.WriteHeader(tc.status)
					io.WriteString(w, tc.body)
				}))
				t.Cleanup(fault.Close)
				url = fault.URL
			}
			r := cardRequest("pm_card_visa")
			o, err := newProvider(t, url, nil).Authorize(context.Background(), r)
			pe := providerError(t, err)
			if !pe.Temporary || pe.Reason != payment.ReasonProviderUnavailable || pe.Status != tc.status || !provider.Temporary(err) {
				t.Errorf("Authorize = %+v, %v; want temporary, provider_unavailable, http %d", o, err, tc.status)
			}
			// stripe-go's own retries are off: the gateway's retry policy is the only one.
			if tc.status != 0 && hits.Load() != 1 {
				t.Errorf("the fault server was asked %d times, want 1", hits.Load())
			}
			if pis := intentsOf(t, sandbox, r.PaymentID); len(pis) != 0 {
				t.Fatalf("the sandbox holds %+v, want nothing yet", pis)
			}
			if o, err := newProvider(t, sandbox.URL(), nil).Authorize(context.Background(), r); err != nil || o.Status != payment.Authorized {
				t.Errorf("retry with the same key = %+v, %v; want AUTHORIZED", o, err)
			}
			onlyIntent(t, sandbox, r.PaymentID)
		})
	}
}

// A request that Stripe carries out but whose answer does not come back in time is temporary;
// the retry with the same key is answered with the first PaymentIntent, and there is one.
func TestTimeoutThenRetry(t *testing.T) {
	for _, tc := range []struct {
		name    string
		client  *http.Client
		timeout time.Duration // of the call's context; 0: none
	}{
		{"http client timeout", &http.Client{Timeout: 200 * time.Millisecond}, 0},
		{"context deadline", nil, 200 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			held := newHoldingProxy(t, sandbox.URL())
			ctx := context.Background()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			r := cardRequest("pm_card_visa")
			o, err := newProvider(t, held.URL, tc.client).Authorize(ctx, r)
			pe := providerError(t, err)
			if !pe.Temporary || pe.Reason != payment.ReasonProviderUnavailable || pe.Status != 0 {
				t.Errorf("Authorize = %+v, %v; want temporary, provider_unavailable, http 0", o, err)
			}
			if ne := net.Error(nil); !errors.As(err, &ne) || !ne.Timeout() {
				t.Errorf("%v is not a timeout", err)
			}
			var first struct {
				ID string `json:"id"`
			}
			select {
			case body := <-held.answered:
				if err := json.Unmarshal(body, &first); err != nil || first.ID == "" {
					t.Fatalf("the sandbox's held answer %s: %v", body, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the sandbox never answered the proxy")
			}

			again, err := newProvider(t, sandbox.URL(), nil).Authorize(context.Background(), r)
			if err != nil || again.Status != payment.Authorized || again.ProviderPaymentID != first.ID {
				t.Errorf("retry with the same key = %+v, %v; want AUTHORIZED %s", again, err, first.ID)
			}
			onlyIntent(t, sandbox, r.PaymentID)
		})
	}
}

// holdingProxy forwards each request to the sandbox, sends the sandbox's answer on answered and
// holds it back from the client until the client gives up.
type holdingProxy struct {
	*httptest.Server
	answered chan []byte
}

func newHoldingProxy(t *testing.T, target string) *holdingProxy {
	h := &holdingProxy{answered: make(chan []byte, 1)}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		// The forwarded request outlives the client's: the sandbox carries it out in any case.
		out, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, target+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		out.Header = r.Header.Clone()
		res, err := http.DefaultClient.Do(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		answer, _ := io.ReadAll(res.Body)
		res.Body.Close()
		h.answered <- answer
		<-r.Context().Done()
	}))
	t.Cleanup(h.Close)
	return h
}
