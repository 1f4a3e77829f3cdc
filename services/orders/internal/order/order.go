// Package order is the order aggregate: its lines, totals, status machine and version. It has no
// I/O: the store loads and saves orders, the app layer decides which transition to apply.
//
// An order also carries the customer's choice of payment (Payment: a method and its detail), e-mail
// address and language (Contact), fixed when it is placed, and, for a konbini or bank transfer
// payment, the slip the gateway issued (PaymentInstructions), recorded without a transition.
//
// States (docs/architecture.md, "The order saga (as built)"):
//
//	PENDING → AWAITING_PAYMENT → CONFIRMED → SHIPPED → COMPLETED
//	PENDING | AWAITING_PAYMENT | CONFIRMED → CANCELLING → CANCELLED
//	PENDING → CANCELLED (rejected: nothing was reserved or paid, so there is nothing to compensate)
//	SHIPPED → NEEDS_ATTENTION (the capture failed after shipping)
//	CANCELLING → NEEDS_ATTENTION (a compensation failed for good)
//
// Every transition emits exactly one event and increments the version, so Version is always the
// AggregateVersion of the last order.* event emitted. The other services' facts are applied by the
// methods in saga.go: a cancelling order records which compensations it waits for (the stock, and
// the money once a payment was requested) and becomes CANCELLED when every one is done; settling
// one of two changes the order without a transition (no event, same version), like recording a
// slip.
package order

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits of an order's lines.
const (
	MaxLines       = 50
	MinQuantity    = 1
	MaxQuantity    = 100
	MaxCustomerLen = 128 // Orders.CustomerId is STRING(128): an Identity Platform uid is 1 to 128 characters
	MaxSKULen      = 64  // Products.Sku is STRING(64)
	MaxReasonLen   = 64  // Orders.CancelReason is STRING(64)
)

// AggregateType is the aggregate type of the order events.
const AggregateType = "order"

// Event types the order aggregate emits.
const (
	EventCreated         = "order.created"
	EventAwaitingPayment = "order.awaiting_payment"
	EventConfirmed       = "order.confirmed"
	EventShipped         = "order.shipped"
	EventCompleted       = "order.completed"
	EventCancelled       = "order.cancelled"
	EventCancelCompleted = "order.cancellation_completed"
	EventNeedsAttention  = "order.needs_attention"
)

// Sentinel errors; test with errors.Is.
var (
	ErrNotFound          = errors.New("order not found")
	ErrInvalid           = errors.New("invalid order")
	ErrIllegalTransition = errors.New("illegal order transition")
)

// ValidationError lists every problem of an order request; it wraps ErrInvalid.
type ValidationError struct {
	Problems []string
}

func (e *ValidationError) Error() string { return "invalid order: " + strings.Join(e.Problems, "; ") }

func (e *ValidationError) Unwrap() error { return ErrInvalid }

// StateError is a change that is not a transition but is allowed in one state only (recording a
// payment slip); it wraps ErrIllegalTransition, so callers treat both as "the order has moved on".
type StateError struct {
	ID     string
	Status Status
	Action string
}

func (e *StateError) Error() string {
	return fmt.Sprintf("order %s is %s: cannot %s", e.ID, e.Status, e.Action)
}

func (e *StateError) Unwrap() error { return ErrIllegalTransition }

// TransitionError is an illegal transition; it wraps ErrIllegalTransition.
type TransitionError struct {
	ID       string
	From, To Status
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("order %s: illegal transition %s → %s", e.ID, e.From, e.To)
}

func (e *TransitionError) Unwrap() error { return ErrIllegalTransition }

// Line is one line of an order: a SKU, its quantity and the catalog unit price when ordered.
type Line struct {
	SKU            string
	Quantity       int64
	UnitPriceMinor int64
}

// Emitted is an event a transition produced: its type and the aggregate version it carries.
// The store turns it into an outbox row with a payload.
type Emitted struct {
	Type    string
	Version int64
}

