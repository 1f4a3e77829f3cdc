package adminclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/spanmart/spanmart/internal/topology"
	ordersapi "github.com/spanmart/spanmart/services/orders/api"
)

// Orders' answers are its own wire types (services/orders/api): these names are aliases of them.

// Order is an order as orders represents it: its operators' GET /admin/orders/{id}, the same body
// as the customer's GET /v1/orders/{id}.
type Order = ordersapi.Order

// OrderLine is an order line.
type OrderLine = ordersapi.Line

// TimelineEntry is an event orders emitted or consumed about the order; At is the commit time of
// orders' transaction that recorded it.
type TimelineEntry = ordersapi.TimelineEntry

// OrderPayment is an order's payment as the customer chose it, with the slip once issued.
type OrderPayment = ordersapi.Payment

// PaymentSlip is how a konbini or bank transfer payment is paid, until ExpiresAt.
type PaymentSlip = ordersapi.Instructions

// BankAccount is the account a bank transfer is paid into.
type BankAccount = ordersapi.BankAccount

// OrderShipment is the shipment orders knows of (from shipment.shipped).
type OrderShipment = ordersapi.Shipment

// Compensation is one thing a cancellation undoes ("stock", "payment") and where it stands
// ("pending", "done", "failed").
type Compensation = ordersapi.Compensation

// StuckReport is orders' GET /admin/stuck-orders.
type StuckReport = ordersapi.StuckReport

// StuckOrder is an order that has stayed in a non-terminal status longer than its threshold.
type StuckOrder = ordersapi.StuckOrder

// Reconciliation is orders' GET /admin/reconciliation. Configured is false (and only Detail set)
// when orders has no peers to compare with.
type Reconciliation = ordersapi.Reconciliation

// Window bounds the orders a reconciliation compared: last changed in [From, To).
type Window = ordersapi.Window

// Mismatch is a settled order the peers' records contradict.
type Mismatch = ordersapi.Mismatch

// Flagged is an order NEEDS_ATTENTION, with what the peers say.
type Flagged = ordersapi.Flagged

// PeerFulfillment is what fulfillment said: its reservation's status (nil: none), or why it did
// not answer.
type PeerFulfillment = ordersapi.PeerFulfillment

// PeerGateway is what the gateway said: the order's payments (nil when it did not answer), or
// why it did not answer.
type PeerGateway = ordersapi.PeerGateway

// PeerPayment is one of the gateway's payments of an order, as the reconciliation saw it.
type PeerPayment = ordersapi.PeerPayment

// AuditReport is orders' POST /admin/audit: both checks, which orders also logs (an ERROR line
// per stuck order, mismatch and silent peer) and publishes as gauges.
type AuditReport = ordersapi.AuditReport

// Order reads any customer's order with its timeline: orders' GET /admin/orders/{id}, behind its
// operator guard (the public GET /v1/orders/{id} answers a signed-in customer for its own orders
// only). An unknown order is ErrNotFound.
func (c *Client) Order(ctx context.Context, orderID string) (Order, error) {
	var out Order
	err := c.do(ctx, request{service: topology.Orders, method: http.MethodGet, path: ordersapi.PathAdminOrders + "/" + url.PathEscape(orderID)}, &out)
	return out, err
}

// StuckOrders runs orders' stuck-order detector: GET {orders}/admin/stuck-orders (no side
// effects).
func (c *Client) StuckOrders(ctx context.Context) (StuckReport, error) {
	var out StuckReport
	err := c.do(ctx, request{service: topology.Orders, method: http.MethodGet, path: ordersapi.PathStuckOrders}, &out)
	return out, err
}

// Reconciliation runs orders' reconciliation with fulfillment and the gateway:
// GET {orders}/admin/reconciliation (no side effects; it reads the peers for every settled order
// of the window).
func (c *Client) Reconciliation(ctx context.Context) (Reconciliation, error) {
	var out Reconciliation
	err := c.do(ctx, request{service: topology.Orders, method: http.MethodGet, path: ordersapi.PathReconciliation}, &out)
	return out, err
}

// OrderReconciliation checks one order against fulfillment and the gateway, whenever it last
// changed: GET {orders}/admin/reconciliation?order_id=ID (what a trace asks: no whole run).
func (c *Client) OrderReconciliation(ctx context.Context, orderID string) (Reconciliation, error) {
	var out Reconciliation
	err := c.do(ctx, request{service: topology.Orders, method: http.MethodGet, path: ordersapi.PathReconciliation,
		query: url.Values{"order_id": {orderID}}}, &out)
	return out, err
}

// Audit runs both checks as Cloud Scheduler does: POST {orders}/admin/audit, which also logs what
// it finds and sets orders' gauges (the alerts).
func (c *Client) Audit(ctx context.Context) (AuditReport, error) {
	var out AuditReport
	err := c.do(ctx, request{service: topology.Orders, method: http.MethodPost, path: ordersapi.PathAudit}, &out)
	return out, err
}
