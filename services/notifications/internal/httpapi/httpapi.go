// Package httpapi is the notifications service's HTTP surface beyond the event consumer's: the
// operators' sweep of unsent e-mails (as Cloud Scheduler calls it) and their read of an order's
// notifications, both behind an operator's ID token. Its answers are the wire types of
// services/notifications/api, which its client decodes too.
package httpapi

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/services/notifications/api"
	"github.com/spanmart/spanmart/services/notifications/internal/app"
	"github.com/spanmart/spanmart/services/notifications/internal/notification"
)

// ErrorMapper maps the domain errors to statuses, for platform.ServerOptions.
var ErrorMapper = platform.MapErrors(map[error]int{
	notification.ErrInvalid:  http.StatusBadRequest,
	notification.ErrNotFound: http.StatusNotFound,
})

// Register adds the routes to e; operators guards them.
func Register(e *echo.Echo, svc *app.Service, operators echo.MiddlewareFunc) {
	h := &handler{svc: svc}
	e.POST(api.PathSweep, h.sweep, operators)
	e.GET(api.PathNotifications, h.list, operators)
}

type handler struct {
	svc *app.Service
}

func (h *handler) sweep(c echo.Context) error {
	ctx := c.Request().Context()
	rep, err := h.svc.Sweep(ctx)
	if err != nil {
		return err
	}
	fields := []zap.Field{zap.Int("resumed", rep.Resumed), zap.Int("sent", rep.Sent), zap.Int("bounced", rep.Bounced),
		zap.Int("failed", rep.Failed), zap.Int("retry", rep.Retry)}
	if len(rep.Failures) > 0 {
		platform.Logger(ctx).Warn("sweep left work for the next one", append(fields, zap.Strings("failures", rep.Failures))...)
	} else {
		platform.Logger(ctx).Info("sweep", fields...)
	}
	return c.JSON(http.StatusOK, api.Sweep{
		Resumed: rep.Resumed, Sent: rep.Sent, Bounced: rep.Bounced, Failed: rep.Failed, Retry: rep.Retry, Failures: rep.Failures,
	})
}

func (h *handler) list(c echo.Context) error {
	orderID := c.QueryParam("order_id")
	if orderID == "" {
		return platform.NewProblem(http.StatusBadRequest, "query parameter order_id is required")
	}
	ns, err := h.svc.NotificationsOfOrder(c.Request().Context(), orderID)
	if err != nil {
		return err
	}
	out := api.NotificationList{Notifications: make([]api.Notification, len(ns))}
	for i, n := range ns {
		out.Notifications[i] = api.Notification{
			EventID: n.EventID(), EventType: n.EventType(), Template: n.Template(), Language: string(n.Language()),
			Subject: n.Content().Subject, Status: string(n.Status()), Attempts: n.Attempts(), LastError: n.LastError(),
			MessageID: n.MessageID(), CreatedAt: n.CreatedAt().UTC(), SentAt: optionalTime(n.SentAt()),
			NextAttemptAt: optionalTime(n.NextAttemptAt()),
		}
	}
	return c.JSON(http.StatusOK, out)
}

func optionalTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}
