package histcheck

import (
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Hand-built histories: each checker must find what it claims, and nothing in a clean history.

var base = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// at is a timestamp n milliseconds after base.
func at(n int) time.Time { return base.Add(time.Duration(n) * time.Millisecond) }

// read is a read of one row.
func read(k Key, v string) Op {
	return Op{Kind: OpRead, Method: "ReadRow", Obs: []Obs{{Key: k, Value: v, Found: true}}}
}

// appendOp is a blind DML append.
func appendOp(k Key, e int64) Op {
	return Op{Kind: OpWrite, Method: "DML append", Key: k, Write: WriteAppend, Arg: strconv.FormatInt(e, 10), Elem: e, Visible: true}
}

// setOp is a buffered mutation setting a value; elem is the list element it appends (0: none).
func setOp(k Key, v string, elem int64) Op {
	return Op{Kind: OpWrite, Method: "BufferWrite(Update)", Key: k, Write: WriteSet, Arg: v, Elem: elem}
}

type builder struct{ h *History }

func newBuilder() *builder { return &builder{h: NewHistory()} }

// commit records a committed read-write attempt at commit timestamp at(ts).
func (b *builder) commit(ts int, ops ...Op) *Attempt {
	return b.h.Add(&Attempt{Worker: 1, Kind: ReadWrite, Label: "txn", Ops: ops, Outcome: Committed, CommitTS: at(ts)})
}

func (b *builder) setup(ops ...Op) *Attempt {
	return b.h.Add(&Attempt{Worker: -1, Kind: ReadWrite, Label: "setup", Ops: ops, Outcome: Committed, CommitTS: at(0)})
}

// abort records an aborted read-write attempt.
func (b *builder) abort(ops ...Op) *Attempt {
	return b.h.Add(&Attempt{Worker: 2, Kind: ReadWrite, Label: "txn", Ops: ops, Outcome: Aborted, Err: "aborted"})
}

// readOnly records a read-only transaction at read timestamp at(ts).
func (b *builder) readOnly(ts int, ops ...Op) *Attempt {
	return b.h.Add(&Attempt{Worker: 3, Kind: ReadOnly, Label: "reads", Ops: ops, Outcome: Committed, ReadTS: at(ts), Bound: "strong"})
}

// final records the final read of lists.
func (b *builder) final(ts int, ops ...Op) *Attempt {
	return b.h.Add(&Attempt{Worker: -1, Kind: SingleUse, Label: "final read", Ops: ops, Outcome: Committed, ReadTS: at(ts), Bound: "strong"})
}

func kinds(r *Result) []string {
	var out []string
	for k := range r.KindCounts() {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestCheckListAppend(t *testing.T) {
	l0, l1, l2 := Key("list0"), Key("list1"), Key("list2")
	for _, tc := range []struct {
		name  string
		build func(b *builder)
		want  []string
	}{
		{"clean", func(b *builder) {
			b.commit(10, appendOp(l0, 1), read(l0, "1"), read(l1, ""))
			b.commit(20, read(l0, "1"), setOp(l0, "1 2", 2), appendOp(l1, 3))
			b.abort(read(l0, "1 2"), appendOp(l1, 4), read(l1, "3 4"))
			b.readOnly(15, read(l0, "1"), read(l1, ""))
			b.final(30, read(l0, "1 2"), read(l1, "3"))
		}, nil},
		{"G0", func(b *builder) {
			b.commit(10, appendOp(l0, 1), appendOp(l1, 2))
			b.commit(20, appendOp(l0, 3), appendOp(l1, 4))
			b.final(30, read(l0, "1 3"), read(l1, "4 2"))
		}, []string{KindG0}},
		{"G1c", func(b *builder) {
			b.commit(10, appendOp(l0, 1), read(l1, "2"))
			b.commit(20, appendOp(l1, 2), read(l0, "1"))
			b.final(30, read(l0, "1"), read(l1, "2"))
		}, []string{KindG1c}},
		{"G-single between committed writers", func(b *builder) {
			b.commit(10, read(l0, ""), read(l1, "2"), appendOp(l2, 9))
			b.commit(20, appendOp(l0, 1), appendOp(l1, 2))
			b.final(30, read(l0, "1"), read(l1, "2"), read(l2, "9"))
		}, []string{KindGSingle}},
		{"G-single: read skew in an aborted attempt", func(b *builder) {
			b.commit(20, appendOp(l0, 1), appendOp(l1, 2))
			b.abort(read(l0, ""), read(l1, "2"), appendOp(l2, 9))
			b.final(30, read(l0, "1"), read(l1, "2"), read(l2, ""))
		}, []string{KindGSingle}},
		{"G-single: non-repeatable read in a read-only transaction", func(b *builder) {
			b.commit(20, appendOp(l0, 1))
			b.readOnly(25, read(l0, ""), read(l0, "1"))
			b.final(30, read(l0, "1"))
		}, []string{KindGSingle}},
		{"G2: write skew", func(b *builder) {
			b.commit(10, read(l0, ""), appendOp(l1, 1))
			b.commit(20, read(l1, ""), appendOp(l0, 2))
			b.final(30, read(l0, "2"), read(l1, "1"))
		}, []string{KindG2}},
		{"G1a", func(b *builder) {
			b.abort(appendOp(l0, 5))
			b.commit(20, read(l0, "5"))
			b.final(30, read(l0, "5"))
		}, []string{KindG1a}},
		{"G1b", func(b *builder) {
			b.commit(10, appendOp(l0, 1), appendOp(l0, 2))
			b.readOnly(20, read(l0, "1"))
			b.final(30, read(l0, "1 2"))
		}, []string{KindGSingle, KindG1b}},
		{"incompatible orders and a lost append", func(b *builder) {
			b.commit(1, appendOp(l0, 1))
			b.commit(2, appendOp(l0, 2))
			b.commit(3, appendOp(l0, 3))
			b.readOnly(10, read(l0, "1 2"))
			b.readOnly(11, read(l0, "1 3"))
			b.final(30, read(l0, "1 2"))
		}, []string{KindIncompatible, KindLostAppend}},
		{"duplicate element", func(b *builder) {
			b.commit(1, appendOp(l0, 1))
			b.readOnly(10, read(l0, "1 1"))
			b.final(30, read(l0, "1"))
		}, []string{KindDuplicate}},
		{"own write not visible", func(b *builder) {
			b.commit(1, appendOp(l0, 7), read(l0, ""))
			b.final(30, read(l0, "7"))
		}, []string{KindInternal}},
		{"garbage element", func(b *builder) {
			b.readOnly(10, read(l0, "42"))
			b.final(30, read(l0, "42"))
		}, []string{KindGarbage}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder()
			tc.build(b)
			res := CheckListAppend(b.h)
			if got := kinds(res); !slices.Equal(got, tc.want) {
				t.Errorf("anomaly kinds = %v, want %v; report:\n%s", got, tc.want, res)
			}
		})
	}
}

// TestCycleReport pins the shape of a cycle report.
func TestCycleReport(t *testing.T) {
	b := newBuilder()
	b.commit(20, appendOp("list4", 7), appendOp("list2", 11))
	b.abort(read("list2", "1 5 9 11"), read("list4", "3"))
	b.commit(5, appendOp("list2", 1), appendOp("list2", 5), appendOp("list2", 9), appendOp("list4", 3))
	b.final(30, read("list2", "1 5 9 11"), read("list4", "3 7"))
	res := CheckListAppend(b.h)
	if len(res.Anomalies) != 1 {
		t.Fatalf("got %d anomalies, want 1:\n%s", len(res.Anomalies), res)
	}
	got := res.Anomalies[0].String()
	for _, want := range []string{
		"G-single: T2 (worker 2, read-write txn, attempt 1, aborted: aborted) -rw(list4)-> T1 (worker 1, read-write txn, attempt 1, committed @03:04:05.020000) -wr(list2)-> T2",
		"T2 read list2=[1 5 9 11] list4=[3]",
		"T1 appended [11] to list2, [7] to list4",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report\n%s\ndoes not contain\n%s", got, want)
		}
	}
}

func TestCheckBank(t *testing.T) {
	a0, a1 := Key("acct0"), Key("acct1")
	setup := func(b *builder) { b.setup(setOp(a0, "100", 0), setOp(a1, "100", 0)) }
	for _, tc := range []struct {
		name  string
		build func(b *builder)
		want  []string
	}{
		{"clean", func(b *builder) {
			setup(b)
			b.commit(10, read(a0, "100"), read(a1, "100"), setOp(a0, "50", 0), Op{Kind: OpWrite, Key: a1, Write: WriteAdd, Arg: "50", Visible: true, Method: "DML add"})
			// Its own DML write is not part of what it saw of the database.
			b.abort(read(a0, "50"), Op{Kind: OpWrite, Key: a0, Write: WriteAdd, Arg: "-50", Visible: true}, read(a0, "0"), read(a1, "150"))
			b.readOnly(5, read(a0, "100"), read(a1, "100"))
			b.readOnly(15, read(a0, "50"), read(a1, "150"))
			b.final(20, read(a0, "50"), read(a1, "150"))
		}, nil},
		{"read skew in an aborted attempt", func(b *builder) {
			setup(b)
			b.commit(10, read(a0, "100"), read(a1, "100"), setOp(a0, "50", 0), setOp(a1, "150", 0))
			b.abort(read(a0, "100"), read(a1, "150"))
			b.final(20, read(a0, "50"), read(a1, "150"))
		}, []string{KindBankTotal}},
		{"a committed transfer that loses money", func(b *builder) {
			setup(b)
			b.commit(10, read(a0, "100"), setOp(a0, "50", 0))
			b.final(20, read(a0, "50"), read(a1, "100"))
		}, []string{KindBankTotal}},
		{"negative balance", func(b *builder) {
			setup(b)
			b.commit(10, read(a0, "100"), read(a1, "100"), setOp(a0, "-10", 0), setOp(a1, "210", 0))
			b.final(20, read(a0, "-10"), read(a1, "210"))
		}, []string{KindNegative}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder()
			tc.build(b)
			res := CheckBank(b.h, 2, 200)
			if got := kinds(res); !slices.Equal(got, tc.want) {
				t.Errorf("anomaly kinds = %v, want %v; report:\n%s", got, tc.want, res)
			}
			// The model replay agrees with every clean history too.
			if tc.want == nil {
				if r := CheckCommitOrder(b.h); len(r.Anomalies) > 0 {
					t.Errorf("commit order:\n%s", r)
				}
			}
		})
	}
}

