package histcheck

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"cloud.google.com/go/spanner"
)

// lists is the list-append workload in the style of Jepsen's Elle: every row holds a list of
// integers (a STRING of space-separated elements); transactions append unique elements and
// read lists. Since every element is unique and lists only grow, each list read names the
// version of its key it saw, and versions of a key are totally ordered by their prefixes.
type lists struct{ tb *table }

func (l *lists) step(ctx context.Context, w *worker) {
	switch r := w.rng.IntN(100); {
	case r < 80:
		l.txn(ctx, w)
	case r < 92:
		bd := strongBound
		if w.rng.IntN(3) == 0 {
			bd = w.randomBound(false)
		}
		n := 1 + w.rng.IntN(3)
		w.readOnly(ctx, "reads", bd, func(ctx context.Context, r reader, c *attemptCtx) error {
			for range n {
				if _, err := c.do(l.readRandom(ctx, r, w)); err != nil {
					return err
				}
			}
			return nil
		})
	default:
		w.single(ctx, "single-read", w.randomBound(true), func(ctx context.Context, r reader, c *attemptCtx) error {
			_, err := c.do(l.readRandom(ctx, r, w))
			return err
		})
	}
}

// readRandom reads one or two random lists.
func (l *lists) readRandom(ctx context.Context, r reader, w *worker) Op {
	if w.rng.IntN(2) == 0 {
		return l.tb.readOne(ctx, r, w.rng, int64(w.rng.IntN(l.tb.n)))
	}
	return l.tb.readSome(ctx, r, w.rng, w.pick(l.tb.n, 2))
}

// txn runs 1-4 random appends and reads. An append is a blind DML CONCAT, or a read followed
// by the new list written with a mutation or with DML. After a buffered mutation of a key the
// attempt does not write the key again (a later DML statement would not see the mutation,
// which the commit would then apply over it).
func (l *lists) txn(ctx context.Context, w *worker) {
	w.readWrite(ctx, "append-read", func(ctx context.Context, tx *spanner.ReadWriteTransaction, c *attemptCtx) error {
		n := 1 + w.rng.IntN(4)
		mutated := map[int64]bool{}
		for range n {
			id := int64(w.rng.IntN(l.tb.n))
			if w.rng.IntN(2) == 0 || mutated[id] {
				if _, err := c.do(l.readRandom(ctx, tx, w)); err != nil {
					return err
				}
				continue
			}
			e := w.elems.Add(1)
			switch r := w.rng.IntN(10); {
			case r < 4:
				if _, err := c.do(l.tb.appendElem(ctx, tx, id, e)); err != nil {
					return err
				}
			default:
				op, err := c.do(l.tb.readOne(ctx, tx, w.rng, id))
				if err != nil {
					return err
				}
				cur, _ := op.value(l.tb.key(id))
				m := writeMethod(w.rng.IntN(int(nSetMethods)))
				set := l.tb.set(ctx, tx, m, id, canonList(cur+" "+strconv.FormatInt(e, 10)))
				set.Elem = e
				if _, err := c.do(set); err != nil {
					return err
				}
				if !set.Visible {
					mutated[id] = true
				}
			}
		}
		return nil
	})
}

// Dependency edge kinds.
const (
	ww = 1 << iota
	wr
	rw
)

func kindName(k int) string {
	switch k {
	case ww:
		return "ww"
	case wr:
		return "wr"
	}
	return "rw"
}

// edge is a dependency between two attempts.
type edge struct {
	from, to int
	kind     int
	key      Key
}

// graph is a dependency graph; nodes are attempt ids.
type graph struct {
	out map[int]map[int]map[int]Key // from → to → kind → first key
	in  map[int]map[int]map[int]Key
	// order is each node's component in the order Tarjan's algorithm finishes them (reverse
	// topological): an edge u→v has order[v] <= order[u]. Set by sccs.
	order map[int]int
	nb    map[int][]int // sorted successors, memoized
}

func newGraph() *graph {
	return &graph{out: map[int]map[int]map[int]Key{}, in: map[int]map[int]map[int]Key{}, order: map[int]int{}, nb: map[int][]int{}}
}

// succ returns v's successors in id order.
func (g *graph) succ(v int) []int {
	if s, ok := g.nb[v]; ok {
		return s
	}
	s := sortedInts(g.out[v])
	g.nb[v] = s
	return s
}

