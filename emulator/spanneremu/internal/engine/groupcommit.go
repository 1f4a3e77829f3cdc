package engine

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/catalog"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

// Group commit: a commit that finds the write lock held waits in the database's commit queue,
// and the transaction holding the lock for its own commit takes the commits queued behind it
// into its SQLite transaction before committing it, each as if it had taken the lock itself
// right after the one before: validated against the commits so far, the group's included
// (pendingConflict), its optimistic DML replayed, its mutations applied under a savepoint of its
// own, with a commit timestamp of its own, later than the one before. A member that fails
// (validation, a constraint) is undone alone and fails alone; one SQLite COMMIT then makes them
// all visible at once, and each is recorded in order with its timestamp, as a sequence of
// commits would be.
//
// Why: at load the lock's waiters are what a delivery waits for, not the work under the lock (a
// holder whose thread the operating system sets aside keeps it for as long, and every waiter
// with it). Each commit that takes the lock in turn needs its goroutine woken and scheduled in
// turn; a group is one holder's work, one handoff, and one write of the pages its members share
// (a table's last leaf, an index's) to the write-ahead log instead of one each.
//
// Only without version history (Options.NoHistory): a kept version is a SQLite read snapshot
// taken before a commit, and there is none between the members of a group, whose states become
// visible together, so an exact-timestamp read between two members' timestamps could not be
// served. Read timestamps handed out meanwhile are before the group's first timestamp
// (readTimestampLocked), as for one commit in flight.

// maxGroup bounds the commits one holder takes in (its own client waits for all of them).
const maxGroup = 16

// errJoined is what lockValidated returns to a commit that a lock holder took into its group:
// the commit is done, its outcome in its queuedCommit.
var errJoined = errors.New("engine: commit joined a group")

// commitQueue holds the commits waiting for the write lock that a holder may take in.
type commitQueue struct {
	mu      sync.Mutex
	waiting []*queuedCommit
}

// queuedCommit is a commit waiting for the write lock. Its transaction's goroutine waits (holding
// t.mu) while a holder that claimed it works on the transaction; done is closed once it is
// committed or failed, ts and err then say which.
type queuedCommit struct {
	t        *Txn
	muts     []*sppb.Mutation
	ws       *writeSet
	wsSchema *catalog.Schema
	claimed  bool // by a holder, guarded by commitQueue.mu
	done     chan struct{}
	ts       time.Time
	err      error
}

func (q *commitQueue) add(c *queuedCommit) {
	q.mu.Lock()
	q.waiting = append(q.waiting, c)
	q.mu.Unlock()
}

// leave takes c out of the queue, false if a holder claimed it already (it must then wait for
// c.done).
func (q *commitQueue) leave(c *queuedCommit) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if c.claimed {
		return false
	}
	for i, w := range q.waiting {
		if w == c {
			q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
			break
		}
	}
	return true
}

// claim takes up to n of the waiting commits, oldest first.
func (q *commitQueue) claim(n int) []*queuedCommit {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiting) < n {
		n = len(q.waiting)
	}
	out := append([]*queuedCommit(nil), q.waiting[:n]...)
	q.waiting = append(q.waiting[:0], q.waiting[n:]...)
	for _, c := range out {
		c.claimed = true
	}
	return out
}

// queued reports how many commits wait in the queue (for tests).
func (q *commitQueue) queued() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiting)
}

// commitGroup commits the queued commits it claims into the writer's open SQLite transaction,
// after the holder's own writes (in pending). It returns the members that are in it; those
// that failed have their error and their done closed. The caller holds the lock.
func (db *DB) commitGroup(schema *catalog.Schema, pending []*writeSet) []*queuedCommit {
	if !db.e.opts.NoHistory {
		return nil
	}
	var in []*queuedCommit
	for _, m := range db.queue.claim(maxGroup - 1) {
		if err := db.commitMember(m, schema, pending); err != nil {
			m.err = err
			close(m.done)
			continue
		}
		in = append(in, m)
		pending = append(pending, m.ws)
	}
	return in
}

