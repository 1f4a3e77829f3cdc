package outboxlib

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/spanmart/spanmart/gen/dao"
	"github.com/spanmart/spanmart/gen/dao/outboxdb"
	"github.com/spanmart/spanmart/pkg/platform"
)

// Delivery is an event as a consumer receives it.
type Delivery struct {
	Event
	Attempt     int   // X-CloudTasks-TaskRetryCount (0 on the first delivery)
	LastVersion int64 // highest AggregateVersion of this aggregate this consumer has applied, 0 if none
}

// HandlerFunc applies one event inside the consumer's read-write transaction (it may run more than
// once: pure, no I/O, no goroutines). Return an error wrapping ErrEarly when the event needs a
// predecessor this consumer has not applied yet (d.LastVersion tells), Permanent(err) when it can
// never succeed, any other error for a transient fault. Whatever the handler buffered is
// discarded when it returns an error. A call to a provider or a mail server belongs after the
// commit: the handler records the intent, the service performs it (ARCHITECTURE.md §6). To say
// what it decided, a handler calls Note rather than logging (a log line would repeat on a retry).
type HandlerFunc func(ctx context.Context, txn *spanner.ReadWriteTransaction, d Delivery) error

// ErrEarly is wrapped by a handler when the event arrived before its predecessor: nothing is
// recorded and the consumer answers 409 + Retry-After, so the queue redelivers it later.
var ErrEarly = errors.New("event arrived before its predecessor")

// permanentError marks an error that no retry can fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return "permanent: " + e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent wraps err to say the event can never succeed: it is dead-lettered at once.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

// IsPermanent reports whether err was wrapped by Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// Errors of ReplayDeadLetter.
var (
	ErrDeadLetterNotFound = errors.New("no such dead letter")
	ErrAlreadyReplayed    = errors.New("dead letter already replayed")
)

// Outcomes of a delivery: the values of the outcome label and log field.
const (
	OutcomeApplied      = "applied"       // the handler ran and committed
	OutcomeDuplicate    = "duplicate"     // ProcessedEvents already had the event: nothing done
	OutcomeStale        = "stale"         // a version at or above the event's was applied: recorded, handler skipped
	OutcomeEarly        = "early"         // the handler needs a predecessor: nothing recorded, 409
	OutcomeTransient    = "transient"     // the handler or Spanner failed: nothing recorded, 503
	OutcomeDeadLettered = "dead_lettered" // parked in DeadLetters and acknowledged
	OutcomeUnknownType  = "unknown_type"  // no handler: acknowledged, nothing recorded
	OutcomeRejected     = "rejected"      // bad token (401) or malformed event (400)
)

// DedupRetention is how long ProcessedEvents rows live (the table's row deletion policy). A
// delivery later than this after the first is no longer recognised as a duplicate.
const DedupRetention = 30 * 24 * time.Hour

// CheckRetention refuses a configuration whose redelivery window (the subscriber queues'
// max_retry_duration plus how long after its death a dead letter may still be replayed) reaches
// DedupRetention: a redelivery after that would be applied a second time. The relay and every
// consumer call it at start-up.
func CheckRetention(queueMaxRetry, replayWindow time.Duration) error {
	if queueMaxRetry <= 0 {
		return fmt.Errorf("outboxlib: queue max retry duration must be set (unlimited retries outlive the %s dedup retention)", DedupRetention)
	}
	if replayWindow < 0 {
		return fmt.Errorf("outboxlib: replay window %s is negative", replayWindow)
	}
	if queueMaxRetry+replayWindow >= DedupRetention {
		return fmt.Errorf("outboxlib: queue max retry duration %s + replay window %s must stay below the dedup retention %s", queueMaxRetry, replayWindow, DedupRetention)
	}
	return nil
}