// Order is the aggregate. Its fields are unexported: it changes only through its methods.
type Order struct {
	id           string
	customerID   string
	status       Status
	currency     string
	lines        []Line
	totalMinor   int64
	version      int64
	cancelReason string
	payment      Payment
	email        string
	instructions *PaymentInstructions
	language     Language

	// The rest of the saga: the shipment it left in, what a cancellation waits for, why it
	// needs attention.
	shipment        *Shipment
	compensations   []Compensation
	attentionReason string

	emitted []Emitted
	changed bool // state differs from what New or Restore gave (transitions and slips)
}

// Contact is how the shop reaches the customer about the order: an e-mail address (required
// when the payment's slip is e-mailed, optional otherwise: without one nothing is e-mailed) and
// the language of what it sends.
type Contact struct {
	Email    string
	Language Language // "" is Japanese
}

// New validates a new order and returns it PENDING at version 1, having emitted order.created.
// The lines must have distinct SKUs and one currency (the caller prices them from the catalog); a
// payment is required, and an e-mail address when the payment's slip is e-mailed.
func New(id, customerID, currency string, lines []Line, payment Payment, contact Contact) (*Order, error) {
	email := contact.Email
	var problems []string
	if id == "" {
		problems = append(problems, "id is empty")
	}
	problems = append(problems, ValidateCustomer(customerID)...)
	if payment.IsZero() {
		problems = append(problems, "payment is required")
	} else {
		problems = append(problems, payment.Validate()...)
	}
	problems = append(problems, ValidateEmail(email, payment.Method)...)
	language, lp := ParseLanguage(string(contact.Language))
	problems = append(problems, lp...)
	if len(currency) != 3 {
		problems = append(problems, fmt.Sprintf("currency %q is not a 3-letter code", currency))
	}
	problems = append(problems, ValidateLines(lines)...)
	var total int64
	for _, l := range lines {
		if l.UnitPriceMinor < 0 {
			problems = append(problems, fmt.Sprintf("line %s: negative price", l.SKU))
		}
		total += l.Quantity * l.UnitPriceMinor
	}
	if len(problems) > 0 {
		return nil, &ValidationError{Problems: problems}
	}
	o := &Order{
		id: id, customerID: customerID, status: Pending, currency: currency,
		lines: append([]Line(nil), lines...), totalMinor: total, version: 1,
		payment: payment, email: email, language: language, changed: true,
	}
	o.emitted = []Emitted{{Type: EventCreated, Version: 1}}
	return o, nil
}

// ValidateCustomer returns the problems of a customer id: required, at most MaxCustomerLen
// characters, plain text (see textProblem).
func ValidateCustomer(customerID string) []string {
	switch {
	case strings.TrimSpace(customerID) == "":
		return []string{"customer_id is required"}
	case utf8.RuneCountInString(customerID) > MaxCustomerLen:
		return []string{fmt.Sprintf("customer_id is longer than %d characters", MaxCustomerLen)}
	}
	if p := textProblem("customer_id", customerID); p != "" {
		return []string{p}
	}
	return nil
}

// textProblem says why s, the value of field, is not plain text, "" if it is: invalid UTF-8, a
// control character (Unicode Cc: NUL, ESC, DEL, ...) or a format character (Cf: bidirectional
// overrides such as U+202E, zero-width characters). Those hide or disguise what operators and
// customers read in logs, terminals, the console and e-mails, and a store may cut a string at a NUL.
func textProblem(field, s string) string {
	if !utf8.ValidString(s) {
		return field + " is not valid UTF-8"
	}
	for i, r := range s {
		if unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) {
			return fmt.Sprintf("%s has the control or format character %U at byte %d", field, r, i)
		}
	}
	return ""
}

