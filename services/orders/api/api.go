// Package api is the wire format of the orders service's HTTP API (openapi.yaml, beside this file,
// for the customers' routes) and of its operators' routes (the order read, the stuck-order
// detector, the reconciliation and the audit): the response bodies, the headers of the
// idempotency contract and the paths its Go clients call. It is the one definition of them: the
// service's internal/httpapi renders its domain into these types, and its clients
// (internal/adminclient) decode them, so a field the service adds is a field its clients have.
//
// The body of POST /v1/orders is not here: it is the use case's input (app.PlaceOrderRequest),
// whose canonical encoding the idempotency hash covers.
//
// It holds data only and imports nothing of the repository: a client takes the types without the
// service's internals, and the service cannot make them depend on its domain.
package api

import (
	"encoding/json"
	"time"
)

// Headers of the idempotency contract.
const (
	HeaderIdempotencyKey     = "Idempotency-Key"
	HeaderIdempotentReplayed = "Idempotent-Replayed"
)

// Paths its clients call as they are; a route with a path parameter is its path followed by "/"
// and the parameter. The customers' routes take a customer's ID token, the operators' routes
// (/admin/...) a Google ID token of an account in ADMIN_ALLOWED_EMAILS.
const (
	PathOrders         = "/v1/orders"            // POST: Order; GET /{id}: Order; POST /{id}/cancel: Order
	PathProducts       = "/v1/products"          // GET: ProductList
	PathAdminOrders    = "/admin/orders"         // GET /{id}: any customer's Order, with its timeline
	PathStuckOrders    = "/admin/stuck-orders"   // GET: StuckReport, live
	PathReconciliation = "/admin/reconciliation" // GET [?order_id=]: Reconciliation, live
	PathAudit          = "/admin/audit"          // POST: AuditReport, logged and published as gauges (Cloud Scheduler)
)

// Order is an order. POST returns it without a timeline (the commit timestamps are not known
// inside the transaction that stores the response); GET includes it. Email and Payment are absent
// for an order placed before payments existed (and Email when the customer gave none).
type Order struct {
	ID           string   `json:"id"`
	CustomerID   string   `json:"customer_id"`
	Email        string   `json:"email,omitempty"`
	Status       string   `json:"status"`
	Currency     string   `json:"currency"`
	TotalMinor   int64    `json:"total_minor"`
	Version      int64    `json:"version"`
	CancelReason *string  `json:"cancel_reason"`
	Language     string   `json:"language"`
	Payment      *Payment `json:"payment,omitempty"`
	// Shipment is the shipment the order left in (from fulfillment's shipment.shipped), absent
	// before it shipped.
	Shipment *Shipment `json:"shipment,omitempty"`
	// Compensations is what a cancellation waits for (stock, payment) and how each ended; absent
	// for an order that was never cancelling.
	Compensations   []Compensation  `json:"compensations,omitempty"`
	AttentionReason string          `json:"attention_reason,omitempty"`
	Lines           []Line          `json:"lines"`
	Timeline        []TimelineEntry `json:"timeline,omitempty"`
}

// Line is an order line.
type Line struct {
	SKU            string `json:"sku"`
	Quantity       int64  `json:"quantity"`
	UnitPriceMinor int64  `json:"unit_price_minor"`
	LineTotalMinor int64  `json:"line_total_minor"`
}

// TimelineEntry is an event orders emitted or consumed about the order; At is the commit time of
// orders' transaction that recorded it.
type TimelineEntry struct {
	Seq              int64     `json:"seq"`
	Direction        string    `json:"direction"` // "emitted" or "consumed"
	EventType        string    `json:"event_type"`
	EventID          string    `json:"event_id"`
	AggregateType    string    `json:"aggregate_type"`
	AggregateVersion int64     `json:"aggregate_version"`
	At               time.Time `json:"at"`
}

// Payment is an order's payment: the method and its detail as the request gave them, and the slip
// of a konbini or bank transfer payment once the gateway issued it.
type Payment struct {
	Method        string        `json:"method"`
	PaymentMethod string        `json:"payment_method,omitempty"`
	Store         string        `json:"store,omitempty"`
	Instructions  *Instructions `json:"instructions,omitempty"`
}

// Instructions is how the customer pays a slip: at a konbini (store, codes) or by bank transfer
// (the account), until ExpiresAt.
type Instructions struct {
	Method           string       `json:"method"`
	Store            string       `json:"store,omitempty"`
	PaymentCode      string       `json:"payment_code,omitempty"`
	ConfirmationCode string       `json:"confirmation_code,omitempty"`
	InstructionsURL  string       `json:"instructions_url,omitempty"`
	Bank             *BankAccount `json:"bank,omitempty"`
	ExpiresAt        *time.Time   `json:"expires_at,omitempty"`
}

// BankAccount is the account a bank transfer is paid into.
type BankAccount struct {
	BankName      string `json:"bank_name,omitempty"`
	BranchName    string `json:"branch_name,omitempty"`
	AccountType   string `json:"account_type,omitempty"`
	AccountNumber string `json:"account_number,omitempty"`
	AccountHolder string `json:"account_holder,omitempty"`
}

// Shipment is the shipment an order left in, as orders knows it.
type Shipment struct {
	ShipmentID     string `json:"shipment_id"`
	Carrier        string `json:"carrier"`
	TrackingNumber string `json:"tracking_number"`
}

