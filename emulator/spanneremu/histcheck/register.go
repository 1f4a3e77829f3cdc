package histcheck

import (
	"context"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/anishathalye/porcupine"
)

// registers is the register workload: single-key integer registers, read, written with unique
// values and compare-and-set, checked for linearizability with porcupine.
type registers struct{ tb *table }

// Register operation labels (the first word of the attempt's label; the second is the key).
const (
	regRead  = "read"
	regWrite = "write"
	regCAS   = "cas"
)

func (g *registers) step(ctx context.Context, w *worker) {
	id := int64(w.rng.IntN(g.tb.n))
	k := g.tb.key(id)
	switch r := w.rng.IntN(100); {
	case r < 25:
		w.single(ctx, regRead+" "+string(k), strongBound, func(ctx context.Context, rd reader, c *attemptCtx) error {
			op, err := c.do(g.tb.readOne(ctx, rd, w.rng, id))
			if v, ok := op.value(k); ok {
				w.seen[k] = v
			}
			return err
		})
	case r < 40:
		w.readWrite(ctx, regRead+" "+string(k), func(ctx context.Context, tx *spanner.ReadWriteTransaction, c *attemptCtx) error {
			op, err := c.do(g.tb.readOne(ctx, tx, w.rng, id))
			if v, ok := op.value(k); ok {
				w.seen[k] = v
			}
			return err
		})
	case r < 70:
		v := strconv.FormatInt(w.elems.Add(1), 10)
		w.readWrite(ctx, regWrite+" "+string(k), func(ctx context.Context, tx *spanner.ReadWriteTransaction, c *attemptCtx) error {
			_, err := c.do(g.tb.set(ctx, tx, writeMethod(w.rng.IntN(int(nSetMethods))), id, v))
			return err
		})
	default:
		// Compare-and-set from the value this worker last saw: it succeeds when nobody wrote
		// the register since.
		expect := w.seen[k]
		v := strconv.FormatInt(w.elems.Add(1), 10)
		w.readWrite(ctx, regCAS+" "+string(k), func(ctx context.Context, tx *spanner.ReadWriteTransaction, c *attemptCtx) error {
			op, err := c.do(g.tb.readOne(ctx, tx, w.rng, id))
			if err != nil {
				return err
			}
			cur, _ := op.value(k)
			w.seen[k] = cur
			if cur != expect {
				return nil
			}
			_, err = c.do(g.tb.set(ctx, tx, writeMethod(w.rng.IntN(int(nSetMethods))), id, v))
			if err == nil {
				w.seen[k] = v
			}
			return err
		})
	}
}

// regInput is a register operation as porcupine sees it.
type regInput struct {
	key   Key
	read  bool   // the operation read the register (read, or the read of a compare-and-set)
	write bool   // the operation wrote it
	value string // what it wrote
	label string
	txn   int
	names string // the attempts, for reports
}

// regOutput is what a read saw.
type regOutput struct {
	value string
}

var registerModel = porcupine.Model{
	Init: func() any { return "0" },
	Step: func(state, input, output any) (bool, any) {
		in := input.(regInput)
		st := state.(string)
		if in.read && output.(regOutput).value != st {
			return false, st
		}
		if in.write {
			return true, in.value
		}
		return true, st
	},
	Equal: func(a, b any) bool { return a.(string) == b.(string) },
	DescribeOperation: func(input, output any) string {
		in := input.(regInput)
		switch {
		case in.read && in.write:
			return fmt.Sprintf("cas(%s: %s→%s) T%d", in.key, output.(regOutput).value, in.value, in.txn)
		case in.write:
			return fmt.Sprintf("write(%s, %s) T%d", in.key, in.value, in.txn)
		}
		return fmt.Sprintf("read(%s) → %s T%d", in.key, output.(regOutput).value, in.txn)
	},
	DescribeState: func(state any) string { return state.(string) },
}

