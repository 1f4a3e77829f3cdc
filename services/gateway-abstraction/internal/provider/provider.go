// Package provider is the one contract between the gateway and a payment provider. Each provider
// is one package below this one (stripe, komoju) that implements Provider over the provider's own
// wire API; nothing of a provider's names, statuses or error codes leaves its package: answers are
// Outcomes in Spanmart's vocabulary (package payment), failures are *Error with a payment.Reason.
//
// Adding a provider is adding one package that implements Provider, and naming the methods it
// takes in payment.Method.Provider.
package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/payment"
)

// Provider is a payment provider as the gateway uses it. Every call that changes something takes
// the idempotency key of the intent it carries out (ProviderRequests), so that a retried or
// resumed call is answered with the first call's result and never acts twice.
//
// A refusal (a declined card, an empty wallet) is not an error: it is an Outcome with Status
// payment.Failed and a Reason. An error means the provider's answer is unknown or unusable: a
// *Error saying whether trying again (with the same key) can help.
type Provider interface {
	// Name is the provider's name as stored in Payments.Provider ("stripe", "komoju").
	Name() string
	// Authorize creates the payment at the provider and asks for the money to be held (card,
	// wallet: Status Authorized, or Requested while the customer must still act, e.g. 3-D
	// Secure) or for a slip (konbini, bank transfer: Status Pending with Slip), or learns the
	// refusal (Status Failed with Reason).
	Authorize(ctx context.Context, r AuthorizeRequest) (Outcome, error)
	// Capture takes the held money: Status Captured, or CaptureFailed with Reason when the
	// provider refuses for good (the authorization lapsed, say). A paid slip's money is already
	// taken: its capture answers Captured.
	Capture(ctx context.Context, r Operation) (Outcome, error)
	// Void releases the held money, cancels the unpaid slip, or gives up the payment the
	// customer has not completed (3-D Secure): Status Voided. A slip the customer has paid
	// meanwhile holds no money to release: Void answers Authorized without acting, and the
	// gateway refunds it instead.
	Void(ctx context.Context, r Operation) (Outcome, error)
	// Refund gives taken money back (a captured payment, a paid slip), all of it or
	// AmountMinor: Status Refunded, or RefundFailed with Reason when the provider refuses for
	// good.
	Refund(ctx context.Context, r Operation) (Outcome, error)
	// Lookup asks the provider what the payment with the provider's id is now, for the
	// reconciliation sweep (a missed webhook); ErrNotFound when the provider has no such
	// payment. (An authorize intent whose answer was lost is resumed by calling Authorize again
	// with the same idempotency key, which the provider answers with the first call's result.)
	Lookup(ctx context.Context, providerPaymentID string) (Outcome, error)
	// ParseWebhook verifies a callback's signature (and age, where the provider signs a
	// timestamp) against now and decodes it. A callback that does not verify is ErrSignature
	// (wrapped, with why); one that verifies but cannot be read is ErrMalformed.
	ParseWebhook(h http.Header, body []byte, now time.Time) (Notification, error)
}

// AuthorizeRequest is what Authorize sends.
type AuthorizeRequest struct {
	IdempotencyKey string // ProviderRequests.IdempotencyKey of the authorize intent
	PaymentID      string // Spanmart's payment id, sent as metadata so webhooks and Lookup find it
	OrderID        string
	CustomerID     string
	Email          string // the customer's, for slips (KOMOJU mails them); may be empty for card
	Method         payment.Method
	AmountMinor    int64
	Currency       string // ISO 4217, upper case
	// Instrument is the method's detail: card → a Stripe PaymentMethod id ("pm_card_visa");
	// konbini → the store ("lawson", "family-mart", ...); bank transfer and wallet → "".
	Instrument string
}

// Operation is a Capture, Void or Refund of a payment the provider knows.
type Operation struct {
	IdempotencyKey    string
	PaymentID         string
	ProviderPaymentID string
	AmountMinor       int64
}

// Outcome is what the provider says a payment is, in Spanmart's vocabulary.
type Outcome struct {
	// Status is one of Requested (the provider waits for the customer), Pending (a slip is
	// issued), Authorized, Failed, Expired, Captured, CaptureFailed, Voided, VoidFailed,
	// Refunded, RefundFailed.
	Status            payment.Status
	ProviderPaymentID string
	Reason            payment.Reason // why, when Failed, Expired or *Failed
	Slip              *Slip          // when Pending
}

// Slip is what a customer needs to pay a konbini or bank transfer payment.
type Slip struct {
	Method           payment.Method `json:"method"`
	Store            string         `json:"store,omitempty"`             // konbini chain
	PaymentCode      string         `json:"payment_code,omitempty"`      // konbini: the number to give at the till
	ConfirmationCode string         `json:"confirmation_code,omitempty"` // konbini: the second number some chains ask for
	InstructionsURL  string         `json:"instructions_url,omitempty"`
	Bank             *BankAccount   `json:"bank,omitempty"` // bank transfer: where to send the money
	ExpiresAt        time.Time      `json:"expires_at"`
}

// BankAccount is a bank transfer's destination.
type BankAccount struct {
	BankName      string `json:"bank_name"`
	BranchName    string `json:"branch_name"`
	AccountType   string `json:"account_type"`
	AccountNumber string `json:"account_number"`
	AccountHolder string `json:"account_holder"`
}

// Notification is a verified provider callback.
type Notification struct {
	EventID           string // the provider's event id, for de-duplication (ProviderEvents)
	EventType         string // the provider's event type, for logs and ProviderEvents
	PaymentID         string // Spanmart's payment id, from the metadata Authorize sent; may be ""
	ProviderPaymentID string
	// Outcome is what the event says the payment now is. Status "" means the event does not
	// move a payment (it is acknowledged and recorded, nothing else).
	Outcome Outcome
}

// Errors; test with errors.Is.
var (
	// ErrSignature: a webhook whose signature is missing, forged or too old.
	ErrSignature = errors.New("webhook signature does not verify")
	// ErrMalformed: a verified webhook that cannot be decoded.
	ErrMalformed = errors.New("malformed webhook")
	// ErrNotFound: the provider has no such payment.
	ErrNotFound = errors.New("provider has no such payment")
)

// Error is a provider call whose answer is unknown or unusable.
type Error struct {
	Provider  string
	Op        string         // "authorize", "capture", "void", "refund", "lookup"
	Reason    payment.Reason // normalized: provider_unavailable, invalid_request, ...
	Temporary bool           // trying again with the same idempotency key can help
	Status    int            // the provider's HTTP status, 0 if none came back
	Err       error          // the underlying error (the provider's own message)
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s %s: %s (temporary=%t, http %d): %v", e.Provider, e.Op, e.Reason, e.Temporary, e.Status, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Temporary reports whether err is a provider error that trying again can mend (a timeout, a
// 5xx, a 429, a connection refused). Errors that are not *Error are treated as temporary: a
// context deadline inside a client is one.
func Temporary(err error) bool {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Temporary
	}
	return err != nil
}
