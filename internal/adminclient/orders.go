package adminclient

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/spanmart/spanmart/internal/topology"
)

// Order is an order as orders represents it (services/orders/internal/httpapi.Order): its
// operators' GET /admin/orders/{id}, the same body as the customer's GET /v1/orders/{id}.
type Order struct {
	ID              string          `json:"id"`
	CustomerID      string          `json:"customer_id"`
	Email           string          `json:"email,omitempty"`
	Status          string          `json:"status"`
	Currency        string          `json:"currency"`
	TotalMinor      int64           `json:"total_minor"`
	Version         int64           `json:"version"`
	CancelReason    *string         `json:"cancel_reason"`
	Language        string          `json:"language"`
	Payment         *OrderPayment   `json:"payment,omitempty"`
	Shipment        *OrderShipment  `json:"shipment,omitempty"`
	Compensations   []Compensation  `json:"compensations,omitempty"`
	AttentionReason string          `json:"attention_reason,omitempty"`
	Lines           []OrderLine     `json:"lines"`
	Timeline        []TimelineEntry `json:"timeline,omitempty"`
}

// OrderLine is an order line.
type OrderLine struct {
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

// OrderPayment is an order's payment as the customer chose it, with the slip once issued.
type OrderPayment struct {
	Method        string       `json:"method"`
	PaymentMethod string       `json:"payment_method,omitempty"`
	Store         string       `json:"store,omitempty"`
	Instructions  *PaymentSlip `json:"instructions,omitempty"`
}

// PaymentSlip is how a konbini or bank transfer payment is paid, until ExpiresAt.
type PaymentSlip struct {
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

// OrderShipment is the shipment orders knows of (from shipment.shipped).
type OrderShipment struct {
	ShipmentID     string `json:"shipment_id"`
	Carrier        string `json:"carrier"`
	TrackingNumber string `json:"tracking_number"`
}

// Compensation is one thing a cancellation undoes ("stock", "payment") and where it stands
// ("pending", "done", "failed").
type Compensation struct {
	Kind    string `json:"kind"`
	State   string `json:"state"`
	Outcome string `json:"outcome,omitempty"`
}

// StuckReport is orders' GET /admin/stuck-orders.
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
	OrderID              string     `json:"order_id"`
	CustomerID           string     `json:"customer_id"`
	Status               string     `json:"status"`
	Since                time.Time  `json:"since"`
	For                  string     `json:"for"` // a Go duration, to the second
	ForSeconds           int64      `json:"for_seconds"`
	WaitingFor           string     `json:"waiting_for"`
	PendingCompensations []string   `json:"pending_compensations,omitempty"`
	CancelReason         string     `json:"cancel_reason,omitempty"`
	SlipExpiresAt        *time.Time `json:"slip_expires_at,omitempty"`
}

// Reconciliation is orders' GET /admin/reconciliation. Configured is false (and only Detail set)
// when orders has no peers to compare with.
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
	Truncated   []string          `json:"truncated,omitempty"`
	Mismatches  []Mismatch        `json:"mismatches"`
	Flagged     []Flagged         `json:"flagged"`
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

// PeerFulfillment is what fulfillment said: its reservation's status (nil: none), or why it did
// not answer.
type PeerFulfillment struct {
	Reservation *string `json:"reservation"`
	Error       string  `json:"error,omitempty"`
}

// PeerGateway is what the gateway said: the order's payments (nil when it did not answer), or
// why it did not answer.
type PeerGateway struct {
	Payments []PeerPayment `json:"payments"`
	Error    string        `json:"error,omitempty"`
}

// PeerPayment is one of the gateway's payments of an order, as the reconciliation saw it.
type PeerPayment struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// AuditReport is orders' POST /admin/audit: both checks, which orders also logs (an ERROR line
// per stuck order, mismatch and silent peer) and publishes as gauges.
type AuditReport struct {
	Stuck          StuckReport    `json:"stuck"`
	Reconciliation Reconciliation `json:"reconciliation"`
}

// Order reads any customer's order with its timeline: orders' GET /admin/orders/{id}, behind its
// operator guard (the public GET /v1/orders/{id} answers a signed-in customer for its own orders
// only). An unknown order is ErrNotFound.
func (c *Client) Order(ctx context.Context, orderID string) (Order, error) {
	var out Order
	err := c.do(ctx, request{service: topology.Orders, method: http.MethodGet, path: "/admin/orders/" + url.PathEscape(orderID)}, &out)
	return out, err
}

// StuckOrders runs orders' stuck-order detector: GET {orders}/admin/stuck-orders (no side
// effects).
func (c *Client) StuckOrders(ctx context.Context) (StuckReport, error) {
	var out StuckReport
	err := c.do(ctx, request{service: topology.Orders, method: http.MethodGet, path: "/admin/stuck-orders"}, &out)
	return out, err
}

// Reconciliation runs orders' reconciliation with fulfillment and the gateway:
// GET {orders}/admin/reconciliation (no side effects; it reads the peers for every settled order
// of the window).
func (c *Client) Reconciliation(ctx context.Context) (Reconciliation, error) {
	var out Reconciliation
	err := c.do(ctx, request{service: topology.Orders, method: http.MethodGet, path: "/admin/reconciliation"}, &out)
	return out, err
}

// OrderReconciliation checks one order against fulfillment and the gateway, whenever it last
// changed: GET {orders}/admin/reconciliation?order_id=ID (what a trace asks: no whole run).
func (c *Client) OrderReconciliation(ctx context.Context, orderID string) (Reconciliation, error) {
	var out Reconciliation
	err := c.do(ctx, request{service: topology.Orders, method: http.MethodGet, path: "/admin/reconciliation",
		query: url.Values{"order_id": {orderID}}}, &out)
	return out, err
}

// Audit runs both checks as Cloud Scheduler does: POST {orders}/admin/audit, which also logs what
// it finds and sets orders' gauges (the alerts).
func (c *Client) Audit(ctx context.Context) (AuditReport, error) {
	var out AuditReport
	err := c.do(ctx, request{service: topology.Orders, method: http.MethodPost, path: "/admin/audit"}, &out)
	return out, err
}
