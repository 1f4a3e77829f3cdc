// Package payment is the payment aggregate of the gateway: one payment of one order, with one
// method, through one provider, and its state machine. It has no I/O: the store loads and saves
// payments, the app layer decides which transition a provider's answer or webhook means.
//
// States (docs/architecture.md, "Payments (as built)"):
//
//	REQUESTED → AUTHORIZED | PENDING (slip issued) | FAILED
//	REQUESTED → VOID_REQUESTED (the customer must act, e.g. 3-D Secure, and the order is cancelled)
//	PENDING → AUTHORIZED (the slip was paid) | FAILED | EXPIRED | VOID_REQUESTED
//	AUTHORIZED → CAPTURE_REQUESTED → CAPTURED | CAPTURE_FAILED
//	AUTHORIZED → VOID_REQUESTED → VOIDED | VOID_FAILED          (card, wallet: release the hold)
//	AUTHORIZED → REFUND_REQUESTED                               (a paid slip: give the money back)
//	AUTHORIZED → EXPIRED (the authorization lapsed)
//	VOID_REQUESTED → REFUND_REQUESTED (a slip paid before its cancellation reached the provider)
//	CAPTURED → REFUND_REQUESTED → REFUNDED | REFUND_FAILED
//	REFUND_REQUESTED → REFUND_PENDING → REFUNDED | REFUND_FAILED  (accepted, paid out later)
//
// What AUTHORIZED means depends on the method, and so does how its money is given back. For a
// card or a wallet the provider holds the money without having taken it: releasing the hold is a
// void, and there is nothing to refund until it is captured. For a konbini or bank transfer slip,
// AUTHORIZED means the customer's cash has reached the provider: the money is taken, there is no
// hold to release, and only a refund gives it back. So AUTHORIZED → VOID_REQUESTED is for cards
// and wallets, AUTHORIZED → REFUND_REQUESTED (and VOID_REQUESTED → REFUND_REQUESTED) for slips.
//
// A slip's cash cannot go back the way it came: the provider pays it out by bank transfer to the
// customer's account, by hand, a business day or two later, and may reject it (a wrong account).
// Its answer to the refund is then "accepted, not paid out": REFUND_PENDING, which emits
// payment.refund_pending. The money is still held until REFUNDED; the provider's webhook, or the
// reconciliation sweep asking it, ends the refund REFUNDED or REFUND_FAILED.
//
// Transitions that reach a provider's answer emit one event each (payment.authorized,
// payment.pending, ...) and increment the version; recording an intent (*_REQUESTED) emits none. A
// provider callback for a stage the payment has already passed is late or a duplicate: the app
// layer asks Late and ignores it rather than applying it.
//
// A payment also records whether its order was cancelled while the authorization was in flight
// (CancelRequested): the app layer voids it as soon as the provider's answer lands.
package payment

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// AggregateType is the aggregate type of the payment events.
const AggregateType = "payment"

// Event types the payment aggregate emits.
const (
	EventAuthorized    = "payment.authorized"
	EventPending       = "payment.pending"
	EventFailed        = "payment.failed"
	EventExpired       = "payment.expired"
	EventCaptured      = "payment.captured"
	EventCaptureFailed = "payment.capture_failed"
	EventVoided        = "payment.voided"
	EventVoidFailed    = "payment.void_failed"
	EventRefundPending = "payment.refund_pending"
	EventRefunded      = "payment.refunded"
	EventRefundFailed  = "payment.refund_failed"
)

// Method is how the customer pays; its values are those of the CK_Payments_Method check.
type Method string

const (
	Card         Method = "CARD"
	Wallet       Method = "WALLET" // PayPay
	Konbini      Method = "KONBINI"
	BankTransfer Method = "BANK_TRANSFER"
)

// Methods returns every method.
func Methods() []Method { return []Method{Card, Wallet, Konbini, BankTransfer} }

// ParseMethod reads a method as clients write it ("card", "wallet", "konbini", "bank_transfer").
func ParseMethod(s string) (Method, error) {
	m := Method(strings.ToUpper(s))
	for _, v := range Methods() {
		if m == v {
			return m, nil
		}
	}
	return "", fmt.Errorf("%w: unknown payment method %q (want card, wallet, konbini or bank_transfer)", ErrInvalid, s)
}

