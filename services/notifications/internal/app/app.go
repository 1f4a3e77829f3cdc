// Package app holds the notifications service's use cases: recording an order's contact (from
// order.created), recording the intent to send an e-mail for an event (in the consumer's
// transaction), sending it after the commit, the sweep that resumes unsent e-mails, and the
// operators' read of an order's notifications. It declares what it needs from the outside
// (Repository, Sender) and knows nothing of HTTP or Spanner.
//
// Every e-mail follows docs/architecture.md, "Side effects outside Spanner": the notification row
// (PENDING, keyed by event id and template, with the rendered subject and bodies) commits with the
// consumer's inbox row; the SMTP call is made after the commit (Deliver, run by outboxlib.After);
// its outcome is recorded in a second transaction. A redelivery of the event (a duplicate, for
// which After runs again) or the sweep sends whatever is still PENDING, so nothing is lost when the
// process dies between two steps. Every attempt holds a lease on its notification (package
// notification: Claim): the delivery that committed the row holds the first one from the commit,
// any later attempt claims it in a transaction of its own before it sends, so a redelivery and the
// sweep never both send one e-mail. What this gives, exactly: at most one e-mail per (event,
// template), except when the process dies after the mail server accepted the message and before
// SENT is recorded; the resend, once the dead attempt's lease has run out, carries the same
// Message-ID (notification.MessageID), which lets the relay and the customer's mail client
// recognise it.
//
// Two kinds of use case, two kinds of transaction, as in services/orders: the event use cases
// (RecordContact, Notify) run inside the consumer's transaction, which they take as an opaque Txn
// and hand to the Repository; the others let the Repository open its own.
package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/spanmart/spanmart/pkg/faults"
	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/services/notifications/internal/mailer"
	"github.com/spanmart/spanmart/services/notifications/internal/notification"
	"github.com/spanmart/spanmart/services/notifications/internal/templates"
)

// Errors of the use cases (the domain's are in package notification); test with errors.Is.
var (
	// ErrNoContact: the order's order.created has not been applied, so there is no address yet.
	// The event consumer defers the event (outboxlib.ErrEarly).
	ErrNoContact = errors.New("no contact recorded for the order")
	// ErrTemplate: the e-mail cannot be rendered (a template bug): no retry can help.
	ErrTemplate = errors.New("cannot render the e-mail")
)

// Txn is a read-write transaction that the caller opened and will commit: the event consumer's,
// in which it also records the inbox row. The use cases never look inside it; they pass it to the
// Repository, whose implementation knows its type (the store: a *spanner.ReadWriteTransaction).
type Txn any

// Repository is the persistence the use cases need.
type Repository interface {
	// RecordContact inserts c, recorded from event eventID, inside txn unless the order has a
	// contact already (created is false then: the first one stays).
	RecordContact(ctx context.Context, txn Txn, c notification.Contact, eventID string) (created bool, err error)
	// Contact reads inside txn, in one read, the order's contact (notification.ErrNotFound if there
	// is none) and whether the notification (eventID, template) is recorded already.
	Contact(ctx context.Context, txn Txn, orderID, eventID, template string) (c notification.Contact, recorded bool, err error)
	// AddNotification inserts n inside txn, in which Contact said it is not recorded.
	AddNotification(ctx context.Context, txn Txn, n *notification.Notification) error
	// NotificationsOfEvent reads the notifications an event caused (a strong read).
	NotificationsOfEvent(ctx context.Context, eventID string) ([]*notification.Notification, error)
	// Update runs each change on its notification in one new read-write transaction and writes
	// those that changed it. It returns one error per change: Apply's own, unchanged (nothing of
	// that notification is written), notification.ErrNotFound for a missing one, or the
	// transaction's.
	Update(ctx context.Context, changes ...Change) []error
	// Due returns up to limit PENDING notifications whose next attempt is at or before now.
	Due(ctx context.Context, now time.Time, limit int) ([]*notification.Notification, error)
	// NotificationsOfOrder returns an order's notifications, none: an empty slice.
	NotificationsOfOrder(ctx context.Context, orderID string) ([]*notification.Notification, error)
}

