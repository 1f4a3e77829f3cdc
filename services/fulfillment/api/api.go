// Package api is the wire format of the fulfillment service's HTTP API (openapi.yaml, beside this
// file): the request and response bodies, and the paths its Go clients call. It is the one
// definition of them: the service's internal/httpapi renders its domain into these types, and its
// clients (internal/adminclient, orders' reconciliation in services/orders/internal/peers) decode
// them, so a field the service adds is a field its clients have.
//
// It holds data only and imports nothing of the repository: a client takes the types without the
// service's internals, and the service cannot make them depend on its domain.
package api

import "time"

// Paths its clients call as they are. The routes with a path parameter are these followed by
// "/" and the parameter: /v1/inventory/{sku}, /v1/reservations/{order_id}, /v1/shipments/{id} (and
// its /ship and /fail).
const (
	PathInventory    = "/v1/inventory"    // GET: StockList
	PathReservations = "/v1/reservations" // GET /{order_id}: Reservation
	PathShipments    = "/v1/shipments"    // GET ?order_id=: ShipmentList
)

// Stock is a SKU's stock level (GET /v1/inventory/{sku}).
type Stock struct {
	SKU       string `json:"sku"`
	OnHand    int64  `json:"on_hand"`
	Reserved  int64  `json:"reserved"`
	Available int64  `json:"available"`
}

// StockList is the response of GET /v1/inventory.
type StockList struct {
	Items []Stock `json:"items"`
}

// Reservation is an order's reservation (GET /v1/reservations/{order_id}).
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

// Shipment is a shipment (GET /v1/shipments/{id}, and the answer of ship and fail). Carrier,
// TrackingNumber, ShippedAt and ShippedBy are null until it ships, FailureReason and FailedBy
// unless it failed. ShippedBy and FailedBy are who did it: the verified account of the request
// (a warehouse's, or an operator's), or "carrier-simulator" (null for a shipment moved before
// fulfillment recorded it).
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

// ShipmentList is the response of GET /v1/shipments?order_id=.
type ShipmentList struct {
	Items []Shipment `json:"items"`
}

// ShipRequest is the body of POST /v1/shipments/{id}/ship.
type ShipRequest struct {
	Carrier        string `json:"carrier"`
	TrackingNumber string `json:"tracking_number"`
}

// FailRequest is the body of POST /v1/shipments/{id}/fail.
type FailRequest struct {
	Reason string `json:"reason"`
}
