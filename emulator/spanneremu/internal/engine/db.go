package engine

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/catalog"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/memvfs"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

// DB is one Spanner database stored in one SQLite file (WAL mode).
//
// Concurrency: read-write transactions work on the single writer connection under the
// database's write lock (one holder at a time, FIFO waiters, bounded wait then ABORTED): a DML
// statement holds it for itself alone, a commit for the commit, a SQL query from there to the
// commit; their reads and DML are validated at commit (see occ.go), so they are serializable
// and see their own writes.
// Read-only transactions each hold a reader connection with an open SQLite read transaction:
// WAL gives them one consistent snapshot for their whole life without blocking the writer.
type DB struct {
	e       *Engine
	name    string
	path    string
	created time.Time

	sqldb  *sql.DB
	pool   *cachedPool // reads on any pooled connection
	writer *cachedConn // the one connection that writes, used under the write lock
	plans  writePlans  // the write mutations' plans, for the current schema (mutation.go)
	schema atomic.Pointer[catalog.Schema]

	// lock is the write lock: a token is held by the transaction in holder.
	lock chan struct{}
	// heldAcross is the transaction that holds the lock across its client's requests (it took
	// it before its commit: HeldLocks), nil while the lock is free or held for a statement or a
	// commit only.
	heldAcross atomic.Pointer[Txn]
	// compiled caches translated statements by text and parameter types.
	compiledMu sync.Mutex
	compiled   map[string]compiledEntry
	// pinned are the read-only transactions holding a reader connection (guarded by mu).
	pinned map[*Txn]bool
	// snapMu orders snapshot creation against commits, so that a read-only transaction's read
	// timestamp is exactly the last commit it can see.
	snapMu sync.RWMutex

	// commits and rowsWritten count this database's commits and the rows they wrote (Stats).
	commits, rowsWritten atomic.Int64
	// conflictsBy counts the transactions aborted for an invalidated optimistic read, by what
	// the read was, and those wounded, by table (see DatabaseStats.ConflictsBy). Guarded by mu.
	conflictsBy map[string]int64
	// heldLocks counts the transactions that took the write lock before their commit, by why
	// (DatabaseStats.HeldLocks). Guarded by mu.
	heldLocks map[string]int64

	mu      sync.Mutex
	txns    map[string]*Txn
	occ     occState
	readers readerIndex
	// exclusive are the keys locked by LOCK_HINT_EXCLUSIVE reads (locks.go).
	exclusive exclusiveLocks
	history   history
	lastTS    time.Time
	// creating is true while CreateDatabase applies the initial DDL; createdSeq is the commit
	// sequence number of the database as created.
	creating   bool
	createdSeq uint64
	// lastRead is the newest read timestamp handed out (see nextCommitTimestamp); inflightTS is
	// the timestamp of the first commit that has one but is not visible yet (zero when none): a
	// read that cannot see that commit gets a timestamp before it (readTimestampLocked).
	// issuedTS is the newest commit timestamp handed out, visible or not (a group's members get
	// theirs before any is visible).
	lastRead, inflightTS, issuedTS time.Time
	closed                         bool
	ddlLock                        sync.Mutex
	// queue holds the commits waiting for the lock that its holder may take in (groupcommit.go).
	queue commitQueue
	// checkpoints copies the WAL into the database file, off the write lock (checkpoint.go).
	checkpoints *checkpointer
}

