// Package notification is the notifications service's domain: an order's contact (where and in
// which language to write), and a notification, the intent to send one e-mail for one (event,
// template), with its delivery state machine:
//
//	PENDING → SENT       the mail server accepted the message
//	PENDING → BOUNCED    the server refused the address (5xx to RCPT or DATA): final, never retried
//	PENDING → PENDING    a temporary failure (4xx, connection): tried again at NextAttemptAt
//	PENDING → FAILED     the MaxAttempts-th temporary failure: final
//
// Who may send a PENDING notification is decided by a lease in NextAttemptAt: an attempt may start
// only once it has passed (Due), and starts by moving it forward (Claim), in a transaction, so two
// senders (a redelivery of the event and the sweep) never both send it. The first attempt's lease
// is taken when the notification is created: until it ends, only the delivery whose transaction
// committed it sends it.
//
// A notification's Message-ID is derived from its key, so every attempt to send it, a resend after
// a crash between the server's acceptance and the SENT mark included, is the same message. No I/O
// here.
package notification

import (
	"errors"
	"fmt"
	"net/mail"
	"slices"
	"strings"
	"time"
)

// Errors; test with errors.Is.
var (
	// ErrInvalid: a notification or contact that cannot exist (missing key, bad address).
	ErrInvalid = errors.New("invalid notification")
	// ErrNotFound: no such notification or contact.
	ErrNotFound = errors.New("not found")
	// ErrIllegalTransition: the notification is final (SENT, BOUNCED, FAILED).
	ErrIllegalTransition = errors.New("illegal notification transition")
	// ErrNotDue: the notification is final, or another attempt holds it (or it waits out a
	// back-off) until its NextAttemptAt.
	ErrNotDue = errors.New("notification not due")
)

// Status is a notification's delivery state; the values are those of CK_Notifications_Status.
type Status string

const (
	Pending Status = "PENDING"
	Sent    Status = "SENT"
	Bounced Status = "BOUNCED"
	Failed  Status = "FAILED"
)

// Final reports whether no attempt will be made any more.
func (s Status) Final() bool { return s != Pending }

// Language is the language an e-mail is written in.
type Language string

const (
	Japanese Language = "ja"
	English  Language = "en"
)

// DefaultLanguage is the shop's: what a contact without a supported language gets.
const DefaultLanguage = Japanese

// ParseLanguage returns the supported language s names ("ja", "en", "en-US", case-insensitive),
// DefaultLanguage for anything else, "" included.
func ParseLanguage(s string) Language {
	base, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(s)), "-")
	switch Language(base) {
	case Japanese, English:
		return Language(base)
	}
	return DefaultLanguage
}

// Contact is where an order's e-mails go, as order.created said.
type Contact struct {
	OrderID    string
	CustomerID string
	Email      string // "" when the order was placed without one
	Language   string // as orders gave it; see ParseLanguage
}

// Recipient returns the contact's address for the envelope and the To header; ok is false when the
// order has none (no e-mail is sent). An address that does not parse as one addr-spec is
// ErrInvalid: it is never sent to (and can carry no header injection).
func (c Contact) Recipient() (addr string, ok bool, err error) {
	if strings.TrimSpace(c.Email) == "" {
		return "", false, nil
	}
	a, err := mail.ParseAddress(c.Email)
	if err != nil || a.Name != "" || a.Address != strings.TrimSpace(c.Email) {
		return "", false, fmt.Errorf("%w: order %s: e-mail address is not one plain address", ErrInvalid, c.OrderID)
	}
	return a.Address, true, nil
}

// MessageID is the Message-ID of the notification (eventID, template), angle brackets included:
// stable, so that every attempt to send it, after a crash too, carries the same one.
func MessageID(eventID, template string) string {
	return "<" + eventID + "." + template + "@notifications.spanmart>"
}

// Content is a rendered e-mail.
type Content struct {
	Subject string
	Text    string
	HTML    string
}

// Notification is the intent to send one e-mail for one (event, template), and how sending it went.
type Notification struct {
	eventID, eventType, template string
	orderID, recipient           string
	language                     Language
	content                      Content
	status                       Status
	attempts                     int64
	lastError                    string
	serverReply                  string
	createdAt, sentAt            time.Time
	nextAttemptAt                time.Time
	changed                      bool
}

// New returns a PENDING notification whose first attempt is leased until nextAttemptAt (stored
// to the microsecond, as Spanner keeps it) to the delivery that creates it (after that the sweep
// or a redelivery may take it over).
func New(eventID, eventType, template, orderID, recipient string, lang Language, c Content, nextAttemptAt time.Time) (*Notification, error) {
	var missing []string
	for name, v := range map[string]string{"event id": eventID, "event type": eventType, "template": template, "order id": orderID,
		"recipient": recipient, "subject": c.Subject, "text body": c.Text, "HTML body": c.HTML} {
		if strings.TrimSpace(v) == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, fmt.Errorf("%w: missing %s", ErrInvalid, strings.Join(missing, ", "))
	}
	return &Notification{
		eventID: eventID, eventType: eventType, template: template, orderID: orderID, recipient: recipient,
		language: lang, content: c, status: Pending, nextAttemptAt: nextAttemptAt.Truncate(time.Microsecond), changed: true,
	}, nil
}

// Committed records when a notification from New was committed (its CreatedAt, the commit
// timestamp of the transaction that wrote it). A notification that has its time keeps it.
func (n *Notification) Committed(at time.Time) {
	if n.createdAt.IsZero() {
		n.createdAt = at
	}
}

