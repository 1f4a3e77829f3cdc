// Package httpapi is the public HTTP API of the fulfillment service (api/openapi.yaml): stock
// levels, order reservations, shipments, and the warehouse's actions on a shipment (ship, fail),
// which take a Google ID token of an allowed account (warehouse.go) and record that account on the
// shipment. It decodes requests, calls the use cases of package app and renders their answers in
// the wire types of services/fulfillment/api, which its clients decode too; errors are
// problem+json through the platform's error handler, with the domain's errors mapped by
// ErrorMapper.
package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/services/fulfillment/api"
	"github.com/spanmart/spanmart/services/fulfillment/internal/app"
	"github.com/spanmart/spanmart/services/fulfillment/internal/inventory"
	"github.com/spanmart/spanmart/services/fulfillment/internal/shipment"
)

// ErrorMapper maps domain errors to statuses, for platform.ServerOptions: unknown things are 404,
// requests that can never succeed 400, and a shipment that cannot take the action (it has moved
// on, or took it with other details) 409.
var ErrorMapper = platform.MapErrors(map[error]int{
	inventory.ErrNotFound:         http.StatusNotFound,
	inventory.ErrInvalid:          http.StatusBadRequest,
	shipment.ErrNotFound:          http.StatusNotFound,
	shipment.ErrInvalid:           http.StatusBadRequest,
	shipment.ErrIllegalTransition: http.StatusConflict,
	shipment.ErrConflict:          http.StatusConflict,
})

// Service is what the API needs of the use cases; *app.Service implements it.
type Service interface {
	ListStock(ctx context.Context) ([]inventory.Stock, error)
	Stock(ctx context.Context, sku string) (inventory.Stock, error)
	Reservation(ctx context.Context, orderID string) (app.Reservation, error)
	Shipment(ctx context.Context, id string) (*shipment.Shipment, error)
	ShipmentsOfOrder(ctx context.Context, orderID string) ([]*shipment.Shipment, error)
	Ship(ctx context.Context, id, carrier, trackingNumber, by string) (*shipment.Shipment, bool, error)
	Fail(ctx context.Context, id, reason, by string) (*shipment.Shipment, bool, error)
}

var _ Service = (*app.Service)(nil)

// Register adds the public routes to e. The warehouse's actions take the ID tokens warehouses
// allows (its accounts are the warehouses' and the operators'; nil allows nobody).
func Register(e *echo.Echo, svc Service, warehouses *outboxlib.Verifier) {
	h := &handler{svc: svc}
	warehouse := warehouseOnly(warehouses)
	e.GET(api.PathInventory, h.listInventory)
	e.GET(api.PathInventory+"/:sku", h.getInventory)
	e.GET(api.PathReservations+"/:order_id", h.getReservation)
	e.GET(api.PathShipments, h.listShipments)
	e.GET(api.PathShipments+"/:id", h.getShipment)
	e.POST(api.PathShipments+"/:id/ship", h.ship, warehouse)
	e.POST(api.PathShipments+"/:id/fail", h.fail, warehouse)
}

type handler struct {
	svc Service
}

func stockJSON(s inventory.Stock) api.Stock {
	return api.Stock{SKU: s.SKU(), OnHand: s.OnHand(), Reserved: s.Reserved(), Available: s.Available()}
}