// Providers.
const (
	ProviderStripe = "stripe" // cards
	ProviderKomoju = "komoju" // konbini, bank transfer, PayPay
)

// Provider is the provider that takes payments of m.
func (m Method) Provider() string {
	if m == Card {
		return ProviderStripe
	}
	return ProviderKomoju
}

// UsesSlip reports whether the customer pays m later, with a slip.
func (m Method) UsesSlip() bool { return m == Konbini || m == BankTransfer }

// Reason is why a payment failed, in Spanmart's own vocabulary: no provider's codes leave its adapter.
type Reason string

const (
	ReasonDeclined            Reason = "declined"
	ReasonInsufficientFunds   Reason = "insufficient_funds"
	ReasonExpired             Reason = "expired"
	ReasonAuthentication      Reason = "authentication_failed"
	ReasonProviderUnavailable Reason = "provider_unavailable"
	ReasonInvalidRequest      Reason = "invalid_request"
)

// Sentinel errors; test with errors.Is.
var (
	ErrNotFound          = errors.New("payment not found")
	ErrInvalid           = errors.New("invalid payment")
	ErrIllegalTransition = errors.New("illegal payment transition")
)

// TransitionError is an illegal transition; it wraps ErrIllegalTransition.
type TransitionError struct {
	ID       string
	From, To Status
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("payment %s: illegal transition %s → %s", e.ID, e.From, e.To)
}

func (e *TransitionError) Unwrap() error { return ErrIllegalTransition }

// Emitted is an event a transition produced: its type, the aggregate version it carries and the
// status it reports (a transaction may move the payment on before it commits: an authorization
// whose order was cancelled meanwhile is voided at once, and its event still says AUTHORIZED).
type Emitted struct {
	Type    string
	Version int64
	Status  Status
}

// Payment is the aggregate. Its fields are unexported: it changes only through its methods.
type Payment struct {
	id, orderID       string
	customerID        string
	method            Method
	amountMinor       int64
	currency          string
	status            Status
	providerPaymentID string
	failureReason     Reason
	expiresAt         time.Time       // of a slip
	slip              json.RawMessage // what the customer pays a slip with, as the provider adapter described it
	cancelRequested   bool            // the order was cancelled while the authorization was in flight
	version           int64

	emitted []Emitted
}

// New validates a new payment and returns it REQUESTED at version 0: it emits nothing (the
// provider has not answered yet), and its first event will be version 1.
func New(id, orderID, customerID string, method Method, amountMinor int64, currency string) (*Payment, error) {
	var problems []string
	if id == "" || orderID == "" || customerID == "" {
		problems = append(problems, "id, order id and customer id are required")
	}
	if _, err := ParseMethod(string(method)); err != nil {
		problems = append(problems, err.Error())
	}
	if amountMinor <= 0 {
		problems = append(problems, fmt.Sprintf("amount %d is not positive", amountMinor))
	}
	if len(currency) != 3 {
		problems = append(problems, fmt.Sprintf("currency %q is not a 3-letter code", currency))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, strings.Join(problems, "; "))
	}
	return &Payment{id: id, orderID: orderID, customerID: customerID, method: method, amountMinor: amountMinor, currency: currency, status: Requested}, nil
}

// Snapshot is a payment's persisted state, for the store to rebuild a Payment with Restore.
type Snapshot struct {
	ID, OrderID       string
	CustomerID        string
	Method            Method
	AmountMinor       int64
	Currency          string
	Status            Status
	ProviderPaymentID string
	FailureReason     Reason
	ExpiresAt         time.Time
	Slip              json.RawMessage
	CancelRequested   bool
	Version           int64
}

// Restore rebuilds a stored payment; it emits nothing.
func Restore(s Snapshot) (*Payment, error) {
	if !s.Status.Valid() {
		return nil, fmt.Errorf("restore payment %s: unknown status %q", s.ID, s.Status)
	}
	if _, err := ParseMethod(string(s.Method)); err != nil {
		return nil, fmt.Errorf("restore payment %s: %w", s.ID, err)
	}
	return &Payment{
		id: s.ID, orderID: s.OrderID, customerID: s.CustomerID, method: s.Method, amountMinor: s.AmountMinor, currency: s.Currency,
		status: s.Status, providerPaymentID: s.ProviderPaymentID, failureReason: s.FailureReason,
		expiresAt: s.ExpiresAt, slip: s.Slip, cancelRequested: s.CancelRequested, version: s.Version,
	}, nil
}

