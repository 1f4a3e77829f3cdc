package komoju

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/payment"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/provider"
)

// Metadata keys Authorize writes on the payment; webhooks read the payment id back.
const (
	metaPaymentID  = "payment_id"
	metaOrderID    = "order_id"
	metaCustomerID = "customer_id"
)

// DefaultBaseURL is KOMOJU's production API host; the API's paths (/api/v1/...) are appended.
const DefaultBaseURL = "https://komoju.com"

// DefaultHTTPTimeout bounds one API request when Config.HTTPClient is nil.
const DefaultHTTPTimeout = 10 * time.Second

// idempotencyHeader carries the idempotency key of a POST; KOMOJU takes at most
// maxIdempotencyKey characters.
const (
	idempotencyHeader = "X-KOMOJU-IDEMPOTENCY"
	maxIdempotencyKey = 100
)

// Config configures New.
type Config struct {
	// BaseURL is the API's base URL without /api/v1; empty is DefaultBaseURL. Locally it is
	// the sandbox's URL (paysim.Server.URL()).
	BaseURL string
	// SecretKey authenticates the API requests (the user name of HTTP Basic).
	SecretKey string
	// WebhookSecret verifies X-Komoju-Signature (the webhook's secret token).
	WebhookSecret string
	// HTTPClient makes the API requests; nil is a client with DefaultHTTPTimeout.
	HTTPClient *http.Client
}

// Provider is the KOMOJU provider. It is safe for concurrent use.
type Provider struct {
	baseURL       string
	secretKey     string
	webhookSecret string
	hc            *http.Client
}

var _ provider.Provider = (*Provider)(nil)

// New returns a Provider for cfg; it reports every missing or malformed setting at once.
func New(cfg Config) (*Provider, error) {
	var problems []string
	if cfg.SecretKey == "" {
		problems = append(problems, "a secret key is required")
	}
	if cfg.WebhookSecret == "" {
		problems = append(problems, "a webhook secret is required")
	}
	base := strings.TrimRight(cfg.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL
	}
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		problems = append(problems, fmt.Sprintf("base URL %q is not an http(s) URL", cfg.BaseURL))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("komoju provider: %s", strings.Join(problems, "; "))
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: DefaultHTTPTimeout}
	}
	return &Provider{baseURL: base, secretKey: cfg.SecretKey, webhookSecret: cfg.WebhookSecret, hc: hc}, nil
}

// Name is payment.ProviderKomoju.
func (p *Provider) Name() string { return payment.ProviderKomoju }

// createRequest is the body of POST /api/v1/payments.
type createRequest struct {
	Amount           int64             `json:"amount"`
	Currency         string            `json:"currency"`
	ExternalOrderNum string            `json:"external_order_num"`
	Capture          *bool             `json:"capture,omitempty"`
	Metadata         map[string]string `json:"metadata"`
	PaymentDetails   detailsRequest    `json:"payment_details"`
}

type detailsRequest struct {
	Type  string `json:"type"`
	Store string `json:"store,omitempty"`
	Email string `json:"email,omitempty"`
}

// Authorize creates the payment: a slip for konbini and bank transfer (PENDING), a hold for
// PayPay (AUTHORIZED, or FAILED when the wallet cannot cover it).
func (p *Provider) Authorize(ctx context.Context, r provider.AuthorizeRequest) (provider.Outcome, error) {
	const op = "authorize"
	var problems []string
	if r.IdempotencyKey == "" {
		problems = append(problems, "an idempotency key is required")
	}
	if r.PaymentID == "" {
		problems = append(problems, "a payment id is required")
	}
	if r.AmountMinor <= 0 {
		problems = append(problems, fmt.Sprintf("amount %d is not positive", r.AmountMinor))
	}
	if len(r.Currency) != 3 {
		problems = append(problems, fmt.Sprintf("currency %q is not a 3-letter code", r.Currency))
	}
	body := createRequest{
		Amount: r.AmountMinor, Currency: strings.ToUpper(r.Currency), ExternalOrderNum: r.PaymentID,
		Metadata: map[string]string{metaPaymentID: r.PaymentID, metaOrderID: r.OrderID, metaCustomerID: r.CustomerID},
	}
	switch r.Method {
	case payment.Konbini:
		body.PaymentDetails = detailsRequest{Type: typeKonbini, Store: r.Instrument, Email: r.Email}
		if r.Instrument == "" {
			problems = append(problems, "a konbini payment needs the store as Instrument")
		}
	case payment.BankTransfer:
		body.PaymentDetails = detailsRequest{Type: typeBankTransfer, Email: r.Email}
	case payment.Wallet:
		body.PaymentDetails = detailsRequest{Type: typePayPay}
		body.Capture = new(bool) // false: hold the amount until Capture
	default:
		problems = append(problems, fmt.Sprintf("method %q is not a KOMOJU payment method", r.Method))
	}
	if r.Method.UsesSlip() && r.Email == "" {
		problems = append(problems, "a slip needs the customer's email")
	}
	if len(problems) > 0 {
		return provider.Outcome{}, invalid(op, strings.Join(problems, "; "))
	}
	pay, err := p.call(ctx, op, http.MethodPost, "/api/v1/payments", body, r.IdempotencyKey)
	if err != nil {
		return provider.Outcome{}, err
	}
	return readOutcome(op, pay)
}

