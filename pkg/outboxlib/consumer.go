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
	"github.com/spanmart/spanmart/pkg/outboxlib/outboxapi"
	"github.com/spanmart/spanmart/pkg/platform"
)

// Delivery is an event as a consumer receives it.
type Delivery struct {
	Event
	// Attempt is X-CloudTasks-TaskRetryCount (0 on the first delivery), as Cloud Tasks counts: it
	// includes attempts the consumer never answered (it was down) and a caller can set it, so it
	// is informational. The consumer's own decisions count the failed answers it gave
	// (DeliveryFailures).
	Attempt int
	// Predecessor is the AggregateVersion of the latest earlier event of the aggregate that was
	// routed to this consumer (ce-predecessorversion, set by the relay; 0 when there is none).
	// Without the attribute it is AggregateVersion-1: every version is expected.
	Predecessor int64
	// Duplicate is set for an After effect only: true when the event had been applied before this
	// delivery or replay (a redelivery, or a concurrent duplicate that lost the race), false when
	// this one's own transaction applied it, so that the intent rows the handler recorded committed
	// just now and no other delivery has seen them yet.
	Duplicate bool
	// AppliedAt and Handed are set for an After effect only, when this delivery's transaction
	// applied the event (Duplicate false): its commit timestamp, and what the handler's committed
	// attempt handed to the effect with HandToAfter (the intent rows it wrote, so that the effect
	// need not read them back). Both are empty for a duplicate.
	AppliedAt time.Time
	Handed    []any
}

// committed is when the event was committed: ce-committime, or ce-time for a delivery without it.
func (d Delivery) committed() time.Time {
	if !d.CommittedAt.IsZero() {
		return d.CommittedAt
	}
	return d.OccurredAt
}

// HandlerFunc applies one event inside the consumer's read-write transaction (it may run more than
// once: pure, no I/O, no goroutines). Return an error wrapping ErrEarly when the event needs
// something this consumer has not applied yet (the library already defers an event whose
// predecessor is not applied, unless the handler was registered with AnyOrder), Permanent(err)
// when it can never succeed, any other error for a transient fault. Whatever the handler buffered
// is discarded when it returns an error. A call to a provider or a mail server belongs after the
// commit: the handler records the intent, the service performs it (docs/architecture.md, "Side effects outside Spanner"). To say
// what it decided, a handler calls Note rather than logging (a log line would repeat on a retry).
type HandlerFunc func(ctx context.Context, txn *spanner.ReadWriteTransaction, d Delivery) error

// ErrEarly is wrapped when an event arrived before its predecessor: nothing is recorded but the
// deferral, and the consumer answers 409 + Retry-After, so the queue redelivers it later.
var ErrEarly = errors.New("event arrived before its predecessor")

// ErrOutOfOrder is wrapped (as a permanent error) when an event of an in-order handler arrives
// with a version at or below one this consumer has applied, under another event id: applying it
// now would apply it out of order and skipping it would lose it, so it is dead-lettered for an
// operator. The relay's predecessor attribute makes it impossible unless the routes changed.
var ErrOutOfOrder = errors.New("event version already passed")

// ErrNoHandler is returned by a replay of a dead letter whose event type still has no handler.
var ErrNoHandler = errors.New("no handler for the event type")

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
	OutcomeDuplicate    = "duplicate"     // this event was already applied: nothing done
	OutcomeStale        = "stale"         // a snapshot superseded by a newer version: recorded, handler skipped
	OutcomeEarly        = "early"         // its predecessor is not applied yet: deferral counted, 409
	OutcomeTransient    = "transient"     // the handler or Spanner failed: failure counted, 503
	OutcomeDeadLettered = "dead_lettered" // parked in DeadLetters and acknowledged
	OutcomeRejected     = "rejected"      // bad token (401) or malformed event (400)
)

// Reasons of a dead letter: the reason label of outbox_consumer_dead_letters_total.
const (
	ReasonPermanent   = "permanent"    // the handler said no retry can fix it
	ReasonMaxAttempts = "max_attempts" // MaxAttempts failed answers (transient or malformed)
	ReasonPatience    = "patience"     // early for longer than EarlyPatience
	ReasonUnknownType = "unknown_type" // no handler for its type (a route shipped before its handler)
	ReasonOutOfOrder  = "out_of_order" // ErrOutOfOrder
)

// DedupRetention is how long ProcessedEvents rows live (the table's row deletion policy). A
// delivery later than this after the first is no longer recognised as a duplicate.
const DedupRetention = 30 * 24 * time.Hour

