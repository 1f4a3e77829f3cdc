package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/spanmart/spanmart/emulator/spanneremu"
)

// Each target line says what the window measured and whether that meets the target: at 25
// orders/s the CPU and commits per order (the stack's commits at rest left out), at 50 the
// latencies and whether every order placed was COMPLETED.
func TestTargetsSayWhetherEachIsMet(t *testing.T) {
	start := time.Now()
	durations := func(d time.Duration) []time.Duration { return []time.Duration{d / 2, d} }
	w25 := &window{rate: 25, mix: []string{"card"}, placed: 100, start: start, settledAt: start.Add(10 * time.Second),
		cpuTotal: 3, cpuServices: 1.5, spannerAll: spanneremu.Stats{Commits: 2010}}
	w50 := &window{rate: 50, mix: []string{"card"}, placed: 90, shed: 10, statuses: map[string]int{"COMPLETED": 90},
		milestones: map[string]map[string][]time.Duration{"card": {
			"order.awaiting_payment": durations(150 * time.Millisecond),
			"order.confirmed":        durations(700 * time.Millisecond),
			"order.completed":        durations(2 * time.Second),
		}}}
	var out bytes.Buffer
	targets(&out, []*window{w25, w50}, ceilingResult{idlePerSec: 1})
	wantLines(t, out.String(),
		"CPU s per order ≤ 0.035 at 25 orders/s: 0.030: met",
		"of it the services and the relay ≤ 0.018: 0.015: met",
		"commits per order ≤ 20 at 25 orders/s (the issue's is a card order's; these orders are paid by card): 20.0: met",
		"AWAITING_PAYMENT p99 < 200 ms at 50 orders/s: 150 ms: met",
		"CONFIRMED p99 < 500 ms at 50 orders/s: 700 ms: **not met**",
		"COMPLETED p99 < 2.5 s at 50 orders/s: 2000 ms: met",
		"every order placed at 50 orders/s COMPLETED: 90 of 100 (10 refused with 503, 0 failed): **not met**",
	)
}

// With -statements, each window's requests per order are listed by database and statement, the
// most frequent first, those under 0.05 per order left out, a pipe in the SQL escaped for the
// table; without counts by statement nothing is printed.
func TestStatementsPerOrder(t *testing.T) {
	w := &window{rate: 25, placed: 100, spannerAll: spanneremu.Stats{ByDatabase: map[string]spanneremu.DatabaseStats{
		"orders": {Statements: map[string]int64{
			"Commit: insert OutboxEvents, update Orders": 450,
			"ExecuteStreamingSql: SELECT a || b FROM T":  520,
			"StreamingRead(OutboxLeases)":                4,
		}},
		"payments": {Statements: map[string]int64{"StreamingRead(Payments)": 600}},
	}}}
	var out bytes.Buffer
	statements(&out, []*window{w}, []string{"orders", "payments"})
	wantLines(t, out.String(),
		"| 25 | orders | 5.2 | `ExecuteStreamingSql: SELECT a \\|\\| b FROM T` |",
		"| 25 | orders | 4.5 | `Commit: insert OutboxEvents, update Orders` |",
		"| 25 | payments | 6.0 | `StreamingRead(Payments)` |",
	)
	got := out.String()
	if strings.Contains(got, "OutboxLeases") {
		t.Errorf("a statement under 0.05 per order is listed:\n%s", got)
	}
	if strings.Index(got, "SELECT a") > strings.Index(got, "Commit:") {
		t.Errorf("the more frequent statement is not first:\n%s", got)
	}
	out.Reset()
	w.spannerAll.ByDatabase = map[string]spanneremu.DatabaseStats{"orders": {RPCs: map[string]int64{"Commit": 1}}}
	statements(&out, []*window{w}, []string{"orders"})
	if out.Len() != 0 {
		t.Errorf("without counts by statement: %q, want nothing", out.String())
	}
}

func TestShorten(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{{"abc", 3, "abc"}, {"abcd", 3, "abc…"}, {"aé", 2, "a…"}} {
		if got := shorten(c.in, c.n); got != c.want {
			t.Errorf("shorten(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
