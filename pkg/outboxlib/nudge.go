package outboxlib

import (
	"context"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/spanmart/spanmart/pkg/outboxlib/outboxapi"
	"github.com/spanmart/spanmart/pkg/platform"
)

// NudgeTimeout bounds one nudge request.
const NudgeTimeout = 500 * time.Millisecond

// DefaultNudgeEvery is the least time between two nudges of one Nudger (RELAY_NUDGE_EVERY). A
// nudge that comes sooner after the last one waits for the rest of it, and every nudge that comes
// meanwhile goes with it, in one request naming all their shards. So an event waits at most this
// long more for its nudge, and a nudge after a quiet moment goes at once. It trades latency for
// CPU: a nudge per commit (about ten per order) woke the relay for each event, and the relay's
// tasks then woke the consumers one event at a time; gathered, the work comes in bursts, which
// cost every process less (README, "Performance": 0.87 of the CPU per order at 25 orders/s, the
// p99s to CONFIRMED 64 → 185 ms; with 20 ms both stayed where they were without gathering).
const DefaultNudgeEvery = 50 * time.Millisecond

// Nudger tells the relay that a source's outbox has new rows in some pending shards
// (POST {relay}/nudge?source=S&shard=N&shard=M...), so that they go out without waiting for the
// relay's next poll. It is best effort: the relay polls anyway, so a failed or lost nudge (the
// process ending before it went out) only delays publication and is logged, never returned. A
// service calls it after the commit that appended events; a Consumer given one
// (ConsumerConfig.Nudger) does so itself for the events its handlers appended.
type Nudger struct {
	url    string
	source string
	client *http.Client
	tokens TokenSource // nil: no token (the relay refuses nudges without one)
	every  time.Duration

	mu       sync.Mutex
	pending  map[int64]bool  // shards of the next request
	from     context.Context // the first pending nudge's: its logger and trace go with the request
	sending  bool            // the sender goroutine runs
	queued   uint64          // nudges asked for, counted
	done     uint64          // of them, those sent (or failed)
	progress chan struct{}   // closed and replaced when done grows
	hurry    chan struct{}   // closed by Stop: what is pending goes without waiting for the interval
	stop     sync.Once
}

// WithTokens makes n present an ID token of ts for the relay's URL: the relay takes nudges only
// from the services' own accounts (NUDGE_ALLOWED_EMAILS). A nil ts leaves n as it is.
func (n *Nudger) WithTokens(ts TokenSource) *Nudger {
	if n != nil && ts != nil {
		n.tokens = ts
	}
	return n
}

// Every sets the least time between two of n's requests (default DefaultNudgeEvery; 0 sends
// each as soon as the one before it has been answered). A nil n stays nil.
func (n *Nudger) Every(d time.Duration) *Nudger {
	if n != nil {
		n.every = max(d, 0)
	}
	return n
}

// NewNudger returns a nudger of the relay at relayURL for source (the relay's name of the
// service's database, which is the service's name); "" returns nil, which nudges nothing.
func NewNudger(relayURL, source string) *Nudger {
	if relayURL == "" {
		return nil
	}
	return &Nudger{
		url: strings.TrimSuffix(relayURL, "/") + outboxapi.PathNudge, source: source,
		client: &http.Client{Timeout: NudgeTimeout}, every: DefaultNudgeEvery,
		pending: map[int64]bool{}, progress: make(chan struct{}), hurry: make(chan struct{}),
	}
}

// StopWait bounds Stop: past it the relay's probe (once a second) finds the rows anyway.
const StopWait = time.Second

// Stop sends the nudges still pending at once, without waiting for n's interval, and waits for
// them at most StopWait. A service calls it once it has stopped serving, so that the events its
// last requests committed do not wait for the relay's probe; n sends without waiting from then
// on. A nil Nudger does nothing.
func (n *Nudger) Stop() {
	if n == nil {
		return
	}
	n.stop.Do(func() { close(n.hurry) })
	ctx, cancel := context.WithTimeout(context.Background(), StopWait)
	defer cancel()
	n.Flush(ctx)
}

// NudgeAggregate nudges the shard of an aggregate whose events were just committed.
func (n *Nudger) NudgeAggregate(ctx context.Context, aggregateID string) {
	n.Nudge(ctx, ShardOf(aggregateID))
}

// Nudge asks the relay to wake its loops of shards, and returns at once: the request goes from
// a goroutine of n's, now or, within n's interval (Every) of the last one, when that has passed
// (with the shards of every nudge made meanwhile). A nil Nudger does nothing.
func (n *Nudger) Nudge(ctx context.Context, shards ...int64) {
	if n == nil || len(shards) == 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, s := range shards {
		n.pending[s] = true
	}
	if n.from == nil {
		n.from = context.WithoutCancel(ctx)
	}
	n.queued++
	if !n.sending {
		n.sending = true
		go n.send()
	}
}

// Flush waits until every nudge made before it has been sent (or has failed, which is logged), or
// until ctx is done.
func (n *Nudger) Flush(ctx context.Context) error {
	if n == nil {
		return nil
	}
	n.mu.Lock()
	want := n.queued
	for n.done < want {
		progress := n.progress
		n.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-progress:
		}
		n.mu.Lock()
	}
	n.mu.Unlock()
	return nil
}

// send sends what is pending, one request per interval (Every), until nothing is; it then ends,
// at least an interval after its last request, so the next nudge can go at once.
func (n *Nudger) send() {
	for {
		n.mu.Lock()
		if len(n.pending) == 0 {
			n.sending = false
			n.mu.Unlock()
			return
		}
		shards := slices.Sorted(maps.Keys(n.pending))
		ctx, upTo := n.from, n.queued
		clear(n.pending)
		n.from = nil
		n.mu.Unlock()

		n.post(ctx, shards)

		n.mu.Lock()
		n.done = upTo
		close(n.progress)
		n.progress = make(chan struct{})
		n.mu.Unlock()
		wait := time.NewTimer(n.every)
		select {
		case <-wait.C:
		case <-n.hurry:
		}
		wait.Stop()
	}
}

// post makes one nudge request, for shards of n's source.
func (n *Nudger) post(ctx context.Context, shards []int64) {
	ctx, cancel := context.WithTimeout(ctx, NudgeTimeout)
	defer cancel()
	q := "?source=" + url.QueryEscape(n.source)
	for _, s := range shards {
		q += "&shard=" + strconv.FormatInt(s, 10)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.url+q, nil)
	if err != nil {
		platform.Logger(ctx).Warn("relay nudge", zap.Error(err))
		return
	}
	if tp := platform.TraceFromContext(ctx).TraceParent(); tp != "" {
		req.Header.Set("traceparent", tp)
	}
	if n.tokens != nil {
		token, err := n.tokens.Token(ctx, strings.TrimSuffix(n.url, "/nudge"))
		if err != nil {
			platform.Logger(ctx).Warn("relay nudge: no ID token", zap.Error(err))
			return
		}
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := n.client.Do(req)
	if err != nil {
		platform.Logger(ctx).Warn("relay nudge", zap.Error(err), zap.Int64s("shards", shards))
		return
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		platform.Logger(ctx).Warn("relay nudge", zap.Int("status", resp.StatusCode), zap.Int64s("shards", shards))
	}
}
