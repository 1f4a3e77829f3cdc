package order

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fact is one thing the other services (or the customer) tell an order.
type fact struct {
	name string
	call func(o *Order) error
}

var (
	stockReleased  = fact{"inventory.released", (*Order).ReleaseStock}
	paymentVoided  = fact{"payment.voided", func(o *Order) error { return o.ReleasePayment(PaymentVoided) }}
	paymentRefund  = fact{"payment.refunded", func(o *Order) error { return o.ReleasePayment(PaymentRefunded) }}
	paymentFailed  = fact{"payment.failed", func(o *Order) error { return o.FailPayment("declined") }}
	paymentExpired = fact{"payment.expired", (*Order).ExpirePayment}
	voidFailed     = fact{"payment.void_failed", func(o *Order) error { return o.FailCompensation(CompensatePayment, "void_failed") }}
	releaseFailed  = fact{"inventory.release_failed", func(o *Order) error { return o.FailCompensation(CompensateStock, "already_shipped") }}
	customerCancel = fact{"cancel", func(o *Order) error { _, err := o.Cancel(); return err }}
	shipmentFailed = fact{"shipment.failed", (*Order).FailShipment}
)

// TestCompensations plays the facts of a cancellation in the orders they can arrive in and checks
// what the order waits for, where it ends and which events it emitted.
func TestCompensations(t *testing.T) {
	tests := []struct {
		name      string
		from      Status
		facts     []fact
		status    Status
		comps     []Compensation
		events    []string
		reason    string
		attention string
	}{
		{
			name: "customer cancel before reservation: stock only", from: Pending,
			facts:  []fact{customerCancel, stockReleased},
			status: Cancelled, reason: ReasonCustomerRequest,
			comps:  []Compensation{{CompensateStock, CompensationDone, StockReleased}},
			events: []string{EventCancelled, EventCancelCompleted},
		},
		{
			name: "customer cancel of a confirmed order: stock then payment", from: Confirmed,
			facts:  []fact{customerCancel, stockReleased, paymentVoided},
			status: Cancelled, reason: ReasonCustomerRequest,
			comps:  []Compensation{{CompensateStock, CompensationDone, StockReleased}, {CompensatePayment, CompensationDone, PaymentVoided}},
			events: []string{EventCancelled, EventCancelCompleted},
		},
		{
			name: "payment first, then stock", from: AwaitingPayment,
			facts:  []fact{customerCancel, paymentVoided, stockReleased},
			status: Cancelled, reason: ReasonCustomerRequest,
			comps:  []Compensation{{CompensateStock, CompensationDone, StockReleased}, {CompensatePayment, CompensationDone, PaymentVoided}},
			events: []string{EventCancelled, EventCancelCompleted},
		},
		{
			name: "cancel while the authorization fails: no money was held", from: AwaitingPayment,
			facts:  []fact{customerCancel, paymentFailed, stockReleased},
			status: Cancelled, reason: ReasonCustomerRequest,
			comps:  []Compensation{{CompensateStock, CompensationDone, StockReleased}, {CompensatePayment, CompensationDone, PaymentFailed}},
			events: []string{EventCancelled, EventCancelCompleted},
		},
		{
			name: "payment failed: only the stock is waited for", from: AwaitingPayment,
			facts:  []fact{paymentFailed, stockReleased},
			status: Cancelled, reason: "payment_declined",
			comps:  []Compensation{{CompensateStock, CompensationDone, StockReleased}, {CompensatePayment, CompensationDone, PaymentFailed}},
			events: []string{EventCancelled, EventCancelCompleted},
		},
		{
			name: "authorization lapsed before shipping", from: Confirmed,
			facts:  []fact{paymentExpired, stockReleased},
			status: Cancelled, reason: "payment_expired",
			comps:  []Compensation{{CompensateStock, CompensationDone, StockReleased}, {CompensatePayment, CompensationDone, PaymentExpired}},
			events: []string{EventCancelled, EventCancelCompleted},
		},
		{
			name: "shipment failed: refund and release", from: Confirmed,
			facts:  []fact{shipmentFailed, paymentRefund, stockReleased},
			status: Cancelled, reason: ReasonShipmentFailed,
			comps:  []Compensation{{CompensateStock, CompensationDone, StockReleased}, {CompensatePayment, CompensationDone, PaymentRefunded}},
			events: []string{EventCancelled, EventCancelCompleted},
		},
		{
			name: "the void fails for good", from: Confirmed,
			facts:  []fact{customerCancel, stockReleased, voidFailed},
			status: NeedsAttention, reason: ReasonCustomerRequest, attention: "payment_release_failed_void_failed",
			comps:  []Compensation{{CompensateStock, CompensationDone, StockReleased}, {CompensatePayment, CompensationFailed, "void_failed"}},
			events: []string{EventCancelled, EventNeedsAttention},
		},
		{
			name: "the stock had shipped", from: Confirmed,
			facts:  []fact{customerCancel, releaseFailed},
			status: NeedsAttention, reason: ReasonCustomerRequest, attention: "stock_release_failed_already_shipped",
			comps:  []Compensation{{CompensateStock, CompensationFailed, "already_shipped"}, {CompensatePayment, CompensationPending, ""}},
			events: []string{EventCancelled, EventNeedsAttention},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := at(t, tt.from)
			for _, f := range tt.facts {
				if err := f.call(o); err != nil {
					t.Fatalf("%s: %v", f.name, err)
				}
			}
			if o.Status() != tt.status || o.CancelReason() != tt.reason || o.AttentionReason() != tt.attention {
				t.Errorf("status %s reason %q attention %q, want %s %q %q", o.Status(), o.CancelReason(), o.AttentionReason(), tt.status, tt.reason, tt.attention)
			}
			if diff := cmp.Diff(tt.comps, o.Compensations()); diff != "" {
				t.Errorf("compensations (-want +got):\n%s", diff)
			}
			var events []string
			for i, e := range o.Emitted() {
				events = append(events, e.Type)
				if e.Version != int64(4+i) {
					t.Errorf("event %s has version %d, want %d", e.Type, e.Version, 4+i)
				}
			}
			if diff := cmp.Diff(tt.events, events); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSettlingOneOfTwo: the first compensation done changes the order without a transition.
func TestSettlingOneOfTwo(t *testing.T) {
	o := at(t, Confirmed)
	if err := o.BeginCancel(ReasonCustomerRequest); err != nil {
		t.Fatal(err)
	}
	o, _ = Restore(o.Snapshot()) // as the next event's transaction loads it
	if err := o.ReleaseStock(); err != nil {
		t.Fatal(err)
	}
	if o.Status() != Cancelling || o.Version() != 4 || len(o.Emitted()) != 0 || !o.Changed() {
		t.Errorf("after one of two: status %s version %d emitted %v changed %v", o.Status(), o.Version(), o.Emitted(), o.Changed())
	}
	// The same fact again (a second inventory.released) has nothing left to settle.
	if err := o.ReleaseStock(); !errors.Is(err, ErrIllegalTransition) {
		t.Errorf("second ReleaseStock = %v, want ErrIllegalTransition", err)
	}
}

func TestCustomerCancel(t *testing.T) {
	for _, st := range Statuses() {
		t.Run(string(st), func(t *testing.T) {
			o := at(t, st)
			changed, err := o.Cancel()
			switch st {
			case Pending, AwaitingPayment, Confirmed:
				if err != nil || !changed || o.Status() != Cancelling || o.CancelReason() != ReasonCustomerRequest {
					t.Errorf("Cancel = %v, %v; status %s reason %q", changed, err, o.Status(), o.CancelReason())
				}
			case Cancelling, Cancelled:
				if err != nil || changed || o.Status() != st || o.Changed() {
					t.Errorf("Cancel of a %s order = %v, %v; want no change", st, changed, err)
				}
			default:
				var te *TransitionError
				if !errors.As(err, &te) || changed || o.Status() != st {
					t.Errorf("Cancel of a %s order = %v, %v; want a TransitionError", st, changed, err)
				}
			}
		})
	}
}

func TestExpirePaymentAfterShipping(t *testing.T) {
	o := at(t, Shipped)
	if err := o.ExpirePayment(); err != nil {
		t.Fatal(err)
	}
	if o.Status() != NeedsAttention || o.AttentionReason() != "capture_failed_expired" {
		t.Errorf("status %s attention %q", o.Status(), o.AttentionReason())
	}
}

func TestShipRecordsTheShipment(t *testing.T) {
	o := at(t, Confirmed)
	if err := o.Ship(Shipment{ID: "s1", Carrier: "yamato"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Ship without a tracking number = %v, want ErrInvalid", err)
	}
	s := Shipment{ID: "s1", Carrier: "yamato", TrackingNumber: "1234"}
	if err := o.Ship(s); err != nil {
		t.Fatal(err)
	}
	if got := o.Shipment(); got == nil || *got != s {
		t.Errorf("Shipment() = %+v, want %+v", got, s)
	}
	back, err := Restore(o.Snapshot())
	if err != nil || *back.Shipment() != s {
		t.Errorf("restored shipment = %+v, %v", back.Shipment(), err)
	}
}

func TestLanguage(t *testing.T) {
	for in, want := range map[string]Language{"": Japanese, "ja": Japanese, "EN": English} {
		if got, problems := ParseLanguage(in); got != want || problems != nil {
			t.Errorf("ParseLanguage(%q) = %q, %v; want %q", in, got, problems, want)
		}
	}
	if _, err := Restore(Snapshot{ID: "o1", Status: Pending, Version: 1, Language: "fr"}); err == nil {
		t.Error("Restore accepted an unknown language")
	}
}