// Snapshot returns the state to persist.
func (p *Payment) Snapshot() Snapshot {
	return Snapshot{
		ID: p.id, OrderID: p.orderID, CustomerID: p.customerID, Method: p.method, AmountMinor: p.amountMinor, Currency: p.currency,
		Status: p.status, ProviderPaymentID: p.providerPaymentID, FailureReason: p.failureReason,
		ExpiresAt: p.expiresAt, Slip: p.slip, CancelRequested: p.cancelRequested, Version: p.version,
	}
}

func (p *Payment) ID() string                { return p.id }
func (p *Payment) OrderID() string           { return p.orderID }
func (p *Payment) CustomerID() string        { return p.customerID }
func (p *Payment) Slip() json.RawMessage     { return p.slip }
func (p *Payment) Method() Method            { return p.method }
func (p *Payment) AmountMinor() int64        { return p.amountMinor }
func (p *Payment) Currency() string          { return p.currency }
func (p *Payment) Status() Status            { return p.status }
func (p *Payment) ProviderPaymentID() string { return p.providerPaymentID }
func (p *Payment) FailureReason() Reason     { return p.failureReason }
func (p *Payment) ExpiresAt() time.Time      { return p.expiresAt }
func (p *Payment) CancelRequested() bool     { return p.cancelRequested }
func (p *Payment) Version() int64            { return p.version }

// Emitted returns the events emitted since New or Restore, oldest first.
func (p *Payment) Emitted() []Emitted { return append([]Emitted(nil), p.emitted...) }

// Late reports whether a provider callback that would move the payment to to comes after the
// payment has reached or passed that stage (a duplicate, or an older callback arriving last).
func (p *Payment) Late(to Status) bool { return p.status.Passed(to) }

// Authorize records that the provider holds the money (card, wallet) or the slip was paid, under
// the provider's id for the payment: REQUESTED | PENDING → AUTHORIZED.
func (p *Payment) Authorize(providerPaymentID string) error {
	if err := p.setProviderID(providerPaymentID); err != nil {
		return err
	}
	return p.transition(Authorized, EventAuthorized)
}

// AwaitCustomer records the provider's id for a payment the provider holds while the customer
// must still act (3-D Secure): it stays REQUESTED and emits nothing; the provider's callback, or
// the reconciliation sweep asking by that id, moves it on.
func (p *Payment) AwaitCustomer(providerPaymentID string) error {
	if p.status != Requested {
		return &TransitionError{ID: p.id, From: p.status, To: Requested}
	}
	return p.setProviderID(providerPaymentID)
}

// Pend records a slip issued by the provider, which the customer pays before expiresAt with what
// slip describes (JSON, opaque here): REQUESTED → PENDING. Only slip methods pend.
func (p *Payment) Pend(providerPaymentID string, expiresAt time.Time, slip json.RawMessage) error {
	if !p.method.UsesSlip() {
		return fmt.Errorf("%w: a %s payment has no slip", ErrInvalid, p.method)
	}
	if expiresAt.IsZero() {
		return fmt.Errorf("%w: a slip needs an expiry", ErrInvalid)
	}
	if err := p.setProviderID(providerPaymentID); err != nil {
		return err
	}
	if err := p.transition(Pending, EventPending); err != nil {
		return err
	}
	p.expiresAt, p.slip = expiresAt, slip
	return nil
}

// Fail records the provider's refusal with its normalized reason: REQUESTED | PENDING → FAILED.
func (p *Payment) Fail(reason Reason) error { return p.fail(Failed, EventFailed, reason) }

// Expire records that the slip or the authorization lapsed: PENDING | AUTHORIZED → EXPIRED.
func (p *Payment) Expire() error { return p.transition(Expired, EventExpired) }

// RequestCapture records the intent to capture, before the provider is called:
// AUTHORIZED → CAPTURE_REQUESTED (no event).
func (p *Payment) RequestCapture() error { return p.intend(CaptureRequested) }

// Capture records the provider's capture: CAPTURE_REQUESTED → CAPTURED.
func (p *Payment) Capture() error { return p.transition(Captured, EventCaptured) }

