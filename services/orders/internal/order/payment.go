package order

import (
	"fmt"
	"net/mail"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// PaymentMethod is how the customer pays; its values are those of the CK_Orders_PaymentMethod
// check and of the request's payment.method.
type PaymentMethod string

const (
	MethodCard         PaymentMethod = "card"          // Stripe: a PaymentMethod id collected by the client
	MethodWallet       PaymentMethod = "wallet"        // PayPay through KOMOJU
	MethodKonbini      PaymentMethod = "konbini"       // cash at a convenience store, with a slip
	MethodBankTransfer PaymentMethod = "bank_transfer" // to a virtual account, with a slip
)

// Limits of the payment fields.
const (
	MaxPaymentMethodIDLen = 255 // Orders.PaymentDetail is STRING(255)
	MaxEmailLen           = 254 // Orders.Email is STRING(254): RFC 5321's longest forward path
)

// Names of the payment object's fields, as the request writes them. Validation messages use them,
// like the other problems of a request ("customer_id is required").
const (
	FieldMethod        = "method"
	FieldPaymentMethod = "payment_method" // card
	FieldStore         = "store"          // konbini
)

// PaymentMethods returns every method.
func PaymentMethods() []PaymentMethod {
	return []PaymentMethod{MethodCard, MethodWallet, MethodKonbini, MethodBankTransfer}
}

// KonbiniStores returns the convenience store chains a konbini payment can name: KOMOJU's
// identifiers (payment_details[store]), which the gateway passes on unchanged.
func KonbiniStores() []string {
	return []string{"lawson", "family-mart", "ministop", "daily-yamazaki", "seicomart", "seven-eleven"}
}

// Valid reports whether m is a known method.
func (m PaymentMethod) Valid() bool { return slices.Contains(PaymentMethods(), m) }

// DetailField is the name of the one field m takes besides the method: payment_method for a card,
// store for konbini, "" for wallet and bank transfer.
func (m PaymentMethod) DetailField() string {
	switch m {
	case MethodCard:
		return FieldPaymentMethod
	case MethodKonbini:
		return FieldStore
	}
	return ""
}

// Accepts reports whether m can pay in currency: the wallet (PayPay), konbini and bank transfer
// are Japanese methods that take yen only; a card takes any currency.
func (m PaymentMethod) Accepts(currency string) bool { return m == MethodCard || currency == "JPY" }

// UsesSlip reports whether the customer pays later with a slip (konbini, bank transfer), which is
// e-mailed: such an order needs an e-mail address.
func (m PaymentMethod) UsesSlip() bool { return m == MethodKonbini || m == MethodBankTransfer }

// Payment is the customer's choice of payment: a method and its detail (the Stripe PaymentMethod
// id of a card, the store chain of a konbini payment; empty for the others). The zero Payment is
// "none chosen", which only orders placed before payments existed have.
type Payment struct {
	Method PaymentMethod
	Detail string
}

// IsZero reports whether no payment was chosen.
func (p Payment) IsZero() bool { return p == Payment{} }

// ParsePayment reads a payment as the request gives it: the method and every other field of the
// payment object by name. It returns every problem: a missing or unknown method, an unknown field,
// a field that belongs to another method, a missing or malformed detail.
func ParsePayment(method string, fields map[string]string) (Payment, []string) {
	var problems []string
	m := PaymentMethod(method)
	switch {
	case method == "":
		problems = append(problems, fmt.Sprintf("payment.method is required (one of %s)", methodList()))
	case !m.Valid():
		problems = append(problems, fmt.Sprintf("payment.method %q is not one of %s", method, methodList()))
	}
	p := Payment{Method: m}
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		switch {
		case name == FieldMethod:
			// Given as method, not a detail.
		case m.Valid() && name == m.DetailField():
			p.Detail = fields[name]
			if tp := textProblem("payment."+name, p.Detail); tp != "" {
				problems = append(problems, tp)
				return p, problems // the detail's own checks would only repeat it
			}
		case name == FieldPaymentMethod || name == FieldStore:
			if m.Valid() {
				problems = append(problems, fmt.Sprintf("payment.%s does not belong to method %s%s", name, m, takes(m)))
			}
		default:
			problems = append(problems, fmt.Sprintf("payment.%s is not a known field (method, payment_method for card, store for konbini)", name))
		}
	}
	if m.Valid() {
		problems = append(problems, p.detailProblems()...)
	}
	return p, problems
}

func methodList() string {
	names := make([]string, 0, 4)
	for _, m := range PaymentMethods() {
		names = append(names, string(m))
	}
	return strings.Join(names, ", ")
}

// takes describes what m takes besides the method, for a message.
func takes(m PaymentMethod) string {
	if f := m.DetailField(); f != "" {
		return fmt.Sprintf(" (it takes %s)", f)
	}
	return " (it takes no other field)"
}

