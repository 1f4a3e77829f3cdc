package histcheck

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// committedInOrder returns the committed read-write attempts in commit-timestamp order (ties
// by id).
func committedInOrder(h *History) []*Attempt {
	var out []*Attempt
	for _, a := range h.Attempts() {
		if a.Kind == ReadWrite && a.Outcome == Committed && !a.CommitTS.IsZero() {
			out = append(out, a)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].CommitTS.Equal(out[j].CommitTS) {
			return out[i].CommitTS.Before(out[j].CommitTS)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// applyWrite returns the value a write leaves, given the value before it.
func applyWrite(before string, op Op) string {
	switch op.Write {
	case WriteAdd:
		b, _ := strconv.ParseInt(before, 10, 64)
		d, _ := strconv.ParseInt(op.Arg, 10, 64)
		return strconv.FormatInt(b+d, 10)
	case WriteAppend:
		return canonList(before + " " + op.Arg)
	}
	return op.Arg
}

// applyCommit applies a committed attempt's writes to state as Spanner does: the DML in order
// (each on the value as the statement saw it), then the buffered mutations in order.
func applyCommit(state map[Key]string, a *Attempt) {
	for _, visible := range []bool{true, false} {
		for _, op := range a.Ops {
			if op.Kind == OpWrite && op.Err == "" && op.Visible == visible {
				state[op.Key] = applyWrite(state[op.Key], op)
			}
		}
	}
}

// hasUnknownWrites reports whether some attempt with writes may or may not have committed.
func hasUnknownWrites(h *History) bool { return len(unknownWriteKeys(h)) > 0 }

func unknownWriteKeys(h *History) map[Key]bool {
	out := map[Key]bool{}
	for _, a := range h.Attempts() {
		if a.Kind == ReadWrite && a.Outcome == Unknown {
			for _, op := range a.Ops {
				if op.Kind == OpWrite && op.Err == "" {
					out[op.Key] = true
				}
			}
		}
	}
	return out
}

// version is one committed value of a key.
type version struct {
	value  string
	found  bool
	writer *Attempt // nil: the key's state before any commit of the history
	pos    int      // the writer's index in commit order; -1 for the initial state
}

func (v version) matches(o Obs) bool { return o.Found == v.found && (!o.Found || o.Value == v.value) }

func (v version) show(k Key) string {
	val := "<no row>"
	if v.found {
		val = showValue(k, v.value)
	}
	if v.writer == nil {
		return val + " (initial)"
	}
	return fmt.Sprintf("%s (T%d @%s)", val, v.writer.ID, fmtTS(v.writer.CommitTS))
}

// CheckCommitOrder checks Spanner's external consistency on a history, whatever its workload:
//   - commit timestamps are unique;
//   - an attempt that started after another one's commit returned has a later commit
//     timestamp, and a strong read that started after a commit returned reads at or after it;
//   - replaying the committed read-write transactions in commit-timestamp order reproduces
//     every value they read (with their own DML visible to their later reads);
//   - every read-only, single-use and stale read sees exactly the replayed state at its read
//     timestamp (a commit at timestamp t is visible at t), and a ReadTimestamp bound reads at
//     the timestamp asked for.
//
// Stale reads the emulator refused for lack of history (FAILED_PRECONDITION) are counted, not
// reported. Keys written by an attempt whose outcome is unknown are not compared.
func CheckCommitOrder(h *History) *Result {
	res := newResult("commit-order")
	all := h.Attempts()
	committed := committedInOrder(h)
	for i := 1; i < len(committed); i++ {
		a, b := committed[i-1], committed[i]
		if a.CommitTS.Equal(b.CommitTS) {
			res.add(Anomaly{Kind: KindTimestamps, Summary: fmt.Sprintf("%s and %s have the same commit timestamp", a.Name(), b.Name()),
				Details: []string{fmt.Sprintf("T%d: %s", a.ID, a.Describe()), fmt.Sprintf("T%d: %s", b.ID, b.Describe())}, Attempts: []int{a.ID, b.ID}})
		}
	}
	res.Checks["commit-order: committed transactions"] = len(committed)

	// Snapshot reads: read-only attempts with a read timestamp.
	var snaps []*Attempt
	for _, a := range all {
		if a.Kind == ReadWrite {
			continue
		}
		if a.Outcome == Failed && strings.Contains(a.Err, "FailedPrecondition") {
			res.Notes["stale reads refused (FAILED_PRECONDITION, older than the kept history)"]++
			continue
		}
		if a.Outcome != Committed || a.ReadTS.IsZero() {
			if a.Outcome == Failed {
				res.Notes["read-only transactions failed"]++
			}
			continue
		}
		snaps = append(snaps, a)
		if !a.ExactTS.IsZero() && !a.ExactTS.Equal(a.ReadTS) {
			res.add(Anomaly{Kind: KindBadTimestamps, Summary: fmt.Sprintf("%s asked to read at %s but read at %s", a.Name(), fmtTS(a.ExactTS), fmtTS(a.ReadTS)), Attempts: []int{a.ID}})
		}
	}
	checkRealTime(res, committed, snaps)

	// Replay the commits in timestamp order, checking each one's reads and keeping every
	// version of every key.
	tainted := unknownWriteKeys(h)
	if len(tainted) > 0 {
		res.Notes["keys not compared (written by an attempt of unknown outcome)"] = len(tainted)
	}
	state := map[Key]version{}
	vers := map[Key][]version{} // every committed version of each key, in commit order
	cur := func(k Key) version {
		if v, ok := state[k]; ok {
			return v
		}
		return version{pos: -1}
	}
	for pos, a := range committed {
		overlay := map[Key]version{}
		var bad []string
		for _, op := range a.Ops {
			if op.Err != "" {
				continue
			}
			if op.Kind == OpWrite {
				if op.Visible {
					before, ok := overlay[op.Key]
					if !ok {
						before = cur(op.Key)
					}
					overlay[op.Key] = version{value: applyWrite(before.value, op), found: true, writer: a, pos: pos}
				}
				continue
			}
			for _, o := range op.Obs {
				want, own := overlay[o.Key]
				if !own {
					want = cur(o.Key)
				}
				res.Checks["commit-order: committed reads compared"]++
				if tainted[o.Key] || want.matches(o) {
					continue
				}
				what := "replay in commit-timestamp order gives " + want.show(o.Key)
				if own {
					what = "its own earlier write gives " + want.show(o.Key)
				}
				bad = append(bad, fmt.Sprintf("%s [%s], but %s", o, op.Method, what))
			}
		}
		if len(bad) > 0 {
			res.add(Anomaly{Kind: KindCommitOrder, Summary: fmt.Sprintf("%s read %s", a.Name(), strings.Join(bad, "; ")),
				Details: []string{fmt.Sprintf("T%d: %s", a.ID, a.Describe())}, Attempts: []int{a.ID}})
		}
		after := map[Key]string{}
		for k, v := range state {
			after[k] = v.value
		}
		applyCommit(after, a)
		for _, op := range a.Ops {
			if op.Kind == OpWrite && op.Err == "" {
				v := version{value: after[op.Key], found: true, writer: a, pos: pos}
				if state[op.Key] != v {
					state[op.Key] = v
					vers[op.Key] = append(vers[op.Key], v)
				}
			}
		}
	}

	// Every snapshot read against the state after the commits at or before its timestamp.
	for _, s := range snaps {
		p := sort.Search(len(committed), func(i int) bool { return committed[i].CommitTS.After(s.ReadTS) })
		checkSnapshot(res, s, p, committed, vers, tainted)
	}
	return res
}

// versionAt is the version of k after the first p commits.
func versionAt(vs []version, p int) version {
	i := sort.Search(len(vs), func(i int) bool { return vs[i].pos >= p })
	if i == 0 {
		return version{pos: -1}
	}
	return vs[i-1]
}

// checkSnapshot compares a read-only attempt's reads with the replayed state after the first
// p commits, the ones at or before its read timestamp.
func checkSnapshot(res *Result, s *Attempt, p int, committed []*Attempt, vers map[Key][]version, tainted map[Key]bool) {
	var bad []string
	seen := map[Key]Obs{}
	var keys []Key
	for _, op := range s.Ops {
		if op.Err != "" || op.Kind != OpRead {
			continue
		}
		for _, o := range op.Obs {
			res.Checks["commit-order: read-only reads compared"]++
			if _, ok := seen[o.Key]; !ok {
				seen[o.Key] = o
				keys = append(keys, o.Key)
			}
			want := versionAt(vers[o.Key], p)
			if tainted[o.Key] || want.matches(o) {
				continue
			}
			bad = append(bad, fmt.Sprintf("%s [%s], but the state at its read timestamp is %s%s", o, op.Method, want.show(o.Key), whichVersion(o, vers[o.Key], p)))
		}
	}
	if len(bad) == 0 {
		return
	}
	a := Anomaly{Kind: KindSnapshot, Summary: fmt.Sprintf("%s read %s", s.Name(), strings.Join(bad, "; ")),
		Details: []string{fmt.Sprintf("T%d: %s", s.ID, s.Describe())}, Attempts: []int{s.ID}}
	text, dir := matchingStates(seen, keys, p, committed, vers)
	a.Details = append(a.Details, text)
	res.add(a)
	res.Notes[fmt.Sprintf("snapshot anomalies: %s (%s) reads %s", s.Kind, boundClass(s.Bound), dir)]++
}

// boundClass is the kind of a timestamp bound without its value.
func boundClass(b string) string {
	for _, c := range []string{"strong", "exact staleness", "read timestamp", "max staleness", "min read timestamp"} {
		if strings.HasPrefix(b, c) {
			return c
		}
	}
	return b
}

// matchingStates says which committed state (between which commits) nearest to the read
// timestamp holds every value a read-only attempt read, and in which direction it lies.
func matchingStates(seen map[Key]Obs, keys []Key, p int, committed []*Attempt, vers map[Key][]version) (string, string) {
	// Intervals of positions [lo, hi) (state after lo commits up to hi) where all keys match.
	type span struct{ lo, hi int }
	spans := []span{{0, len(committed) + 1}}
	for _, k := range keys {
		o := seen[k]
		var ks []span
		vs := vers[k]
		// The initial state, then each version until the next.
		initHi := len(committed) + 1
		if len(vs) > 0 {
			initHi = vs[0].pos + 1
		}
		if (version{pos: -1}).matches(o) {
			ks = append(ks, span{0, initHi})
		}
		for i, v := range vs {
			hi := len(committed) + 1
			if i+1 < len(vs) {
				hi = vs[i+1].pos + 1
			}
			if v.matches(o) {
				ks = append(ks, span{v.pos + 1, hi})
			}
		}
		var out []span
		for _, a := range spans {
			for _, b := range ks {
				if lo, hi := max(a.lo, b.lo), min(a.hi, b.hi); lo < hi {
					out = append(out, span{lo, hi})
				}
			}
		}
		spans = out
	}
	if len(spans) == 0 {
		return "no committed state holds all the values it read: not a snapshot", "that match no committed state"
	}
	best := spans[0]
	dist := func(sp span) int {
		switch {
		case p < sp.lo:
			return sp.lo - p
		case p >= sp.hi:
			return p - sp.hi + 1
		}
		return 0
	}
	for _, sp := range spans {
		if dist(sp) < dist(best) {
			best = sp
		}
	}
	from := "the initial state"
	if best.lo > 0 {
		from = committed[best.lo-1].Name()
	}
	until := "the end"
	if best.hi <= len(committed) {
		until = committed[best.hi-1].Name()
	}
	rel, dir := "before", "an older state (missing commits at or before the read timestamp)"
	if best.lo > p {
		rel, dir = "after", "a newer state (commits after the read timestamp)"
	}
	return fmt.Sprintf("the values read are the committed state from %s until %s, %d commits %s its read timestamp", from, until, dist(best), rel), dir
}

// whichVersion names the committed version a read matched instead, if one did.
func whichVersion(o Obs, vs []version, p int) string {
	var best *version
	for i := range vs {
		if vs[i].matches(o) && (best == nil || abs(vs[i].pos-p) < abs(best.pos-p)) {
			best = &vs[i]
		}
	}
	if best == nil {
		if o.Found {
			return "; no committed transaction wrote the value read"
		}
		return ""
	}
	rel := "before"
	if best.pos >= p {
		rel = "after"
	}
	return fmt.Sprintf("; the value read is %s, %s the read timestamp", best.show(o.Key), rel)
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// checkRealTime checks that timestamps respect the order of wall-clock events: a read-write
// attempt that started after another one's commit returned commits later, and a strong read
// that started after a commit returned reads at or after it.
func checkRealTime(res *Result, committed, snaps []*Attempt) {
	byEnd := append([]*Attempt(nil), committed...)
	sort.Slice(byEnd, func(i, j int) bool { return byEnd[i].End.Before(byEnd[j].End) })
	type startEvent struct {
		a    *Attempt
		read bool
	}
	var starts []startEvent
	for _, a := range committed {
		if a.Worker >= 0 {
			starts = append(starts, startEvent{a, false})
		}
	}
	for _, s := range snaps {
		if s.Bound == "strong" {
			starts = append(starts, startEvent{s, true})
		}
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i].a.Start.Before(starts[j].a.Start) })
	var maxA *Attempt
	j := 0
	for _, st := range starts {
		for ; j < len(byEnd) && byEnd[j].End.Before(st.a.Start); j++ {
			if maxA == nil || byEnd[j].CommitTS.After(maxA.CommitTS) {
				maxA = byEnd[j]
			}
		}
		if maxA == nil || maxA == st.a {
			continue
		}
		res.Checks["real-time: orders checked"]++
		if st.read {
			if st.a.ReadTS.Before(maxA.CommitTS) {
				res.add(Anomaly{Kind: KindRealTime, Summary: fmt.Sprintf("%s started after %s returned, but reads at an earlier timestamp (stale strong read)", st.a.Name(), maxA.Name()),
					Attempts: []int{st.a.ID, maxA.ID}})
			}
		} else if !st.a.CommitTS.After(maxA.CommitTS) {
			res.add(Anomaly{Kind: KindRealTime, Summary: fmt.Sprintf("%s started after %s returned, but its commit timestamp is not later", st.a.Name(), maxA.Name()),
				Attempts: []int{st.a.ID, maxA.ID}})
		}
	}
}
