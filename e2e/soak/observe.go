package soak

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmart/spanmart/e2e/harness"
	"github.com/spanmart/spanmart/internal/topology"
)

// Sample is the system's state at one moment, for the chart.
type Sample struct {
	At time.Duration // since the load began
	// OutboxLag is the age in seconds of the oldest unpublished outbox row, the largest over the
	// four databases (0 when every row is published): how far behind the relay is.
	OutboxLag   float64
	Unpublished int64
	Placed      int64 // orders placed so far (answered by POST /v1/orders)
	Completed   int64 // orders COMPLETED so far
	Cancelled   int64 // orders CANCELLED so far
	// QueueDepth is the tasks held by the subscriber queues; -1 while the Tasks emulator is down.
	QueueDepth int
}

// sampler records a Sample every second until its context is done.
type sampler struct {
	s      *harness.Stack
	start  time.Time
	placed *atomic.Int64

	mu      sync.Mutex
	samples []Sample
}

func (sm *sampler) run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		if smp, ok := sm.sample(ctx); ok {
			sm.mu.Lock()
			sm.samples = append(sm.samples, smp)
			sm.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (sm *sampler) Samples() []Sample {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	return append([]Sample(nil), sm.samples...)
}

// pendingSQL reads the unpublished rows through the relay's own sparse index.
const pendingSQL = `SELECT COUNT(*), MIN(CreatedAt) FROM OutboxEvents@{FORCE_INDEX=OutboxPending} WHERE PendingShard IS NOT NULL`

func (sm *sampler) sample(ctx context.Context) (Sample, bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	smp := Sample{At: time.Since(sm.start), Placed: sm.placed.Load(), QueueDepth: -1}
	now := time.Now()
	for _, db := range topology.Databases() {
		var n int64
		var oldest spanner.NullTime
		err := sm.s.DB(db).Single().Query(ctx, spanner.Statement{SQL: pendingSQL}).Do(func(r *spanner.Row) error {
			return r.Columns(&n, &oldest)
		})
		if err != nil {
			return smp, false
		}
		smp.Unpublished += n
		if oldest.Valid {
			smp.OutboxLag = max(smp.OutboxLag, now.Sub(oldest.Time).Seconds())
		}
	}
	err := sm.s.DB("orders").Single().Query(ctx, spanner.Statement{
		SQL: `SELECT Status, COUNT(*) FROM Orders WHERE Status IN ('COMPLETED', 'CANCELLED') GROUP BY Status`,
	}).Do(func(r *spanner.Row) error {
		var status string
		var n int64
		if err := r.Columns(&status, &n); err != nil {
			return err
		}
		if status == "COMPLETED" {
			smp.Completed = n
		} else {
			smp.Cancelled = n
		}
		return nil
	})
	if err != nil {
		return smp, false
	}
	if qs, err := sm.s.Queues(ctx); err == nil {
		smp.QueueDepth = 0
		for _, id := range topology.Queues() {
			smp.QueueDepth += qs[id].Depth
		}
	}
	return smp, true
}

// consumerCounts adds up the consumers' outbox_consumer_events_total by outcome across their
// restarts: a process's counters die with it, so the injector collects them just before it
// kills one, and the total adds what the running processes count at the end.
type consumerCounts struct {
	mu   sync.Mutex
	done map[string]float64 // outcome → counted by runs that were killed
	lost int                // runs killed whose counters could not be read first
}

func newConsumerCounts() *consumerCounts { return &consumerCounts{done: map[string]float64{}} }

// collect adds the counters of a process that is about to be killed (not the relay's: it has none).
func (c *consumerCounts) collect(ctx context.Context, s *harness.Stack, process string) {
	if process == topology.Relay {
		return
	}
	counts, err := scrapeOutcomes(ctx, s, process)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.lost++
		return
	}
	for k, v := range counts {
		c.done[k] += v
	}
}

// total is every outcome counted so far, by all runs of every consumer.
func (c *consumerCounts) total(ctx context.Context, s *harness.Stack) (map[string]float64, int) {
	c.mu.Lock()
	out := map[string]float64{}
	for k, v := range c.done {
		out[k] = v
	}
	lost := c.lost
	c.mu.Unlock()
	for _, svc := range topology.Consumers() {
		counts, err := scrapeOutcomes(ctx, s, svc.Name)
		if err != nil {
			lost++
			continue
		}
		for k, v := range counts {
			out[k] += v
		}
	}
	return out, lost
}

// scrapeOutcomes reads a consumer's outbox_consumer_events_total from its /metrics, summed by the
// outcome label.
func scrapeOutcomes(ctx context.Context, s *harness.Stack, process string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	r, err := s.Do(ctx, http.MethodGet, process, "/metrics", nil)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(r.Body), "\n") {
		if !strings.HasPrefix(line, "outbox_consumer_events_total{") {
			continue
		}
		i := strings.Index(line, `outcome="`)
		sp := strings.LastIndexByte(line, ' ')
		if i < 0 || sp < 0 {
			continue
		}
		outcome := line[i+len(`outcome="`):]
		outcome = outcome[:strings.IndexByte(outcome, '"')]
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		out[outcome] += v
	}
	return out, nil
}
