package engine

import (
	"context"
	"crypto/rand"
	"database/sql"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
	"github.com/cloudspannerecosystem/memefish/ast"
	"google.golang.org/grpc/codes"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/catalog"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

type txnState int

const (
	active txnState = iota
	committed
	rolledBack
	aborted
)

// Txn is a transaction. Its operations are serialized by mu.
type Txn struct {
	db   *DB
	id   []byte
	mode Mode

	// begun is when the transaction began: its age, for the commits that wait for older
	// readers (readers.go). ended is closed when it ends.
	begun time.Time
	ended chan struct{}
	// wound is closed when an older transaction wants an exclusive lock this one holds
	// (locks.go): the transaction is aborted at its next check, or at once if it is idle.
	wound     chan struct{}
	woundOnce sync.Once
	woundedOn string // the upper-cased table of the key it was wounded for (set before wound is closed)

	mu          sync.Mutex
	state       txnState
	abortReason string
	lastUsed    atomic.Int64 // unix nanos of the last request
	done        atomic.Bool

	// Read-write: hasLock is true from the first SQL query (or the commit) until the end;
	// reads and DML before that are optimistic (see occ.go).
	hasLock bool
	// lockedAt is when the transaction took the write lock (lockValidated).
	lockedAt time.Time
	// pending lists the rows written with PENDING_COMMIT_TIMESTAMP() by DML that ran under the
	// lock, fixed at commit; replayPending those written by the optimistic DML (dml), which the
	// commit's replay writes with the commit's timestamp (loggedDML.stamps) instead. When the
	// transaction takes the lock before its commit, the replay writes the pending value, and
	// replayPending joins pending.
	pending       []pendingTimestamp
	replayPending []pendingTimestamp
	// footprints are the optimistic reads made before the lock was taken (see occ.go), changed
	// only under DB.mu (addFootprints, validated), where readers.go reads them;
	// writes collects what DML wrote.
	footprints []footprint
	queries    []queryRead
	writes     *writeSet
	// oldestSeq is 1 + the commit sequence number of the transaction's oldest optimistic read
	// (0: none), noted under DB.mu when the read starts, so that the janitor, which reads it
	// without t.mu, never forgets writes a read in progress must still be checked against.
	oldestSeq atomic.Uint64
	// dml lists the DML statements run optimistically (see occ.go), replayed when the
	// transaction takes the lock; dmlTables are the tables they may have changed.
	dml       []loggedDML
	dmlTables map[string]bool
	// exclusive are the keys the transaction holds exclusive locks on (locks.go).
	exclusive []string
	// queued is the transaction's commit while it waits for the lock, where a holder may take it
	// into its group (groupcommit.go); nil otherwise.
	queued *queuedCommit

	// Read-only: the snapshot. conn is the pinned reader connection, nil before the first
	// read, for single-use transactions, and after the janitor released an idle snapshot; the
	// transaction can then still read while no commit has happened since readSeq.
	singleUse bool
	snapped   bool
	conn      *sql.Conn
	schema    *catalog.Schema
	readTS    time.Time
	readSeq   uint64
	// exactTS is the timestamp of an exact-staleness or read-timestamp bound (zero for strong
	// and bounded staleness, which read the newest data); version is the kept version that
	// shows the database at exactTS when newer commits exist. snapErr is why the snapshot could
	// not be had (a timestamp older than the kept history), returned by every read.
	exactTS  time.Time
	version  *version
	pinnedAt time.Time // the newest commit the pinned snapshot shows
	snapErr  error
}

type pendingTimestamp struct {
	table  *catalog.Table
	column string
	key    []any
}

// Begin starts a transaction. It takes no lock and no snapshot: those come with the
// transaction's first operation.
func (db *DB) Begin(opts TxnOptions) (*Txn, error) {
	id := make([]byte, 16)
	rand.Read(id)
	t := &Txn{db: db, id: id, mode: opts.Mode, singleUse: opts.SingleUse, begun: time.Now(), ended: make(chan struct{}), wound: make(chan struct{})}
	if ro := opts.ReadOnly; opts.Mode == ReadOnly && ro != nil {
		switch {
		case ro.GetReadTimestamp() != nil:
			t.exactTS = ro.GetReadTimestamp().AsTime()
		case ro.GetExactStaleness() != nil:
			t.exactTS = time.Now().Add(-ro.GetExactStaleness().AsDuration())
		}
	}
	t.touch()
	if opts.Mode != ReadOnly {
		t.readTS = time.Now().UTC()
	}
	// A read-only transaction takes its snapshot lazily, at its first read (or when its read
	// timestamp is asked for), so a transaction that is begun and never used costs nothing.
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return nil, errorf(codes.NotFound, "Database not found: %s", db.name)
	}
	db.txns[string(id)] = t
	db.mu.Unlock()
	return t, nil
}

