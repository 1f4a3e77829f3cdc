package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/services/orders/api"
	"github.com/spanmart/spanmart/services/orders/internal/app"
	"github.com/spanmart/spanmart/services/orders/internal/order"
)

// RegisterAdmin adds the operators' routes to e, each guarded by operators (the event consumer's
// OperatorsOnly: a Google ID token of an account in ADMIN_ALLOWED_EMAILS): the audit's, and the
// read of any order (the console's and spanmartctl's trace), which the public GET /v1/orders/{id}
// answers for its own customer only.
func RegisterAdmin(e *echo.Echo, svc *app.Service, audit *app.Audit, operators echo.MiddlewareFunc) {
	h := &adminHandler{svc: svc, audit: audit}
	e.GET(api.PathStuckOrders, h.stuckOrders, operators)
	e.GET(api.PathReconciliation, h.reconciliation, operators)
	e.POST(api.PathAudit, h.run, operators)
	e.GET(api.PathAdminOrders+"/:id", h.order, operators)
}

type adminHandler struct {
	svc   *app.Service
	audit *app.Audit
}

// order is GET /admin/orders/{id}: the representation of GET /v1/orders/{id}, timeline included,
// whoever the customer.
func (h *adminHandler) order(c echo.Context) error {
	o, timeline, err := h.svc.Order(c.Request().Context(), orderID(c))
	if err != nil {
		return asProblem(err)
	}
	return c.JSON(http.StatusOK, toOrder(o, timeline))
}

func toStuckReport(r app.StuckReport) api.StuckReport {
	out := api.StuckReport{
		CheckedAt: r.At.UTC(), StuckAfter: map[string]string{}, Counts: map[string]int{},
		Truncated: statuses(r.Truncated), Orders: make([]api.StuckOrder, 0, len(r.Orders)),
	}
	for s, d := range r.StuckAfter {
		out.StuckAfter[string(s)] = d.String()
	}
	for s, n := range r.Counts {
		out.Counts[string(s)] = n
	}
	for _, o := range r.Orders {
		s := api.StuckOrder{
			OrderID: o.OrderID, CustomerID: o.CustomerID, Status: string(o.Status), Since: o.Since.UTC(),
			For: o.For.Truncate(time.Second).String(), ForSeconds: int64(o.For / time.Second), WaitingFor: o.WaitingFor,
			CancelReason: o.CancelReason,
		}
		for _, k := range o.Pending {
			s.PendingCompensations = append(s.PendingCompensations, string(k))
		}
		if !o.SlipExpiresAt.IsZero() {
			t := o.SlipExpiresAt.UTC()
			s.SlipExpiresAt = &t
		}
		out.Orders = append(out.Orders, s)
	}
	return out
}

func statuses(ss []order.Status) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

func toPeers(o app.Observed) (api.PeerFulfillment, api.PeerGateway) {
	f := api.PeerFulfillment{Error: o.ReservationError}
	if f.Error == "" && o.Reservation.Found {
		s := o.Reservation.Status
		f.Reservation = &s
	}
	g := api.PeerGateway{Error: o.PaymentsError}
	if g.Error == "" {
		g.Payments = make([]api.PeerPayment, len(o.Payments))
		for i, p := range o.Payments {
			g.Payments[i] = api.PeerPayment{ID: p.ID, Status: p.Status}
		}
	}
	return f, g
}

func toReconciliation(r app.Reconciliation) api.Reconciliation {
	if !r.Configured {
		return api.Reconciliation{Detail: "no peers to compare with: FULFILLMENT_URL and GATEWAY_URL are not set"}
	}
	out := api.Reconciliation{
		Configured: true, CheckedAt: r.At.UTC(), Window: api.Window{From: r.From.UTC(), To: r.To.UTC()}, Checked: r.Checked,
		Partial: r.Partial(), Truncated: statuses(r.Truncated), Mismatches: []api.Mismatch{}, Flagged: []api.Flagged{},
	}
	if out.Partial {
		out.Unchecked, out.Unreachable = r.Unchecked, r.Unreachable
	}
	for _, m := range r.Mismatches {
		f, g := toPeers(m.Observed)
		out.Mismatches = append(out.Mismatches, api.Mismatch{
			OrderID: m.OrderID, Status: string(m.Status), Since: m.Since.UTC(), Check: m.Check, Problems: m.Problems,
			Fulfillment: f, Gateway: g,
		})
	}
	for _, fl := range r.Flagged {
		f, g := toPeers(fl.Observed)
		out.Flagged = append(out.Flagged, api.Flagged{OrderID: fl.OrderID, Since: fl.Since.UTC(), AttentionReason: fl.Reason, Fulfillment: f, Gateway: g})
	}
	return out
}

