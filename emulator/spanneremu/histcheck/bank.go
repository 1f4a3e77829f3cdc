package histcheck

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"cloud.google.com/go/spanner"
)

// bank is the bank workload: accounts with balances; transfers move money between two of
// them and never below zero, so every consistent view of all accounts adds up to the opening
// total.
type bank struct{ tb *table }

func (b *bank) step(ctx context.Context, w *worker) {
	switch r := w.rng.IntN(100); {
	case r < 40:
		b.transfer(ctx, w)
	case r < 65:
		b.scanTransfer(ctx, w, false)
	case r < 72:
		b.scanTransfer(ctx, w, true)
	case r < 86:
		b.audit(ctx, w)
	default:
		b.staleAudit(ctx, w)
	}
}

// transfer reads two accounts (separately or in one read) and moves money between them.
func (b *bank) transfer(ctx context.Context, w *worker) {
	w.readWrite(ctx, "transfer", func(ctx context.Context, tx *spanner.ReadWriteTransaction, c *attemptCtx) error {
		ids := w.pick(b.tb.n, 2)
		bal := map[int64]int64{}
		if w.rng.IntN(2) == 0 {
			for _, id := range ids {
				op, err := c.do(b.tb.readOne(ctx, tx, w.rng, id))
				if err != nil {
					return err
				}
				bal[id] = balance(op, b.tb.key(id))
			}
		} else {
			op, err := c.do(b.tb.readSome(ctx, tx, w.rng, append([]int64(nil), ids...)))
			if err != nil {
				return err
			}
			for _, id := range ids {
				bal[id] = balance(op, b.tb.key(id))
			}
		}
		return b.move(ctx, tx, c, w, ids[0], ids[1], bal)
	})
}

// scanTransfer reads every account, one read per account in a random order (or all with one
// read), then moves money from the richest account to another: an attempt that sees a
// concurrent transfer between two of its reads sees a total that is off (read skew). Half of
// the scans use the Read API only, the way an application reads rows by key: a SQL query in a
// read-write transaction makes spanneremu take the lock (and check the earlier reads) at once.
func (b *bank) scanTransfer(ctx context.Context, w *worker, oneRead bool) {
	label := "scan-transfer"
	if oneRead {
		label = "read-all-transfer"
	}
	readsOnly := !oneRead && w.rng.IntN(2) == 0
	if readsOnly {
		label = "scan-transfer(Read API)"
	}
	w.readWrite(ctx, label, func(ctx context.Context, tx *spanner.ReadWriteTransaction, c *attemptCtx) error {
		bal, err := b.readEvery(ctx, tx, w, c, oneRead, readsOnly)
		if err != nil {
			return err
		}
		from := int64(0)
		for id, v := range bal {
			if v > bal[from] || (v == bal[from] && id < from) {
				from = id
			}
		}
		to := int64(w.rng.IntN(b.tb.n - 1))
		if to >= from {
			to++
		}
		return b.move(ctx, tx, c, w, from, to, bal)
	})
}

// readEvery reads all accounts into bal: with one read, or one read per account (with the
// Read API only if readsOnly).
func (b *bank) readEvery(ctx context.Context, r reader, w *worker, c *attemptCtx, oneRead, readsOnly bool) (map[int64]int64, error) {
	bal := map[int64]int64{}
	if oneRead {
		op, err := c.do(b.tb.readAll(ctx, r, w.rng))
		if err != nil {
			return nil, err
		}
		for id := range int64(b.tb.n) {
			bal[id] = balance(op, b.tb.key(id))
		}
		return bal, nil
	}
	for _, p := range w.rng.Perm(b.tb.n) {
		id := int64(p)
		m := readMethod(w.rng.IntN(int(mReadAll)))
		if readsOnly {
			m = readMethod(w.rng.IntN(int(mQueryKey)))
		}
		op, err := c.do(b.tb.read(ctx, r, m, w.rng, []int64{id}))
		if err != nil {
			return nil, err
		}
		bal[id] = balance(op, b.tb.key(id))
	}
	return bal, nil
}

// move transfers a random amount, at most from's balance, writing each account with a random
// method: an absolute value (mutation or DML) or a relative DML update.
func (b *bank) move(ctx context.Context, tx *spanner.ReadWriteTransaction, c *attemptCtx, w *worker, from, to int64, bal map[int64]int64) error {
	if bal[from] <= 0 {
		return nil
	}
	amt := 1 + w.rng.Int64N(bal[from])
	for _, leg := range []struct {
		id, d int64
	}{{from, -amt}, {to, amt}} {
		var op Op
		if m := w.rng.IntN(int(nSetMethods) + 1); m == int(nSetMethods) {
			op = b.tb.add(ctx, tx, leg.id, leg.d)
		} else {
			op = b.tb.set(ctx, tx, writeMethod(m), leg.id, strconv.FormatInt(bal[leg.id]+leg.d, 10))
		}
		if _, err := c.do(op); err != nil {
			return err
		}
	}
	return nil
}

// audit reads every account in a read-only transaction (strong or stale), one read per
// account or all with one read.
func (b *bank) audit(ctx context.Context, w *worker) {
	bd := strongBound
	if w.rng.IntN(2) == 0 {
		bd = w.randomBound(false)
	}
	oneRead := w.rng.IntN(4) == 0
	w.readOnly(ctx, "audit", bd, func(ctx context.Context, r reader, c *attemptCtx) error {
		_, err := b.readEvery(ctx, r, w, c, oneRead, false)
		return err
	})
}