// Txn finds a transaction by id.
func (db *DB) Txn(id []byte) (*Txn, error) {
	db.mu.Lock()
	t := db.txns[string(id)]
	db.mu.Unlock()
	if t == nil {
		return nil, errorf(codes.NotFound, "Transaction not found")
	}
	return t, nil
}

func (t *Txn) touch() { t.lastUsed.Store(time.Now().UnixNano()) }

func (t *Txn) finished() bool { return t.done.Load() }

// Mode returns the transaction's kind.
func (t *Txn) Mode() Mode { return t.mode }

// ID returns the transaction id.
func (t *Txn) ID() []byte { return t.id }

// ReadTimestamp returns the snapshot time of a read-only transaction (taking the snapshot if
// it has not been taken yet).
func (t *Txn) ReadTimestamp() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mode == ReadOnly && !t.snapped && t.state == active {
		// A failure is kept in snapErr and returned by the transaction's reads.
		t.openSnapshot()
	}
	return t.readTS
}

// openSnapshot fixes the transaction's read timestamp and, unless it is single-use, pins a
// reader connection inside a SQLite read transaction: WAL mode keeps that connection's view
// fixed while writers commit. The caller holds t.mu.
func (t *Txn) openSnapshot() error {
	t.snapped = true
	t.schema = t.db.Schema()
	switch {
	case !t.exactTS.IsZero():
		t.snapErr = t.openExactSnapshot()
	case t.singleUse:
		// Its one read fixes its timestamp (snapshotRead).
	default:
		_, t.snapErr = t.pinCurrent(time.Time{})
	}
	return t.snapErr
}

// pinCurrent pins a reader connection inside a SQLite read transaction over the current data,
// recording the sequence number and newest commit timestamp that data reflects, and the read
// timestamp that shows exactly that data. With a bound (an exact read timestamp, not in the
// future) no commit after the pin gets a timestamp at or before the bound, and blocked reports
// a commit that has such a timestamp but was not visible yet: the pinned data does not show
// the bound, so the caller pins again once that commit is done.
func (t *Txn) pinCurrent(bound time.Time) (blocked bool, err error) {
	db := t.db
	ctx := context.Background()
	db.makeRoomForSnapshot()
	conn, err := db.sqldb.Conn(ctx)
	if err != nil {
		return false, internalf("snapshot: %v", err)
	}
	db.snapMu.RLock()
	defer db.snapMu.RUnlock()
	if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
		conn.Close()
		return false, internalf("snapshot: %v", err)
	}
	// A read starts the SQLite read transaction: from here on the connection sees this
	// snapshot only.
	var n int
	if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM "+metaTable).Scan(&n); err != nil {
		conn.ExecContext(ctx, "ROLLBACK")
		conn.Close()
		return false, internalf("snapshot: %v", err)
	}
	t.conn = conn
	t.schema = db.Schema()
	db.setPinned(t, true)
	db.mu.Lock()
	t.readSeq, t.pinnedAt, t.readTS = db.occ.seq, db.lastTS, db.readTimestampLocked()
	if !bound.IsZero() {
		if bound.After(db.lastRead) {
			db.lastRead = bound
		}
		blocked = !db.inflightTS.IsZero() && !db.inflightTS.After(bound)
	}
	db.mu.Unlock()
	return blocked, nil
}

