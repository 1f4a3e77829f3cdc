package main

import (
	"bytes"
	"io"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// floats compares figures to 1e-9.
var floats = cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })

// testdata/report.md is a rate-mode report as the bench printed it (two windows at 25 orders/s).
func TestParseABReport(t *testing.T) {
	b, err := os.ReadFile("testdata/report.md")
	if err != nil {
		t.Fatal(err)
	}
	got := parseABReport(string(b))
	want := []abFigures{
		{rateFigure: 25, "orders accepted": 750, "CPU s per order": 0.125, servicesPerOrder: 0.125 * (1.96 - 0.99) / 1.96, benchOverServices: 0.99 / (1.96 - 0.99), "aborts per commit": 0.010,
			"card → AWAITING_PAYMENT p99 (ms)": 2248, "card → CONFIRMED p99 (ms)": 7933, "card → COMPLETED p99 (ms)": 22600},
		{rateFigure: 25, "orders accepted": 750, "CPU s per order": 0.144, servicesPerOrder: 0.144 * (1.95 - 1.06) / 1.95, benchOverServices: 1.06 / (1.95 - 1.06), "aborts per commit": 0.019,
			"card → AWAITING_PAYMENT p99 (ms)": 4090, "card → CONFIRMED p99 (ms)": 11600, "card → COMPLETED p99 (ms)": 28100},
	}
	if diff := cmp.Diff(want, got, floats); diff != "" {
		t.Errorf("figures (-want +got):\n%s", diff)
	}
}

// testdata/overload.md is an overload-mode report as the bench printed it (-capacity 15,
// -overload-window 10s): a window per overload window, the drain's row left out, and the drain's
// time.
func TestParseOverloadReport(t *testing.T) {
	b, err := os.ReadFile("testdata/overload.md")
	if err != nil {
		t.Fatal(err)
	}
	got := parseOverloadReport(string(b))
	window := func(accepted, completed, acceptedP99, shedP99, aborts float64) abFigures {
		return abFigures{"accepted/s": accepted, "completed/s": completed, "accepted POST p99 (ms)": acceptedP99,
			"shed POST p99 (ms)": shedP99, "aborts per commit": aborts}
	}
	want := []abFigures{
		window(36.0, 31.0, 72, 38, 0.001),
		window(31.8, 30.4, 76, 41, 0.003),
		window(31.2, 32.6, 84, 36, 0.001),
		{"drain (s)": 2.1},
	}
	if diff := cmp.Diff(want, got, floats); diff != "" {
		t.Errorf("figures (-want +got):\n%s", diff)
	}
	// A backlog that did not drain has no drain time to compare.
	undrained := strings.Replace(string(b), "every one ended 2.1s after it", "**3 had not ended** 1m0s after it", 1)
	if got := parseOverloadReport(undrained); len(got) != 3 {
		t.Errorf("an undrained run: %d windows, want the 3 overload windows only", len(got))
	}
}

// A report without a table (an older build, a failed run) gives no figures rather than wrong ones.
func TestParseABReportMissingTables(t *testing.T) {
	if got := parseABReport("bench FAILED: the stack did not start\n"); len(got) != 0 {
		t.Errorf("figures of a report without tables: %v", got)
	}
	if got := parseOverloadReport("bench FAILED: the stack did not start\n"); len(got) != 0 {
		t.Errorf("overload figures of a report without tables: %v", got)
	}
	got := parseABReport("| orders/s | CPU s/order |\n|---|---|\n| 25 | 0.2 |\n")
	if len(got) != 1 || got[0].get("CPU s per order") != 0.2 || !math.IsNaN(got[0].get("aborts per commit")) || !math.IsNaN(got[0].get("card → COMPLETED p99 (ms)")) {
		t.Errorf("a report with only the per-window table: %+v, want CPU 0.2 and the rest NaN", got)
	}
}

func TestWithoutABFlags(t *testing.T) {
	got := withoutABFlags([]string{"-rates", "25,25", "-ab", "HEAD~1", "-duration=30s", "--ab-runs=3", "-ab-runs", "2", "-ab=main", "-v"})
	if diff := cmp.Diff([]string{"-rates", "25,25", "-duration=30s", "-v"}, got); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
}

func TestPrintABRatios(t *testing.T) {
	f := func(accepted, cpu, aborts float64) abFigures {
		return abFigures{"orders accepted": accepted, "CPU s per order": cpu, "aborts per commit": aborts,
			"card → AWAITING_PAYMENT p99 (ms)": 100, "card → CONFIRMED p99 (ms)": 200}
	}
	var out bytes.Buffer
	printAB(&out, rateMetrics, []string{"this", "abc123"}, [][][]abFigures{
		{{f(900, 0.1, 0.01), f(1100, 0.3, 0.03)}},
		{{f(800, 0.4, 0.1)}, {f(800, 0.4, 0.1)}},
	})
	wantLines(t, out.String(),
		"| orders accepted | 1000 | 800 | **1.25** | above 1 |",
		"| CPU s per order | 0.200 | 0.400 | **0.50** | below 1 |",
		"| aborts per commit | 0.020 | 0.100 | **0.20** | below 1 |",
		"| card → AWAITING_PAYMENT p99 (ms) | 100 | 100 | **1.00** | below 1 |",
		"| card → COMPLETED p99 (ms) | — | — | — | below 1 |",
		"| abc123 | 2 | 1 |",
	)
}

// An A/B against where issue 23 started judges its CPU targets as ratios of the means, only when
// every window was at 25 orders/s.
func TestIssue23Ratios(t *testing.T) {
	f := func(rate, cpu, services float64) abFigures {
		return abFigures{rateFigure: rate, "CPU s per order": cpu, servicesPerOrder: services}
	}
	judge := func(results [][][]abFigures) string {
		var out bytes.Buffer
		means := printAB(io.Discard, rateMetrics, []string{"this", issue23Start}, results)
		issue23Ratios(&out, rateMetrics, issue23Start, results, means)
		return out.String()
	}
	// CPU 0.060 / 0.136 = 0.441 (met: 0.035 / 0.079 = 0.443); the services' 0.031 / 0.067 =
	// 0.463 (not met: 0.018 / 0.040 = 0.450).
	out := judge([][][]abFigures{
		{{f(25, 0.058, 0.030)}, {f(25, 0.062, 0.032)}},
		{{f(25, 0.136, 0.067)}, {f(25, 0.136, 0.067)}},
	})
	wantLines(t, out,
		"its CPU targets as ratios: 0.035 / 0.079 and 0.018 / 0.040",
		"- issue 23, CPU s per order, this / a4420dc ≤ 0.443 at 25 orders/s: 0.441: met",
		"- issue 23, of it the services and the relay, this / a4420dc ≤ 0.450 at 25 orders/s: 0.463: **not met**",
	)
	// A base whose report lacks the services' share (an older bench) is not judged on it.
	out = judge([][][]abFigures{{{f(25, 0.05, 0.02)}}, {{abFigures{rateFigure: 25, "CPU s per order": 0.1}}}})
	wantLines(t, out, "of it the services and the relay, this / a4420dc ≤ 0.450 at 25 orders/s: not judged")
	out = judge([][][]abFigures{{{f(25, 0.05, 0.02), f(50, 0.04, 0.02)}}, {{f(25, 0.1, 0.05), f(50, 0.1, 0.05)}}})
	wantLines(t, out, "- not judged: they are set at 25 orders/s")
	if strings.Contains(out, "met") {
		t.Errorf("a run with a window at 50 orders/s was judged:\n%s", out)
	}
}

// wantLines checks that out contains each of wants.
func wantLines(t *testing.T, out string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
