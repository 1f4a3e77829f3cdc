// Package httpapi is the notifications service's HTTP surface beyond the event consumer's: the
// operators' sweep of unsent e-mails (as Cloud Scheduler calls it) and their read of an order's
// notifications, both behind an operator's ID token.
package httpapi

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/services/notifications/internal/app"
	"github.com/spanmart/spanmart/services/notifications/internal/notification"
)

// ErrorMapper maps the domain errors to statuses, for platform.ServerOptions.
var ErrorMapper = platform.MapErrors(map[error]int{
	notification.ErrInvalid:  http.StatusBadRequest,
	notification.ErrNotFound: http.StatusNotFound,
})

// Paths.
const (
	PathSweep         = "/admin/sweep"         // POST, operator
	PathNotifications = "/admin/notifications" // GET ?order_id=, operator
)

// Register adds the routes to e; operators guards them.
func Register(e *echo.Echo, svc *app.Service, operators echo.MiddlewareFunc) {
	h := &handler{svc: svc}
	e.POST(PathSweep, h.sweep, operators)
	e.GET(PathNotifications, h.list, operators)
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
	return c.JSON(http.StatusOK, rep)
}

// Notification is a notification in responses. The recipient and the bodies are left out: an
// operator needs to know what happened, not to read the customer's mail.
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

type notificationList struct {
	Notifications []Notification `json:"notifications"`
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
	out := notificationList{Notifications: make([]Notification, len(ns))}
	for i, n := range ns {
		out.Notifications[i] = Notification{
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