func (g *graph) add(from, to, kind int, key Key) {
	if from == to {
		return
	}
	for _, m := range []struct {
		adj  map[int]map[int]map[int]Key
		a, b int
	}{{g.out, from, to}, {g.in, to, from}} {
		if m.adj[m.a] == nil {
			m.adj[m.a] = map[int]map[int]Key{}
		}
		if m.adj[m.a][m.b] == nil {
			m.adj[m.a][m.b] = map[int]Key{}
		}
		if _, ok := m.adj[m.a][m.b][kind]; !ok {
			m.adj[m.a][m.b][kind] = key
		}
	}
}

// listRead is one external read of a list: what the attempt saw of the database.
type listRead struct {
	a      *Attempt
	key    Key
	list   []int64
	method string
}

type elemWriter struct {
	a   *Attempt
	key Key
}

// CheckListAppend checks a list-append history as Elle does. It infers the version order of
// every list from the longest read of it (all reads must be prefixes of one another), derives
// write-write, write-read and read-write (anti-)dependencies between the committed
// transactions, and reports cycles by their weakest edge set: G0 (ww only), G1c (ww and wr),
// G-single (exactly one rw: read skew) and G2. Every attempt that did not commit, and every
// read-only transaction, enters the graph as a read-only node (its reads must be consistent as
// well: Spanner's read-write transactions lock what they read, so even an attempt that is
// later aborted sees one state). It also reports G1a (a read of an element whose writer did
// not commit), G1b (a read of a transaction's intermediate state), incompatible orders,
// duplicate elements, elements nobody wrote, committed appends missing from the final lists,
// and reads that do not show the attempt's own earlier DML.
func CheckListAppend(h *History) *Result {
	res := newResult(ListAppend)
	atts := h.Attempts()
	writers := map[int64]elemWriter{}
	appends := map[int]map[Key][]int64{} // attempt → key → elements appended, in order
	for _, a := range atts {
		for _, op := range a.Ops {
			if op.Kind != OpWrite || op.Err != "" || op.Elem == 0 {
				continue
			}
			if prev, ok := writers[op.Elem]; ok {
				res.add(Anomaly{Kind: KindDuplicate, Summary: fmt.Sprintf("element %d appended by both %s and %s", op.Elem, prev.a.Name(), a.Name())})
				continue
			}
			writers[op.Elem] = elemWriter{a, op.Key}
			if appends[a.ID] == nil {
				appends[a.ID] = map[Key][]int64{}
			}
			appends[a.ID][op.Key] = append(appends[a.ID][op.Key], op.Elem)
		}
	}

	// External reads, checking each attempt's view of its own writes.
	var reads []listRead
	for _, a := range atts {
		if a.Outcome == Pending || a.Label == "setup" {
			continue
		}
		ownApp := map[Key][]int64{}
		ownSet := map[Key][]int64{}
		for _, op := range a.Ops {
			if op.Err != "" {
				continue
			}
			if op.Kind == OpWrite {
				if !op.Visible {
					continue
				}
				if op.Write == WriteSet {
					ownSet[op.Key] = parseList(op.Arg)
					delete(ownApp, op.Key)
				} else if s, ok := ownSet[op.Key]; ok {
					ownSet[op.Key] = append(s, op.Elem)
				} else {
					ownApp[op.Key] = append(ownApp[op.Key], op.Elem)
				}
				continue
			}
			for _, o := range op.Obs {
				// No row is the empty list: a read at a timestamp before the setup committed.
				// (A row missing later is reported by the commit-order check.)
				list := parseList(o.Value)
				if d, ok := duplicate(list); ok {
					res.add(Anomaly{Kind: KindDuplicate, Summary: fmt.Sprintf("%s read %s [%s]: element %d twice", a.Name(), o, op.Method, d),
						Details: []string{fmt.Sprintf("T%d: %s", a.ID, a.Describe())}, Attempts: []int{a.ID}})
					continue
				}
				if s, ok := ownSet[o.Key]; ok {
					if !slices.Equal(list, s) {
						res.add(internalAnomaly(a, op, o, fmt.Sprintf("its own DML had set it to [%s]", join(s))))
					}
					continue
				}
				if app := ownApp[o.Key]; len(app) > 0 {
					if len(list) < len(app) || !slices.Equal(list[len(list)-len(app):], app) {
						res.add(internalAnomaly(a, op, o, fmt.Sprintf("it does not end with the attempt's own appends [%s]", join(app))))
						continue
					}
					list = list[:len(list)-len(app)]
				}
				reads = append(reads, listRead{a: a, key: o.Key, list: list, method: op.Method})
			}
		}
	}
	res.Checks["list-append: reads"] = len(reads)

	// Version order: the longest read of each key; every read must be a prefix of it.
	longest := map[Key]listRead{}
	for _, r := range reads {
		if cur, ok := longest[r.key]; !ok || len(r.list) > len(cur.list) {
			longest[r.key] = r
		}
	}
	compatible := make([]bool, len(reads))
	reported := map[string]bool{}
	for i, r := range reads {
		lr := longest[r.key]
		if isPrefix(r.list, lr.list) {
			compatible[i] = true
			continue
		}
		sig := string(r.key) + "=" + join(r.list)
		if reported[sig] {
			continue
		}
		reported[sig] = true
		res.add(Anomaly{Kind: KindIncompatible,
			Summary: fmt.Sprintf("%s read %s=[%s] [%s], which is not a prefix of %s=[%s] read by %s [%s]",
				r.a.Name(), r.key, shortList(r.list), r.method, lr.key, shortList(lr.list), lr.a.Name(), lr.method),
			Details:  []string{fmt.Sprintf("T%d: %s", r.a.ID, r.a.Describe()), fmt.Sprintf("T%d: %s", lr.a.ID, lr.a.Describe())},
			Attempts: []int{r.a.ID, lr.a.ID}})
	}

	// Who wrote each element read: nobody (garbage), an attempt that did not commit (G1a);
	// and whether a read ends inside another transaction's appends (G1b).
	badElem := map[int64]bool{}
	for i, r := range reads {
		for j, e := range r.list {
			w, ok := writers[e]
			if !ok || w.key != r.key {
				if !badElem[e] {
					badElem[e] = true
					res.add(Anomaly{Kind: KindGarbage, Summary: fmt.Sprintf("%s read element %d in %s [%s], which no attempt appended to %s", r.a.Name(), e, r.key, r.method, r.key), Attempts: []int{r.a.ID}})
				}
				continue
			}
			if w.a.Outcome == Aborted || w.a.Outcome == Failed {
				if !badElem[e] {
					badElem[e] = true
					res.add(Anomaly{Kind: KindG1a, Summary: fmt.Sprintf("%s read %s=[%s] [%s], with element %d appended by %s, which did not commit",
						r.a.Name(), r.key, shortList(r.list), r.method, e, w.a.Name()),
						Details:  []string{fmt.Sprintf("T%d: %s", r.a.ID, r.a.Describe()), fmt.Sprintf("T%d: %s", w.a.ID, w.a.Describe())},
						Attempts: []int{r.a.ID, w.a.ID}})
				}
				continue
			}
			if j == len(r.list)-1 && compatible[i] && w.a != r.a {
				mine := appends[w.a.ID][r.key]
				if k := slices.Index(mine, e); k >= 0 && k < len(mine)-1 {
					res.add(Anomaly{Kind: KindG1b, Summary: fmt.Sprintf("%s read %s=[%s] [%s], ending in element %d of %s, which appended [%s] to %s",
						r.a.Name(), r.key, shortList(r.list), r.method, e, w.a.Name(), join(mine), r.key),
						Details:  []string{fmt.Sprintf("T%d: %s", r.a.ID, r.a.Describe()), fmt.Sprintf("T%d: %s", w.a.ID, w.a.Describe())},
						Attempts: []int{r.a.ID, w.a.ID}})
				}
			}
		}
	}

	// Committed appends missing from the final version of their list.
	final := map[Key]map[int64]bool{}
	haveFinal := false
	for _, r := range reads {
		if r.a.Label == "final read" {
			haveFinal = true
		}
	}
	if haveFinal {
		for k, lr := range longest {
			final[k] = map[int64]bool{}
			for _, e := range lr.list {
				final[k][e] = true
			}
		}
		for e, w := range writers {
			if w.a.Outcome == Committed && !final[w.key][e] {
				res.add(Anomaly{Kind: KindLostAppend, Summary: fmt.Sprintf("element %d, appended to %s by %s, is missing from the final %s=[%s]",
					e, w.key, w.a.Name(), w.key, shortList(longest[w.key].list)),
					Details: []string{fmt.Sprintf("T%d: %s", w.a.ID, w.a.Describe())}, Attempts: []int{w.a.ID}})
			}
		}
	}

	// The dependency graph over the committed writers; every other attempt is a read-only
	// node checked on its own.
	isWriter := map[int]bool{}
	byID := map[int]*Attempt{}
	for _, a := range atts {
		byID[a.ID] = a
	}
	for e, w := range writers {
		if w.a.Outcome == Committed || (w.a.Outcome == Unknown && final[w.key][e]) {
			isWriter[w.a.ID] = true
		}
	}
	g := newGraph()
	pos := map[Key]map[int64]int{} // key → element → index in the version order
	for k, lr := range longest {
		pos[k] = map[int64]int{}
		prev := -1
		for i, e := range lr.list {
			pos[k][e] = i
			w, ok := writers[e]
			if !ok || !isWriter[w.a.ID] {
				prev = -1
				continue
			}
			if prev >= 0 {
				g.add(prev, w.a.ID, ww, k)
			}
			prev = w.a.ID
		}
	}
	readerEdges := map[int][]edge{} // read-only node → its edges
	for i, r := range reads {
		if !compatible[i] {
			continue
		}
		version := longest[r.key].list
		n := len(r.list)
		var es []edge
		if n > 0 {
			if w, ok := writers[r.list[n-1]]; ok && isWriter[w.a.ID] {
				es = append(es, edge{from: w.a.ID, to: r.a.ID, kind: wr, key: r.key})
			}
		}
		if n < len(version) {
			if w, ok := writers[version[n]]; ok && isWriter[w.a.ID] {
				es = append(es, edge{from: r.a.ID, to: w.a.ID, kind: rw, key: r.key})
			}
		}
		for _, e := range es {
			if e.from == e.to {
				continue
			}
			if isWriter[r.a.ID] {
				g.add(e.from, e.to, e.kind, e.key)
			} else {
				readerEdges[r.a.ID] = append(readerEdges[r.a.ID], e)
			}
		}
	}
	res.Checks["list-append: committed writers"] = len(isWriter)
	res.Checks["list-append: read-only nodes"] = len(readerEdges)

	for _, scc := range g.sccs() {
		if c := g.worstCycle(scc); c != nil {
			res.add(cycleAnomaly(c, byID, appends, reads))
		}
	}
	ids := make([]int, 0, len(readerEdges))
	for id := range readerEdges {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if c := g.readerCycle(id, readerEdges[id]); c != nil {
			res.add(cycleAnomaly(c, byID, appends, reads))
		}
	}
	return res
}

