package outboxlib

import (
	"net/http"
	"slices"
	"sync"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/labstack/echo/v4"

	"github.com/spanmart/spanmart/gen/dao/outboxdb"
	"github.com/spanmart/spanmart/pkg/outboxlib/outboxapi"
	"github.com/spanmart/spanmart/pkg/platform"
)

// LagWindowSize is how many recent latencies a LagWindow keeps.
const LagWindowSize = 1000

// LagWindow keeps the last LagWindowSize latencies of something (a consumer's commit → applied,
// the relay's commit → published) for an operator's quantiles; the Prometheus histograms carry the
// same for dashboards. Safe for concurrent use; the zero value is ready.
type LagWindow struct {
	mu   sync.Mutex
	lags []float64 // a ring, in seconds
	next int
}

// Observe records one latency.
func (w *LagWindow) Observe(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.lags) < LagWindowSize {
		w.lags = append(w.lags, d.Seconds())
		return
	}
	w.lags[w.next] = d.Seconds()
	w.next = (w.next + 1) % LagWindowSize
}

// Summary returns the window's count and quantiles.
func (w *LagWindow) Summary() outboxapi.LagSummary {
	w.mu.Lock()
	lags := slices.Clone(w.lags)
	w.mu.Unlock()
	slices.Sort(lags)
	sum := outboxapi.LagSummary{Count: int64(len(lags))}
	if n := len(lags); n > 0 {
		sum.P50, sum.P99 = lags[(n-1)/2], lags[min(n-1, n*99/100)]
	}
	return sum
}

// stats is what the consumer counted since its process started, for GET /admin/status (the
// Prometheus metrics carry the same, for dashboards; this is for operators and the console).
type stats struct {
	mu     sync.Mutex
	since  time.Time
	events map[string]int64 // by outcome
	lag    LagWindow        // commit → applied
}

func newStats() *stats { return &stats{since: time.Now(), events: map[string]int64{}} }

func (s *stats) observe(outcome string, lag time.Duration, hasLag bool) {
	s.mu.Lock()
	s.events[outcome]++
	s.mu.Unlock()
	if hasLag {
		s.lag.Observe(lag)
	}
}

func (s *stats) snapshot() (time.Time, outboxapi.EventCounts, outboxapi.LagSummary) {
	s.mu.Lock()
	events := outboxapi.EventCounts{
		Applied:      s.events[OutcomeApplied],
		DeadLettered: s.events[OutcomeDeadLettered],
		Duplicate:    s.events[OutcomeDuplicate],
		Early:        s.events[OutcomeEarly],
		Rejected:     s.events[OutcomeRejected],
		Stale:        s.events[OutcomeStale],
		Transient:    s.events[OutcomeTransient],
	}
	s.mu.Unlock()
	return s.since, events, s.lag.Summary()
}

// serveStatus is GET /admin/status (outboxapi.ConsumerStatus): the consumer's backlog of trouble in
// the database (dead letters not yet replayed; events with failed or early answers that are not
// applied yet) and what it did since its process started (answers by outcome, the lag of its
// recent applications).
func (c *Consumer) serveStatus(ec echo.Context) error {
	ctx := ec.Request().Context()
	since, events, lag := c.stats.snapshot()
	st := outboxapi.ConsumerStatus{Consumer: c.cfg.Name, Since: since.UTC(), Events: events, Lag: lag}
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

// serveProcessed is GET /admin/processed?event_id=A&event_id=B: which of the events this consumer
// has applied, and when (an id not applied is absent).
func (c *Consumer) serveProcessed(ec echo.Context) error {
	ids := ec.QueryParams()["event_id"]
	if len(ids) == 0 || len(ids) > outboxapi.MaxProcessedIDs {
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
	out := outboxapi.ProcessedList{Consumer: c.cfg.Name, Processed: []outboxapi.Processed{}}
	for _, r := range rows {
		out.Processed = append(out.Processed, outboxapi.Processed{EventID: r.EventId, ProcessedAt: r.ProcessedAt.UTC()})
	}
	return ec.JSON(http.StatusOK, out)
}