// ConsumerConfig configures NewConsumer.
type ConsumerConfig struct {
	Name     string          // ProcessedEvents.Consumer, e.g. "fulfillment"
	Client   *spanner.Client // the consumer's own database
	Verifier *Verifier       // required
	// MaxAttempts: the delivery with this attempt number (counting from 1) is dead-lettered if it
	// fails; default DefaultMaxAttempts. Keep it below the subscriber queue's max_attempts, or the queue gives up
	// first and the event is only in the logs.
	MaxAttempts     int
	EarlyRetryAfter time.Duration         // Retry-After sent with 409; default 1s
	Registerer      prometheus.Registerer // metrics; nil = none
}

// Consumer turns Cloud Tasks deliveries of events into exactly one application per consumer: the
// handler's writes, the ProcessedEvents row (the inbox) and the aggregate's ConsumerVersions row
// commit in one read-write transaction, so a redelivery finds the inbox row and does nothing.
//
// Answers of POST /events, which drive the queue:
//   - 200: applied, duplicate, stale, dead-lettered, or an event type without a handler (routing is
//     configuration; a consumer that is sent an event it does not handle acknowledges it).
//   - 400: malformed event. 401: bad token. Both are retried by the queue like any failure.
//   - 409 + Retry-After: the handler said ErrEarly. Cloud Tasks honours Retry-After only on 429 and
//     503, and both make it throttle the whole queue (system throttling), so an early event is
//     deliberately a 409: it is retried on the queue's ordinary back-off (min_backoff 100 ms,
//     doubling), and Retry-After is informational.
//   - 503: a transient failure of the handler or of Spanner. Cloud Tasks also slows the queue down
//     on 503, which is what an overloaded or unavailable database wants.
//
// A failing delivery (transient, early or malformed with a usable id) whose attempt number reaches
// MaxAttempts, or a handler error wrapped by Permanent, is written to DeadLetters together with its
// ProcessedEvents row and acknowledged: later duplicates are no-ops and an operator replays it with
// ReplayDeadLetter once the cause is fixed.
type Consumer struct {
	cfg      ConsumerConfig
	handlers map[string]HandlerFunc
	metrics  *consumerMetrics
}

