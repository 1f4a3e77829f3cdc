package engine

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/catalog"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/memvfs"
)

// Version history for exact-timestamp reads (ReadTimestamp, ExactStaleness).
//
// Just before a write changes the database (a commit, DDL, the row deletion sweeper), the
// state it is about to replace is kept as a version: a reader connection pinned in a SQLite
// read transaction (WAL mode keeps its view fixed) together with the schema of that moment.
// A version made at commit sequence n with timestamp ts shows the database exactly for the
// read timestamps from ts up to (not including) the timestamp of commit n+1. The newest state
// needs no version: it is the current data.
//
// Versions cost a pinned connection each, and a reader that never goes away keeps SQLite from
// restarting its WAL, so history is bounded: at most maxVersions, none older than
// historyWindow, and all of it is dropped when the WAL grows past maxWALBytes. A read older
// than the retained history fails with FAILED_PRECONDITION, as a read older than Spanner's
// version GC does.
//
// A read-only transaction's snapshot is such a reader too, and the Go client never ends a
// read-only transaction: its snapshot stays pinned until the janitor finds it idle for
// SnapshotIdle. A database that keeps no versions (NoHistory, or none yet) whose WAL has grown
// past walRestartBytes is held by such snapshots: the janitor then releases those idle for
// largeWALSnapshotIdle, so that SQLite restarts its WAL again, and truncates the WAL if no
// reader is in the way at that moment, without waiting for one. A WAL that does not restart
// grows by every commit, and each page any connection reads is looked up in it (one hash table
// per 4,096 frames): at 50 orders/s through the saga the WALs of three databases grew to
// 35–63 MiB, an average commit's work under the write lock grew by half and more within 30 s,
// and the truncation at maxWALBytes waits up to 100 ms for readers with the write lock held.

const (
	maxVersions   = 64
	historyWindow = time.Minute
	maxWALBytes   = 64 << 20
	// walRestartBytes is the WAL size past which a database without versions has its idle
	// read-only snapshots released (see above). A WAL that restarts stays below it: SQLite
	// checkpoints every 1,000 pages (4 MiB).
	walRestartBytes = 8 << 20
	// historyPause is how long no version is kept after history was dropped for a large WAL:
	// long enough for the checkpoint that truncates it to find no reader.
	historyPause = 250 * time.Millisecond
)

type version struct {
	seq    uint64
	ts     time.Time
	schema *catalog.Schema
	conn   *sql.Conn

	mu      sync.Mutex // serializes reads on conn
	refs    int        // guarded by history.mu
	evicted bool       // guarded by history.mu
}

type commitMark struct {
	seq uint64
	ts  time.Time
}

type history struct {
	mu          sync.Mutex
	pausedUntil time.Time
	versions    []*version   // oldest first
	commits     []commitMark // recent commits, oldest first
}

// recordCommitMark notes the timestamp of commit seq. Caller holds DB.mu.
func (h *history) recordCommitMark(seq uint64, ts time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.commits = append(h.commits, commitMark{seq, ts})
	if len(h.commits) > 4*maxVersions {
		h.commits = append(h.commits[:0:0], h.commits[len(h.commits)-2*maxVersions:]...)
	}
}

