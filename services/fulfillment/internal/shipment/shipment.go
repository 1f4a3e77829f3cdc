// Package shipment is the shipment aggregate: the parcel an order leaves the warehouse in, its
// status machine and its version. No I/O here: internal/store loads and saves shipments, internal/app
// decides when to create, ship, fail or cancel one and which event that emits.
//
// An order has at most one shipment, whose id is derived from the order id (IDFor), so however
// often order.confirmed is delivered it names the same shipment. Its lines are those of the order's
// reservation, which ship with it.
//
//	PENDING → SHIPPED   (the warehouse handed it to a carrier: carrier and tracking number)
//	PENDING → FAILED    (the warehouse cannot ship it: a reason)
//	PENDING → CANCELLED (the order was cancelled first)
//
// SHIPPED, FAILED and CANCELLED are final. Ship and Fail are idempotent: asking for the state the
// shipment is already in, with the same details, changes nothing (whoever asks: the shipment keeps
// who moved it first); with other details it is a conflict (ErrConflict). Version counts the shipment's changes (1 when created); it is not the
// version of its events: a shipment emits one event in its life (shipment.shipped or
// shipment.failed), at version 1.
package shipment

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/spanmart/spanmart/services/fulfillment/internal/inventory"
)

// MaxDetailLen is the longest carrier, tracking number or failure reason (STRING(64) columns).
const MaxDetailLen = 64

// MaxActorLen is the longest record of who shipped or failed a shipment (STRING(320) columns, as
// long as the longest e-mail address).
const MaxActorLen = 320

// Reasons of a failed shipment that the warehouse and the simulated carrier use; any other reason
// of 1..MaxDetailLen characters is accepted too.
const (
	ReasonCarrierRejected    = "carrier_rejected"
	ReasonLostBeforeHandover = "lost_before_handover"
)

// Sentinel errors; test with errors.Is.
var (
	ErrNotFound          = errors.New("shipment not found")
	ErrInvalid           = errors.New("invalid shipment")
	ErrIllegalTransition = errors.New("illegal shipment transition")
	// ErrConflict: the shipment already reached the asked-for state with other details (shipped
	// with another carrier or tracking number, failed for another reason).
	ErrConflict = errors.New("shipment conflict")
)

// ValidationError lists every problem of a request; it wraps ErrInvalid.
type ValidationError struct {
	Problems []string
}

func (e *ValidationError) Error() string {
	return "invalid shipment request: " + strings.Join(e.Problems, "; ")
}

func (e *ValidationError) Unwrap() error { return ErrInvalid }

// TransitionError is an illegal transition; it wraps ErrIllegalTransition.
type TransitionError struct {
	ID       string
	From, To Status
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("shipment %s is %s: cannot become %s", e.ID, e.From, e.To)
}

func (e *TransitionError) Unwrap() error { return ErrIllegalTransition }

// namespace derives shipment ids from order ids. Never change it: the ids of existing shipments
// depend on it.
var namespace = uuid.MustParse("0f8d6b8e-3c1a-5e0b-9a57-6d2c1b4e7f30")

// IDFor returns the id of the shipment of order orderID: a UUIDv5 of the order id.
func IDFor(orderID string) string {
	return uuid.NewSHA1(namespace, []byte(orderID)).String()
}

// Shipment is the aggregate. Its fields are unexported: it changes only through its methods.
type Shipment struct {
	id             string
	orderID        string
	status         Status
	carrier        string
	trackingNumber string
	failureReason  string
	shippedBy      string
	failedBy       string
	lines          []inventory.Line
	version        int64
	createdAt      time.Time
	updatedAt      time.Time
	shippedAt      time.Time
}

// New returns the PENDING shipment of an order at version 1; lines are the order's reserved lines
// (at least one).
func New(orderID string, lines []inventory.Line) (*Shipment, error) {
	var problems []string
	if orderID == "" {
		problems = append(problems, "order id is empty")
	}
	if len(lines) == 0 {
		problems = append(problems, "a shipment needs at least one line")
	}
	for _, l := range lines {
		if l.SKU == "" || l.Quantity <= 0 {
			problems = append(problems, fmt.Sprintf("line %q × %d is not a line", l.SKU, l.Quantity))
		}
	}
	if len(problems) > 0 {
		return nil, &ValidationError{Problems: problems}
	}
	return &Shipment{id: IDFor(orderID), orderID: orderID, status: Pending, lines: append([]inventory.Line(nil), lines...), version: 1}, nil
}

// Snapshot is the state of a shipment, as the store keeps it.
type Snapshot struct {
	ID             string
	OrderID        string
	Status         Status
	Carrier        string // SHIPPED only
	TrackingNumber string // SHIPPED only
	FailureReason  string // FAILED only
	ShippedBy      string // SHIPPED only, and not always (see Shipment.ShippedBy)
	FailedBy       string // FAILED only, and not always
	Lines          []inventory.Line
	Version        int64
	CreatedAt      time.Time
	UpdatedAt      time.Time
	ShippedAt      time.Time // zero unless SHIPPED
}

