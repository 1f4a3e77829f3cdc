package order

// Status is the state of an order; its values are those of the CK_Orders_Status check.
type Status string

const (
	Pending         Status = "PENDING"
	AwaitingPayment Status = "AWAITING_PAYMENT"
	Confirmed       Status = "CONFIRMED"
	Shipped         Status = "SHIPPED"
	Completed       Status = "COMPLETED"
	Cancelling      Status = "CANCELLING"
	Cancelled       Status = "CANCELLED"
	NeedsAttention  Status = "NEEDS_ATTENTION"
)

// Statuses returns every status in lifecycle order.
func Statuses() []Status {
	return []Status{Pending, AwaitingPayment, Confirmed, Shipped, Completed, Cancelling, Cancelled, NeedsAttention}
}

// transitions lists the legal moves. Cancellation is possible only before SHIPPED: after that the
// goods are gone and only capture (or attention) remains. PENDING → CANCELLED is a rejection that
// needs no compensation. A compensation that fails for good (CANCELLING) and a capture that fails
// (SHIPPED) need an operator: NEEDS_ATTENTION, which no event leaves.
var transitions = map[Status][]Status{
	Pending:         {AwaitingPayment, Cancelling, Cancelled},
	AwaitingPayment: {Confirmed, Cancelling},
	Confirmed:       {Shipped, Cancelling},
	Shipped:         {Completed, NeedsAttention},
	Cancelling:      {Cancelled, NeedsAttention},
}

// Valid reports whether s is a known status.
func (s Status) Valid() bool {
	for _, v := range Statuses() {
		if s == v {
			return true
		}
	}
	return false
}

// CanTransitionTo reports whether an order may move from s to to.
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
