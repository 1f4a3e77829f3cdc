// Package httpapi is the gateway's HTTP surface: the providers' webhooks (public, authenticated by
// the providers' signatures), and the operators' reads of payments and the reconciliation sweep
// (behind an operator's ID token, as Cloud Scheduler presents one). Its answers are the wire types
// of services/gateway-abstraction/api, which its clients decode too.
package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/services/gateway-abstraction/api"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/app"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/payment"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/provider"
)

// ErrorMapper maps the domain and use-case errors to statuses, for platform.ServerOptions. A
// webhook that does not verify is 400 (what Stripe's documentation asks receivers to answer):
// the provider's retries of a forged callback stop being a problem of ours.
var ErrorMapper = platform.MapErrors(map[error]int{
	payment.ErrNotFound:          http.StatusNotFound,
	payment.ErrInvalid:           http.StatusBadRequest,
	app.ErrUnknownProvider:       http.StatusNotFound,
	provider.ErrSignature:        http.StatusBadRequest,
	provider.ErrMalformed:        http.StatusBadRequest,
	provider.ErrNotFound:         http.StatusNotFound,
	payment.ErrIllegalTransition: http.StatusConflict,
})

// Register adds the routes to e; operators guards the operators' routes.
func Register(e *echo.Echo, svc *app.Service, operators echo.MiddlewareFunc) {
	h := &handler{svc: svc}
	e.POST(api.PathWebhooks+"/:provider", h.webhook)
	e.POST(api.PathSweep, h.sweep, operators)
	e.GET(api.PathPayments, h.listPayments, operators)
	e.GET(api.PathPayments+"/:id", h.getPayment, operators)
}

type handler struct {
	svc *app.Service
}

func (h *handler) webhook(c echo.Context) error {
	name := c.Param("provider")
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return err
	}
	var notes []string
	ctx := app.WithNotes(c.Request().Context(), func(_ context.Context, n string) { notes = append(notes, n) })
	res, err := h.svc.HandleWebhook(ctx, name, c.Request().Header, body)
	log := platform.Logger(ctx).With(zap.String("provider", name))
	if len(notes) > 0 {
		log = log.With(zap.Strings("notes", notes))
	}
	if err != nil {
		if errors.Is(err, provider.ErrSignature) || errors.Is(err, provider.ErrMalformed) {
			log.Warn("webhook refused", zap.Error(err))
		}
		return err
	}
	log.Info("webhook", zap.String("result", string(res)))
	return c.JSON(http.StatusOK, api.WebhookResult{Result: string(res)})
}

// sweep is POST /admin/sweep. Its log line carries what the sweep decided about each payment
// (the use cases' notes: a late webhook found, a refund paid out or still pending, a conflict).
func (h *handler) sweep(c echo.Context) error {
	var notes []string
	ctx := app.WithNotes(c.Request().Context(), func(_ context.Context, n string) { notes = append(notes, n) })
	rep, err := h.svc.Sweep(ctx)
	if err != nil {
		return err
	}
	log := platform.Logger(ctx).With(zap.Int("resumed", rep.Resumed), zap.Int("checked", rep.Checked),
		zap.Int("changed", rep.Changed), zap.Int("refunds_pending", rep.RefundsPending))
	if len(notes) > 0 {
		log = log.With(zap.Strings("notes", notes))
	}
	if len(rep.Failures) > 0 {
		log.Warn("sweep left work for the next one", zap.Strings("failures", rep.Failures))
	} else {
		log.Info("sweep")
	}
	return c.JSON(http.StatusOK, api.Sweep{
		Resumed: rep.Resumed, Checked: rep.Checked, Changed: rep.Changed, RefundsPending: rep.RefundsPending, Failures: rep.Failures,
	})
}

func toPayment(p *payment.Payment) api.Payment {
	out := api.Payment{
		ID: p.ID(), OrderID: p.OrderID(), CustomerID: p.CustomerID(), Method: strings.ToLower(string(p.Method())),
		Provider: p.Method().Provider(), Status: string(p.Status()), AmountMinor: p.AmountMinor(), Currency: p.Currency(),
		ProviderPaymentID: p.ProviderPaymentID(), FailureReason: string(p.FailureReason()), Slip: p.Slip(),
		CancelRequested: p.CancelRequested(), Version: p.Version(),
	}
	if t := p.ExpiresAt(); !t.IsZero() {
		t = t.UTC()
		out.ExpiresAt = &t
	}
	return out
}

func (h *handler) getPayment(c echo.Context) error {
	p, err := h.svc.Payment(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toPayment(p))
}

func (h *handler) listPayments(c echo.Context) error {
	orderID := c.QueryParam("order_id")
	if orderID == "" {
		return platform.NewProblem(http.StatusBadRequest, "query parameter order_id is required")
	}
	ps, err := h.svc.PaymentsOfOrder(c.Request().Context(), orderID)
	if err != nil {
		return err
	}
	out := api.PaymentList{Payments: make([]api.Payment, len(ps))}
	for i, p := range ps {
		out.Payments[i] = toPayment(p)
	}
	return c.JSON(http.StatusOK, out)
}