// Change is a change to one notification, for Repository.Update. Apply may run more than once
// (pure).
type Change struct {
	EventID, Template string
	Apply             func(*notification.Notification) error
}

// Sender hands one e-mail to the mail server. An error for which mailer.IsBounce is true means
// the address is refused for good; any other error may pass another time.
type Sender interface {
	Send(ctx context.Context, m mailer.Message) (mailer.Receipt, error)
}

// Config configures a Service. Zero values take the defaults.
type Config struct {
	Repo      Repository
	Sender    Sender
	Templates *templates.Renderer
	Metrics   *Metrics
	Now       func() time.Time // default time.Now
	// MaxAttempts is how many attempts a notification gets before it is FAILED; default 8.
	MaxAttempts int
	// ResumeAfter is how long a notification waits for the request path before the sweep takes it
	// over, and the back-off after the first failed attempt (doubling, at most an hour); default 1m.
	ResumeAfter time.Duration
	// SendTimeout bounds one SMTP session, and so does recording what the server answered; default
	// 30s. An attempt's lease is ResumeAfter plus both bounds together, and its SMTP session ends
	// a SendTimeout before the lease does, so no attempt outlives its lease to meet another one
	// sending the same e-mail (unless recording the outcome takes longer than it may).
	SendTimeout time.Duration
	// OutcomeWindow is how long the outcome of an attempt waits for those of other attempts, to be
	// recorded in the same transaction (one read and one commit for the group); default 50ms,
	// negative for none. It delays the answer to the delivery, not the e-mail.
	OutcomeWindow time.Duration
	// MaxOutcomeGroup is how many outcomes one transaction records at most: a full group is
	// recorded at once; default 100.
	MaxOutcomeGroup int
}

// Defaults of Config.
const (
	DefaultMaxAttempts     = 8
	DefaultResumeAfter     = time.Minute
	DefaultSendTimeout     = 30 * time.Second
	DefaultOutcomeWindow   = 50 * time.Millisecond
	DefaultMaxOutcomeGroup = 100
	// MaxBackoff caps the wait between two attempts.
	MaxBackoff = time.Hour
)

// Service runs the use cases.
type Service struct {
	cfg      Config
	policy   notification.RetryPolicy
	outcomes *outcomes
}

// New returns a service.
func New(cfg Config) (*Service, error) {
	if cfg.Repo == nil || cfg.Sender == nil || cfg.Templates == nil {
		return nil, errors.New("notifications: a repository, a sender and the templates are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.ResumeAfter <= 0 {
		cfg.ResumeAfter = DefaultResumeAfter
	}
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = DefaultSendTimeout
	}
	if cfg.OutcomeWindow == 0 {
		cfg.OutcomeWindow = DefaultOutcomeWindow
	}
	if cfg.MaxOutcomeGroup <= 0 {
		cfg.MaxOutcomeGroup = DefaultMaxOutcomeGroup
	}
	return &Service{cfg: cfg, policy: notification.RetryPolicy{
		MaxAttempts: int64(cfg.MaxAttempts), Backoff: cfg.ResumeAfter, MaxBackoff: max(MaxBackoff, cfg.ResumeAfter),
	}, outcomes: &outcomes{repo: cfg.Repo, window: cfg.OutcomeWindow, max: cfg.MaxOutcomeGroup, timeout: cfg.SendTimeout}}, nil
}

// lease is how long an attempt holds its notification: ResumeAfter plus the most an
// attempt can take (the SMTP session, then recording its outcome).
func (s *Service) lease() time.Duration { return s.cfg.ResumeAfter + 2*s.cfg.SendTimeout }