func internalAnomaly(a *Attempt, op Op, o Obs, why string) Anomaly {
	return Anomaly{Kind: KindInternal, Summary: fmt.Sprintf("%s read %s [%s], but %s", a.Name(), o, op.Method, why),
		Details: []string{fmt.Sprintf("T%d: %s", a.ID, a.Describe())}, Attempts: []int{a.ID}}
}

func duplicate(l []int64) (int64, bool) {
	seen := map[int64]bool{}
	for _, e := range l {
		if seen[e] {
			return e, true
		}
		seen[e] = true
	}
	return 0, false
}

func isPrefix(p, l []int64) bool { return len(p) <= len(l) && slices.Equal(p, l[:len(p)]) }

func join(l []int64) string {
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = strconv.FormatInt(e, 10)
	}
	return strings.Join(parts, " ")
}

// shortList renders a list, eliding all but its last elements when it is long.
func shortList(l []int64) string {
	const keep = 10
	if len(l) <= keep+2 {
		return join(l)
	}
	return fmt.Sprintf("…%d more… %s", len(l)-keep, join(l[len(l)-keep:]))
}

// sccs returns the strongly connected components with more than one node (Tarjan).
func (g *graph) sccs() [][]int {
	index := map[int]int{}
	low := map[int]int{}
	onStack := map[int]bool{}
	var stack []int
	var out [][]int
	next := 0
	var strong func(v int)
	strong = func(v int) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range g.succ(v) {
			if _, seen := index[w]; !seen {
				strong(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var comp []int
			n := len(g.order)
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				g.order[w] = n
				comp = append(comp, w)
				if w == v {
					break
				}
			}
			if len(comp) > 1 {
				slices.Sort(comp)
				out = append(out, comp)
			}
		}
	}
	nodes := make([]int, 0, len(g.out))
	for v := range g.out {
		nodes = append(nodes, v)
	}
	slices.Sort(nodes)
	for _, v := range nodes {
		if _, seen := index[v]; !seen {
			strong(v)
		}
	}
	return out
}

