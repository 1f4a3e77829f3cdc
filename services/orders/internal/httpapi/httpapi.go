// Package httpapi is the public HTTP API of the orders service (api/openapi.yaml): routes, the
// rendering of orders in the wire types of services/orders/api (which its clients decode too),
// and the mapping of domain errors to problem+json statuses.
package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/services/orders/api"
	"github.com/spanmart/spanmart/services/orders/internal/app"
	"github.com/spanmart/spanmart/services/orders/internal/order"
)

// ErrorMapper maps the domain and use-case errors to statuses, for platform.ServerOptions.
// Request-only problems (shape, ranges, duplicates) are 400; problems that need the catalog or the
// stored key (unknown SKU, mixed currencies, a reused key) are 422.
var ErrorMapper = platform.MapErrors(map[error]int{
	order.ErrNotFound:          http.StatusNotFound,
	order.ErrInvalid:           http.StatusBadRequest,
	order.ErrIllegalTransition: http.StatusConflict,
	app.ErrUnknownProduct:      http.StatusUnprocessableEntity,
	app.ErrMixedCurrency:       http.StatusUnprocessableEntity,
	app.ErrPaymentCurrency:     http.StatusUnprocessableEntity,
	app.ErrIdempotencyConflict: http.StatusUnprocessableEntity,
	app.ErrOtherCustomer:       http.StatusForbidden,
})

// Register adds the public routes to e. The order routes take a signed-in customer (customers);
// the catalog is public.
func Register(e *echo.Echo, svc *app.Service, customers *Customers) {
	h := &handler{svc: svc}
	e.POST(api.PathOrders, h.placeOrder, customers.Middleware)
	e.GET(api.PathOrders+"/:id", h.getOrder, customers.Middleware)
	e.POST(api.PathOrders+"/:id/cancel", h.cancelOrder, customers.Middleware)
	e.GET(api.PathProducts, h.listProducts)
}

type handler struct {
	svc *app.Service
}

func toOrder(o *order.Order, timeline []app.TimelineEntry) api.Order {
	out := api.Order{
		ID: o.ID(), CustomerID: o.CustomerID(), Email: o.Email(), Status: string(o.Status()), Currency: o.Currency(),
		TotalMinor: o.TotalMinor(), Version: o.Version(), Payment: toPayment(o), Lines: []api.Line{},
		Language: string(o.Language()), AttentionReason: o.AttentionReason(),
	}
	if r := o.CancelReason(); r != "" {
		out.CancelReason = &r
	}
	if sh := o.Shipment(); sh != nil {
		out.Shipment = &api.Shipment{ShipmentID: sh.ID, Carrier: sh.Carrier, TrackingNumber: sh.TrackingNumber}
	}
	for _, c := range o.Compensations() {
		out.Compensations = append(out.Compensations, api.Compensation{Kind: string(c.Kind), State: string(c.State), Outcome: c.Outcome})
	}
	for _, l := range o.Lines() {
		out.Lines = append(out.Lines, api.Line{SKU: l.SKU, Quantity: l.Quantity, UnitPriceMinor: l.UnitPriceMinor, LineTotalMinor: l.Quantity * l.UnitPriceMinor})
	}
	for _, t := range timeline {
		out.Timeline = append(out.Timeline, api.TimelineEntry{
			Seq: t.Seq, Direction: t.Direction, EventType: t.EventType, EventID: t.EventID,
			AggregateType: t.AggregateType, AggregateVersion: t.AggregateVersion, At: t.At.UTC(),
		})
	}
	return out
}

// toPayment returns the order's payment, nil for an order placed before payments existed (unless
// the gateway issued it a slip all the same).
func toPayment(o *order.Order) *api.Payment {
	p, in := o.Payment(), o.PaymentInstructions()
	if p.IsZero() && in == nil {
		return nil
	}
	out := &api.Payment{Method: string(p.Method)}
	switch p.Method.DetailField() {
	case order.FieldPaymentMethod:
		out.PaymentMethod = p.Detail
	case order.FieldStore:
		out.Store = p.Detail
	}
	if in != nil {
		if out.Method == "" {
			out.Method = string(in.Method)
		}
		out.Instructions = &api.Instructions{
			Method: string(in.Method), Store: in.Store, PaymentCode: in.PaymentCode,
			ConfirmationCode: in.ConfirmationCode, InstructionsURL: in.InstructionsURL,
		}
		if b := in.Bank; b != nil {
			out.Instructions.Bank = &api.BankAccount{
				BankName: b.BankName, BranchName: b.BranchName, AccountType: b.AccountType,
				AccountNumber: b.AccountNumber, AccountHolder: b.AccountHolder,
			}
		}
		if !in.ExpiresAt.IsZero() {
			t := in.ExpiresAt.UTC()
			out.Instructions.ExpiresAt = &t
		}
	}
	return out
}

func location(id string) string { return api.PathOrders + "/" + id }

