package outboxlib

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/spanmart/spanmart/pkg/outboxlib/outboxapi"
	"github.com/spanmart/spanmart/pkg/platform"
)

// NudgeTimeout bounds a nudge: it runs on the request path, after the commit.
const NudgeTimeout = 500 * time.Millisecond

// Nudger tells the relay that a source's outbox has new rows in some pending shards
// (POST {relay}/nudge?source=S&shard=N), so that they go out without waiting for the relay's next
// poll. It is best effort: the relay polls anyway, so a failed nudge only delays publication and is
// logged, never returned. A service calls it after the commit that appended events; a Consumer
// given one (ConsumerConfig.Nudger) does so itself for the events its handlers appended.
type Nudger struct {
	url    string
	source string
	client *http.Client
	tokens TokenSource // nil: no token (the relay refuses nudges without one)
}

// WithTokens makes n present an ID token of ts for the relay's URL: the relay takes nudges only
// from the services' own accounts (NUDGE_ALLOWED_EMAILS). A nil ts leaves n as it is.
func (n *Nudger) WithTokens(ts TokenSource) *Nudger {
	if n != nil && ts != nil {
		n.tokens = ts
	}
	return n
}

// NewNudger returns a nudger of the relay at relayURL for source (the relay's name of the
// service's database, which is the service's name); "" returns nil, which nudges nothing.
func NewNudger(relayURL, source string) *Nudger {
	if relayURL == "" {
		return nil
	}
	// Nudges come from many requests at once: keep enough idle connections that they do not open a
	// new one each (the default keeps 2 per host).
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	return &Nudger{url: strings.TrimSuffix(relayURL, "/") + outboxapi.PathNudge, source: source, client: &http.Client{Timeout: NudgeTimeout, Transport: tr}}
}

// NudgeAggregate nudges the shard of an aggregate whose events were just committed.
func (n *Nudger) NudgeAggregate(ctx context.Context, aggregateID string) {
	n.Nudge(ctx, ShardOf(aggregateID))
}

// Nudge wakes the relay's loops of shards, synchronously, with at most NudgeTimeout in all. A nil
// Nudger does nothing.
func (n *Nudger) Nudge(ctx context.Context, shards ...int64) {
	if n == nil || len(shards) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, NudgeTimeout)
	defer cancel()
	shards = slices.Compact(slices.Sorted(slices.Values(shards)))
	var wg sync.WaitGroup
	for _, shard := range shards {
		wg.Go(func() { n.nudge(ctx, shard) })
	}
	wg.Wait()
}

func (n *Nudger) nudge(ctx context.Context, shard int64) {
	url := fmt.Sprintf("%s?source=%s&shard=%d", n.url, n.source, shard)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
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
		platform.Logger(ctx).Warn("relay nudge", zap.Error(err))
		return
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		platform.Logger(ctx).Warn("relay nudge", zap.Int("status", resp.StatusCode))
	}
}