// Restore rebuilds a shipment from its snapshot; a snapshot no shipment can be in is an error.
func Restore(s Snapshot) (*Shipment, error) {
	var problems []string
	if s.ID == "" || s.OrderID == "" {
		problems = append(problems, "id and order id are required")
	}
	if !s.Status.Valid() {
		problems = append(problems, fmt.Sprintf("unknown status %q", s.Status))
	}
	if s.Version < 1 {
		problems = append(problems, fmt.Sprintf("version %d", s.Version))
	}
	if s.Status == Shipped && (s.Carrier == "" || s.TrackingNumber == "") {
		problems = append(problems, "a shipped shipment needs its carrier and tracking number")
	}
	if s.Status == Failed && s.FailureReason == "" {
		problems = append(problems, "a failed shipment needs its reason")
	}
	if (s.ShippedBy != "" && s.Status != Shipped) || (s.FailedBy != "" && s.Status != Failed) {
		problems = append(problems, fmt.Sprintf("a %s shipment records who shipped (%q) or failed (%q) it", s.Status, s.ShippedBy, s.FailedBy))
	}
	if len(problems) > 0 {
		// Not ErrInvalid: a stored shipment that cannot be restored is the service's fault, never
		// the caller's.
		return nil, fmt.Errorf("restore shipment %s: %s", s.ID, strings.Join(problems, "; "))
	}
	return &Shipment{
		id: s.ID, orderID: s.OrderID, status: s.Status, carrier: s.Carrier, trackingNumber: s.TrackingNumber,
		failureReason: s.FailureReason, shippedBy: s.ShippedBy, failedBy: s.FailedBy,
		lines: append([]inventory.Line(nil), s.Lines...), version: s.Version,
		createdAt: s.CreatedAt, updatedAt: s.UpdatedAt, shippedAt: s.ShippedAt,
	}, nil
}

// Snapshot returns the state of s.
func (s *Shipment) Snapshot() Snapshot {
	return Snapshot{
		ID: s.id, OrderID: s.orderID, Status: s.status, Carrier: s.carrier, TrackingNumber: s.trackingNumber,
		FailureReason: s.failureReason, ShippedBy: s.shippedBy, FailedBy: s.failedBy, Lines: s.Lines(), Version: s.version,
		CreatedAt: s.createdAt, UpdatedAt: s.updatedAt, ShippedAt: s.shippedAt,
	}
}

// ID returns the shipment id.
func (s *Shipment) ID() string { return s.id }

// OrderID returns the order the shipment ships.
func (s *Shipment) OrderID() string { return s.orderID }

// Status returns the current status.
func (s *Shipment) Status() Status { return s.status }

// Carrier returns the carrier of a shipped shipment, "" otherwise.
func (s *Shipment) Carrier() string { return s.carrier }

// TrackingNumber returns the carrier's tracking number of a shipped shipment, "" otherwise.
func (s *Shipment) TrackingNumber() string { return s.trackingNumber }

// FailureReason returns why a failed shipment could not be shipped, "" otherwise.
func (s *Shipment) FailureReason() string { return s.failureReason }

// ShippedBy returns who shipped a shipped shipment: the verified account of the warehouse's (or an
// operator's) request, or the simulated carrier. "" otherwise, and for a shipment shipped before
// fulfillment recorded it.
func (s *Shipment) ShippedBy() string { return s.shippedBy }

// FailedBy returns who failed a failed shipment, as ShippedBy.
func (s *Shipment) FailedBy() string { return s.failedBy }

// Lines returns the SKUs and quantities the shipment ships, in SKU order.
func (s *Shipment) Lines() []inventory.Line { return append([]inventory.Line(nil), s.lines...) }

// Version returns the number of changes since (and including) its creation.
func (s *Shipment) Version() int64 { return s.version }

// CreatedAt returns when the shipment was created (the commit timestamp the store read; zero for
// a shipment not read back since it was created).
func (s *Shipment) CreatedAt() time.Time { return s.createdAt }

// UpdatedAt returns when the shipment last changed, as the store read it.
func (s *Shipment) UpdatedAt() time.Time { return s.updatedAt }

// ShippedAt returns when the shipment was shipped, as the store read it or its commit set it
// (Committed); zero unless SHIPPED.
func (s *Shipment) ShippedAt() time.Time { return s.shippedAt }

// Committed records that the shipment's last change committed at: the store writes the commit
// timestamp as its UpdatedAt, and as its ShippedAt when the change shipped it.
func (s *Shipment) Committed(at time.Time) {
	s.updatedAt = at
	if s.status == Shipped && s.shippedAt.IsZero() {
		s.shippedAt = at
	}
}