// ValidateLines returns the problems of a list of lines, prices aside: 1..MaxLines lines,
// quantities MinQuantity..MaxQuantity, non-empty distinct SKUs. Duplicate SKUs are rejected rather
// than merged: merging could silently exceed MaxQuantity and usually hides a client bug.
func ValidateLines(lines []Line) []string {
	var problems []string
	if len(lines) < 1 || len(lines) > MaxLines {
		problems = append(problems, fmt.Sprintf("an order has 1 to %d lines, got %d", MaxLines, len(lines)))
	}
	seen := make(map[string]bool, len(lines))
	for i, l := range lines {
		switch {
		case l.SKU == "":
			problems = append(problems, fmt.Sprintf("lines[%d]: sku is required", i))
		case utf8.RuneCountInString(l.SKU) > MaxSKULen:
			problems = append(problems, fmt.Sprintf("lines[%d]: sku is longer than %d characters", i, MaxSKULen))
		case textProblem("sku", l.SKU) != "":
			problems = append(problems, fmt.Sprintf("lines[%d]: %s", i, textProblem("sku", l.SKU)))
		case seen[l.SKU]:
			problems = append(problems, fmt.Sprintf("lines[%d]: duplicate sku %q (one line per sku)", i, l.SKU))
		}
		seen[l.SKU] = true
		if l.Quantity < MinQuantity || l.Quantity > MaxQuantity {
			problems = append(problems, fmt.Sprintf("lines[%d]: quantity %d is not in %d..%d", i, l.Quantity, MinQuantity, MaxQuantity))
		}
	}
	return problems
}

// Snapshot is an order's persisted state, for the store to rebuild an Order with Restore.
type Snapshot struct {
	ID           string
	CustomerID   string
	Status       Status
	Currency     string
	Lines        []Line
	TotalMinor   int64
	Version      int64
	CancelReason string
	Payment      Payment // zero for an order placed before payments existed
	Email        string
	Instructions *PaymentInstructions // the slip of a konbini or bank transfer payment, once issued
	Language     Language             // "" (an order placed before languages existed) is Japanese

	Shipment        *Shipment
	Compensations   []Compensation
	AttentionReason string
}

// Restore rebuilds a stored order. It checks what the database cannot (a known status); it emits
// nothing. An order placed before payments existed has no payment and no e-mail: it is restored as
// it is, and the payment events find it without a method to check.
func Restore(s Snapshot) (*Order, error) {
	if !s.Status.Valid() {
		return nil, fmt.Errorf("restore order %s: unknown status %q", s.ID, s.Status)
	}
	if s.Version < 1 {
		return nil, fmt.Errorf("restore order %s: version %d", s.ID, s.Version)
	}
	if !s.Payment.IsZero() && !s.Payment.Method.Valid() {
		return nil, fmt.Errorf("restore order %s: unknown payment method %q", s.ID, s.Payment.Method)
	}
	language := s.Language
	if language == "" {
		language = Japanese
	}
	if language != Japanese && language != English {
		return nil, fmt.Errorf("restore order %s: unknown language %q", s.ID, s.Language)
	}
	comps := append([]Compensation(nil), s.Compensations...)
	if s.Status == Cancelling && len(comps) == 0 {
		// Cancelled before compensations were recorded: it waited for its stock only.
		comps = []Compensation{{Kind: CompensateStock, State: CompensationPending}}
	}
	o := &Order{
		id: s.ID, customerID: s.CustomerID, status: s.Status, currency: s.Currency,
		lines: append([]Line(nil), s.Lines...), totalMinor: s.TotalMinor, version: s.Version,
		cancelReason: s.CancelReason, payment: s.Payment, email: s.Email, instructions: copyInstructions(s.Instructions),
		language: language, compensations: comps, attentionReason: s.AttentionReason,
	}
	if s.Shipment != nil {
		sh := *s.Shipment
		o.shipment = &sh
	}
	return o, nil
}

func copyInstructions(in *PaymentInstructions) *PaymentInstructions {
	if in == nil {
		return nil
	}
	c := *in
	if in.Bank != nil {
		b := *in.Bank
		c.Bank = &b
	}
	return &c
}

