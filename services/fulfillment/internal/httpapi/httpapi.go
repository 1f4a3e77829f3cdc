// Package httpapi is the public, read-only HTTP API of the fulfillment service (api/openapi.yaml):
// stock levels and order reservations. Errors are problem+json through the platform's error
// handler; ErrorMapper maps the domain's.
package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/services/fulfillment/internal/inventory"
	"github.com/spanmart/spanmart/services/fulfillment/internal/store"
)

// ErrorMapper maps domain errors to statuses, for platform.ServerOptions.
var ErrorMapper = platform.MapErrors(map[error]int{
	inventory.ErrNotFound: http.StatusNotFound,
	inventory.ErrInvalid:  http.StatusBadRequest,
})

// Reads is what the API reads; store.Reads implements it.
type Reads interface {
	ListStock(ctx context.Context) ([]inventory.Stock, error)
	Stock(ctx context.Context, sku string) (inventory.Stock, error)
	Reservation(ctx context.Context, orderID string) (store.Reservation, error)
}

// Register adds the public routes to e.
func Register(e *echo.Echo, r Reads) {
	h := &handler{reads: r}
	e.GET("/v1/inventory", h.listInventory)
	e.GET("/v1/inventory/:sku", h.getInventory)
	e.GET("/v1/reservations/:order_id", h.getReservation)
}

type handler struct {
	reads Reads
}

// Stock is the representation of a SKU's stock level.
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

// Reservation is the representation of an order's reservation.
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

func stockJSON(s inventory.Stock) Stock {
	return Stock{SKU: s.SKU(), OnHand: s.OnHand(), Reserved: s.Reserved(), Available: s.Available()}
}

func (h *handler) listInventory(c echo.Context) error {
	stock, err := h.reads.ListStock(c.Request().Context())
	if err != nil {
		return err
	}
	out := StockList{Items: make([]Stock, 0, len(stock))}
	for _, s := range stock {
		out.Items = append(out.Items, stockJSON(s))
	}
	return c.JSON(http.StatusOK, out)
}

func (h *handler) getInventory(c echo.Context) error {
	sku := c.Param("sku")
	if sku == "" || len(sku) > 64 {
		return platform.NewProblem(http.StatusNotFound, "unknown sku")
	}
	s, err := h.reads.Stock(c.Request().Context(), sku)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, stockJSON(s))
}

func (h *handler) getReservation(c echo.Context) error {
	id := c.Param("order_id")
	if id == "" || len(id) > 36 {
		return platform.NewProblem(http.StatusNotFound, "no reservation for this order")
	}
	r, err := h.reads.Reservation(c.Request().Context(), id)
	if err != nil {
		return err
	}
	out := Reservation{
		OrderID: r.OrderID, Status: r.Status, Version: r.Version, Lines: make([]ReservationLine, 0, len(r.Lines)),
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
	for _, l := range r.Lines {
		out.Lines = append(out.Lines, ReservationLine{SKU: l.SKU, Quantity: l.Quantity, Status: l.Status})
	}
	return c.JSON(http.StatusOK, out)
}