// Compensation is one thing a cancellation undoes (Kind "stock" or "payment") and where it stands
// (State "pending", "done" or "failed"); Outcome is how it ended ("released", "voided",
// "refunded", "failed", "expired" when done; the reason when failed).
type Compensation struct {
	Kind    string `json:"kind"`
	State   string `json:"state"`
	Outcome string `json:"outcome,omitempty"`
}

// Product is a catalog entry.
type Product struct {
	SKU         string `json:"sku"`
	Name        string `json:"name"`
	Description string `json:"description"`
	PriceMinor  int64  `json:"price_minor"`
	Currency    string `json:"currency"`
}

// ProductList is the response of GET /v1/products: the active catalog.
type ProductList struct {
	Products []Product `json:"products"`
}

// StuckReport is the response of GET /admin/stuck-orders.
type StuckReport struct {
	CheckedAt  time.Time         `json:"checked_at"`
	StuckAfter map[string]string `json:"stuck_after"` // by status, Go durations
	Counts     map[string]int    `json:"counts"`      // by watched status
	// Truncated lists the statuses whose list stopped at the limit: more orders may be stuck.
	Truncated []string     `json:"truncated"`
	Orders    []StuckOrder `json:"orders"`
}

// StuckOrder is an order that has stayed in a non-terminal status longer than its threshold.
type StuckOrder struct {
	OrderID    string    `json:"order_id"`
	CustomerID string    `json:"customer_id"`
	Status     string    `json:"status"`
	Since      time.Time `json:"since"`
	For        string    `json:"for"` // a Go duration, to the second: "1h2m3s"
	ForSeconds int64     `json:"for_seconds"`
	WaitingFor string    `json:"waiting_for"`
	// PendingCompensations are a cancelling order's compensations still pending ("stock",
	// "payment").
	PendingCompensations []string   `json:"pending_compensations,omitempty"`
	CancelReason         string     `json:"cancel_reason,omitempty"`
	SlipExpiresAt        *time.Time `json:"slip_expires_at,omitempty"`
}

// Reconciliation is the response of GET /admin/reconciliation. Configured is false when orders has
// no peers to compare with (FULFILLMENT_URL and GATEWAY_URL unset): it is then written as
// {"configured": false, "detail": ...} alone (MarshalJSON).
type Reconciliation struct {
	Configured bool      `json:"configured"`
	Detail     string    `json:"detail,omitempty"`
	CheckedAt  time.Time `json:"checked_at,omitzero"`
	Window     Window    `json:"window,omitzero"`
	Checked    int       `json:"checked"` // orders both peers answered for
	// Partial is true when a peer did not answer for some order: Unchecked counts those orders by
	// peer, Unreachable gives each such peer's first error.
	Partial     bool              `json:"partial"`
	Unchecked   map[string]int    `json:"unchecked,omitempty"`
	Unreachable map[string]string `json:"unreachable,omitempty"`
	// Truncated lists the statuses with more settled orders in the window than one batch.
	Truncated  []string   `json:"truncated,omitzero"`
	Mismatches []Mismatch `json:"mismatches,omitzero"`
	Flagged    []Flagged  `json:"flagged,omitzero"`
}

// MarshalJSON writes a reconciliation that was not configured as its configured and detail
// members alone: it compared nothing, so a count of 0 or a "partial": false would be a claim.
func (r Reconciliation) MarshalJSON() ([]byte, error) {
	if !r.Configured {
		return json.Marshal(struct {
			Configured bool   `json:"configured"`
			Detail     string `json:"detail,omitempty"`
		}{Detail: r.Detail})
	}
	type fields Reconciliation // the same members, without this method
	return json.Marshal(fields(r))
}

// Window bounds the orders a reconciliation compared: last changed in [From, To).
type Window struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// Mismatch is a settled order the peers' records contradict.
type Mismatch struct {
	OrderID     string          `json:"order_id"`
	Status      string          `json:"status"`
	Since       time.Time       `json:"since"`
	Check       string          `json:"check"`
	Problems    []string        `json:"problems"`
	Fulfillment PeerFulfillment `json:"fulfillment"`
	Gateway     PeerGateway     `json:"gateway"`
}

// Flagged is an order NEEDS_ATTENTION, with what the peers say.
type Flagged struct {
	OrderID         string          `json:"order_id"`
	Since           time.Time       `json:"since"`
	AttentionReason string          `json:"attention_reason"`
	Fulfillment     PeerFulfillment `json:"fulfillment"`
	Gateway         PeerGateway     `json:"gateway"`
}

// PeerFulfillment is what fulfillment said about an order: its reservation's status (null: none),
// or why it did not answer.
type PeerFulfillment struct {
	Reservation *string `json:"reservation"`
	Error       string  `json:"error,omitempty"`
}

// PeerGateway is what the gateway said about an order: its payments (null when it did not
// answer), or why it did not answer.
type PeerGateway struct {
	Payments []PeerPayment `json:"payments"`
	Error    string        `json:"error,omitempty"`
}

// PeerPayment is one of the gateway's payments of an order, as the reconciliation saw it.
type PeerPayment struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// AuditReport is the response of POST /admin/audit: both checks, which orders also logs (an ERROR
// line per stuck order, mismatch and silent peer) and publishes as gauges.
type AuditReport struct {
	Stuck          StuckReport    `json:"stuck"`
	Reconciliation Reconciliation `json:"reconciliation"`
}