// staleAudit reads every account with one single-use read at a random timestamp bound.
func (b *bank) staleAudit(ctx context.Context, w *worker) {
	w.single(ctx, "single-audit", w.randomBound(true), func(ctx context.Context, r reader, c *attemptCtx) error {
		_, err := c.do(b.tb.readAll(ctx, r, w.rng))
		return err
	})
}

func balance(op Op, k Key) int64 {
	v, _ := op.value(k)
	n, _ := strconv.ParseInt(v, 10, 64)
	return n
}

// externalReads returns, for every key the attempt read before writing it itself (with a
// write its reads see), the value of its first such read: what the attempt saw of the
// database as opposed to its own writes.
func externalReads(a *Attempt) (map[Key]string, map[Key]string) {
	ext := map[Key]string{}
	method := map[Key]string{}
	own := map[Key]bool{}
	for _, op := range a.Ops {
		if op.Err != "" {
			continue
		}
		if op.Kind == OpWrite {
			if op.Visible {
				own[op.Key] = true
			}
			continue
		}
		for _, o := range op.Obs {
			if _, ok := ext[o.Key]; ok || own[o.Key] || !o.Found {
				continue
			}
			ext[o.Key] = o.Value
			method[o.Key] = op.Method
		}
	}
	return ext, method
}

// CheckBank checks a bank history: in every attempt (committed or not, read-write or
// read-only) that read every one of the accounts accounts, the balances it saw add up to
// total; no read returns a negative balance; replaying the committed transactions in
// commit-timestamp order never leaves a balance below zero and ends at total.
func CheckBank(h *History, accounts int, total int64) *Result {
	res := newResult(Bank)
	for _, a := range h.Attempts() {
		if a.Outcome == Pending || a.Label == "setup" {
			continue
		}
		ext, method := externalReads(a)
		for _, op := range a.Ops {
			for _, o := range op.Obs {
				if n, err := strconv.ParseInt(o.Value, 10, 64); o.Found && (err != nil || n < 0) {
					res.add(Anomaly{Kind: KindNegative, Summary: fmt.Sprintf("%s read %s [%s]", a.Name(), o, op.Method),
						Details: []string{a.Describe()}, Attempts: []int{a.ID}})
				}
			}
		}
		if len(ext) < accounts {
			continue
		}
		res.Checks["bank: attempts that read every account"]++
		var sum int64
		keys := make([]Key, 0, len(ext))
		for k, v := range ext {
			n, _ := strconv.ParseInt(v, 10, 64)
			sum += n
			keys = append(keys, k)
		}
		if sum == total {
			continue
		}
		sortKeys(keys)
		parts := make([]string, len(keys))
		methods := map[string]bool{}
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%s=%s", k, ext[k])
			methods[method[k]] = true
		}
		what := "read skew"
		if len(methods) == 1 && len(ops(a, OpRead)) == 1 {
			what = "one read saw an inconsistent state"
		}
		res.add(Anomaly{
			Kind:     KindBankTotal,
			Summary:  fmt.Sprintf("%s saw a total of %d, want %d (%s): %s", a.Name(), sum, total, what, strings.Join(parts, " ")),
			Details:  []string{fmt.Sprintf("T%d: %s", a.ID, a.Describe())},
			Attempts: []int{a.ID},
		})
	}

	// The committed state, in commit-timestamp order.
	committed := committedInOrder(h)
	state := map[Key]string{}
	for _, a := range committed {
		applyCommit(state, a)
		for _, op := range a.Ops {
			if op.Kind != OpWrite || op.Err != "" {
				continue
			}
			if n, _ := strconv.ParseInt(state[op.Key], 10, 64); n < 0 {
				res.add(Anomaly{Kind: KindNegative, Summary: fmt.Sprintf("committed %s left %s=%d", a.Name(), op.Key, n),
					Details: []string{fmt.Sprintf("T%d: %s", a.ID, a.Describe())}, Attempts: []int{a.ID}})
				break
			}
		}
	}
	res.Checks["bank: committed transactions replayed"] += len(committed)
	if len(committed) > 0 && !hasUnknownWrites(h) {
		var sum int64
		for _, v := range state {
			n, _ := strconv.ParseInt(v, 10, 64)
			sum += n
		}
		if sum != total {
			res.add(Anomaly{Kind: KindBankTotal, Summary: fmt.Sprintf("the committed transactions, replayed in commit-timestamp order, end at a total of %d, want %d", sum, total)})
		}
	}
	return res
}

func ops(a *Attempt, k OpKind) []Op {
	var out []Op
	for _, op := range a.Ops {
		if op.Kind == k && op.Err == "" {
			out = append(out, op)
		}
	}
	return out
}

func sortKeys(keys []Key) {
	sort.Slice(keys, func(i, j int) bool { return keyLess(keys[i], keys[j]) })
}

// keyLess orders keys by prefix, then numerically by id.
func keyLess(a, b Key) bool {
	pa, na := splitKey(a)
	pb, nb := splitKey(b)
	if pa != pb {
		return pa < pb
	}
	return na < nb
}

func splitKey(k Key) (string, int64) {
	s := string(k)
	i := len(s)
	for i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
		i--
	}
	n, _ := strconv.ParseInt(s[i:], 10, 64)
	return s[:i], n
}
