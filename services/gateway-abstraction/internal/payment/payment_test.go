package payment

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var slipExpiry = time.Date(2026, 12, 8, 23, 59, 0, 0, time.UTC)

// moves are the aggregate's transitions by target status, each applied with valid arguments.
var moves = map[Status]func(*Payment) error{
	Authorized:       func(p *Payment) error { return p.Authorize("pi_1") },
	Pending:          func(p *Payment) error { return p.Pend("pi_1", slipExpiry, nil) },
	Failed:           func(p *Payment) error { return p.Fail(ReasonDeclined) },
	Expired:          func(p *Payment) error { return p.Expire() },
	CaptureRequested: func(p *Payment) error { return p.RequestCapture() },
	Captured:         func(p *Payment) error { return p.Capture() },
	CaptureFailed:    func(p *Payment) error { return p.FailCapture(ReasonProviderUnavailable) },
	VoidRequested:    func(p *Payment) error { return p.RequestVoid() },
	Voided:           func(p *Payment) error { return p.Void() },
	VoidFailed:       func(p *Payment) error { return p.FailVoid(ReasonInvalidRequest) },
	RefundRequested:  func(p *Payment) error { return p.RequestRefund() },
	RefundPending:    func(p *Payment) error { return p.PendRefund() },
	Refunded:         func(p *Payment) error { return p.Refund() },
	RefundFailed:     func(p *Payment) error { return p.FailRefund(ReasonProviderUnavailable) },
}

// events are the events of the moves that reach a provider's answer (the others record intents).
var events = map[Status]string{
	Authorized: EventAuthorized, Pending: EventPending, Failed: EventFailed, Expired: EventExpired,
	Captured: EventCaptured, CaptureFailed: EventCaptureFailed, Voided: EventVoided, VoidFailed: EventVoidFailed,
	RefundPending: EventRefundPending, Refunded: EventRefunded, RefundFailed: EventRefundFailed,
}

// pair is a from/to pair for one method.
type pair struct {
	from, to Status
	method   Method
}

// methodRules are the pairs the status table allows that the method forbids (the package doc): a
// card or wallet hold is voided, never refunded before its capture; a paid slip has no hold to
// release, so it is refunded, never voided.
var methodRules = map[pair]bool{
	{Authorized, RefundRequested, Card}:       true,
	{Authorized, RefundRequested, Wallet}:     true,
	{VoidRequested, RefundRequested, Card}:    true,
	{VoidRequested, RefundRequested, Wallet}:  true,
	{Authorized, VoidRequested, Konbini}:      true,
	{Authorized, VoidRequested, BankTransfer}: true,
}

// Every from/to pair, for every method: a legal move changes the status (and emits one event
// unless it records an intent); an illegal one is a TransitionError and changes nothing. A card or
// wallet never pends (ErrInvalid: it has no slip).
func TestEveryTransition(t *testing.T) {
	for _, method := range Methods() {
		for _, from := range Statuses() {
			for _, to := range Statuses() {
				move, ok := moves[to]
				if !ok {
					continue // REQUESTED is only ever the start
				}
				t.Run(string(method)+"/"+string(from)+"→"+string(to), func(t *testing.T) {
					p, err := Restore(Snapshot{ID: "p-1", OrderID: "o-1", Method: method, AmountMinor: 1200, Currency: "JPY",
						Status: from, ProviderPaymentID: "pi_1", Version: 3})
					if err != nil {
						t.Fatal(err)
					}
					err = move(p)
					switch {
					case to == Pending && !method.UsesSlip():
						if !errors.Is(err, ErrInvalid) || p.Status() != from || len(p.Emitted()) != 0 {
							t.Errorf("a %s pending: err %v, status %s; want ErrInvalid and nothing changed", method, err, p.Status())
						}
						return
					case !from.CanTransitionTo(to) || methodRules[pair{from, to, method}]:
						var te *TransitionError
						if !errors.As(err, &te) || !errors.Is(err, ErrIllegalTransition) || p.Status() != from || len(p.Emitted()) != 0 {
							t.Errorf("illegal move: err %v, status %s, emitted %v; want a TransitionError and nothing changed", err, p.Status(), p.Emitted())
						}
						return
					}
					if err != nil || p.Status() != to {
						t.Fatalf("legal move: err %v, status %s", err, p.Status())
					}
					var want []Emitted
					wantVersion := int64(3)
					if e, ok := events[to]; ok {
						want, wantVersion = []Emitted{{Type: e, Version: 4, Status: to}}, 4
					}
					if diff := cmp.Diff(want, p.Emitted()); diff != "" || p.Version() != wantVersion {
						t.Errorf("emitted (-want +got):\n%s version %d, want %d", diff, p.Version(), wantVersion)
					}
				})
			}
		}
	}
}