// Snapshot returns the state to persist.
func (o *Order) Snapshot() Snapshot {
	return Snapshot{
		ID: o.id, CustomerID: o.customerID, Status: o.status, Currency: o.currency,
		Lines: o.Lines(), TotalMinor: o.totalMinor, Version: o.version, CancelReason: o.cancelReason,
		Payment: o.payment, Email: o.email, Instructions: o.PaymentInstructions(), Language: o.language,
		Shipment: o.Shipment(), Compensations: o.Compensations(), AttentionReason: o.attentionReason,
	}
}

func (o *Order) ID() string           { return o.id }
func (o *Order) CustomerID() string   { return o.customerID }
func (o *Order) Status() Status       { return o.status }
func (o *Order) Currency() string     { return o.currency }
func (o *Order) TotalMinor() int64    { return o.totalMinor }
func (o *Order) Version() int64       { return o.version }
func (o *Order) CancelReason() string { return o.cancelReason }
func (o *Order) Lines() []Line        { return append([]Line(nil), o.lines...) }
func (o *Order) Payment() Payment     { return o.payment }
func (o *Order) Email() string        { return o.email }

// PaymentInstructions returns the slip of a konbini or bank transfer payment, nil before it is
// issued (and for the other methods).
func (o *Order) PaymentInstructions() *PaymentInstructions { return copyInstructions(o.instructions) }

// Emitted returns the events emitted since New or Restore, oldest first.
func (o *Order) Emitted() []Emitted { return append([]Emitted(nil), o.emitted...) }

// Changed reports whether the order's state differs from what New or Restore gave: a transition,
// or a change without one (a payment slip). The store writes the order only then.
func (o *Order) Changed() bool { return o.changed }

// MarkAwaitingPayment records that inventory reserved every line: PENDING → AWAITING_PAYMENT.
func (o *Order) MarkAwaitingPayment() error {
	return o.transition(AwaitingPayment, EventAwaitingPayment)
}

// Confirm records the authorization of the order's payment: AWAITING_PAYMENT → CONFIRMED. The
// authorized amount and currency must be the order's: confirming an order for less than its total
// would ship goods nobody pays for, so a mismatch is invalid (the gateway's bug, for an operator),
// never a confirmation. An order in another state has moved on (TransitionError), checked first.
func (o *Order) Confirm(amountMinor int64, currency string) error {
	if !o.status.CanTransitionTo(Confirmed) {
		return &TransitionError{ID: o.id, From: o.status, To: Confirmed}
	}
	if amountMinor != o.totalMinor || currency != o.currency {
		return &ValidationError{Problems: []string{fmt.Sprintf("order %s: authorized %d %s, the order is %d %s", o.id, amountMinor, currency, o.totalMinor, o.currency)}}
	}
	return o.transition(Confirmed, EventConfirmed)
}

// truncate cuts s to at most n characters.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// Reject cancels a PENDING order whose stock could not be reserved: PENDING → CANCELLED
// directly, since nothing was reserved or paid and there is nothing to compensate.
func (o *Order) Reject(reason string) error {
	if o.status != Pending {
		return &TransitionError{ID: o.id, From: o.status, To: Cancelled}
	}
	return o.cancel(Cancelled, reason)
}

func (o *Order) cancel(to Status, reason string) error {
	if reason == "" || utf8.RuneCountInString(reason) > MaxReasonLen {
		return &ValidationError{Problems: []string{fmt.Sprintf("cancel reason must be 1 to %d characters", MaxReasonLen)}}
	}
	if err := o.transition(to, EventCancelled); err != nil {
		return err
	}
	o.cancelReason = reason
	return nil
}

func (o *Order) transition(to Status, event string) error {
	if !o.status.CanTransitionTo(to) {
		return &TransitionError{ID: o.id, From: o.status, To: to}
	}
	o.status = to
	o.version++
	o.emitted = append(o.emitted, Emitted{Type: event, Version: o.version})
	o.changed = true
	return nil
}