// Ship records that by handed the shipment to carrier under trackingNumber: PENDING → SHIPPED. It
// reports whether the shipment changed: shipping a shipment already shipped with the same carrier
// and tracking number changes nothing (a repeated request, by whoever: the first actor stays
// recorded); with others it is ErrConflict. A failed or cancelled shipment cannot ship
// (ErrIllegalTransition); invalid details are ErrInvalid. An empty or overlong by is an error
// that is not the caller's (ErrInvalid is): who acts is never written by the caller.
func (s *Shipment) Ship(carrier, trackingNumber, by string) (changed bool, err error) {
	if problems := ValidateShip(carrier, trackingNumber); len(problems) > 0 {
		return false, &ValidationError{Problems: problems}
	}
	if err := validateActor(s.id, by); err != nil {
		return false, err
	}
	if s.status == Shipped {
		if s.carrier == carrier && s.trackingNumber == trackingNumber {
			return false, nil
		}
		return false, fmt.Errorf("%w: shipment %s was shipped with %s %s, not %s %s",
			ErrConflict, s.id, s.carrier, s.trackingNumber, carrier, trackingNumber)
	}
	if err := s.moveTo(Shipped); err != nil {
		return false, err
	}
	s.carrier, s.trackingNumber, s.shippedBy = carrier, trackingNumber, by
	return true, nil
}

// Fail records that by found the shipment cannot be shipped, for reason: PENDING → FAILED. It
// reports whether the shipment changed: failing a failed shipment for the same reason changes
// nothing (by whoever: the first actor stays recorded); for another reason it is ErrConflict. A
// shipped or cancelled shipment cannot fail (ErrIllegalTransition); an invalid reason is
// ErrInvalid, an empty or overlong by an error that is not the caller's, as for Ship.
func (s *Shipment) Fail(reason, by string) (changed bool, err error) {
	if problems := ValidateFailure(reason); len(problems) > 0 {
		return false, &ValidationError{Problems: problems}
	}
	if err := validateActor(s.id, by); err != nil {
		return false, err
	}
	if s.status == Failed {
		if s.failureReason == reason {
			return false, nil
		}
		return false, fmt.Errorf("%w: shipment %s failed for %s, not %s", ErrConflict, s.id, s.failureReason, reason)
	}
	if err := s.moveTo(Failed); err != nil {
		return false, err
	}
	s.failureReason, s.failedBy = reason, by
	return true, nil
}

// Cancel records that the order was cancelled before the shipment left: PENDING → CANCELLED. It
// reports whether the shipment changed: a cancelled or failed shipment (which never left) stays as
// it is. A shipped one cannot be cancelled (ErrIllegalTransition): the goods are gone.
func (s *Shipment) Cancel() (changed bool, err error) {
	if s.status == Cancelled || s.status == Failed {
		return false, nil
	}
	if err := s.moveTo(Cancelled); err != nil {
		return false, err
	}
	return true, nil
}

func (s *Shipment) moveTo(to Status) error {
	if !s.status.CanTransitionTo(to) {
		return &TransitionError{ID: s.id, From: s.status, To: to}
	}
	s.status = to
	s.version++
	return nil
}

// ValidateShip returns the problems of a carrier and tracking number: each 1..MaxDetailLen
// printable characters.
func ValidateShip(carrier, trackingNumber string) []string {
	return append(validateDetail("carrier", carrier), validateDetail("tracking_number", trackingNumber)...)
}

// ValidateFailure returns the problems of a failure reason: 1..MaxDetailLen printable characters.
func ValidateFailure(reason string) []string {
	return validateDetail("reason", reason)
}

// validateActor checks who acts on shipment id: 1..MaxActorLen printable characters. A bad one is
// the service's fault (an action that reached the use case without a verified identity), not
// ErrInvalid.
func validateActor(id, by string) error {
	if strings.TrimSpace(by) == "" || !utf8.ValidString(by) || utf8.RuneCountInString(by) > MaxActorLen ||
		strings.IndexFunc(by, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return fmt.Errorf("shipment %s: who acts must be 1 to %d printable characters, got %q", id, MaxActorLen, by)
	}
	return nil
}

func validateDetail(name, v string) []string {
	switch {
	case strings.TrimSpace(v) == "":
		return []string{name + " is required"}
	case !utf8.ValidString(v):
		return []string{name + " is not UTF-8"}
	case utf8.RuneCountInString(v) > MaxDetailLen:
		return []string{fmt.Sprintf("%s is longer than %d characters", name, MaxDetailLen)}
	case strings.IndexFunc(v, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
		return []string{name + " has a control character"}
	}
	return nil
}