func TestCheckCommitOrder(t *testing.T) {
	r0 := Key("reg0")
	history := func(b *builder) {
		b.setup(setOp(r0, "0", 0))
		b.commit(10, setOp(r0, "1", 0))
		b.commit(20, read(r0, "1"), setOp(r0, "2", 0))
	}
	stale := func(ts int, v string) func(b *builder) {
		return func(b *builder) {
			history(b)
			b.h.Add(&Attempt{Worker: 4, Kind: Stale, Label: "stale", Bound: "exact staleness", Ops: []Op{read(r0, v)}, Outcome: Committed, ReadTS: at(ts)})
		}
	}
	for _, tc := range []struct {
		name  string
		build func(b *builder)
		want  []string
	}{
		{"clean", func(b *builder) {
			history(b)
			b.readOnly(5, read(r0, "0"))
			b.readOnly(10, read(r0, "1")) // a read at a commit's timestamp sees it
			b.readOnly(19, read(r0, "1"))
			b.readOnly(20, read(r0, "2"))
			b.commit(30, read(r0, "2"), Op{Kind: OpWrite, Key: r0, Write: WriteSet, Arg: "3", Visible: true}, read(r0, "3"))
			b.h.Add(&Attempt{Worker: 4, Kind: Stale, Label: "stale", Outcome: Failed, Err: `spanner: code = "FailedPrecondition", desc = "Read timestamp is older than the history"`})
		}, nil},
		{"stale read sees a later commit", stale(15, "2"), []string{KindSnapshot}},
		{"stale read misses a commit at its timestamp", stale(20, "1"), []string{KindSnapshot}},
		{"read-only transaction that is not a snapshot", func(b *builder) {
			history(b)
			b.readOnly(15, read(r0, "1"), read(r0, "2"))
		}, []string{KindSnapshot}},
		{"committed read that replay does not give", func(b *builder) {
			history(b)
			b.commit(30, read(r0, "1"))
		}, []string{KindCommitOrder}},
		{"own DML write not seen", func(b *builder) {
			history(b)
			b.commit(30, Op{Kind: OpWrite, Key: r0, Write: WriteSet, Arg: "3", Visible: true}, read(r0, "2"))
		}, []string{KindCommitOrder}},
		{"duplicate commit timestamp", func(b *builder) {
			history(b)
			b.commit(20, setOp("reg1", "5", 0))
		}, []string{KindTimestamps}},
		{"commit timestamps against real time", func(b *builder) {
			history(b)
			a := b.commit(40, setOp("reg1", "5", 0))
			a.Start, a.End = base.Add(time.Second), base.Add(2*time.Second)
			c := b.commit(35, setOp("reg2", "5", 0))
			c.Start, c.End = base.Add(3*time.Second), base.Add(4*time.Second)
		}, []string{KindRealTime}},
		{"read timestamp bound not honoured", func(b *builder) {
			history(b)
			b.h.Add(&Attempt{Worker: 4, Kind: Stale, Label: "stale", Bound: "read timestamp", Ops: []Op{read(r0, "1")}, Outcome: Committed, ReadTS: at(11), ExactTS: at(12)})
		}, []string{KindBadTimestamps}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder()
			tc.build(b)
			res := CheckCommitOrder(b.h)
			if got := kinds(res); !slices.Equal(got, tc.want) {
				t.Errorf("anomaly kinds = %v, want %v; report:\n%s", got, tc.want, res)
			}
		})
	}
}