// openExactSnapshot gives the transaction the database as of exactTS: the current data when
// nothing has been committed since, else a kept version.
func (t *Txn) openExactSnapshot() error {
	db := t.db
	if wait := time.Until(t.exactTS); wait > 0 {
		// A read timestamp in the future: Spanner waits for it.
		if wait > maxFutureRead {
			return errorf(codes.FailedPrecondition, "Read timestamp %s is more than %s in the future.", t.exactTS.UTC().Format(time.RFC3339Nano), maxFutureRead)
		}
		time.Sleep(wait)
	}
	for {
		blocked, err := t.pinCurrent(t.exactTS)
		if err != nil {
			return err
		}
		if !blocked {
			break
		}
		// A commit at or before exactTS is becoming visible: it takes a few statements.
		t.releaseSnapshot()
		time.Sleep(50 * time.Microsecond)
	}
	pinnedAt := t.pinnedAt
	t.readTS = t.exactTS
	if !pinnedAt.After(t.exactTS) {
		return nil
	}
	t.releaseSnapshot()
	v, err := db.versionAt(t.exactTS)
	if err != nil {
		return err
	}
	if v == nil {
		return internalf("no version for %s", t.exactTS)
	}
	t.version, t.schema, t.readSeq = v, v.schema, v.seq
	return nil
}

func (t *Txn) releaseSnapshot() {
	if t.version != nil {
		t.db.releaseVersion(t.version)
		t.version = nil
	}
	if t.conn != nil {
		t.conn.ExecContext(context.Background(), "ROLLBACK")
		t.conn.Close()
		t.conn = nil
		t.db.setPinned(t, false)
	}
}

// snapshotRead runs fn with a querier that reads the transaction's snapshot. Without a pinned
// connection (single-use, or released by the janitor) the read runs on a pooled connection
// while commits are held back, which is exact as long as nothing committed since readSeq.
func (t *Txn) snapshotRead(fn func(q querier, s *catalog.Schema) error) error {
	if !t.snapped {
		if err := t.openSnapshot(); err != nil {
			return err
		}
	}
	if t.snapErr != nil {
		return t.snapErr
	}
	if t.conn != nil {
		return fn(t.conn, t.schema)
	}
	if v := t.version; v != nil {
		v.mu.Lock()
		defer v.mu.Unlock()
		return fn(v.conn, v.schema)
	}
	db := t.db
	if t.singleUse {
		return t.singleRead(fn)
	}
	db.snapMu.RLock()
	defer db.snapMu.RUnlock()
	if db.currentSeq() != t.readSeq {
		return errorf(codes.FailedPrecondition, "The snapshot of this read-only transaction is no longer available: the emulator releases the snapshot of a read-only transaction idle for %s once newer data has been committed. Start a new read-only transaction.", db.e.opts.SnapshotIdle)
	}
	conn, done := db.reader()
	defer done()
	return fn(conn, t.schema)
}

// singleRead runs the one read of a single-use transaction and fixes its timestamp. One SQLite
// statement reads one consistent state by itself, on a pooled connection; when no commit became
// visible while it ran, that state is exactly the one of the read timestamp taken after it. When
// one did, the statement may have seen it or not, so it runs again in a pinned snapshot, whose
// timestamp is known (what a busy database costs: a second read, not a blocked commit).
func (t *Txn) singleRead(fn func(q querier, s *catalog.Schema) error) error {
	db := t.db
	db.snapMu.RLock() // the schema and the sequence number of one moment
	db.mu.Lock()
	before := db.occ.seq
	db.mu.Unlock()
	t.schema = db.Schema()
	db.snapMu.RUnlock()
	conn, done := db.reader()
	err := fn(conn, t.schema)
	done()
	db.snapMu.RLock()
	db.mu.Lock()
	after, ts := db.occ.seq, db.readTimestampLocked()
	db.mu.Unlock()
	db.snapMu.RUnlock()
	if err != nil || after == before {
		t.readTS, t.readSeq = ts, after
		return err
	}
	if _, err := t.pinCurrent(time.Time{}); err != nil {
		return err
	}
	defer t.releaseSnapshot()
	return fn(t.conn, t.schema)
}

// begin checks the transaction can run another operation. The caller holds t.mu.
func (t *Txn) checkActive() error {
	t.touch()
	switch t.state {
	case active:
		return nil
	case aborted:
		return abortedError(t.abortReason)
	case committed:
		return errorf(codes.FailedPrecondition, "Cannot start a new operation: the transaction has already been committed.")
	default:
		return errorf(codes.FailedPrecondition, "Cannot start a new operation: the transaction has already been rolled back.")
	}
}

func abortedError(reason string) error {
	if reason == "" {
		reason = "Transaction was aborted."
	}
	return errorf(codes.Aborted, "%s", reason)
}

