package order

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Language is the customer's language for what the shop sends (e-mails); its values are those of
// the CK_Orders_Language check.
type Language string

const (
	Japanese Language = "ja" // the shop's default
	English  Language = "en"
)

// ParseLanguage reads the request's language: "" is Japanese (the default); anything but "ja" or
// "en" is a problem.
func ParseLanguage(s string) (Language, []string) {
	switch l := Language(strings.ToLower(s)); l {
	case "":
		return Japanese, nil
	case Japanese, English:
		return l, nil
	}
	return "", []string{fmt.Sprintf("language %q is not supported (want ja or en)", s)}
}

// Shipment is the parcel an order left the warehouse in (shipment.shipped).
type Shipment struct {
	ID             string `json:"shipment_id"`
	Carrier        string `json:"carrier"`
	TrackingNumber string `json:"tracking_number"`
}

// CompensationKind is what a cancelling order must undo.
type CompensationKind string

const (
	CompensateStock   CompensationKind = "stock"   // the reservation, released by fulfillment
	CompensatePayment CompensationKind = "payment" // the money, voided or refunded by the gateway
)

// CompensationState is where one compensation stands.
type CompensationState string

const (
	CompensationPending CompensationState = "pending"
	CompensationDone    CompensationState = "done"
	CompensationFailed  CompensationState = "failed"
)

// Compensation is one step a cancellation waits for, and how it ended (Outcome: "released",
// "voided", "refunded", "failed", "expired" when done; the reason when failed).
type Compensation struct {
	Kind    CompensationKind  `json:"kind"`
	State   CompensationState `json:"state"`
	Outcome string            `json:"outcome,omitempty"`
}

// Outcomes of a payment compensation that leave no money held.
const (
	PaymentVoided   = "voided"
	PaymentRefunded = "refunded"
	PaymentFailed   = "failed"
	PaymentExpired  = "expired"
	StockReleased   = "released"
)

// Cancel reasons the saga itself gives (a payment failure's is "payment_" + the gateway's reason).
const (
	ReasonCustomerRequest = "customer_request"
	ReasonShipmentFailed  = "shipment_failed"
)

// Compensations returns what the order's cancellation waits for and how each ended; nil for an
// order that was never cancelling.
func (o *Order) Compensations() []Compensation {
	return append([]Compensation(nil), o.compensations...)
}

// Shipment returns the shipment the order left in, nil before it shipped.
func (o *Order) Shipment() *Shipment {
	if o.shipment == nil {
		return nil
	}
	s := *o.shipment
	return &s
}

// AttentionReason says why the order is NEEDS_ATTENTION ("" otherwise).
func (o *Order) AttentionReason() string { return o.attentionReason }

// Language returns the customer's language.
func (o *Order) Language() Language { return o.language }

// Cancel is the customer's cancellation: allowed before the order ships (PENDING,
// AWAITING_PAYMENT, CONFIRMED → CANCELLING, order.cancelled). An order that is already cancelling
// or cancelled is left as it is (Cancel reports false): the customer asked for what is happening.
// From SHIPPED on it is a TransitionError (the goods are gone).
func (o *Order) Cancel() (bool, error) {
	switch o.status {
	case Cancelling, Cancelled:
		return false, nil
	case Pending, AwaitingPayment, Confirmed:
		return true, o.BeginCancel(ReasonCustomerRequest)
	}
	return false, &TransitionError{ID: o.id, From: o.status, To: Cancelling}
}

// BeginCancel starts a cancellation that needs compensation: any state before SHIPPED →
// CANCELLING (order.cancelled). The order then waits for its stock to be released and, if its
// payment was requested (AWAITING_PAYMENT, CONFIRMED), for the money to be voided or refunded.
func (o *Order) BeginCancel(reason string) error {
	comps := []Compensation{{Kind: CompensateStock, State: CompensationPending}}
	if o.status == AwaitingPayment || o.status == Confirmed {
		comps = append(comps, Compensation{Kind: CompensatePayment, State: CompensationPending})
	}
	return o.beginCancel(reason, comps)
}

func (o *Order) beginCancel(reason string, comps []Compensation) error {
	if err := o.cancel(Cancelling, reason); err != nil {
		return err
	}
	o.compensations = comps
	return nil
}

// FailPayment records that the payment failed before it was authorized, for the gateway's reason
// ("declined", "insufficient_funds", ...). An order awaiting payment is cancelled with the reason
// "payment_" + reason (order.cancelled, so fulfillment releases the stock); nothing is held, so
// only the stock is waited for. A cancelling order's payment compensation is done: the money was
// never taken.
func (o *Order) FailPayment(reason string) error {
	if reason == "" {
		reason = PaymentFailed
	}
	if o.status == Cancelling {
		return o.settle(CompensatePayment, PaymentFailed)
	}
	if o.status != AwaitingPayment {
		return &TransitionError{ID: o.id, From: o.status, To: Cancelling}
	}
	return o.beginCancel(truncate("payment_"+reason, MaxReasonLen), []Compensation{
		{Kind: CompensateStock, State: CompensationPending},
		{Kind: CompensatePayment, State: CompensationDone, Outcome: PaymentFailed},
	})
}