// budget is how long an attempt at n may spend on the SMTP session now: what is left of n's lease
// once a SendTimeout is kept for recording the outcome, and at most a SendTimeout.
func (s *Service) budget(n *notification.Notification) time.Duration {
	return min(s.cfg.SendTimeout, n.NextAttemptAt().Sub(s.cfg.Now())-s.cfg.SendTimeout)
}

// Event is the event being applied.
type Event struct {
	ID   string
	Type string
}

// Outcome is what an event use case decided, for the consumer's log line of the event.
type Outcome struct {
	Note string
	// Created is the notification Notify recorded, nil if none: what Deliver sends once the
	// transaction has committed (Recorded).
	Created *notification.Notification
}

// RecordContact applies order.created: the order's address and language, the ones every later
// e-mail of the order uses. A contact without an address is recorded too (so that later events
// know there is nothing to send, rather than waiting for one).
func (s *Service) RecordContact(ctx context.Context, txn Txn, ev Event, c notification.Contact) (Outcome, error) {
	if c.OrderID == "" {
		return Outcome{}, fmt.Errorf("%w: contact without an order id", notification.ErrInvalid)
	}
	created, err := s.cfg.Repo.RecordContact(ctx, txn, c, ev.ID)
	switch {
	case err != nil:
		return Outcome{}, err
	case !created:
		return Outcome{Note: fmt.Sprintf("order %s already has a contact; kept", c.OrderID)}, nil
	case c.Email == "":
		return Outcome{Note: fmt.Sprintf("order %s has no e-mail address: no e-mails will be sent for it", c.OrderID)}, nil
	}
	return Outcome{Note: fmt.Sprintf("order %s contact recorded (language %s)", c.OrderID, notification.ParseLanguage(c.Language))}, nil
}

// Notify records, inside txn, the intent to send the e-mail data renders to the order's contact,
// in the contact's language. The e-mail is sent after the commit by Deliver. The order's contact
// must be recorded (ErrNoContact otherwise); an order without a usable address gets nothing.
func (s *Service) Notify(ctx context.Context, txn Txn, ev Event, orderID string, data templates.Data) (Outcome, error) {
	template := string(data.Template())
	c, recorded, err := s.cfg.Repo.Contact(ctx, txn, orderID, ev.ID, template)
	switch {
	case errors.Is(err, notification.ErrNotFound):
		return Outcome{}, fmt.Errorf("%w: order %s", ErrNoContact, orderID)
	case err != nil:
		return Outcome{}, err
	case recorded:
		return Outcome{Note: fmt.Sprintf("%s e-mail for event %s already recorded", template, ev.ID)}, nil
	}
	to, ok, err := c.Recipient()
	switch {
	case err != nil:
		return Outcome{Note: fmt.Sprintf("no %s e-mail: %v", template, err)}, nil
	case !ok:
		return Outcome{Note: fmt.Sprintf("no %s e-mail: order %s has no e-mail address", template, orderID)}, nil
	}
	lang := notification.ParseLanguage(c.Language)
	content, err := s.cfg.Templates.Render(lang, data)
	if err != nil {
		return Outcome{}, fmt.Errorf("%w: %v", ErrTemplate, err)
	}
	n, err := notification.New(ev.ID, ev.Type, template, orderID, to, lang, content, s.cfg.Now().Add(s.lease()))
	if err != nil {
		return Outcome{}, err
	}
	if err := s.cfg.Repo.AddNotification(ctx, txn, n); err != nil {
		return Outcome{}, err
	}
	return Outcome{Note: fmt.Sprintf("%s e-mail recorded (%s), to be sent after the commit", template, lang), Created: n}, nil
}

// Recorded is what the transaction of the delivery that applied an event recorded: the
// notifications Notify created (Outcome.Created), committed at At.
type Recorded struct {
	Notifications []*notification.Notification
	At            time.Time
}