// acquireLock takes the database write lock for a read-write transaction for the rest of its
// life, opens its SQLite transaction and replays the DML it ran optimistically. A transaction
// that cannot get the lock within LockWait is aborted: the client retries it, which is how
// Spanner resolves lock conflicts too. why says what made it take the lock before its commit
// (counted in DatabaseStats.HeldLocks: it holds the lock across its client's requests); "" at
// commit.
//
// For a commit (commitTS not nil) it also allocates the commit's timestamp into *commitTS before
// the replay, which writes it where the optimistic DML wrote PENDING_COMMIT_TIMESTAMP(); a
// transaction that holds the lock already gets none (the caller allocates it).
func (t *Txn) acquireLock(ctx context.Context, why string, commitTS *time.Time) error {
	if t.hasLock {
		return nil
	}
	if why != "" {
		t.db.countHeld(why)
		defer func() {
			if t.hasLock {
				t.db.heldAcross.Store(t)
			}
		}()
	}
	if err := t.lockValidated(ctx); err != nil {
		return err
	}
	db := t.db
	t.validated()
	db.retainVersion()
	stamp := ""
	if commitTS != nil {
		*commitTS = db.nextCommitTimestamp()
		stamp = spantype.FormatTimestamp(*commitTS)
	}
	if err := t.beginReplayed(ctx, stamp); err != nil {
		if commitTS != nil {
			db.commitFailed()
		}
		<-db.lock
		return err
	}
	if stamp == "" {
		t.pending = append(t.pending, t.replayPending...)
	}
	t.dml, t.dmlTables, t.replayPending = nil, nil, nil
	t.hasLock = true
	t.touch()
	return nil
}

// lockValidated waits for the database write lock and checks that nothing the transaction read
// optimistically has changed since; either failure aborts the transaction. The caller holds
// t.mu and, on success, the lock.
//
// The lock is taken for a statement or a commit, a moment each; waiting behind other
// transactions' commits is a queue, not a conflict, and is not bounded here (only by the
// request's deadline): Spanner does not abort a transaction because its database is busy, and
// aborting it would have its client redo all its work into the same queue. What can hold the lock
// for long is a transaction that keeps it across its client's requests (HeldLocks): one that has
// it when this one has waited LockWait is a lock conflict, and this one is aborted, for the
// client to retry.
//
// A commit that waits (t.queued) waits in the commit queue too, where the holder may take it
// into its group: lockValidated then returns errJoined, the commit done, without the lock.
func (t *Txn) lockValidated(ctx context.Context) error {
	db := t.db
	select {
	case db.lock <- struct{}{}: // free: no timer or watcher on the common path
	default:
		start := time.Now()
		if t.queued != nil {
			db.queue.add(t.queued)
		}
		err := t.waitForLock(ctx)
		db.e.stats.lockWaits.Add(1)
		db.e.stats.lockWaited.Add(int64(time.Since(start)))
		if err != nil {
			return err
		}
	}
	t.lockedAt = time.Now()
	if err := t.checkReads(ctx, true); err != nil {
		<-db.lock
		return err
	}
	return nil
}

// waitForLock waits for the write lock, which another transaction holds: as long as it takes
// while the lock only serves statements and commits, and until LockWait has passed with a
// transaction holding it across its requests (checked every LockWait by a watcher that lives as
// long as the wait), which aborts t. A queued commit may be taken into the holder's group
// meanwhile (errJoined); once claimed, it is the holder's to finish, whatever happens here.
func (t *Txn) waitForLock(ctx context.Context) error {
	db := t.db
	conflict, done := make(chan struct{}), make(chan struct{})
	defer close(done)
	go func() {
		tick := time.NewTicker(db.e.opts.LockWait)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if h := db.heldAcross.Load(); h != nil && h != t {
					close(conflict)
					return
				}
				db.e.stats.lockQueueWaits.Add(1)
			}
		}
	}()
	var joined chan struct{} // nil unless queued: never ready
	if t.queued != nil {
		joined = t.queued.done
	}
	// claimed reports that a holder took the queued commit (which then waits for it to be done);
	// otherwise the commit leaves the queue, to go on by itself.
	claimed := func() bool {
		if t.queued == nil || db.queue.leave(t.queued) {
			return false
		}
		<-joined
		return true
	}
	select {
	case db.lock <- struct{}{}:
		if claimed() { // the holder finished the group and let go of the lock
			<-db.lock
			return errJoined
		}
		return nil
	case <-joined:
		return errJoined
	case <-conflict:
		if claimed() {
			return errJoined
		}
		db.e.stats.lockTimeouts.Add(1)
		t.abortLocked("Transaction was aborted because it could not acquire a lock held by a concurrent transaction in time; retry the transaction.")
		return abortedError(t.abortReason)
	case <-t.wound:
		if claimed() {
			return errJoined
		}
		return t.abortWounded()
	case <-ctx.Done():
		if claimed() {
			return errJoined
		}
		return contextError(ctx)
	}
}