// Snapshot is a notification's whole state, for the store.
type Snapshot struct {
	EventID, EventType, Template string
	OrderID, Recipient           string
	Language                     Language
	Content                      Content
	Status                       Status
	Attempts                     int64
	LastError                    string
	ServerReply                  string // the server's answer to the accepted message
	CreatedAt, SentAt            time.Time
	NextAttemptAt                time.Time // zero once final
}

// Restore rebuilds a stored notification.
func Restore(s Snapshot) (*Notification, error) {
	switch s.Status {
	case Pending, Sent, Bounced, Failed:
	default:
		return nil, fmt.Errorf("%w: notification %s/%s has status %q", ErrInvalid, s.EventID, s.Template, s.Status)
	}
	return &Notification{
		eventID: s.EventID, eventType: s.EventType, template: s.Template, orderID: s.OrderID, recipient: s.Recipient,
		language: s.Language, content: s.Content, status: s.Status, attempts: s.Attempts, lastError: s.LastError,
		serverReply: s.ServerReply, createdAt: s.CreatedAt, sentAt: s.SentAt, nextAttemptAt: s.NextAttemptAt,
	}, nil
}

// Snapshot returns n's state.
func (n *Notification) Snapshot() Snapshot {
	return Snapshot{
		EventID: n.eventID, EventType: n.eventType, Template: n.template, OrderID: n.orderID, Recipient: n.recipient,
		Language: n.language, Content: n.content, Status: n.status, Attempts: n.attempts, LastError: n.lastError,
		ServerReply: n.serverReply, CreatedAt: n.createdAt, SentAt: n.sentAt, NextAttemptAt: n.nextAttemptAt,
	}
}

func (n *Notification) EventID() string          { return n.eventID }
func (n *Notification) EventType() string        { return n.eventType }
func (n *Notification) Template() string         { return n.template }
func (n *Notification) OrderID() string          { return n.orderID }
func (n *Notification) Recipient() string        { return n.recipient }
func (n *Notification) Language() Language       { return n.language }
func (n *Notification) Content() Content         { return n.content }
func (n *Notification) Status() Status           { return n.status }
func (n *Notification) Attempts() int64          { return n.attempts }
func (n *Notification) LastError() string        { return n.lastError }
func (n *Notification) CreatedAt() time.Time     { return n.createdAt }
func (n *Notification) SentAt() time.Time        { return n.sentAt }
func (n *Notification) NextAttemptAt() time.Time { return n.nextAttemptAt }
func (n *Notification) MessageID() string        { return MessageID(n.eventID, n.template) }

// Changed reports whether a transition happened since New or Restore.
func (n *Notification) Changed() bool { return n.changed }

// Due reports whether a new attempt may start at now: n is PENDING and neither an attempt's lease
// nor a back-off holds it any more.
func (n *Notification) Due(now time.Time) bool {
	return n.status == Pending && !now.Before(n.nextAttemptAt)
}

// Claim starts an attempt at now: the attempt holds n until until (its lease; stored to the
// microsecond, as Spanner keeps it). ErrNotDue unless n is Due at now.
func (n *Notification) Claim(now, until time.Time) error {
	if !n.Due(now) {
		return fmt.Errorf("%w: notification %s/%s is %s until %s", ErrNotDue, n.eventID, n.template, n.status,
			n.nextAttemptAt.UTC().Format(time.RFC3339Nano))
	}
	n.nextAttemptAt, n.changed = until.Truncate(time.Microsecond), true
	return nil
}

// RetryPolicy says how temporary failures are retried.
type RetryPolicy struct {
	MaxAttempts int64         // attempts before a notification FAILED
	Backoff     time.Duration // wait after the first failure, doubling after each, at most MaxBackoff
	MaxBackoff  time.Duration
}

// Delay is the wait after the attempts-th failed attempt.
func (p RetryPolicy) Delay(attempts int64) time.Duration {
	d := p.Backoff
	for i := int64(1); i < attempts && d < p.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, p.MaxBackoff)
}

// MarkSent records that the server accepted the message at now, with its answer (reply).
func (n *Notification) MarkSent(now time.Time, reply string) error {
	if err := n.attempt(Sent); err != nil {
		return err
	}
	n.status, n.sentAt, n.serverReply, n.lastError, n.nextAttemptAt = Sent, now, reply, "", time.Time{}
	return nil
}

// MarkBounced records that the server refused the address: final.
func (n *Notification) MarkBounced(reason string) error {
	if err := n.attempt(Bounced); err != nil {
		return err
	}
	n.status, n.lastError, n.nextAttemptAt = Bounced, reason, time.Time{}
	return nil
}

// MarkDeferred records a temporary failure at now: the notification stays PENDING until
// now+p.Delay(attempts), or is FAILED (final) when this was its p.MaxAttempts-th attempt.
func (n *Notification) MarkDeferred(reason string, now time.Time, p RetryPolicy) error {
	if err := n.attempt(Pending); err != nil {
		return err
	}
	n.lastError = reason
	if n.attempts >= p.MaxAttempts {
		n.status, n.nextAttemptAt = Failed, time.Time{}
		return nil
	}
	n.nextAttemptAt = now.Add(p.Delay(n.attempts))
	return nil
}

// attempt counts an attempt that ends in to, unless n is final.
func (n *Notification) attempt(to Status) error {
	if n.status.Final() {
		return fmt.Errorf("%w: notification %s/%s is %s, cannot become %s", ErrIllegalTransition, n.eventID, n.template, n.status, to)
	}
	n.attempts++
	n.changed = true
	return nil
}
