package outboxlib_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/platform"
)

func testEvent(t *testing.T) outboxlib.Event {
	t.Helper()
	tr, err := platform.ParseTraceParent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	if err != nil {
		t.Fatal(err)
	}
	ctx := platform.WithTrace(context.Background(), tr)
	ev, err := outboxlib.NewEvent(ctx, "order.created", "order", "9b2f3c1e-0000-4000-8000-000000000001", 3, map[string]any{"total": 1250, "currency": "EUR"})
	if err != nil {
		t.Fatal(err)
	}
	ev.Source = "//spanmart/orders"
	return ev
}

func header(m map[string]string) http.Header {
	h := http.Header{}
	for k, v := range m {
		h.Set(k, v)
	}
	return h
}

func TestHeadersParseRequestRoundTrip(t *testing.T) {
	ev := testEvent(t)
	if ev.TraceParent == "" || ev.SchemaVersion != 1 {
		t.Fatalf("NewEvent: traceparent %q, schema version %d; want the context's trace and 1", ev.TraceParent, ev.SchemaVersion)
	}
	got, err := outboxlib.ParseRequest(header(ev.Headers()), ev.Payload)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ev, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestParseRequestMalformed(t *testing.T) {
	tests := []struct {
		name   string
		change func(h http.Header) []byte // returns the body
		want   string
	}{
		{"no specversion", func(h http.Header) []byte { h.Del(outboxlib.HeaderSpecVersion); return nil }, "ce-specversion"},
		{"bad id", func(h http.Header) []byte { h.Set(outboxlib.HeaderID, "42"); return nil }, "not a UUID"},
		{"no source", func(h http.Header) []byte { h.Del(outboxlib.HeaderSource); return nil }, "source is missing"},
		{"no subject", func(h http.Header) []byte { h.Del(outboxlib.HeaderSubject); return nil }, "aggregate id"},
		{"version not a number", func(h http.Header) []byte { h.Set(outboxlib.HeaderAggregateVersion, "x"); return nil }, "ce-aggregateversion"},
		{"version zero", func(h http.Header) []byte { h.Set(outboxlib.HeaderAggregateVersion, "0"); return nil }, "aggregate version must be positive"},
		{"bad time", func(h http.Header) []byte { h.Set(outboxlib.HeaderTime, "yesterday"); return nil }, "ce-time"},
		{"xml", func(h http.Header) []byte { h.Set("Content-Type", "application/xml"); return nil }, "content type"},
		{"body not JSON", func(h http.Header) []byte { return []byte("{") }, "payload is not valid JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := testEvent(t)
			h := header(ev.Headers())
			body := ev.Payload
			if b := tc.change(h); b != nil {
				body = b
			}
			_, err := outboxlib.ParseRequest(h, body)
			if !errors.Is(err, outboxlib.ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseRequest = %v, want ErrMalformed mentioning %q", err, tc.want)
			}
		})
	}
}

func TestNewEventValidates(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name                string
		typ, aggType, aggID string
		version             int64
		payload             any
		wantErr             string
	}{
		{"ok", "order.created", "order", "o1", 1, map[string]int{"a": 1}, ""},
		{"no type", "", "order", "o1", 1, nil, "type must be"},
		{"long aggregate id", "t", "order", strings.Repeat("x", 65), 1, nil, "aggregate id"},
		{"no aggregate type", "t", "", "o1", 1, nil, "aggregate type"},
		{"version 0", "t", "order", "o1", 0, nil, "aggregate version"},
		{"unmarshalable", "t", "order", "o1", 1, func() {}, "marshal payload"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := outboxlib.NewEvent(ctx, tc.typ, tc.aggType, tc.aggID, tc.version, tc.payload)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if ev.ID == "" || ev.OccurredAt.IsZero() || !json.Valid(ev.Payload) {
					t.Errorf("NewEvent = %+v, want an id, a time and a JSON payload", ev)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("NewEvent error = %v, want one mentioning %q", err, tc.wantErr)
			}
		})
	}
}

func TestShardOfStable(t *testing.T) {
	// Pinned values: a change of the hash would move pending rows of live aggregates to another
	// shard and break per-aggregate publish order during a rollout.
	want := map[string]int64{"": 5, "a": 12, "order-1": 13, "9b2f3c1e-0000-4000-8000-000000000001": 13}
	got := map[string]int64{}
	for id := range want {
		got[id] = outboxlib.ShardOf(id)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ShardOf (-want +got):\n%s", diff)
	}
	// Spread: 1,000 aggregate ids use every shard.
	seen := map[int64]bool{}
	for i := range 1000 {
		s := outboxlib.ShardOf(fmt.Sprintf("order-%d", i))
		if s < 0 || s >= outboxlib.Shards {
			t.Fatalf("ShardOf = %d, want 0..%d", s, outboxlib.Shards-1)
		}
		seen[s] = true
	}
	if len(seen) != outboxlib.Shards {
		t.Errorf("1000 ids hit %d shards, want all %d", len(seen), outboxlib.Shards)
	}
}

func TestCheckRetention(t *testing.T) {
	day := 24 * time.Hour
	tests := []struct {
		maxRetry, replay time.Duration
		ok               bool
	}{
		{7 * day, 14 * day, true},
		{29 * day, 0, true},
		{20 * day, 10 * day, false},
		{31 * day, 0, false},
		{0, day, false}, // unlimited retries
		{day, -day, false},
	}
	for _, tc := range tests {
		err := outboxlib.CheckRetention(tc.maxRetry, tc.replay)
		if (err == nil) != tc.ok {
			t.Errorf("CheckRetention(%s, %s) = %v, want ok=%v", tc.maxRetry, tc.replay, err, tc.ok)
		}
	}
}

func TestPermanent(t *testing.T) {
	base := errors.New("unknown sku")
	err := outboxlib.Permanent(base)
	if !outboxlib.IsPermanent(err) || !errors.Is(err, base) {
		t.Errorf("Permanent(%v) = %v: IsPermanent %v, Is(base) %v", base, err, outboxlib.IsPermanent(err), errors.Is(err, base))
	}
	if outboxlib.IsPermanent(base) || outboxlib.Permanent(nil) != nil {
		t.Error("a plain error is permanent, or Permanent(nil) is not nil")
	}
}
