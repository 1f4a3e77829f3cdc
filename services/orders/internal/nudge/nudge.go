// Package nudge tells the outbox relay that new rows are waiting (POST {RELAY_URL}/nudge naming the
// source and the shard of the order's events, so the relay wakes that one shard loop), so an
// order's events go out without waiting for the relay's next poll. It is best effort: the relay
// polls anyway, so a failed nudge only delays publication and is logged, never returned.
package nudge

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/platform"
)

// Source is the relay's name for the orders database (relay/routes.yaml).
const Source = "orders"

// Timeout bounds a nudge: it runs on the request path after the commit.
const Timeout = 500 * time.Millisecond

// Relay nudges the relay at a base URL.
type Relay struct {
	url    string
	client *http.Client
}

// New returns a nudger for the relay at baseURL; "" returns nil (no relay configured).
func New(baseURL string) *Relay {
	if baseURL == "" {
		return nil
	}
	// Every committed order nudges, from many requests at once: keep enough idle connections
	// that nudges do not open a new one each (the default keeps 2 per host).
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	return &Relay{url: strings.TrimSuffix(baseURL, "/") + "/nudge", client: &http.Client{Timeout: Timeout, Transport: tr}}
}

// Nudge tells the relay that events of the order aggregateID were committed, synchronously, with at
// most Timeout. A nil Relay does nothing.
func (r *Relay) Nudge(ctx context.Context, aggregateID string) {
	if r == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	url := fmt.Sprintf("%s?source=%s&shard=%d", r.url, Source, outboxlib.ShardOf(aggregateID))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		platform.Logger(ctx).Warn("relay nudge", zap.Error(err))
		return
	}
	if tp := platform.TraceFromContext(ctx).TraceParent(); tp != "" {
		req.Header.Set("traceparent", tp)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		platform.Logger(ctx).Warn("relay nudge", zap.Error(err))
		return
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		platform.Logger(ctx).Warn("relay nudge", zap.Int("status", resp.StatusCode))
	}
}