// NewConsumer returns a consumer; register handlers with Handle before serving.
func NewConsumer(cfg ConsumerConfig) (*Consumer, error) {
	var problems []string
	if cfg.Name == "" || len(cfg.Name) > 64 {
		problems = append(problems, "name must be 1 to 64 characters")
	}
	if cfg.Client == nil {
		problems = append(problems, "a Spanner client is required")
	}
	if cfg.Verifier == nil {
		problems = append(problems, "a token verifier is required")
	}
	if cfg.MaxAttempts < 0 || cfg.EarlyRetryAfter < 0 {
		problems = append(problems, "max attempts and early retry-after must not be negative")
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("outboxlib: consumer: %s", strings.Join(problems, "; "))
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.EarlyRetryAfter == 0 {
		cfg.EarlyRetryAfter = time.Second
	}
	m, err := newConsumerMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Consumer{cfg: cfg, handlers: map[string]HandlerFunc{}, metrics: m}, nil
}

// Handle registers h for events of eventType. Call it before serving; a second handler for the
// same type replaces the first.
func (c *Consumer) Handle(eventType string, h HandlerFunc) { c.handlers[eventType] = h }

// PathEvents is the route Register adds.
const PathEvents = "/events"

// Register adds POST /events to e.
func (c *Consumer) Register(e *echo.Echo) { e.POST(PathEvents, c.serveEvent) }

// Header Cloud Tasks sets on every attempt: how many times the task was retried.
const headerRetryCount = "X-Cloudtasks-Taskretrycount"

// serveEvent is POST /events.
func (c *Consumer) serveEvent(ec echo.Context) error {
	req := ec.Request()
	ctx := req.Context()
	log := platform.Logger(ctx).With(zap.String("consumer", c.cfg.Name))
	attempt, _ := strconv.Atoi(req.Header.Get(headerRetryCount))
	if attempt < 0 {
		attempt = 0
	}

	if _, err := c.cfg.Verifier.Verify(ctx, req.Header.Get(echo.HeaderAuthorization)); err != nil {
		if !errors.Is(err, ErrUnauthenticated) {
			c.metrics.events.WithLabelValues(c.cfg.Name, "", OutcomeTransient).Inc()
			log.Warn("cannot verify event token", zap.Error(err))
			return platform.NewProblem(http.StatusServiceUnavailable, "token keys unavailable").Wrap(err)
		}
		c.metrics.events.WithLabelValues(c.cfg.Name, "", OutcomeRejected).Inc()
		log.Warn("event rejected: bad token", zap.String("reason", err.Error()), zap.String("outcome", OutcomeRejected))
		ec.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer error="invalid_token"`)
		return platform.NewProblem(http.StatusUnauthorized, "a valid OIDC token of an allowed caller is required")
	}

	body, err := io.ReadAll(req.Body)
	if err != nil {
		return err // *http.MaxBytesError → 413; a broken connection is the client's problem
	}
	ev, err := ParseRequest(req.Header, body)
	if err != nil {
		return c.malformed(ec, log, body, attempt, err)
	}
	d := Delivery{Event: ev, Attempt: attempt}
	log = log.With(zap.String("event_id", ev.ID), zap.String("event_type", ev.Type),
		zap.String("aggregate_id", ev.AggregateID), zap.Int64("aggregate_version", ev.AggregateVersion),
		zap.Int("attempt", attempt))

	h, ok := c.handlers[ev.Type]
	if !ok {
		c.metrics.events.WithLabelValues(c.cfg.Name, ev.Type, OutcomeUnknownType).Inc()
		log.Info("event type has no handler: acknowledged", zap.String("outcome", OutcomeUnknownType))
		return ec.JSON(http.StatusOK, result{OutcomeUnknownType})
	}

	outcome, commitTS, notes, err := c.apply(ctx, h, d)
	if err == nil {
		if len(notes) > 0 {
			log = log.With(zap.Strings("notes", notes))
		}
		c.observe(log, d, outcome, commitTS)
		return ec.JSON(http.StatusOK, result{outcome})
	}
	if !IsPermanent(err) && attempt+1 < c.cfg.MaxAttempts {
		if errors.Is(err, ErrEarly) {
			c.metrics.events.WithLabelValues(c.cfg.Name, ev.Type, OutcomeEarly).Inc()
			log.Info("event is early: retry later", zap.String("outcome", OutcomeEarly), zap.Error(err))
			// Informational only: see the Consumer documentation for why this is not a 429/503.
			ec.Response().Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(c.cfg.EarlyRetryAfter)))
			return platform.NewProblem(http.StatusConflict, "event arrived before its predecessor; retry later")
		}
		c.metrics.events.WithLabelValues(c.cfg.Name, ev.Type, OutcomeTransient).Inc()
		log.Warn("event failed: retry later", zap.String("outcome", OutcomeTransient), zap.Error(err))
		return platform.NewProblem(http.StatusServiceUnavailable, "event not applied; retry later").Wrap(err)
	}

	// Permanent, or out of attempts: park it and acknowledge the delivery.
	cause := err
	outcome, err = c.deadLetter(ctx, ev.ID, ev.Type, ev.Source, req.Header, body, attempt+1, cause)
	if err != nil {
		c.metrics.events.WithLabelValues(c.cfg.Name, ev.Type, OutcomeTransient).Inc()
		log.Error("cannot write dead letter: retry later", zap.String("outcome", OutcomeTransient),
			zap.Error(err), zap.NamedError("cause", cause))
		return platform.NewProblem(http.StatusServiceUnavailable, "event not applied; retry later").Wrap(err)
	}
	c.observe(log.With(zap.NamedError("cause", cause)), d, outcome, time.Time{})
	return ec.JSON(http.StatusOK, result{outcome})
}

// result is the body of a 200 answer (for people reading logs of the queue, not for Cloud Tasks).
type result struct {
	Outcome string `json:"outcome"`
}

func retryAfterSeconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// malformed answers a delivery ParseRequest refused: 400, which the queue retries like any failure.
// On the last attempt an event with a usable id is dead-lettered (and acknowledged) so that it is
// kept for a person to look at; one without an id cannot be stored (the key is the event id) and is
// only logged, then dropped when the queue gives up.
func (c *Consumer) malformed(ec echo.Context, log *zap.Logger, body []byte, attempt int, perr error) error {
	ctx, h := ec.Request().Context(), ec.Request().Header
	id, typ := h.Get(HeaderID), h.Get(HeaderType)
	log = log.With(zap.String("event_id", id), zap.String("event_type", typ), zap.Int("attempt", attempt))
	if _, err := uuid.Parse(id); err == nil && len(id) == 36 && attempt+1 >= c.cfg.MaxAttempts {
		outcome, err := c.deadLetter(ctx, id, typ, h.Get(HeaderSource), h, body, attempt+1, perr)
		if err == nil {
			c.metrics.events.WithLabelValues(c.cfg.Name, truncate(typ, 128), outcome).Inc()
			if outcome == OutcomeDeadLettered {
				c.metrics.deadLetters.WithLabelValues(c.cfg.Name).Inc()
			}
			log.Error("malformed event dead-lettered", zap.String("outcome", outcome), zap.Error(perr))
			return ec.JSON(http.StatusOK, result{outcome})
		}
		log.Error("cannot write dead letter of a malformed event", zap.Error(err))
	}
	c.metrics.events.WithLabelValues(c.cfg.Name, "", OutcomeRejected).Inc()
	log.Warn("malformed event rejected", zap.String("outcome", OutcomeRejected), zap.Error(perr))
	return platform.NewProblem(http.StatusBadRequest, perr.Error())
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// handlerError marks an error the handler returned (as opposed to one of Spanner's).
type handlerError struct{ err error }

func (e *handlerError) Error() string { return e.err.Error() }
func (e *handlerError) Unwrap() error { return e.err }

// apply runs h for d in one read-write transaction with the inbox and version bookkeeping. notes
// are what the handler noted (Note) in the attempt that committed.
func (c *Consumer) apply(ctx context.Context, h HandlerFunc, d Delivery) (outcome string, commitTS time.Time, notes []string, err error) {
	commitTS, notes, err = c.handlerTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		n, err := txn.Update(ctx, outboxdb.InsertOrIgnoreProcessedEvent(d.ID, c.cfg.Name))
		if err != nil {
			return fmt.Errorf("record event %s: %w", d.ID, err)
		}
		if n == 0 {
			outcome = OutcomeDuplicate
			return nil
		}
		outcome, err = c.applyRecorded(ctx, txn, h, d)
		return err
	})
	return outcome, commitTS, notes, err
}

// handlerTransaction runs fn, which calls a handler, in a read-write transaction and returns the
// notes (Note) of the attempt that committed: the client may run fn more than once (an aborted
// attempt is retried), and only the last attempt describes what was committed.
func (c *Consumer) handlerTransaction(ctx context.Context, fn func(context.Context, *spanner.ReadWriteTransaction) error) (commitTS time.Time, notes []string, err error) {
	commitTS, err = c.cfg.Client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		attempt := &noteList{}
		defer func() { notes = attempt.notes }()
		return fn(context.WithValue(ctx, noteKey{}, attempt), txn)
	})
	return commitTS, notes, err
}

type noteKey struct{}

type noteList struct{ notes []string }

// Note records what a handler decided, e.g. "order already decided; nothing to reserve". The
// consumer writes the notes of the attempt that committed on its one log line for the event (or
// for its replay), field "notes", so a transaction the client retries does not log twice. Called
// outside the consumer (a handler run by a test) the note is logged at info level.
func Note(ctx context.Context, note string) {
	if l, ok := ctx.Value(noteKey{}).(*noteList); ok {
		l.notes = append(l.notes, note)
		return
	}
	platform.Logger(ctx).Info(note)
}

// applyRecorded is apply after the ProcessedEvents row is in place: the version check, the handler
// and the new version.
func (c *Consumer) applyRecorded(ctx context.Context, txn *spanner.ReadWriteTransaction, h HandlerFunc, d Delivery) (string, error) {
	cv, err := outboxdb.ReadConsumerVersion(ctx, txn, d.AggregateID, d.AggregateType, c.cfg.Name)
	switch {
	case errors.Is(err, dao.ErrNotFound):
		d.LastVersion = 0
	case err != nil:
		return "", fmt.Errorf("read version of %s %s: %w", d.AggregateType, d.AggregateID, err)
	default:
		d.LastVersion = cv.Version
	}
	if d.AggregateVersion <= d.LastVersion {
		// A version at or above this one is applied: keep the inbox row, skip the handler.
		return OutcomeStale, nil
	}
	if err := h(ctx, txn, d); err != nil {
		return "", &handlerError{err}
	}
	row := outboxdb.ConsumerVersion{
		AggregateId: d.AggregateID, AggregateType: d.AggregateType, Consumer: c.cfg.Name,
		Version: d.AggregateVersion, EventId: d.ID, UpdatedAt: spanner.CommitTimestamp,
	}
	if err := txn.BufferWrite([]*spanner.Mutation{row.InsertOrUpdate()}); err != nil {
		return "", err
	}
	return OutcomeApplied, nil
}

// deadLetter parks a delivery in DeadLetters with its ProcessedEvents row, in one transaction. If
// the event was processed meanwhile (a concurrent delivery applied it), nothing is written and the
// outcome is duplicate.
func (c *Consumer) deadLetter(ctx context.Context, id, typ, source string, h http.Header, body []byte, attempts int, cause error) (string, error) {
	attrs, err := json.Marshal(ceAttributes(h))
	if err != nil {
		return "", err
	}
	if body == nil {
		body = []byte{}
	}
	row := outboxdb.DeadLetter{
		EventId: id, Consumer: c.cfg.Name, EventType: truncate(typ, 128), Source: truncate(source, 128),
		Attributes: spanner.NullJSON{Value: json.RawMessage(attrs), Valid: true}, Body: body,
		Attempts: int64(attempts), LastError: cause.Error(),
	}
	row.SetCommitTimestamps()
	var outcome string
	_, err = c.cfg.Client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		n, err := txn.Update(ctx, outboxdb.InsertOrIgnoreProcessedEvent(id, c.cfg.Name))
		if err != nil {
			return err
		}
		if n == 0 {
			outcome = OutcomeDuplicate
			return nil
		}
		outcome = OutcomeDeadLettered
		// InsertOrUpdate: a dead letter of this event may be left from before (its inbox row expired).
		return txn.BufferWrite([]*spanner.Mutation{row.InsertOrUpdate()})
	})
	return outcome, err
}

// ceAttributes returns every ce-* header of a delivery, names in lower case.
func ceAttributes(h http.Header) map[string]string {
	m := map[string]string{}
	for k, vs := range h {
		if lk := strings.ToLower(k); strings.HasPrefix(lk, "ce-") && len(vs) > 0 {
			m[lk] = vs[0]
		}
	}
	return m
}

// observe logs and counts the outcome of a delivery that was acknowledged.
func (c *Consumer) observe(log *zap.Logger, d Delivery, outcome string, commitTS time.Time) {
	c.metrics.events.WithLabelValues(c.cfg.Name, d.Type, outcome).Inc()
	level := zapcore.InfoLevel
	switch outcome {
	case OutcomeApplied:
		if !commitTS.IsZero() {
			c.metrics.lag.WithLabelValues(c.cfg.Name, d.Type).Observe(commitTS.Sub(d.OccurredAt).Seconds())
		}
	case OutcomeDeadLettered:
		c.metrics.deadLetters.WithLabelValues(c.cfg.Name).Inc()
		level = zapcore.ErrorLevel
	}
	if ce := log.Check(level, "event "+outcome); ce != nil {
		ce.Write(zap.String("outcome", outcome))
	}
}