// FailCapture records a capture that failed permanently: CAPTURE_REQUESTED → CAPTURE_FAILED.
func (p *Payment) FailCapture(reason Reason) error {
	return p.fail(CaptureFailed, EventCaptureFailed, reason)
}

// RequestCancel records that the payment's order was cancelled while its authorization is in
// flight (REQUESTED; no event, no new version): whatever the provider answers, a payment it
// authorizes or pends must then be voided at once. Recording it again changes nothing.
func (p *Payment) RequestCancel() error {
	if p.status != Requested {
		return &TransitionError{ID: p.id, From: p.status, To: Requested}
	}
	p.cancelRequested = true
	return nil
}

// RequestVoid records the intent to release the hold or cancel the slip (no event): PENDING,
// AUTHORIZED (card, wallet), or REQUESTED once the provider knows the payment (the customer must
// still act) → VOID_REQUESTED.
func (p *Payment) RequestVoid() error { return p.intend(VoidRequested) }

// Void records the provider's void: VOID_REQUESTED → VOIDED.
func (p *Payment) Void() error { return p.transition(Voided, EventVoided) }

// FailVoid records a void that failed permanently: VOID_REQUESTED → VOID_FAILED.
func (p *Payment) FailVoid(reason Reason) error { return p.fail(VoidFailed, EventVoidFailed, reason) }

// RequestRefund records the intent to give taken money back (no event): CAPTURED, or a paid slip
// (AUTHORIZED, or VOID_REQUESTED when the customer paid before the cancellation reached the
// provider) → REFUND_REQUESTED.
func (p *Payment) RequestRefund() error { return p.intend(RefundRequested) }

// PendRefund records that the provider accepted the refund and will pay it out later:
// REFUND_REQUESTED → REFUND_PENDING. The money is not back yet.
func (p *Payment) PendRefund() error { return p.transition(RefundPending, EventRefundPending) }

// Refund records the provider's refund, paid out: REFUND_REQUESTED | REFUND_PENDING → REFUNDED.
func (p *Payment) Refund() error { return p.transition(Refunded, EventRefunded) }

// FailRefund records a refund that failed permanently (refused, given up, or rejected after the
// provider accepted it): REFUND_REQUESTED | REFUND_PENDING → REFUND_FAILED.
func (p *Payment) FailRefund(reason Reason) error {
	return p.fail(RefundFailed, EventRefundFailed, reason)
}

func (p *Payment) setProviderID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: the provider's payment id is required", ErrInvalid)
	case p.providerPaymentID != "" && p.providerPaymentID != id:
		return fmt.Errorf("%w: payment %s is %s at the provider, not %s", ErrInvalid, p.id, p.providerPaymentID, id)
	}
	p.providerPaymentID = id
	return nil
}

// check reports whether p may move to to: the status table, and the rules that depend on the
// method and on what the provider knows (see the package doc).
func (p *Payment) check(to Status) error {
	illegal := !p.status.CanTransitionTo(to)
	switch {
	case to == RefundRequested && p.status != Captured:
		illegal = illegal || !p.method.UsesSlip() // a card or wallet hold is voided, not refunded
	case to == VoidRequested && p.status == Authorized:
		illegal = illegal || p.method.UsesSlip() // a paid slip has no hold to release
	case to == VoidRequested && p.status == Requested:
		illegal = illegal || p.providerPaymentID == "" // nothing at the provider to void yet
	}
	if illegal {
		return &TransitionError{ID: p.id, From: p.status, To: to}
	}
	return nil
}

func (p *Payment) fail(to Status, event string, reason Reason) error {
	if reason == "" {
		return fmt.Errorf("%w: a failure needs a reason", ErrInvalid)
	}
	if err := p.transition(to, event); err != nil {
		return err
	}
	p.failureReason = reason
	return nil
}

func (p *Payment) intend(to Status) error {
	if err := p.check(to); err != nil {
		return err
	}
	p.status = to
	return nil
}

func (p *Payment) transition(to Status, event string) error {
	if err := p.check(to); err != nil {
		return err
	}
	p.status = to
	p.version++
	p.emitted = append(p.emitted, Emitted{Type: event, Version: p.version, Status: to})
	return nil
}
