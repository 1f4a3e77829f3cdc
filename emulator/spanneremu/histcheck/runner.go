package histcheck

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/spanner"
	"google.golang.org/grpc/codes"
)

// Workload names.
const (
	Bank       = "bank"
	ListAppend = "list-append"
	Register   = "register"
)

// Workloads lists every workload, in the order the command runs them.
var Workloads = []string{Bank, ListAppend, Register}

// Options configure a run.
type Options struct {
	Workers  int           // concurrent workers (default 8)
	Duration time.Duration // how long the workers start new transactions (default 3s)
	Seed     int64         // seeds every worker's random choices
	// Keys is the number of rows of the workload's table: accounts (default 8), lists
	// (default 6) or registers (default 4). Few keys and many workers keep contention high.
	Keys int
	// TxnTimeout bounds each transaction, retries included (default 30s).
	TxnTimeout time.Duration
	// VisualizeDir receives porcupine's HTML visualization of a non-linearizable register
	// history ("": the system's temporary directory).
	VisualizeDir string
	// NoExactReads reads with strong bounds where it would read at an exact timestamp
	// (ExactStaleness, ReadTimestamp): for an emulator that keeps no version history
	// (spanneremu.Options.NoHistory), which serves only those at the newest data.
	NoExactReads bool
}

func (o Options) withDefaults(workload string) Options {
	if o.Workers <= 0 {
		o.Workers = 8
	}
	if o.Duration <= 0 {
		o.Duration = 3 * time.Second
	}
	if o.TxnTimeout <= 0 {
		o.TxnTimeout = 30 * time.Second
	}
	if o.Keys <= 0 {
		switch workload {
		case Bank:
			o.Keys = 8
		case ListAppend:
			o.Keys = 6
		default:
			o.Keys = 4
		}
	}
	return o
}

// bankInitial is every account's opening balance.
const bankInitial = 100

// Params tell the checkers what the workload set up.
type Params struct {
	Keys         int    // rows of the workload's table
	VisualizeDir string // for porcupine's visualization
}

// Run sets up workload's rows on the database client points at (a database with Schema), runs
// opts.Workers concurrent workers for opts.Duration, reads the final state and checks the
// history. The error is for a run that could not be carried out (setup failed, context
// ended); anomalies are in the Result.
func Run(ctx context.Context, client *spanner.Client, workload string, opts Options) (*Result, *History, error) {
	opts = opts.withDefaults(workload)
	tb, step, err := newWorkload(workload, opts)
	if err != nil {
		return nil, nil, err
	}
	h := NewHistory()
	start := time.Now()
	if err := setup(ctx, client, h, tb, initialValue(workload)); err != nil {
		return nil, h, fmt.Errorf("%s: setup: %w", workload, err)
	}
	deadline := start.Add(opts.Duration)
	var elems atomic.Int64
	var wg sync.WaitGroup
	for i := range opts.Workers {
		w := &worker{
			id: i, client: client, h: h, opts: opts, elems: &elems,
			rng:  rand.New(rand.NewPCG(uint64(opts.Seed), uint64(i)+1)),
			seen: map[Key]string{},
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				tctx, cancel := context.WithTimeout(ctx, opts.TxnTimeout)
				step(tctx, w)
				cancel()
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, h, fmt.Errorf("%s: %w", workload, err)
	}
	if err := finalRead(ctx, client, h, tb); err != nil {
		return nil, h, fmt.Errorf("%s: final read: %w", workload, err)
	}
	res := Check(workload, h, Params{Keys: opts.Keys, VisualizeDir: opts.VisualizeDir})
	res.Seed = opts.Seed
	res.Elapsed = time.Since(start)
	return res, h, nil
}

// Check runs the checkers that apply to workload on h.
func Check(workload string, h *History, p Params) *Result {
	res := newResult(workload)
	res.Count(h)
	var parts []*Result
	switch workload {
	case Bank:
		parts = append(parts, CheckBank(h, p.Keys, int64(p.Keys)*bankInitial))
	case ListAppend:
		parts = append(parts, CheckListAppend(h))
	case Register:
		parts = append(parts, CheckRegisters(h, p.VisualizeDir))
	}
	parts = append(parts, CheckCommitOrder(h))
	for _, r := range parts {
		res.merge(r.Checks, r.Notes, r.Anomalies)
	}
	return res
}

func newWorkload(name string, opts Options) (*table, func(context.Context, *worker), error) {
	switch name {
	case Bank:
		tb := &table{name: "Accounts", index: "AccountsByGrp", prefix: acctPrefix, intVal: true, n: opts.Keys}
		return tb, (&bank{tb: tb}).step, nil
	case ListAppend:
		tb := &table{name: "Lists", index: "ListsByGrp", prefix: listPrefix, n: opts.Keys}
		return tb, (&lists{tb: tb}).step, nil
	case Register:
		tb := &table{name: "Registers", index: "RegistersByGrp", prefix: regPrefix, intVal: true, n: opts.Keys}
		return tb, (&registers{tb: tb}).step, nil
	}
	return nil, nil, fmt.Errorf("unknown workload %q (want one of %s)", name, strings.Join(Workloads, ", "))
}

func initialValue(workload string) string {
	switch workload {
	case Bank:
		return fmt.Sprint(bankInitial)
	case ListAppend:
		return ""
	}
	return "0"
}

// setup writes every row's initial value in one transaction, recorded as the history's first
// committed transaction.
func setup(ctx context.Context, client *spanner.Client, h *History, tb *table, v string) error {
	a := h.begin(h.newTxn(), -1, 1, ReadWrite, "setup")
	var ms []*spanner.Mutation
	for id := range int64(tb.n) {
		ms = append(ms, spanner.InsertOrUpdate(tb.name, []string{"Id", "Grp", "Val"}, []any{id, group(id), tb.value(v)}))
		a.Ops = append(a.Ops, Op{Kind: OpWrite, Key: tb.key(id), Write: WriteSet, Arg: v, Method: "Apply(InsertOrUpdate)"})
	}
	ts, err := client.Apply(ctx, ms)
	a.End = time.Now()
	if err != nil {
		a.Outcome, a.Err = Unknown, err.Error()
		return err
	}
	a.Outcome, a.CommitTS = Committed, ts
	h.noteCommit(ts)
	return nil
}

// finalRead reads every row after the workers stopped, with a strong single-use read.
func finalRead(ctx context.Context, client *spanner.Client, h *History, tb *table) error {
	a := h.begin(h.newTxn(), -1, 1, SingleUse, "final read")
	a.Bound = "strong"
	ro := client.Single()
	op := tb.read(ctx, ro, mReadAll, nil, allIDs(tb.n))
	a.Ops = append(a.Ops, op)
	a.End = time.Now()
	if op.Err != "" {
		a.Outcome, a.Err = Failed, op.Err
		return op.err
	}
	ts, err := ro.Timestamp()
	if err != nil {
		a.Outcome, a.Err = Failed, err.Error()
		return err
	}
	a.Outcome, a.ReadTS = Committed, ts
	return nil
}

func allIDs(n int) []int64 {
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i)
	}
	return ids
}

