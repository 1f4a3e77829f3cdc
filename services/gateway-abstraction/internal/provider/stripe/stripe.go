package stripe

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/payment"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/provider"
)

// Metadata keys Authorize writes on the PaymentIntent; webhooks read the payment id back.
const (
	metaPaymentID  = "spanmart_payment_id"
	metaOrderID    = "order_id"
	metaCustomerID = "customer_id"
)

// DefaultHTTPTimeout bounds one API request when Config.HTTPClient is nil. stripe-go's own
// default is 80 s, far longer than a gateway request should hang on one provider call.
const DefaultHTTPTimeout = 10 * time.Second

// Config configures New.
type Config struct {
	APIKey string // the secret key, sk_live_... or sk_test_...
	// BaseURL is the API's base URL; empty is Stripe's production API. Locally it is the
	// sandbox's URL (paysim.Server.URL()).
	BaseURL string
	// WebhookSecret verifies Stripe-Signature (the endpoint's whsec_... signing secret).
	WebhookSecret string
	// WebhookTolerance is how old a webhook's signature may be; 0 is stripe-go's default, 300 s.
	WebhookTolerance time.Duration
	// HTTPClient makes the API requests; nil is a client with DefaultHTTPTimeout. Its Transport
	// is wrapped (in a copy) to learn the HTTP status of failed answers.
	HTTPClient *http.Client
	// MaxNetworkRetries is how often stripe-go itself retries a failed request; 0 (the zero
	// value, and the intended setting) turns its retries off. The gateway retries provider
	// calls itself, with back-off and a circuit breaker, under the same idempotency key; retries
	// inside stripe-go would multiply those attempts, sleep out of the gateway's sight (up to
	// seconds, ignoring the breaker) and hide the failures the breaker counts.
	MaxNetworkRetries int64
}

// Provider is the Stripe card provider. It is safe for concurrent use.
type Provider struct {
	sc               *stripego.Client
	webhookSecret    string
	webhookTolerance time.Duration
}

var _ provider.Provider = (*Provider)(nil)

// New returns a Provider for cfg; it reports every missing setting at once.
func New(cfg Config) (*Provider, error) {
	var problems []string
	if cfg.APIKey == "" {
		problems = append(problems, "an API key is required")
	}
	if cfg.WebhookSecret == "" {
		problems = append(problems, "a webhook signing secret is required")
	}
	if cfg.WebhookTolerance < 0 {
		problems = append(problems, fmt.Sprintf("webhook tolerance %v is negative", cfg.WebhookTolerance))
	}
	if cfg.MaxNetworkRetries < 0 {
		problems = append(problems, fmt.Sprintf("max network retries %d is negative", cfg.MaxNetworkRetries))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("stripe provider: %s", strings.Join(problems, "; "))
	}
	client := &http.Client{Timeout: DefaultHTTPTimeout}
	if cfg.HTTPClient != nil {
		c := *cfg.HTTPClient
		client = &c
	}
	next := client.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	client.Transport = statusTransport{next: next}

	bc := &stripego.BackendConfig{
		HTTPClient:        client,
		MaxNetworkRetries: stripego.Int64(cfg.MaxNetworkRetries),
		// stripe-go would print its own unstructured lines to standard error; every failure
		// it would log is returned to the gateway, which logs it (structured, with ids).
		LeveledLogger: &stripego.LeveledLogger{Level: stripego.LevelNull},
	}
	if cfg.BaseURL != "" {
		bc.URL = stripego.String(strings.TrimRight(cfg.BaseURL, "/"))
	}
	tolerance := cfg.WebhookTolerance
	if tolerance == 0 {
		tolerance = webhook.DefaultTolerance
	}
	return &Provider{
		sc:               stripego.NewClient(cfg.APIKey, stripego.WithBackends(stripego.NewBackendsWithConfig(bc))),
		webhookSecret:    cfg.WebhookSecret,
		webhookTolerance: tolerance,
	}, nil
}

// Name is payment.ProviderStripe.
func (p *Provider) Name() string { return payment.ProviderStripe }

