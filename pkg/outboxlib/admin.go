package outboxlib

import (
	"net/http"
	"slices"
	"sync"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/labstack/echo/v4"

	"github.com/spanmart/spanmart/gen/dao/outboxdb"
	"github.com/spanmart/spanmart/pkg/platform"
)

// MaxProcessedLookup bounds the event ids of one GET /admin/processed.
const MaxProcessedLookup = 100

// lagWindow is how many recent applications the status's lag quantiles cover.
const lagWindow = 1000

// stats is what the consumer counted since its process started, for GET /admin/status (the
// Prometheus metrics carry the same, for dashboards; this is for operators and the console).
type stats struct {
	mu      sync.Mutex
	since   time.Time
	events  map[string]int64 // by outcome
	lags    []float64        // ring of the last lagWindow commit → applied, in seconds
	nextLag int
}

func newStats() *stats { return &stats{since: time.Now(), events: map[string]int64{}} }

func (s *stats) observe(outcome string, lag time.Duration, hasLag bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events[outcome]++
	if !hasLag {
		return
	}
	if len(s.lags) < lagWindow {
		s.lags = append(s.lags, lag.Seconds())
		return
	}
	s.lags[s.nextLag] = lag.Seconds()
	s.nextLag = (s.nextLag + 1) % lagWindow
}

// LagSummary is the commit → applied latency of a consumer's recent applications.
type LagSummary struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50"`
	P99   float64 `json:"p99"`
}

func (s *stats) snapshot() (time.Time, map[string]int64, LagSummary) {
	s.mu.Lock()
	events := make(map[string]int64, len(s.events))
	for k, v := range s.events {
		events[k] = v
	}
	lags := slices.Clone(s.lags)
	s.mu.Unlock()
	for _, o := range []string{OutcomeApplied, OutcomeDuplicate, OutcomeStale, OutcomeEarly, OutcomeTransient, OutcomeDeadLettered, OutcomeRejected} {
		events[o] += 0
	}
	slices.Sort(lags)
	sum := LagSummary{Count: len(lags)}
	if n := len(lags); n > 0 {
		sum.P50, sum.P99 = lags[(n-1)/2], lags[min(n-1, n*99/100)]
	}
	return s.since, events, sum
}

// Status is a consumer's GET /admin/status: its backlog of trouble in the database (dead letters
// not yet replayed; events with failed or early answers that are not applied yet) and what it did
// since its process started (answers by outcome, the lag of its recent applications).
type Status struct {
	Consumer    string           `json:"consumer"`
	DeadLetters int64            `json:"dead_letters"`
	Failing     int64            `json:"failing"`
	Since       time.Time        `json:"since"`
	Events      map[string]int64 `json:"events"`
	Lag         LagSummary       `json:"lag_seconds"`
}

func (c *Consumer) serveStatus(ec echo.Context) error {
	ctx := ec.Request().Context()
	since, events, lag := c.stats.snapshot()
	st := Status{Consumer: c.cfg.Name, Since: since.UTC(), Events: events, Lag: lag}
	txn := c.cfg.Client.ReadOnlyTransaction()
	defer txn.Close()
	for _, q := range []struct {
		sql string
		n   *int64
	}{
		{"SELECT COUNT(*) FROM DeadLetters WHERE Consumer = @c AND ReplayedAt IS NULL", &st.DeadLetters},
		{`SELECT COUNT(*) FROM DeliveryFailures f WHERE f.Consumer = @c
			AND NOT EXISTS (SELECT 1 FROM ProcessedEvents p WHERE p.EventId = f.EventId AND p.Consumer = f.Consumer)`, &st.Failing},
	} {
		err := txn.Query(ctx, spanner.Statement{SQL: q.sql, Params: map[string]any{"c": c.cfg.Name}}).Do(func(r *spanner.Row) error {
			return r.Column(0, q.n)
		})
		if err != nil {
			return err
		}
	}
	return ec.JSON(http.StatusOK, st)
}

// Processed is when this consumer applied an event (its ProcessedEvents row, the commit time of
// the application).
type Processed struct {
	EventID     string    `json:"event_id"`
	ProcessedAt time.Time `json:"processed_at"`
}

// serveProcessed is GET /admin/processed?event_id=A&event_id=B: which of the events this consumer
// has applied, and when (an id not applied is absent).
func (c *Consumer) serveProcessed(ec echo.Context) error {
	ids := ec.QueryParams()["event_id"]
	if len(ids) == 0 || len(ids) > MaxProcessedLookup {
		return platform.NewProblem(http.StatusBadRequest, "give 1 to 100 event_id parameters")
	}
	keys := make([]spanner.Key, len(ids))
	for i, id := range ids {
		keys[i] = outboxdb.ProcessedEventKey(id, c.cfg.Name)
	}
	rows, err := outboxdb.ReadProcessedEventRows(ec.Request().Context(), c.cfg.Client.Single(), spanner.KeySetFromKeys(keys...))
	if err != nil {
		return err
	}
	out := struct {
		Consumer  string      `json:"consumer"`
		Processed []Processed `json:"processed"`
	}{Consumer: c.cfg.Name, Processed: []Processed{}}
	for _, r := range rows {
		out.Processed = append(out.Processed, Processed{EventID: r.EventId, ProcessedAt: r.ProcessedAt.UTC()})
	}
	return ec.JSON(http.StatusOK, out)
}
