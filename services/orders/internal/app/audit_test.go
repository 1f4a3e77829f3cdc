package app

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/services/orders/internal/order"
)

func TestParseStuckAfter(t *testing.T) {
	def := DefaultStuckAfter()
	withPending := DefaultStuckAfter()
	withPending[order.Pending] = 10 * time.Minute
	withPending[order.Confirmed] = 72 * time.Hour
	for _, tt := range []struct {
		spec string
		want StuckAfter
		errs []string // each must be in the error
	}{
		{spec: "", want: def},
		{spec: "PENDING=5m,AWAITING_PAYMENT=1h,CONFIRMED=48h,SHIPPED=1h,CANCELLING=30m", want: def},
		{spec: " pending = 10m , CONFIRMED=72h,", want: withPending},
		{spec: "COMPLETED=1h,BOGUS=2m", errs: []string{`"COMPLETED" is not a status an order can be stuck in`, `"BOGUS" is not a status`}},
		{spec: "PENDING=soon,SHIPPED=0s,CANCELLING=-1m", errs: []string{`PENDING: "soon" is not a positive duration`, `SHIPPED: "0s"`, `CANCELLING: "-1m"`}},
		{spec: "PENDING=5m,PENDING=6m", errs: []string{"PENDING is given twice"}},
		{spec: "PENDING", errs: []string{`"PENDING" is not STATUS=duration`}},
	} {
		t.Run(tt.spec, func(t *testing.T) {
			got, err := ParseStuckAfter(tt.spec)
			if len(tt.errs) > 0 {
				if err == nil {
					t.Fatalf("ParseStuckAfter(%q) = %v, want an error", tt.spec, got)
				}
				for _, want := range tt.errs {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not say %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if got, want := def.String(), "PENDING=5m0s,AWAITING_PAYMENT=1h0m0s,CONFIRMED=48h0m0s,SHIPPED=1h0m0s,CANCELLING=30m0s"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func restored(t *testing.T, s order.Snapshot) *order.Order {
	t.Helper()
	s.ID, s.CustomerID, s.Currency, s.Version = "o-1", "cust-1", "JPY", 2
	o, err := order.Restore(s)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// isStuck is given orders that changed longer than the threshold ago; it decides the slip rule
// and says what each waits for.
func TestIsStuck(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const threshold = time.Hour
	since := now.Add(-3 * time.Hour)
	slip := func(expires time.Time) *order.PaymentInstructions {
		return &order.PaymentInstructions{Method: order.MethodKonbini, Store: "lawson", PaymentCode: "1", ExpiresAt: expires}
	}
	pending := func(kinds ...order.CompensationKind) []order.Compensation {
		var out []order.Compensation
		for _, k := range kinds {
			out = append(out, order.Compensation{Kind: k, State: order.CompensationPending})
		}
		return out
	}
	for _, tt := range []struct {
		name    string
		snap    order.Snapshot
		stuck   bool
		waiting string
		pending []order.CompensationKind
	}{
		{name: "pending", snap: order.Snapshot{Status: order.Pending}, stuck: true, waiting: WaitingInventory},
		{name: "awaiting, no slip", snap: order.Snapshot{Status: order.AwaitingPayment}, stuck: true, waiting: WaitingPayment},
		{name: "awaiting, slip open", snap: order.Snapshot{Status: order.AwaitingPayment, Instructions: slip(now.Add(48 * time.Hour))}},
		{name: "awaiting, slip expired less than the threshold ago", snap: order.Snapshot{Status: order.AwaitingPayment, Instructions: slip(now.Add(-threshold + time.Second))}},
		{name: "awaiting, slip expired the threshold ago", snap: order.Snapshot{Status: order.AwaitingPayment, Instructions: slip(now.Add(-threshold))}, stuck: true, waiting: WaitingPayment},
		{name: "confirmed", snap: order.Snapshot{Status: order.Confirmed}, stuck: true, waiting: WaitingShipment},
		{name: "shipped", snap: order.Snapshot{Status: order.Shipped}, stuck: true, waiting: WaitingCapture},
		{name: "cancelling, both pending", snap: order.Snapshot{Status: order.Cancelling, CancelReason: "customer_request",
			Compensations: pending(order.CompensateStock, order.CompensatePayment)},
			stuck: true, waiting: "stock release and payment void/refund", pending: []order.CompensationKind{order.CompensateStock, order.CompensatePayment}},
		{name: "cancelling, money back", snap: order.Snapshot{Status: order.Cancelling, CancelReason: "customer_request",
			Compensations: append(pending(order.CompensateStock), order.Compensation{Kind: order.CompensatePayment, State: order.CompensationDone, Outcome: order.PaymentVoided})},
			stuck: true, waiting: WaitingStock, pending: []order.CompensationKind{order.CompensateStock}},
		{name: "cancelling, stock released", snap: order.Snapshot{Status: order.Cancelling, CancelReason: "shipment_failed",
			Compensations: append([]order.Compensation{{Kind: order.CompensateStock, State: order.CompensationDone, Outcome: order.StockReleased}}, pending(order.CompensatePayment)...)},
			stuck: true, waiting: WaitingMoney, pending: []order.CompensationKind{order.CompensatePayment}},
		{name: "completed", snap: order.Snapshot{Status: order.Completed}},
		{name: "cancelled", snap: order.Snapshot{Status: order.Cancelled}},
		{name: "needs attention", snap: order.Snapshot{Status: order.NeedsAttention}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := restored(t, tt.snap)
			got, ok := isStuck(DatedOrder{Order: o, UpdatedAt: since}, threshold, now)
			if ok != tt.stuck {
				t.Fatalf("stuck = %v, want %v", ok, tt.stuck)
			}
			if !ok {
				return
			}
			want := StuckOrder{
				OrderID: "o-1", CustomerID: "cust-1", Status: tt.snap.Status, Since: since, For: 3 * time.Hour,
				WaitingFor: tt.waiting, Pending: tt.pending, CancelReason: tt.snap.CancelReason,
			}
			if tt.snap.Instructions != nil {
				want.SlipExpiresAt = tt.snap.Instructions.ExpiresAt
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// Every check against every kind of answer the peers give.
func TestChecks(t *testing.T) {
	res := func(s string) PeerReservation { return PeerReservation{Found: true, Status: s} }
	pay := func(statuses ...string) []PeerPayment {
		out := []PeerPayment{}
		for i, s := range statuses {
			out = append(out, PeerPayment{ID: "p" + string(rune('1'+i)), Status: s})
		}
		return out
	}
	for _, tt := range []struct {
		status order.Status
		obs    Observed
		want   []string
	}{
		{order.Confirmed, Observed{Reservation: res("HELD"), Payments: pay("AUTHORIZED")}, nil},
		{order.Confirmed, Observed{Reservation: res("HELD"), Payments: pay("CAPTURE_REQUESTED")}, nil},
		{order.Confirmed, Observed{Reservation: res("RELEASED"), Payments: pay("VOIDED")}, []string{
			"fulfillment: reservation RELEASED, want HELD", "gateway: payment p1 is VOIDED, want AUTHORIZED or CAPTURE_REQUESTED"}},
		{order.Confirmed, Observed{Payments: pay()}, []string{"fulfillment: no reservation, want HELD", "gateway: no payment, want one AUTHORIZED or CAPTURE_REQUESTED"}},
		{order.Confirmed, Observed{Reservation: res("HELD"), Payments: pay("AUTHORIZED", "FAILED")}, []string{
			"gateway: 2 payments (p1 AUTHORIZED, p2 FAILED), want one AUTHORIZED or CAPTURE_REQUESTED"}},
		{order.Shipped, Observed{Reservation: res("SHIPPED"), Payments: pay("CAPTURE_REQUESTED")}, nil},
		{order.Shipped, Observed{Reservation: res("SHIPPED"), Payments: pay("CAPTURED")}, nil},
		{order.Shipped, Observed{Reservation: res("HELD"), Payments: pay("AUTHORIZED")}, []string{
			"fulfillment: reservation HELD, want SHIPPED", "gateway: payment p1 is AUTHORIZED, want CAPTURE_REQUESTED or CAPTURED"}},
		{order.Completed, Observed{Reservation: res("SHIPPED"), Payments: pay("CAPTURED")}, nil},
		{order.Completed, Observed{Reservation: res("SHIPPED"), Payments: pay("CAPTURE_REQUESTED")}, []string{"gateway: payment p1 is CAPTURE_REQUESTED, want CAPTURED"}},
		{order.Cancelled, Observed{Payments: pay()}, nil},
		{order.Cancelled, Observed{Reservation: res("RELEASED"), Payments: pay("VOIDED")}, nil},
		{order.Cancelled, Observed{Reservation: res("REJECTED"), Payments: pay("FAILED")}, nil},
		{order.Cancelled, Observed{Reservation: res("RELEASED"), Payments: pay("EXPIRED")}, nil},
		{order.Cancelled, Observed{Reservation: res("RELEASED"), Payments: pay("REFUNDED")}, nil},
		{order.Cancelled, Observed{Reservation: res("HELD"), Payments: pay()}, []string{"fulfillment: reservation HELD, want no reservation or RELEASED or REJECTED"}},
		{order.Cancelled, Observed{Reservation: res("SHIPPED"), Payments: pay()}, []string{"fulfillment: reservation SHIPPED, want no reservation or RELEASED or REJECTED"}},
		{order.Cancelled, Observed{Reservation: res("RELEASED"), Payments: pay("AUTHORIZED")}, []string{"gateway: payment p1 is AUTHORIZED: money may be held, want none or FAILED, EXPIRED, VOIDED, REFUNDED"}},
		{order.Cancelled, Observed{Reservation: res("RELEASED"), Payments: pay("CAPTURED")}, []string{"gateway: payment p1 is CAPTURED: money may be held, want none or FAILED, EXPIRED, VOIDED, REFUNDED"}},
		{order.Cancelled, Observed{Reservation: res("RELEASED"), Payments: pay("PENDING")}, []string{"gateway: payment p1 is PENDING: money may be held, want none or FAILED, EXPIRED, VOIDED, REFUNDED"}},
		{order.Cancelled, Observed{Reservation: res("RELEASED"), Payments: pay("REFUND_PENDING")}, []string{
			"gateway: payment p1 is REFUND_PENDING: its refund is not paid out yet, the money is held, want none or FAILED, EXPIRED, VOIDED, REFUNDED"}},
		{order.Cancelled, Observed{Reservation: res("RELEASED"), Payments: pay("VOID_REQUESTED", "REFUND_REQUESTED")}, []string{
			"gateway: payment p1 is VOID_REQUESTED: money may be held, want none or FAILED, EXPIRED, VOIDED, REFUNDED",
			"gateway: payment p2 is REFUND_REQUESTED: money may be held, want none or FAILED, EXPIRED, VOIDED, REFUNDED"}},
		// A peer that did not answer is not judged; the other still is.
		{order.Cancelled, Observed{ReservationError: "down", Payments: pay("AUTHORIZED")}, []string{"gateway: payment p1 is AUTHORIZED: money may be held, want none or FAILED, EXPIRED, VOIDED, REFUNDED"}},
		{order.Confirmed, Observed{Reservation: res("RELEASED"), PaymentsError: "down"}, []string{"fulfillment: reservation RELEASED, want HELD"}},
		{order.Confirmed, Observed{ReservationError: "down", PaymentsError: "down"}, nil},
	} {
		t.Run(string(tt.status), func(t *testing.T) {
			if diff := cmp.Diff(tt.want, checks[tt.status].problems(tt.obs)); diff != "" {
				t.Errorf("%s %+v (-want +got):\n%s", tt.status, tt.obs, diff)
			}
		})
	}
	for _, s := range reconciled {
		if _, ok := checks[s]; !ok && s != order.NeedsAttention {
			t.Errorf("status %s is reconciled without a check", s)
		}
	}
}
