package shipment

// Status is the state of a shipment; its values are those of the CK_Shipments_Status check.
type Status string

const (
	Pending   Status = "PENDING"
	Shipped   Status = "SHIPPED"
	Cancelled Status = "CANCELLED"
	Failed    Status = "FAILED"
)

// Statuses returns every status, PENDING first.
func Statuses() []Status { return []Status{Pending, Shipped, Cancelled, Failed} }

// transitions lists the legal moves: a shipment leaves PENDING once, for good.
var transitions = map[Status][]Status{
	Pending: {Shipped, Cancelled, Failed},
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

// CanTransitionTo reports whether a shipment may move from s to to.
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
