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
	RefundRequested:  func(p *Payment) error { return p.RequestRefund() },
	Refunded:         func(p *Payment) error { return p.Refund() },
}

// Every from/to pair: a legal move changes the status (and emits one event unless it records an
// intent); an illegal one is a TransitionError and changes nothing.
func TestEveryTransition(t *testing.T) {
	events := map[Status]string{
		Authorized: EventAuthorized, Pending: EventPending, Failed: EventFailed, Expired: EventExpired,
		Captured: EventCaptured, CaptureFailed: EventCaptureFailed, Voided: EventVoided, Refunded: EventRefunded,
	}
	for _, from := range Statuses() {
		for _, to := range Statuses() {
			move, ok := moves[to]
			if !ok {
				continue // REQUESTED is only ever the start
			}
			t.Run(string(from)+"→"+string(to), func(t *testing.T) {
				p, err := Restore(Snapshot{ID: "p-1", OrderID: "o-1", Method: Konbini, AmountMinor: 1200, Currency: "JPY", Status: from, Version: 3})
				if err != nil {
					t.Fatal(err)
				}
				err = move(p)
				if !from.CanTransitionTo(to) {
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
					want, wantVersion = []Emitted{{Type: e, Version: 4}}, 4
				}
				if diff := cmp.Diff(want, p.Emitted()); diff != "" || p.Version() != wantVersion {
					t.Errorf("emitted (-want +got):\n%s version %d, want %d", diff, p.Version(), wantVersion)
				}
			})
		}
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
	want := []Emitted{{EventAuthorized, 1}, {EventCaptured, 2}}
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
	want := []Emitted{{EventPending, 1}, {EventExpired, 2}}
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