func sortedInts[V any](m map[int]V) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// path finds a shortest path from any of the sources to any target over edges whose kind is in
// mask, within the node set (nil: every node); it returns the edges. Nodes that finish before
// every target in the order of sccs cannot reach one and are not explored.
func (g *graph) path(sources []int, targets map[int]bool, mask int, within map[int]bool) []edge {
	minOrder := -1
	for t := range targets {
		if o, ok := g.order[t]; !ok {
			minOrder = -1
			break
		} else if minOrder < 0 || o < minOrder {
			minOrder = o
		}
	}
	type hop struct {
		prev int
		e    edge
	}
	seen := map[int]hop{}
	queue := []int{}
	for _, s := range sources {
		if _, ok := seen[s]; ok {
			continue
		}
		seen[s] = hop{prev: -1}
		queue = append(queue, s)
	}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		if targets[v] {
			var es []edge
			for v != -1 && seen[v].prev != -1 {
				es = append(es, seen[v].e)
				v = seen[v].prev
			}
			slices.Reverse(es)
			return es
		}
		for _, w := range g.succ(v) {
			if within != nil && !within[w] {
				continue
			}
			if o, ok := g.order[w]; ok && minOrder >= 0 && o < minOrder {
				continue
			}
			if _, ok := seen[w]; ok {
				continue
			}
			kinds := g.out[v][w]
			for _, k := range []int{ww, wr, rw} {
				if key, ok := kinds[k]; ok && k&mask != 0 {
					seen[w] = hop{prev: v, e: edge{from: v, to: w, kind: k, key: key}}
					queue = append(queue, w)
					break
				}
			}
		}
	}
	return nil
}