// retainVersion keeps the current state as a version before a write replaces it. The caller
// holds the write lock, so the state cannot change underneath.
func (db *DB) retainVersion() {
	if db.e.opts.NoHistory {
		return
	}
	db.mu.Lock()
	seq, ts, creating := db.occ.seq, db.lastTS, db.creating
	db.mu.Unlock()
	if creating {
		return // nothing to keep before the database exists
	}
	h := &db.history
	h.mu.Lock()
	if n := len(h.versions); (n > 0 && h.versions[n-1].seq == seq) || time.Now().Before(h.pausedUntil) {
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	ctx := context.Background()
	conn, err := db.sqldb.Conn(ctx)
	if err != nil {
		db.e.opts.Logf("spanneremu: keep version: %v", err)
		return
	}
	var n int
	if _, err := conn.ExecContext(ctx, "BEGIN"); err == nil {
		err = conn.QueryRowContext(ctx, "SELECT count(*) FROM "+metaTable).Scan(&n)
	}
	if err != nil {
		conn.Close()
		db.e.opts.Logf("spanneremu: keep version: %v", err)
		return
	}
	v := &version{seq: seq, ts: ts, schema: db.Schema(), conn: conn}
	h.mu.Lock()
	h.versions = append(h.versions, v)
	var drop []*version
	for len(h.versions) > maxVersions || (len(h.versions) > 0 && time.Since(h.versions[0].ts) > historyWindow) {
		drop = append(drop, h.evictOldestLocked())
	}
	h.mu.Unlock()
	closeVersions(drop)
}

// evictOldestLocked removes the oldest version and returns it if it can be closed now.
func (h *history) evictOldestLocked() *version {
	v := h.versions[0]
	h.versions = h.versions[1:]
	v.evicted = true
	if v.refs == 0 {
		return v
	}
	return nil
}

func closeVersions(vs []*version) {
	for _, v := range vs {
		if v != nil {
			v.conn.ExecContext(context.Background(), "ROLLBACK")
			v.conn.Close()
		}
	}
}

// versionAt returns the version showing the database at ts, with a reference the caller
// releases with releaseVersion; nil when ts is at or after the newest commit (the current data
// shows it).
func (db *DB) versionAt(ts time.Time) (*version, error) {
	db.mu.Lock()
	last, created := db.lastTS, db.createdSeq
	db.mu.Unlock()
	if !ts.Before(last) {
		return nil, nil
	}
	h := &db.history
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(h.versions) - 1; i >= 0; i-- {
		v := h.versions[i]
		if v.ts.After(ts) {
			continue
		}
		next, known := h.commitAfterLocked(v.seq)
		if known && !next.After(ts) {
			break // a later commit, whose version was not kept, covers ts
		}
		v.refs++
		return v, nil
	}
	// Before the database was created it had no rows: the version kept of the database as
	// created shows that (Spanner returns empty results for such reads).
	if len(h.versions) > 0 && h.versions[0].seq == created && ts.Before(h.versions[0].ts) {
		h.versions[0].refs++
		return h.versions[0], nil
	}
	if db.e.opts.NoHistory {
		return nil, errorf(codes.FailedPrecondition, "Read timestamp %s is before the latest commit, and this emulator keeps no version history (started with -history=false).",
			ts.UTC().Format(time.RFC3339Nano))
	}
	return nil, errorf(codes.FailedPrecondition, "Read timestamp %s is older than the history the emulator keeps (the last %d versions, at most %s old).",
		ts.UTC().Format(time.RFC3339Nano), maxVersions, historyWindow)
}

// commitAfterLocked is the timestamp of commit seq+1, if it is known.
func (h *history) commitAfterLocked(seq uint64) (time.Time, bool) {
	for i := len(h.commits) - 1; i >= 0; i-- {
		if h.commits[i].seq == seq+1 {
			return h.commits[i].ts, true
		}
		if h.commits[i].seq <= seq {
			break
		}
	}
	return time.Time{}, false
}

func (db *DB) releaseVersion(v *version) {
	h := &db.history
	h.mu.Lock()
	v.refs--
	closeNow := v.evicted && v.refs == 0
	h.mu.Unlock()
	if closeNow {
		closeVersions([]*version{v})
	}
}

// trimHistory drops expired versions. When the WAL has grown large it drops all of them,
// keeps none for a moment, and truncates the WAL: SQLite can only restart its WAL when no
// reader holds an old snapshot, and kept versions are exactly such readers. Without versions,
// a WAL past walRestartBytes is held by idle read-only snapshots, which it releases.
func (db *DB) trimHistory(now time.Time) {
	size := db.walSize()
	large := size > maxWALBytes
	h := &db.history
	h.mu.Lock()
	if large {
		h.pausedUntil = now.Add(historyPause)
	}
	var drop []*version
	for len(h.versions) > 0 && (large || now.Sub(h.versions[0].ts) > historyWindow) {
		drop = append(drop, h.evictOldestLocked())
	}
	kept := len(h.versions)
	h.mu.Unlock()
	closeVersions(drop)
	switch {
	case large:
		db.releaseIdleSnapshots(now, largeWALSnapshotIdle)
		if err := db.truncateWAL(100 * time.Millisecond); err != nil {
			db.e.opts.Logf("spanneremu: %s: WAL of %d bytes not truncated yet: %v", db.name, size, err)
		}
	case kept == 0 && size > walRestartBytes:
		// Under load a reader is often in the way: the WAL restarts without the truncation.
		db.releaseIdleSnapshots(now, largeWALSnapshotIdle)
		db.truncateWAL(0)
	}
}

// walSize is the size of the database's WAL (0 when there is none).
func (db *DB) walSize() int64 {
	path := db.path + "-wal"
	if size, ok := memvfs.Size(path); ok {
		return size
	}
	if fi, err := os.Stat(path); err == nil {
		return fi.Size()
	}
	return 0
}

// largeWALSnapshotIdle is how idle a read-only transaction's snapshot may be before it is
// released early because the WAL has grown large: the Go client never ends read-only
// transactions, so under sustained load their snapshots would otherwise always hold the WAL.
const largeWALSnapshotIdle = 100 * time.Millisecond

// releaseIdleSnapshots releases pinned read-only snapshots idle longer than idle.
func (db *DB) releaseIdleSnapshots(now time.Time, idle time.Duration) {
	db.mu.Lock()
	var ts []*Txn
	for t := range db.pinned {
		if now.Sub(time.Unix(0, t.lastUsed.Load())) > idle {
			ts = append(ts, t)
		}
	}
	db.mu.Unlock()
	for _, t := range ts {
		if t.mu.TryLock() {
			t.releaseSnapshot()
			t.mu.Unlock()
		}
	}
}

// truncateWAL checkpoints and truncates the WAL if no reader is in the way, waiting for one at
// most wait (with the write lock held: every commit waits too); otherwise it says why not (the
// janitor tries again on its next round).
func (db *DB) truncateWAL(wait time.Duration) error {
	timer := time.NewTimer(50 * time.Millisecond)
	defer timer.Stop()
	select {
	case db.lock <- struct{}{}:
	case <-timer.C:
		return errors.New("the write lock is busy")
	}
	defer func() { <-db.lock }()
	ctx := context.Background()
	db.writer.ExecContext(ctx, "PRAGMA busy_timeout="+strconv.FormatInt(wait.Milliseconds(), 10))
	defer db.writer.ExecContext(ctx, "PRAGMA busy_timeout=20000")
	var busy, logFrames, checkpointed int
	if err := db.writer.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logFrames, &checkpointed); err != nil {
		return err
	}
	if busy != 0 {
		return errors.New("readers still open")
	}
	return nil
}

// closeHistory drops every version (the database is closing).
func (db *DB) closeHistory() {
	h := &db.history
	h.mu.Lock()
	drop := h.versions
	h.versions = nil
	for _, v := range drop {
		v.evicted = true
	}
	h.mu.Unlock()
	closeVersions(drop)
}
