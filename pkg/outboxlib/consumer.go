package outboxlib

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
)

// Delivery is an event as a consumer receives it.
type Delivery struct {
	Event
	Attempt     int   // X-CloudTasks-TaskRetryCount (0 on the first delivery)
	LastVersion int64 // highest AggregateVersion of this aggregate this consumer has applied, 0 if none
}

// HandlerFunc applies one event inside the consumer's read-write transaction (it may run more than
// once: pure, no I/O, no goroutines).
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

// ConsumerConfig configures NewConsumer.
type ConsumerConfig struct {
	Name            string // ProcessedEvents.Consumer, e.g. "fulfillment"
	Client          *spanner.Client
	Verifier        *Verifier             // required
	MaxAttempts     int                   // dead-letter after this many failed deliveries; default 10
	EarlyRetryAfter time.Duration         // Retry-After sent with 409; default 1s
	Registerer      prometheus.Registerer // metrics; nil = none
}

// Consumer receives events over HTTP and applies each at most once per consumer.
type Consumer struct {
	cfg      ConsumerConfig
	handlers map[string]HandlerFunc
}

// NewConsumer returns a consumer; register handlers with Handle before serving.
func NewConsumer(cfg ConsumerConfig) (*Consumer, error) {
	if cfg.Name == "" || cfg.Client == nil || cfg.Verifier == nil {
		return nil, fmt.Errorf("outboxlib: consumer needs a name, a Spanner client and a verifier")
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 10
	}
	if cfg.EarlyRetryAfter <= 0 {
		cfg.EarlyRetryAfter = time.Second
	}
	return &Consumer{cfg: cfg, handlers: map[string]HandlerFunc{}}, nil
}

// Handle registers h for events of eventType. Not safe to call while serving.
func (c *Consumer) Handle(eventType string, h HandlerFunc) { c.handlers[eventType] = h }

// Register adds POST /events to e.
func (c *Consumer) Register(e *echo.Echo) { e.POST("/events", c.serveEvent) }

// RegisterAdmin adds GET /deadletters and POST /deadletters/:id/replay to g.
func (c *Consumer) RegisterAdmin(g *echo.Group) {}

// ReplayDeadLetter re-runs a dead-lettered event through its handler.
func (c *Consumer) ReplayDeadLetter(ctx context.Context, eventID, reason, by string) error {
	return errors.New("not implemented")
}

func (c *Consumer) serveEvent(ec echo.Context) error {
	return ec.NoContent(http.StatusServiceUnavailable)
}

// DedupRetention is how long ProcessedEvents rows live (the table's row deletion policy).
const DedupRetention = 30 * 24 * time.Hour

// CheckRetention refuses a configuration whose redelivery window reaches past DedupRetention.
func CheckRetention(queueMaxRetry, replayWindow time.Duration) error {
	if queueMaxRetry+replayWindow >= DedupRetention {
		return fmt.Errorf("outboxlib: queue max retry %s + replay window %s must stay below the dedup retention %s", queueMaxRetry, replayWindow, DedupRetention)
	}
	return nil
}
