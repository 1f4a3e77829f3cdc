package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A/B mode (-ab REV): the same bench against this tree and against git revision REV, run by run
// alternating (this, REV, REV, this, this, REV, ...: drift on a shared machine falls on both
// alike), each run a bench of its own build on a stack of its own, started with the same flags.
// It then prints each run's figures per window and the ratio this / REV of their means. Figures
// that move ±50 % between runs on a shared machine only mean something as a ratio in one run. It
// compares the rate mode (orders accepted, CPU per order, aborts per commit, the card orders'
// p99s) and the overload mode (accepted and completed orders/s, the POST p99s, aborts per
// commit per overload window, and the drain's time).
//
// The other build is checked out with `git worktree add` in a temporary directory and its own
// cmd/bench is built there, so the load, the emulators and the services are all that revision's.
// Its report is read from the Markdown tables it prints (by column header), so a revision from
// before this mode compares too.

// abFigures are one window's figures as a run reports them, by metric name (a figure the report
// lacks is absent, and reads as NaN).
type abFigures map[string]float64

func (f abFigures) get(name string) float64 {
	if v, ok := f[name]; ok {
		return v
	}
	return math.NaN()
}

// abMetric is a figure the A/B compares, and which way is better.
type abMetric struct {
	name   string
	higher bool // a larger figure is better: a ratio above 1 favours this tree
}

// The figures of each mode, in the order they are printed.
var (
	rateMetrics = []abMetric{
		{name: "orders accepted", higher: true},
		{name: "CPU s per order"},
		{name: servicesPerOrder},
		{name: benchOverServices},
		{name: "aborts per commit"},
		{name: "card → AWAITING_PAYMENT p99 (ms)"},
		{name: "card → CONFIRMED p99 (ms)"},
		{name: "card → COMPLETED p99 (ms)"},
	}
	overloadMetrics = []abMetric{
		{name: "accepted/s", higher: true},
		{name: "completed/s", higher: true},
		{name: "accepted POST p99 (ms)"},
		{name: "shed POST p99 (ms)"},
		{name: "aborts per commit"},
		{name: "drain (s)"},
	}
)

// benchOverServices is the bench process's CPU (the emulators, the sandbox, the load) over the
// services' and the relays' while placing. A machine that is faster or slower for a while (on a
// shared host it moves by a fifth between runs) moves both alike, so a change to the emulators
// alone shows in this figure when CPU per order moves with the machine.
const benchOverServices = "bench process CPU ÷ services'"

// servicesPerOrder is the share of CPU per order that the services and the relays spent: what Cloud
// Run would bill, and what issue 23's second target is about.
const servicesPerOrder = "services' CPU s per order"

// abMode is what the A/B reads of a mode's report, and for the rate mode issue 23's targets as
// ratios (issue23Ratios).
type abMode struct {
	metrics []abMetric
	parse   func(report string) []abFigures
	issue23 bool
}

var abModes = map[string]abMode{
	"rate":     {rateMetrics, parseABReport, true},
	"overload": {overloadMetrics, parseOverloadReport, false},
}

// rateFigure is the rate a rate-mode window placed its orders at (not compared: it says which of
// issue 23's targets a window is judged by).
const rateFigure = "orders/s"

// Where issue 23 started: the revision it was filed against (a4420dc, the commit that added
// -ab), and what an order cost then at 25 orders/s, all of it and the services' and relays'
// share (the issue's figures). Its CPU targets (cpuPerOrderGoal, servicesCPUPerOrderGoal) are a
// little under half of these: as ratios against this revision in one A/B they can be judged on
// any machine, where the absolute figures move with the machine's speed.
const (
	issue23Start            = "a4420dc"
	issue23StartCPU         = 0.079
	issue23StartServicesCPU = 0.040
)

