package main

import (
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spanmart/spanmart/emulator/spanneremu"
)

func (b *bench) report(ws []*window, c ceilingResult) {
	fmt.Printf("\nOrders placed open loop for %s per rate through POST /v1/orders (1 line, 1 of %d SKUs), paid in turn by %s "+
		"(slips paid by the bench as soon as the gateway recorded them), shipped by fulfillment's simulated carrier %s after "+
		"confirmation, through the whole saga to COMPLETED; %d relay instance(s), queues %v dispatches/s and %d concurrent, "+
		"Tasks emulator persisted: %v, relay nudged: %v, delivery ledger: %v. Each window waits up to %s for its orders to end.\n\n",
		b.o.duration, b.o.skus, strings.Join(b.o.methods, ", "), b.o.carrier, b.o.relays, b.o.qrate, b.o.qconc,
		b.o.persist, !b.o.noNudge, !b.o.noLedger, b.o.settle)

	fmt.Printf("Ceiling: the Spanner emulator alone commits %.0f transactions/s (%d clients, a point read and an insert each, "+
		"stack at rest); the stack at rest commits %.1f/s by itself (lease renewals, sweeps), left out of the per-order figures.\n\n",
		c.commitsPerSec, c.workers, c.idlePerSec)
	fmt.Println("| orders/s (achieved) | placed | shed (503) | HTTP errors | POST p50 / p99 | shed POST p99 | ended (by status) | events published/s | commits/order | CPU s/order | ceiling orders/s: emulator commits ÷ commits/order / cores ÷ CPU s/order | achieved ÷ ceiling |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, w := range ws {
		achieved := float64(w.placed+w.shed+w.errs) / w.issued.Seconds()
		perOrder, cpuPerOrder := w.commitsPerOrder(c), w.perOrder(w.cpuTotal)
		emuCeil := c.commitsPerSec / perOrder
		cpuCeil := float64(runtime.NumCPU()) / cpuPerOrder
		ended := fmt.Sprintf("%d (%s)", w.ended, statusList(w.statuses))
		if w.pending > 0 {
			ended += fmt.Sprintf(", **%d not ended**", w.pending)
		}
		fmt.Printf("| %v (%.1f) | %d | %d | %d | %s / %s | %s | %s | %.0f | %.1f | %.3f | %.0f / %.0f | %.2f / %.2f |\n",
			w.rate, achieved, w.placed, w.shed, w.errs, ms(w.postP50), ms(w.postP99), ms(w.shedP99), ended, w.pubAll/w.elapsed.Seconds(),
			perOrder, cpuPerOrder, emuCeil, cpuCeil, achieved/emuCeil, achieved/cpuCeil)
	}
	for _, w := range ws {
		if w.errSample != "" {
			fmt.Printf("\nFirst error at %v/s: %s\n", w.rate, w.errSample)
		}
	}

	fmt.Println("\nWhat one order costs, window start → every order ended (the stack's own commits at rest left out): events appended to the outboxes, " +
		"Cloud Tasks dispatches (delivery attempts), Spanner commits and rows written (index rows not counted), in all and by database.")
	fmt.Println()
	dbs := sourceDatabases()
	fmt.Println("| orders/s | methods | events | dispatches | commits | rows written | commits by database (" + strings.Join(dbs, " / ") + ") |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, w := range ws {
		if w.placed == 0 {
			continue
		}
		n := float64(w.placed)
		events := 0
		rows := int64(0)
		for _, h := range w.hops {
			if h.subscriber == "" {
				events += len(h.published)
			}
		}
		var byDB []string
		span := w.settledAt.Sub(w.start).Seconds()
		for _, db := range dbs {
			st := w.spannerAll.ByDatabase[db]
			rows += st.RowsWritten
			byDB = append(byDB, fmt.Sprintf("%.1f", (float64(st.Commits)-c.idleByDB[db]*span)/n))
		}
		fmt.Printf("| %v | %s | %.1f | %.1f | %.1f | %.1f | %s |\n", w.rate, strings.Join(w.mix, ", "), float64(events)/n,
			w.dispatches/n, (float64(w.spannerAll.Commits)-c.idlePerSec*w.settledAt.Sub(w.start).Seconds())/n, float64(rows)/n, strings.Join(byDB, " / "))
	}

	fmt.Println("\nSpanner requests per order, window start → every order ended, by database and method (the stack's requests at rest included): " +
		"every round trip costs CPU on both ends, which commits alone do not show.")
	fmt.Println()
	fmt.Println("| orders/s | database | all | by method |")
	fmt.Println("|---|---|---|---|")
	for _, w := range ws {
		if w.placed == 0 {
			continue
		}
		n := float64(w.placed)
		for _, db := range dbs {
			rpcs := w.spannerAll.ByDatabase[db].RPCs
			var all int64
			var by []string
			for _, m := range mostFirst(rpcs) {
				all += rpcs[m]
				by = append(by, fmt.Sprintf("%s %.1f", m, float64(rpcs[m])/n))
			}
			fmt.Printf("| %v | %s | %.1f | %s |\n", w.rate, db, float64(all)/n, strings.Join(by, ", "))
		}
	}
	statements(os.Stdout, ws, dbs)

	fmt.Println("\nOrder → milestone, from the order's commit to the commit that emitted the milestone event (the order's timeline), p50 / p95 / p99 (n). " +
		"CONFIRMED includes the provider call (and, for slips, the bench's 50 ms poll before it pays); SHIPPED includes the simulated carrier's wait.")
	fmt.Println()
	fmt.Println("| orders/s | method | → AWAITING_PAYMENT | → CONFIRMED | → SHIPPED | → COMPLETED | cancelled |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, w := range ws {
		for _, m := range w.mix {
			got := w.milestones[m]
			fmt.Printf("| %v | %s | %s | %s | %s | %s | %d |\n", w.rate, m, p3(got["order.awaiting_payment"]), p3(got["order.confirmed"]),
				p3(got["order.shipped"]), p3(got["order.completed"]), len(got["order.cancelled"]))
		}
	}

	fmt.Println("\nEvery hop, commit → commit (the producer's outbox commit → the relay's PublishedAt mark, or → the subscriber's ProcessedEvents commit), " +
		"over the events committed in each window, p50 / p99 (n): one column per window, so a hop that grows over a run shows along its row.")
	fmt.Println()
	header := "| hop |"
	sep := "|---|"
	for i, w := range ws {
		header += fmt.Sprintf(" window %d (%v/s%s) |", i+1, w.rate, mixLabel(b, w))
		sep += "---|"
	}
	fmt.Println(header)
	fmt.Println(sep)
	for _, key := range hopKeys(ws) {
		row := "| " + key.label() + " |"
		for _, w := range ws {
			h, ok := w.hop(key)
			switch {
			case !ok:
				row += " - |"
			case key.subscriber == "":
				row += fmt.Sprintf(" %s / %s (%d) |", ms(pct(h.published, 50)), ms(pct(h.published, 99)), len(h.published))
			default:
				cell := fmt.Sprintf(" %s / %s (%d", ms(pct(h.applied, 50)), ms(pct(h.applied, 99)), len(h.applied))
				if h.unapplied > 0 {
					cell += fmt.Sprintf(", %d not applied", h.unapplied)
				}
				row += cell + ") |"
			}
		}
		fmt.Println(row)
	}

	fmt.Printf("\nCPU seconds per second while placing (%d cores available; bench = load generator, both emulators and the payment sandbox):\n\n", runtime.NumCPU())
	names := append([]string{"bench+emulators"}, consumerNames()...)
	names = append(names, b.relays...)
	fmt.Println("| orders/s | " + strings.Join(names, " | ") + " | total |")
	fmt.Println("|---" + strings.Repeat("|---", len(names)) + "|---|")
	for _, w := range ws {
		secs := w.elapsed.Seconds()
		row := []string{fmt.Sprintf("%.2f", w.benchCPU/secs)}
		total := w.benchCPU
		for _, n := range names[1:] {
			row = append(row, fmt.Sprintf("%.2f", w.cpu[n]/secs))
			total += w.cpu[n]
		}
		fmt.Printf("| %v | %s | %.2f |\n", w.rate, strings.Join(row, " | "), total/secs)
	}

	fmt.Printf("\nSpanner emulator while placing (all databases): commits, and aborted transactions by cause (each retried by the client):\n\n")
	fmt.Println("| orders/s | commits/s | aborts/s: lock wait timed out | optimistic read invalidated | wounded (wound-wait) | idle | aborts per commit | commits that waited for an older reader /s | reads that waited for an exclusive lock /s | lock waits in the commit queue, in units of -lock-wait, /s | waits for the write lock /s, mean wait | DML statements decided by a read, without the lock /s | queries run again at commit /s | commits made in a lock holder's group /s | the lock held by commits, ms/s (mean hold) | of it in holds over 1 ms |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, w := range ws {
		s := w.elapsed.Seconds()
		st := w.spanner
		fmt.Printf("| %v | %.0f | %.1f | %.1f | %.1f | %.1f | %.3f | %.1f | %.1f | %.1f | %.0f, %.2f ms | %.0f | %.1f | %.1f | %.0f (%.2f ms) | %.0f %% |\n", w.rate, float64(st.Commits)/s,
			float64(st.LockTimeouts)/s, float64(st.Conflicts)/s, float64(st.Wounds)/s, float64(st.IdleAborts)/s,
			float64(st.LockTimeouts+st.Conflicts+st.Wounds+st.IdleAborts)/math.Max(1, float64(st.Commits)), float64(st.ReaderWaits)/s,
			float64(st.ExclusiveWaits)/s, float64(st.LockQueueWaits)/s, float64(st.LockWaits)/s,
			st.LockWaited.Seconds()*1e3/math.Max(1, float64(st.LockWaits)), float64(st.DecidedDML)/s, float64(st.QueryRechecks)/s, float64(st.GroupedCommits)/s,
			st.CommitHeld.Seconds()*1e3/s, st.CommitHeld.Seconds()*1e3/math.Max(1, float64(st.CommitHolds)),
			100*st.LongCommitHeld.Seconds()/math.Max(1e-9, st.CommitHeld.Seconds()))
	}
	fmt.Printf("\nAborts by database and cause: an optimistic read invalidated, by what it covered (a key, a key range, an index range, a whole table, a query's answer), or a transaction wounded for an exclusive lock on a key of a table, per second:\n\n")
	fmt.Println("| orders/s | read | aborts/s |")
	fmt.Println("|---|---|---|")
	for _, w := range ws {
		printCounts(w, func(ds spanneremu.DatabaseStats) map[string]int64 { return ds.ConflictsBy })
	}
	fmt.Printf("\nTransactions that took the write lock before their commit, holding it across their client's requests (every other commit of the database waits meanwhile), by database and why, per second:\n\n")
	fmt.Println("| orders/s | why | transactions/s |")
	fmt.Println("|---|---|---|")
	for _, w := range ws {
		printCounts(w, func(ds spanneremu.DatabaseStats) map[string]int64 { return ds.HeldLocks })
	}
	targets(os.Stdout, ws, c)
}

