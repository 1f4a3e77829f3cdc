package histcheck

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Key names one row of a workload table: the table's prefix and the row id, e.g. "acct3",
// "list4", "reg0".
type Key string

// TxnKind is what kind of transaction an attempt ran in.
type TxnKind int

// Transaction kinds.
const (
	// ReadWrite is one attempt (one run of the closure) of Client.ReadWriteTransaction.
	ReadWrite TxnKind = iota
	// ReadOnly is a multi-use strong read-only transaction (Client.ReadOnlyTransaction).
	ReadOnly
	// SingleUse is a strong single-use read (Client.Single).
	SingleUse
	// Stale is a read-only or single-use transaction with a non-strong timestamp bound
	// (ExactStaleness, ReadTimestamp, MaxStaleness, MinReadTimestamp).
	Stale
)

func (k TxnKind) String() string {
	switch k {
	case ReadWrite:
		return "read-write"
	case ReadOnly:
		return "read-only"
	case SingleUse:
		return "single-use"
	case Stale:
		return "stale"
	}
	return fmt.Sprintf("TxnKind(%d)", int(k))
}

// Outcome is how an attempt ended.
type Outcome int

// Outcomes.
const (
	// Pending: still running (never seen in a finished history).
	Pending Outcome = iota
	// Committed: a read-write attempt that committed (CommitTS is set), or a read-only
	// transaction whose reads all succeeded.
	Committed
	// Aborted: the attempt was ABORTED (the client retried it, or gave up) and did not commit.
	Aborted
	// Failed: the attempt definitely did not commit: its closure returned an error (the
	// client rolled it back), or the commit was refused; for read-only transactions, a read
	// failed.
	Failed
	// Unknown: the commit may or may not have happened (deadline, cancellation, transport
	// error during Commit).
	Unknown
)

