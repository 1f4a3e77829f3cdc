package paysim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// komojuStatus is a KOMOJU payment status, spelled as KOMOJU spells it. For a slip (konbini,
// bank transfer) "authorized" means the slip is issued and KOMOJU waits for the customer's
// cash; for PayPay it means the amount is held in the customer's wallet until a capture.
type komojuStatus string

const (
	komojuPending    komojuStatus = "pending" // KOMOJU's status before payment details; never reached here
	komojuAuthorized komojuStatus = "authorized"
	komojuCaptured   komojuStatus = "captured"
	komojuRefunded   komojuStatus = "refunded"
	komojuCancelled  komojuStatus = "cancelled"
	komojuExpired    komojuStatus = "expired"
	komojuFailed     komojuStatus = "failed"
)

// The payment types (payment_details.type) the sandbox takes.
const (
	komojuKonbini      = "konbini"
	komojuBankTransfer = "bank_transfer"
	komojuPayPay       = "paypay"
)

// Slip lifetimes when payment_details.expiry_days is not given (KOMOJU sets them per merchant;
// these are the sandbox's), and the largest expiry_days accepted.
const (
	konbiniValidity      = 3 * 24 * time.Hour
	bankTransferValidity = 7 * 24 * time.Hour
	maxExpiryDays        = 60
)

// A refund request's status. KOMOJU gives a konbini or bank transfer payment's cash back by bank
// transfer to the customer's account, by hand, later: the request is pending until KOMOJU pays
// it out (completed) or cannot (rejected: a wrong account, say).
const (
	refundRequestPending   = "pending"
	refundRequestCompleted = "completed"
	refundRequestRejected  = "rejected"
)

// DefaultKomojuRefundPayout is how long after a slip's refund is requested the sandbox pays it
// out, in virtual time, when Options.KomojuRefundPayout is zero: KOMOJU's "a business day or two"
// shortened to one day.
const DefaultKomojuRefundPayout = 24 * time.Hour

// komojuInsufficientFunds is the failure reason of a PayPay payment the wallet cannot cover.
const komojuInsufficientFunds = "insufficient_funds"

// konbiniStores are the convenience store chains of payment_details.store.
var konbiniStores = []string{"seven-eleven", "lawson", "family-mart", "ministop", "daily-yamazaki", "seicomart"}

// Which statuses allow which operation.
var (
	komojuCancellableFrom = []komojuStatus{komojuPending, komojuAuthorized}
	komojuRefundableFrom  = []komojuStatus{komojuCaptured}
)

// wallet is a PayPay customer's balance in minor units: available to spend, and held by
// authorizations not yet captured or released.
type wallet struct {
	available, held int64
}

// komojuState is the KOMOJU dialect's objects; Server.mu guards it.
type komojuState struct {
	payments map[string]*komojuPayment
	order    []string // payment ids in creation order
	events   []*komojuEvent
	byEvent  map[string]*komojuEvent
	wallets  map[string]*wallet
}

func newKomojuState(balances map[string]int64) komojuState {
	k := komojuState{payments: map[string]*komojuPayment{}, byEvent: map[string]*komojuEvent{}, wallets: map[string]*wallet{}}
	for customer, balance := range balances {
		k.wallets[customer] = &wallet{available: balance}
	}
	return k
}

// walletOf is the wallet of a PayPay payment's customer; nil for a slip or a customer without
// one (balance 0).
func (k *komojuState) walletOf(p *komojuPayment) *wallet {
	if p.typ != komojuPayPay {
		return nil
	}
	return k.wallets[p.customer]
}

// bankAccount is where a bank transfer slip asks the customer to send the money: a virtual
// account of its own, as KOMOJU issues.
type bankAccount struct {
	bankName, bankCode, branchName, branchNumber, accountType, accountNumber, accountName string
}