func openDB(e *Engine, name, path string, create bool) (*DB, error) {
	sync := "OFF"
	if !e.ownsDir {
		sync = "NORMAL"
	}
	// mmap_size(0): pages are read with pread, not through a mapping of the file. In WAL mode a
	// connection that begins a read after another connection committed throws its page cache away
	// and, with a mapping, unmaps the whole file too (sqlite3OsUnfetch), to map it again and
	// fault its pages back in; under a steady stream of commits that is nearly every read on a
	// pooled connection, and the unmapping costs more as the file grows. With the small cache
	// below, reading the pages again is cheaper: against the mapped build (1 GiB) the bench
	// process's CPU over the services' was 0.97 at 25 orders/s (three runs each), and over five
	// minutes at 20/s it grew 1.15 → 1.24 where the mapped build's grew 1.15 → 1.33. (The
	// mapping had been chosen when the cache was large: clearing a large cache at every read
	// made reads slower as the tables grew.)
	// cache_size: SQLite walks the whole cache at the end of every transaction
	// (sqlite3PcacheTruncate), so a large one costs more per commit as it fills and the
	// emulator's CPU grew minute by minute. Over five minutes at 15 orders/s the bench process
	// grew 0.77 → 0.86 cores with 32 MiB, 0.75 → 0.83 with 4 MiB, and stayed at 0.81–0.83 after
	// the first minute with 1 MiB.
	// vfs: without a data directory the files' contents live in memory (package memvfs says why).
	// SQLite's own checkpoint in the commit that takes the WAL past 1000 pages stays, as the
	// backstop of the checkpointer (checkpoint.go).
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=busy_timeout(20000)" +
		"&_pragma=synchronous(" + sync + ")&_pragma=recursive_triggers(1)&_pragma=cache_size(-1024)" +
		"&_pragma=mmap_size(0)"
	if e.ownsDir {
		dsn += "&vfs=" + memvfs.Name
	}
	sqldb, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, internalf("open %s: %v", path, err)
	}
	sqldb.SetMaxOpenConns(maxPinnedSnapshots + maxVersions + 32)
	// Opening a connection (and preparing its statements again) costs far more than a read:
	// keep enough idle ones for a busy database's concurrent reads and snapshots, and let a
	// burst's surplus go after a minute.
	sqldb.SetMaxIdleConns(64)
	sqldb.SetConnMaxIdleTime(time.Minute)
	ctx := context.Background()
	writer, err := sqldb.Conn(ctx)
	if err != nil {
		sqldb.Close()
		return nil, internalf("open %s: %v", path, err)
	}
	db := &DB{e: e, name: name, path: path, sqldb: sqldb, writer: newCachedConn(writer),
		pool: &cachedPool{db: sqldb, stmts: map[string]*sql.Stmt{}},
		lock: make(chan struct{}, 1), txns: map[string]*Txn{}, occ: newOCCState(), pinned: map[*Txn]bool{}, compiled: map[string]compiledEntry{},
		checkpoints: newCheckpointer()}
	fail := func(err error) (*DB, error) {
		writer.Close()
		sqldb.Close()
		return nil, err
	}
	schema := catalog.Empty()
	if create {
		db.creating = true
		db.created = time.Now().UTC()
		if _, err := writer.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+metaTable+` (k TEXT PRIMARY KEY, v TEXT)`); err != nil {
			return fail(internalf("initialise %s: %v", path, err))
		}
		// Applying no statements creates and fills the INFORMATION_SCHEMA tables.
		_, initial, err := catalog.Apply(schema, nil, compiler)
		if err != nil {
			return fail(err)
		}
		q, args := writeMetaStmt(&dbMeta{Name: name, Created: db.created})
		for _, s := range initial {
			if _, err := writer.ExecContext(ctx, s); err != nil {
				return fail(internalf("initialise %s: %v: %s", path, err, s))
			}
		}
		if _, err := writer.ExecContext(ctx, q, args...); err != nil {
			return fail(internalf("initialise %s: %v", path, err))
		}
	} else {
		m, err := readMeta(ctx, writer)
		if err != nil {
			return fail(internalf("read %s: %v", path, err))
		}
		db.name, db.created = m.Name, m.Created
		if len(m.DDL) > 0 {
			s, _, err := catalog.Apply(schema, m.DDL, compiler)
			if err != nil {
				return fail(internalf("reload schema of %s: %v", m.Name, err))
			}
			schema = s
		}
	}
	db.schema.Store(schema)
	db.checkpoints.start(db)
	return db, nil
}

// Schema returns the current schema.
func (db *DB) Schema() *catalog.Schema { return db.schema.Load() }

func (db *DB) close() {
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return
	}
	db.closed = true
	txns := make([]*Txn, 0, len(db.txns))
	for _, t := range db.txns {
		txns = append(txns, t)
	}
	db.mu.Unlock()
	for _, t := range txns {
		t.abort("the database was dropped or the emulator is shutting down")
	}
	db.closeHistory()
	db.checkpoints.stop()
	db.pool.close()
	db.writer.Close()
	db.sqldb.Close()
}