// runAB runs the bench in mode (args: the command line without -ab and -ab-runs) runs times
// against each build and prints the comparison.
func runAB(ctx context.Context, mode abMode, rev string, runs int, args []string) error {
	root, err := gitOutput(ctx, "", "rev-parse", "--show-toplevel")
	if err != nil {
		return fmt.Errorf("-ab needs a git checkout: %w", err)
	}
	short, err := gitOutput(ctx, root, "rev-parse", "--short", rev+"^{commit}")
	if err != nil {
		return fmt.Errorf("-ab %s: not a revision of this repository: %w", rev, err)
	}
	tmp, err := os.MkdirTemp("", "bench-ab-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	other := filepath.Join(tmp, "tree")
	if _, err := gitOutput(ctx, root, "worktree", "add", "--detach", other, short); err != nil {
		return err
	}
	defer gitOutput(context.Background(), root, "worktree", "remove", "--force", other)

	builds := []struct{ name, dir, bin string }{
		{"this", root, filepath.Join(tmp, "bench-this")},
		{short, other, filepath.Join(tmp, "bench-other")},
	}
	for _, b := range builds {
		logf("A/B: building %s's bench", b.name)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", b.bin, "./e2e/cmd/bench")
		cmd.Dir, cmd.Stdout, cmd.Stderr = b.dir, os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("build %s's bench: %w", b.name, err)
		}
	}
	results := make([][][]abFigures, len(builds)) // by build, run, window
	for i := 0; i < runs; i++ {
		order := []int{0, 1}
		if i%2 == 1 {
			order = []int{1, 0}
		}
		for _, bi := range order {
			b := builds[bi]
			logf("A/B: run %d of %d, %s", i+1, runs, b.name)
			var out bytes.Buffer
			cmd := exec.CommandContext(ctx, b.bin, args...)
			cmd.Dir, cmd.Stdout, cmd.Stderr = b.dir, io.MultiWriter(&out, os.Stdout), os.Stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("%s's bench, run %d: %w", b.name, i+1, err)
			}
			results[bi] = append(results[bi], mode.parse(out.String()))
		}
	}
	means := printAB(os.Stdout, mode.metrics, []string{builds[0].name, builds[1].name}, results)
	if mode.issue23 {
		// A clone without issue23Start compares as any other A/B.
		start, err := gitOutput(ctx, root, "rev-parse", issue23Start+"^{commit}")
		full, err2 := gitOutput(ctx, root, "rev-parse", rev+"^{commit}")
		if err == nil && err2 == nil && full == start {
			issue23Ratios(os.Stdout, mode.metrics, short, results, means)
		}
	}
	return nil
}

// issue23Ratios prints issue 23's CPU targets as ratios against where it started (issue23Start),
// beside the ratios this A/B measured, for an A/B against that revision: they are set at 25
// orders/s, so a run with a window at another rate is not judged.
func issue23Ratios(w io.Writer, metrics []abMetric, base string, results [][][]abFigures, means [][]float64) {
	fmt.Fprintf(w, "\nIssue 23 against where it started (%s; its CPU targets as ratios: %.3f / %.3f and %.3f / %.3f, printed, not asserted):\n",
		base, cpuPerOrderGoal, issue23StartCPU, servicesCPUPerOrderGoal, issue23StartServicesCPU)
	for _, runs := range results {
		for _, windows := range runs {
			for _, f := range windows {
				if f.get(rateFigure) != 25 {
					fmt.Fprintln(w, "- not judged: they are set at 25 orders/s, and this run has windows at other rates (-rates 25)")
					return
				}
			}
		}
	}
	for _, t := range []struct {
		metric, what string
		goal         float64
	}{
		{"CPU s per order", "CPU s per order, this / " + base, cpuPerOrderGoal / issue23StartCPU},
		{servicesPerOrder, "of it the services and the relay, this / " + base, servicesCPUPerOrderGoal / issue23StartServicesCPU},
	} {
		mi := slices.IndexFunc(metrics, func(m abMetric) bool { return m.name == t.metric })
		r := means[0][mi] / means[1][mi]
		if math.IsNaN(r) || math.IsInf(r, 0) {
			fmt.Fprintf(w, "- issue 23, %s ≤ %.3f at 25 orders/s: not judged (a report lacks the figure)\n", t.what, t.goal)
			continue
		}
		fmt.Fprintf(w, "- issue 23, %s ≤ %.3f at 25 orders/s: %.3f: %s\n", t.what, t.goal, r, met(r <= t.goal))
	}
}

// withoutABFlags returns the command line args without -ab and -ab-runs and their values.
func withoutABFlags(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if strings.HasPrefix(args[i], "-") && (name == "ab" || name == "ab-runs") {
			if !hasValue {
				i++ // the value is the next argument
			}
			continue
		}
		out = append(out, args[i])
	}
	return out
}