// komojuPayment is one KOMOJU payment. Its methods apply KOMOJU's transitions and return a
// *komojuError when the status does not allow the operation; they do no I/O.
type komojuPayment struct {
	id               string
	typ              string // konbini, bank_transfer, paypay
	amount           int64
	currency         string
	externalOrderNum string
	description      string
	metadata         map[string]any
	manualCapture    bool
	status           komojuStatus
	created          time.Time
	authorizedAt     time.Time
	capturedAt       time.Time
	deadline         time.Time // a slip's payment_deadline
	amountRefunded   int64
	refunds          []komojuRefund
	refundRequests   []*komojuRefundRequest // oldest first; at most one pending
	failureReason    string

	// payment_details, as given and as issued
	email, phone     string
	store            string // konbini
	receipt          string // konbini: the number given at the till
	confirmationCode string // konbini: the second number (not at seven-eleven)
	bank             bankAccount
	instructionsURL  string
	customer         string // paypay: metadata.customer_id, whose wallet pays

	saved memo[komojuMemoKey] // its snapshot record (persist.go)
}

// komojuRefund is a refund, which in the sandbox succeeds at once.
type komojuRefund struct {
	id          string
	amount      int64
	description string
	created     time.Time
}

// komojuRefundRequest is a refund KOMOJU pays out later, by bank transfer: how it gives back a
// konbini or bank transfer payment's money. While it is pending the payment stays captured.
type komojuRefundRequest struct {
	id          string
	amount      int64
	description string
	status      string // refundRequestPending, ...Completed, ...Rejected
	created     time.Time
	payoutAt    time.Time // when the clock pays it out if nobody settled it before
}

// openRefundRequest is p's pending refund request, nil if none is.
func (p *komojuPayment) openRefundRequest() *komojuRefundRequest {
	for _, r := range p.refundRequests {
		if r.status == refundRequestPending {
			return r
		}
	}
	return nil
}

// usesSlip reports whether the customer pays p later, in cash or by transfer.
func (p *komojuPayment) usesSlip() bool { return p.typ == komojuKonbini || p.typ == komojuBankTransfer }

// chargeWallet runs a PayPay payment against w (nil: an empty wallet) at now: the amount is held
// (manual capture: authorized) or taken (captured), or the payment fails for insufficient funds.
func (p *komojuPayment) chargeWallet(now time.Time, w *wallet) {
	if w == nil || w.available < p.amount {
		p.status = komojuFailed
		p.failureReason = komojuInsufficientFunds
		return
	}
	w.available -= p.amount
	if p.manualCapture {
		w.held += p.amount
		p.status = komojuAuthorized
		p.authorizedAt = now
		return
	}
	p.status = komojuCaptured
	p.authorizedAt, p.capturedAt = now, now
}

// issueSlip makes a konbini or bank transfer payment authorized (awaiting the customer's money)
// until deadline.
func (p *komojuPayment) issueSlip(now, deadline time.Time) {
	p.status = komojuAuthorized
	p.authorizedAt = now
	p.deadline = deadline
}

// pay records the customer paying a slip.
func (p *komojuPayment) pay(now time.Time) *komojuError {
	if !p.usesSlip() {
		return komojuErr(http.StatusUnprocessableEntity, "not_payable", "", fmt.Sprintf("Payment %s is a %s payment, not a slip.", p.id, p.typ))
	}
	if p.status != komojuAuthorized {
		return komojuStateError(p, "paid", "not_payable")
	}
	p.status = komojuCaptured
	p.capturedAt = now
	return nil
}

// capture takes the amount an authorized PayPay payment holds in w.
func (p *komojuPayment) capture(now time.Time, w *wallet) *komojuError {
	if p.usesSlip() {
		return komojuErr(http.StatusUnprocessableEntity, "not_capturable", "",
			fmt.Sprintf("Payment %s is a %s payment: it is captured when the customer pays.", p.id, p.typ))
	}
	if p.status != komojuAuthorized {
		return komojuStateError(p, "captured", "not_capturable")
	}
	w.held -= p.amount
	p.status = komojuCaptured
	p.capturedAt = now
	return nil
}

// cancel cancels an unpaid slip or releases a PayPay authorization held in w.
func (p *komojuPayment) cancel(w *wallet) *komojuError {
	if !slices.Contains(komojuCancellableFrom, p.status) {
		return komojuStateError(p, "cancelled", "not_cancellable")
	}
	p.release(w)
	p.status = komojuCancelled
	return nil
}

// expire ends a slip past its deadline or a PayPay authorization that was not captured in time.
func (p *komojuPayment) expire(w *wallet) {
	p.release(w)
	p.status = komojuExpired
}

// release gives a PayPay authorization's amount back to the wallet.
func (p *komojuPayment) release(w *wallet) {
	if p.status == komojuAuthorized && w != nil {
		w.held -= p.amount
		w.available += p.amount
	}
}

