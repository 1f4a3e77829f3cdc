package adminclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/spanmart/spanmart/internal/topology"
)

// Payment is one of the gateway's payments (services/gateway-abstraction/internal/httpapi.Payment).
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
	CancelRequested   bool            `json:"cancel_requested"`
	Version           int64           `json:"version"`
}

// PaymentSweep is what one sweep of the gateway did (POST /admin/sweep).
type PaymentSweep struct {
	Resumed  int      `json:"resumed"`  // unfinished intents carried out
	Checked  int      `json:"checked"`  // payments the provider was asked about
	Changed  int      `json:"changed"`  // of those, payments that moved
	Failures []string `json:"failures"` // what could not be done (retried by the next sweep)
}

// Notification is one of the notifications service's e-mails of an order
// (services/notifications/internal/httpapi.Notification: no recipient, no body).
type Notification struct {
	EventID       string     `json:"event_id"`
	EventType     string     `json:"event_type"`
	Template      string     `json:"template"`
	Language      string     `json:"language"`
	Subject       string     `json:"subject"`
	Status        string     `json:"status"`
	Attempts      int64      `json:"attempts"`
	LastError     string     `json:"last_error,omitempty"`
	MessageID     string     `json:"message_id"`
	CreatedAt     time.Time  `json:"created_at"`
	SentAt        *time.Time `json:"sent_at,omitempty"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
}

// NotificationSweep is what one sweep of the notifications service did (POST /admin/sweep).
type NotificationSweep struct {
	Resumed  int      `json:"resumed"`
	Sent     int      `json:"sent"`
	Bounced  int      `json:"bounced"`
	Failed   int      `json:"failed"`
	Retry    int      `json:"retry"`
	Failures []string `json:"failures"`
}

// Reservation is fulfillment's reservation of an order (services/fulfillment/internal/httpapi).
type Reservation struct {
	OrderID   string            `json:"order_id"`
	Status    string            `json:"status"`
	Version   int64             `json:"version"`
	Lines     []ReservationLine `json:"lines"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
}

// ReservationLine is one SKU of a reservation.
type ReservationLine struct {
	SKU      string `json:"sku"`
	Quantity int64  `json:"quantity"`
	Status   string `json:"status"`
}

// Shipment is one of fulfillment's shipments. Carrier, TrackingNumber, ShippedAt and ShippedBy are
// nil until it ships, FailureReason and FailedBy unless it failed. ShippedBy and FailedBy are who
// did it: the warehouse's (or an operator's) verified account, or "carrier-simulator".
type Shipment struct {
	ShipmentID     string         `json:"shipment_id"`
	OrderID        string         `json:"order_id"`
	Status         string         `json:"status"`
	Version        int64          `json:"version"`
	Carrier        *string        `json:"carrier"`
	TrackingNumber *string        `json:"tracking_number"`
	FailureReason  *string        `json:"failure_reason"`
	ShippedBy      *string        `json:"shipped_by"`
	FailedBy       *string        `json:"failed_by"`
	Lines          []ShipmentLine `json:"lines"`
	CreatedAt      time.Time      `json:"created_at"`
	UpdatedAt      time.Time      `json:"updated_at"`
	ShippedAt      *time.Time     `json:"shipped_at"`
}

// ShipmentLine is one SKU of a shipment.
type ShipmentLine struct {
	SKU      string `json:"sku"`
	Quantity int64  `json:"quantity"`
}

// Payments lists the gateway's payments of an order: GET {gateway}/admin/payments?order_id=.
func (c *Client) Payments(ctx context.Context, orderID string) ([]Payment, error) {
	var out struct {
		Payments []Payment `json:"payments"`
	}
	err := c.do(ctx, request{service: topology.Gateway, method: http.MethodGet, path: "/admin/payments",
		query: url.Values{"order_id": {orderID}}}, &out)
	return out.Payments, err
}

// SweepPayments runs the gateway's sweep now (what Cloud Scheduler does): POST {gateway}/admin/sweep.
func (c *Client) SweepPayments(ctx context.Context) (PaymentSweep, error) {
	var out PaymentSweep
	err := c.do(ctx, request{service: topology.Gateway, method: http.MethodPost, path: "/admin/sweep"}, &out)
	return out, err
}

// Notifications lists the notifications of an order: GET {notifications}/admin/notifications?order_id=.
func (c *Client) Notifications(ctx context.Context, orderID string) ([]Notification, error) {
	var out struct {
		Notifications []Notification `json:"notifications"`
	}
	err := c.do(ctx, request{service: topology.Notifications, method: http.MethodGet, path: "/admin/notifications",
		query: url.Values{"order_id": {orderID}}}, &out)
	return out.Notifications, err
}

// SweepNotifications runs the notifications service's sweep now: POST {notifications}/admin/sweep.
func (c *Client) SweepNotifications(ctx context.Context) (NotificationSweep, error) {
	var out NotificationSweep
	err := c.do(ctx, request{service: topology.Notifications, method: http.MethodPost, path: "/admin/sweep"}, &out)
	return out, err
}

// Reservation reads fulfillment's GET /v1/reservations/{order_id}; none is ErrNotFound.
func (c *Client) Reservation(ctx context.Context, orderID string) (Reservation, error) {
	var out Reservation
	err := c.do(ctx, request{service: topology.Fulfillment, method: http.MethodGet, path: "/v1/reservations/" + url.PathEscape(orderID)}, &out)
	return out, err
}

// Shipments lists fulfillment's shipments of an order: GET {fulfillment}/v1/shipments?order_id=.
func (c *Client) Shipments(ctx context.Context, orderID string) ([]Shipment, error) {
	var out struct {
		Items []Shipment `json:"items"`
	}
	err := c.do(ctx, request{service: topology.Fulfillment, method: http.MethodGet, path: "/v1/shipments",
		query: url.Values{"order_id": {orderID}}}, &out)
	return out.Items, err
}
