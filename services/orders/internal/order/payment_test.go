package order

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParsePayment(t *testing.T) {
	long := "pm_" + strings.Repeat("a", MaxPaymentMethodIDLen-2)
	tests := []struct {
		name   string
		method string
		fields map[string]string
		want   Payment
		errs   []string // substrings, one per expected problem, in order
	}{
		{"card", "card", map[string]string{"payment_method": "pm_card_visa"}, Payment{MethodCard, "pm_card_visa"}, nil},
		{"card longest id", "card", map[string]string{"payment_method": long[:MaxPaymentMethodIDLen]}, Payment{MethodCard, long[:MaxPaymentMethodIDLen]}, nil},
		{"wallet", "wallet", nil, Payment{Method: MethodWallet}, nil},
		{"bank transfer", "bank_transfer", map[string]string{}, Payment{Method: MethodBankTransfer}, nil},
		{"no method", "", nil, Payment{}, []string{"payment.method is required"}},
		{"unknown method", "cash", map[string]string{"payment_method": "pm_x"}, Payment{Method: "cash"}, []string{`payment.method "cash" is not one of card, wallet, konbini, bank_transfer`}},
		{"card without id", "card", nil, Payment{Method: MethodCard}, []string{"payment.payment_method is required for method card"}},
		{"card empty id", "card", map[string]string{"payment_method": ""}, Payment{Method: MethodCard}, []string{"payment.payment_method is required"}},
		{"card not pm", "card", map[string]string{"payment_method": "tok_visa"}, Payment{MethodCard, "tok_visa"}, []string{"not a Stripe PaymentMethod id"}},
		{"card bare prefix", "card", map[string]string{"payment_method": "pm_"}, Payment{MethodCard, "pm_"}, []string{"not a Stripe PaymentMethod id"}},
		{"card odd characters", "card", map[string]string{"payment_method": "pm_a b"}, Payment{MethodCard, "pm_a b"}, []string{"not a Stripe PaymentMethod id"}},
		{"card id too long", "card", map[string]string{"payment_method": long}, Payment{MethodCard, long}, []string{"longer than 255 characters"}},
		{"card with store", "card", map[string]string{"payment_method": "pm_card_visa", "store": "lawson"}, Payment{MethodCard, "pm_card_visa"}, []string{"payment.store does not belong to method card (it takes payment_method)"}},
		{"konbini stores", "konbini", map[string]string{"store": "seven-eleven"}, Payment{MethodKonbini, "seven-eleven"}, nil},
		{"konbini without store", "konbini", nil, Payment{Method: MethodKonbini}, []string{"payment.store is required for method konbini (one of lawson, family-mart, ministop, daily-yamazaki, seicomart, seven-eleven)"}},
		{"konbini unknown store", "konbini", map[string]string{"store": "FamilyMart"}, Payment{MethodKonbini, "FamilyMart"}, []string{`payment.store "FamilyMart" is not one of`}},
		{"konbini with card id", "konbini", map[string]string{"store": "lawson", "payment_method": "pm_x"}, Payment{MethodKonbini, "lawson"}, []string{"payment.payment_method does not belong to method konbini"}},
		{"wallet with both", "wallet", map[string]string{"store": "lawson", "payment_method": "pm_x"}, Payment{Method: MethodWallet}, []string{"payment.payment_method does not belong to method wallet (it takes no other field)", "payment.store does not belong to method wallet"}},
		{"bank transfer with store", "bank_transfer", map[string]string{"store": "lawson"}, Payment{Method: MethodBankTransfer}, []string{"payment.store does not belong to method bank_transfer"}},
		{"unknown fields", "card", map[string]string{"payment_method": "pm_x", "cvc": "123", "amount": "1"}, Payment{MethodCard, "pm_x"}, []string{"payment.amount is not a known field", "payment.cvc is not a known field"}},
		{"everything wrong", "konbini", map[string]string{"payment_method": "pm_x", "bank": "mizuho"}, Payment{Method: MethodKonbini}, []string{"payment.bank is not a known field", "payment.payment_method does not belong to method konbini", "payment.store is required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, problems := ParsePayment(tt.method, tt.fields)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("payment (-want +got):\n%s", diff)
			}
			if len(problems) != len(tt.errs) {
				t.Fatalf("problems = %q, want %d matching %q", problems, len(tt.errs), tt.errs)
			}
			for i, want := range tt.errs {
				if !strings.Contains(problems[i], want) {
					t.Errorf("problem %d = %q, want it to contain %q", i, problems[i], want)
				}
			}
			if tt.errs == nil {
				if v := got.Validate(); v != nil {
					t.Errorf("Validate of a parsed payment = %q", v)
				}
			}
		})
	}
}

func TestValidateEmail(t *testing.T) {
	tests := []struct {
		email  string
		method PaymentMethod
		want   string // "" for no problem
	}{
		{"ali@example.com", MethodCard, ""},
		{"", MethodCard, ""},
		{"", MethodWallet, ""},
		{"", MethodKonbini, "email is required for payment method konbini"},
		{"", MethodBankTransfer, "email is required for payment method bank_transfer"},
		{"ali@example.com", MethodKonbini, ""},
		{"ali", MethodCard, "not a valid e-mail address"},
		{"ali@", MethodKonbini, "not a valid e-mail address"},
		{"Ali <ali@example.com>", MethodCard, "not a valid e-mail address"},
		{" ali@example.com", MethodCard, "not a valid e-mail address"},
		{"a@example.com, b@example.com", MethodCard, "not a valid e-mail address"},
		{strings.Repeat("a", 64) + "@" + strings.Repeat("b", 185) + ".com", MethodCard, ""}, // 254
		{strings.Repeat("a", 64) + "@" + strings.Repeat("b", 186) + ".com", MethodCard, "longer than 254 characters"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %.20s", tt.method, tt.email), func(t *testing.T) {
			got := ValidateEmail(tt.email, tt.method)
			switch {
			case tt.want == "" && got != nil:
				t.Errorf("problems = %q, want none", got)
			case tt.want != "" && (len(got) != 1 || !strings.Contains(got[0], tt.want)):
				t.Errorf("problems = %q, want one containing %q", got, tt.want)
			}
		})
	}
}