// applyDDL runs DDL under the write lock, so it never interleaves with a read-write transaction.
func (db *DB) applyDDL(ctx context.Context, stmts []string) error {
	db.ddlLock.Lock()
	defer db.ddlLock.Unlock()
	select {
	case db.lock <- struct{}{}:
	case <-ctx.Done():
		return contextError(ctx)
	}
	defer func() { <-db.lock }()
	db.retainVersion()

	old := db.Schema()
	ns, sqls, err := catalog.Apply(old, stmts, compiler)
	if err != nil {
		return err
	}
	conn := db.writer
	exec := func(q string, args ...any) error {
		_, err := conn.ExecContext(ctx, q, args...)
		return err
	}
	if err := exec("PRAGMA foreign_keys=OFF"); err != nil {
		return internalf("ddl: %v", err)
	}
	defer exec("PRAGMA foreign_keys=ON")
	exec("PRAGMA legacy_alter_table=ON")
	defer exec("PRAGMA legacy_alter_table=OFF")
	if err := exec("BEGIN IMMEDIATE"); err != nil {
		return internalf("ddl: %v", err)
	}
	rollback := func(err error) error {
		exec("ROLLBACK")
		return err
	}
	for _, q := range sqls {
		if err := exec(q); err != nil {
			return rollback(ddlError(err, q))
		}
	}
	if bad, err := foreignKeyViolation(ctx, conn); err != nil {
		return rollback(internalf("ddl: %v", err))
	} else if bad != "" {
		return rollback(errorf(codes.FailedPrecondition, "Foreign key or interleaving constraint violated by existing rows of table %s.", bad))
	}
	m := &dbMeta{Name: db.name, Created: db.created, DDL: ns.Statements}
	q, args := writeMetaStmt(m)
	if err := exec(q, args...); err != nil {
		return rollback(internalf("ddl: %v", err))
	}
	// A schema change is a commit: it gets a timestamp, and every optimistic read before it
	// is invalid. Readers see the new schema and tables together with its timestamp (snapMu),
	// as they see a commit's data.
	ts := db.nextCommitTimestamp()
	db.snapMu.Lock()
	if err := exec("COMMIT"); err != nil {
		db.snapMu.Unlock()
		db.commitFailed()
		return rollback(internalf("ddl: %v", err))
	}
	db.schema.Store(ns)
	db.mu.Lock()
	db.lastTS, db.inflightTS = ts, time.Time{}
	db.occ.seq++
	db.occ.allSeq = db.occ.seq
	db.history.recordCommitMark(db.occ.seq, ts)
	db.mu.Unlock()
	db.snapMu.Unlock()
	return nil
}

func ddlError(err error, q string) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "UNIQUE constraint failed"):
		return errorf(codes.FailedPrecondition, "Found uniqueness violation on index: existing rows violate the new UNIQUE constraint (%s).", msg)
	case strings.Contains(msg, "NOT NULL constraint failed"):
		return errorf(codes.FailedPrecondition, "Cannot add NOT NULL constraint: existing rows hold NULL values (%s).", msg)
	case strings.Contains(msg, "CHECK constraint failed"):
		return errorf(codes.FailedPrecondition, "Existing rows violate the new constraint (%s).", msg)
	}
	return internalf("ddl statement failed: %v (%s)", err, q)
}

func foreignKeyViolation(ctx context.Context, conn *cachedConn) (string, error) {
	rows, err := conn.QueryContext(ctx, "PRAGMA foreign_key_check")
	if err != nil {
		return "", err
	}
	defer rows.Close()
	if rows.Next() {
		var table string
		var rowid, parent, fkid any
		if err := rows.Scan(&table, &rowid, &parent, &fkid); err != nil {
			return "", err
		}
		return table, nil
	}
	return "", rows.Err()
}

// maxFutureRead is how far in the future an exact read timestamp may be: the read waits for it.
const maxFutureRead = 10 * time.Second

// maxPinnedSnapshots bounds the reader connections held by read-only transactions; the least
// recently used snapshot is released beyond it, leaving connections for everyone else.
const maxPinnedSnapshots = 64

func (db *DB) currentSeq() uint64 {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.occ.seq
}

// makeRoomForSnapshot releases the least recently used pinned snapshot when too many are held,
// so read-only transactions the client forgot (the Go client never ends them) cannot exhaust
// the connection pool.
func (db *DB) makeRoomForSnapshot() {
	db.mu.Lock()
	if len(db.pinned) < maxPinnedSnapshots {
		db.mu.Unlock()
		return
	}
	var lru []*Txn
	for t := range db.pinned {
		lru = append(lru, t)
	}
	db.mu.Unlock()
	sort.Slice(lru, func(i, j int) bool { return lru[i].lastUsed.Load() < lru[j].lastUsed.Load() })
	for _, t := range lru[:len(lru)-maxPinnedSnapshots+1] {
		if t.mu.TryLock() {
			t.releaseSnapshot()
			t.mu.Unlock()
		}
	}
}