func gitOutput(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// printAB prints every run's figures and the ratio of the means, builds[0] / builds[1], and
// returns the means by build and metric.
func printAB(w io.Writer, metrics []abMetric, builds []string, results [][][]abFigures) [][]float64 {
	fmt.Fprintf(w, "\n## A/B: %s against %s\n\nEach run's windows, in the order run:\n\n", builds[0], builds[1])
	fmt.Fprintf(w, "| build | run | window |")
	for _, m := range metrics {
		fmt.Fprintf(w, " %s |", m.name)
	}
	fmt.Fprintf(w, "\n|---|---|---|%s\n", strings.Repeat("---|", len(metrics)))
	means := make([][]float64, len(builds))
	for bi, runs := range results {
		sums, ns := make([]float64, len(metrics)), make([]int, len(metrics))
		for ri, windows := range runs {
			for wi, f := range windows {
				fmt.Fprintf(w, "| %s | %d | %d |", builds[bi], ri+1, wi+1)
				for mi, m := range metrics {
					v := f.get(m.name)
					fmt.Fprintf(w, " %s |", formatFigure(v))
					if !math.IsNaN(v) {
						sums[mi] += v
						ns[mi]++
					}
				}
				fmt.Fprintln(w)
			}
		}
		means[bi] = make([]float64, len(metrics))
		for mi := range metrics {
			means[bi][mi] = math.NaN()
			if ns[mi] > 0 {
				means[bi][mi] = sums[mi] / float64(ns[mi])
			}
		}
	}
	fmt.Fprintf(w, "\nMeans over the windows, and the ratio %s / %s (the better side of 1 for %s is in the last column):\n\n", builds[0], builds[1], builds[0])
	fmt.Fprintf(w, "| figure | %s | %s | ratio | better |\n|---|---|---|---|---|\n", builds[0], builds[1])
	for mi, m := range metrics {
		a, b := means[0][mi], means[1][mi]
		better := "below 1"
		if m.higher {
			better = "above 1"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", m.name, formatFigure(a), formatFigure(b), formatRatio(a/b), better)
	}
	return means
}

func formatFigure(v float64) string {
	switch {
	case math.IsNaN(v):
		return "—"
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 0, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}

func formatRatio(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "—"
	}
	return fmt.Sprintf("**%.2f**", r)
}

// parseABReport reads a rate-mode report's figures per window from its Markdown tables: the
// per-window table (columns "placed" and "CPU s/order"), the Spanner emulator's (column "aborts
// per commit") and the milestones' card rows (columns "→ AWAITING_PAYMENT", "→ CONFIRMED", "→
// COMPLETED").
func parseABReport(report string) []abFigures {
	var out []abFigures
	window := func(i int) abFigures {
		for len(out) <= i {
			out = append(out, abFigures{})
		}
		return out[i]
	}
	servicesShare := map[int]float64{} // by window: the services' CPU over every process's
	for _, t := range markdownTables(report) {
		switch {
		case t.col("CPU s/order") >= 0:
			c, p, rate := t.col("CPU s/order"), t.col("placed"), t.colPrefix("orders/s")
			for i, r := range t.rows {
				window(i)["CPU s per order"] = parseNumber(r[c])
				if p >= 0 {
					window(i)["orders accepted"] = parseNumber(r[p])
				}
				if rate >= 0 {
					window(i)[rateFigure] = parseNumber(r[rate])
				}
			}
		case t.col("bench+emulators") >= 0 && t.col("total") >= 0:
			b, all := t.col("bench+emulators"), t.col("total")
			for i, r := range t.rows {
				bench := parseNumber(r[b])
				if services := parseNumber(r[all]) - bench; services > 0 {
					window(i)[benchOverServices] = bench / services
					servicesShare[i] = services / parseNumber(r[all])
				}
			}
		case t.col("aborts per commit") >= 0:
			c := t.col("aborts per commit")
			for i, r := range t.rows {
				window(i)["aborts per commit"] = parseNumber(r[c])
			}
		case t.col("method") >= 0 && t.col("→ CONFIRMED") >= 0:
			m, a, c, d := t.col("method"), t.col("→ AWAITING_PAYMENT"), t.col("→ CONFIRMED"), t.col("→ COMPLETED")
			i := 0
			for _, r := range t.rows {
				if strings.TrimSpace(r[m]) != "card" {
					continue
				}
				f := window(i)
				f["card → AWAITING_PAYMENT p99 (ms)"], f["card → CONFIRMED p99 (ms)"], f["card → COMPLETED p99 (ms)"] = p99Millis(r, a), p99Millis(r, c), p99Millis(r, d)
				i++
			}
		}
	}
	for i, share := range servicesShare {
		if cpu, ok := out[i]["CPU s per order"]; ok {
			out[i][servicesPerOrder] = cpu * share
		}
	}
	return out
}

// drainLine is how an overload report says how long its backlog took to end.
var drainLine = regexp.MustCompile(`every one ended (\S+) after it`)

// parseOverloadReport reads an overload-mode report's figures: one window per overload window of
// its table (the rows named "overload ..."; columns by the start of their header, which carries
// the target), and a last one with the drain's time alone, when every order ended.
func parseOverloadReport(report string) []abFigures {
	var out []abFigures
	for _, t := range markdownTables(report) {
		name, accepted, completed := t.col("window"), t.colPrefix("accepted/s"), t.colPrefix("completed/s")
		if name < 0 || accepted < 0 || completed < 0 {
			continue
		}
		acceptedP99, shedP99, aborts := t.colPrefix("accepted POST p99"), t.colPrefix("shed POST p99"), t.colPrefix("aborts per commit")
		for _, r := range t.rows {
			if !strings.HasPrefix(strings.TrimSpace(r[name]), "overload") {
				continue
			}
			f := abFigures{"accepted/s": parseNumber(r[accepted]), "completed/s": parseNumber(r[completed])}
			if acceptedP99 >= 0 {
				f["accepted POST p99 (ms)"] = millis(r[acceptedP99])
			}
			if shedP99 >= 0 {
				f["shed POST p99 (ms)"] = millis(r[shedP99])
			}
			if aborts >= 0 {
				f["aborts per commit"] = parseNumber(r[aborts])
			}
			out = append(out, f)
		}
	}
	if m := drainLine.FindStringSubmatch(report); m != nil {
		if d, err := time.ParseDuration(m[1]); err == nil {
			out = append(out, abFigures{"drain (s)": d.Seconds()})
		}
	}
	return out
}

// markdownTable is a table of a Markdown report: its header cells and its rows.
type markdownTable struct {
	header []string
	rows   [][]string
}

// col returns the index of the header cell name (its text without surrounding spaces), -1.
func (t markdownTable) col(name string) int {
	for i, h := range t.header {
		if strings.TrimSpace(h) == name {
			return i
		}
	}
	return -1
}

// colPrefix returns the index of the first header cell that starts with prefix, -1.
func (t markdownTable) colPrefix(prefix string) int {
	for i, h := range t.header {
		if strings.HasPrefix(strings.TrimSpace(h), prefix) {
			return i
		}
	}
	return -1
}

// markdownTables finds the tables of a report: a header line of "|" cells, a "|---|" line, rows.
func markdownTables(report string) []markdownTable {
	var out []markdownTable
	lines := strings.Split(report, "\n")
	cells := func(l string) []string {
		l = strings.TrimSpace(l)
		return strings.Split(strings.TrimSuffix(strings.TrimPrefix(l, "|"), "|"), "|")
	}
	for i := 0; i+1 < len(lines); i++ {
		if !strings.HasPrefix(strings.TrimSpace(lines[i]), "|") || !strings.HasPrefix(strings.TrimSpace(lines[i+1]), "|---") {
			continue
		}
		t := markdownTable{header: cells(lines[i])}
		j := i + 2
		for ; j < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[j]), "|"); j++ {
			if r := cells(lines[j]); len(r) == len(t.header) {
				t.rows = append(t.rows, r)
			}
		}
		out = append(out, t)
		i = j
	}
	return out
}

