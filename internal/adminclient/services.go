package adminclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/spanmart/spanmart/internal/topology"
	fulfillmentapi "github.com/spanmart/spanmart/services/fulfillment/api"
	gatewayapi "github.com/spanmart/spanmart/services/gateway-abstraction/api"
	notificationsapi "github.com/spanmart/spanmart/services/notifications/api"
)

// The services' answers are their own wire types (services/<svc>/api), the ones they encode:
// these names are aliases of them, so the client has every field a service writes.

// Payment is one of the gateway's payments.
type Payment = gatewayapi.Payment

// PaymentSweep is what one sweep of the gateway did (POST /admin/sweep).
type PaymentSweep = gatewayapi.Sweep

// Notification is one of the notifications service's e-mails of an order (no recipient, no body).
type Notification = notificationsapi.Notification

// NotificationSweep is what one sweep of the notifications service did (POST /admin/sweep).
type NotificationSweep = notificationsapi.Sweep

// Reservation is fulfillment's reservation of an order.
type Reservation = fulfillmentapi.Reservation

// ReservationLine is one SKU of a reservation.
type ReservationLine = fulfillmentapi.ReservationLine

// Shipment is one of fulfillment's shipments. Carrier, TrackingNumber, ShippedAt and ShippedBy are
// nil until it ships, FailureReason and FailedBy unless it failed. ShippedBy and FailedBy are who
// did it: the warehouse's (or an operator's) verified account, or "carrier-simulator".
type Shipment = fulfillmentapi.Shipment

// ShipmentLine is one SKU of a shipment.
type ShipmentLine = fulfillmentapi.ShipmentLine

// Payments lists the gateway's payments of an order: GET {gateway}/admin/payments?order_id=.
func (c *Client) Payments(ctx context.Context, orderID string) ([]Payment, error) {
	var out gatewayapi.PaymentList
	err := c.do(ctx, request{service: topology.Gateway, method: http.MethodGet, path: gatewayapi.PathPayments,
		query: url.Values{"order_id": {orderID}}}, &out)
	return out.Payments, err
}

// SweepPayments runs the gateway's sweep now (what Cloud Scheduler does): POST {gateway}/admin/sweep.
func (c *Client) SweepPayments(ctx context.Context) (PaymentSweep, error) {
	var out PaymentSweep
	err := c.do(ctx, request{service: topology.Gateway, method: http.MethodPost, path: gatewayapi.PathSweep}, &out)
	return out, err
}

// Notifications lists the notifications of an order: GET {notifications}/admin/notifications?order_id=.
func (c *Client) Notifications(ctx context.Context, orderID string) ([]Notification, error) {
	var out notificationsapi.NotificationList
	err := c.do(ctx, request{service: topology.Notifications, method: http.MethodGet, path: notificationsapi.PathNotifications,
		query: url.Values{"order_id": {orderID}}}, &out)
	return out.Notifications, err
}

// SweepNotifications runs the notifications service's sweep now: POST {notifications}/admin/sweep.
func (c *Client) SweepNotifications(ctx context.Context) (NotificationSweep, error) {
	var out NotificationSweep
	err := c.do(ctx, request{service: topology.Notifications, method: http.MethodPost, path: notificationsapi.PathSweep}, &out)
	return out, err
}

// Reservation reads fulfillment's GET /v1/reservations/{order_id}; none is ErrNotFound.
func (c *Client) Reservation(ctx context.Context, orderID string) (Reservation, error) {
	var out Reservation
	err := c.do(ctx, request{service: topology.Fulfillment, method: http.MethodGet, path: fulfillmentapi.PathReservations + "/" + url.PathEscape(orderID)}, &out)
	return out, err
}

// Shipments lists fulfillment's shipments of an order: GET {fulfillment}/v1/shipments?order_id=.
func (c *Client) Shipments(ctx context.Context, orderID string) ([]Shipment, error) {
	var out fulfillmentapi.ShipmentList
	err := c.do(ctx, request{service: topology.Fulfillment, method: http.MethodGet, path: fulfillmentapi.PathShipments,
		query: url.Values{"order_id": {orderID}}}, &out)
	return out.Items, err
}
