package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/services/orders/internal/app"
	"github.com/spanmart/spanmart/services/orders/internal/order"
)

// Operator routes (README, "Stuck orders and reconciliation").
const (
	PathStuckOrders    = "/admin/stuck-orders"   // GET: the detector, live
	PathReconciliation = "/admin/reconciliation" // GET: the reconciliation, live
	PathAudit          = "/admin/audit"          // POST: both, logged and published as gauges (Cloud Scheduler)
	PathOrder          = "/admin/orders/:id"     // GET: any customer's order, with its timeline
)

// RegisterAdmin adds the operators' routes to e, each guarded by operators (the event consumer's
// OperatorsOnly: a Google ID token of an account in ADMIN_ALLOWED_EMAILS): the audit's, and the
// read of any order (the console's and spanmartctl's trace), which the public GET /v1/orders/{id}
// answers for its own customer only.
func RegisterAdmin(e *echo.Echo, svc *app.Service, audit *app.Audit, operators echo.MiddlewareFunc) {
	h := &adminHandler{svc: svc, audit: audit}
	e.GET(PathStuckOrders, h.stuckOrders, operators)
	e.GET(PathReconciliation, h.reconciliation, operators)
	e.POST(PathAudit, h.run, operators)
	e.GET(PathOrder, h.order, operators)
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

// StuckOrder is a stuck order in the detector's report.
type StuckOrder struct {
	OrderID    string    `json:"order_id"`
	CustomerID string    `json:"customer_id"`
	Status     string    `json:"status"`
	Since      time.Time `json:"since"`
	For        string    `json:"for"` // a Go duration, to the second: "1h2m3s"
	ForSeconds int64     `json:"for_seconds"`
	WaitingFor string    `json:"waiting_for"`
	// PendingCompensations are a cancelling order's compensations still pending (stock, payment).
	PendingCompensations []order.CompensationKind `json:"pending_compensations,omitempty"`
	CancelReason         string                   `json:"cancel_reason,omitempty"`
	SlipExpiresAt        *time.Time               `json:"slip_expires_at,omitempty"`
}

// StuckReport is the response of GET /admin/stuck-orders.
type StuckReport struct {
	CheckedAt  time.Time         `json:"checked_at"`
	StuckAfter map[string]string `json:"stuck_after"` // by status, Go durations
	Counts     map[string]int    `json:"counts"`      // by watched status
	// Truncated lists the statuses whose list stopped at the limit: more orders may be stuck.
	Truncated []string     `json:"truncated"`
	Orders    []StuckOrder `json:"orders"`
}

// Fulfillment is what fulfillment said about an order: its reservation's status (null: none), or
// why it did not answer.
type Fulfillment struct {
	Reservation *string `json:"reservation"`
	Error       string  `json:"error,omitempty"`
}

// Gateway is what the gateway said about an order: its payments (null when it did not answer),
// or why it did not answer.
type Gateway struct {
	Payments []PeerPayment `json:"payments"`
	Error    string        `json:"error,omitempty"`
}

// PeerPayment is one of the gateway's payments of an order.
type PeerPayment struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// Mismatch is a settled order the peers' records contradict.
type Mismatch struct {
	OrderID     string      `json:"order_id"`
	Status      string      `json:"status"`
	Since       time.Time   `json:"since"`
	Check       string      `json:"check"`
	Problems    []string    `json:"problems"`
	Fulfillment Fulfillment `json:"fulfillment"`
	Gateway     Gateway     `json:"gateway"`
}

// Flagged is an order NEEDS_ATTENTION, with what the peers say.
type Flagged struct {
	OrderID         string      `json:"order_id"`
	Since           time.Time   `json:"since"`
	AttentionReason string      `json:"attention_reason"`
	Fulfillment     Fulfillment `json:"fulfillment"`
	Gateway         Gateway     `json:"gateway"`
}

// Window bounds the orders a reconciliation compared: last changed in [from, to).
type Window struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// Reconciliation is the response of GET /admin/reconciliation. Without peers it is only
// {"configured": false, "detail": ...}.
type Reconciliation struct {
	Configured bool      `json:"configured"`
	Detail     string    `json:"detail,omitempty"`
	CheckedAt  time.Time `json:"checked_at,omitzero"`
	Window     Window    `json:"window,omitzero"`
	Checked    *int      `json:"checked,omitzero"` // orders both peers answered for
	// Partial is true when a peer did not answer for some order: Unchecked counts those orders by
	// peer, Unreachable gives each such peer's first error.
	Partial     *bool             `json:"partial,omitzero"`
	Unchecked   map[string]int    `json:"unchecked,omitempty"`
	Unreachable map[string]string `json:"unreachable,omitempty"`
	// Truncated lists the statuses with more settled orders in the window than one batch.
	Truncated  []string   `json:"truncated,omitzero"`
	Mismatches []Mismatch `json:"mismatches,omitzero"`
	Flagged    []Flagged  `json:"flagged,omitzero"`
}

// AuditReport is the response of POST /admin/audit.
type AuditReport struct {
	Stuck          StuckReport    `json:"stuck"`
	Reconciliation Reconciliation `json:"reconciliation"`
}

func toStuckReport(r app.StuckReport) StuckReport {
	out := StuckReport{
		CheckedAt: r.At.UTC(), StuckAfter: map[string]string{}, Counts: map[string]int{},
		Truncated: statuses(r.Truncated), Orders: make([]StuckOrder, 0, len(r.Orders)),
	}
	for s, d := range r.StuckAfter {
		out.StuckAfter[string(s)] = d.String()
	}
	for s, n := range r.Counts {
		out.Counts[string(s)] = n
	}
	for _, o := range r.Orders {
		s := StuckOrder{
			OrderID: o.OrderID, CustomerID: o.CustomerID, Status: string(o.Status), Since: o.Since.UTC(),
			For: o.For.Truncate(time.Second).String(), ForSeconds: int64(o.For / time.Second), WaitingFor: o.WaitingFor,
			PendingCompensations: o.Pending, CancelReason: o.CancelReason,
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

func toPeers(o app.Observed) (Fulfillment, Gateway) {
	f := Fulfillment{Error: o.ReservationError}
	if f.Error == "" && o.Reservation.Found {
		s := o.Reservation.Status
		f.Reservation = &s
	}
	g := Gateway{Error: o.PaymentsError}
	if g.Error == "" {
		g.Payments = make([]PeerPayment, len(o.Payments))
		for i, p := range o.Payments {
			g.Payments[i] = PeerPayment{ID: p.ID, Status: p.Status}
		}
	}
	return f, g
}

func toReconciliation(r app.Reconciliation) Reconciliation {
	if !r.Configured {
		return Reconciliation{Detail: "no peers to compare with: FULFILLMENT_URL and GATEWAY_URL are not set"}
	}
	checked, partial := r.Checked, r.Partial()
	out := Reconciliation{
		Configured: true, CheckedAt: r.At.UTC(), Window: Window{From: r.From.UTC(), To: r.To.UTC()}, Checked: &checked,
		Partial: &partial, Truncated: statuses(r.Truncated), Mismatches: []Mismatch{}, Flagged: []Flagged{},
	}
	if partial {
		out.Unchecked, out.Unreachable = r.Unchecked, r.Unreachable
	}
	for _, m := range r.Mismatches {
		f, g := toPeers(m.Observed)
		out.Mismatches = append(out.Mismatches, Mismatch{
			OrderID: m.OrderID, Status: string(m.Status), Since: m.Since.UTC(), Check: m.Check, Problems: m.Problems,
			Fulfillment: f, Gateway: g,
		})
	}
	for _, fl := range r.Flagged {
		f, g := toPeers(fl.Observed)
		out.Flagged = append(out.Flagged, Flagged{OrderID: fl.OrderID, Since: fl.Since.UTC(), AttentionReason: fl.Reason, Fulfillment: f, Gateway: g})
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
	return c.JSON(http.StatusOK, AuditReport{Stuck: toStuckReport(rep.Stuck), Reconciliation: toReconciliation(rep.Reconciliation)})
}
