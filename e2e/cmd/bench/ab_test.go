package main

import (
	"bytes"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// testdata/report.md is a rate-mode report as the bench printed it (two windows at 25 orders/s).
func TestParseABReport(t *testing.T) {
	b, err := os.ReadFile("testdata/report.md")
	if err != nil {
		t.Fatal(err)
	}
	got := parseABReport(string(b))
	want := []abFigures{
		{cpuPerOrder: 0.125, abortsPerCommit: 0.010, awaitingP99: 2248, confirmedP99: 7933, doneP99Ms: 22600},
		{cpuPerOrder: 0.144, abortsPerCommit: 0.019, awaitingP99: 4090, confirmedP99: 11600, doneP99Ms: 28100},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(abFigures{}), cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })); diff != "" {
		t.Errorf("figures (-want +got):\n%s", diff)
	}
}

// A report without a table (an older build, a failed run) gives no figures rather than wrong ones.
func TestParseABReportMissingTables(t *testing.T) {
	if got := parseABReport("bench FAILED: the stack did not start\n"); len(got) != 0 {
		t.Errorf("figures of a report without tables: %v", got)
	}
	got := parseABReport("| orders/s | CPU s/order |\n|---|---|\n| 25 | 0.2 |\n")
	if len(got) != 1 || got[0].cpuPerOrder != 0.2 || !math.IsNaN(got[0].abortsPerCommit) || !math.IsNaN(got[0].doneP99Ms) {
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
	f := func(cpu, aborts float64) abFigures {
		return abFigures{cpuPerOrder: cpu, abortsPerCommit: aborts, awaitingP99: 100, confirmedP99: 200, doneP99Ms: math.NaN()}
	}
	var out bytes.Buffer
	printAB(&out, []string{"this", "abc123"}, [][][]abFigures{
		{{f(0.1, 0.01), f(0.3, 0.03)}},
		{{f(0.4, 0.1)}, {f(0.4, 0.1)}},
	})
	wantLines(t, out.String(),
		"| CPU s per order | 0.200 | 0.400 | **0.50** |",
		"| aborts per commit | 0.020 | 0.100 | **0.20** |",
		"| card → AWAITING_PAYMENT p99 (ms) | 100 | 100 | **1.00** |",
		"| card → COMPLETED p99 (ms) | — | — | — |",
		"| abc123 | 2 | 1 |",
	)
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