// parseNumber reads the first number of a cell ("0.168", "25 (25.0)"), NaN if there is none.
func parseNumber(cell string) float64 {
	f := strings.Fields(strings.Trim(strings.TrimSpace(cell), "*"))
	if len(f) == 0 {
		return math.NaN()
	}
	v, err := strconv.ParseFloat(strings.Trim(f[0], "*"), 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

// p99Millis reads the p99 of a milestone cell "p50 / p95 / p99 (n)" in milliseconds: "2556 ms /
// 3770 ms / 4437 ms (188)" or "23.0 s / 26.1 s / 26.9 s (188)"; NaN for "—" or a bad column.
func p99Millis(r []string, c int) float64 {
	if c < 0 || c >= len(r) {
		return math.NaN()
	}
	parts := strings.Split(r[c], "/")
	if len(parts) < 3 {
		return math.NaN()
	}
	return millis(parts[2])
}

// millis reads a duration cell as the bench prints one ("4437 ms", "26.9 s", maybe followed by
// more) in milliseconds; NaN for anything else.
func millis(cell string) float64 {
	f := strings.Fields(cell)
	if len(f) < 2 {
		return math.NaN()
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return math.NaN()
	}
	switch f[1] {
	case "ms":
		return v
	case "s":
		return v * 1000
	}
	return math.NaN()
}