func (db *DB) setPinned(t *Txn, on bool) {
	db.mu.Lock()
	if on {
		db.pinned[t] = true
	} else {
		delete(db.pinned, t)
	}
	db.mu.Unlock()
}

// countHeld counts a transaction that took the write lock before its commit, and why (see
// DatabaseStats.HeldLocks).
func (db *DB) countHeld(why string) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.heldLocks == nil {
		db.heldLocks = map[string]int64{}
	}
	db.heldLocks[why]++
}

// heldSQL is a statement as HeldLocks names it: its first line, at most 100 bytes.
func heldSQL(sql string) string {
	sql = strings.Join(strings.Fields(sql), " ")
	if len(sql) > 100 {
		sql = sql[:100] + "..."
	}
	return sql
}

// countConflict counts an abort for an invalidated read of what, or a wound (see conflictsBy).
// The caller holds db.mu.
func (db *DB) countConflict(what string) {
	if db.conflictsBy == nil {
		db.conflictsBy = map[string]int64{}
	}
	db.conflictsBy[what]++
}

// nextCommitTimestamp returns a timestamp after every earlier commit of this database, in
// microseconds like Spanner's commit timestamps. The caller holds the write lock.
func (db *DB) nextCommitTimestamp() time.Time {
	db.mu.Lock()
	defer db.mu.Unlock()
	ts := time.Now().UTC().Truncate(time.Microsecond)
	// After every earlier commit, and after every read timestamp handed out, so that a read
	// at a returned timestamp never misses a commit made later.
	// After the commits of the group it joins too (groupcommit.go).
	floor := db.lastTS
	if db.issuedTS.After(floor) {
		floor = db.issuedTS
	}
	if db.lastRead.After(floor) {
		floor = db.lastRead.Truncate(time.Microsecond)
	}
	if !ts.After(floor) {
		ts = floor.Add(time.Microsecond)
	}
	if db.inflightTS.IsZero() {
		db.inflightTS = ts
	}
	db.issuedTS = ts
	return ts
}

// commitFailed forgets the timestamp of a commit that did not happen. The caller holds the write
// lock.
func (db *DB) commitFailed() {
	db.mu.Lock()
	db.inflightTS = time.Time{}
	db.mu.Unlock()
}

// recordCommit publishes a commit: its timestamp and what it wrote (for optimistic reads). The
// caller holds snapMu for writing, from before the SQLite commit, so that no reader sees the
// commit's data without its timestamp or the other way round.
func (db *DB) recordCommit(ts time.Time, ws *writeSet) {
	db.mu.Lock()
	db.lastTS, db.inflightTS = ts, time.Time{}
	db.history.recordCommitMark(db.occ.record(ws), ts)
	db.mu.Unlock()
}

// readTimestampLocked is the timestamp of a read that sees exactly the commits visible now: the
// newest of them, or now, but before the commit that has its timestamp and is not visible yet.
// Every later commit gets a later timestamp (nextCommitTimestamp). The caller holds db.mu and
// snapMu (for reading), so that what is visible cannot change while it decides.
func (db *DB) readTimestampLocked() time.Time {
	now := time.Now().UTC()
	if db.lastTS.After(now) {
		now = db.lastTS
	}
	if !db.inflightTS.IsZero() && !now.Before(db.inflightTS) {
		now = db.inflightTS.Add(-time.Microsecond)
	}
	if now.After(db.lastRead) {
		db.lastRead = now
	}
	return now
}