// ExpirePayment records that the payment expired: a slip not paid in time (AWAITING_PAYMENT), or
// an authorization that lapsed before the order shipped (CONFIRMED: the money is captured only
// after shipping, so this order can no longer be paid for). Either way → CANCELLING with the
// reason "payment_expired", waiting for the stock only. A cancelling order's payment compensation
// is done. A shipped order whose authorization lapsed cannot be captured: NEEDS_ATTENTION.
func (o *Order) ExpirePayment() error {
	switch o.status {
	case AwaitingPayment, Confirmed:
		return o.beginCancel("payment_expired", []Compensation{
			{Kind: CompensateStock, State: CompensationPending},
			{Kind: CompensatePayment, State: CompensationDone, Outcome: PaymentExpired},
		})
	case Cancelling:
		return o.settle(CompensatePayment, PaymentExpired)
	case Shipped:
		return o.FailCapture("expired")
	}
	return &TransitionError{ID: o.id, From: o.status, To: Cancelling}
}

// ReleasePayment records that the gateway voided or refunded the money of a cancelling order
// (outcome PaymentVoided or PaymentRefunded).
func (o *Order) ReleasePayment(outcome string) error { return o.settle(CompensatePayment, outcome) }

// ReleaseStock records that fulfillment released the reservation of a cancelling order.
func (o *Order) ReleaseStock() error { return o.settle(CompensateStock, StockReleased) }

// FailCompensation records that a compensation failed for good (the stock had shipped, the void
// or refund was refused): CANCELLING → NEEDS_ATTENTION (order.needs_attention) with the reason
// kind + "_release_failed_" + reason, for an operator.
func (o *Order) FailCompensation(kind CompensationKind, reason string) error {
	if o.status != Cancelling {
		return &TransitionError{ID: o.id, From: o.status, To: NeedsAttention}
	}
	i := o.compensation(kind)
	if i < 0 {
		return &StateError{ID: o.id, Status: o.status, Action: fmt.Sprintf("fail the %s compensation it does not wait for", kind)}
	}
	if reason == "" {
		reason = "failed"
	}
	if err := o.attention(truncate(string(kind)+"_release_failed_"+reason, MaxReasonLen)); err != nil {
		return err
	}
	o.compensations[i].State, o.compensations[i].Outcome = CompensationFailed, reason
	return nil
}

// Ship records the shipment: CONFIRMED → SHIPPED (order.shipped, which carries it).
func (o *Order) Ship(s Shipment) error {
	var problems []string
	if s.ID == "" || s.Carrier == "" || s.TrackingNumber == "" {
		problems = append(problems, "a shipment needs an id, a carrier and a tracking number")
	}
	for _, v := range []string{s.Carrier, s.TrackingNumber} {
		if utf8.RuneCountInString(v) > 64 {
			problems = append(problems, fmt.Sprintf("shipment %s: %q is longer than 64 characters", s.ID, v))
		}
	}
	if !o.status.CanTransitionTo(Shipped) {
		return &TransitionError{ID: o.id, From: o.status, To: Shipped}
	}
	if len(problems) > 0 {
		return &ValidationError{Problems: problems}
	}
	if err := o.transition(Shipped, EventShipped); err != nil {
		return err
	}
	o.shipment = &s
	return nil
}

// FailShipment records that the shipment could not be made (shipment.failed): CONFIRMED →
// CANCELLING with the reason "shipment_failed", waiting for the stock and the money.
func (o *Order) FailShipment() error {
	if o.status != Confirmed {
		return &TransitionError{ID: o.id, From: o.status, To: Cancelling}
	}
	return o.BeginCancel(ReasonShipmentFailed)
}

// Complete records the capture: SHIPPED → COMPLETED.
func (o *Order) Complete() error { return o.transition(Completed, EventCompleted) }

// FailCapture records that the money of a shipped order could not be captured (the gateway's
// reason: "expired", "declined", ...): SHIPPED → NEEDS_ATTENTION with "capture_failed_" + reason.
func (o *Order) FailCapture(reason string) error {
	if o.status != Shipped {
		return &TransitionError{ID: o.id, From: o.status, To: NeedsAttention}
	}
	if reason == "" {
		reason = "failed"
	}
	return o.attention(truncate("capture_failed_"+reason, MaxReasonLen))
}

func (o *Order) attention(reason string) error {
	if err := o.transition(NeedsAttention, EventNeedsAttention); err != nil {
		return err
	}
	o.attentionReason = reason
	return nil
}

// settle marks the pending compensation kind done with outcome; when none is pending any more the
// order is CANCELLED (order.cancellation_completed). An order that is not cancelling, or does not
// wait for kind, has moved on (a StateError or TransitionError, which the app layer only notes).
func (o *Order) settle(kind CompensationKind, outcome string) error {
	if o.status != Cancelling {
		return &TransitionError{ID: o.id, From: o.status, To: Cancelled}
	}
	i := o.compensation(kind)
	if i < 0 || o.compensations[i].State != CompensationPending {
		return &StateError{ID: o.id, Status: o.status, Action: fmt.Sprintf("settle a %s compensation it does not wait for", kind)}
	}
	o.compensations[i].State, o.compensations[i].Outcome = CompensationDone, outcome
	o.changed = true
	for _, c := range o.compensations {
		if c.State != CompensationDone {
			return nil
		}
	}
	return o.transition(Cancelled, EventCancelCompleted)
}

func (o *Order) compensation(kind CompensationKind) int {
	for i, c := range o.compensations {
		if c.Kind == kind {
			return i
		}
	}
	return -1
}