// expiresAt is when an authorized payment lapses: a slip's deadline, or 7 days after a PayPay
// authorization (as the sandbox lapses card authorizations).
func (p *komojuPayment) expiresAt() time.Time {
	if p.usesSlip() {
		return p.deadline
	}
	return p.authorizedAt.Add(authorizationValidity)
}

// refund gives amount (0: all that is left) back; PayPay refunds go back to w. A payment
// refunded in full is "refunded", a partial refund leaves it "captured", as KOMOJU does.
func (p *komojuPayment) refund(id string, amount int64, description string, now time.Time, w *wallet) *komojuError {
	if !slices.Contains(komojuRefundableFrom, p.status) {
		return komojuStateError(p, "refunded", "not_refundable")
	}
	left := p.amount - p.amountRefunded
	if amount == 0 {
		amount = left
	}
	if err := checkRefundAmount(amount, left); err != nil {
		return err
	}
	p.amountRefunded += amount
	p.refunds = append(p.refunds, komojuRefund{id: id, amount: amount, description: description, created: now})
	if w != nil {
		w.available += amount
	}
	if p.amountRefunded == p.amount {
		p.status = komojuRefunded
	}
	return nil
}

// requestRefund records the refund of a paid slip as KOMOJU makes it: a refund request of amount
// (0: all that is left), pending until payoutAt. The payment stays captured meanwhile, and a
// second request is refused while one is pending (it would give the money back twice).
func (p *komojuPayment) requestRefund(id string, amount int64, description string, now, payoutAt time.Time) *komojuError {
	if !slices.Contains(komojuRefundableFrom, p.status) {
		return komojuStateError(p, "refunded", "not_refundable")
	}
	if r := p.openRefundRequest(); r != nil {
		return komojuErr(http.StatusUnprocessableEntity, "not_refundable", "",
			fmt.Sprintf("Payment %s has a refund request (%s) that is not paid out yet.", p.id, r.id))
	}
	left := p.amount - p.amountRefunded
	if amount == 0 {
		amount = left
	}
	if err := checkRefundAmount(amount, left); err != nil {
		return err
	}
	p.refundRequests = append(p.refundRequests, &komojuRefundRequest{id: id, amount: amount, description: description,
		status: refundRequestPending, created: now, payoutAt: payoutAt})
	return nil
}

// payOut completes p's pending refund request r: the money reaches the customer's account, the
// refund is recorded under refundID and, if it was all that was left, p is refunded.
func (p *komojuPayment) payOut(r *komojuRefundRequest, refundID string, now time.Time) {
	r.status = refundRequestCompleted
	p.amountRefunded += r.amount
	p.refunds = append(p.refunds, komojuRefund{id: refundID, amount: r.amount, description: r.description, created: now})
	if p.amountRefunded == p.amount {
		p.status = komojuRefunded
	}
}

func checkRefundAmount(amount, left int64) *komojuError {
	if amount < 0 || amount > left {
		e := komojuErr(http.StatusUnprocessableEntity, "invalid_parameter", "amount",
			fmt.Sprintf("The refund amount must be between 1 and %d, what is left to refund.", left))
		e.validation = true
		return e
	}
	return nil
}

// komojuStateError is the error for an operation p's status does not allow.
func komojuStateError(p *komojuPayment, pastTense, code string) *komojuError {
	return komojuErr(http.StatusUnprocessableEntity, code, "",
		fmt.Sprintf("Payment %s cannot be %s: its status is %s.", p.id, pastTense, p.status))
}

// komojuTime renders a time as KOMOJU does: RFC 3339 in UTC, to the second.
func komojuTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func komojuTimePtr(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := komojuTime(t)
	return &s
}

func stringPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// komojuPaymentJSON is the Payment object as KOMOJU renders it (nullable fields are pointers).
type komojuPaymentJSON struct {
	ID               string                    `json:"id"`
	Resource         string                    `json:"resource"`
	Status           komojuStatus              `json:"status"`
	Amount           int64                     `json:"amount"`
	Tax              int64                     `json:"tax"`
	Customer         *string                   `json:"customer"`
	PaymentDeadline  *string                   `json:"payment_deadline"`
	PaymentDetails   any                       `json:"payment_details"`
	PaymentMethodFee int64                     `json:"payment_method_fee"`
	Total            int64                     `json:"total"`
	Currency         string                    `json:"currency"`
	Description      *string                   `json:"description"`
	CapturedAt       *string                   `json:"captured_at"`
	ExternalOrderNum *string                   `json:"external_order_num"`
	Metadata         map[string]any            `json:"metadata"`
	CreatedAt        string                    `json:"created_at"`
	AmountRefunded   int64                     `json:"amount_refunded"`
	Locale           string                    `json:"locale"`
	Refunds          []komojuRefundJSON        `json:"refunds"`
	RefundRequests   []komojuRefundRequestJSON `json:"refund_requests"`
	// FailureReason is the sandbox's own: why a failed payment failed (insufficient_funds).
	FailureReason *string `json:"failure_reason,omitempty"`
}

type konbiniDetailsJSON struct {
	Type             string  `json:"type"`
	Store            string  `json:"store"`
	Email            string  `json:"email"`
	Phone            *string `json:"phone"`
	Receipt          string  `json:"receipt"`
	ConfirmationCode *string `json:"confirmation_code"`
	InstructionsURL  string  `json:"instructions_url"`
}

type bankTransferDetailsJSON struct {
	Type            string  `json:"type"`
	Email           string  `json:"email"`
	Phone           *string `json:"phone"`
	BankName        string  `json:"bank_name"`
	BankCode        string  `json:"bank_code"`
	BranchName      string  `json:"branch_name"`
	BranchNumber    string  `json:"branch_number"`
	AccountType     string  `json:"account_type"`
	AccountNumber   string  `json:"account_number"`
	AccountName     string  `json:"account_name"`
	InstructionsURL string  `json:"instructions_url"`
}

type payPayDetailsJSON struct {
	Type string `json:"type"`
}

type komojuRefundJSON struct {
	ID          string  `json:"id"`
	Resource    string  `json:"resource"`
	Amount      int64   `json:"amount"`
	Currency    string  `json:"currency"`
	Payment     string  `json:"payment"`
	Description *string `json:"description"`
	CreatedAt   string  `json:"created_at"`
	Chargeback  bool    `json:"chargeback"`
}

// komojuRefundRequestJSON is KOMOJU's RefundRequest object. The customer's bank account is
// null: the sandbox takes a slip's refund on POST .../refund, which carries none (the README,
// "Known differences from KOMOJU").
type komojuRefundRequestJSON struct {
	ID            string  `json:"id"`
	Payment       string  `json:"payment"`
	CustomerName  *string `json:"customer_name"`
	BankName      *string `json:"bank_name"`
	BankCode      *string `json:"bank_code"`
	BranchName    *string `json:"branch_name"`
	BranchNumber  *string `json:"branch_number"`
	AccountNumber *string `json:"account_number"`
	Description   *string `json:"description"`
	Status        string  `json:"status"`
	CreatedAt     string  `json:"created_at"`
}

func (r *komojuRefundRequest) json(paymentID string) komojuRefundRequestJSON {
	return komojuRefundRequestJSON{ID: r.id, Payment: paymentID, Description: stringPtr(r.description), Status: r.status,
		CreatedAt: komojuTime(r.created)}
}

func (p *komojuPayment) json() komojuPaymentJSON {
	j := komojuPaymentJSON{
		ID: p.id, Resource: "payment", Status: p.status, Amount: p.amount, Total: p.amount, Currency: p.currency,
		Description: stringPtr(p.description), CapturedAt: komojuTimePtr(p.capturedAt),
		ExternalOrderNum: stringPtr(p.externalOrderNum), Metadata: p.metadata, CreatedAt: komojuTime(p.created),
		AmountRefunded: p.amountRefunded, Locale: "ja", Refunds: []komojuRefundJSON{}, RefundRequests: []komojuRefundRequestJSON{},
		PaymentDeadline: komojuTimePtr(p.deadline), FailureReason: stringPtr(p.failureReason),
	}
	if j.Metadata == nil {
		j.Metadata = map[string]any{}
	}
	for _, r := range p.refundRequests {
		j.RefundRequests = append(j.RefundRequests, r.json(p.id))
	}
	for _, r := range p.refunds {
		j.Refunds = append(j.Refunds, komojuRefundJSON{ID: r.id, Resource: "refund", Amount: r.amount, Currency: p.currency,
			Payment: p.id, Description: stringPtr(r.description), CreatedAt: komojuTime(r.created)})
	}
	switch p.typ {
	case komojuKonbini:
		j.PaymentDetails = konbiniDetailsJSON{Type: p.typ, Store: p.store, Email: p.email, Phone: stringPtr(p.phone),
			Receipt: p.receipt, ConfirmationCode: stringPtr(p.confirmationCode), InstructionsURL: p.instructionsURL}
	case komojuBankTransfer:
		b := p.bank
		j.PaymentDetails = bankTransferDetailsJSON{Type: p.typ, Email: p.email, Phone: stringPtr(p.phone),
			BankName: b.bankName, BankCode: b.bankCode, BranchName: b.branchName, BranchNumber: b.branchNumber,
			AccountType: b.accountType, AccountNumber: b.accountNumber, AccountName: b.accountName, InstructionsURL: p.instructionsURL}
	default:
		j.PaymentDetails = payPayDetailsJSON{Type: p.typ}
	}
	return j
}

