package web

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/internal/adminclient"
)

func TestNormalizeError(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "(no error recorded)"},
		{`reserve order 0b0c6f2e-5d1a-4c8e-9f3b-2a7d4e6c8b10: 3 requested, 1 on hand`, `reserve order <id>: <n> requested, <n> on hand`},
		{`create task q/8f0e2c1d9b7a6f5e4d3c: rpc error: code = InvalidArgument desc = task size 104857 exceeds 102400 bytes`,
			`create task q/<id>: rpc error: code = InvalidArgument desc = task size <n> exceeds <n> bytes`},
		{"deadline at 2026-01-02T03:04:05.123456Z after 1.5s", "deadline at <time> after <n>s"},
		{"smtp: 451 4.7.1   try\nlater", "smtp: <n> <n>.<n> try later"},
		{`unknown sku "TEE-M"`, `unknown sku "TEE-M"`},
		{"provider pi_3QxYz0 says cafebabe", "provider pi_3QxYz0 says cafebabe"}, // short hex and words stay
	} {
		if got := normalizeError(tc.in); got != tc.want {
			t.Errorf("normalizeError(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestGroupFailures(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	fs := []failure{
		{Kind: kindDeadLetter, Where: "fulfillment", EventID: "a", LastError: "order 11111111-2222-4333-8444-555555555555: 2 short", FailedAt: at},
		{Kind: kindOutbox, Where: "orders", EventID: "b", LastError: "queue says no", Committed: at},
		{Kind: kindDeadLetter, Where: "fulfillment", EventID: "c", LastError: "order 66666666-7777-4888-8999-aaaaaaaaaaaa: 5 short", FailedAt: at.Add(time.Minute)},
		{Kind: kindDeadLetter, Where: "notifications", EventID: "d", LastError: "order 66666666-7777-4888-8999-aaaaaaaaaaaa: 1 short", FailedAt: at.Add(-time.Minute)},
	}
	var got [][]string
	for _, g := range groupFailures(fs) {
		ids := []string{g.Key}
		for _, f := range g.Failures {
			ids = append(ids, f.EventID)
		}
		got = append(got, ids)
	}
	want := [][]string{{"order <id>: <n> short", "c", "a", "d"}, {"queue says no", "b"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("groups (-want +got):\n%s", diff)
	}
}

func TestTraceEventsMarkTheSlowestHop(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	d := func(ms int) *time.Duration { v := time.Duration(ms) * time.Millisecond; return &v }
	pt := func(ms int) *time.Time { v := t0.Add(time.Duration(ms) * time.Millisecond); return &v }
	hop := func(id, sub string, publish, delivery int) adminclient.Hop {
		h := adminclient.Hop{EventID: id, EventType: "t." + id, CommittedAt: t0, PublishedAt: pt(publish), Subscriber: sub, PublishLatency: d(publish)}
		if delivery >= 0 {
			h.ProcessedAt, h.DeliveryLatency, h.EndToEnd = pt(publish+delivery), d(delivery), d(publish+delivery)
		}
		return h
	}
	for _, tc := range []struct {
		name        string
		hops        []adminclient.Hop
		wantRow     [2]int // event, row of the slowest delivery; -1 for none
		wantPublish bool   // the publish made it slow
	}{
		{"a slow delivery", []adminclient.Hop{hop("a", "x", 10, 20), hop("a", "y", 10, 900), hop("b", "x", 10, 30)}, [2]int{0, 1}, false},
		{"a slow publish", []adminclient.Hop{hop("a", "x", 10, 20), hop("b", "x", 800, 30), hop("b", "y", 800, 10)}, [2]int{1, 0}, true},
		{"nothing processed", []adminclient.Hop{hop("a", "x", 10, -1)}, [2]int{-1, -1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, sl := traceEvents(adminclient.Trace{Hops: tc.hops})
			got, publish := [2]int{-1, -1}, false
			for i, ev := range evs {
				publish = publish || ev.SlowPublish
				for j, r := range ev.Rows {
					if r.Slowest {
						got = [2]int{i, j}
						if r.SlowDelivery == tc.wantPublish {
							t.Errorf("row %d/%d: SlowDelivery = %v with the publish slow = %v", i, j, r.SlowDelivery, tc.wantPublish)
						}
					}
				}
			}
			if got != tc.wantRow || publish != tc.wantPublish || (sl == nil) != (tc.wantRow[0] < 0) {
				t.Errorf("slowest at %v (publish %v, summary %+v), want %v (publish %v)", got, publish, sl, tc.wantRow, tc.wantPublish)
			}
		})
	}
}