// abortIdle aborts transactions that have been idle longer than the idle timeout, and forgets
// finished ones after a while.
func (db *DB) abortIdle(now time.Time) {
	db.mu.Lock()
	var idle, snaps []*Txn
	oldest := db.occ.seq
	for k, t := range db.txns {
		if !t.finished() {
			if s, ok := t.oldestRead(); ok && s < oldest {
				oldest = s
			}
		}
		last := time.Unix(0, t.lastUsed.Load())
		if t.finished() {
			if now.Sub(last) > db.e.opts.IdleTimeout {
				delete(db.txns, k)
			}
			continue
		}
		if now.Sub(last) > db.e.opts.IdleTimeout {
			idle = append(idle, t)
		} else if t.mode == ReadOnly && now.Sub(last) > db.e.opts.SnapshotIdle {
			snaps = append(snaps, t)
		}
	}
	db.occ.prune(oldest)
	db.mu.Unlock()
	db.trimHistory(now)
	for _, t := range snaps {
		if t.mu.TryLock() {
			t.releaseSnapshot()
			t.mu.Unlock()
		}
	}
	for _, t := range idle {
		if t.mu.TryLock() {
			// Only a read-write transaction's end is an abort of work. A read-only one idle this
			// long is what the Go client leaves behind for every multi-use read-only transaction
			// (it never tells the server one is over): ending it frees its memory, and a client
			// that does come back is told why. A transaction that ended since the scan above (a
			// commit that had waited for the lock with its last use long past) is not counted.
			if t.mode == ReadWrite && t.state == active {
				db.e.stats.idleAborts.Add(1)
			}
			t.abortLocked(fmt.Sprintf("Transaction was aborted because it was idle for more than %s.", db.e.opts.IdleTimeout))
			t.mu.Unlock()
		}
	}
}

// sweepTTL deletes rows that their table's ROW DELETION POLICY has expired. Rows whose
// timestamp is NULL (for the outbox: unpublished events) are never deleted.
func (db *DB) sweepTTL() {
	schema := db.Schema()
	for _, t := range schema.Tables {
		p := t.RowDeletionPolicy
		if p == nil {
			continue
		}
		col, ok := t.Column(p.Column)
		if !ok {
			continue
		}
		cutoff := spantype.FormatTimestamp(time.Now().Add(-time.Duration(p.Days) * 24 * time.Hour))
		q := fmt.Sprintf("DELETE FROM %s WHERE %s IS NOT NULL AND %s < ? AND %s != ?",
			catalog.Quote(t.SQLiteName), catalog.Quote(col.SQLiteName), catalog.Quote(col.SQLiteName), catalog.Quote(col.SQLiteName))
		n, err := db.runInternalWrite(t, q, cutoff, spantype.PendingCommitTimestamp)
		if err != nil {
			db.e.opts.Logf("spanneremu: row deletion policy sweep of %s.%s failed: %v", db.name, t.Name, err)
			continue
		}
		if n > 0 {
			db.e.opts.Logf("spanneremu: row deletion policy removed %d rows from %s.%s", n, db.name, t.Name)
		}
	}
}

// runInternalWrite runs one statement as its own transaction under the write lock. It waits for
// the lock at most LockWait, like a client's transaction, and gives up otherwise (the next sweep
// tries again): the janitor that runs it is also what aborts an idle transaction, and a read-write
// transaction whose client died holding the lock (after a query, say) is released only by that
// abort, so waiting for good would stop the database's writes for good.
func (db *DB) runInternalWrite(t *catalog.Table, q string, args ...any) (int64, error) {
	timer := time.NewTimer(db.e.opts.LockWait)
	defer timer.Stop()
	select {
	case db.lock <- struct{}{}:
	case <-timer.C:
		return 0, fmt.Errorf("the write lock is held by a transaction (for %s and more); the next sweep tries again", db.e.opts.LockWait)
	case <-db.e.stop:
		return 0, fmt.Errorf("shutting down")
	}
	defer func() { <-db.lock }()
	db.retainVersion()
	db.mu.Lock()
	closed := db.closed
	db.mu.Unlock()
	if closed {
		return 0, fmt.Errorf("database closed")
	}
	ctx := context.Background()
	w := db.writer
	if _, err := w.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return 0, err
	}
	res, err := w.ExecContext(ctx, q, args...)
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err != nil || n == 0 {
		w.ExecContext(ctx, "ROLLBACK")
		return 0, err
	}
	// A commit like a transaction's: its timestamp is fixed before it becomes visible.
	ts := db.nextCommitTimestamp()
	db.snapMu.Lock()
	defer db.snapMu.Unlock()
	if _, err := w.ExecContext(ctx, "COMMIT"); err != nil {
		w.ExecContext(ctx, "ROLLBACK")
		db.commitFailed()
		return 0, err
	}
	ws := newWriteSet()
	ws.addTable(db.Schema(), t)
	db.recordCommit(ts, ws)
	return n, nil
}

func contextError(ctx context.Context) error {
	if ctx.Err() == context.DeadlineExceeded {
		return errorf(codes.DeadlineExceeded, "Deadline exceeded while waiting")
	}
	return errorf(codes.Canceled, "Request cancelled")
}