func (h *handler) placeOrder(c echo.Context) error {
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	req, err := decode(c.Request())
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	resp, err := h.svc.PlaceOrder(ctx, CustomerOf(ctx), key, req, func(o *order.Order) (int, []byte, error) {
		body, err := json.Marshal(toOrder(o, nil))
		return http.StatusCreated, body, err
	})
	if err != nil {
		return asProblem(err)
	}
	if resp.OrderID != "" {
		c.Response().Header().Set(echo.HeaderLocation, location(resp.OrderID))
	}
	return reply(c, resp)
}

func idempotencyKey(c echo.Context) (string, error) {
	key := c.Request().Header.Get(api.HeaderIdempotencyKey)
	if key == "" || len(key) > app.MaxIdempotencyKeyLen {
		return "", platform.NewProblem(http.StatusBadRequest, fmt.Sprintf("header %s is required (1 to %d characters)", api.HeaderIdempotencyKey, app.MaxIdempotencyKeyLen))
	}
	return key, nil
}

func reply(c echo.Context, resp app.Response) error {
	if resp.Replayed {
		c.Response().Header().Set(api.HeaderIdempotentReplayed, "true")
	}
	return c.JSONBlob(resp.Status, resp.Body)
}

// cancelOrder is the customer's cancellation: 202 with the order CANCELLING (compensation runs
// asynchronously), 200 with the order as it is if it is already cancelling or cancelled, 409 once
// it has shipped. The body, if any, must be an empty JSON object (reserved for later options).
func (h *handler) cancelOrder(c echo.Context) error {
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	data, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return err // the platform's 400, 408 or 413
	}
	if len(bytes.TrimSpace(data)) > 0 {
		if err := platform.RequireJSON(c.Request()); err != nil {
			return err
		}
		var empty struct{}
		if err := platform.DecodeJSONStrict(data, &empty); err != nil {
			return platform.NewProblem(http.StatusBadRequest, "a cancellation takes no body, or an empty JSON object").Wrap(err)
		}
	}
	ctx := c.Request().Context()
	resp, err := h.svc.CancelOrder(ctx, CustomerOf(ctx), key, orderID(c), func(o *order.Order) (int, []byte, error) {
		status := http.StatusOK
		if o.Changed() {
			status = http.StatusAccepted
		}
		body, err := json.Marshal(toOrder(o, nil))
		return status, body, err
	})
	var te *order.TransitionError
	if errors.As(err, &te) {
		p := platform.NewProblem(http.StatusConflict, fmt.Sprintf("order %s is %s: it can be cancelled only before it ships", te.ID, te.From))
		p.Extensions = map[string]any{"status": string(te.From)}
		return p.Wrap(err)
	}
	if err != nil {
		return asProblem(err)
	}
	return reply(c, resp)
}

// decode reads the request body strictly (platform.DecodeJSONStrict): a JSON body (415 for any
// other Content-Type), valid UTF-8, every key once and spelled exactly, no unknown fields, values
// of the right kinds, nothing after the object; so a typo ("quantitiy") is not silently an order
// for zero items and "customer_id" given twice is not whichever came last. Problems are worded by
// JSON path ("lines[0].quantity must be an integer, got a string"), never by Go type.
func decode(r *http.Request) (app.PlaceOrderRequest, error) {
	var req app.PlaceOrderRequest
	if err := platform.RequireJSON(r); err != nil {
		return req, err
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return req, err // the platform's 400, 408 or 413
	}
	if err := platform.DecodeJSONStrict(data, &req); err != nil {
		return req, platform.NewProblem(http.StatusBadRequest, "request body is not a valid order: "+err.Error()).Wrap(err)
	}
	return req, nil
}

// orderID is the {id} of the path in lower case: order ids are lower-case UUIDs, and a UUID's
// hex digits may be written in either case (RFC 9562 §4).
func orderID(c echo.Context) string { return strings.ToLower(c.Param("id")) }

// asProblem gives validation errors their list of problems as the "errors" member.
func asProblem(err error) error {
	var ve *order.ValidationError
	if errors.As(err, &ve) {
		p := platform.NewProblem(http.StatusBadRequest, "the order request is invalid")
		p.Extensions = map[string]any{"errors": ve.Problems}
		return p.Wrap(err)
	}
	return err
}

// getOrder is the customer's read of its order; another customer's order is a 404 with the body
// of an unknown order's.
func (h *handler) getOrder(c echo.Context) error {
	ctx := c.Request().Context()
	o, timeline, err := h.svc.CustomerOrder(ctx, CustomerOf(ctx), orderID(c))
	if err != nil {
		return asProblem(err)
	}
	return c.JSON(http.StatusOK, toOrder(o, timeline))
}

func (h *handler) listProducts(c echo.Context) error {
	ps, err := h.svc.Products(c.Request().Context())
	if err != nil {
		return err
	}
	out := api.ProductList{Products: []api.Product{}}
	for _, p := range ps {
		out.Products = append(out.Products, api.Product{SKU: p.SKU, Name: p.Name, Description: p.Description, PriceMinor: p.PriceMinor, Currency: p.Currency})
	}
	return c.JSON(http.StatusOK, out)
}