// commitMember does for a queued commit what Commit does under the lock, inside the group's
// SQLite transaction: it validates the transaction's reads against the commits so far and the
// group's (pending), replays its optimistic DML and applies its mutations with its own commit
// timestamp, all under a savepoint that undoes it alone if it fails. A member that fails is
// aborted or rolled back, as a lone commit would be; one whose check could not run (an internal
// error re-running a query) stays active, as a lone commit's does.
func (db *DB) commitMember(m *queuedCommit, schema *catalog.Schema, pending []*writeSet) error {
	// Not the member's context: a statement interrupted by a context that ends undoes the whole
	// SQLite transaction, the holder's and the other members' work with it. The work is
	// short, and the client whose request ended learns nothing either way.
	t, ctx, w := m.t, context.Background(), db.writer
	if err := t.checkReadsIn(ctx, true, pending); err != nil {
		return err
	}
	t.validated()
	m.ts = db.nextCommitTimestamp()
	stamp := spantype.FormatTimestamp(m.ts)
	if _, err := w.ExecContext(ctx, "SAVEPOINT member"); err != nil {
		t.state = rolledBack
		t.finish()
		return internalf("savepoint: %v", err)
	}
	undo := func() {
		w.ExecContext(context.Background(), "ROLLBACK TO member")
		w.ExecContext(context.Background(), "RELEASE member")
	}
	if err := t.replay(ctx, stamp, undo); err != nil {
		return err
	}
	t.dml, t.dmlTables, t.replayPending = nil, nil, nil
	err := applyMutations(ctx, w, &db.plans, schema, m.muts, m.ts)
	if err == nil {
		err = t.fixPendingTimestamps(ctx, m.ts)
	}
	if err == nil {
		if _, err = w.ExecContext(ctx, "RELEASE member"); err != nil {
			err = mapError(err, nil)
		}
	}
	if err != nil {
		undo()
		t.state = rolledBack
		t.finish()
		return err
	}
	if schema != m.wsSchema { // a schema change while it waited
		m.ws = t.commitWrites(schema, m.muts)
	}
	return nil
}

// recordGroup publishes the holder's commit (ts, ws) and its group's, in order, each as a commit
// of its own, once their SQLite COMMIT is done. The caller holds snapMu for writing.
func (db *DB) recordGroup(ts time.Time, ws *writeSet, group []*queuedCommit) {
	record := func(ts time.Time, ws *writeSet) {
		db.recordCommit(ts, ws)
		db.e.stats.commits.Add(1)
		db.commits.Add(1)
		db.rowsWritten.Add(int64(len(ws.keys)))
	}
	record(ts, ws)
	for _, m := range group {
		record(m.ts, m.ws)
	}
	db.e.stats.groupedCommits.Add(int64(len(group)))
	db.checkpoints.committed(1 + len(group))
}

// endGroup ends the group's transactions, committed, or failed with err (their SQLite COMMIT
// failed), and lets their clients' requests return.
func (db *DB) endGroup(group []*queuedCommit, err error) {
	for _, m := range group {
		if err != nil {
			m.ts, m.err = time.Time{}, err
			m.t.state = rolledBack
		} else {
			m.t.state = committed
		}
		m.t.finish()
		close(m.done)
	}
}

// pendingConflict returns the first footprint that one of the write sets (commits not recorded
// yet, all after every read of the transaction) wrote what it covers, as occState.stale does for
// recorded ones; nil if none.
func pendingConflict(fps []footprint, pending []*writeSet) *footprint {
	for i := range fps {
		f := &fps[i]
		for _, ws := range pending {
			if ws.overwrites(f) {
				return f
			}
		}
	}
	return nil
}

// overwrites reports whether the write set wrote what footprint f covers.
func (w *writeSet) overwrites(f *footprint) bool {
	if w.tables[f.table] {
		return true
	}
	if f.key != "" {
		_, ok := w.keys[f.key]
		return ok
	}
	for _, wk := range w.keys {
		if f.covers(wk) {
			return true
		}
	}
	return false
}

// writesTable reports whether the write set wrote a row of table (upper-cased) or all of it.
func (w *writeSet) writesTable(table string) bool {
	if w.tables[table] {
		return true
	}
	for _, wk := range w.keys {
		if wk.table == table {
			return true
		}
	}
	return false
}

// pendingStale adds to stale (indexes of qs) the queries that read a table one of the pending
// write sets wrote, as occState.staleQueries does for recorded commits.
func pendingStale(qs []queryRead, stale []int, pending []*writeSet) []int {
	if len(pending) == 0 {
		return stale
	}
	for i, q := range qs {
		if slices.Contains(stale, i) {
			continue
		}
	written:
		for _, tb := range q.tables {
			for _, ws := range pending {
				if ws.writesTable(tb) {
					stale = append(stale, i)
					break written
				}
			}
		}
	}
	return stale
}

// commitWrites is what committing muts writes, under schema: the transaction's DML's writes and the
// mutations'.
func (t *Txn) commitWrites(schema *catalog.Schema, muts []*sppb.Mutation) *writeSet {
	ws := newWriteSet()
	if t.writes != nil {
		ws = t.writes
	}
	ws.addMutations(schema, muts, &t.db.plans)
	return ws
}