// Authorize creates and confirms a PaymentIntent with manual capture (see the package doc for
// how its answer reads).
func (p *Provider) Authorize(ctx context.Context, r provider.AuthorizeRequest) (provider.Outcome, error) {
	const op = "authorize"
	var problems []string
	if r.IdempotencyKey == "" {
		problems = append(problems, "an idempotency key is required")
	}
	if r.Method != payment.Card {
		problems = append(problems, fmt.Sprintf("method %q is not a card payment", r.Method))
	}
	if r.Instrument == "" {
		problems = append(problems, "a card payment needs a payment method id as Instrument")
	}
	if r.AmountMinor <= 0 {
		problems = append(problems, fmt.Sprintf("amount %d is not positive", r.AmountMinor))
	}
	if len(r.Currency) != 3 {
		problems = append(problems, fmt.Sprintf("currency %q is not a 3-letter code", r.Currency))
	}
	if len(problems) > 0 {
		return provider.Outcome{}, invalid(op, strings.Join(problems, "; "))
	}
	params := &stripego.PaymentIntentCreateParams{
		Amount:        stripego.Int64(r.AmountMinor),
		Currency:      stripego.String(strings.ToLower(r.Currency)),
		PaymentMethod: stripego.String(r.Instrument),
		// Cards only: with automatic payment methods (Stripe's default since API version
		// 2023-08-16) confirm=true without a return_url is refused, since some methods redirect.
		PaymentMethodTypes: []*string{stripego.String("card")},
		Confirm:            stripego.Bool(true),
		CaptureMethod:      stripego.String(string(stripego.PaymentIntentCaptureMethodManual)),
	}
	params.Metadata = map[string]string{metaPaymentID: r.PaymentID, metaOrderID: r.OrderID, metaCustomerID: r.CustomerID}
	params.SetIdempotencyKey(r.IdempotencyKey)
	return p.do(ctx, op, func(ctx context.Context) (*stripego.PaymentIntent, error) {
		return p.sc.V1PaymentIntents.Create(ctx, params)
	}, nil)
}

// Capture captures the authorized PaymentIntent: all of it, or AmountMinor when it is positive
// (Stripe releases the rest).
func (p *Provider) Capture(ctx context.Context, r provider.Operation) (provider.Outcome, error) {
	const op = "capture"
	if err := checkOperation(op, r); err != nil {
		return provider.Outcome{}, err
	}
	params := &stripego.PaymentIntentCaptureParams{}
	if r.AmountMinor > 0 {
		params.AmountToCapture = stripego.Int64(r.AmountMinor)
	}
	params.SetIdempotencyKey(r.IdempotencyKey)
	return p.do(ctx, op, func(ctx context.Context) (*stripego.PaymentIntent, error) {
		return p.sc.V1PaymentIntents.Capture(ctx, r.ProviderPaymentID, params)
	}, func(now provider.Outcome) (provider.Outcome, bool) {
		switch now.Status {
		case payment.Expired: // the authorization lapsed: Stripe will never capture it
			return provider.Outcome{Status: payment.CaptureFailed, ProviderPaymentID: now.ProviderPaymentID, Reason: payment.ReasonExpired}, true
		case payment.Captured: // an earlier capture (under another key) took the money
			return now, true
		}
		return provider.Outcome{}, false
	})
}

// Void cancels the PaymentIntent, releasing the authorization (or giving up one the customer
// has not completed).
func (p *Provider) Void(ctx context.Context, r provider.Operation) (provider.Outcome, error) {
	const op = "void"
	if err := checkOperation(op, r); err != nil {
		return provider.Outcome{}, err
	}
	params := &stripego.PaymentIntentCancelParams{}
	params.SetIdempotencyKey(r.IdempotencyKey)
	return p.do(ctx, op, func(ctx context.Context) (*stripego.PaymentIntent, error) {
		return p.sc.V1PaymentIntents.Cancel(ctx, r.ProviderPaymentID, params)
	}, func(now provider.Outcome) (provider.Outcome, bool) {
		switch now.Status {
		case payment.Voided:
			return now, true
		case payment.Expired: // nothing is held any more, which is what a void asks for
			return provider.Outcome{Status: payment.Voided, ProviderPaymentID: now.ProviderPaymentID, Reason: payment.ReasonExpired}, true
		}
		return provider.Outcome{}, false
	})
}

