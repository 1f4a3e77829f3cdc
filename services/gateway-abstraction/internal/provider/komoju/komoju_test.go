package komoju_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/emulator/paysim"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/payment"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/provider"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/provider/komoju"
)

const (
	secretKey     = "sk_test_gateway"
	webhookSecret = "komoju_whsec_gateway"
)

// fastRetry scales the sandbox's webhook redelivery down to milliseconds.
var fastRetry = paysim.RetryPolicy{MaxAttempts: 5, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}

// sandbox starts a sandbox of the test's own and a Provider pointed at it; hc nil is the
// adapter's default client.
func sandbox(t *testing.T, opts paysim.Options, hc *http.Client) (*paysim.Server, *komoju.Provider) {
	t.Helper()
	opts.KomojuSecretKey, opts.KomojuWebhookSecret, opts.WebhookRetry = secretKey, webhookSecret, fastRetry
	srv, err := paysim.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	p, err := komoju.New(komoju.Config{BaseURL: srv.URL(), SecretKey: secretKey, WebhookSecret: webhookSecret, HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	return srv, p
}

var keys atomic.Int64

// request is an AuthorizeRequest of method with a fresh idempotency key.
func request(method payment.Method, amount int64) provider.AuthorizeRequest {
	r := provider.AuthorizeRequest{
		IdempotencyKey: fmt.Sprintf("authorize-%d", keys.Add(1)),
		PaymentID:      "pay-1", OrderID: "order-1", CustomerID: "ali", Email: "ali@example.com",
		Method: method, AmountMinor: amount, Currency: "JPY",
	}
	if method == payment.Konbini {
		r.Instrument = "lawson"
	}
	return r
}

func operation(providerPaymentID, key string) provider.Operation {
	return provider.Operation{IdempotencyKey: key, PaymentID: "pay-1", ProviderPaymentID: providerPaymentID}
}

// readBack is the sandbox's KOMOJU payments, for reconciliation.
type readBack struct {
	ID               string            `json:"id"`
	Status           string            `json:"status"`
	ExternalOrderNum string            `json:"external_order_num"`
	Metadata         map[string]string `json:"metadata"`
}

func payments(t *testing.T, srv *paysim.Server) []readBack {
	t.Helper()
	resp, err := http.Get(srv.URL() + "/_sandbox/komoju/payments")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct{ Data []readBack }
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	return got.Data
}

// providerError returns err as the *provider.Error every failure must be.
func providerError(t *testing.T, err error) *provider.Error {
	t.Helper()
	var pe *provider.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *provider.Error", err, err)
	}
	if pe.Provider != payment.ProviderKomoju || pe.Op == "" || pe.Err == nil {
		t.Errorf("provider error %+v", pe)
	}
	return pe
}

func TestNewReportsEveryProblem(t *testing.T) {
	_, err := komoju.New(komoju.Config{BaseURL: "ftp://x"})
	for _, want := range []string{"secret key", "webhook secret", "base URL"} {
		if err == nil || !regexp.MustCompile(want).MatchString(err.Error()) {
			t.Errorf("New error %v does not mention %s", err, want)
		}
	}
	p, err := komoju.New(komoju.Config{SecretKey: "k", WebhookSecret: "w"})
	if err != nil || p.Name() != payment.ProviderKomoju {
		t.Errorf("New with defaults: %v, %v", p, err)
	}
}

func TestAuthorizeKonbini(t *testing.T) {
	srv, p := sandbox(t, paysim.Options{}, nil)
	r := request(payment.Konbini, 1200)
	o, err := p.Authorize(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != payment.Pending || o.ProviderPaymentID == "" || o.Reason != "" || o.Slip == nil {
		t.Fatalf("outcome %+v", o)
	}
	s := o.Slip
	if s.Method != payment.Konbini || s.Store != "lawson" || !regexp.MustCompile(`^\d{11}$`).MatchString(s.PaymentCode) ||
		!regexp.MustCompile(`^\d{4}$`).MatchString(s.ConfirmationCode) || s.InstructionsURL == "" || s.Bank != nil {
		t.Errorf("slip %+v", s)
	}
	if d := s.ExpiresAt.Sub(srv.Now()); d < 71*time.Hour || d > 72*time.Hour {
		t.Errorf("slip expires in %v, want 3 days", d)
	}
	got := payments(t, srv)
	want := []readBack{{ID: o.ProviderPaymentID, Status: "authorized", ExternalOrderNum: "pay-1",
		Metadata: map[string]string{"payment_id": "pay-1", "order_id": "order-1", "customer_id": "ali"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sandbox read-back (-want +got):\n%s", diff)
	}
	if l, err := p.Lookup(context.Background(), o.ProviderPaymentID); err != nil || !cmp.Equal(o, l) {
		t.Errorf("Lookup = %+v, %v; want %+v", l, err, o)
	}
}

func TestAuthorizeBankTransfer(t *testing.T) {
	srv, p := sandbox(t, paysim.Options{}, nil)
	o, err := p.Authorize(context.Background(), request(payment.BankTransfer, 30000))
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != payment.Pending || o.Slip == nil || o.Slip.Method != payment.BankTransfer || o.Slip.Store != "" {
		t.Fatalf("outcome %+v", o)
	}
	b := o.Slip.Bank
	if b == nil || b.BankName == "" || b.BranchName == "" || b.AccountType == "" || b.AccountHolder == "" ||
		!regexp.MustCompile(`^\d{7}$`).MatchString(b.AccountNumber) {
		t.Errorf("bank %+v", b)
	}
	if d := o.Slip.ExpiresAt.Sub(srv.Now()); d < 167*time.Hour || d > 168*time.Hour {
		t.Errorf("slip expires in %v, want 7 days", d)
	}
}

func TestWalletAuthorizeCaptureVoid(t *testing.T) {
	srv, p := sandbox(t, paysim.Options{}, nil)
	ctx := context.Background()
	captured, err := p.Authorize(ctx, request(payment.Wallet, 12000))
	if err != nil {
		t.Fatal(err)
	}
	voided, err := p.Authorize(ctx, request(payment.Wallet, 8000))
	if err != nil {
		t.Fatal(err)
	}
	if captured.Status != payment.Authorized || voided.Status != payment.Authorized || captured.Slip != nil {
		t.Fatalf("authorized: %+v, %+v", captured, voided)
	}
	if avail, held := srv.WalletBalance("ali"); avail != 30000 || held != 20000 {
		t.Errorf("wallet while held: %d available, %d held", avail, held)
	}

	o, err := p.Capture(ctx, operation(captured.ProviderPaymentID, "capture-1"))
	if err != nil || o.Status != payment.Captured || o.ProviderPaymentID != captured.ProviderPaymentID {
		t.Fatalf("Capture = %+v, %v", o, err)
	}
	// A retry, even under another key, finds the money taken.
	if o, err := p.Capture(ctx, operation(captured.ProviderPaymentID, "capture-2")); err != nil || o.Status != payment.Captured {
		t.Errorf("second Capture = %+v, %v", o, err)
	}
	if o, err := p.Void(ctx, operation(voided.ProviderPaymentID, "void-1")); err != nil || o.Status != payment.Voided {
		t.Fatalf("Void = %+v, %v", o, err)
	}
	if o, err := p.Void(ctx, operation(voided.ProviderPaymentID, "void-2")); err != nil || o.Status != payment.Voided {
		t.Errorf("second Void = %+v, %v", o, err)
	}
	if avail, held := srv.WalletBalance("ali"); avail != 38000 || held != 0 {
		t.Errorf("wallet after capture and void: %d available, %d held", avail, held)
	}
	// Captured money is not voided.
	_, err = p.Void(ctx, operation(captured.ProviderPaymentID, "void-3"))
	if pe := providerError(t, err); pe.Temporary || pe.Reason != payment.ReasonInvalidRequest {
		t.Errorf("Void of a captured wallet payment: %v", pe)
	}
	if o, err := p.Lookup(ctx, captured.ProviderPaymentID); err != nil || o.Status != payment.Captured {
		t.Errorf("Lookup = %+v, %v", o, err)
	}
}

func TestWalletDeclinedForSara(t *testing.T) {
	_, p := sandbox(t, paysim.Options{}, nil)
	r := request(payment.Wallet, 5000)
	r.CustomerID = "sara"
	o, err := p.Authorize(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	want := provider.Outcome{Status: payment.Failed, ProviderPaymentID: o.ProviderPaymentID, Reason: payment.ReasonInsufficientFunds}
	if o.ProviderPaymentID == "" || !cmp.Equal(want, o) {
		t.Errorf("outcome %+v, want %+v", o, want)
	}
}

// recorder is a transport that records each request's method and path.
type recorder struct {
	mu       sync.Mutex
	requests []string
}

func (rec *recorder) RoundTrip(r *http.Request) (*http.Response, error) {
	rec.mu.Lock()
	rec.requests = append(rec.requests, r.Method+" "+r.URL.Path)
	rec.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

// take returns the requests recorded since the last take.
func (rec *recorder) take() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	out := rec.requests
	rec.requests = nil
	return out
}

func TestSlipPaid(t *testing.T) {
	rec := &recorder{}
	srv, p := sandbox(t, paysim.Options{}, &http.Client{Transport: rec, Timeout: 10 * time.Second})
	ctx := context.Background()
	for _, method := range []payment.Method{payment.Konbini, payment.BankTransfer} {
		t.Run(string(method), func(t *testing.T) {
			slip, err := p.Authorize(ctx, request(method, 1500))
			if err != nil {
				t.Fatal(err)
			}
			if err := srv.PayKomojuSlip(slip.ProviderPaymentID); err != nil {
				t.Fatal(err)
			}
			want := provider.Outcome{Status: payment.Authorized, ProviderPaymentID: slip.ProviderPaymentID}
			if o, err := p.Lookup(ctx, slip.ProviderPaymentID); err != nil || !cmp.Equal(want, o) {
				t.Errorf("Lookup of a paid slip = %+v, %v; want %+v", o, err, want)
			}
			// KOMOJU has no capture of a slip (it answers 422 not_capturable): Capture must
			// answer without asking for one.
			want.Status = payment.Captured
			rec.take()
			if o, err := p.Capture(ctx, operation(slip.ProviderPaymentID, "capture-"+string(method))); err != nil || !cmp.Equal(want, o) {
				t.Errorf("Capture of a paid slip = %+v, %v; want %+v", o, err, want)
			}
			if diff := cmp.Diff([]string{"GET /api/v1/payments/" + slip.ProviderPaymentID}, rec.take()); diff != "" {
				t.Errorf("requests of Capture (-want +got):\n%s", diff)
			}
		})
	}

	// A paid slip holds no money to release: Void says it is paid (AUTHORIZED) without acting,
	// and Refund gives the money back, once: KOMOJU accepts it (REFUND_PENDING) and pays it out
	// later (REFUNDED).
	slip, err := p.Authorize(ctx, request(payment.BankTransfer, 2000))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.PayKomojuSlip(slip.ProviderPaymentID); err != nil {
		t.Fatal(err)
	}
	path := "/api/v1/payments/" + slip.ProviderPaymentID
	rec.take()
	paid := provider.Outcome{Status: payment.Authorized, ProviderPaymentID: slip.ProviderPaymentID}
	if o, err := p.Void(ctx, operation(slip.ProviderPaymentID, "void-paid")); err != nil || !cmp.Equal(paid, o) {
		t.Errorf("Void of a paid slip = %+v, %v; want %+v", o, err, paid)
	}
	if diff := cmp.Diff([]string{"GET " + path}, rec.take()); diff != "" {
		t.Errorf("requests of Void (-want +got):\n%s", diff)
	}
	pending := provider.Outcome{Status: payment.RefundPending, ProviderPaymentID: slip.ProviderPaymentID}
	refund := operation(slip.ProviderPaymentID, "refund-paid")
	refund.AmountMinor = 2000
	for _, attempt := range []string{"first", "replay", "another key"} {
		if attempt == "another key" {
			refund.IdempotencyKey = "refund-paid-again"
		}
		if o, err := p.Refund(ctx, refund); err != nil || !cmp.Equal(pending, o) {
			t.Errorf("%s Refund of a paid slip = %+v, %v; want %+v", attempt, o, err, pending)
		}
	}
	// The later ones find the request pending and ask for no second one.
	if diff := cmp.Diff([]string{"GET " + path, "POST " + path + "/refund", "GET " + path, "GET " + path}, rec.take()); diff != "" {
		t.Errorf("requests of the Refunds (-want +got):\n%s", diff)
	}
	if got := payments(t, srv); got[len(got)-1].Status != "captured" {
		t.Errorf("sandbox status while the refund is pending: %s, want captured", got[len(got)-1].Status)
	}
	if o, err := p.Lookup(ctx, slip.ProviderPaymentID); err != nil || !cmp.Equal(pending, o) {
		t.Errorf("Lookup of a slip whose refund is pending = %+v, %v; want %+v", o, err, pending)
	}
	if err := srv.PayOutKomojuRefund(slip.ProviderPaymentID); err != nil {
		t.Fatal(err)
	}
	refunded := provider.Outcome{Status: payment.Refunded, ProviderPaymentID: slip.ProviderPaymentID}
	if o, err := p.Lookup(ctx, slip.ProviderPaymentID); err != nil || !cmp.Equal(refunded, o) {
		t.Errorf("Lookup of a refunded slip = %+v, %v; want %+v", o, err, refunded)
	}
	if o, err := p.Refund(ctx, refund); err != nil || !cmp.Equal(refunded, o) {
		t.Errorf("Refund of a refunded slip = %+v, %v; want %+v", o, err, refunded)
	}
	_, err = p.Void(ctx, operation(slip.ProviderPaymentID, "void-refunded"))
	if pe := providerError(t, err); pe.Temporary || pe.Reason != payment.ReasonInvalidRequest {
		t.Errorf("Void of a refunded slip: %v; want invalid_request, not temporary", err)
	}
}

// KOMOJU rejects a slip's refund request it accepted (a wrong bank account): the payment reads
// REFUND_FAILED (declined), and a later Refund asks for a new request.
func TestSlipRefundRejected(t *testing.T) {
	srv, p := sandbox(t, paysim.Options{}, nil)
	ctx := context.Background()
	slip, err := p.Authorize(ctx, request(payment.Konbini, 1200))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.PayKomojuSlip(slip.ProviderPaymentID); err != nil {
		t.Fatal(err)
	}
	if o, err := p.Refund(ctx, operation(slip.ProviderPaymentID, "refund-1")); err != nil || o.Status != payment.RefundPending {
		t.Fatalf("Refund = %+v, %v; want REFUND_PENDING", o, err)
	}
	if err := srv.RejectKomojuRefund(slip.ProviderPaymentID); err != nil {
		t.Fatal(err)
	}
	failed := provider.Outcome{Status: payment.RefundFailed, ProviderPaymentID: slip.ProviderPaymentID, Reason: payment.ReasonDeclined}
	if o, err := p.Lookup(ctx, slip.ProviderPaymentID); err != nil || !cmp.Equal(failed, o) {
		t.Errorf("Lookup after the rejection = %+v, %v; want %+v", o, err, failed)
	}
	if o, err := p.Refund(ctx, operation(slip.ProviderPaymentID, "refund-2")); err != nil || o.Status != payment.RefundPending {
		t.Errorf("Refund after the rejection = %+v, %v; want a new request, REFUND_PENDING", o, err)
	}
}

// A captured PayPay payment is refunded to the wallet; a hold is not refunded (it is voided), nor
// is an unpaid slip; a refund that leaves money captured is not a refund.
func TestRefund(t *testing.T) {
	srv, p := sandbox(t, paysim.Options{}, nil)
	ctx := context.Background()
	held, err := p.Authorize(ctx, request(payment.Wallet, 6000))
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Refund(ctx, operation(held.ProviderPaymentID, "refund-held"))
	if pe := providerError(t, err); pe.Temporary || pe.Reason != payment.ReasonInvalidRequest || pe.Op != "refund" {
		t.Errorf("Refund of a hold: %v; want invalid_request, not temporary", err)
	}
	if _, err := p.Capture(ctx, operation(held.ProviderPaymentID, "capture-held")); err != nil {
		t.Fatal(err)
	}
	if avail, _ := srv.WalletBalance("ali"); avail != 44000 {
		t.Fatalf("wallet after the capture: %d available", avail)
	}
	part := operation(held.ProviderPaymentID, "refund-part")
	part.AmountMinor = 1000
	_, err = p.Refund(ctx, part)
	if pe := providerError(t, err); pe.Temporary || pe.Reason != payment.ReasonInvalidRequest {
		t.Errorf("a refund that leaves the payment captured: %v; want invalid_request, not temporary", err)
	}
	want := provider.Outcome{Status: payment.Refunded, ProviderPaymentID: held.ProviderPaymentID}
	for _, key := range []string{"refund-all", "refund-all-again"} { // another key finds it refunded
		if o, err := p.Refund(ctx, operation(held.ProviderPaymentID, key)); err != nil || !cmp.Equal(want, o) {
			t.Errorf("Refund (%s) = %+v, %v; want %+v", key, o, err, want)
		}
	}
	if avail, held := srv.WalletBalance("ali"); avail != 50000 || held != 0 {
		t.Errorf("wallet after the refunds: %d available, %d held; want all of it back", avail, held)
	}

	unpaid, err := p.Authorize(ctx, request(payment.Konbini, 900))
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Refund(ctx, operation(unpaid.ProviderPaymentID, "refund-unpaid"))
	if pe := providerError(t, err); pe.Temporary || pe.Reason != payment.ReasonInvalidRequest {
		t.Errorf("Refund of an unpaid slip: %v; want invalid_request, not temporary", err)
	}
}

func TestUnpaidSlip(t *testing.T) {
	_, p := sandbox(t, paysim.Options{}, nil)
	ctx := context.Background()
	slip, err := p.Authorize(ctx, request(payment.Konbini, 900))
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Capture(ctx, operation(slip.ProviderPaymentID, "capture-unpaid"))
	if pe := providerError(t, err); pe.Temporary || pe.Reason != payment.ReasonInvalidRequest {
		t.Errorf("Capture of an unpaid slip: %v", pe)
	}
	if o, err := p.Void(ctx, operation(slip.ProviderPaymentID, "void-unpaid")); err != nil || o.Status != payment.Voided {
		t.Fatalf("Void of an unpaid slip = %+v, %v", o, err)
	}
	if o, err := p.Lookup(ctx, slip.ProviderPaymentID); err != nil || o.Status != payment.Voided {
		t.Errorf("Lookup = %+v, %v", o, err)
	}
}

func TestSlipExpires(t *testing.T) {
	srv, p := sandbox(t, paysim.Options{}, nil)
	ctx := context.Background()
	slip, err := p.Authorize(ctx, request(payment.Konbini, 700))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.AdvanceClock(slip.Slip.ExpiresAt.Sub(srv.Now()) + time.Minute); err != nil {
		t.Fatal(err)
	}
	want := provider.Outcome{Status: payment.Expired, ProviderPaymentID: slip.ProviderPaymentID, Reason: payment.ReasonExpired}
	if o, err := p.Lookup(ctx, slip.ProviderPaymentID); err != nil || !cmp.Equal(want, o) {
		t.Errorf("Lookup = %+v, %v; want %+v", o, err, want)
	}
	if o, err := p.Capture(ctx, operation(slip.ProviderPaymentID, "capture-expired")); err != nil ||
		o.Status != payment.CaptureFailed || o.Reason != payment.ReasonExpired {
		t.Errorf("Capture of an expired slip = %+v, %v", o, err)
	}
	if o, err := p.Void(ctx, operation(slip.ProviderPaymentID, "void-expired")); err != nil || o.Status != payment.Voided {
		t.Errorf("Void of an expired slip = %+v, %v", o, err)
	}
}

func TestLookupUnknown(t *testing.T) {
	_, p := sandbox(t, paysim.Options{}, nil)
	_, err := p.Lookup(context.Background(), "nosuchpayment")
	if !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("Lookup of an unknown payment = %v, want ErrNotFound", err)
	}
	if pe := providerError(t, err); pe.Temporary || pe.Status != http.StatusNotFound {
		t.Errorf("not found: %v", pe)
	}
}

func TestIdempotentReplay(t *testing.T) {
	srv, p := sandbox(t, paysim.Options{}, nil)
	ctx := context.Background()
	r := request(payment.Konbini, 1200)
	first, err := p.Authorize(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	again, err := p.Authorize(ctx, r)
	if err != nil || !cmp.Equal(first, again) {
		t.Errorf("replay = %+v, %v; want %+v", again, err, first)
	}
	if got := payments(t, srv); len(got) != 1 {
		t.Errorf("the sandbox holds %d payments, want 1", len(got))
	}
	// A key longer than KOMOJU takes is sent hashed, the same way each time.
	r = request(payment.Wallet, 100)
	r.IdempotencyKey = strings.Repeat("k", 150)
	long1, err := p.Authorize(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	long2, err := p.Authorize(ctx, r)
	if err != nil || long1.ProviderPaymentID != long2.ProviderPaymentID {
		t.Errorf("long key: %s then %s (%v)", long1.ProviderPaymentID, long2.ProviderPaymentID, err)
	}
}

func TestServerErrorIsTemporary(t *testing.T) {
	srv, p := sandbox(t, paysim.Options{}, nil)
	if err := srv.SetAPIFault(paysim.APIFault{Mode: paysim.FaultError, Count: 1, Dialect: paysim.DialectKomoju}); err != nil {
		t.Fatal(err)
	}
	r := request(payment.Konbini, 1200)
	_, err := p.Authorize(context.Background(), r)
	pe := providerError(t, err)
	if !pe.Temporary || pe.Reason != payment.ReasonProviderUnavailable || pe.Status != http.StatusInternalServerError || !provider.Temporary(err) {
		t.Errorf("500: %v", pe)
	}
	if got := payments(t, srv); len(got) != 0 {
		t.Fatalf("a request answered 500 by the fault created %v", got)
	}
	if o, err := p.Authorize(context.Background(), r); err != nil || o.Status != payment.Pending {
		t.Errorf("retry = %+v, %v", o, err)
	}
}

func TestTimeoutAndRetryWithTheSameKey(t *testing.T) {
	srv, p := sandbox(t, paysim.Options{}, &http.Client{Timeout: 300 * time.Millisecond})
	if err := srv.SetAPIFault(paysim.APIFault{Mode: paysim.FaultTimeout, Count: 1, Delay: time.Minute}); err != nil {
		t.Fatal(err)
	}
	r := request(payment.Wallet, 4000)
	_, err := p.Authorize(context.Background(), r)
	if pe := providerError(t, err); !pe.Temporary || pe.Reason != payment.ReasonProviderUnavailable || pe.Status != 0 {
		t.Fatalf("timeout: %v", pe)
	}
	// KOMOJU acted although the answer was lost.
	deadline := time.Now().Add(10 * time.Second)
	for len(payments(t, srv)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the timed-out request was never executed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	o, err := p.Authorize(context.Background(), r)
	if err != nil || o.Status != payment.Authorized {
		t.Fatalf("retry = %+v, %v", o, err)
	}
	got := payments(t, srv)
	if len(got) != 1 || got[0].ID != o.ProviderPaymentID {
		t.Errorf("after the retry the sandbox holds %+v, want only %s", got, o.ProviderPaymentID)
	}
	if avail, held := srv.WalletBalance("ali"); avail != 46000 || held != 4000 {
		t.Errorf("wallet: %d available, %d held; want one hold", avail, held)
	}
}

func TestRefusedRequests(t *testing.T) {
	srv, p := sandbox(t, paysim.Options{}, nil)
	ctx := context.Background()
	unknownStore := request(payment.Konbini, 100)
	unknownStore.Instrument = "corner-shop"
	noEmail := request(payment.BankTransfer, 100)
	noEmail.Email = ""
	card := request(payment.Card, 100)
	card.Instrument = "pm_card_visa"
	for name, tc := range map[string]struct {
		r      provider.AuthorizeRequest
		status int // 0: refused by the adapter without a call
	}{
		"unknown store (KOMOJU's 422)": {unknownStore, http.StatusUnprocessableEntity},
		"slip without email":           {noEmail, 0},
		"card":                         {card, 0},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := p.Authorize(ctx, tc.r)
			if pe := providerError(t, err); pe.Temporary || pe.Reason != payment.ReasonInvalidRequest || pe.Status != tc.status {
				t.Errorf("refused: %v", pe)
			}
		})
	}

	wrongKey, err := komoju.New(komoju.Config{BaseURL: srv.URL(), SecretKey: "sk_test_wrong", WebhookSecret: webhookSecret})
	if err != nil {
		t.Fatal(err)
	}
	_, err = wrongKey.Authorize(ctx, request(payment.Konbini, 100))
	if pe := providerError(t, err); pe.Temporary || pe.Status != http.StatusUnauthorized {
		t.Errorf("wrong key: %v", pe)
	}
}

func TestConnectionRefusedIsTemporary(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	p, err := komoju.New(komoju.Config{BaseURL: dead.URL, SecretKey: secretKey, WebhookSecret: webhookSecret})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Lookup(context.Background(), "x")
	if pe := providerError(t, err); !pe.Temporary || pe.Reason != payment.ReasonProviderUnavailable || pe.Status != 0 {
		t.Errorf("connection refused: %v", pe)
	}
}

// webhookReceiver parses the sandbox's real deliveries with ParseWebhook.
type webhookReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	received []provider.Notification
	rejected []error
}

func newWebhookReceiver(t *testing.T, p func() *komoju.Provider) *webhookReceiver {
	rc := &webhookReceiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		n, err := p().ParseWebhook(r.Header, body, time.Now())
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if err != nil {
			rc.rejected = append(rc.rejected, err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		rc.received = append(rc.received, n)
	}))
	t.Cleanup(rc.Close)
	return rc
}

// about returns the notifications about a provider payment, by event type.
func (rc *webhookReceiver) about(providerPaymentID string) map[string]provider.Notification {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := map[string]provider.Notification{}
	for _, n := range rc.received {
		if n.ProviderPaymentID == providerPaymentID {
			out[n.EventType] = n
		}
	}
	return out
}

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

func TestWebhooksFromTheSandbox(t *testing.T) {
	var p *komoju.Provider
	rc := newWebhookReceiver(t, func() *komoju.Provider { return p })
	var srv *paysim.Server
	srv, p = sandbox(t, paysim.Options{KomojuWebhookURL: rc.URL}, nil)
	ctx := context.Background()

	paid, err := p.Authorize(ctx, request(payment.Konbini, 1200))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.PayKomojuSlip(paid.ProviderPaymentID); err != nil {
		t.Fatal(err)
	}
	lapsed, err := p.Authorize(ctx, request(payment.BankTransfer, 3000))
	if err != nil {
		t.Fatal(err)
	}
	declined := request(payment.Wallet, 9000)
	declined.CustomerID, declined.PaymentID = "sara", "pay-2"
	failed, err := p.Authorize(ctx, declined)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.AdvanceClock(8 * 24 * time.Hour); err != nil {
		t.Fatal(err)
	}

	eventually(t, "the deliveries", func() bool {
		return len(rc.about(paid.ProviderPaymentID)) == 2 && len(rc.about(lapsed.ProviderPaymentID)) == 2 && len(rc.about(failed.ProviderPaymentID)) == 1
	})
	for _, tc := range []struct {
		id, eventType, paymentID string
		want                     provider.Outcome
	}{
		{paid.ProviderPaymentID, "payment.authorized", "pay-1", paid},
		{paid.ProviderPaymentID, "payment.captured", "pay-1", provider.Outcome{Status: payment.Authorized, ProviderPaymentID: paid.ProviderPaymentID}},
		{lapsed.ProviderPaymentID, "payment.authorized", "pay-1", lapsed},
		{lapsed.ProviderPaymentID, "payment.expired", "pay-1", provider.Outcome{Status: payment.Expired, ProviderPaymentID: lapsed.ProviderPaymentID, Reason: payment.ReasonExpired}},
		{failed.ProviderPaymentID, "payment.failed", "pay-2", provider.Outcome{Status: payment.Failed, ProviderPaymentID: failed.ProviderPaymentID, Reason: payment.ReasonInsufficientFunds}},
	} {
		n, ok := rc.about(tc.id)[tc.eventType]
		if !ok {
			t.Errorf("no %s about %s", tc.eventType, tc.id)
			continue
		}
		if n.EventID == "" || n.PaymentID != tc.paymentID || n.ProviderPaymentID != tc.id {
			t.Errorf("%s: %+v", tc.eventType, n)
		}
		if diff := cmp.Diff(tc.want, n.Outcome); diff != "" {
			t.Errorf("%s outcome (-want +got):\n%s", tc.eventType, diff)
		}
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.rejected) > 0 {
		t.Errorf("real deliveries rejected: %v", rc.rejected)
	}
}

// The sandbox's webhooks about a slip's refund, read by ParseWebhook: the payout's
// refund_request.updated moves nothing and its payment.refunded says REFUNDED; a rejection's
// refund_request.updated says REFUND_FAILED, for the payment KOMOJU knows by its id.
func TestRefundWebhooksFromTheSandbox(t *testing.T) {
	var p *komoju.Provider
	rc := newWebhookReceiver(t, func() *komoju.Provider { return p })
	var srv *paysim.Server
	srv, p = sandbox(t, paysim.Options{KomojuWebhookURL: rc.URL}, nil)
	ctx := context.Background()
	paidSlip := func(method payment.Method) string {
		t.Helper()
		slip, err := p.Authorize(ctx, request(method, 1200))
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.PayKomojuSlip(slip.ProviderPaymentID); err != nil {
			t.Fatal(err)
		}
		if o, err := p.Refund(ctx, operation(slip.ProviderPaymentID, "refund-"+slip.ProviderPaymentID)); err != nil || o.Status != payment.RefundPending {
			t.Fatalf("Refund = %+v, %v; want REFUND_PENDING", o, err)
		}
		return slip.ProviderPaymentID
	}
	paidOut, rejected := paidSlip(payment.Konbini), paidSlip(payment.BankTransfer)
	if err := srv.PayOutKomojuRefund(paidOut); err != nil {
		t.Fatal(err)
	}
	if err := srv.RejectKomojuRefund(rejected); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deliveries", func() bool {
		return len(rc.about(paidOut)) == 5 && len(rc.about(rejected)) == 3
	})
	for _, tc := range []struct {
		id, eventType string
		want          provider.Outcome
	}{
		{paidOut, "refund_request.updated", provider.Outcome{}},
		{paidOut, "payment.refund.created", provider.Outcome{}},
		{paidOut, "payment.refunded", provider.Outcome{Status: payment.Refunded, ProviderPaymentID: paidOut}},
		{rejected, "refund_request.updated", provider.Outcome{Status: payment.RefundFailed, ProviderPaymentID: rejected, Reason: payment.ReasonDeclined}},
	} {
		if diff := cmp.Diff(tc.want, rc.about(tc.id)[tc.eventType].Outcome); diff != "" {
			t.Errorf("%s of %s: outcome (-want +got):\n%s", tc.eventType, tc.id, diff)
		}
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.rejected) > 0 {
		t.Errorf("real deliveries rejected: %v", rc.rejected)
	}
}

// signed is a webhook body with the header the sandbox would send.
func signed(body string) http.Header {
	h := http.Header{}
	h.Set("X-Komoju-Signature", paysim.KomojuSignature([]byte(body), webhookSecret))
	return h
}

func TestParseWebhookRejects(t *testing.T) {
	p, err := komoju.New(komoju.Config{SecretKey: secretKey, WebhookSecret: webhookSecret})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"id":"evt1","type":"payment.captured","resource":"event","data":{"id":"p1","status":"captured","payment_details":{"type":"paypay"}}}`
	forged := `{"id":"evt1","type":"payment.captured","resource":"event","data":{"id":"p2","status":"captured","payment_details":{"type":"paypay"}}}`
	otherSecret := http.Header{}
	otherSecret.Set("X-Komoju-Signature", paysim.KomojuSignature([]byte(body), "another secret"))
	notHex := http.Header{}
	notHex.Set("X-Komoju-Signature", "not hex")
	for name, tc := range map[string]struct {
		h    http.Header
		body string
		want error
	}{
		"unsigned":               {http.Header{}, body, provider.ErrSignature},
		"forged body":            {signed(body), forged, provider.ErrSignature},
		"another secret":         {otherSecret, body, provider.ErrSignature},
		"signature not hex":      {notHex, body, provider.ErrSignature},
		"signed but not JSON":    {signed(`{"id":`), `{"id":`, provider.ErrMalformed},
		"signed, no id":          {signed(`{"type":"ping"}`), `{"type":"ping"}`, provider.ErrMalformed},
		"payment without data":   {signed(`{"id":"e","type":"payment.captured"}`), `{"id":"e","type":"payment.captured"}`, provider.ErrMalformed},
		"unknown payment status": {signed(`{"id":"e","type":"payment.updated","data":{"id":"p","status":"lost","payment_details":{"type":"paypay"}}}`), `{"id":"e","type":"payment.updated","data":{"id":"p","status":"lost","payment_details":{"type":"paypay"}}}`, provider.ErrMalformed},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := p.ParseWebhook(tc.h, []byte(tc.body), time.Now()); !errors.Is(err, tc.want) {
				t.Errorf("ParseWebhook = %v, want %v", err, tc.want)
			}
		})
	}
	// KOMOJU signs no timestamp: a verified event is accepted however late.
	if n, err := p.ParseWebhook(signed(body), []byte(body), time.Now().Add(365*24*time.Hour)); err != nil || n.Outcome.Status != payment.Captured {
		t.Errorf("a late delivery = %+v, %v", n, err)
	}
}

// TestStatusMapping is the package doc's table, event by event.
func TestStatusMapping(t *testing.T) {
	p, err := komoju.New(komoju.Config{SecretKey: secretKey, WebhookSecret: webhookSecret})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Date(2030, 4, 4, 14, 59, 59, 0, time.UTC)
	konbini := `{"type":"konbini","store":"family-mart","receipt":"12345678901","confirmation_code":"1234","instructions_url":"https://i/1"}`
	bank := `{"type":"bank_transfer","bank_name":"B","branch_name":"Br","account_type":"ordinary","account_number":"1234567","account_name":"H","instructions_url":"https://i/2"}`
	paypay := `{"type":"paypay"}`
	pending, completed, rejected := `{"id":"rr1","payment":"kp9","status":"pending"}`, `{"id":"rr1","payment":"kp9","status":"completed"}`,
		`{"id":"rr1","payment":"kp9","status":"rejected"}`
	for _, tc := range []struct {
		event, status, details, reason string
		want                           provider.Outcome
		requests                       string // refund_requests, "" for none
	}{
		{"payment.updated", "pending", konbini, "", provider.Outcome{Status: payment.Requested}, ""},
		{"payment.updated", "pending", paypay, "", provider.Outcome{Status: payment.Requested}, ""},
		{"payment.authorized", "authorized", konbini, "", provider.Outcome{Status: payment.Pending, Slip: &provider.Slip{
			Method: payment.Konbini, Store: "family-mart", PaymentCode: "12345678901", ConfirmationCode: "1234", InstructionsURL: "https://i/1", ExpiresAt: deadline}}, ""},
		{"payment.authorized", "authorized", bank, "", provider.Outcome{Status: payment.Pending, Slip: &provider.Slip{
			Method: payment.BankTransfer, InstructionsURL: "https://i/2", ExpiresAt: deadline,
			Bank: &provider.BankAccount{BankName: "B", BranchName: "Br", AccountType: "ordinary", AccountNumber: "1234567", AccountHolder: "H"}}}, ""},
		{"payment.authorized", "authorized", paypay, "", provider.Outcome{Status: payment.Authorized}, ""},
		{"payment.captured", "captured", konbini, "", provider.Outcome{Status: payment.Authorized}, ""},
		{"payment.captured", "captured", bank, "", provider.Outcome{Status: payment.Authorized}, ""},
		{"payment.captured", "captured", paypay, "", provider.Outcome{Status: payment.Captured}, ""},
		{"payment.updated", "refunded", konbini, "", provider.Outcome{Status: payment.Refunded}, ""},
		{"payment.updated", "refunded", paypay, "", provider.Outcome{Status: payment.Refunded}, ""},
		{"payment.cancelled", "cancelled", bank, "", provider.Outcome{Status: payment.Voided}, ""},
		{"payment.cancelled", "cancelled", paypay, "", provider.Outcome{Status: payment.Voided}, ""},
		{"payment.expired", "expired", konbini, "", provider.Outcome{Status: payment.Expired, Reason: payment.ReasonExpired}, ""},
		{"payment.expired", "expired", paypay, "", provider.Outcome{Status: payment.Expired, Reason: payment.ReasonExpired}, ""},
		{"payment.failed", "failed", paypay, "insufficient_funds", provider.Outcome{Status: payment.Failed, Reason: payment.ReasonInsufficientFunds}, ""},
		{"payment.failed", "failed", paypay, "", provider.Outcome{Status: payment.Failed, Reason: payment.ReasonDeclined}, ""},
		{"payment.failed", "failed", konbini, "fraudulent", provider.Outcome{Status: payment.Failed, Reason: payment.ReasonDeclined}, ""},
		{"payment.refunded", "refunded", paypay, "", provider.Outcome{Status: payment.Refunded}, ""},
		{"payment.refunded", "refunded", bank, "", provider.Outcome{Status: payment.Refunded}, ""},
		{"payment.refund.created", "captured", konbini, "", provider.Outcome{}, ""},
		// Refunds KOMOJU pays out later: a pending refund request holds the money still, the
		// last one rejected is the refund failed, a completed one that left money captured (a
		// part) is no refund of the payment.
		{"payment.updated", "captured", konbini, "", provider.Outcome{Status: payment.RefundPending}, "[" + pending + "]"},
		{"payment.updated", "captured", bank, "", provider.Outcome{Status: payment.RefundPending}, "[" + rejected + "," + pending + "]"},
		{"payment.updated", "captured", paypay, "", provider.Outcome{Status: payment.RefundPending}, "[" + pending + "]"},
		{"payment.updated", "captured", konbini, "", provider.Outcome{Status: payment.RefundFailed, Reason: payment.ReasonDeclined}, "[" + rejected + "]"},
		{"payment.updated", "captured", bank, "", provider.Outcome{Status: payment.Authorized}, "[" + completed + "]"},
		{"payment.refund.created", "captured", konbini, "", provider.Outcome{}, "[" + completed + "]"},
		{"payment.refunded", "refunded", konbini, "", provider.Outcome{Status: payment.Refunded}, "[" + completed + "]"},
	} {
		name := tc.event + "/" + tc.status + "/" + tc.details[9:15]
		if tc.requests != "" {
			name += "/with refund requests"
		}
		t.Run(name, func(t *testing.T) {
			reason := "null"
			if tc.reason != "" {
				reason = `"` + tc.reason + `"`
			}
			requests := "[]"
			if tc.requests != "" {
				requests = tc.requests
			}
			body := `{"id":"evt9","type":"` + tc.event + `","resource":"event","reason":` + reason + `,"data":{"id":"kp9","status":"` + tc.status +
				`","payment_deadline":"2030-04-04T14:59:59Z","external_order_num":"pay-9","metadata":{},"payment_details":` + tc.details +
				`,"refund_requests":` + requests + `}}`
			n, err := p.ParseWebhook(signed(body), []byte(body), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if tc.want.Status != "" {
				tc.want.ProviderPaymentID = "kp9"
			}
			want := provider.Notification{EventID: "evt9", EventType: tc.event, PaymentID: "pay-9", ProviderPaymentID: "kp9", Outcome: tc.want}
			if diff := cmp.Diff(want, n); diff != "" {
				t.Errorf("notification (-want +got):\n%s", diff)
			}
		})
	}
	// refund_request.updated carries the request, which names its payment by KOMOJU's id only.
	for _, tc := range []struct {
		status string
		want   provider.Outcome
	}{
		{"pending", provider.Outcome{Status: payment.RefundPending, ProviderPaymentID: "kp9"}},
		{"rejected", provider.Outcome{Status: payment.RefundFailed, ProviderPaymentID: "kp9", Reason: payment.ReasonDeclined}},
		{"completed", provider.Outcome{}}, // payment.refunded follows a refund of everything
	} {
		body := `{"id":"evt8","type":"refund_request.updated","resource":"event","reason":null,"data":{"id":"rr1","payment":"kp9",` +
			`"customer_name":null,"bank_name":null,"bank_code":null,"branch_name":null,"branch_number":null,"account_number":null,` +
			`"description":null,"status":"` + tc.status + `","created_at":"2030-04-04T00:00:00Z"}}`
		n, err := p.ParseWebhook(signed(body), []byte(body), time.Now())
		want := provider.Notification{EventID: "evt8", EventType: "refund_request.updated", ProviderPaymentID: "kp9", Outcome: tc.want}
		if diff := cmp.Diff(want, n); err != nil || diff != "" {
			t.Errorf("refund_request.updated %s: %v, notification (-want +got):\n%s", tc.status, err, diff)
		}
	}
	for _, data := range []string{`{"id":"rr1","status":"pending"}`, `{"id":"rr1","payment":"kp9","status":"lost"}`, `[]`} {
		body := `{"id":"evt7","type":"refund_request.updated","data":` + data + `}`
		if _, err := p.ParseWebhook(signed(body), []byte(body), time.Now()); !errors.Is(err, provider.ErrMalformed) {
			t.Errorf("refund_request.updated with data %s: %v, want ErrMalformed", data, err)
		}
	}
	ping := `{"id":"evt0","type":"ping","resource":"event","data":{}}`
	if n, err := p.ParseWebhook(signed(ping), []byte(ping), time.Now()); err != nil || n.EventID != "evt0" || n.Outcome.Status != "" {
		t.Errorf("ping = %+v, %v", n, err)
	}
}