// Deliver sends the PENDING notifications of event eventID that are due: the effect after the
// commit of the event's transaction, and again on every redelivery of the event. rec is what the
// delivery's own transaction recorded, nil for a redelivery: those notifications are sent as they
// were committed, without a read, since that delivery holds their first attempt. Otherwise
// (a redelivery, or a delivery that recorded none) it reads the event's notifications, and an
// attempt is made only once the previous one's lease or back-off has passed, claiming the
// notification first. It returns nil once each of them is final (sent, bounced or failed) or waits
// for a later attempt that is recorded in Spanner (a temporary failure's back-off, or another
// attempt's lease): the sweep makes that attempt, so the event's delivery is answered 200 and the
// queue is not slowed down (Cloud Tasks throttles a whole queue for 503s) for one address that
// greylists. It returns an error only while an attempt's outcome could not be recorded or a
// notification could not be read or claimed, so that the queue delivers the event again.
func (s *Service) Deliver(ctx context.Context, eventID string, rec *Recorded) error {
	first := rec != nil && len(rec.Notifications) > 0
	var ns []*notification.Notification
	if first {
		for _, n := range rec.Notifications {
			n.Committed(rec.At)
		}
		ns = rec.Notifications
	} else {
		var err error
		if ns, err = s.cfg.Repo.NotificationsOfEvent(ctx, eventID); err != nil {
			return err
		}
	}
	var unfinished []error
	for i, n := range ns {
		if n.Status().Final() {
			continue
		}
		// The first attempt is this delivery's, unless its transaction took so long that nothing
		// is left of the lease for a send: then it claims n like any other.
		if !first || s.budget(n) <= 0 {
			var err error
			if n, err = s.claim(ctx, n); errors.Is(err, notification.ErrNotDue) {
				continue // waiting: another attempt holds it, or its back-off runs
			} else if err != nil {
				unfinished = append(unfinished, err)
				continue
			}
		}
		// The last e-mail's outcome waits for its group without the delivery's admission slot: no
		// work of the delivery is left then.
		if result, err := s.send(ctx, n, i == len(ns)-1); err != nil && result != ResultRetry {
			unfinished = append(unfinished, fmt.Errorf("%s e-mail not sent: %w", n.Template(), brief(err)))
		}
	}
	if len(unfinished) > 0 {
		return fmt.Errorf("event %s: %w", eventID, errors.Join(unfinished...))
	}
	return nil
}

// claim starts an attempt at n: in a transaction of its own, n's lease moves to now+lease unless
// n is no longer due (another attempt holds it, it waits out a back-off, or it is final), which is
// an error saying so. It returns n as claimed.
func (s *Service) claim(ctx context.Context, n *notification.Notification) (*notification.Notification, error) {
	now := s.cfg.Now()
	var claimed *notification.Notification
	err := s.cfg.Repo.Update(ctx, Change{EventID: n.EventID(), Template: n.Template(), Apply: func(n *notification.Notification) error {
		if err := n.Claim(now, now.Add(s.lease())); err != nil {
			return err
		}
		claimed = n
		return nil
	}})[0]
	switch {
	case errors.Is(err, notification.ErrNotDue):
		return nil, fmt.Errorf("%s e-mail: %w", n.Template(), err)
	case err != nil:
		return nil, fmt.Errorf("claim %s e-mail: %w", n.Template(), err)
	}
	return claimed, nil
}

// Results of one attempt, the result label of notifications_sent_total.
const (
	ResultSent    = "sent"    // the server accepted the message
	ResultBounced = "bounced" // the server refused the address: final
	ResultFailed  = "failed"  // the last allowed attempt failed temporarily: final
	ResultRetry   = "retry"   // a temporary failure: tried again later
)