func TestConfirmChecksTheAmount(t *testing.T) {
	for _, tt := range []struct {
		amount   int64
		currency string
	}{{199, "JPY"}, {200, "USD"}, {0, ""}} {
		o := at(t, AwaitingPayment)
		if err := o.Confirm(tt.amount, tt.currency); !errors.Is(err, ErrInvalid) {
			t.Errorf("Confirm(%d, %q) = %v, want ErrInvalid", tt.amount, tt.currency, err)
		}
		if o.Status() != AwaitingPayment || o.Version() != 3 || o.Changed() {
			t.Errorf("a mismatched authorization changed the order: %+v", o.Snapshot())
		}
	}
	// An order that moved on is a transition error even when the amount is wrong too: the event is
	// late, not a gateway bug.
	if err := at(t, Cancelling).Confirm(1, "USD"); !errors.Is(err, ErrIllegalTransition) {
		t.Errorf("Confirm on a cancelling order = %v, want ErrIllegalTransition", err)
	}
}

func TestFailPaymentReason(t *testing.T) {
	for reason, want := range map[string]string{
		"declined":              "payment_declined",
		"expired":               "payment_expired",
		"":                      "payment_failed",
		strings.Repeat("x", 80): "payment_" + strings.Repeat("x", MaxReasonLen-len("payment_")),
		"provider_unavailable":  "payment_provider_unavailable",
		"authentication_failed": "payment_authentication_failed",
	} {
		o := at(t, AwaitingPayment)
		if err := o.FailPayment(reason); err != nil {
			t.Fatalf("FailPayment(%q) = %v", reason, err)
		}
		if o.CancelReason() != want || o.Status() != Cancelling {
			t.Errorf("FailPayment(%q): %s %q, want CANCELLING %q", reason, o.Status(), o.CancelReason(), want)
		}
	}
}

func konbiniAt(t *testing.T, s Status) *Order {
	t.Helper()
	o, err := Restore(Snapshot{
		ID: "o1", CustomerID: "c1", Status: s, Currency: "JPY", Lines: []Line{{"A1", 2, 100}}, TotalMinor: 200, Version: 3,
		Payment: Payment{Method: MethodKonbini, Detail: "lawson"}, Email: "ali@example.com",
	})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestRecordPaymentInstructions records a slip from every status: only AWAITING_PAYMENT takes it,
// without an event or a new version.
func TestRecordPaymentInstructions(t *testing.T) {
	slip := PaymentInstructions{
		Method: MethodKonbini, Store: "lawson", PaymentCode: "123456", ConfirmationCode: "7890",
		InstructionsURL: "https://komoju.test/slips/1", ExpiresAt: time.Date(2026, 12, 9, 15, 0, 0, 0, time.FixedZone("JST", 9*3600)),
	}
	for _, s := range Statuses() {
		t.Run(string(s), func(t *testing.T) {
			o := konbiniAt(t, s)
			err := o.RecordPaymentInstructions(slip)
			if s != AwaitingPayment {
				var se *StateError
				if !errors.As(err, &se) || !errors.Is(err, ErrIllegalTransition) || se.Status != s {
					t.Fatalf("err = %v, want a StateError in %s", err, s)
				}
				if o.PaymentInstructions() != nil || o.Changed() {
					t.Error("a refused slip changed the order")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := slip
			want.ExpiresAt = slip.ExpiresAt.UTC()
			if diff := cmp.Diff(&want, o.PaymentInstructions()); diff != "" {
				t.Errorf("instructions (-want +got):\n%s", diff)
			}
			if o.Status() != AwaitingPayment || o.Version() != 3 || len(o.Emitted()) != 0 || !o.Changed() {
				t.Errorf("after the slip: %s version %d, %d events, changed %v; want AWAITING_PAYMENT 3, none, true", o.Status(), o.Version(), len(o.Emitted()), o.Changed())
			}
		})
	}

	for name, in := range map[string]PaymentInstructions{
		"a card has no slip": {Method: MethodCard},
		"another method":     {Method: MethodBankTransfer, Bank: &BankAccount{BankName: "Mizuho"}},
		"no method":          {},
	} {
		if err := konbiniAt(t, AwaitingPayment).RecordPaymentInstructions(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
}

// TestRestoreWithoutPayment: an order placed before payments existed has NULL payment columns and
// is restored as it is; the payment transitions still apply to it.
func TestRestoreWithoutPayment(t *testing.T) {
	o, err := Restore(Snapshot{ID: "o1", CustomerID: "c1", Status: AwaitingPayment, Currency: "JPY", TotalMinor: 200, Version: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !o.Payment().IsZero() || o.Email() != "" || o.PaymentInstructions() != nil {
		t.Errorf("restored %+v", o.Snapshot())
	}
	if err := o.RecordPaymentInstructions(PaymentInstructions{Method: MethodBankTransfer}); err != nil {
		t.Errorf("slip for an order without a method: %v", err)
	}
	if err := o.Confirm(200, "JPY"); err != nil {
		t.Errorf("Confirm: %v", err)
	}
	if _, err := Restore(Snapshot{ID: "o1", Status: Pending, Version: 1, Payment: Payment{Method: "cash"}}); err == nil {
		t.Error("Restore accepted an unknown payment method")
	}
}