func TestCheckRegisters(t *testing.T) {
	ms := func(n int) time.Time { return base.Add(time.Duration(n) * time.Millisecond) }
	write := func(b *builder, v string, from, to int) {
		b.h.Add(&Attempt{Worker: 0, Kind: ReadWrite, Label: "write reg0", Ops: []Op{setOp("reg0", v, 0)}, Outcome: Committed, CommitTS: ms(to), Start: ms(from), End: ms(to)})
	}
	readOp := func(b *builder, v string, from, to int) {
		b.h.Add(&Attempt{Worker: 1, Kind: SingleUse, Label: "read reg0", Ops: []Op{read("reg0", v)}, Outcome: Committed, ReadTS: ms(to), Start: ms(from), End: ms(to), Bound: "strong"})
	}
	cas := func(b *builder, from, to string, start, end int) {
		b.h.Add(&Attempt{Worker: 2, Kind: ReadWrite, Label: "cas reg0", Ops: []Op{read("reg0", from), setOp("reg0", to, 0)}, Outcome: Committed, CommitTS: ms(end), Start: ms(start), End: ms(end)})
	}
	for _, tc := range []struct {
		name  string
		build func(b *builder)
		want  []string
	}{
		{"linearizable", func(b *builder) {
			readOp(b, "0", 0, 5)
			write(b, "1", 10, 20)
			readOp(b, "0", 12, 14) // concurrent with the write
			readOp(b, "1", 15, 25)
			cas(b, "1", "2", 30, 40)
			readOp(b, "2", 50, 60)
			// An unknown outcome may have happened at any time after its call.
			b.h.Add(&Attempt{Worker: 3, Kind: ReadWrite, Label: "write reg0", Ops: []Op{setOp("reg0", "9", 0)}, Outcome: Unknown, Start: ms(55), End: ms(58)})
			readOp(b, "9", 70, 80)
		}, nil},
		{"stale read after a write returned", func(b *builder) {
			write(b, "1", 0, 10)
			readOp(b, "0", 20, 30)
		}, []string{KindLinearizable}},
		{"compare-and-set from a value that was overwritten", func(b *builder) {
			write(b, "1", 0, 10)
			write(b, "2", 20, 30)
			cas(b, "1", "3", 40, 50)
		}, []string{KindLinearizable}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder()
			tc.build(b)
			dir := t.TempDir()
			res := CheckRegisters(b.h, dir)
			if got := kinds(res); !slices.Equal(got, tc.want) {
				t.Errorf("anomaly kinds = %v, want %v; report:\n%s", got, tc.want, res)
			}
			files, _ := os.ReadDir(dir)
			if len(tc.want) > 0 && (len(files) != 1 || !strings.Contains(res.Anomalies[0].Summary, files[0].Name())) {
				t.Errorf("visualization files %v, report %s", files, res)
			}
		})
	}
}

// TestCheckClean runs the bank workload's checkers (bank and commit order) on a clean history.
func TestCheckClean(t *testing.T) {
	b := newBuilder()
	b.setup(setOp("acct0", "100", 0), setOp("acct1", "100", 0))
	b.commit(10, read("acct0", "100"), Op{Kind: OpRead, Method: "Read(AllKeys)", Obs: []Obs{{Key: "acct0", Value: "100", Found: true}, {Key: "acct1", Value: "100", Found: true}}},
		setOp("acct0", "40", 0), setOp("acct1", "160", 0))
	b.readOnly(12, read("acct1", "160"), read("acct0", "40"))
	b.final(20, read("acct0", "40"), read("acct1", "160"))
	res := Check(Bank, b.h, Params{Keys: 2})
	if res.Anomalous() {
		t.Errorf("%s", res)
	}
	if res.Committed != 1 || res.ReadOnly != 1 || res.Checks["bank: attempts that read every account"] != 3 {
		t.Errorf("counts: %s", res.Header())
	}
}