// send makes one attempt at n, whose lease this attempt holds (n.NextAttemptAt: taken with n's
// creation, or by claim), and records its outcome. result is what the attempt did (one of the
// Result constants), "" when nothing was recorded: n was finished meanwhile, or, after a temporary
// failure, another attempt holds n now (err nil); or the outcome could not be recorded (err says
// why; n stays PENDING and is sent again once the lease has run out, with the same Message-ID).
// err is also the send's error after a temporary failure: it is non-nil exactly when n is still
// PENDING. last says nothing follows in the request: the outcome then waits for its group without
// the request's admission slot (platform.YieldSlot).
func (s *Service) send(ctx context.Context, n *notification.Notification, last bool) (result string, err error) {
	c := n.Content()
	msg := mailer.Message{
		To: n.Recipient(), Subject: c.Subject, Text: c.Text, HTML: c.HTML, MessageID: n.MessageID(),
		// The first commit's time, not now: a resend is the same message.
		Date: n.CreatedAt(),
		Headers: []mailer.Header{
			{Name: "X-Spanmart-Event", Value: n.EventType() + "; id=" + n.EventID()},
			{Name: "X-Spanmart-Template", Value: n.Template()},
			{Name: "X-Spanmart-Order", Value: n.OrderID()},
		},
	}
	lease := n.NextAttemptAt()
	budget := s.budget(n)
	if budget <= 0 {
		return "", fmt.Errorf("%s e-mail: the attempt's lease ends at %s, too soon to send", n.Template(), lease.UTC().Format(time.RFC3339))
	}
	start := time.Now()
	sendCtx, cancelSend := context.WithTimeout(ctx, budget)
	receipt, sendErr := s.cfg.Sender.Send(sendCtx, msg)
	cancelSend()
	s.cfg.Metrics.observeSend(time.Since(start), sendErr)
	if sendErr == nil {
		// Drills: the server has the message, the notification is not marked yet.
		faults.Hit(faults.NotificationsAfterSend)
	}
	// Once the server has the message, its acceptance is recorded even if the caller gives up now
	// (Cloud Tasks cancelling a dispatch, a client disconnecting): left PENDING, the e-mail would be
	// sent again. Only a crash is left between the two, the documented resend.
	markCtx := ctx
	if sendErr == nil {
		var cancel context.CancelFunc
		markCtx, cancel = context.WithTimeout(context.WithoutCancel(ctx), s.cfg.SendTimeout)
		defer cancel()
	}
	var attempts int64
	var retryAt time.Time
	if last {
		platform.YieldSlot(ctx)
	}
	err = s.outcomes.record(markCtx, Change{EventID: n.EventID(), Template: n.Template(), Apply: func(n *notification.Notification) error {
		result = ""
		if n.Status().Final() {
			return nil
		}
		if sendErr != nil && !mailer.IsBounce(sendErr) && !n.NextAttemptAt().Equal(lease) {
			// This attempt's lease ran out and another attempt claimed n: its outcome decides the
			// next attempt (an acceptance or a bounce is a fact, and is recorded whoever holds n).
			return nil
		}
		now := s.cfg.Now()
		var err error
		switch {
		case sendErr == nil:
			result, err = ResultSent, n.MarkSent(now, receipt.Reply)
		case mailer.IsBounce(sendErr):
			result, err = ResultBounced, n.MarkBounced(sendErr.Error())
		default:
			result, err = ResultRetry, n.MarkDeferred(sendErr.Error(), now, s.policy)
			if n.Status() == notification.Failed {
				result = ResultFailed
			}
		}
		attempts, retryAt = n.Attempts(), n.NextAttemptAt()
		return err
	}})
	if err != nil {
		what := "was not sent"
		if sendErr == nil {
			what = "was accepted by the server"
		}
		return "", fmt.Errorf("record the outcome of %s e-mail %s (it %s): %w", n.Template(), n.MessageID(), what, err)
	}
	if result == "" {
		return "", nil
	}
	s.cfg.Metrics.sent.WithLabelValues(n.Template(), result).Inc()
	// WithLazy: a sent e-mail logs nothing here, and With would encode the fields for each.
	log := platform.Logger(ctx).WithLazy(zap.String("event_id", n.EventID()), zap.String("template", n.Template()),
		zap.String("order_id", n.OrderID()), zap.String("message_id", n.MessageID()), zap.Int64("attempts", attempts))
	switch result {
	case ResultBounced:
		// The address is bad for good: worth a look (a typo at checkout), never a retry.
		log.Warn("e-mail bounced", smtpFields(sendErr)...)
	case ResultFailed:
		log.Error("e-mail failed: attempts exhausted", smtpFields(sendErr)...)
	case ResultRetry:
		// The sweep makes the next attempt once the back-off has passed (see Deliver).
		log.Info("e-mail deferred: the sweep retries it after its back-off",
			append(smtpFields(sendErr), zap.Time("next_attempt_at", retryAt))...)
		return result, sendErr
	}
	return result, nil
}

