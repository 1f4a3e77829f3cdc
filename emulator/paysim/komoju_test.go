package paysim

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const (
	komojuKey    = "sk_test_komoju"
	komojuSecret = "komoju_whsec_test"
)

// komojuClient is a bare net/http client of a sandbox's KOMOJU dialect, as an application
// without a KOMOJU SDK talks to KOMOJU.
type komojuClient struct {
	t    *testing.T
	base string
	key  string
	hc   *http.Client
}

// do sends body (JSON-encoded unless it is a string) and returns the status and raw answer.
// header is name/value pairs.
func (c komojuClient) do(method, path string, body any, header ...string) (int, []byte) {
	c.t.Helper()
	resp, err := c.send(method, path, body, header...)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.StatusCode, raw
}

func (c komojuClient) send(method, path string, body any, header ...string) (*http.Response, error) {
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = bytes.NewReader([]byte(b))
	default:
		r = bytes.NewReader(mustJSON(b))
	}
	req, err := http.NewRequest(method, c.base+path, r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.key != "" {
		req.SetBasicAuth(c.key, "")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	hc := c.hc
	if hc == nil {
		hc = http.DefaultClient
	}
	return hc.Do(req)
}

// payment sends a request that must answer 200 with a payment.
func (c komojuClient) payment(method, path string, body any, header ...string) kPayment {
	c.t.Helper()
	status, raw := c.do(method, path, body, header...)
	if status != http.StatusOK {
		c.t.Fatalf("%s %s: status %d: %s", method, path, status, raw)
	}
	var p kPayment
	if err := json.Unmarshal(raw, &p); err != nil {
		c.t.Fatalf("%s %s: %v in %s", method, path, err, raw)
	}
	return p
}

// failure sends a request that must fail with status and KOMOJU's error object with code.
func (c komojuClient) failure(status int, code, method, path string, body any, header ...string) kError {
	c.t.Helper()
	got, raw := c.do(method, path, body, header...)
	var e kError
	if err := json.Unmarshal(raw, &e); err != nil {
		c.t.Fatalf("%s %s: %v in %s", method, path, err, raw)
	}
	if got != status || e.Error.Code != code || e.Error.Message == "" {
		c.t.Fatalf("%s %s: status %d, error %+v; want %d %s", method, path, got, e.Error, status, code)
	}
	return e
}

// kPayment is KOMOJU's Payment object as a client decodes it.
type kPayment struct {
	ID               string         `json:"id"`
	Resource         string         `json:"resource"`
	Status           string         `json:"status"`
	Amount           int64          `json:"amount"`
	Total            int64          `json:"total"`
	Currency         string         `json:"currency"`
	PaymentDeadline  *string        `json:"payment_deadline"`
	PaymentDetails   map[string]any `json:"payment_details"`
	CapturedAt       *string        `json:"captured_at"`
	ExternalOrderNum string         `json:"external_order_num"`
	Metadata         map[string]any `json:"metadata"`
	CreatedAt        string         `json:"created_at"`
	AmountRefunded   int64          `json:"amount_refunded"`
	Refunds          []struct {
		ID     string `json:"id"`
		Amount int64  `json:"amount"`
	} `json:"refunds"`
	FailureReason  string           `json:"failure_reason"`
	RefundRequests []kRefundRequest `json:"refund_requests"`
	// Payment is set when the object is a refund request (the data of refund_request.updated):
	// its payment's id.
	Payment string `json:"payment"`
}

// kRefundRequest is KOMOJU's RefundRequest object as a client decodes it.
type kRefundRequest struct {
	ID            string  `json:"id"`
	Payment       string  `json:"payment"`
	Status        string  `json:"status"`
	CustomerName  *string `json:"customer_name"`
	AccountNumber *string `json:"account_number"`
	CreatedAt     string  `json:"created_at"`
}

// kError is KOMOJU's error answer.
type kError struct {
	Error struct {
		Code    string  `json:"code"`
		Message string  `json:"message"`
		Param   *string `json:"param"`
	} `json:"error"`
}

// kEvent is a KOMOJU event as a receiver decodes it, with the delivery's headers.
type kEvent struct {
	ID        string   `json:"id"`
	Type      string   `json:"type"`
	Resource  string   `json:"resource"`
	CreatedAt string   `json:"created_at"`
	Reason    *string  `json:"reason"`
	Data      kPayment `json:"data"`

	deliveryID, eventHeader string
}

// komojuReceiver is a KOMOJU webhook endpoint that verifies X-Komoju-Signature itself (the hex
// HMAC-SHA256 of the raw body) and records the events.
type komojuReceiver struct {
	*httptest.Server
	secret string

	mu      sync.Mutex
	events  []kEvent
	invalid []string
}

func newKomojuReceiver(t *testing.T, secret string) *komojuReceiver {
	rc := &komojuReceiver{secret: secret}
	rc.Server = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *komojuReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	mac := hmac.New(sha256.New, []byte(rc.secret))
	mac.Write(body)
	got, err := hex.DecodeString(r.Header.Get("X-Komoju-Signature"))
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if err != nil || !hmac.Equal(got, mac.Sum(nil)) {
		rc.invalid = append(rc.invalid, r.Header.Get("X-Komoju-Signature"))
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	var e kEvent
	if err := json.Unmarshal(body, &e); err != nil {
		rc.invalid = append(rc.invalid, err.Error())
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	e.deliveryID, e.eventHeader = r.Header.Get("X-Komoju-ID"), r.Header.Get("X-Komoju-Event")
	rc.events = append(rc.events, e)
	w.WriteHeader(http.StatusOK)
}

// eventsFor returns the accepted events about payment id, in arrival order.
func (rc *komojuReceiver) eventsFor(id string) []kEvent {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []kEvent
	for _, e := range rc.events {
		if e.Data.ID == id || e.Data.Payment == id {
			out = append(out, e)
		}
	}
	return out
}

func (rc *komojuReceiver) typesFor(id string) []string {
	var types []string
	for _, e := range rc.eventsFor(id) {
		types = append(types, e.Type)
	}
	return types
}

// komojuSandbox starts a sandbox of the test's own whose KOMOJU events go to a receiver.
func komojuSandbox(t *testing.T, opts Options) (*Server, komojuClient, *komojuReceiver) {
	t.Helper()
	rc := newKomojuReceiver(t, komojuSecret)
	opts.KomojuWebhookURL, opts.KomojuWebhookSecret, opts.WebhookRetry = rc.URL, komojuSecret, fastRetry
	srv, _ := startSandbox(t, opts)
	return srv, komojuClient{t: t, base: srv.URL(), key: komojuKey}, rc
}

// konbini is a konbini payment request body.
func konbini(store string, amount int64) map[string]any {
	return map[string]any{
		"amount": amount, "currency": "JPY", "external_order_num": "order-1",
		"metadata":        map[string]any{"payment_id": "p-1", "order_id": "o-1"},
		"payment_details": map[string]any{"type": "konbini", "store": store, "email": "ali@example.com"},
	}
}

func bankTransfer(amount int64) map[string]any {
	return map[string]any{
		"amount": amount, "currency": "JPY",
		"payment_details": map[string]any{"type": "bank_transfer", "email": "ali@example.com", "phone": "080-1111-2222"},
	}
}

func payPay(customer string, amount int64, capture any) map[string]any {
	b := map[string]any{
		"amount": amount, "currency": "JPY",
		"metadata":        map[string]any{"customer_id": customer},
		"payment_details": map[string]any{"type": "paypay"},
	}
	if capture != nil {
		b["capture"] = capture
	}
	return b
}

var clockStart = time.Date(2030, 4, 1, 3, 0, 0, 0, time.UTC)

func parseKomojuTime(t *testing.T, s *string) time.Time {
	t.Helper()
	if s == nil {
		t.Fatal("time is null")
	}
	got, err := time.Parse(time.RFC3339, *s)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestKomojuKonbiniSlip(t *testing.T) {
	srv, c, rc := komojuSandbox(t, Options{ClockStart: clockStart})
	p := c.payment("POST", "/api/v1/payments", konbini("lawson", 1200))
	if p.Resource != "payment" || p.Status != "authorized" || p.Amount != 1200 || p.Total != 1200 || p.Currency != "JPY" ||
		p.ExternalOrderNum != "order-1" || p.CapturedAt != nil {
		t.Errorf("created %+v", p)
	}
	if !regexp.MustCompile(`^[0-9a-z]{25}$`).MatchString(p.ID) {
		t.Errorf("id %q is not KOMOJU-shaped", p.ID)
	}
	if diff := cmp.Diff(map[string]any{"payment_id": "p-1", "order_id": "o-1"}, p.Metadata); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	d := p.PaymentDetails
	if d["type"] != "konbini" || d["store"] != "lawson" || d["email"] != "ali@example.com" || d["phone"] != nil ||
		!regexp.MustCompile(`^\d{11}$`).MatchString(d["receipt"].(string)) ||
		!regexp.MustCompile(`^\d{4}$`).MatchString(d["confirmation_code"].(string)) ||
		d["instructions_url"] != srv.URL()+"/_sandbox/komoju/payments/"+p.ID {
		t.Errorf("payment_details %v", d)
	}
	created, _ := time.Parse(time.RFC3339, p.CreatedAt)
	if deadline := parseKomojuTime(t, p.PaymentDeadline); deadline.Sub(created) != 72*time.Hour || created.Before(clockStart) {
		t.Errorf("created %v, deadline %v: want 3 days of the virtual clock", created, deadline)
	}
	if got := c.payment("GET", "/api/v1/payments/"+p.ID, nil); !cmp.Equal(p, got) {
		t.Errorf("show differs from create:\n%s", cmp.Diff(p, got))
	}
	var instructions kPayment
	getJSON(t, d["instructions_url"].(string), &instructions)
	if instructions.ID != p.ID {
		t.Errorf("instructions_url serves %+v", instructions)
	}

	eventually(t, "payment.authorized delivered", func() bool { return len(rc.eventsFor(p.ID)) == 1 })
	e := rc.eventsFor(p.ID)[0]
	if e.Type != "payment.authorized" || e.Resource != "event" || e.eventHeader != e.Type || e.deliveryID == "" ||
		e.Data.Status != "authorized" || e.Data.PaymentDetails["receipt"] != d["receipt"] || e.Reason != nil {
		t.Errorf("event %+v", e)
	}

	// 7-Eleven asks for the receipt number only.
	p = c.payment("POST", "/api/v1/payments", konbini("seven-eleven", 800))
	if _, ok := p.PaymentDetails["confirmation_code"]; !ok || p.PaymentDetails["confirmation_code"] != nil {
		t.Errorf("seven-eleven confirmation_code = %v, want null", p.PaymentDetails["confirmation_code"])
	}
}

func TestKomojuBankTransferSlip(t *testing.T) {
	_, c, _ := komojuSandbox(t, Options{ClockStart: clockStart})
	p := c.payment("POST", "/api/v1/payments", bankTransfer(30000))
	d := p.PaymentDetails
	if p.Status != "authorized" || d["type"] != "bank_transfer" || d["phone"] != "080-1111-2222" || d["bank_name"] == "" ||
		d["branch_name"] == "" || d["account_type"] != "ordinary" || d["account_name"] == "" ||
		!regexp.MustCompile(`^\d{7}$`).MatchString(d["account_number"].(string)) {
		t.Errorf("bank transfer %+v", p)
	}
	created, _ := time.Parse(time.RFC3339, p.CreatedAt)
	if deadline := parseKomojuTime(t, p.PaymentDeadline); deadline.Sub(created) != 7*24*time.Hour {
		t.Errorf("deadline %v after creation, want 7 days", deadline.Sub(created))
	}

	// expiry_days replaces the default, for either slip.
	for _, body := range []map[string]any{bankTransfer(100), konbini("family-mart", 100)} {
		body["payment_details"].(map[string]any)["expiry_days"] = 2
		p := c.payment("POST", "/api/v1/payments", body)
		created, _ := time.Parse(time.RFC3339, p.CreatedAt)
		if deadline := parseKomojuTime(t, p.PaymentDeadline); deadline.Sub(created) != 48*time.Hour {
			t.Errorf("%s with expiry_days 2: deadline %v after creation", p.PaymentDetails["type"], deadline.Sub(created))
		}
	}
}

func TestKomojuSlipPaid(t *testing.T) {
	srv, c, rc := komojuSandbox(t, Options{})
	p := c.payment("POST", "/api/v1/payments", konbini("ministop", 1500))
	c.failure(http.StatusUnprocessableEntity, "not_capturable", "POST", "/api/v1/payments/"+p.ID+"/capture", nil)

	resp, err := http.Post(srv.URL()+"/_sandbox/komoju/payments/"+p.ID+"/pay", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	var paid kPayment
	json.NewDecoder(resp.Body).Decode(&paid)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || paid.Status != "captured" || paid.CapturedAt == nil {
		t.Fatalf("pay: status %d, %+v", resp.StatusCode, paid)
	}
	if got := c.payment("GET", "/api/v1/payments/"+p.ID, nil); got.Status != "captured" {
		t.Errorf("after pay: %s", got.Status)
	}
	if err := srv.PayKomojuSlip(p.ID); err == nil {
		t.Error("paying a slip twice succeeded")
	}
	c.failure(http.StatusUnprocessableEntity, "not_cancellable", "POST", "/api/v1/payments/"+p.ID+"/cancel", nil)
	eventually(t, "captured delivered", func() bool { return len(rc.eventsFor(p.ID)) == 2 })
	if diff := cmp.Diff([]string{"payment.authorized", "payment.captured"}, sortedCopy(rc.typesFor(p.ID))); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	pp := c.payment("POST", "/api/v1/payments", payPay("ali", 100, nil))
	if err := srv.PayKomojuSlip(pp.ID); err == nil {
		t.Error("paying a PayPay payment as a slip succeeded")
	}
}

func TestKomojuSlipExpires(t *testing.T) {
	srv, c, rc := komojuSandbox(t, Options{})
	p := c.payment("POST", "/api/v1/payments", konbini("daily-yamazaki", 900))
	deadline := parseKomojuTime(t, p.PaymentDeadline)
	// The virtual clock has run on by a little since the slip was issued.
	advance(t, srv, `{"duration":"71h59m"}`)
	if got := c.payment("GET", "/api/v1/payments/"+p.ID, nil); got.Status != "authorized" {
		t.Fatalf("before the deadline: %s", got.Status)
	}
	if _, err := srv.AdvanceClock(2 * time.Minute); err != nil {
		t.Fatal(err)
	}
	if !srv.Now().After(deadline) {
		t.Fatalf("clock %v is not past the deadline %v", srv.Now(), deadline)
	}
	var all struct{ Data []kPayment }
	getJSON(t, srv.URL()+"/_sandbox/komoju/payments", &all)
	if len(all.Data) != 1 || all.Data[0].Status != "expired" {
		t.Errorf("read-back after the deadline: %+v", all.Data)
	}
	if err := srv.PayKomojuSlip(p.ID); err == nil {
		t.Error("paid an expired slip")
	}
	c.failure(http.StatusUnprocessableEntity, "not_cancellable", "POST", "/api/v1/payments/"+p.ID+"/cancel", nil)
	eventually(t, "expired delivered", func() bool { return slices.Contains(rc.typesFor(p.ID), "payment.expired") })
}

func TestKomojuCancelSlip(t *testing.T) {
	_, c, rc := komojuSandbox(t, Options{})
	p := c.payment("POST", "/api/v1/payments", bankTransfer(5000))
	if got := c.payment("POST", "/api/v1/payments/"+p.ID+"/cancel", nil); got.Status != "cancelled" {
		t.Errorf("cancel: %s", got.Status)
	}
	c.failure(http.StatusUnprocessableEntity, "not_cancellable", "POST", "/api/v1/payments/"+p.ID+"/cancel", nil)
	c.failure(http.StatusUnprocessableEntity, "not_refundable", "POST", "/api/v1/payments/"+p.ID+"/refund", nil)
	eventually(t, "cancelled delivered", func() bool { return slices.Contains(rc.typesFor(p.ID), "payment.cancelled") })
}

func TestKomojuPayPay(t *testing.T) {
	for _, tc := range []struct {
		name            string
		customer        string
		amount          int64
		capture         any
		status, reason  string
		event           string
		available, held int64 // the customer's wallet afterwards
	}{
		{"manual capture holds", "ali", 12000, "manual", "authorized", "", "payment.authorized", 38000, 12000},
		{"capture false holds", "ali", 12000, false, "authorized", "", "payment.authorized", 38000, 12000},
		{"automatic capture takes", "ali", 12000, nil, "captured", "", "payment.captured", 38000, 0},
		{"all of it", "ali", 50000, "manual", "authorized", "", "payment.authorized", 0, 50000},
		{"sara cannot cover it", "sara", 5000, "manual", "failed", "insufficient_funds", "payment.failed", 2000, 0},
		{"unknown customer has nothing", "zoe", 1, "manual", "failed", "insufficient_funds", "payment.failed", 0, 0},
		{"no customer", "", 1, nil, "failed", "insufficient_funds", "payment.failed", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, c, rc := komojuSandbox(t, Options{})
			p := c.payment("POST", "/api/v1/payments", payPay(tc.customer, tc.amount, tc.capture))
			if p.Status != tc.status || p.FailureReason != tc.reason || p.PaymentDetails["type"] != "paypay" {
				t.Errorf("created: status %s, failure_reason %q, details %v", p.Status, p.FailureReason, p.PaymentDetails)
			}
			if avail, held := srv.WalletBalance(tc.customer); avail != tc.available || held != tc.held {
				t.Errorf("wallet: available %d, held %d; want %d, %d", avail, held, tc.available, tc.held)
			}
			eventually(t, tc.event, func() bool { return len(rc.eventsFor(p.ID)) == 1 })
			e := rc.eventsFor(p.ID)[0]
			if e.Type != tc.event || (tc.reason != "" && (e.Reason == nil || *e.Reason != tc.reason)) {
				t.Errorf("event %s, reason %v", e.Type, e.Reason)
			}
		})
	}
}

func TestKomojuPayPayCaptureCancelRefund(t *testing.T) {
	srv, c, rc := komojuSandbox(t, Options{})
	wallet := func(want [2]int64) {
		t.Helper()
		if avail, held := srv.WalletBalance("ali"); avail != want[0] || held != want[1] {
			t.Errorf("ali's wallet: available %d, held %d; want %d, %d", avail, held, want[0], want[1])
		}
	}

	captured := c.payment("POST", "/api/v1/payments", payPay("ali", 10000, "manual"))
	cancelled := c.payment("POST", "/api/v1/payments", payPay("ali", 5000, "manual"))
	wallet([2]int64{35000, 15000})
	if p := c.payment("POST", "/api/v1/payments/"+captured.ID+"/capture", nil); p.Status != "captured" || p.CapturedAt == nil {
		t.Errorf("capture: %+v", p)
	}
	wallet([2]int64{35000, 5000})
	c.failure(http.StatusUnprocessableEntity, "not_capturable", "POST", "/api/v1/payments/"+captured.ID+"/capture", nil)
	if p := c.payment("POST", "/api/v1/payments/"+cancelled.ID+"/cancel", nil); p.Status != "cancelled" {
		t.Errorf("cancel: %s", p.Status)
	}
	wallet([2]int64{40000, 0})
	c.failure(http.StatusUnprocessableEntity, "not_capturable", "POST", "/api/v1/payments/"+cancelled.ID+"/capture", nil)

	// A partial refund leaves the payment captured, the rest refunds it.
	p := c.payment("POST", "/api/v1/payments/"+captured.ID+"/refund", map[string]any{"amount": 4000})
	if p.Status != "captured" || p.AmountRefunded != 4000 || len(p.Refunds) != 1 || p.Refunds[0].Amount != 4000 {
		t.Errorf("partial refund: %+v", p)
	}
	c.failure(http.StatusUnprocessableEntity, "invalid_parameter", "POST", "/api/v1/payments/"+captured.ID+"/refund", map[string]any{"amount": 6001})
	p = c.payment("POST", "/api/v1/payments/"+captured.ID+"/refund", nil)
	if p.Status != "refunded" || p.AmountRefunded != 10000 || len(p.Refunds) != 2 {
		t.Errorf("full refund: %+v", p)
	}
	wallet([2]int64{50000, 0})
	c.failure(http.StatusUnprocessableEntity, "not_refundable", "POST", "/api/v1/payments/"+captured.ID+"/refund", nil)

	want := []string{"payment.authorized", "payment.captured", "payment.refund.created", "payment.refund.created", "payment.refunded"}
	eventually(t, "refund events", func() bool { return len(rc.eventsFor(captured.ID)) == len(want) })
	if diff := cmp.Diff(sortedCopy(want), sortedCopy(rc.typesFor(captured.ID))); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// A paid slip's refund is KOMOJU's refund request: answered accepted (the payment still
// captured, the request pending, no event), paid out when the clock reaches the payout (the
// request completed, the payment refunded, with refund_request.updated, payment.refund.created
// and payment.refunded); a second request meanwhile is refused.
func TestKomojuSlipRefundIsPaidOutLater(t *testing.T) {
	srv, c, rc := komojuSandbox(t, Options{KomojuRefundPayout: 48 * time.Hour})
	p := c.payment("POST", "/api/v1/payments", konbini("lawson", 1500))
	if err := srv.PayKomojuSlip(p.ID); err != nil {
		t.Fatal(err)
	}
	path := "/api/v1/payments/" + p.ID
	got := c.payment("POST", path+"/refund", nil, "X-KOMOJU-IDEMPOTENCY", "refund-1")
	if got.Status != "captured" || got.AmountRefunded != 0 || len(got.Refunds) != 0 || len(got.RefundRequests) != 1 {
		t.Fatalf("refund of a paid slip: %+v; want captured with one refund request", got)
	}
	r := got.RefundRequests[0]
	if r.Status != "pending" || r.Payment != p.ID || r.ID == "" || r.CreatedAt == "" || r.CustomerName != nil || r.AccountNumber != nil {
		t.Errorf("refund request %+v; want pending, of %s, without a bank account", r, p.ID)
	}
	if again := c.payment("POST", path+"/refund", nil, "X-KOMOJU-IDEMPOTENCY", "refund-1"); !cmp.Equal(got, again) {
		t.Errorf("replay of the refund: %+v, want %+v", again, got)
	}
	c.failure(http.StatusUnprocessableEntity, "not_refundable", "POST", path+"/refund", nil, "X-KOMOJU-IDEMPOTENCY", "refund-2")

	advance(t, srv, `{"duration":"47h59m"}`)
	if got := c.payment("GET", path, nil); got.Status != "captured" || got.RefundRequests[0].Status != "pending" {
		t.Fatalf("before the payout: %s, request %s; want captured, pending", got.Status, got.RefundRequests[0].Status)
	}
	// Webhooks are sent asynchronously: wait for the slip's two, then none of the refund's may be
	// among them.
	eventually(t, "the slip's events", func() bool { return len(rc.eventsFor(p.ID)) >= 2 })
	if diff := cmp.Diff(sortedCopy([]string{"payment.authorized", "payment.captured"}), sortedCopy(rc.typesFor(p.ID))); diff != "" {
		t.Errorf("events before the payout, want the slip's two only (-want +got):\n%s", diff)
	}
	advance(t, srv, `{"duration":"2m"}`)
	got = c.payment("GET", path, nil)
	if got.Status != "refunded" || got.AmountRefunded != 1500 || len(got.Refunds) != 1 || got.RefundRequests[0].Status != "completed" {
		t.Errorf("after the payout: %+v; want refunded in full, the request completed", got)
	}
	want := []string{"payment.authorized", "payment.captured", "refund_request.updated", "payment.refund.created", "payment.refunded"}
	eventually(t, "payout events", func() bool { return len(rc.eventsFor(p.ID)) == len(want) })
	if diff := cmp.Diff(sortedCopy(want), sortedCopy(rc.typesFor(p.ID))); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	for _, e := range rc.eventsFor(p.ID) {
		if e.Type == "refund_request.updated" && (e.Data.ID != r.ID || e.Data.Payment != p.ID || e.Data.Status != "completed") {
			t.Errorf("refund_request.updated data %+v; want request %s of %s, completed", e.Data, r.ID, p.ID)
		}
	}
	if err := srv.PayOutKomojuRefund(p.ID); err == nil {
		t.Error("paid out a refund request twice")
	}
}

// KOMOJU may reject a refund request (a wrong bank account): the payment stays captured and
// refund_request.updated is the only event; a new request can then be made, and paid out at once
// through the sandbox.
func TestKomojuSlipRefundRejected(t *testing.T) {
	srv, c, rc := komojuSandbox(t, Options{})
	p := c.payment("POST", "/api/v1/payments", bankTransfer(3000))
	if err := srv.RejectKomojuRefund(p.ID); err == nil {
		t.Error("rejected a refund request that does not exist")
	}
	if err := srv.PayKomojuSlip(p.ID); err != nil {
		t.Fatal(err)
	}
	path := "/api/v1/payments/" + p.ID
	c.payment("POST", path+"/refund", map[string]any{"amount": 3000})
	var rejected kPayment
	postJSON(t, srv.URL()+"/_sandbox/komoju/payments/"+p.ID+"/reject_refund", http.StatusOK, &rejected)
	if rejected.Status != "captured" || rejected.AmountRefunded != 0 || rejected.RefundRequests[0].Status != "rejected" {
		t.Errorf("after the rejection: %+v; want captured, nothing refunded, the request rejected", rejected)
	}
	// Webhooks are sent concurrently, so the three may arrive in any order.
	eventually(t, "rejection delivered", func() bool { return len(rc.eventsFor(p.ID)) == 3 })
	if diff := cmp.Diff(sortedCopy([]string{"payment.authorized", "payment.captured", "refund_request.updated"}), sortedCopy(rc.typesFor(p.ID))); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	for _, e := range rc.eventsFor(p.ID) {
		if e.Type == "refund_request.updated" && (e.Data.Status != "rejected" || e.Data.Payment != p.ID) {
			t.Errorf("rejection event %+v; want refund_request.updated of %s, rejected", e.Data, p.ID)
		}
	}
	postJSON(t, srv.URL()+"/_sandbox/komoju/payments/"+p.ID+"/payout", http.StatusBadRequest, nil)

	if got := c.payment("POST", path+"/refund", nil); len(got.RefundRequests) != 2 || got.RefundRequests[1].Status != "pending" {
		t.Fatalf("a new request after the rejection: %+v", got.RefundRequests)
	}
	var paid kPayment
	postJSON(t, srv.URL()+"/_sandbox/komoju/payments/"+p.ID+"/payout", http.StatusOK, &paid)
	if paid.Status != "refunded" || paid.RefundRequests[1].Status != "completed" || len(paid.Refunds) != 1 {
		t.Errorf("after the payout: %+v", paid)
	}
	eventually(t, "payout delivered", func() bool { return slices.Contains(rc.typesFor(p.ID), "payment.refunded") })
}

// postJSON POSTs to a /_sandbox/ endpoint and decodes its answer into v (nil: not decoded).
func postJSON(t *testing.T, url string, status int, v any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != status {
		t.Fatalf("POST %s: status %d, want %d", url, resp.StatusCode, status)
	}
	if v != nil {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("POST %s: %v", url, err)
		}
	}
}

func TestKomojuPayPayAuthorizationLapses(t *testing.T) {
	srv, c, rc := komojuSandbox(t, Options{})
	p := c.payment("POST", "/api/v1/payments", payPay("ali", 7000, "manual"))
	if _, err := srv.AdvanceClock(7*24*time.Hour + time.Second); err != nil {
		t.Fatal(err)
	}
	if got := c.payment("GET", "/api/v1/payments/"+p.ID, nil); got.Status != "expired" {
		t.Errorf("after 7 days: %s", got.Status)
	}
	if avail, held := srv.WalletBalance("ali"); avail != 50000 || held != 0 {
		t.Errorf("wallet after the lapse: %d, %d", avail, held)
	}
	eventually(t, "expired delivered", func() bool { return slices.Contains(rc.typesFor(p.ID), "payment.expired") })
}

func TestKomojuWalletBalancesOption(t *testing.T) {
	srv, c, _ := komojuSandbox(t, Options{WalletBalances: map[string]int64{"kim": 300}})
	if p := c.payment("POST", "/api/v1/payments", payPay("ali", 100, nil)); p.Status != "failed" {
		t.Errorf("ali without the default wallets: %s", p.Status)
	}
	if p := c.payment("POST", "/api/v1/payments", payPay("kim", 300, nil)); p.Status != "captured" {
		t.Errorf("kim: %s", p.Status)
	}
	var wallets struct {
		Data map[string]struct{ Available, Held int64 }
	}
	getJSON(t, srv.URL()+"/_sandbox/komoju/wallets", &wallets)
	if len(wallets.Data) != 1 || wallets.Data["kim"].Available != 0 {
		t.Errorf("wallets %+v", wallets.Data)
	}
}

func TestKomojuValidation(t *testing.T) {
	_, c, _ := komojuSandbox(t, Options{})
	with := func(body map[string]any, edit func(b, details map[string]any)) map[string]any {
		edit(body, body["payment_details"].(map[string]any))
		return body
	}
	for _, tc := range []struct {
		name   string
		body   any
		status int
		code   string
		param  string
	}{
		{"not JSON", `{"amount": `, 400, "bad_request", ""},
		{"amount of the wrong type", `{"amount": "lots"}`, 422, "invalid_parameter", "amount"},
		{"no amount", with(konbini("lawson", 1), func(b, _ map[string]any) { delete(b, "amount") }), 422, "missing_parameter", "amount"},
		{"zero amount", konbini("lawson", 0), 422, "invalid_parameter", "amount"},
		{"no currency", with(konbini("lawson", 1), func(b, _ map[string]any) { delete(b, "currency") }), 422, "missing_parameter", "currency"},
		{"not yen", with(konbini("lawson", 1), func(b, _ map[string]any) { b["currency"] = "USD" }), 422, "invalid_parameter", "currency"},
		{"no payment details", map[string]any{"amount": 1, "currency": "JPY"}, 422, "missing_parameter", "payment_details"},
		{"no type", with(konbini("lawson", 1), func(_, d map[string]any) { delete(d, "type") }), 422, "missing_parameter", "payment_details.type"},
		{"unknown type", with(konbini("lawson", 1), func(_, d map[string]any) { d["type"] = "credit_card" }), 422, "invalid_parameter", "payment_details.type"},
		{"konbini without store", with(konbini("lawson", 1), func(_, d map[string]any) { delete(d, "store") }), 422, "missing_parameter", "payment_details.store"},
		{"unknown store", konbini("corner-shop", 1), 422, "invalid_parameter", "payment_details.store"},
		{"konbini without email", with(konbini("lawson", 1), func(_, d map[string]any) { delete(d, "email") }), 422, "missing_parameter", "payment_details.email"},
		{"bank transfer without email", with(bankTransfer(1), func(_, d map[string]any) { delete(d, "email") }), 422, "missing_parameter", "payment_details.email"},
		{"expiry_days 0", with(konbini("lawson", 1), func(_, d map[string]any) { d["expiry_days"] = 0 }), 422, "invalid_parameter", "payment_details.expiry_days"},
		{"expiry_days for paypay", with(payPay("ali", 1, nil), func(_, d map[string]any) { d["expiry_days"] = 3 }), 422, "invalid_parameter", "payment_details.expiry_days"},
		{"capture of another kind", payPay("ali", 1, "sometimes"), 422, "invalid_parameter", "capture"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := c.failure(tc.status, tc.code, "POST", "/api/v1/payments", tc.body)
			var param string
			if e.Error.Param != nil {
				param = *e.Error.Param
			}
			if param != tc.param {
				t.Errorf("param %q, want %q", param, tc.param)
			}
		})
	}
	var all struct{ Data []kPayment }
	getJSON(t, c.base+"/_sandbox/komoju/payments", &all)
	if len(all.Data) != 0 {
		t.Errorf("invalid requests created %d payments", len(all.Data))
	}
}

func TestKomojuAuthenticationAndNotFound(t *testing.T) {
	srv, c, _ := komojuSandbox(t, Options{KomojuSecretKey: komojuKey})
	for _, tc := range []struct {
		name   string
		header []string
		status int
	}{
		{"no authorization", nil, 401},
		{"bearer instead of basic", []string{"Authorization", "Bearer " + komojuKey}, 401},
		{"another key", []string{"Authorization", basic("sk_test_other")}, 401},
		{"not a secret key", []string{"Authorization", basic("pk_test_public")}, 401},
		{"the key", []string{"Authorization", basic(komojuKey)}, 404}, // authenticated: the payment is unknown
	} {
		t.Run(tc.name, func(t *testing.T) {
			anon := komojuClient{t: t, base: srv.URL()}
			code := "unauthorized"
			if tc.status == 404 {
				code = "not_found"
			}
			anon.failure(tc.status, code, "GET", "/api/v1/payments/nosuchpayment", nil, tc.header...)
		})
	}
	c.failure(http.StatusNotFound, "not_found", "POST", "/api/v1/payments/nosuchpayment/capture", nil)
	c.failure(http.StatusNotFound, "not_found", "GET", "/api/v1/customers", nil)
	c.failure(http.StatusNotFound, "not_found", "GET", "/api/v1/events/nosuchevent", nil)
}

func basic(key string) string {
	r, _ := http.NewRequest("GET", "/", nil)
	r.SetBasicAuth(key, "")
	return r.Header.Get("Authorization")
}

func TestKomojuIdempotency(t *testing.T) {
	srv, c, rc := komojuSandbox(t, Options{})
	key := []string{"X-KOMOJU-IDEMPOTENCY", "order-1-authorize"}
	first := c.payment("POST", "/api/v1/payments", konbini("lawson", 1200), key...)
	// The same request, its JSON written otherwise (key order, spacing), is the same request.
	same := `{"payment_details": {"email": "ali@example.com", "store": "lawson", "type": "konbini"},
		"metadata": {"order_id": "o-1", "payment_id": "p-1"}, "external_order_num": "order-1", "currency": "JPY", "amount": 1200}`
	again := c.payment("POST", "/api/v1/payments", same, key...)
	if again.ID != first.ID || !cmp.Equal(first, again) {
		t.Errorf("replay: %s, first %s", again.ID, first.ID)
	}
	c.failure(http.StatusUnprocessableEntity, "unprocessable_entity", "POST", "/api/v1/payments", konbini("lawson", 1300), key...)
	c.failure(http.StatusUnprocessableEntity, "unprocessable_entity", "POST", "/api/v1/payments/"+first.ID+"/cancel", nil, key...)

	var all struct{ Data []kPayment }
	getJSON(t, srv.URL()+"/_sandbox/komoju/payments", &all)
	if len(all.Data) != 1 {
		t.Errorf("%d payments after a replay, want 1", len(all.Data))
	}
	eventually(t, "one event", func() bool { return len(rc.eventsFor(first.ID)) == 1 })

	// A validation error is not saved: the corrected retry with the same key runs.
	fixKey := []string{"X-KOMOJU-IDEMPOTENCY", "order-2-authorize"}
	bad := konbini("lawson", 500)
	delete(bad["payment_details"].(map[string]any), "email")
	c.failure(http.StatusUnprocessableEntity, "missing_parameter", "POST", "/api/v1/payments", bad, fixKey...)
	if p := c.payment("POST", "/api/v1/payments", konbini("lawson", 500), fixKey...); p.Status != "authorized" {
		t.Errorf("corrected retry: %s", p.Status)
	}

	// Keys belong to the dialect and the secret key that used them.
	other := komojuClient{t: t, base: srv.URL(), key: "sk_test_other"}
	if p := other.payment("POST", "/api/v1/payments", konbini("lawson", 1300), key...); p.ID == first.ID {
		t.Error("another secret key replayed the first key's payment")
	}
	if _, err := newClient(srv.URL(), komojuKey).V1PaymentIntents.Create(context.Background(), createParams(key[1], 100)); err != nil {
		t.Errorf("a Stripe request with the same key: %v", err)
	}

	c.failure(http.StatusBadRequest, "bad_request", "POST", "/api/v1/payments", konbini("lawson", 1), "X-KOMOJU-IDEMPOTENCY", string(bytes.Repeat([]byte("k"), 101)))

	// Keys are forgotten after 24 hours of the virtual clock.
	if _, err := srv.AdvanceClock(24 * time.Hour); err != nil {
		t.Fatal(err)
	}
	if p := c.payment("POST", "/api/v1/payments", konbini("lawson", 1300), key...); p.ID == first.ID || p.Amount != 1300 {
		t.Errorf("after 24 h: %s amount %d, want a new payment", p.ID, p.Amount)
	}
}

func TestKomojuEventsAPI(t *testing.T) {
	_, c, _ := komojuSandbox(t, Options{})
	p := c.payment("POST", "/api/v1/payments", konbini("seicomart", 700))
	c.payment("POST", "/api/v1/payments/"+p.ID+"/cancel", nil)
	q := c.payment("POST", "/api/v1/payments", payPay("sara", 9000, nil))

	type list struct {
		Resource string   `json:"resource"`
		Total    int      `json:"total"`
		LastPage int      `json:"last_page"`
		Data     []kEvent `json:"data"`
	}
	var l list
	_, raw := c.do("GET", "/api/v1/events?per_page=2", nil)
	if err := json.Unmarshal(raw, &l); err != nil {
		t.Fatal(err)
	}
	if l.Resource != "list" || l.Total != 3 || l.LastPage != 2 || len(l.Data) != 2 ||
		l.Data[0].Type != "payment.failed" || l.Data[0].Data.ID != q.ID || l.Data[1].Type != "payment.cancelled" {
		t.Errorf("page 1: %+v", l)
	}
	_, raw = c.do("GET", "/api/v1/events?per_page=2&page=2", nil)
	l = list{}
	json.Unmarshal(raw, &l)
	if len(l.Data) != 1 || l.Data[0].Type != "payment.authorized" || l.Data[0].Data.Status != "authorized" {
		t.Errorf("page 2: %+v", l.Data)
	}
	c.failure(http.StatusUnprocessableEntity, "invalid_parameter", "GET", "/api/v1/events?per_page=101", nil)

	status, raw := c.do("GET", "/api/v1/events/"+l.Data[0].ID, nil)
	var e kEvent
	json.Unmarshal(raw, &e)
	if status != http.StatusOK || e.ID != l.Data[0].ID || e.Resource != "event" || e.Data.ID != p.ID {
		t.Errorf("show event: %d %+v", status, e)
	}
}

func TestKomojuWebhookDeliveries(t *testing.T) {
	rc := newKomojuReceiver(t, komojuSecret)
	stripeRC := newReceiver(t, testSecret)
	srv, sc := startSandbox(t, Options{
		KomojuWebhookURL: rc.URL, KomojuWebhookSecret: komojuSecret,
		WebhookURL: stripeRC.URL, WebhookSecret: testSecret, WebhookRetry: fastRetry,
	})
	c := komojuClient{t: t, base: srv.URL(), key: komojuKey}

	// A fault scoped to KOMOJU duplicates KOMOJU deliveries only.
	if err := srv.SetWebhookFault(WebhookFault{Mode: FaultDuplicate, Dialect: DialectKomoju}); err != nil {
		t.Fatal(err)
	}
	p := c.payment("POST", "/api/v1/payments", konbini("lawson", 100))
	pi, err := authorize(t, sc, "pm_card_visa", 100)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "duplicated KOMOJU event", func() bool { return len(rc.eventsFor(p.ID)) == 2 })
	eventually(t, "Stripe events", func() bool { return len(stripeRC.eventsFor(pi.ID)) == 3 })
	evs := rc.eventsFor(p.ID)
	if evs[0].ID != evs[1].ID || evs[0].deliveryID == evs[1].deliveryID {
		t.Errorf("duplicates: event ids %s %s, delivery ids %s %s; want one event, two deliveries",
			evs[0].ID, evs[1].ID, evs[0].deliveryID, evs[1].deliveryID)
	}
	for _, d := range srv.Deliveries() {
		if (d.Dialect == DialectKomoju) != (d.Fault == FaultDuplicate) {
			t.Errorf("delivery %s of %s: fault %q", d.ID, d.Dialect, d.Fault)
		}
	}

	// Drop the next KOMOJU event; it stays readable through the events API.
	setFault(t, srv, `{"mode":"drop","count":1,"dialect":"komoju"}`)
	c.payment("POST", "/api/v1/payments/"+p.ID+"/cancel", nil)
	eventually(t, "dropped", func() bool {
		ds := srv.Deliveries()
		return ds[len(ds)-1].State == "dropped" && ds[len(ds)-1].EventType == "payment.cancelled"
	})
	if got := rc.typesFor(p.ID); slices.Contains(got, "payment.cancelled") {
		t.Errorf("a dropped event was delivered: %v", got)
	}

	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.invalid) > 0 {
		t.Errorf("deliveries that failed verification: %v", rc.invalid)
	}
	// The exported helper signs as the receiver verifies.
	mac := hmac.New(sha256.New, []byte("s"))
	mac.Write([]byte(`{"a":1}`))
	if got := KomojuSignature([]byte(`{"a":1}`), "s"); got != hex.EncodeToString(mac.Sum(nil)) {
		t.Errorf("KomojuSignature = %s", got)
	}
}

func TestKomojuWebhookRetried(t *testing.T) {
	var mu sync.Mutex
	var statuses []int
	fails := 2
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		status := http.StatusOK
		if fails > 0 {
			fails--
			status = http.StatusServiceUnavailable
		}
		statuses = append(statuses, status)
		w.WriteHeader(status)
	}))
	t.Cleanup(hook.Close)
	srv, _ := startSandbox(t, Options{KomojuWebhookURL: hook.URL, WebhookRetry: fastRetry})
	c := komojuClient{t: t, base: srv.URL(), key: komojuKey}
	c.payment("POST", "/api/v1/payments", bankTransfer(100))
	eventually(t, "delivered on the third attempt", func() bool {
		ds := srv.Deliveries()
		return len(ds) == 1 && ds[0].State == "delivered"
	})
	if d := srv.Deliveries()[0]; len(d.Attempts) != 3 || d.Dialect != DialectKomoju {
		t.Errorf("delivery %+v", d)
	}
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}
