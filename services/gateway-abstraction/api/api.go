// Package api is the wire format of the gateway's HTTP API: the operators' reads of payments and
// its sweep, and the answer its webhooks give the providers. It is the one definition of them:
// the service's internal/httpapi renders its domain into these types, and its clients
// (internal/adminclient, orders' reconciliation in services/orders/internal/peers) decode them,
// so a field the service adds is a field its clients have.
//
// It holds data only and imports nothing of the repository: a client takes the types without the
// service's internals, and the service cannot make them depend on its domain.
package api

import (
	"encoding/json"
	"time"
)

// Paths. The operators' routes take a Google ID token of an account in ADMIN_ALLOWED_EMAILS.
const (
	PathWebhooks = "/webhooks"       // POST /{provider}, "stripe" or "komoju": WebhookResult
	PathSweep    = "/admin/sweep"    // POST, operator: Sweep
	PathPayments = "/admin/payments" // GET ?order_id=, operator: PaymentList; GET /{id}: Payment
)

// Payment is one of the gateway's payments.
type Payment struct {
	ID                string          `json:"id"`
	OrderID           string          `json:"order_id"`
	CustomerID        string          `json:"customer_id"`
	Method            string          `json:"method"`
	Provider          string          `json:"provider"`
	Status            string          `json:"status"`
	AmountMinor       int64           `json:"amount_minor"`
	Currency          string          `json:"currency"`
	ProviderPaymentID string          `json:"provider_payment_id,omitempty"`
	FailureReason     string          `json:"failure_reason,omitempty"`
	ExpiresAt         *time.Time      `json:"expires_at,omitempty"`
	Slip              json.RawMessage `json:"slip,omitempty"`
	// CancelRequested: the order was cancelled while the authorization was in flight; the
	// payment is voided as soon as the provider's answer lands.
	CancelRequested bool  `json:"cancel_requested"`
	Version         int64 `json:"version"`
}

// PaymentList is the response of GET /admin/payments?order_id=: the order's payments, an empty
// list (never null) for an order the gateway does not know.
type PaymentList struct {
	Payments []Payment `json:"payments"`
}

// Sweep is what one sweep did (POST /admin/sweep, Cloud Scheduler's payments-sweep).
type Sweep struct {
	Resumed int `json:"resumed"` // unfinished intents carried out
	Checked int `json:"checked"` // payments the provider was asked about
	Changed int `json:"changed"` // of those, payments that moved
	// RefundsPending counts the payments asked about whose refund the provider had accepted and
	// still not paid out (REFUND_PENDING, asked about again later).
	RefundsPending int      `json:"refunds_pending"`
	Failures       []string `json:"failures"` // what could not be done (retried by the next sweep)
}

// WebhookResult is the answer to a provider's webhook that verified: what it did to the payment.
type WebhookResult struct {
	Result string `json:"result"`
}