// worker is one concurrent client loop.
type worker struct {
	id     int
	client *spanner.Client
	h      *History
	opts   Options
	rng    *rand.Rand
	elems  *atomic.Int64 // unique list elements and register values
	seen   map[Key]string
}

// errRollback is returned by a closure that decides not to commit (the client rolls back).
var errRollback = errors.New("histcheck: transaction rolled back on purpose")

// attemptCtx is what a read-write closure records into.
type attemptCtx struct {
	a *Attempt
}

// do records op and returns its error.
func (c *attemptCtx) do(op Op) (Op, error) {
	c.a.Ops = append(c.a.Ops, op)
	return op, op.err
}

// readWrite runs body in Client.ReadWriteTransactionWithOptions and records every attempt:
// every run of the closure is a new attempt, and the one before it, which the client retried,
// did not commit.
func (w *worker) readWrite(ctx context.Context, label string, body func(ctx context.Context, tx *spanner.ReadWriteTransaction, c *attemptCtx) error) (*Attempt, error) {
	txn := w.h.newTxn()
	var attempts []*Attempt
	var closureErr error
	resp, err := w.client.ReadWriteTransactionWithOptions(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
		if n := len(attempts); n > 0 {
			prev := attempts[n-1]
			prev.Outcome = Aborted
			if prev.Err == "" {
				prev.Err = "retried by the client"
			}
		}
		a := w.h.begin(txn, w.id, len(attempts)+1, ReadWrite, label)
		attempts = append(attempts, a)
		closureErr = body(ctx, tx, &attemptCtx{a: a})
		a.End = time.Now()
		if closureErr != nil {
			a.Err = closureErr.Error()
		}
		return closureErr
	}, spanner.TransactionOptions{})
	if len(attempts) == 0 {
		return nil, err
	}
	last := attempts[len(attempts)-1]
	last.End = time.Now()
	switch {
	case err == nil:
		last.Outcome, last.CommitTS, last.Err = Committed, resp.CommitTs, ""
		w.h.noteCommit(resp.CommitTs)
	case closureErr != nil:
		// The closure failed: the client rolled the attempt back without committing.
		if spanner.ErrCode(closureErr) == codes.Aborted {
			last.Outcome = Aborted
		} else {
			last.Outcome = Failed
		}
		last.Err = closureErr.Error()
	default:
		// The commit itself failed.
		last.Err = err.Error()
		switch spanner.ErrCode(err) {
		case codes.Aborted:
			last.Outcome = Aborted
		case codes.FailedPrecondition, codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.OutOfRange, codes.PermissionDenied:
			last.Outcome = Failed
		default:
			last.Outcome = Unknown
		}
	}
	return last, err
}