func shipmentJSON(s *shipment.Shipment) api.Shipment {
	out := api.Shipment{
		ShipmentID: s.ID(), OrderID: s.OrderID(), Status: string(s.Status()), Version: s.Version(),
		Carrier: optional(s.Carrier()), TrackingNumber: optional(s.TrackingNumber()), FailureReason: optional(s.FailureReason()),
		ShippedBy: optional(s.ShippedBy()), FailedBy: optional(s.FailedBy()),
		Lines: []api.ShipmentLine{}, CreatedAt: s.CreatedAt().UTC(), UpdatedAt: s.UpdatedAt().UTC(),
	}
	for _, l := range s.Lines() {
		out.Lines = append(out.Lines, api.ShipmentLine{SKU: l.SKU, Quantity: l.Quantity})
	}
	if t := s.ShippedAt(); !t.IsZero() {
		t = t.UTC()
		out.ShippedAt = &t
	}
	return out
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (h *handler) listInventory(c echo.Context) error {
	stock, err := h.svc.ListStock(c.Request().Context())
	if err != nil {
		return err
	}
	out := api.StockList{Items: make([]api.Stock, 0, len(stock))}
	for _, s := range stock {
		out.Items = append(out.Items, stockJSON(s))
	}
	return c.JSON(http.StatusOK, out)
}

func (h *handler) getInventory(c echo.Context) error {
	s, err := h.svc.Stock(c.Request().Context(), c.Param("sku"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, stockJSON(s))
}

func (h *handler) getReservation(c echo.Context) error {
	r, err := h.svc.Reservation(c.Request().Context(), c.Param("order_id"))
	if err != nil {
		return err
	}
	out := api.Reservation{
		OrderID: r.OrderID, Status: string(r.Status), Version: r.Version, Lines: make([]api.ReservationLine, 0, len(r.Lines)),
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
	for _, l := range r.Lines {
		out.Lines = append(out.Lines, api.ReservationLine{SKU: l.SKU, Quantity: l.Quantity, Status: l.Status})
	}
	return c.JSON(http.StatusOK, out)
}

func (h *handler) listShipments(c echo.Context) error {
	if _, ok := c.QueryParams()["order_id"]; !ok {
		return platform.NewProblem(http.StatusBadRequest, "query parameter order_id is required")
	}
	ss, err := h.svc.ShipmentsOfOrder(c.Request().Context(), c.QueryParam("order_id"))
	if err != nil {
		return err
	}
	out := api.ShipmentList{Items: make([]api.Shipment, 0, len(ss))}
	for _, s := range ss {
		out.Items = append(out.Items, shipmentJSON(s))
	}
	return c.JSON(http.StatusOK, out)
}

func (h *handler) getShipment(c echo.Context) error {
	s, err := h.svc.Shipment(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, shipmentJSON(s))
}

// ship and fail answer 200 with the shipment, whether this request moved it or an identical one
// did before (by the same account or another: the shipment keeps the first).
func (h *handler) ship(c echo.Context) error {
	var req api.ShipRequest
	return h.act(c, &req, func(ctx context.Context, id string) (*shipment.Shipment, bool, error) {
		return h.svc.Ship(ctx, id, req.Carrier, req.TrackingNumber, outboxlib.CallerOf(ctx))
	})
}

func (h *handler) fail(c echo.Context) error {
	var req api.FailRequest
	return h.act(c, &req, func(ctx context.Context, id string) (*shipment.Shipment, bool, error) {
		return h.svc.Fail(ctx, id, req.Reason, outboxlib.CallerOf(ctx))
	})
}

// act decodes the body of a warehouse action into req and runs it on the shipment of the path.
func (h *handler) act(c echo.Context, req any, run func(ctx context.Context, id string) (*shipment.Shipment, bool, error)) error {
	if err := decode(c.Request().Body, req); err != nil {
		return err
	}
	s, _, err := run(c.Request().Context(), c.Param("id"))
	if err != nil {
		return asProblem(err)
	}
	return c.JSON(http.StatusOK, shipmentJSON(s))
}

// decode reads a request body strictly (platform.DecodeJSONStrict): unknown fields, a key given
// twice or in another case ("Carrier"), values of the wrong kind, invalid UTF-8 and trailing data
// are 400 in the API's words, so a typo ("tracking_no") is not silently a request without a
// tracking number and no problem shows a Go type name.
func decode(body io.Reader, v any) error {
	data, err := io.ReadAll(body)
	if err != nil {
		return err // an oversized body is the platform's 413, a short one its 400
	}
	if err := platform.DecodeJSONStrict(data, v); err != nil {
		return platform.NewProblem(http.StatusBadRequest, "request body is not valid: "+err.Error()).Wrap(err)
	}
	return nil
}

// asProblem gives validation errors their list of problems as the "errors" member.
func asProblem(err error) error {
	var ve *shipment.ValidationError
	if errors.As(err, &ve) {
		p := platform.NewProblem(http.StatusBadRequest, "the request is invalid")
		p.Extensions = map[string]any{"errors": ve.Problems}
		return p.Wrap(err)
	}
	return err
}