// Capture takes the held money (see the package doc for what it does per method and status).
func (p *Provider) Capture(ctx context.Context, r provider.Operation) (provider.Outcome, error) {
	return p.operate(ctx, "capture", r, struct{}{}, func(pay paymentJSON, o provider.Outcome) (provider.Outcome, string, error) {
		switch {
		case o.Status == payment.Authorized && !pay.usesSlip(): // PayPay holds the amount
			return provider.Outcome{}, "capture", nil
		case o.Status == payment.Authorized, o.Status == payment.Captured:
			// A paid slip: KOMOJU took the money when the customer paid; or an earlier
			// capture did.
			return provider.Outcome{Status: payment.Captured, ProviderPaymentID: pay.ID}, "", nil
		case o.Status == payment.Expired:
			return provider.Outcome{Status: payment.CaptureFailed, ProviderPaymentID: pay.ID, Reason: payment.ReasonExpired}, "", nil
		}
		return provider.Outcome{}, "", invalid("capture", fmt.Sprintf("payment %s cannot be captured: it is %s at KOMOJU", pay.ID, pay.Status))
	})
}

// Void releases the hold or cancels the unpaid slip, and answers that a paid slip is paid
// (AUTHORIZED) without acting: giving its money back is a Refund (see the package doc).
func (p *Provider) Void(ctx context.Context, r provider.Operation) (provider.Outcome, error) {
	return p.operate(ctx, "void", r, struct{}{}, func(pay paymentJSON, o provider.Outcome) (provider.Outcome, string, error) {
		switch {
		case pay.Status == statusPending, pay.Status == statusAuthorized:
			return provider.Outcome{}, "cancel", nil
		case pay.Status == statusCaptured && pay.usesSlip():
			// The customer paid the slip: its money is taken, and only a refund gives it back.
			return provider.Outcome{Status: payment.Authorized, ProviderPaymentID: pay.ID}, "", nil
		case o.Status == payment.Voided:
			return o, "", nil
		case o.Status == payment.Expired: // nothing is held any more, which is what a void asks for
			return provider.Outcome{Status: payment.Voided, ProviderPaymentID: pay.ID, Reason: payment.ReasonExpired}, "", nil
		}
		return provider.Outcome{}, "", invalid("void", fmt.Sprintf("payment %s cannot be voided: it is %s at KOMOJU", pay.ID, pay.Status))
	})
}

// refundRequest is the body of POST /api/v1/payments/{id}/refund; no amount is all that is left.
type refundRequest struct {
	Amount int64 `json:"amount,omitempty"`
}

// Refund gives the money of a captured payment or a paid slip back: all of it, or AmountMinor
// when it is positive (see the package doc). KOMOJU pays a slip's refund out later, by bank
// transfer: the answer is then REFUND_PENDING, and the refund request's webhook or a Lookup
// says how it ended.
func (p *Provider) Refund(ctx context.Context, r provider.Operation) (provider.Outcome, error) {
	const op = "refund"
	o, err := p.operate(ctx, op, r, refundRequest{Amount: r.AmountMinor}, func(pay paymentJSON, o provider.Outcome) (provider.Outcome, string, error) {
		switch {
		case pay.Status == statusRefunded: // an earlier refund gave it all back
			return o, "", nil
		case o.Status == payment.RefundPending:
			// An earlier request is accepted and not paid out: asking again would refund twice.
			return o, "", nil
		case pay.Status == statusCaptured:
			return provider.Outcome{}, "refund", nil
		}
		return provider.Outcome{}, "", invalid(op, fmt.Sprintf("payment %s cannot be refunded: it is %s at KOMOJU", pay.ID, pay.Status))
	})
	if err == nil && o.Status != payment.Refunded && o.Status != payment.RefundPending {
		// A refund of less than what is left leaves the payment captured: not what was asked.
		return provider.Outcome{}, invalid(op, fmt.Sprintf("payment %s is %s at KOMOJU after the refund", r.ProviderPaymentID, o.Status))
	}
	return o, err
}

