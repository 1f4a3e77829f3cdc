package app

import (
	"github.com/spanmart/spanmart/services/fulfillment/internal/inventory"
	"github.com/spanmart/spanmart/services/fulfillment/internal/shipment"
)

// The events fulfillment publishes: their types, aggregates and payloads (snake_case JSON, every
// payload carries order_id). This file is their one home.
const (
	// Aggregate "reservation", id = the order id: the stock decision of an order
	// (inventory.Reservation, whose version the events carry).
	AggregateReservation = "reservation"
	// Aggregate "shipment", id = the shipment id: a shipment emits one event, at version 1.
	AggregateShipment = "shipment"

	TypeInventoryReserved      = "inventory.reserved"
	TypeInventoryRejected      = "inventory.rejected"
	TypeInventoryReleased      = "inventory.released"
	TypeInventoryReleaseFailed = "inventory.release_failed"
	TypeShipmentShipped        = "shipment.shipped"
	TypeShipmentFailed         = "shipment.failed"
)

// Reasons in payloads.
const (
	// ReasonOutOfStock: inventory.rejected, some line did not fit.
	ReasonOutOfStock = "out_of_stock"
	// ReasonAlreadyShipped: inventory.release_failed, the order was cancelled after it shipped.
	ReasonAlreadyShipped = "already_shipped"
)

// Event is an event to append to the outbox: the store gives it an id, the time and the trace.
type Event struct {
	Type          string
	AggregateType string
	AggregateID   string
	Version       int64
	Payload       any // marshalled to JSON
}

// ReservedPayload is the payload of inventory.reserved and inventory.released.
type ReservedPayload struct {
	OrderID string     `json:"order_id"`
	Lines   []LineJSON `json:"lines"`
}

// LineJSON is a line of inventory.reserved, inventory.released and shipment.shipped.
type LineJSON struct {
	SKU      string `json:"sku"`
	Quantity int64  `json:"quantity"`
}

// RejectedPayload is the payload of inventory.rejected.
type RejectedPayload struct {
	OrderID string         `json:"order_id"`
	Reason  string         `json:"reason"`
	Short   []ShortageJSON `json:"short"`
}

// ShortageJSON is a line of inventory.rejected that does not fit.
type ShortageJSON struct {
	SKU       string `json:"sku"`
	Requested int64  `json:"requested"`
	Available int64  `json:"available"`
}

// ReleaseFailedPayload is the payload of inventory.release_failed.
type ReleaseFailedPayload struct {
	OrderID string `json:"order_id"`
	Reason  string `json:"reason"`
}

// ShippedPayload is the payload of shipment.shipped.
type ShippedPayload struct {
	ShipmentID     string     `json:"shipment_id"`
	OrderID        string     `json:"order_id"`
	Carrier        string     `json:"carrier"`
	TrackingNumber string     `json:"tracking_number"`
	Lines          []LineJSON `json:"lines"`
}

// ShipmentFailedPayload is the payload of shipment.failed.
type ShipmentFailedPayload struct {
	ShipmentID string `json:"shipment_id"`
	OrderID    string `json:"order_id"`
	Reason     string `json:"reason"`
}

func reservedEvent(r *inventory.Reservation) Event {
	return Event{Type: TypeInventoryReserved, AggregateType: AggregateReservation, AggregateID: r.OrderID(), Version: r.Version(),
		Payload: ReservedPayload{OrderID: r.OrderID(), Lines: linesJSON(r.Lines())}}
}

func rejectedEvent(r *inventory.Reservation, short []inventory.Shortage) Event {
	p := RejectedPayload{OrderID: r.OrderID(), Reason: ReasonOutOfStock}
	for _, s := range short {
		p.Short = append(p.Short, ShortageJSON{SKU: s.SKU, Requested: s.Requested, Available: s.Available})
	}
	return Event{Type: TypeInventoryRejected, AggregateType: AggregateReservation, AggregateID: r.OrderID(), Version: r.Version(), Payload: p}
}

// releasedEvent is inventory.released with the lines given back (none for a rejected order).
func releasedEvent(r *inventory.Reservation, released []inventory.Line) Event {
	return Event{Type: TypeInventoryReleased, AggregateType: AggregateReservation, AggregateID: r.OrderID(), Version: r.Version(),
		Payload: ReservedPayload{OrderID: r.OrderID(), Lines: linesJSON(released)}}
}

func releaseFailedEvent(r *inventory.Reservation) Event {
	return Event{Type: TypeInventoryReleaseFailed, AggregateType: AggregateReservation, AggregateID: r.OrderID(), Version: r.Version(),
		Payload: ReleaseFailedPayload{OrderID: r.OrderID(), Reason: ReasonAlreadyShipped}}
}

func shippedEvent(s *shipment.Shipment) Event {
	return Event{Type: TypeShipmentShipped, AggregateType: AggregateShipment, AggregateID: s.ID(), Version: 1,
		Payload: ShippedPayload{ShipmentID: s.ID(), OrderID: s.OrderID(), Carrier: s.Carrier(), TrackingNumber: s.TrackingNumber(), Lines: linesJSON(s.Lines())}}
}

func shipmentFailedEvent(s *shipment.Shipment) Event {
	return Event{Type: TypeShipmentFailed, AggregateType: AggregateShipment, AggregateID: s.ID(), Version: 1,
		Payload: ShipmentFailedPayload{ShipmentID: s.ID(), OrderID: s.OrderID(), Reason: s.FailureReason()}}
}

func linesJSON(lines []inventory.Line) []LineJSON {
	out := make([]LineJSON, 0, len(lines))
	for _, l := range lines {
		out = append(out, LineJSON{SKU: l.SKU, Quantity: l.Quantity})
	}
	return out
}
