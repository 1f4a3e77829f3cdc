package order

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// legal is every allowed (from, to) pair, written out independently of the transitions table.
var legal = map[[2]Status]bool{
	{Pending, AwaitingPayment}:    true,
	{Pending, Cancelling}:         true,
	{Pending, Cancelled}:          true,
	{AwaitingPayment, Confirmed}:  true,
	{AwaitingPayment, Cancelling}: true,
	{Confirmed, Shipped}:          true,
	{Confirmed, Cancelling}:       true,
	{Shipped, Completed}:          true,
	{Shipped, NeedsAttention}:     true,
	{Cancelling, Cancelled}:       true,
	{Cancelling, NeedsAttention}:  true,
}

func TestCanTransitionToEveryPair(t *testing.T) {
	for _, from := range Statuses() {
		for _, to := range Statuses() {
			t.Run(fmt.Sprintf("%s→%s", from, to), func(t *testing.T) {
				if got, want := from.CanTransitionTo(to), legal[[2]Status{from, to}]; got != want {
					t.Errorf("CanTransitionTo = %v, want %v", got, want)
				}
			})
		}
	}
}

func at(t *testing.T, s Status) *Order {
	t.Helper()
	o, err := Restore(Snapshot{ID: "o1", CustomerID: "c1", Status: s, Currency: "JPY", Lines: []Line{{"A1", 2, 100}}, TotalMinor: 200, Version: 3})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestTransitions calls every transition method from every status: legal moves change the status,
// bump the version by one and emit one event; illegal ones change nothing and return a
// TransitionError.
func TestTransitions(t *testing.T) {
	ship := Shipment{ID: "s1", Carrier: "yamato", TrackingNumber: "T1"}
	methods := []struct {
		name      string
		to        Status
		event     string
		from      []Status // where the method is legal, if narrower than CanTransitionTo
		call      func(o *Order) error
		reason    string // the cancel reason after it
		attention string // the attention reason after it
	}{
		{name: "MarkAwaitingPayment", to: AwaitingPayment, event: EventAwaitingPayment, call: (*Order).MarkAwaitingPayment},
		{name: "Confirm", to: Confirmed, event: EventConfirmed, call: func(o *Order) error { return o.Confirm(200, "JPY") }},
		{name: "Ship", to: Shipped, event: EventShipped, call: func(o *Order) error { return o.Ship(ship) }},
		{name: "Complete", to: Completed, event: EventCompleted, call: (*Order).Complete},
		{name: "FailCapture", to: NeedsAttention, event: EventNeedsAttention, from: []Status{Shipped}, attention: "capture_failed_expired", call: func(o *Order) error { return o.FailCapture("expired") }},
		{name: "BeginCancel", to: Cancelling, event: EventCancelled, reason: "customer", call: func(o *Order) error { return o.BeginCancel("customer") }},
		// A restored CANCELLING order without recorded compensations waits for its stock only.
		{name: "ReleaseStock", to: Cancelled, event: EventCancelCompleted, from: []Status{Cancelling}, call: (*Order).ReleaseStock},
		{name: "FailCompensation", to: NeedsAttention, event: EventNeedsAttention, from: []Status{Cancelling}, attention: "stock_release_failed_already_shipped", call: func(o *Order) error { return o.FailCompensation(CompensateStock, "already_shipped") }},
		{name: "Reject", to: Cancelled, event: EventCancelled, reason: "out_of_stock", from: []Status{Pending}, call: func(o *Order) error { return o.Reject("out_of_stock") }},
		{name: "FailPayment", to: Cancelling, event: EventCancelled, reason: "payment_declined", from: []Status{AwaitingPayment}, call: func(o *Order) error { return o.FailPayment("declined") }},
		{name: "ExpirePayment", to: Cancelling, event: EventCancelled, reason: "payment_expired", from: []Status{AwaitingPayment, Confirmed}, call: func(o *Order) error {
			if o.Status() == Shipped {
				return &TransitionError{ID: o.ID(), From: Shipped, To: Cancelling} // tested in TestExpirePaymentAfterShipping
			}
			return o.ExpirePayment()
		}},
		{name: "FailShipment", to: Cancelling, event: EventCancelled, reason: "shipment_failed", from: []Status{Confirmed}, call: (*Order).FailShipment},
	}
	for _, m := range methods {
		for _, from := range Statuses() {
			t.Run(fmt.Sprintf("%s from %s", m.name, from), func(t *testing.T) {
				want := legal[[2]Status{from, m.to}]
				if m.from != nil {
					want = false
					for _, f := range m.from {
						want = want || f == from
					}
				}
				o := at(t, from)
				err := m.call(o)
				if !want {
					// A TransitionError, or a StateError for a fact about a compensation the
					// cancelling order does not wait for: both wrap ErrIllegalTransition.
					if !errors.Is(err, ErrIllegalTransition) {
						t.Fatalf("err = %v, want an illegal transition %s→%s", err, from, m.to)
					}
					if o.Status() != from || o.Version() != 3 || len(o.Emitted()) != 0 || o.CancelReason() != "" || o.Changed() {
						t.Errorf("illegal transition changed the order: %+v", o.Snapshot())
					}
					return
				}
				if err != nil {
					t.Fatalf("err = %v, want nil", err)
				}
				if o.Status() != m.to || o.Version() != 4 || o.CancelReason() != m.reason || o.AttentionReason() != m.attention || !o.Changed() {
					t.Errorf("after: status %s version %d reason %q attention %q, want %s 4 %q %q", o.Status(), o.Version(), o.CancelReason(), o.AttentionReason(), m.to, m.reason, m.attention)
				}
				if diff := cmp.Diff([]Emitted{{Type: m.event, Version: 4}}, o.Emitted()); diff != "" {
					t.Errorf("emitted (-want +got):\n%s", diff)
				}
			})
		}
	}
}

var card = Payment{Method: MethodCard, Detail: "pm_card_visa"}

func TestNew(t *testing.T) {
	o, err := New("o1", "c1", "JPY", []Line{{"A1", 2, 150}, {"B2", 1, 1000}}, Payment{Method: MethodKonbini, Detail: "lawson"}, Contact{Email: "ali@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	want := Snapshot{
		ID: "o1", CustomerID: "c1", Status: Pending, Currency: "JPY", Lines: []Line{{"A1", 2, 150}, {"B2", 1, 1000}}, TotalMinor: 1300, Version: 1,
		Payment: Payment{Method: MethodKonbini, Detail: "lawson"}, Email: "ali@example.com", Language: Japanese,
	}
	if diff := cmp.Diff(want, o.Snapshot()); diff != "" {
		t.Errorf("snapshot (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Emitted{{Type: EventCreated, Version: 1}}, o.Emitted()); diff != "" {
		t.Errorf("emitted (-want +got):\n%s", diff)
	}
}

func TestNewInvalid(t *testing.T) {
	many := make([]Line, MaxLines+1)
	for i := range many {
		many[i] = Line{fmt.Sprintf("S%d", i), 1, 1}
	}
	tests := []struct {
		name     string
		customer string
		currency string
		lines    []Line
		payment  Payment
		email    string
		want     string
		language Language
	}{
		{"no customer", " ", "JPY", []Line{{"A", 1, 1}}, card, "", "customer_id is required", ""},
		{"long customer", strings.Repeat("c", 129), "JPY", []Line{{"A", 1, 1}}, card, "", "customer_id is longer", ""},
		{"bad currency", "c", "YEN!", []Line{{"A", 1, 1}}, card, "", "currency", ""},
		{"no lines", "c", "JPY", nil, card, "", "1 to 50 lines, got 0", ""},
		{"too many lines", "c", "JPY", many, card, "", "1 to 50 lines, got 51", ""},
		{"quantity 0", "c", "JPY", []Line{{"A", 0, 1}}, card, "", "quantity 0 is not in 1..100", ""},
		{"quantity 101", "c", "JPY", []Line{{"A", 101, 1}}, card, "", "quantity 101 is not in 1..100", ""},
		{"duplicate sku", "c", "JPY", []Line{{"A", 1, 1}, {"A", 2, 1}}, card, "", `duplicate sku "A"`, ""},
		{"empty sku", "c", "JPY", []Line{{"", 1, 1}}, card, "", "sku is required", ""},
		{"negative price", "c", "JPY", []Line{{"A", 1, -1}}, card, "", "negative price", ""},
		{"no payment", "c", "JPY", []Line{{"A", 1, 1}}, Payment{}, "", "payment is required", ""},
		{"bad payment", "c", "JPY", []Line{{"A", 1, 1}}, Payment{Method: MethodKonbini, Detail: "7-11"}, "a@example.com", `payment.store "7-11" is not one of`, ""},
		{"unknown method", "c", "JPY", []Line{{"A", 1, 1}}, Payment{Method: "cash"}, "", `payment.method "cash"`, ""},
		{"slip without email", "c", "JPY", []Line{{"A", 1, 1}}, Payment{Method: MethodBankTransfer}, "", "email is required for payment method bank_transfer", ""},
		{"bad email", "c", "JPY", []Line{{"A", 1, 1}}, card, "ali", "email is not a valid e-mail address", ""},
		{"bad language", "c", "JPY", []Line{{"A", 1, 1}}, card, "", `language "fr" is not supported`, "fr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New("o1", tt.customer, tt.currency, tt.lines, tt.payment, Contact{Email: tt.email, Language: tt.language})
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want ErrInvalid containing %q", err, tt.want)
			}
		})
	}
}

func TestRestoreRejectsUnknownStatus(t *testing.T) {
	if _, err := Restore(Snapshot{ID: "o1", Status: "SHIPPING", Version: 1}); err == nil {
		t.Error("Restore accepted an unknown status")
	}
	if _, err := Restore(Snapshot{ID: "o1", Status: Pending, Version: 0}); err == nil {
		t.Error("Restore accepted version 0")
	}
}

func TestCancelReasonRequired(t *testing.T) {
	o := at(t, Pending)
	if err := o.Reject(""); !errors.Is(err, ErrInvalid) {
		t.Errorf("Reject(\"\") = %v, want ErrInvalid", err)
	}
	if o.Status() != Pending || o.Version() != 3 {
		t.Errorf("a rejected reason changed the order: %+v", o.Snapshot())
	}
}