// A failure of a capture, void or refund keeps its reason, and needs one.
func TestOperationFailuresKeepTheirReason(t *testing.T) {
	for _, tc := range []struct {
		from Status
		fail func(*Payment, Reason) error
	}{
		{CaptureRequested, (*Payment).FailCapture},
		{VoidRequested, (*Payment).FailVoid},
		{RefundRequested, (*Payment).FailRefund},
		{RefundPending, (*Payment).FailRefund},
	} {
		t.Run(string(tc.from), func(t *testing.T) {
			p, err := Restore(Snapshot{ID: "p-1", OrderID: "o-1", Method: Card, AmountMinor: 1200, Currency: "JPY", Status: tc.from, Version: 2})
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.fail(p, ""); !errors.Is(err, ErrInvalid) || p.Status() != tc.from {
				t.Errorf("a failure without a reason = %v (status %s), want ErrInvalid and nothing changed", err, p.Status())
			}
			if err := tc.fail(p, ReasonExpired); err != nil || p.FailureReason() != ReasonExpired {
				t.Errorf("failure = %v, reason %q; want the reason kept", err, p.FailureReason())
			}
		})
	}
}

// REQUESTED → VOID_REQUESTED needs a payment the provider knows (the customer must act): before
// the provider's first answer there is nothing to void, and the cancellation is recorded instead.
func TestCancelWhileAuthorizing(t *testing.T) {
	p, err := New("p-1", "o-1", "ali", Card, 2400, "JPY")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.RequestVoid(); !errors.Is(err, ErrIllegalTransition) {
		t.Errorf("a void before the provider knows the payment = %v, want ErrIllegalTransition", err)
	}
	for range 2 { // recording it again changes nothing
		if err := p.RequestCancel(); err != nil || !p.CancelRequested() || p.Status() != Requested || len(p.Emitted()) != 0 {
			t.Fatalf("RequestCancel = %v: cancel requested %v, %s, emitted %v", err, p.CancelRequested(), p.Status(), p.Emitted())
		}
	}
	got, err := Restore(p.Snapshot())
	if err != nil || !got.CancelRequested() {
		t.Errorf("restored: %v, cancel requested %v; want it kept", err, got.CancelRequested())
	}
	if err := p.Authorize("pi_1"); err != nil {
		t.Fatal(err)
	}
	if err := p.RequestCancel(); !errors.Is(err, ErrIllegalTransition) {
		t.Errorf("RequestCancel of an authorized payment = %v, want ErrIllegalTransition", err)
	}
	if err := p.RequestVoid(); err != nil || p.Status() != VoidRequested {
		t.Errorf("RequestVoid after the authorization = %v (%s)", err, p.Status())
	}

	awaiting, _ := New("p-2", "o-2", "ali", Card, 2400, "JPY")
	if err := awaiting.AwaitCustomer("pi_2"); err != nil {
		t.Fatal(err)
	}
	if err := awaiting.RequestVoid(); err != nil || awaiting.Status() != VoidRequested || len(awaiting.Emitted()) != 0 {
		t.Errorf("void of a payment awaiting 3-D Secure = %v (%s, emitted %v)", err, awaiting.Status(), awaiting.Emitted())
	}
}

func TestCardPaymentLifecycle(t *testing.T) {
	p, err := New("p-1", "o-1", "ali", Card, 2400, "JPY")
	if err != nil {
		t.Fatal(err)
	}
	if p.Status() != Requested || p.Version() != 0 || p.Method().Provider() != ProviderStripe {
		t.Fatalf("new payment: %+v", p.Snapshot())
	}
	if err := p.Pend("pi_1", slipExpiry, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("a card payment pending a slip = %v, want ErrInvalid", err)
	}
	if err := p.Authorize("pi_1"); err != nil {
		t.Fatal(err)
	}
	if p.Late(Captured) || !p.Late(Authorized) {
		t.Errorf("authorized: Late(CAPTURED) %v, Late(AUTHORIZED) %v; want false, true (a duplicate)", p.Late(Captured), p.Late(Authorized))
	}
	for _, step := range []func() error{p.RequestCapture, p.Capture} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	want := []Emitted{{EventAuthorized, 1, Authorized}, {EventCaptured, 2, Captured}}
	if diff := cmp.Diff(want, p.Emitted()); diff != "" {
		t.Errorf("emitted (-want +got):\n%s", diff)
	}
	// A late or duplicate authorization webhook after the capture is recognised as such.
	if !p.Late(Authorized) {
		t.Error("an authorization callback after the capture is not recognised as late")
	}
	if err := p.Authorize("pi_2"); !errors.Is(err, ErrInvalid) {
		t.Errorf("another provider id = %v, want ErrInvalid", err)
	}
}

