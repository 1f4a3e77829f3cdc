package payment

// Status is the state of a payment; its values are those of the CK_Payments_Status check.
type Status string

const (
	Requested        Status = "REQUESTED"         // the intent is recorded; the provider has not answered yet
	Pending          Status = "PENDING"           // a konbini or bank transfer slip is issued; the customer has not paid
	Authorized       Status = "AUTHORIZED"        // the money is held (card, wallet) or paid (slip)
	Failed           Status = "FAILED"            // the provider refused (declined, insufficient funds, ...)
	Expired          Status = "EXPIRED"           // the slip or the authorization lapsed
	CaptureRequested Status = "CAPTURE_REQUESTED" // the capture intent is recorded
	Captured         Status = "CAPTURED"          // the money is taken (the irreversible step)
	CaptureFailed    Status = "CAPTURE_FAILED"    // the capture failed permanently
	VoidRequested    Status = "VOID_REQUESTED"    // the void (or slip cancellation) intent is recorded
	Voided           Status = "VOIDED"            // the authorization is released, or the slip cancelled
	VoidFailed       Status = "VOID_FAILED"       // the void failed permanently: the money may still be held
	RefundRequested  Status = "REFUND_REQUESTED"  // the refund intent of taken money (captured, or a paid slip) is recorded
	RefundPending    Status = "REFUND_PENDING"    // the provider accepted the refund and has not paid it out yet (a slip's, by bank transfer)
	Refunded         Status = "REFUNDED"          // the taken money is given back
	RefundFailed     Status = "REFUND_FAILED"     // the refund failed permanently: the money is still taken
)

// Statuses returns every status in lifecycle order.
func Statuses() []Status {
	return []Status{Requested, Pending, Authorized, Failed, Expired, CaptureRequested, Captured, CaptureFailed,
		VoidRequested, Voided, VoidFailed, RefundRequested, RefundPending, Refunded, RefundFailed}
}

// transitions lists the legal moves by status; Payment adds the rules that depend on the method
// (see Payment.check). A *_REQUESTED state records an intent before the provider is called
// (docs/architecture.md, "Side effects outside Spanner"); the provider's answer or webhook moves
// the payment on. A slip may be paid (AUTHORIZED), lapse or be cancelled; an authorization may be
// captured, voided or lapse (card authorizations expire after 7 days); taken money can only be
// refunded. REQUESTED → VOID_REQUESTED is a payment the provider holds while the customer must
// act (3-D Secure) whose order is cancelled; VOID_REQUESTED → REFUND_REQUESTED a slip the customer
// paid before its cancellation reached the provider. A refund the provider accepted but pays out
// later (a slip's money goes back by bank transfer, days later, and may still be rejected) is
// REFUND_PENDING until the provider's webhook, or the sweep asking it, says how it ended.
var transitions = map[Status][]Status{
	Requested:        {Pending, Authorized, Failed, VoidRequested},
	Pending:          {Authorized, Failed, Expired, VoidRequested},
	Authorized:       {CaptureRequested, VoidRequested, RefundRequested, Expired},
	CaptureRequested: {Captured, CaptureFailed},
	Captured:         {RefundRequested},
	VoidRequested:    {Voided, VoidFailed, RefundRequested},
	RefundRequested:  {RefundPending, Refunded, RefundFailed},
	RefundPending:    {Refunded, RefundFailed},
}

// stage orders the statuses along the lifecycle, for telling a late provider callback from a new
// one: a callback for a stage the payment has passed is ignored, not applied.
var stage = map[Status]int{
	Requested: 0, Pending: 1, Authorized: 2, CaptureRequested: 3, VoidRequested: 3,
	Failed: 4, Expired: 4, Captured: 4, CaptureFailed: 4, Voided: 4, VoidFailed: 4,
	RefundRequested: 5, RefundPending: 6, Refunded: 7, RefundFailed: 7,
}

// Valid reports whether s is a known status.
func (s Status) Valid() bool {
	_, ok := stage[s]
	return ok
}

// CanTransitionTo reports whether a payment may move from s to to, whatever its method.
func (s Status) CanTransitionTo(to Status) bool {
	for _, t := range transitions[s] {
		if t == to {
			return true
		}
	}
	return false
}

// Terminal reports whether no transition leaves s.
func (s Status) Terminal() bool { return len(transitions[s]) == 0 }

// InFlight reports whether s records an operation the provider has been asked for (capture,
// void, refund) and not answered yet: the operation's intent, not a callback, decides what
// comes next. REFUND_PENDING is not in flight: the provider has answered (accepted), and its
// callback or a lookup decides how the refund ends.
func (s Status) InFlight() bool {
	return s == CaptureRequested || s == VoidRequested || s == RefundRequested
}

// Passed reports whether a payment in s has already reached or passed the stage of to, so a
// provider callback moving it to to is late (or a duplicate): ignore it.
func (s Status) Passed(to Status) bool { return stage[s] >= stage[to] }