// validate aborts the transaction if a commit since one of its optimistic reads wrote what that
// read covered, or changed the answer of one of its queries (queries.go). Run after every
// optimistic read as well as before the lock is taken, it keeps every state a transaction sees
// consistent: all its reads so far show the database as of the moment of the check, as they
// would on Spanner, whose read locks keep what a transaction read from changing under it.
// (Validated only at commit, an attempt could read a row, see a commit change it and another
// row, and read the other row new: a state that never existed, on which the application then
// acts before the commit aborts.) The caller holds t.mu, not the lock.
func (t *Txn) validate(ctx context.Context) error { return t.checkReads(ctx, false) }

// checkReads is validate; locked says the caller holds the lock. Queries whose tables were
// written since they ran are run again under the lock (taken here for that if need be), so that
// every read is checked at one moment.
//
// A read on a pooled connection may see a commit that is visible and not yet recorded (recordCommit
// runs just after SQLite's COMMIT): waiting for snapMu lets any such commit finish recording, so
// that the check knows every commit the reads could have seen.
func (t *Txn) checkReads(ctx context.Context, locked bool) error {
	return t.checkReadsIn(ctx, locked, nil)
}

// checkReadsIn is checkReads for a commit that follows the commits in pending, not recorded yet
// (a group's, groupcommit.go): what they wrote counts as committed after every read.
func (t *Txn) checkReadsIn(ctx context.Context, locked bool, pending []*writeSet) error {
	db := t.db
	if t.wounded() {
		return t.abortWounded()
	}
	db.snapMu.RLock()
	db.mu.Lock()
	what := ""
	f := db.occ.conflict(t.footprints)
	if f == nil {
		f = pendingConflict(t.footprints, pending)
	}
	stale, schemaChanged := db.occ.staleQueries(t.queries)
	stale = pendingStale(t.queries, stale, pending)
	seq := db.occ.seq
	switch {
	case f != nil:
		what = f.table + " " + f.kind()
	case schemaChanged:
		what = "schema changed"
	}
	if what != "" {
		db.countConflict(what)
	}
	db.mu.Unlock()
	db.snapMu.RUnlock()
	if what != "" {
		t.abortConflict()
		return abortedError(t.abortReason)
	}
	if len(stale) == 0 {
		return nil
	}
	if !locked {
		if err := t.lockValidated(ctx); err != nil { // checkReads(ctx, true) under the lock
			return err
		}
		<-db.lock
		return nil
	}
	q, err := t.recheckQueries(ctx, stale, seq)
	if err != nil || q == nil {
		return err
	}
	db.mu.Lock()
	db.countConflict(strings.Join(q.tables, ",") + " query")
	db.mu.Unlock()
	t.abortConflict()
	return abortedError(t.abortReason)
}

func (t *Txn) abortConflict() {
	t.db.e.stats.conflicts.Add(1)
	t.abortLocked("Transaction was aborted because data it read was changed by a concurrent transaction; retry the transaction.")
}

// beginReplayed opens the writer's SQLite transaction and runs the transaction's optimistic DML
// again, writing stamp (a commit's timestamp) for PENDING_COMMIT_TIMESTAMP() unless it is "".
// Its footprints were just validated, so each statement writes what it wrote before; if one
// fails anyway (a foreign-key parent deleted meanwhile) the transaction is aborted. The caller
// holds the lock.
func (t *Txn) beginReplayed(ctx context.Context, stamp string) error {
	w := t.db.writer
	if _, err := w.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		return internalf("begin: %v", err)
	}
	return t.replay(ctx, stamp, func() { w.ExecContext(context.Background(), "ROLLBACK") })
}