// brief is err for a log line: of a server's reply only the stage and the code, since its text
// often repeats the customer's address (the notification's LastError keeps it whole).
func brief(err error) error {
	var e *mailer.Error
	if !errors.As(err, &e) {
		return err
	}
	if e.Code == 0 {
		return e // no reply: a connection, TLS or local error, nothing of the customer's
	}
	return fmt.Errorf("smtp %s: the server answered %d", e.Stage, e.Code)
}

// smtpFields are the log fields of a failed send: the stage and the server's code, not its text
// (which often repeats the customer's address).
func smtpFields(err error) []zap.Field {
	var e *mailer.Error
	if !errors.As(err, &e) {
		return []zap.Field{zap.String("smtp_error", "unclassified")}
	}
	return []zap.Field{zap.String("smtp_stage", e.Stage), zap.Int("smtp_code", e.Code)}
}

// SweepReport is what one sweep did.
type SweepReport struct {
	Resumed  int // due notifications attempted
	Sent     int
	Bounced  int
	Failed   int      // attempts exhausted
	Retry    int      // still PENDING, tried again later
	Failures []string // outcomes that could not be recorded (retried by the next sweep)
}

// SweepLimit is the most notifications one sweep attempts; the next sweep takes the rest. Each
// attempt is one SMTP session, so the sweep's request stays well inside Cloud Scheduler's deadline.
const SweepLimit = 50

// Sweep sends the PENDING notifications whose next attempt is due: those the request path never
// sent (the process died, the queue gave up) and those waiting out a back-off. Run it on a
// schedule (Cloud Scheduler → POST /admin/sweep). It stops early when ctx ends.
func (s *Service) Sweep(ctx context.Context) (SweepReport, error) {
	rep := SweepReport{Failures: []string{}}
	due, err := s.cfg.Repo.Due(ctx, s.cfg.Now(), SweepLimit)
	if err != nil {
		return rep, err
	}
	for _, n := range due {
		if ctx.Err() != nil {
			break
		}
		n, err := s.claim(ctx, n)
		if errors.Is(err, notification.ErrNotDue) {
			continue // a redelivery took it since it was read
		}
		rep.Resumed++
		result := ""
		if err == nil {
			result, err = s.send(ctx, n, false) // the sweep goes on: it keeps its slot
		}
		switch result {
		case ResultSent:
			rep.Sent++
		case ResultBounced:
			rep.Bounced++
		case ResultFailed:
			rep.Failed++
		case ResultRetry:
			rep.Retry++
		default:
			if err != nil {
				rep.Failures = append(rep.Failures, err.Error())
			}
		}
	}
	return rep, nil
}

// NotificationsOfOrder returns an order's notifications, for operators.
func (s *Service) NotificationsOfOrder(ctx context.Context, orderID string) ([]*notification.Notification, error) {
	if _, err := uuid.Parse(orderID); err != nil || len(orderID) != 36 {
		return nil, fmt.Errorf("%w: order id %q is not a UUID", notification.ErrInvalid, orderID)
	}
	return s.cfg.Repo.NotificationsOfOrder(ctx, orderID)
}
