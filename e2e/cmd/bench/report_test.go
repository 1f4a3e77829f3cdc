package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	pprofile "github.com/google/pprof/profile"
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
// table; with the emulator's CPU by statement, each row says what a request and an order's cost
// the emulator, the costliest first; without counts by statement nothing is printed.
func TestStatementsPerOrder(t *testing.T) {
	counts := map[string]spanneremu.DatabaseStats{
		"orders": {Statements: map[string]int64{
			"Commit: insert OutboxEvents, update Orders": 450,
			"ExecuteStreamingSql: SELECT a || b FROM T":  520,
			"StreamingRead(OutboxLeases)":                4,
		}},
		"payments": {Statements: map[string]int64{"StreamingRead(Payments)": 600}},
	}
	w := &window{rate: 25, placed: 100, spannerAll: spanneremu.Stats{ByDatabase: counts}}
	var out bytes.Buffer
	statements(&out, []*window{w}, []string{"orders", "payments"})
	wantLines(t, out.String(),
		"| 25 | orders | 5.2 | — | — | `ExecuteStreamingSql: SELECT a \\|\\| b FROM T` |",
		"| 25 | orders | 4.5 | — | — | `Commit: insert OutboxEvents, update Orders` |",
		"| 25 | payments | 6.0 | — | — | `StreamingRead(Payments)` |",
	)
	got := out.String()
	if strings.Contains(got, "OutboxLeases") {
		t.Errorf("a statement under 0.05 per order is listed:\n%s", got)
	}
	if strings.Index(got, "SELECT a") > strings.Index(got, "Commit:") {
		t.Errorf("the more frequent statement is not first:\n%s", got)
	}

	// While placing (half the window's requests): 225 commits took 0.09 s (400 µs each, 1.80 ms
	// for an order's 4.5) and 260 queries 0.026 s (100 µs, 0.52 ms for 5.2).
	w.spanner = spanneremu.Stats{ByDatabase: map[string]spanneremu.DatabaseStats{
		"orders": {Statements: map[string]int64{"Commit: insert OutboxEvents, update Orders": 225, "ExecuteStreamingSql: SELECT a || b FROM T": 260}},
	}}
	w.stmtCPU = map[string]map[string]float64{"orders": {"Commit: insert OutboxEvents, update Orders": 0.09, "ExecuteStreamingSql: SELECT a || b FROM T": 0.026}}
	w.benchCPU = 0.232
	out.Reset()
	statements(&out, []*window{w}, []string{"orders", "payments"})
	got = out.String()
	wantLines(t, got,
		"| 25 | orders | 4.5 | 400 | 1.80 | `Commit: insert OutboxEvents, update Orders` |",
		"| 25 | orders | 5.2 | 100 | 0.52 | `ExecuteStreamingSql: SELECT a \\|\\| b FROM T` |",
		"| 25 | payments | 6.0 | — | — | `StreamingRead(Payments)` |",
		"At 25 orders/s, the requests' handlers took 1.2 of the bench process's 2.3 CPU ms per order while placing (50 %).",
	)
	if strings.Index(got, "SELECT a") < strings.Index(got, "Commit:") {
		t.Errorf("the costlier statement is not first:\n%s", got)
	}

	out.Reset()
	w.spannerAll.ByDatabase = map[string]spanneremu.DatabaseStats{"orders": {RPCs: map[string]int64{"Commit": 1}}}
	statements(&out, []*window{w}, []string{"orders"})
	if out.Len() != 0 {
		t.Errorf("without counts by statement: %q, want nothing", out.String())
	}
}

// statementCPU sums the samples of a CPU profile by spanneremu's labels, in seconds, and leaves
// out samples without both.
func TestStatementCPU(t *testing.T) {
	p := &pprofile.Profile{
		SampleType: []*pprofile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &pprofile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:     10_000_000,
	}
	fn := &pprofile.Function{ID: 1, Name: "f"}
	loc := &pprofile.Location{ID: 1, Line: []pprofile.Line{{Function: fn}}}
	p.Function, p.Location = []*pprofile.Function{fn}, []*pprofile.Location{loc}
	sample := func(ns int64, labels map[string][]string) {
		p.Sample = append(p.Sample, &pprofile.Sample{Location: []*pprofile.Location{loc}, Value: []int64{ns / 10_000_000, ns}, Label: labels})
	}
	commit := map[string][]string{spanneremu.DatabaseLabel: {"orders"}, spanneremu.StatementLabel: {"Commit: update Orders"}}
	sample(30_000_000, commit)
	sample(20_000_000, commit)
	sample(10_000_000, map[string][]string{spanneremu.DatabaseLabel: {"payments"}, spanneremu.StatementLabel: {"StreamingRead(Payments)"}})
	sample(40_000_000, nil)
	sample(40_000_000, map[string][]string{spanneremu.StatementLabel: {"Commit: update Orders"}})
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	got, err := statementCPU(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]float64{"orders": {"Commit: update Orders": 0.05}, "payments": {"StreamingRead(Payments)": 0.01}}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("CPU by statement (-want +got):\n%s", diff)
	}
	if _, err := statementCPU([]byte("not a profile")); err == nil {
		t.Error("statementCPU of no profile: no error")
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