// registerOps turns a register history into porcupine operations, one per logical
// transaction, from its first attempt's start to its last attempt's end:
//   - a committed read (single-use, or a read-write transaction that only read) reads the
//     value it saw;
//   - a committed write writes; a committed compare-and-set that wrote reads the expected
//     value and writes the new one atomically; one that did not write is a read;
//   - a transaction of unknown outcome that wrote may have written at any time after its call
//     (its return is at infinity); one that only read, and every transaction that definitely
//     did not commit, is left out.
func registerOps(h *History) map[Key][]porcupine.Operation {
	byTxn := map[int][]*Attempt{}
	var order []int
	for _, a := range h.Attempts() {
		if a.Worker < 0 {
			continue
		}
		if _, ok := byTxn[a.Txn]; !ok {
			order = append(order, a.Txn)
		}
		byTxn[a.Txn] = append(byTxn[a.Txn], a)
	}
	out := map[Key][]porcupine.Operation{}
	for _, txn := range order {
		as := byTxn[txn]
		first, last := as[0], as[len(as)-1]
		f := strings.Fields(last.Label)
		if len(f) != 2 {
			continue
		}
		k := Key(f[1])
		in := regInput{key: k, label: f[0], txn: last.ID}
		var outp regOutput
		for _, op := range last.Ops {
			if op.Err != "" {
				continue
			}
			if op.Kind == OpRead && !in.read {
				if v, ok := op.value(k); ok {
					in.read, outp.value = true, v
				}
			}
			if op.Kind == OpWrite && op.Key == k {
				in.write, in.value = true, op.Arg
			}
		}
		ret := last.End.UnixNano()
		switch last.Outcome {
		case Committed:
		case Unknown:
			if !in.write {
				continue
			}
			in.read = false
			ret = math.MaxInt64
		default:
			continue
		}
		if !in.read && !in.write {
			continue
		}
		names := make([]string, len(as))
		for i, a := range as {
			names[i] = a.Name()
		}
		in.names = strings.Join(names, ", ")
		out[k] = append(out[k], porcupine.Operation{ClientId: last.Worker, Input: in, Output: outp, Call: first.Start.UnixNano(), Return: ret})
	}
	return out
}

// CheckRegisters checks every register's history for linearizability with porcupine, one key
// at a time (the registers are independent). A history porcupine cannot decide in time is
// noted, not reported. For a history that is not linearizable it writes porcupine's HTML
// visualization to a file in dir ("": the system's temporary directory) and names it.
func CheckRegisters(h *History, dir string) *Result {
	res := newResult(Register)
	byKey := registerOps(h)
	keys := make([]Key, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sortKeys(keys)
	for _, k := range keys {
		ops := byKey[k]
		res.Checks["linearizability: operations"] += len(ops)
		res.Checks["linearizability: registers"]++
		verdict, info := porcupine.CheckOperationsVerbose(registerModel, ops, 20*time.Second)
		switch verdict {
		case porcupine.Ok:
			continue
		case porcupine.Unknown:
			res.Notes["linearizability: registers undecided (porcupine timed out)"]++
			continue
		}
		a := Anomaly{Kind: KindLinearizable, Summary: fmt.Sprintf("the history of register %s (%d operations) is not linearizable", k, len(ops))}
		if path, err := visualize(info, dir, k); err != nil {
			a.Summary += fmt.Sprintf(" (visualization failed: %v)", err)
		} else {
			a.Summary += "; visualization: " + path
		}
		a.Details = explainNonLinearizable(ops, info)
		res.add(a)
	}
	return res
}

func visualize(info porcupine.LinearizationInfo, dir string, k Key) (string, error) {
	f, err := os.CreateTemp(dir, "histcheck-"+string(k)+"-*.html")
	if err != nil {
		return "", err
	}
	path := f.Name()
	err = porcupine.Visualize(registerModel, info, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return path, err
}

// explainNonLinearizable describes the end of the longest linearizable prefix and the
// operations that could not follow it.
func explainNonLinearizable(ops []porcupine.Operation, info porcupine.LinearizationInfo) []string {
	partials := info.PartialLinearizations()
	var best []int
	for _, part := range partials {
		for _, p := range part {
			if len(p) > len(best) {
				best = p
			}
		}
	}
	in := map[int]bool{}
	for _, i := range best {
		in[i] = true
	}
	describe := func(i int) string {
		op := ops[i]
		r := "∞"
		if op.Return != math.MaxInt64 {
			r = time.Unix(0, op.Return).UTC().Format("15:04:05.000000")
		}
		return fmt.Sprintf("%s [%s – %s] %s", registerModel.DescribeOperation(op.Input, op.Output),
			time.Unix(0, op.Call).UTC().Format("15:04:05.000000"), r, op.Input.(regInput).names)
	}
	var lines []string
	from := max(0, len(best)-3)
	if len(best) > 0 {
		lines = append(lines, fmt.Sprintf("longest linearizable prefix: %d operations, ending with:", len(best)))
	}
	var state any = "0"
	for i, idx := range best {
		_, state = registerModel.Step(state, ops[idx].Input, ops[idx].Output)
		if i >= from {
			lines = append(lines, "  "+describe(idx))
		}
	}
	lines = append(lines, fmt.Sprintf("register value there: %s; none of these can come next:", state))
	// The operations not linearized that were called first.
	var rest []int
	for i := range ops {
		if !in[i] {
			rest = append(rest, i)
		}
	}
	sort.Slice(rest, func(a, b int) bool { return ops[rest[a]].Call < ops[rest[b]].Call })
	for i, idx := range rest {
		if i >= 3 {
			break
		}
		lines = append(lines, "  "+describe(idx))
	}
	return lines
}