// OutboxRetention is how long a published OutboxEvents row lives (the table's row deletion
// policy): the window for replaying a published event, and what the delivery ledger's horizon
// must stay within.
const OutboxRetention = 7 * 24 * time.Hour

// DefaultEarlyPatience is how long a consumer defers an event whose predecessor is not applied
// before it dead-letters it. It must cover the longest the relay may hold the predecessor back
// before quarantining it (relay.Config.QuarantineHorizon, about 70 minutes with the relay's
// defaults; the relay refuses a configuration that reaches this): while the predecessor is still on
// its way, its successor waits. A quarantined predecessor raises the relay's alarm; its successor
// is dead-lettered after this patience and replayed once the predecessor is applied.
const DefaultEarlyPatience = 2 * time.Hour

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
	// MaxAttempts: the failed answer (transient or malformed; counted by the consumer itself)
	// that makes this many dead-letters the event instead; default DefaultMaxAttempts. Early
	// answers do not count: EarlyPatience bounds them.
	MaxAttempts int
	// EarlyPatience: an event still early this long after its first early answer is
	// dead-lettered; default DefaultEarlyPatience. Shorter values are for tests.
	EarlyPatience   time.Duration
	EarlyRetryAfter time.Duration         // Retry-After sent with 409; default 1s
	Registerer      prometheus.Registerer // metrics; nil = none
	// Operators guards the operators' endpoints (dead letters, and the service's own): the
	// accounts allowed, and the delegates that may act for one. nil: they refuse everyone (403).
	Operators *Operators
	// Nudger, when set, is nudged after a commit in which handlers appended events, for their
	// shards (best effort, from the nudger's goroutine): a multi-hop flow then waits for no relay
	// poll. It is the service's one nudger, which its own commits use too (ConsumerEnv.NewConsumer).
	Nudger *Nudger
}

// Consumer turns Cloud Tasks deliveries of events into exactly one application per consumer: the
// handler's writes, the ProcessedEvents row (the inbox) and the aggregate's ConsumerVersions row
// commit in one read-write transaction, so a redelivery finds the inbox row and does nothing.
//
// Order. By default a handler sees one aggregate's events in version order: an event is early
// (409) until this consumer has applied its predecessor (Delivery.Predecessor, which the relay
// computes from the routes), and a version at or below the applied one under another id is
// dead-lettered (ErrOutOfOrder), never skipped: a delta is never lost. A handler registered with
// Snapshot gets the newest state only (an older version is stale: recorded, skipped); one
// registered with AnyOrder gets every event as it comes.
//
// Answers of POST /events, which drive the queue:
//   - 200: applied, duplicate, stale or dead-lettered (an event type without a handler is
//     dead-lettered at once, reason unknown_type, and replayed once the handler exists).
//   - 400: malformed event. 401: bad token. Both are retried by the queue like any failure.
//   - 409 + Retry-After: early. Cloud Tasks honours Retry-After only on 429 and 503, and both make
//     it throttle the whole queue (system throttling), so an early event is deliberately a 409: it
//     is retried on the queue's ordinary back-off (min_backoff 100 ms, doubling), and Retry-After
//     is informational.
//   - 503: a transient failure of the handler or of Spanner. Cloud Tasks also slows the queue down
//     on 503, which is what an overloaded or unavailable database wants.
//
// Failed answers are counted by the consumer itself (DeliveryFailures), not by Cloud Tasks'
// retry count, which also counts attempts made while the consumer was down. The MaxAttempts-th
// failed answer (transient or malformed with a usable id), a handler error wrapped by Permanent,
// or an event still early EarlyPatience after its first early answer is written to DeadLetters
// together with its ProcessedEvents row and acknowledged: later duplicates are no-ops and an
// operator replays it with ReplayDeadLetter once the cause is fixed.
type Consumer struct {
	cfg      ConsumerConfig
	handlers map[string]handlerSpec
	metrics  *consumerMetrics
	stats    *stats // for GET /admin/status
}

// handlerSpec is a registered handler with its ordering.
type handlerSpec struct {
	fn    HandlerFunc
	order ordering
	after func(context.Context, Delivery) error
}

type ordering int

const (
	inOrder ordering = iota
	snapshot
	anyOrder
)

// HandlerOption changes how Handle delivers events to a handler.
type HandlerOption func(*handlerSpec)

var (
	// AnyOrder: the handler accepts one aggregate's events in any order (it is commutative, or
	// checks what it needs itself): it runs for every event, never deferred by the library and
	// never skipped (a duplicate id still is).
	AnyOrder HandlerOption = func(h *handlerSpec) { h.order = anyOrder }
	// Snapshot: each event carries the aggregate's whole state, so a newer version supersedes an
	// older one: an event at or below the applied version is stale (recorded, handler skipped),
	// and a gap is not waited for.
	Snapshot HandlerOption = func(h *handlerSpec) { h.order = snapshot }
)