// Refund refunds the PaymentIntent's charge: all of it, or AmountMinor when it is positive. The
// refund carries Spanmart's payment id as metadata, which is how its webhooks name the payment. A
// refund Stripe has not finished (pending) is read again by its id, since a retry under the same
// key replays the first answer; while it stays pending the call is a temporary error (see the
// package doc).
func (p *Provider) Refund(ctx context.Context, r provider.Operation) (provider.Outcome, error) {
	const op = "refund"
	if err := checkOperation(op, r); err != nil {
		return provider.Outcome{}, err
	}
	params := &stripego.RefundCreateParams{PaymentIntent: stripego.String(r.ProviderPaymentID)}
	if r.AmountMinor > 0 {
		params.Amount = stripego.Int64(r.AmountMinor)
	}
	params.Metadata = map[string]string{metaPaymentID: r.PaymentID}
	params.SetIdempotencyKey(r.IdempotencyKey)
	var status int
	rf, err := p.sc.V1Refunds.Create(context.WithValue(ctx, statusKey{}, &status), params)
	if err != nil {
		var se *stripego.Error
		if errors.As(err, &se) && se.Code == stripego.ErrorCodeChargeAlreadyRefunded {
			// An earlier refund (under another key) gave everything back.
			return provider.Outcome{Status: payment.Refunded, ProviderPaymentID: r.ProviderPaymentID}, nil
		}
		return provider.Outcome{}, failure(op, status, err)
	}
	if refundPending(rf) {
		if rf, err = p.sc.V1Refunds.Retrieve(context.WithValue(ctx, statusKey{}, &status), rf.ID, nil); err != nil {
			return provider.Outcome{}, failure(op, status, err)
		}
	}
	o, final, err := refundOutcome(rf, r.ProviderPaymentID)
	switch {
	case err != nil:
		return provider.Outcome{}, &provider.Error{Provider: payment.ProviderStripe, Op: op, Reason: payment.ReasonProviderUnavailable,
			Temporary: true, Status: status, Err: err}
	case !final:
		return provider.Outcome{}, &provider.Error{Provider: payment.ProviderStripe, Op: op, Reason: payment.ReasonProviderUnavailable,
			Temporary: true, Status: status, Err: fmt.Errorf("refund %s of %s is %s at Stripe", rf.ID, r.ProviderPaymentID, rf.Status)}
	}
	return o, nil
}

// Lookup retrieves the PaymentIntent; an unknown id is an error wrapping provider.ErrNotFound.
func (p *Provider) Lookup(ctx context.Context, providerPaymentID string) (provider.Outcome, error) {
	const op = "lookup"
	if providerPaymentID == "" {
		return provider.Outcome{}, invalid(op, "a provider payment id is required")
	}
	return p.do(ctx, op, func(ctx context.Context) (*stripego.PaymentIntent, error) {
		return p.sc.V1PaymentIntents.Retrieve(ctx, providerPaymentID, nil)
	}, nil)
}

func checkOperation(op string, r provider.Operation) error {
	var problems []string
	if r.IdempotencyKey == "" {
		problems = append(problems, "an idempotency key is required")
	}
	if r.ProviderPaymentID == "" {
		problems = append(problems, "a provider payment id is required")
	}
	if r.AmountMinor < 0 {
		problems = append(problems, fmt.Sprintf("amount %d is negative", r.AmountMinor))
	}
	if len(problems) > 0 {
		return invalid(op, strings.Join(problems, "; "))
	}
	return nil
}

// do makes one API call and reads its answer. A PaymentIntent is read as an Outcome; a card
// error is a FAILED Outcome; payment_intent_unexpected_state is offered to inState, which may
// read the PaymentIntent's current state as the operation's answer; every other failure is a
// *provider.Error.
func (p *Provider) do(ctx context.Context, op string, call func(context.Context) (*stripego.PaymentIntent, error),
	inState func(now provider.Outcome) (provider.Outcome, bool)) (provider.Outcome, error) {
	var status int
	pi, err := call(context.WithValue(ctx, statusKey{}, &status))
	if err == nil {
		o, err := outcomeOf(pi)
		if err != nil {
			return provider.Outcome{}, &provider.Error{Provider: payment.ProviderStripe, Op: op, Reason: payment.ReasonProviderUnavailable,
				Temporary: true, Status: status, Err: err}
		}
		return o, nil
	}
	var se *stripego.Error
	if errors.As(err, &se) {
		switch {
		case se.Type == stripego.ErrorTypeCard:
			o := provider.Outcome{Status: payment.Failed, Reason: reasonOf(se)}
			if se.PaymentIntent != nil {
				o.ProviderPaymentID = se.PaymentIntent.ID
			}
			return o, nil
		case se.Code == stripego.ErrorCodePaymentIntentUnexpectedState && se.PaymentIntent != nil && inState != nil:
			if now, err := outcomeOf(se.PaymentIntent); err == nil {
				if o, ok := inState(now); ok {
					return o, nil
				}
			}
		}
	}
	return provider.Outcome{}, failure(op, status, err)
}

// statusKey is the context key under which do leaves a place for the HTTP status of the call.
type statusKey struct{}

// statusTransport records the HTTP status of each response in the call's context. stripe-go
// keeps the status only when the body is Stripe's error JSON; a load balancer's 502 page comes
// back as a bare decoding error, and the status is what says the answer is a 5xx.
type statusTransport struct{ next http.RoundTripper }

func (t statusTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := t.next.RoundTrip(r)
	if res != nil {
		if status, ok := r.Context().Value(statusKey{}).(*int); ok {
			*status = res.StatusCode
		}
	}
	return res, err
}