// komojuEvent is a KOMOJU event; its data is a snapshot of the payment when it was created (of
// the refund request, for refund_request.updated).
type komojuEvent struct {
	id, typ string
	created time.Time
	data    json.RawMessage
	reason  string
	saved   memo[struct{}] // its snapshot record (persist.go)
}

type komojuEventJSON struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Resource  string          `json:"resource"`
	Data      json.RawMessage `json:"data"`
	CreatedAt string          `json:"created_at"`
	Reason    *string         `json:"reason"`
}

func (e *komojuEvent) json() komojuEventJSON {
	return komojuEventJSON{ID: e.id, Type: e.typ, Resource: "event", Data: e.data, CreatedAt: komojuTime(e.created), Reason: stringPtr(e.reason)}
}

// emitKomojuLocked records a KOMOJU event about p (a snapshot taken now) and queues it for
// delivery once the current request releases the lock.
func (s *Server) emitKomojuLocked(typ string, p *komojuPayment, reason string) {
	s.emitKomojuDataLocked(typ, p.json(), reason)
}

// emitKomojuDataLocked records a KOMOJU event whose data is data (a snapshot taken now) and
// queues it for delivery once the current request releases the lock.
func (s *Server) emitKomojuDataLocked(typ string, data any, reason string) {
	e := &komojuEvent{id: newKomojuID(), typ: typ, created: s.nowLocked(), data: mustJSON(data), reason: reason}
	s.komoju.events = append(s.komoju.events, e)
	s.komoju.byEvent[e.id] = e
	s.queueLocked(s.komojuMessage(e))
}

// komojuMessage is the webhook delivery of e.
func (s *Server) komojuMessage(e *komojuEvent) message {
	return message{eventID: e.id, eventType: e.typ, payload: mustJSON(e.json()), to: s.komojuHooks}
}

// komojuTarget delivers KOMOJU events as KOMOJU does: X-Komoju-ID names the delivery,
// X-Komoju-Event the event type, X-Komoju-Signature signs the body.
func komojuTarget(url, secret string) *webhookTarget {
	return &webhookTarget{dialect: DialectKomoju, url: url, header: func(h http.Header, d *Delivery, payload []byte, _ time.Time) {
		h.Set("Content-Type", "application/json")
		h.Set("User-Agent", "KOMOJU-Webhook/1.0 (paysim)")
		h.Set("X-Komoju-ID", d.ID)
		h.Set("X-Komoju-Event", d.EventType)
		h.Set("X-Komoju-Signature", KomojuSignature(payload, secret))
	}}
}

// KomojuSignature is the X-Komoju-Signature header for payload: the hex HMAC-SHA256 of the
// raw body with the webhook secret. KOMOJU signs no timestamp.
func KomojuSignature(payload []byte, secret string) string {
	return hmacHex(secret, payload)
}

const lowerAlphanumerics = "0123456789abcdefghijklmnopqrstuvwxyz"

// newKomojuID returns a KOMOJU-looking object id: 25 random lowercase letters and digits.
func newKomojuID() string { return randomString(lowerAlphanumerics, 25) }

// randomDigits returns n random decimal digits (slip numbers, account numbers).
func randomDigits(n int) string { return randomString("0123456789", n) }