// Validate returns the problems of a chosen payment.
func (p Payment) Validate() []string {
	if !p.Method.Valid() {
		return []string{fmt.Sprintf("payment.method %q is not one of %s", p.Method, methodList())}
	}
	return p.detailProblems()
}

func (p Payment) detailProblems() []string {
	switch p.Method {
	case MethodCard:
		return cardProblems(p.Detail)
	case MethodKonbini:
		switch {
		case p.Detail == "":
			return []string{fmt.Sprintf("payment.store is required for method konbini (one of %s)", strings.Join(KonbiniStores(), ", "))}
		case !slices.Contains(KonbiniStores(), p.Detail):
			return []string{fmt.Sprintf("payment.store %q is not one of %s", p.Detail, strings.Join(KonbiniStores(), ", "))}
		}
	default:
		if p.Detail != "" {
			return []string{fmt.Sprintf("method %s takes no detail, got %q", p.Method, p.Detail)}
		}
	}
	return nil
}

// cardProblems checks a Stripe PaymentMethod id: "pm_" and letters, digits or underscores (Stripe's
// ids and test tokens such as pm_card_visa), at most MaxPaymentMethodIDLen characters. Card numbers
// never reach this service: the client tokenizes them with Stripe.
func cardProblems(id string) []string {
	switch {
	case id == "":
		return []string{"payment.payment_method is required for method card (a Stripe PaymentMethod id, pm_...)"}
	case len(id) > MaxPaymentMethodIDLen:
		return []string{fmt.Sprintf("payment.payment_method is longer than %d characters", MaxPaymentMethodIDLen)}
	case !strings.HasPrefix(id, "pm_") || len(id) == len("pm_") || strings.IndexFunc(id, notIDChar) >= 0:
		return []string{"payment.payment_method is not a Stripe PaymentMethod id (pm_ followed by letters, digits or underscores)"}
	}
	return nil
}

func notIDChar(r rune) bool {
	return !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
}

// ValidateEmail returns the problems of the customer's e-mail address for an order paid with m:
// required when the payment slip is e-mailed (konbini, bank transfer), optional otherwise; when
// given, one bare address (no display name) of at most MaxEmailLen characters.
func ValidateEmail(email string, m PaymentMethod) []string {
	if email == "" {
		if m.UsesSlip() {
			return []string{fmt.Sprintf("email is required for payment method %s (the payment slip is e-mailed)", m)}
		}
		return nil
	}
	if utf8.RuneCountInString(email) > MaxEmailLen {
		return []string{fmt.Sprintf("email is longer than %d characters", MaxEmailLen)}
	}
	if p := textProblem("email", email); p != "" {
		return []string{p}
	}
	if a, err := mail.ParseAddress(email); err != nil || a.Name != "" || a.Address != email {
		return []string{"email is not a valid e-mail address (one bare address such as ali@example.com)"}
	}
	return nil
}

// PaymentInstructions is the slip a konbini or bank transfer payment is paid with, as the gateway
// issued it (payment.pending): where and how to pay, and until when.
type PaymentInstructions struct {
	Method           PaymentMethod
	Store            string // konbini
	PaymentCode      string
	ConfirmationCode string
	InstructionsURL  string
	Bank             *BankAccount // bank transfer
	ExpiresAt        time.Time
}

// BankAccount is the account a bank transfer is paid into.
type BankAccount struct {
	BankName      string
	BranchName    string
	AccountType   string
	AccountNumber string
	AccountHolder string
}

// RecordPaymentInstructions stores the slip of an order awaiting a konbini or bank transfer
// payment. It is not a transition: the order stays AWAITING_PAYMENT, emits nothing and keeps its
// version (the slip is the gateway's fact, announced by its payment.pending). A slip issued again
// replaces the previous one. An order in another state has moved on (a StateError); a slip of a
// method that has none, or of another method than the order's, is invalid.
func (o *Order) RecordPaymentInstructions(in PaymentInstructions) error {
	if o.status != AwaitingPayment {
		return &StateError{ID: o.id, Status: o.status, Action: "record payment instructions"}
	}
	switch {
	case !in.Method.UsesSlip():
		return &ValidationError{Problems: []string{fmt.Sprintf("payment instructions of method %q: only konbini and bank_transfer have a slip", in.Method)}}
	case !o.payment.IsZero() && in.Method != o.payment.Method:
		return &ValidationError{Problems: []string{fmt.Sprintf("payment instructions of method %s for an order paid by %s", in.Method, o.payment.Method)}}
	}
	in.ExpiresAt = in.ExpiresAt.UTC()
	o.instructions = copyInstructions(&in)
	o.changed = true
	return nil
}
