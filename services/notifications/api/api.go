// Package api is the wire format of the notifications service's HTTP API beyond its event
// consumer's: the operators' read of an order's e-mails and the sweep. It is the one definition of
// them: the service's internal/httpapi renders its domain into these types, and its client
// (internal/adminclient) decodes them, so a field the service adds is a field its client has.
//
// It holds data only and imports nothing of the repository: a client takes the types without the
// service's internals, and the service cannot make them depend on its domain.
package api

import "time"

// Paths. Both routes take a Google ID token of an account in ADMIN_ALLOWED_EMAILS.
const (
	PathSweep         = "/admin/sweep"         // POST: Sweep
	PathNotifications = "/admin/notifications" // GET ?order_id=: NotificationList
)

// Notification is one of an order's e-mails. The recipient and the bodies are left out: an
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

// NotificationList is the response of GET /admin/notifications?order_id=.
type NotificationList struct {
	Notifications []Notification `json:"notifications"`
}

// Sweep is what one sweep did (POST /admin/sweep, Cloud Scheduler's notifications-sweep).
type Sweep struct {
	Resumed  int      `json:"resumed"` // due notifications attempted
	Sent     int      `json:"sent"`
	Bounced  int      `json:"bounced"`
	Failed   int      `json:"failed"`   // attempts exhausted
	Retry    int      `json:"retry"`    // still PENDING, tried again later
	Failures []string `json:"failures"` // outcomes that could not be recorded (retried by the next sweep)
}