// perOrder is x per order placed in w (NaN for none).
func (w *window) perOrder(x float64) float64 {
	if w.placed == 0 {
		return math.NaN()
	}
	return x / float64(w.placed)
}

// commitsPerOrder is w's Spanner commits per order placed, window start → settled, without the
// stack's own commits at rest (c).
func (w *window) commitsPerOrder(c ceilingResult) float64 {
	return w.perOrder(float64(w.spannerAll.Commits) - c.idlePerSec*w.settledAt.Sub(w.start).Seconds())
}

// Issue 23's targets (issue 11's latencies among them).
const (
	cpuPerOrderGoal         = 0.035 // CPU s per order at 25 orders/s, every process
	servicesCPUPerOrderGoal = 0.018 // of it the services and the relay
	commitsPerOrderGoal     = 20
	completedP99Goal        = 2500 * time.Millisecond // card → COMPLETED at 50 orders/s
)

// met is a target's verdict.
func met(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

// targets prints the targets of issues 5, 11 and 23 beside what this run measured, for the
// windows at their rates, each with its verdict for that window (issue 23 asks for two
// consecutive windows at 50 orders/s). Printed, never asserted.
func targets(out io.Writer, ws []*window, c ceilingResult) {
	fmt.Fprintln(out, "\nTargets (printed, not asserted):")
	for _, w := range ws {
		switch w.rate {
		case 100:
			if h, ok := w.hop(hopKey{"order.created", "fulfillment"}); ok {
				fmt.Fprintf(out, "- issue 5, p99 commit → applied (order.created at fulfillment) < 300 ms at 100 orders/s: %s\n", ms(pct(h.applied, 99)))
			}
		case 50:
			awaiting, confirmed := pct(w.milestones["card"]["order.awaiting_payment"], 99), pct(w.milestones["card"]["order.confirmed"], 99)
			completed := pct(w.milestones["card"]["order.completed"], 99)
			fmt.Fprintf(out, "- issue 11, order → AWAITING_PAYMENT p99 < 200 ms at 50 orders/s: %s: %s\n", ms(awaiting), met(awaiting < awaitingP99Goal))
			fmt.Fprintf(out, "- issue 11, card order → CONFIRMED p99 < 500 ms at 50 orders/s: %s: %s\n", ms(confirmed), met(confirmed < confirmedP99Goal))
			fmt.Fprintf(out, "- issue 23, card order → COMPLETED p99 < 2.5 s at 50 orders/s: %s: %s\n", ms(completed), met(completed < completedP99Goal))
			offered := w.placed + w.shed + w.errs
			fmt.Fprintf(out, "- issue 23, every order placed at 50 orders/s COMPLETED: %d of %d (%d refused with 503, %d failed): %s\n",
				w.statuses["COMPLETED"], offered, w.shed, w.errs, met(offered > 0 && int64(w.statuses["COMPLETED"]) == offered))
		case 25:
			cpu, services, commits := w.perOrder(w.cpuTotal), w.perOrder(w.cpuServices), w.commitsPerOrder(c)
			fmt.Fprintf(out, "- issue 23, CPU s per order ≤ %.3f at 25 orders/s: %.3f: %s\n", cpuPerOrderGoal, cpu, met(cpu <= cpuPerOrderGoal))
			fmt.Fprintf(out, "- issue 23, of it the services and the relay ≤ %.3f: %.3f: %s\n", servicesCPUPerOrderGoal, services, met(services <= servicesCPUPerOrderGoal))
			fmt.Fprintf(out, "- issue 23, commits per order ≤ %d at 25 orders/s (the issue's is a card order's; these orders are paid by %s): %.1f: %s\n",
				commitsPerOrderGoal, strings.Join(w.mix, ", "), commits, met(commits <= commitsPerOrderGoal))
		}
	}
}

type hopKey struct{ eventType, subscriber string }

func (k hopKey) label() string {
	if k.subscriber == "" {
		return k.eventType + " → published"
	}
	return k.eventType + " → " + k.subscriber
}

func (w *window) hop(k hopKey) (hop, bool) {
	for _, h := range w.hops {
		if h.eventType == k.eventType && h.subscriber == k.subscriber {
			return h, true
		}
	}
	return hop{}, false
}

// hopKeys are the hops of every window, in saga order (the first window that has a hop places it).
func hopKeys(ws []*window) []hopKey {
	var out []hopKey
	seen := map[hopKey]bool{}
	for _, w := range ws {
		for _, h := range w.hops {
			k := hopKey{h.eventType, h.subscriber}
			if !seen[k] && (k.subscriber != "" || len(h.published) > 0) {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	return out
}

// p3 is "p50 / p95 / p99 (n)" of sorted durations.
func p3(d []time.Duration) string {
	if len(d) == 0 {
		return "-"
	}
	return fmt.Sprintf("%s / %s / %s (%d)", ms(pct(d, 50)), ms(pct(d, 95)), ms(pct(d, 99)), len(d))
}

// statusList is "COMPLETED 300, CANCELLED 2", largest first.
func statusList(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || (m[keys[i]] == m[keys[j]] && keys[i] < keys[j]) })
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// mixLabel names a window's methods when windows differ in them (-per-method).
func mixLabel(b *bench, w *window) string {
	if !b.o.perMethod {
		return ""
	}
	return ", " + strings.Join(w.mix, ", ")
}

// printCounts prints one table row per database and key of the counts of w that pick chooses,
// per second, the largest first.
func printCounts(w *window, pick func(spanneremu.DatabaseStats) map[string]int64) {
	type source struct {
		what string
		n    int64
	}
	var sources []source
	for db, ds := range w.spanner.ByDatabase {
		for what, n := range pick(ds) {
			sources = append(sources, source{db + " " + what, n})
		}
	}
	sort.Slice(sources, func(i, j int) bool { return sources[i].n > sources[j].n })
	if len(sources) == 0 {
		fmt.Printf("| %v | (none) | 0 |\n", w.rate)
	}
	for _, src := range sources {
		fmt.Printf("| %v | %s | %.1f |\n", w.rate, strings.ReplaceAll(src.what, "|", "\\|"), float64(src.n)/w.elapsed.Seconds())
	}
}

// statements prints, when the emulator counted them (-statements), each window's Spanner requests
// per order by database and statement, down to 0.05 per order: which queries, batches, commits and
// reads an order costs, where the table by method says only how many. With the emulator's CPU by
// statement (the bench process's profile while placing), each row also says what one such request
// cost the emulator and what they cost per order, and the rows come the costliest first; without,
// the most frequent first.
func statements(out io.Writer, ws []*window, dbs []string) {
	counted := slices.ContainsFunc(ws, func(w *window) bool {
		return slices.ContainsFunc(dbs, func(db string) bool { return w.spannerAll.ByDatabase[db].Statements != nil })
	})
	if !counted {
		return
	}
	fmt.Fprintln(out, "\nSpanner requests per order by statement, window start → every order ended (-statements; the stack's requests at rest included, "+
		"those under 0.05 per order left out): a query or DML by its SQL, a batch by its statements, a commit by what its mutations write, a read by its table and index; "+
		"and the Spanner emulator's CPU for one such request and for an order's, from the bench process's CPU profile while placing (the work of a request's handler; "+
		"gRPC's own and the client's not included), the costliest first.")
	fmt.Fprintln(out)
	fmt.Fprintln(out, "| orders/s | database | per order | emulator CPU µs per request | emulator CPU ms per order | statement |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|")
	for _, w := range ws {
		if w.placed == 0 {
			continue
		}
		n := float64(w.placed)
		type row struct {
			db, stmt      string
			perOrder      float64
			cpuPerRequest float64 // seconds; NaN when not measured
			cpuPerOrder   float64
		}
		var rows []row
		for _, db := range dbs {
			counts := w.spannerAll.ByDatabase[db].Statements
			for _, st := range mostFirst(counts) {
				per := float64(counts[st]) / n
				if per < 0.05 {
					continue
				}
				r := row{db: db, stmt: st, perOrder: per, cpuPerRequest: math.NaN()}
				if placing := w.spanner.ByDatabase[db].Statements[st]; w.stmtCPU != nil && placing > 0 {
					r.cpuPerRequest = w.stmtCPU[db][st] / float64(placing)
					r.cpuPerOrder = r.cpuPerRequest * per
				}
				rows = append(rows, r)
			}
		}
		if w.stmtCPU != nil {
			sort.SliceStable(rows, func(i, j int) bool { return rows[i].cpuPerOrder > rows[j].cpuPerOrder })
		}
		for _, r := range rows {
			perRequest, perOrder := "—", "—"
			if !math.IsNaN(r.cpuPerRequest) {
				perRequest, perOrder = fmt.Sprintf("%.0f", r.cpuPerRequest*1e6), fmt.Sprintf("%.2f", r.cpuPerOrder*1e3)
			}
			fmt.Fprintf(out, "| %v | %s | %.1f | %s | %s | `%s` |\n", w.rate, r.db, r.perOrder, perRequest, perOrder, strings.ReplaceAll(shorten(r.stmt, 160), "|", "\\|"))
		}
		if w.stmtCPU != nil && w.benchCPU > 0 {
			var labelled float64
			for _, byStmt := range w.stmtCPU {
				for _, s := range byStmt {
					labelled += s
				}
			}
			fmt.Fprintf(out, "\nAt %v orders/s, the requests' handlers took %.1f of the bench process's %.1f CPU ms per order while placing (%.0f %%).\n",
				w.rate, labelled/n*1e3, w.benchCPU/n*1e3, 100*labelled/w.benchCPU)
		}
	}
}

// mostFirst returns counts' keys, the largest count first (equal counts by key).
func mostFirst(counts map[string]int64) []string {
	keys := slices.Sorted(maps.Keys(counts))
	sort.SliceStable(keys, func(i, j int) bool { return counts[keys[i]] > counts[keys[j]] })
	return keys
}

// shorten cuts s to at most n bytes (on a rune boundary), marking the cut with "…".
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