func (o Outcome) String() string {
	switch o {
	case Pending:
		return "pending"
	case Committed:
		return "committed"
	case Aborted:
		return "aborted"
	case Failed:
		return "failed"
	case Unknown:
		return "unknown outcome"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// OpKind tells reads from writes.
type OpKind int

// Operation kinds.
const (
	OpRead OpKind = iota
	OpWrite
)

// WriteKind is what a write does to its row's value.
type WriteKind int

// Write kinds.
const (
	// WriteSet sets the value to Arg.
	WriteSet WriteKind = iota
	// WriteAdd adds the integer Arg to an integer value (DML "SET Val = Val + @d").
	WriteAdd
	// WriteAppend appends the element Arg to a list value (DML "SET Val = CONCAT(Val, ...)").
	WriteAppend
)

// Obs is one row a read returned, or (Found false) a row the read covered and did not return.
type Obs struct {
	Key   Key
	Value string // canonical: an integer, or a list as space-separated integers
	Found bool
}

// Op is one operation of an attempt, in the order the attempt issued it.
type Op struct {
	Kind OpKind
	// Method is how the operation was issued: "ReadRow", "Read(KeyRange [1,3))",
	// "ReadUsingIndex(ListsByGrp)", "Query(WHERE Grp = @g)", "DML UPDATE ... = @v",
	// "BufferWrite(Update)", ...
	Method string
	// Obs is what a read returned: one entry for every row the read covers (its keys, its
	// range, its index key or its WHERE over the workload's rows).
	Obs []Obs
	// Write: the row, the kind of change and its argument.
	Key   Key
	Write WriteKind
	Arg   string
	// Elem is the element a list-append write appends (for a read-modify-write WriteSet, the
	// element its new value adds); 0 for other writes.
	Elem int64
	// Visible marks a write that the attempt's later reads see (DML). Buffered mutations are
	// applied at commit, after the DML, and later reads of the same attempt do not see them.
	Visible bool
	// Err is the operation's error; a failed read's Obs are empty and not checked, a failed
	// write did not happen.
	Err string
	err error // the error itself, for the closure to return
}

// Attempt is one attempt of a transaction: one run of a ReadWriteTransaction closure, or one
// read-only / single-use / stale transaction.
type Attempt struct {
	ID     int // T-number, unique in the history
	Txn    int // the logical transaction (one ReadWriteTransaction call) the attempt belongs to
	Worker int // -1 for the checker's own setup and final reads
	Number int // 1-based attempt number within Txn
	Kind   TxnKind
	Label  string // the workload's name for the transaction's shape: "transfer", "scan", ...
	Ops    []Op

	Outcome  Outcome
	Err      string
	CommitTS time.Time // committed read-write attempts
	ReadTS   time.Time // read-only transactions: ReadOnlyTransaction.Timestamp()
	Bound    string    // the timestamp bound of a read-only transaction ("strong", "exact staleness 3ms", ...)
	// ExactTS is the timestamp an exact bound asked for (ReadTimestamp, or the ExactStaleness
	// read's reported timestamp); zero for strong and bounded reads.
	ExactTS time.Time

	Start, End time.Time // wall clock of the attempt (for read-write: closure start to the call's return for the last attempt)
}

// Writes reports whether the attempt issued a successful write.
func (a *Attempt) Writes() bool {
	for _, op := range a.Ops {
		if op.Kind == OpWrite && op.Err == "" {
			return true
		}
	}
	return false
}

// Name is the attempt's short reference in reports: "T12 (worker 3, attempt 1, committed @...)".
func (a *Attempt) Name() string {
	var b strings.Builder
	fmt.Fprintf(&b, "T%d (", a.ID)
	if a.Worker < 0 {
		b.WriteString(a.Label)
	} else {
		fmt.Fprintf(&b, "worker %d, %s %s", a.Worker, a.Kind, a.Label)
	}
	if a.Kind == ReadWrite {
		fmt.Fprintf(&b, ", attempt %d", a.Number)
	}
	b.WriteString(", ")
	switch {
	case a.Kind == ReadWrite && a.Outcome == Committed:
		fmt.Fprintf(&b, "committed @%s", fmtTS(a.CommitTS))
	case a.Kind != ReadWrite && !a.ReadTS.IsZero():
		fmt.Fprintf(&b, "%s, read @%s", a.Bound, fmtTS(a.ReadTS))
	default:
		b.WriteString(a.Outcome.String())
		if a.Err != "" {
			fmt.Fprintf(&b, ": %s", firstN(a.Err, 100))
		}
	}
	b.WriteString(")")
	return b.String()
}

// Describe lists the attempt's operations: "read list2=[1 5 9] (ReadRow); append 7 to list4 (DML ...)".
func (a *Attempt) Describe() string {
	parts := make([]string, 0, len(a.Ops))
	for _, op := range a.Ops {
		parts = append(parts, op.String())
	}
	if len(parts) == 0 {
		return "no operations"
	}
	return strings.Join(parts, "; ")
}

func (op Op) String() string {
	var s string
	if op.Kind == OpRead {
		vals := make([]string, 0, len(op.Obs))
		for _, o := range op.Obs {
			vals = append(vals, o.String())
		}
		s = "read " + strings.Join(vals, " ")
	} else {
		switch op.Write {
		case WriteSet:
			s = fmt.Sprintf("set %s=%s", op.Key, showValue(op.Key, op.Arg))
		case WriteAdd:
			s = fmt.Sprintf("add %s to %s", op.Arg, op.Key)
		case WriteAppend:
			s = fmt.Sprintf("append %s to %s", op.Arg, op.Key)
		}
		if op.Elem != 0 && op.Write == WriteSet {
			s += fmt.Sprintf(" (appends %d)", op.Elem)
		}
	}
	s += " [" + op.Method + "]"
	if op.Err != "" {
		s += " failed: " + firstN(op.Err, 120)
	}
	return s
}

func (o Obs) String() string {
	if !o.Found {
		return string(o.Key) + "=<no row>"
	}
	return string(o.Key) + "=" + showValue(o.Key, o.Value)
}

// showValue renders a list value as [1 5 9] and anything else as is.
func showValue(k Key, v string) string {
	if strings.HasPrefix(string(k), listPrefix) {
		return "[" + shortList(parseList(v)) + "]"
	}
	return v
}

func fmtTS(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("15:04:05.000000")
}

func firstN(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// History is every attempt of a run, safe for concurrent recording.
type History struct {
	mu       sync.Mutex
	attempts []*Attempt
	nextTxn  int
	recent   []time.Time // the newest commit timestamps, for ReadTimestamp bounds
}

// NewHistory returns an empty history.
func NewHistory() *History { return &History{} }

// Attempts returns the recorded attempts ordered by id.
func (h *History) Attempts() []*Attempt {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := append([]*Attempt(nil), h.attempts...)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Add records a finished attempt built by hand (tests) and gives it the next id if it has none.
func (h *History) Add(a *Attempt) *Attempt {
	h.mu.Lock()
	defer h.mu.Unlock()
	if a.ID == 0 {
		a.ID = len(h.attempts) + 1
	}
	if a.Txn == 0 {
		h.nextTxn++
		a.Txn = h.nextTxn
	}
	if a.Number == 0 {
		a.Number = 1
	}
	h.attempts = append(h.attempts, a)
	return a
}

// newTxn returns a fresh logical transaction number.
func (h *History) newTxn() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nextTxn++
	return h.nextTxn
}

// begin records a new attempt in progress.
func (h *History) begin(txn, worker, number int, kind TxnKind, label string) *Attempt {
	h.mu.Lock()
	defer h.mu.Unlock()
	a := &Attempt{ID: len(h.attempts) + 1, Txn: txn, Worker: worker, Number: number, Kind: kind, Label: label, Start: time.Now()}
	h.attempts = append(h.attempts, a)
	return a
}

// noteCommit remembers a commit timestamp for later ReadTimestamp bounds.
func (h *History) noteCommit(ts time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recent = append(h.recent, ts)
	if len(h.recent) > 64 {
		h.recent = append(h.recent[:0:0], h.recent[len(h.recent)-32:]...)
	}
}

// recentCommit returns one of the newest commit timestamps (pick in [0,1) chooses which).
func (h *History) recentCommit(pick float64) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.recent)
	if n == 0 {
		return time.Time{}, false
	}
	k := min(n, 16)
	return h.recent[n-1-int(pick*float64(k))], true
}