func TestSlipPaymentLifecycle(t *testing.T) {
	p, err := New("p-2", "o-2", "ali", Konbini, 1200, "JPY")
	if err != nil {
		t.Fatal(err)
	}
	if p.Method().Provider() != ProviderKomoju || !p.Method().UsesSlip() {
		t.Fatalf("konbini: provider %s, slip %v", p.Method().Provider(), p.Method().UsesSlip())
	}
	if err := p.Pend("kmj_1", slipExpiry, json.RawMessage(`{"store":"lawson"}`)); err != nil || !p.ExpiresAt().Equal(slipExpiry) {
		t.Fatalf("pend: %v, expires %v", err, p.ExpiresAt())
	}
	if !p.Late(Pending) || p.Late(Authorized) {
		t.Errorf("pending slip: Late(PENDING) %v, Late(AUTHORIZED) %v; want true, false", p.Late(Pending), p.Late(Authorized))
	}
	if err := p.Expire(); err != nil {
		t.Fatal(err)
	}
	want := []Emitted{{EventPending, 1, Pending}, {EventExpired, 2, Expired}}
	if diff := cmp.Diff(want, p.Emitted()); diff != "" {
		t.Errorf("emitted (-want +got):\n%s", diff)
	}
	got, err := Restore(p.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p.Snapshot(), got.Snapshot()); diff != "" {
		t.Errorf("Restore(Snapshot()) (-want +got):\n%s", diff)
	}
}

// A slip's refund the provider accepts and pays out later: REFUND_PENDING with its event, the
// money not back yet; then paid out (REFUNDED) or rejected (REFUND_FAILED). A callback that
// repeats the acceptance after the payout is late; one that pays out a pending refund is not.
func TestPendingRefund(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(*Payment) error
		want Status
		last string
	}{
		{"paid out", (*Payment).Refund, Refunded, EventRefunded},
		{"rejected", func(p *Payment) error { return p.FailRefund(ReasonDeclined) }, RefundFailed, EventRefundFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Restore(Snapshot{ID: "p-3", OrderID: "o-3", Method: Konbini, AmountMinor: 1200, Currency: "JPY",
				Status: Authorized, ProviderPaymentID: "kmj_3", Version: 2})
			if err != nil {
				t.Fatal(err)
			}
			if err := p.RequestRefund(); err != nil {
				t.Fatal(err)
			}
			if err := p.PendRefund(); err != nil || p.Status() != RefundPending || p.Status().InFlight() || p.Status().Terminal() {
				t.Fatalf("PendRefund = %v: %s; want REFUND_PENDING, neither in flight nor terminal", err, p.Status())
			}
			if p.Late(Refunded) || p.Late(RefundFailed) || !p.Late(RefundPending) || !p.Late(Authorized) {
				t.Errorf("pending refund: Late(REFUNDED) %v, Late(REFUND_FAILED) %v, Late(REFUND_PENDING) %v, Late(AUTHORIZED) %v; want false, false, true, true",
					p.Late(Refunded), p.Late(RefundFailed), p.Late(RefundPending), p.Late(Authorized))
			}
			if err := tc.end(p); err != nil || p.Status() != tc.want || !p.Status().Terminal() {
				t.Fatalf("end = %v: %s; want %s, terminal", err, p.Status(), tc.want)
			}
			want := []Emitted{{EventRefundPending, 3, RefundPending}, {tc.last, 4, tc.want}}
			if diff := cmp.Diff(want, p.Emitted()); diff != "" {
				t.Errorf("emitted (-want +got):\n%s", diff)
			}
			if !p.Late(RefundPending) {
				t.Error("an acceptance callback after the refund ended is not recognised as late")
			}
		})
	}
}

func TestValidation(t *testing.T) {
	for name, build := range map[string]func() (*Payment, error){
		"no order":        func() (*Payment, error) { return New("p", "", "ali", Card, 1, "JPY") },
		"unknown method":  func() (*Payment, error) { return New("p", "o", "ali", Method("CASH"), 1, "JPY") },
		"zero amount":     func() (*Payment, error) { return New("p", "o", "ali", Card, 0, "JPY") },
		"bad currency":    func() (*Payment, error) { return New("p", "o", "ali", Card, 1, "YEN!") },
		"restore unknown": func() (*Payment, error) { return Restore(Snapshot{ID: "p", Method: Card, Status: "LOST"}) },
	} {
		if _, err := build(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if m, err := ParseMethod("bank_transfer"); err != nil || m != BankTransfer {
		t.Errorf("ParseMethod(bank_transfer) = %v, %v", m, err)
	}
	p, _ := New("p", "o", "ali", Card, 1, "JPY")
	if err := p.Fail(""); !errors.Is(err, ErrInvalid) {
		t.Errorf("Fail without a reason = %v, want ErrInvalid", err)
	}
}