// replay runs the optimistic DML again in the writer's open SQLite transaction (beginReplayed);
// if a statement fails it calls undo, which ends or undoes that transaction, and aborts t.
func (t *Txn) replay(ctx context.Context, stamp string, undo func()) error {
	for _, d := range t.dml {
		if err := d.run(ctx, t.db.writer, stamp); err != nil {
			undo()
			t.db.mu.Lock()
			t.db.countConflict("replayed DML failed")
			t.db.mu.Unlock()
			t.abortConflict()
			return abortedError(t.abortReason)
		}
	}
	return nil
}

// run runs a logged DML statement again on q (the writer, under the lock), with stamp for its
// PENDING_COMMIT_TIMESTAMP() values unless stamp is "".
func (d loggedDML) run(ctx context.Context, q querier, stamp string) error {
	args := d.args
	if stamp != "" && len(d.stamps) > 0 {
		args = slices.Clone(args)
		for _, i := range d.stamps {
			args[i] = stamp
		}
	}
	rows, err := q.QueryContext(ctx, d.sql, args...)
	if err != nil {
		return err
	}
	for rows.Next() {
	}
	err = rows.Err()
	rows.Close()
	return err
}

// oldestRead is the sequence number of the transaction's oldest optimistic read. Caller holds
// DB.mu.
func (t *Txn) oldestRead() (uint64, bool) {
	v := t.oldestSeq.Load()
	return v - 1, v != 0
}

// noteRead returns the commit sequence number an optimistic read starting now observes, and
// notes it as one of the transaction's reads (see oldestSeq). The caller holds t.mu.
func (t *Txn) noteRead() uint64 {
	db := t.db
	db.mu.Lock()
	defer db.mu.Unlock()
	seq := db.occ.seq
	if cur := t.oldestSeq.Load(); cur == 0 || seq+1 < cur {
		t.oldestSeq.Store(seq + 1)
	}
	return seq
}

// addFootprints records optimistic reads, where commits that wait for older readers find them.
// The caller holds t.mu.
func (t *Txn) addFootprints(fps []footprint) {
	db := t.db
	db.mu.Lock()
	t.footprints = append(t.footprints, fps...)
	db.readers.add(t, fps)
	db.mu.Unlock()
}

// validated forgets the optimistic reads once they were checked under the lock the transaction
// now keeps (or at its end).
func (t *Txn) validated() {
	db := t.db
	db.mu.Lock()
	db.readers.remove(t, t.footprints)
	t.footprints, t.queries = nil, nil
	db.mu.Unlock()
	t.oldestSeq.Store(0)
}

// releaseLock ends the SQLite transaction (rolling back unless committed) and frees the lock.
func (t *Txn) releaseLock() {
	if !t.hasLock {
		return
	}
	t.db.writer.ExecContext(context.Background(), "ROLLBACK")
	t.hasLock = false
	t.db.heldAcross.CompareAndSwap(t, nil)
	<-t.db.lock
}

// readWith runs fn on the connection the transaction reads through: its snapshot
// (read-only), or the writer connection under the write lock (read-write). The caller holds t.mu.
func (t *Txn) readWith(ctx context.Context, why string, fn func(q querier, s *catalog.Schema) error) error {
	if t.mode == ReadOnly {
		return t.snapshotRead(fn)
	}
	if err := t.acquireLock(ctx, why, nil); err != nil {
		return err
	}
	return fn(t.db.writer, t.db.Schema())
}

// abort ends the transaction as ABORTED.
func (t *Txn) abort(reason string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.abortLocked(reason)
}

func (t *Txn) abortLocked(reason string) {
	if t.state != active {
		return
	}
	t.state = aborted
	t.abortReason = reason
	t.finish()
}

func (t *Txn) finish() {
	t.releaseLock()
	t.releaseSnapshot()
	t.pending, t.replayPending = nil, nil
	t.validated()
	t.dml, t.dmlTables = nil, nil
	t.releaseExclusive()
	if !t.done.Swap(true) {
		close(t.ended)
	}
	if t.state != aborted {
		// Committed and rolled-back transactions are forgotten at once (thousands end every
		// second); aborted ones stay a while so that the client's next call on them learns
		// that they were aborted.
		t.db.mu.Lock()
		delete(t.db.txns, string(t.id))
		t.db.mu.Unlock()
	}
}