// After runs effect on the request path once the handler's transaction has committed (a delivery
// or an operator's replay of the dead letter), and again on every later delivery of an event
// already applied (a redelivery answered as a duplicate; d.Duplicate tells the two apart, so that an
// effect that must not run twice at once can leave the first run to the delivery that committed
// the intent). It is how a consumer carries out a side effect outside Spanner that its handler recorded as an
// intent row (docs/architecture.md, "Side effects outside Spanner"): effect reads the intent (or,
// after the delivery that wrote it, starts from the rows the handler handed it: HandToAfter) and
// does nothing once it is finished, so it may run any number of times. An error answers 503, so
// the queue delivers the event again and effect runs again; the event itself stays applied (no
// failed delivery is counted, nothing is dead-lettered), and the owner's sweep of unfinished
// intents is the backstop once the queue gives up.
func After(effect func(ctx context.Context, d Delivery) error) HandlerOption {
	return func(h *handlerSpec) { h.after = effect }
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
	if cfg.MaxAttempts < 0 || cfg.EarlyRetryAfter < 0 || cfg.EarlyPatience < 0 {
		problems = append(problems, "max attempts, early patience and early retry-after must not be negative")
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("outboxlib: consumer: %s", strings.Join(problems, "; "))
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.EarlyPatience == 0 {
		cfg.EarlyPatience = DefaultEarlyPatience
	}
	if cfg.EarlyRetryAfter == 0 {
		cfg.EarlyRetryAfter = time.Second
	}
	m, err := newConsumerMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	// Every reason starts at 0, so that an alert on the counter's increase sees the first dead
	// letter of a fresh instance (a series born at 1 shows no increase).
	for _, r := range []string{ReasonPermanent, ReasonMaxAttempts, ReasonPatience, ReasonUnknownType, ReasonOutOfOrder} {
		m.deadLetters.WithLabelValues(cfg.Name, r)
	}
	return &Consumer{cfg: cfg, handlers: map[string]handlerSpec{}, metrics: m, stats: newStats()}, nil
}

// Registrar is what a service's handlers are registered with: a *Consumer, or a test's recorder of
// the event types a service handles (internal/routestest checks them against the relay's routes).
type Registrar interface {
	Handle(eventType string, h HandlerFunc, opts ...HandlerOption)
}

// Handle registers h for events of eventType, in version order unless an option says otherwise
// (AnyOrder, Snapshot). Call it before serving; a second handler for the same type replaces the
// first.
func (c *Consumer) Handle(eventType string, h HandlerFunc, opts ...HandlerOption) {
	spec := handlerSpec{fn: h}
	for _, o := range opts {
		o(&spec)
	}
	c.handlers[eventType] = spec
}

// Routes Register adds.
const (
	PathEvents = "/events"
	// PathLedger is the delivery ledger's question to a consumer (POST, the relay's OIDC token):
	// which of these events have you applied or dead-lettered? See Consumer.Lookup.
	PathLedger = "/admin/ledger"
)

// Register adds the consumer's routes to e: POST /events and POST /admin/ledger, which accept only
// an OIDC token the Verifier accepts (the relay's account, the consumer's audience), and the
// operators' endpoints, which accept only an operator's:
//
//	GET  /admin/deadletters[?all=true&limit=N]  this consumer's dead letters (not yet replayed unless all)
//	POST /admin/deadletters/:id/replay          body {"reason": "..."}; recorded with the operator's e-mail
//	GET  /admin/status                          dead letters, failing events, answers and lag (outboxapi.ConsumerStatus)
//	GET  /admin/processed?event_id=A&event_id=B when this consumer applied each (for an order's trace)
func (c *Consumer) Register(e *echo.Echo) {
	e.POST(PathEvents, c.serveEvent, platform.Quiet) // serveEvent logs each delivery's outcome
	e.POST(PathLedger, c.serveLedger)
	// The group answers any other /admin path for operators only (401/403 before a 404), as
	// echo's group middleware does for a group's unknown paths.
	e.Group("/admin", c.OperatorsOnly)
	e.GET(outboxapi.PathDeadLetters, c.serveDeadLetters, c.OperatorsOnly)
	e.POST(outboxapi.PathDeadLetters+"/:id/replay", c.serveReplay, c.OperatorsOnly)
	e.GET(outboxapi.PathStatus, c.serveStatus, c.OperatorsOnly)
	e.GET(outboxapi.PathProcessed, c.serveProcessed, c.OperatorsOnly)
}

// OperatorsOnly lets through a request of an operator (ConsumerConfig.Operators, see Operators)
// and puts who the operator is in the request's context (OperatorOf): a replay records who did it
// from the verified identity, never from a field the caller writes. Services guard their own
// operator routes with it (echo middleware).
func (c *Consumer) OperatorsOnly(next echo.HandlerFunc) echo.HandlerFunc {
	return c.cfg.Operators.Middleware(next)
}

// Header Cloud Tasks sets on every attempt: how many times the task was retried.
const headerRetryCount = "X-Cloudtasks-Taskretrycount"

// verify checks the caller's token; a non-nil result is the answer to give.
func (c *Consumer) verify(ec echo.Context, log *zap.Logger) error {
	_, err := c.cfg.Verifier.Verify(ec.Request().Context(), ec.Request().Header.Get(echo.HeaderAuthorization))
	if err == nil {
		return nil
	}
	if !errors.Is(err, ErrUnauthenticated) {
		c.metrics.events.WithLabelValues(c.cfg.Name, "", OutcomeTransient).Inc()
		log.Warn("cannot verify token", zap.Error(err))
		return platform.NewProblem(http.StatusServiceUnavailable, "token keys unavailable").Wrap(err)
	}
	c.metrics.events.WithLabelValues(c.cfg.Name, "", OutcomeRejected).Inc()
	c.stats.observe(OutcomeRejected, 0, false)
	log.Warn("event rejected: bad token", zap.String("reason", err.Error()), zap.String("outcome", OutcomeRejected),
		zap.String("path", ec.Path()))
	ec.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer error="invalid_token"`)
	return platform.NewProblem(http.StatusUnauthorized, "a valid OIDC token of an allowed caller is required")
}

// serveEvent is POST /events.
func (c *Consumer) serveEvent(ec echo.Context) error {
	req := ec.Request()
	ctx := req.Context()
	log := platform.Logger(ctx).With(zap.String("consumer", c.cfg.Name))
	attempt, _ := strconv.Atoi(req.Header.Get(headerRetryCount))
	if attempt < 0 {
		attempt = 0
	}
	if err := c.verify(ec, log); err != nil {
		return err
	}

	body, err := io.ReadAll(req.Body)
	if err != nil {
		return err // *http.MaxBytesError → 413; a broken connection is the client's problem
	}
	ev, err := ParseRequest(req.Header, body)
	var pred int64
	if err == nil {
		pred, err = predecessorOf(req.Header, ev.AggregateVersion)
	}
	if err != nil {
		return c.malformed(ec, log, body, attempt, err)
	}
	d := Delivery{Event: ev, Attempt: attempt, Predecessor: pred}
	log = log.With(zap.String("event_id", ev.ID), zap.String("event_type", ev.Type),
		zap.String("aggregate_id", ev.AggregateID), zap.Int64("aggregate_version", ev.AggregateVersion),
		zap.Int("attempt", attempt))
	f := failure{id: ev.ID, typ: ev.Type, source: ev.Source, header: req.Header, body: body}

	h, ok := c.handlers[ev.Type]
	if !ok {
		f.kind, f.cause = failUnknownType, fmt.Errorf("%w: consumer %s has no handler for %q", ErrNoHandler, c.cfg.Name, ev.Type)
		return c.fail(ec, log, d, f)
	}
	outcome, commitTS, rec, err := c.apply(ctx, h, d)
	if err == nil {
		rec.committed()
		if len(rec.notes) > 0 {
			log = log.With(zap.Strings("notes", rec.notes))
		}
		c.observe(log, d, outcome, commitTS, "")
		// The handler's events wait for the relay's poll otherwise: at every hop of a flow.
		c.cfg.Nudger.Nudge(ctx, rec.shards...)
		if h.after != nil && (outcome == OutcomeApplied || outcome == OutcomeDuplicate) {
			if err := h.after(ctx, rec.forAfter(d, outcome, commitTS)); err != nil {
				c.metrics.effects.WithLabelValues(c.cfg.Name, d.Type, "failed").Inc()
				log.Warn("event applied; its side effect failed: retry later", zap.Error(err))
				return platform.NewProblem(http.StatusServiceUnavailable, "event applied; its side effect is not finished; retry later").Wrap(err)
			}
			c.metrics.effects.WithLabelValues(c.cfg.Name, d.Type, "done").Inc()
		}
		return ec.JSON(http.StatusOK, result{outcome})
	}
	f.cause = err
	switch {
	case errors.Is(err, ErrOutOfOrder):
		f.kind = failOutOfOrder
	case IsPermanent(err):
		f.kind = failPermanent
	case errors.Is(err, ErrEarly):
		f.kind = failEarly
	default:
		f.kind = failTransient
	}
	return c.fail(ec, log, d, f)
}

// fail counts a failed delivery (or dead-letters it, when that was its last chance) and answers.
func (c *Consumer) fail(ec echo.Context, log *zap.Logger, d Delivery, f failure) error {
	ctx := ec.Request().Context()
	outcome, reason, err := c.recordFailure(ctx, f)
	if err != nil {
		c.metrics.events.WithLabelValues(c.cfg.Name, d.Type, OutcomeTransient).Inc()
		log.Error("cannot record a failed delivery: retry later", zap.String("outcome", OutcomeTransient),
			zap.Error(err), zap.NamedError("cause", f.cause))
		return platform.NewProblem(http.StatusServiceUnavailable, "event not applied; retry later").Wrap(err)
	}
	if outcome != "" { // dead-lettered, or applied meanwhile by a concurrent delivery
		c.observe(log.With(zap.NamedError("cause", f.cause)), d, outcome, time.Time{}, reason)
		return ec.JSON(http.StatusOK, result{outcome})
	}
	if f.kind == failEarly {
		c.metrics.events.WithLabelValues(c.cfg.Name, d.Type, OutcomeEarly).Inc()
		log.Info("event is early: retry later", zap.String("outcome", OutcomeEarly), zap.Error(f.cause))
		// Informational only: see the Consumer documentation for why this is not a 429/503.
		ec.Response().Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(c.cfg.EarlyRetryAfter)))
		return platform.NewProblem(http.StatusConflict, "event arrived before its predecessor; retry later")
	}
	c.metrics.events.WithLabelValues(c.cfg.Name, d.Type, OutcomeTransient).Inc()
	log.Warn("event failed: retry later", zap.String("outcome", OutcomeTransient), zap.Error(f.cause))
	return platform.NewProblem(http.StatusServiceUnavailable, "event not applied; retry later").Wrap(f.cause)
}

// predecessorOf reads ce-predecessorversion: absent, the predecessor of version is version-1.
func predecessorOf(h http.Header, version int64) (int64, error) {
	v := h.Get(HeaderPredecessorVersion)
	if v == "" {
		return version - 1, nil
	}
	p, err := strconv.ParseInt(v, 10, 64)
	if err != nil || p < 0 || p >= version {
		return 0, fmt.Errorf("%w: ce-predecessorversion %q is not a version below %d", ErrMalformed, v, version)
	}
	return p, nil
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
// A request with a usable event id counts as a failed answer and is dead-lettered (and
// acknowledged) on the MaxAttempts-th, so that it is kept for a person to look at; one without an
// id cannot be stored or counted (the key is the event id) and is only logged, then dropped when
// the queue gives up.
func (c *Consumer) malformed(ec echo.Context, log *zap.Logger, body []byte, attempt int, perr error) error {
	h := ec.Request().Header
	id, typ := h.Get(HeaderID), h.Get(HeaderType)
	log = log.With(zap.String("event_id", id), zap.String("event_type", typ), zap.Int("attempt", attempt))
	if _, err := uuid.Parse(id); err == nil && len(id) == 36 {
		f := failure{id: id, typ: typ, source: h.Get(HeaderSource), header: h, body: body, kind: failMalformed, cause: perr}
		outcome, reason, err := c.recordFailure(ec.Request().Context(), f)
		switch {
		case err != nil:
			log.Error("cannot record a malformed delivery", zap.Error(err))
		case outcome != "":
			c.metrics.events.WithLabelValues(c.cfg.Name, truncate(typ, 128), outcome).Inc()
			if outcome == OutcomeDeadLettered {
				c.metrics.deadLetters.WithLabelValues(c.cfg.Name, reason).Inc()
			}
			log.Error("malformed event dead-lettered", zap.String("outcome", outcome), zap.Error(perr))
			return ec.JSON(http.StatusOK, result{outcome})
		}
	}
	c.metrics.events.WithLabelValues(c.cfg.Name, "", OutcomeRejected).Inc()
	c.stats.observe(OutcomeRejected, 0, false)
	log.Warn("malformed event rejected", zap.String("outcome", OutcomeRejected), zap.Error(perr))
	return platform.NewProblem(http.StatusBadRequest, perr.Error())
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// apply runs h for d in one read-write transaction with the inbox and version bookkeeping, and
// returns what the attempt that committed recorded (its notes and the shards it appended to).
func (c *Consumer) apply(ctx context.Context, h handlerSpec, d Delivery) (outcome string, commitTS time.Time, rec attempt, err error) {
	commitTS, rec, err = c.handlerTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		// One round trip: the inbox row, and the order check as a conditional write of the
		// aggregate's version (claimVersion).
		n, err := txn.BatchUpdate(ctx, []spanner.Statement{
			outboxdb.InsertOrIgnoreProcessedEvent(d.ID, c.cfg.Name),
			c.claimVersion(h, d),
		})
		if err != nil {
			return fmt.Errorf("record event %s: %w", d.ID, err)
		}
		if n[0] == 0 {
			// Roll back: the claim may have matched (a dead-lettered event's version was never
			// applied), and a duplicate must change nothing.
			return errDuplicate
		}
		if n[1] == 0 {
			// Not the common case (early, stale, out of order, a first event whose row exists, a
			// snapshot's or an any-order event's first version): read the version to tell which.
			outcome, err = c.applyRecorded(ctx, txn, h, d)
			return err
		}
		if err := h.fn(ctx, txn, d); err != nil {
			return err
		}
		outcome = OutcomeApplied
		return nil
	})
	if errors.Is(err, errDuplicate) {
		return OutcomeDuplicate, time.Time{}, rec, nil
	}
	return outcome, commitTS, rec, err
}

// errDuplicate ends the transaction of a delivery whose inbox row was there already.
var errDuplicate = errors.New("outboxlib: event already processed")

// claimVersion is the order check of a delivery as one DML statement, which sets the aggregate's
// ConsumerVersions row to d's version exactly when the check lets the handler run as the event's
// first application:
//   - no earlier event of the aggregate was routed here (d.Predecessor 0): the row is inserted if
//     there is none;
//   - otherwise the row is updated if its version is below d's and, in order, at least the
//     predecessor.
//
// A row count of 1 is the common case, decided without reading the row. 0 leaves the row as it was
// and applyRecorded reads it to find out why (early, stale, out of order, or a case the statement
// does not cover, such as a snapshot's first version with a predecessor).
func (c *Consumer) claimVersion(h handlerSpec, d Delivery) spanner.Statement {
	params := map[string]any{
		"AggregateId": d.AggregateID, "AggregateType": d.AggregateType, "Consumer": c.cfg.Name,
		"Version": d.AggregateVersion, "EventId": d.ID,
	}
	if d.Predecessor == 0 {
		return spanner.Statement{SQL: insertVersionSQL, Params: params}
	}
	params["Lowest"] = int64(0)
	if h.order == inOrder {
		params["Lowest"] = d.Predecessor
	}
	return spanner.Statement{SQL: advanceVersionSQL, Params: params}
}

const (
	insertVersionSQL = "INSERT OR IGNORE INTO ConsumerVersions (AggregateId, AggregateType, Consumer, Version, EventId, UpdatedAt) " +
		"VALUES (@AggregateId, @AggregateType, @Consumer, @Version, @EventId, PENDING_COMMIT_TIMESTAMP())"
	advanceVersionSQL = "UPDATE ConsumerVersions SET Version = @Version, EventId = @EventId, UpdatedAt = PENDING_COMMIT_TIMESTAMP() " +
		"WHERE AggregateId = @AggregateId AND AggregateType = @AggregateType AND Consumer = @Consumer " +
		"AND Version >= @Lowest AND Version < @Version"
)

// handlerTransaction runs fn, which calls a handler, in a read-write transaction and returns what
// the attempt that committed recorded: the client may run fn more than once (an aborted attempt is
// retried), and only the last attempt describes what was committed.
func (c *Consumer) handlerTransaction(ctx context.Context, fn func(context.Context, *spanner.ReadWriteTransaction) error) (commitTS time.Time, rec attempt, err error) {
	commitTS, err = c.cfg.Client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		a := &attempt{}
		defer func() { rec = *a }()
		return fn(context.WithValue(ctx, attemptKey{}, a), txn)
	})
	return commitTS, rec, err
}

type attemptKey struct{}

// attempt is what one run of a handler transaction recorded: the handler's notes (Note), the
// pending shards of the events it appended (Append), which the consumer nudges after the commit,
// what it asked to run once committed (OnCommit) and what it handed to the After effect
// (HandToAfter).
type attempt struct {
	notes    []string
	shards   []int64
	onCommit []func()
	handed   []any
}

// forAfter is d as an After effect sees it, once the delivery's transaction ended with outcome at
// commitTS and a recorded what its committed attempt did.
func (a attempt) forAfter(d Delivery, outcome string, commitTS time.Time) Delivery {
	d.Duplicate = outcome == OutcomeDuplicate
	if !d.Duplicate {
		d.AppliedAt, d.Handed = commitTS, a.handed
	}
	return d
}

// committed runs what the committed attempt asked for with OnCommit, in order.
func (a attempt) committed() {
	for _, f := range a.onCommit {
		f()
	}
}

// OnCommit asks the consumer to run f once the handler's transaction has committed, and only for
// the attempt that committed: what a handler decided beyond its writes (a metric, a counter of
// transitions) counts once however often the client retried the transaction, and not at all if
// it failed. f must be quick and must not fail (it is no side effect: a side effect is an intent
// row and an After effect). Called outside the consumer (a handler run by a test), f runs at once.
func OnCommit(ctx context.Context, f func()) {
	if a, ok := ctx.Value(attemptKey{}).(*attempt); ok {
		a.onCommit = append(a.onCommit, f)
		return
	}
	f()
}

// HandToAfter hands v, written by the handler in this transaction (an intent row), to the After
// effect of the delivery that commits it (Delivery.Handed), so that the effect starts from what
// was committed rather than reading it back. Only the attempt that committed hands anything;
// a duplicate hands nothing (its effect reads). Called outside the consumer, it does nothing.
func HandToAfter(ctx context.Context, v any) {
	if a, ok := ctx.Value(attemptKey{}).(*attempt); ok {
		a.handed = append(a.handed, v)
	}
}

// Note records what a handler decided, e.g. "order already decided; nothing to reserve". The
// consumer writes the notes of the attempt that committed on its one log line for the event (or
// for its replay), field "notes", so a transaction the client retries does not log twice. Called
// outside the consumer (a handler run by a test) the note is logged at info level.
func Note(ctx context.Context, note string) {
	if a, ok := ctx.Value(attemptKey{}).(*attempt); ok {
		a.notes = append(a.notes, note)
		return
	}
	platform.Logger(ctx).Info(note)
}

// appended records, in a handler's transaction, the shard of an event Append buffered.
func appended(ctx context.Context, shard int64) {
	if a, ok := ctx.Value(attemptKey{}).(*attempt); ok {
		a.shards = append(a.shards, shard)
	}
}

// applyRecorded is apply after the ProcessedEvents row is in place, with the version read: the
// order check, the handler and the new version. A delivery comes here when its claim of the
// version (claimVersion) wrote nothing; a dead letter's replay always does.
func (c *Consumer) applyRecorded(ctx context.Context, txn *spanner.ReadWriteTransaction, h handlerSpec, d Delivery) (string, error) {
	// last is the highest version of the aggregate this consumer has applied, 0 if none.
	var last int64
	cv, err := outboxdb.ReadConsumerVersion(ctx, txn, d.AggregateID, d.AggregateType, c.cfg.Name)
	switch {
	case errors.Is(err, dao.ErrNotFound):
		cv = nil
	case err != nil:
		return "", fmt.Errorf("read version of %s %s: %w", d.AggregateType, d.AggregateID, err)
	default:
		last = cv.Version
	}
	switch {
	case h.order == anyOrder:
	case d.AggregateVersion <= last && (h.order == snapshot || cv.EventId == d.ID):
		// A newer snapshot is applied, or this very event set the version (its inbox row
		// expired): keep the inbox row, skip the handler.
		if cv.EventId == d.ID {
			return OutcomeDuplicate, nil
		}
		return OutcomeStale, nil
	case d.AggregateVersion <= last:
		return "", Permanent(fmt.Errorf("%w: %s %s version %d arrived after version %d (event %s) was applied",
			ErrOutOfOrder, d.AggregateType, d.AggregateID, d.AggregateVersion, last, cv.EventId))
	case h.order == inOrder && last < d.Predecessor:
		return "", fmt.Errorf("%w: %s %s version %d needs version %d first; applied: %d",
			ErrEarly, d.AggregateType, d.AggregateID, d.AggregateVersion, d.Predecessor, last)
	}
	if err := h.fn(ctx, txn, d); err != nil {
		return "", err
	}
	if d.AggregateVersion <= last {
		return OutcomeApplied, nil // AnyOrder: an older event applied late; the version stays
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

// failureKind is why a delivery was not applied.
type failureKind int

const (
	failTransient   failureKind = iota // retried; MaxAttempts of them dead-letter
	failMalformed                      // counted like a transient failure
	failEarly                          // retried until EarlyPatience has passed
	failPermanent                      // dead-lettered at once
	failUnknownType                    // dead-lettered at once
	failOutOfOrder                     // dead-lettered at once
)

// failure is a delivery that was not applied, as recordFailure needs it.
type failure struct {
	id, typ, source string
	header          http.Header
	body            []byte
	kind            failureKind
	cause           error
}

// recordFailure counts a failed answer in DeliveryFailures, or, when this failure is the event's
// last chance (permanent, no handler, the MaxAttempts-th failure, early beyond EarlyPatience),
// parks the delivery in DeadLetters with its ProcessedEvents row instead: one transaction either
// way. outcome is "" when the failure was only counted (answer 409, 503 or 400), dead_lettered with
// the reason, or duplicate when the event was processed meanwhile (a concurrent delivery applied
// it), in which case nothing is written.
func (c *Consumer) recordFailure(ctx context.Context, f failure) (outcome, reason string, err error) {
	attrs, err := json.Marshal(ceAttributes(f.header))
	if err != nil {
		return "", "", err
	}
	body := f.body
	if body == nil {
		body = []byte{}
	}
	now := time.Now()
	_, err = c.cfg.Client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		outcome, reason = "", ""
		switch _, err := outboxdb.ReadProcessedEvent(ctx, txn, f.id, c.cfg.Name); {
		case err == nil:
			outcome = OutcomeDuplicate
			return nil
		case !errors.Is(err, dao.ErrNotFound):
			return err
		}
		row, err := outboxdb.ReadDeliveryFailure(ctx, txn, f.id, c.cfg.Name)
		switch {
		case errors.Is(err, dao.ErrNotFound):
			row = &outboxdb.DeliveryFailure{EventId: f.id, Consumer: c.cfg.Name}
		case err != nil:
			return err
		}
		if f.kind == failEarly {
			row.Deferrals++
			if !row.FirstDeferredAt.Valid {
				row.FirstDeferredAt = spanner.NullTime{Time: now, Valid: true}
			}
		} else {
			row.Failures++
		}
		row.LastError = f.cause.Error()
		row.UpdatedAt = spanner.CommitTimestamp
		switch {
		case f.kind == failPermanent:
			reason = ReasonPermanent
		case f.kind == failUnknownType:
			reason = ReasonUnknownType
		case f.kind == failOutOfOrder:
			reason = ReasonOutOfOrder
		case f.kind == failEarly && now.Sub(row.FirstDeferredAt.Time) >= c.cfg.EarlyPatience:
			reason = ReasonPatience
		case f.kind != failEarly && row.Failures >= int64(c.cfg.MaxAttempts):
			reason = ReasonMaxAttempts
		default:
			return txn.BufferWrite([]*spanner.Mutation{row.InsertOrUpdate()})
		}
		outcome = OutcomeDeadLettered
		lastError := f.cause.Error()
		if reason == ReasonPatience {
			lastError = fmt.Sprintf("still early %s after its first early answer (%d deferrals): %s",
				now.Sub(row.FirstDeferredAt.Time).Round(time.Millisecond), row.Deferrals, lastError)
		}
		dl := outboxdb.DeadLetter{
			EventId: f.id, Consumer: c.cfg.Name, EventType: truncate(f.typ, 128), Source: truncate(f.source, 128),
			Attributes: spanner.NullJSON{Value: json.RawMessage(attrs), Valid: true}, Body: body,
			Attempts: row.Failures + row.Deferrals, LastError: lastError,
		}
		dl.SetCommitTimestamps()
		inbox := outboxdb.ProcessedEvent{EventId: f.id, Consumer: c.cfg.Name, ProcessedAt: spanner.CommitTimestamp}
		// InsertOrUpdate: a dead letter of this event may be left from before (its inbox row expired).
		return txn.BufferWrite([]*spanner.Mutation{dl.InsertOrUpdate(), inbox.Insert(), row.Delete()})
	})
	return outcome, reason, err
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

// observe logs and counts the outcome of a delivery that was acknowledged (reason: of a dead letter).
func (c *Consumer) observe(log *zap.Logger, d Delivery, outcome string, commitTS time.Time, reason string) {
	c.metrics.events.WithLabelValues(c.cfg.Name, d.Type, outcome).Inc()
	lag := commitTS.Sub(d.committed())
	c.stats.observe(outcome, lag, outcome == OutcomeApplied && !commitTS.IsZero())
	level := zapcore.InfoLevel
	switch outcome {
	case OutcomeApplied:
		if !commitTS.IsZero() {
			c.metrics.lag.WithLabelValues(c.cfg.Name, d.Type).Observe(lag.Seconds())
		}
	case OutcomeDeadLettered:
		c.metrics.deadLetters.WithLabelValues(c.cfg.Name, reason).Inc()
		level = zapcore.ErrorLevel
		log = log.With(zap.String("reason", reason))
	}
	if ce := log.Check(level, "event "+outcome); ce != nil {
		ce.Write(zap.String("outcome", outcome))
	}
}