// readOnly runs body in a multi-use read-only transaction with the bound and records it.
func (w *worker) readOnly(ctx context.Context, label string, b bound, body func(ctx context.Context, r reader, c *attemptCtx) error) *Attempt {
	a := w.h.begin(w.h.newTxn(), w.id, 1, b.kind(false), label)
	a.Bound, a.ExactTS = b.name, b.exact
	ro := w.client.ReadOnlyTransaction()
	if b.strong() {
		defer ro.Close()
	} else {
		ro = ro.WithTimestampBound(b.tb)
		defer ro.Close()
	}
	err := body(ctx, ro, &attemptCtx{a: a})
	w.finishReadOnly(a, ro, err)
	return a
}

// single runs one read in a single-use transaction with the bound and records it.
func (w *worker) single(ctx context.Context, label string, b bound, body func(ctx context.Context, r reader, c *attemptCtx) error) *Attempt {
	a := w.h.begin(w.h.newTxn(), w.id, 1, b.kind(true), label)
	a.Bound, a.ExactTS = b.name, b.exact
	ro := w.client.Single()
	if !b.strong() {
		ro = ro.WithTimestampBound(b.tb)
	}
	err := body(ctx, ro, &attemptCtx{a: a})
	w.finishReadOnly(a, ro, err)
	return a
}

func (w *worker) finishReadOnly(a *Attempt, ro *spanner.ReadOnlyTransaction, err error) {
	a.End = time.Now()
	if err != nil {
		a.Outcome, a.Err = Failed, err.Error()
		return
	}
	ts, err := ro.Timestamp()
	if err != nil {
		a.Outcome, a.Err = Failed, err.Error()
		return
	}
	a.Outcome, a.ReadTS = Committed, ts
}

// bound is a timestamp bound with its name for reports.
type bound struct {
	tb    spanner.TimestampBound
	name  string
	exact time.Time // ReadTimestamp bounds: the timestamp asked for
	isStr bool
}

func (b bound) strong() bool { return b.isStr }

func (b bound) kind(single bool) TxnKind {
	switch {
	case !b.isStr:
		return Stale
	case single:
		return SingleUse
	}
	return ReadOnly
}

var strongBound = bound{tb: spanner.StrongRead(), name: "strong", isStr: true}

// randomBound picks a timestamp bound; bounded staleness only for single-use reads, where the
// client allows it.
func (w *worker) randomBound(single bool) bound {
	n := 4
	if single {
		n = 6
	}
	c := w.rng.IntN(n)
	if w.opts.NoExactReads && c >= 1 && c <= 3 {
		c = 0 // instead of an exact bound
	}
	switch c {
	case 0:
		return strongBound
	case 1:
		ds := []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, 200 * time.Millisecond, 2 * time.Second}
		d := ds[w.rng.IntN(len(ds))]
		return bound{tb: spanner.ExactStaleness(d), name: "exact staleness " + d.String()}
	case 2, 3:
		// At, just before or just after a recent commit: a read at a commit's timestamp must
		// see that commit, one a microsecond earlier must not.
		ts, ok := w.h.recentCommit(w.rng.Float64())
		if !ok {
			return strongBound
		}
		off := time.Duration(w.rng.IntN(3)-1) * time.Microsecond
		ts = ts.Add(off)
		return bound{tb: spanner.ReadTimestamp(ts), name: fmt.Sprintf("read timestamp %s (commit%+dµs)", fmtTS(ts), off/time.Microsecond), exact: ts}
	case 4:
		return bound{tb: spanner.MaxStaleness(10 * time.Millisecond), name: "max staleness 10ms"}
	default:
		ts, ok := w.h.recentCommit(w.rng.Float64())
		if !ok {
			return strongBound
		}
		return bound{tb: spanner.MinReadTimestamp(ts), name: "min read timestamp " + fmtTS(ts)}
	}
}

// pick returns k distinct random ids below n.
func (w *worker) pick(n, k int) []int64 {
	perm := w.rng.Perm(n)[:k]
	out := make([]int64, k)
	for i, p := range perm {
		out[i] = int64(p)
	}
	return out
}

// value returns what op read for key, and whether it read it.
func (op Op) value(k Key) (string, bool) {
	for _, o := range op.Obs {
		if o.Key == k && o.Found {
			return o.Value, true
		}
	}
	return "", false
}