// Rollback ends the transaction, discarding its writes. Rolling back a finished transaction is
// a no-op.
func (t *Txn) Rollback() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state != active {
		return
	}
	t.state = rolledBack
	t.finish()
}

// Commit applies the buffered mutations and the DML writes atomically and returns the commit
// timestamp. A commit that waits for the lock may be committed by the holder, in its group
// (groupcommit.go); one that takes the lock commits the commits queued behind it with its own.
func (t *Txn) Commit(ctx context.Context, muts []*sppb.Mutation) (time.Time, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.checkActive(); err != nil {
		return time.Time{}, err
	}
	if t.mode == ReadOnly {
		return time.Time{}, errorf(codes.FailedPrecondition, "Cannot commit a read-only transaction.")
	}
	db := t.db
	wsSchema := db.Schema()
	ws := t.commitWrites(wsSchema, muts)
	if !t.hasLock {
		// A transaction holding the lock already (it ran a query) would stop every other one
		// while it waited.
		if err := t.waitForOlderReaders(ctx, ws); err != nil {
			return time.Time{}, err
		}
		t.queued = &queuedCommit{t: t, muts: muts, ws: ws, wsSchema: wsSchema, done: make(chan struct{})}
	}
	var ts time.Time
	err := t.acquireLock(ctx, "", &ts)
	joined := t.queued
	t.queued = nil
	if err == errJoined {
		return joined.ts, joined.err
	}
	if err != nil {
		return time.Time{}, err
	}
	if ts.IsZero() { // it held the lock already
		ts = db.nextCommitTimestamp()
	}
	schema := db.Schema()
	fail := func(err error) (time.Time, error) {
		// A failed commit ends the transaction, as in Spanner.
		db.commitFailed()
		t.state = rolledBack
		t.finish()
		return time.Time{}, err
	}
	if err := applyMutations(ctx, db.writer, &db.plans, schema, muts, ts); err != nil {
		return fail(err)
	}
	if err := t.fixPendingTimestamps(ctx, ts); err != nil {
		return fail(err)
	}
	if schema != wsSchema { // a schema change while it waited for the lock
		ws = t.commitWrites(schema, muts)
	}
	group := db.commitGroup(schema, []*writeSet{ws})
	db.snapMu.Lock()
	// Not ctx: a COMMIT interrupted by its end would undo the group's members with it.
	_, err = db.writer.ExecContext(context.Background(), "COMMIT")
	if err == nil {
		db.recordGroup(ts, ws, group)
	} else {
		err = mapError(err, nil)
	}
	db.snapMu.Unlock()
	db.endGroup(group, err)
	if err != nil {
		return fail(err)
	}
	t.hasLock = false
	db.heldAcross.CompareAndSwap(t, nil)
	<-db.lock
	db.e.countCommitHold(time.Since(t.lockedAt))
	t.state = committed
	t.finish()
	return ts, nil
}

// ExecutePartitionedDML runs one DML statement in its own transaction.
func (db *DB) ExecutePartitionedDML(ctx context.Context, st Statement) (int64, error) {
	stmt, err := parseStatement(st.SQL)
	if err != nil {
		return 0, err
	}
	switch stmt.(type) {
	case *ast.Update, *ast.Delete:
	default:
		return 0, errorf(codes.InvalidArgument, "Only UPDATE and DELETE statements can be executed as partitioned DML.")
	}
	for {
		t, err := db.Begin(TxnOptions{Mode: ReadWrite})
		if err != nil {
			return 0, err
		}
		// A partitioned update may touch much of a table: it takes the lock at once rather
		// than run optimistically and again at commit.
		t.mu.Lock()
		err = t.acquireLock(ctx, "partitioned DML", nil)
		t.mu.Unlock()
		if err != nil {
			t.Rollback()
			if isAborted(err) && ctx.Err() == nil {
				continue
			}
			return 0, err
		}
		res, err := t.ExecuteSQL(ctx, st)
		if err != nil {
			t.Rollback()
			if isAborted(err) && ctx.Err() == nil {
				continue
			}
			return 0, err
		}
		if !res.IsDML {
			t.Rollback()
			return 0, errorf(codes.InvalidArgument, "Partitioned DML requires a DML statement.")
		}
		if _, err := t.Commit(ctx, nil); err != nil {
			if isAborted(err) && ctx.Err() == nil {
				continue
			}
			return 0, err
		}
		return res.RowCount, nil
	}
}