func (h *adminHandler) stuckOrders(c echo.Context) error {
	rep, err := h.audit.StuckOrders(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toStuckReport(rep))
}

func (h *adminHandler) reconciliation(c echo.Context) error {
	if id := c.QueryParam("order_id"); id != "" {
		if _, err := uuid.Parse(id); err != nil || len(id) != 36 {
			return platform.NewProblem(http.StatusBadRequest, fmt.Sprintf("order_id %q is not a UUID", id))
		}
		rep, err := h.audit.ReconcileOrder(c.Request().Context(), id)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, toReconciliation(rep))
	}
	rep, err := h.audit.Reconcile(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toReconciliation(rep))
}

// run is POST /admin/audit: one ERROR line per stuck order, per order that needs attention, per
// mismatch and per peer that did not answer, so that a log-based alert fires on any of them with
// the order id in hand; the gauges are set by the audit.
func (h *adminHandler) run(c echo.Context) error {
	ctx := c.Request().Context()
	rep, err := h.audit.Run(ctx)
	if err != nil {
		return err
	}
	log := platform.Logger(ctx)
	for _, s := range rep.Stuck.Orders {
		fields := []zap.Field{
			zap.String("order_id", s.OrderID), zap.String("status", string(s.Status)), zap.Time("since", s.Since),
			zap.String("for", s.For.Truncate(time.Second).String()), zap.String("waiting_for", s.WaitingFor),
		}
		if s.CancelReason != "" {
			fields = append(fields, zap.String("cancel_reason", s.CancelReason))
		}
		if !s.SlipExpiresAt.IsZero() {
			fields = append(fields, zap.Time("slip_expires_at", s.SlipExpiresAt))
		}
		log.Error("stuck order", fields...)
	}
	if len(rep.Stuck.Truncated) > 0 {
		log.Warn("stuck orders truncated: more may be stuck", zap.Strings("statuses", statuses(rep.Stuck.Truncated)))
	}
	rec := rep.Reconciliation
	for _, m := range rec.Mismatches {
		log.Error("reconciliation mismatch", zap.String("order_id", m.OrderID), zap.String("status", string(m.Status)),
			zap.String("check", m.Check), zap.Strings("problems", m.Problems))
	}
	for _, f := range rec.Flagged {
		log.Error("order needs attention", zap.String("order_id", f.OrderID), zap.Time("since", f.Since),
			zap.String("reason", f.Reason))
	}
	for peer, msg := range rec.Unreachable {
		log.Error("reconciliation partial: a peer did not answer", zap.String("peer", peer),
			zap.Int("unchecked", rec.Unchecked[peer]), zap.String("error", msg))
	}
	if len(rec.Truncated) > 0 {
		log.Warn("reconciliation truncated: more orders settled in the window than one batch", zap.Strings("statuses", statuses(rec.Truncated)))
	}
	log.Info("audit", zap.Int("stuck", len(rep.Stuck.Orders)), zap.Bool("reconciliation_configured", rec.Configured),
		zap.Int("checked", rec.Checked), zap.Int("mismatches", len(rec.Mismatches)), zap.Int("flagged", len(rec.Flagged)),
		zap.Bool("partial", rec.Partial()))
	return c.JSON(http.StatusOK, api.AuditReport{Stuck: toStuckReport(rep.Stuck), Reconciliation: toReconciliation(rep.Reconciliation)})
}