// worstCycle finds, in a strongly connected component, a shortest cycle of the weakest class:
// ww edges only (G0), then ww and wr (G1c), then exactly one rw edge (G-single), then any.
func (g *graph) worstCycle(scc []int) []edge {
	within := map[int]bool{}
	for _, v := range scc {
		within[v] = true
	}
	const maxStarts = 200
	shortest := func(mask int) []edge {
		var best []edge
		for i, s := range scc {
			if i >= maxStarts {
				break
			}
			var succ []int
			var first []edge
			for _, w := range g.succ(s) {
				if !within[w] {
					continue
				}
				for _, k := range []int{ww, wr, rw} {
					if key, ok := g.out[s][w][k]; ok && k&mask != 0 {
						succ = append(succ, w)
						first = append(first, edge{from: s, to: w, kind: k, key: key})
						break
					}
				}
			}
			for j, w := range succ {
				rest := []edge{}
				if w != s {
					rest = g.path([]int{w}, map[int]bool{s: true}, mask, within)
					if rest == nil {
						continue
					}
				}
				c := append([]edge{first[j]}, rest...)
				if best == nil || len(c) < len(best) {
					best = c
				}
			}
		}
		return best
	}
	if c := shortest(ww); c != nil {
		return c
	}
	if c := shortest(ww | wr); c != nil {
		return c
	}
	// Exactly one rw edge: an rw edge u→v and a path v⇝u without rw edges.
	var best []edge
	starts := 0
	for _, u := range scc {
		for _, v := range g.succ(u) {
			key, ok := g.out[u][v][rw]
			if !ok || !within[v] || starts >= maxStarts {
				continue
			}
			starts++
			rest := g.path([]int{v}, map[int]bool{u: true}, ww|wr, within)
			if rest == nil && v != u {
				continue
			}
			c := append([]edge{{from: u, to: v, kind: rw, key: key}}, rest...)
			if best == nil || len(c) < len(best) {
				best = c
			}
		}
	}
	if best != nil {
		return best
	}
	return shortest(ww | wr | rw)
}

