package histcheck

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Anomaly kinds.
const (
	KindG0            = "G0"       // write cycle (ww edges only)
	KindG1a           = "G1a"      // a read saw a write of an attempt that did not commit
	KindG1b           = "G1b"      // a read saw an intermediate state of another transaction
	KindG1c           = "G1c"      // cycle of ww and wr edges
	KindGSingle       = "G-single" // cycle with exactly one rw edge (read skew)
	KindG2            = "G2"       // cycle with rw edges (write skew, ...)
	KindIncompatible  = "incompatible-order"
	KindDuplicate     = "duplicate-element"
	KindLostAppend    = "lost-append"  // a committed append is missing from the final list
	KindGarbage       = "garbage-read" // a read returned a value nobody wrote
	KindInternal      = "internal"     // a read did not show the attempt's own earlier writes
	KindBankTotal     = "bank-total"   // the reads of one attempt do not add up to the total
	KindNegative      = "negative-balance"
	KindCommitOrder   = "commit-order" // replay in commit-timestamp order does not give a committed read
	KindSnapshot      = "snapshot"     // a read-only read differs from the state at its read timestamp
	KindTimestamps    = "commit-timestamps"
	KindRealTime      = "real-time"       // timestamps contradict wall-clock order (external consistency)
	KindLinearizable  = "linearizability" // porcupine found no linearization
	KindBadTimestamps = "read-timestamp"
)

// Anomaly is one violation found in a history.
type Anomaly struct {
	Kind string
	// Summary is the one-line report: the transactions involved, the edges of a cycle, the
	// values read.
	Summary string
	// Details are further lines: each transaction's operations.
	Details []string
	// Attempts are the ids of the attempts involved.
	Attempts []int
}

func (a Anomaly) String() string {
	var b strings.Builder
	b.WriteString(a.Kind)
	b.WriteString(": ")
	b.WriteString(a.Summary)
	for _, d := range a.Details {
		b.WriteString("\n    ")
		b.WriteString(d)
	}
	return b.String()
}

// Result is the outcome of running and checking one workload.
type Result struct {
	Workload string
	Seed     int64
	Elapsed  time.Duration

	Transactions int // logical transactions (ReadWriteTransaction calls, read-only transactions)
	Attempts     int
	Committed    int // read-write attempts that committed
	Aborted      int
	Failed       int
	Unknown      int
	ReadOnly     int // read-only, single-use and stale transactions

	// Checks counts what each checker examined ("bank: attempts reading every account", ...).
	Checks map[string]int
	// Notes counts things that are not anomalies but tell what happened (stale reads refused
	// for lack of history, porcupine timeouts, ...).
	Notes map[string]int

	Anomalies []Anomaly
	// MaxPerKind bounds how many anomalies of one kind String prints in full (0: 20).
	MaxPerKind int
}

func newResult(workload string) *Result {
	return &Result{Workload: workload, Checks: map[string]int{}, Notes: map[string]int{}}
}

// Count fills the attempt counts from a history.
func (r *Result) Count(h *History) {
	txns := map[int]bool{}
	for _, a := range h.Attempts() {
		if a.Worker < 0 {
			continue
		}
		txns[a.Txn] = true
		r.Attempts++
		if a.Kind != ReadWrite {
			r.ReadOnly++
			continue
		}
		switch a.Outcome {
		case Committed:
			r.Committed++
		case Aborted:
			r.Aborted++
		case Failed:
			r.Failed++
		case Unknown:
			r.Unknown++
		}
	}
	r.Transactions = len(txns)
}

func (r *Result) add(as ...Anomaly) { r.Anomalies = append(r.Anomalies, as...) }

// merge adds another checker's findings.
func (r *Result) merge(checks, notes map[string]int, as []Anomaly) {
	for k, v := range checks {
		r.Checks[k] += v
	}
	for k, v := range notes {
		r.Notes[k] += v
	}
	r.add(as...)
}

// Anomalous reports whether any anomaly was found.
func (r *Result) Anomalous() bool { return len(r.Anomalies) > 0 }

// KindCounts returns how many anomalies of each kind were found.
func (r *Result) KindCounts() map[string]int {
	out := map[string]int{}
	for _, a := range r.Anomalies {
		out[a.Kind]++
	}
	return out
}

// Header is the counts part of the report.
func (r *Result) Header() string {
	var b strings.Builder
	fmt.Fprintf(&b, "workload %s, seed %d, %s: %d transactions, %d attempts (%d committed, %d aborted, %d failed, %d unknown; %d read-only)",
		r.Workload, r.Seed, r.Elapsed.Round(time.Millisecond), r.Transactions, r.Attempts, r.Committed, r.Aborted, r.Failed, r.Unknown, r.ReadOnly)
	b.WriteString("\n  checks: ")
	b.WriteString(fmtCounts(r.Checks))
	if len(r.Notes) > 0 {
		b.WriteString("\n  notes: ")
		b.WriteString(fmtCounts(r.Notes))
	}
	if len(r.Anomalies) == 0 {
		b.WriteString("\n  no anomalies")
	} else {
		fmt.Fprintf(&b, "\n  %d anomalies: %s", len(r.Anomalies), fmtCounts(r.KindCounts()))
	}
	return b.String()
}

// String is the full report: the counts, then the anomalies (at most MaxPerKind of each kind
// in full).
func (r *Result) String() string {
	var b strings.Builder
	b.WriteString(r.Header())
	for _, line := range r.Reports() {
		b.WriteString("\n")
		b.WriteString(line)
	}
	return b.String()
}

// Reports renders the anomalies, at most MaxPerKind of each kind, and a line per kind for the
// rest.
func (r *Result) Reports() []string {
	limit := r.MaxPerKind
	if limit <= 0 {
		limit = 20
	}
	shown := map[string]int{}
	var out []string
	for _, a := range r.Anomalies {
		if shown[a.Kind] < limit {
			out = append(out, a.String())
		}
		shown[a.Kind]++
	}
	kinds := make([]string, 0, len(shown))
	for k := range shown {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		if n := shown[k]; n > limit {
			out = append(out, fmt.Sprintf("... and %d more %s anomalies", n-limit, k))
		}
	}
	return out
}

func fmtCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