// decideFunc reads a payment and its Outcome as what an operation answers, or names the
// action (a POST /api/v1/payments/{id}/<action>) that must be taken first.
type decideFunc func(pay paymentJSON, o provider.Outcome) (answer provider.Outcome, action string, err error)

// operate reads the payment, lets decide choose, takes the action it names (with body) and
// answers with the payment the action leaves. An action refused as not allowed (422: the
// payment changed in between) is followed by reading the payment again and deciding once more,
// without acting.
func (p *Provider) operate(ctx context.Context, op string, r provider.Operation, body any, decide decideFunc) (provider.Outcome, error) {
	if err := checkOperation(op, r); err != nil {
		return provider.Outcome{}, err
	}
	path := "/api/v1/payments/" + url.PathEscape(r.ProviderPaymentID)
	for attempt := 1; ; attempt++ {
		pay, err := p.call(ctx, op, http.MethodGet, path, nil, "")
		if err != nil {
			return provider.Outcome{}, err
		}
		o, err := readOutcome(op, pay)
		if err != nil {
			return provider.Outcome{}, err
		}
		answer, action, err := decide(pay, o)
		if err != nil || action == "" {
			return answer, err
		}
		if attempt > 1 {
			return provider.Outcome{}, invalid(op, fmt.Sprintf("payment %s is %s at KOMOJU again after KOMOJU refused to %s it", pay.ID, pay.Status, action))
		}
		done, err := p.call(ctx, op, http.MethodPost, path+"/"+action, body, r.IdempotencyKey)
		var pe *provider.Error
		if errors.As(err, &pe) && pe.Status == http.StatusUnprocessableEntity {
			continue
		}
		if err != nil {
			return provider.Outcome{}, err
		}
		return readOutcome(op, done)
	}
}

// Lookup reads the payment; an unknown id is an error wrapping provider.ErrNotFound.
func (p *Provider) Lookup(ctx context.Context, providerPaymentID string) (provider.Outcome, error) {
	const op = "lookup"
	if providerPaymentID == "" {
		return provider.Outcome{}, invalid(op, "a provider payment id is required")
	}
	pay, err := p.call(ctx, op, http.MethodGet, "/api/v1/payments/"+url.PathEscape(providerPaymentID), nil, "")
	if err != nil {
		return provider.Outcome{}, err
	}
	return readOutcome(op, pay)
}

func checkOperation(op string, r provider.Operation) error {
	var problems []string
	if r.IdempotencyKey == "" {
		problems = append(problems, "an idempotency key is required")
	}
	if r.ProviderPaymentID == "" {
		problems = append(problems, "a provider payment id is required")
	}
	if len(problems) > 0 {
		return invalid(op, strings.Join(problems, "; "))
	}
	return nil
}

// call makes one API request and decodes the payment it answers with; a failure is a
// *provider.Error (the table in the package doc).
func (p *Provider) call(ctx context.Context, op, method, path string, body any, idempotencyKey string) (paymentJSON, error) {
	var reader io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return paymentJSON{}, invalid(op, err.Error())
		}
		reader = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, p.baseURL+path, reader)
	if err != nil {
		return paymentJSON{}, invalid(op, err.Error())
	}
	req.SetBasicAuth(p.secretKey, "")
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idempotencyKey != "" {
		req.Header.Set(idempotencyHeader, wireKey(idempotencyKey))
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		// No answer: nobody knows what KOMOJU did; the same idempotency key will tell.
		return paymentJSON{}, unavailable(op, 0, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return paymentJSON{}, unavailable(op, resp.StatusCode, fmt.Errorf("read the answer: %w", err))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return paymentJSON{}, failure(op, method, path, resp.StatusCode, raw)
	}
	var pay paymentJSON
	if err := json.Unmarshal(raw, &pay); err != nil || pay.ID == "" {
		return paymentJSON{}, unavailable(op, resp.StatusCode, fmt.Errorf("%s %s answered %d with something that is not a KOMOJU payment", method, path, resp.StatusCode))
	}
	return pay, nil
}

// wireKey is the idempotency key as sent: itself, or its SHA-256 in hex when it is longer than
// KOMOJU takes (a retry hashes to the same key).
func wireKey(key string) string {
	if len(key) <= maxIdempotencyKey {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}