// readerCycle finds a shortest cycle through a read-only node: one of its rw edges to a
// writer, a path in the graph of writers, and one of its wr edges back. A path without rw
// edges makes it G-single, else G2.
func (g *graph) readerCycle(id int, es []edge) []edge {
	var outs, ins []edge
	for _, e := range es {
		if e.from == id {
			outs = append(outs, e)
		} else {
			ins = append(ins, e)
		}
	}
	if len(outs) == 0 || len(ins) == 0 {
		return nil
	}
	targets := map[int]bool{}
	inBy := map[int]edge{}
	for _, e := range ins {
		targets[e.from] = true
		if _, ok := inBy[e.from]; !ok {
			inBy[e.from] = e
		}
	}
	for _, mask := range []int{ww | wr, ww | wr | rw} {
		var best []edge
		for _, o := range outs {
			p := g.path([]int{o.to}, targets, mask, nil)
			if p == nil && !targets[o.to] {
				continue
			}
			end := o.to
			if len(p) > 0 {
				end = p[len(p)-1].to
			}
			c := append(append([]edge{o}, p...), inBy[end])
			if best == nil || len(c) < len(best) {
				best = c
			}
		}
		if best != nil {
			return best
		}
	}
	return nil
}

// cycleAnomaly classifies and reports a cycle.
func cycleAnomaly(c []edge, byID map[int]*Attempt, appends map[int]map[Key][]int64, reads []listRead) Anomaly {
	kinds := 0
	nrw := 0
	for _, e := range c {
		kinds |= e.kind
		if e.kind == rw {
			nrw++
		}
	}
	kind := KindG2
	switch {
	case kinds == ww:
		kind = KindG0
	case kinds&rw == 0:
		kind = KindG1c
	case nrw == 1:
		kind = KindGSingle
	}
	var b strings.Builder
	var ids []int
	for i, e := range c {
		a := byID[e.from]
		if i == 0 {
			b.WriteString(a.Name())
		}
		fmt.Fprintf(&b, " -%s(%s)-> ", kindName(e.kind), e.key)
		if i == len(c)-1 {
			fmt.Fprintf(&b, "T%d", e.to)
		} else {
			b.WriteString(byID[e.to].Name())
		}
		ids = append(ids, e.from)
	}
	// For each attempt, what it read and appended of the keys on its edges.
	edgeKeys := map[int]map[Key]bool{}
	for _, e := range c {
		for _, id := range []int{e.from, e.to} {
			if edgeKeys[id] == nil {
				edgeKeys[id] = map[Key]bool{}
			}
			edgeKeys[id][e.key] = true
		}
	}
	readsBy := map[int][]string{}
	shown := map[string]bool{}
	for _, r := range reads {
		if !edgeKeys[r.a.ID][r.key] {
			continue
		}
		s := fmt.Sprintf("%s=[%s]", r.key, shortList(r.list))
		if sig := fmt.Sprint(r.a.ID, s); !shown[sig] {
			shown[sig] = true
			readsBy[r.a.ID] = append(readsBy[r.a.ID], s)
		}
	}
	var facts []string
	for _, id := range ids {
		var parts []string
		if rs := readsBy[id]; len(rs) > 0 {
			parts = append(parts, "read "+strings.Join(rs, " "))
		}
		var as []string
		keys := make([]Key, 0, len(appends[id]))
		for k := range appends[id] {
			if edgeKeys[id][k] {
				keys = append(keys, k)
			}
		}
		sortKeys(keys)
		for _, k := range keys {
			as = append(as, fmt.Sprintf("[%s] to %s", join(appends[id][k]), k))
		}
		if len(as) > 0 {
			what := "appended "
			if byID[id].Outcome != Committed {
				what = "tried to append "
			}
			parts = append(parts, what+strings.Join(as, ", "))
		}
		facts = append(facts, fmt.Sprintf("T%d %s", id, strings.Join(parts, "; ")))
	}
	b.WriteString("; ")
	b.WriteString(strings.Join(facts, "; "))
	var details []string
	for _, id := range ids {
		details = append(details, fmt.Sprintf("T%d: %s", id, byID[id].Describe()))
	}
	return Anomaly{Kind: kind, Summary: b.String(), Details: details, Attempts: ids}
}
