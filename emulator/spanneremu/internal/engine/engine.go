package engine

import (
	"context"
	"database/sql"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/catalog"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/memvfs"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/pagecache"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/sqlgen"
)

// The engine's connections each keep their own page cache, with no lock shared between them
// (package pagecache says why), and an engine without a data directory keeps its files' contents
// in memory (package memvfs). SQLite takes a page cache only before it is initialised, and
// registering a VFS initialises it, so both happen here, in that order.
func init() {
	if err := pagecache.Install(); err != nil {
		panic(err)
	}
	if err := memvfs.Register(); err != nil {
		panic(err)
	}
}

// Engine holds the databases of one emulator process.
type Engine struct {
	opts    Options
	dir     string
	ownsDir bool

	mu     sync.Mutex
	dbs    map[string]*DB
	closed bool

	stop chan struct{}
	wg   sync.WaitGroup

	stats struct {
		commits, lockTimeouts, lockQueueWaits, conflicts, idleAborts, wounds, readerWaits, exclusiveWaits atomic.Int64
		lockWaits, lockWaited                                                                             atomic.Int64 // lockWaited in nanoseconds
		queryRechecks, groupedCommits, decidedDML                                                         atomic.Int64
		commitHolds, commitHeld, longCommitHolds, longCommitHeld                                          atomic.Int64 // ...Held in nanoseconds
	}
}

// Stats are counters of the engine's transaction outcomes since it started.
type Stats struct {
	Commits int64
	// ByDatabase are each database's commits and rows written (keys in the commits' write sets,
	// index rows not counted), by database id.
	ByDatabase map[string]DatabaseStats
	// Aborts by cause: a wait of LockWait for the lock another transaction held across its
	// requests, an optimistic read invalidated by a
	// concurrent commit, a read-write transaction abandoned past the idle timeout (read-only
	// transactions left idle that long are ended too, uncounted: the Go client never ends them).
	LockTimeouts, Conflicts, IdleAborts int64
	// LockQueueWaits counts each LockWait a transaction spent waiting for the write lock while
	// no transaction held it across requests: waits behind other commits, which do not abort.
	LockQueueWaits int64
	// LockWaits counts the statements and commits of read-write transactions that found their
	// database's write lock taken and waited for it, and LockWaited is how long they waited in
	// all: the commit queue's length in time. Each holder keeps the lock for a moment, but one
	// whose thread the operating system sets aside for another process keeps it for as long, and
	// every waiter with it.
	LockWaits  int64
	LockWaited time.Duration
	// QueryRechecks counts the SQL queries of read-write transactions run again under the lock
	// at commit, because a commit since wrote to a table they read, to see whether their answer
	// changed. A query that reads rows by key (sqlgen's keyReads) is validated by its keys instead.
	QueryRechecks int64
	// DecidedDML counts the DML statements of read-write transactions that a read of committed
	// data decided, without the write lock (decide.go): a consumer's inbox row and version claim.
	DecidedDML int64
	// GroupedCommits counts the commits made by the transaction holding the write lock, in its
	// group (groupcommit.go), rather than by their own: each of them had queued for the lock.
	GroupedCommits int64
	// CommitHolds counts the commits that took the write lock (not those made in another's
	// group), and CommitHeld is how long they held it in all, from taking it to letting it go
	// (their groups' members included). LongCommitHolds and LongCommitHeld are those that held
	// it longer than a millisecond: a holder whose goroutine or thread waits for a processor
	// keeps every commit queued behind it waiting too.
	CommitHolds, LongCommitHolds int64
	CommitHeld, LongCommitHeld   time.Duration
	// Wounds are the transactions aborted because an older one wanted an exclusive lock they
	// held (wound-wait, see locks.go).
	Wounds int64
	// ReaderWaits counts the commits that waited for an older transaction that had read what
	// they write (see readers.go), as Spanner's read locks make them wait.
	ReaderWaits int64
	// ExclusiveWaits counts the reads with LOCK_HINT_EXCLUSIVE that waited for another
	// transaction's exclusive lock on a key they read (see locks.go).
	ExclusiveWaits int64
}

// countCommitHold counts a commit's hold of the write lock (Stats.CommitHolds).
func (e *Engine) countCommitHold(d time.Duration) {
	e.stats.commitHolds.Add(1)
	e.stats.commitHeld.Add(int64(d))
	if d > time.Millisecond {
		e.stats.longCommitHolds.Add(1)
		e.stats.longCommitHeld.Add(int64(d))
	}
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	st := Stats{Commits: e.stats.commits.Load(), LockTimeouts: e.stats.lockTimeouts.Load(), LockQueueWaits: e.stats.lockQueueWaits.Load(),
		Conflicts: e.stats.conflicts.Load(), IdleAborts: e.stats.idleAborts.Load(), Wounds: e.stats.wounds.Load(), ReaderWaits: e.stats.readerWaits.Load(),
		ExclusiveWaits: e.stats.exclusiveWaits.Load(), LockWaits: e.stats.lockWaits.Load(), LockWaited: time.Duration(e.stats.lockWaited.Load()),
		QueryRechecks: e.stats.queryRechecks.Load(), GroupedCommits: e.stats.groupedCommits.Load(), DecidedDML: e.stats.decidedDML.Load(),
		CommitHolds: e.stats.commitHolds.Load(), CommitHeld: time.Duration(e.stats.commitHeld.Load()),
		LongCommitHolds: e.stats.longCommitHolds.Load(), LongCommitHeld: time.Duration(e.stats.longCommitHeld.Load()),
		ByDatabase: map[string]DatabaseStats{}}
	// snapshotDBs leaves out a name reserved while CreateDatabase applies its DDL (nil).
	for _, db := range e.snapshotDBs() {
		name := db.name
		ds := DatabaseStats{Commits: db.commits.Load(), RowsWritten: db.rowsWritten.Load()}
		db.mu.Lock()
		if len(db.conflictsBy) > 0 {
			ds.ConflictsBy = maps.Clone(db.conflictsBy)
		}
		if len(db.heldLocks) > 0 {
			ds.HeldLocks = maps.Clone(db.heldLocks)
		}
		db.mu.Unlock()
		st.ByDatabase[name[strings.LastIndex(name, "/")+1:]] = ds
	}
	return st
}

// DatabaseStats are one database's counters.
type DatabaseStats struct {
	Commits, RowsWritten int64
	// ConflictsBy counts the transactions aborted for an invalidated optimistic read by what
	// that read was: "TABLE key", "TABLE range" (a key range of the table), "TABLE index range",
	// "TABLE table" (a read that covered the whole table), "TABLES query" (a query whose answer
	// changed), "replayed DML failed" or "schema changed"; and those wounded for an exclusive
	// lock on a key of a table, "TABLE wounded".
	ConflictsBy map[string]int64
	// HeldLocks counts the read-write transactions that took the database's write lock before
	// their commit, and so held it across their client's requests, stopping every other commit
	// meanwhile, by why: "DML: SQL" (a statement that cannot run optimistically), "DML not exact:
	// SQL" (one whose reads are not known keys), "DML failed: SQL", "query: SQL" (one that cannot
	// be validated by its result), "read of a table its DML changed: TABLE", "partitioned DML".
	HeldLocks map[string]int64
	// RPCs counts the data API's requests on the database by method ("Commit",
	// "ExecuteStreamingSql", ...), reads by table too ("StreamingRead(Orders)"); the gRPC
	// layer fills it in (spanneremu.Server.Stats).
	RPCs map[string]int64
	// Statements counts the same requests by statement ("ExecuteStreamingSql: SELECT ...",
	// "Commit: insert OutboxEvents, update Orders", "StreamingRead(Orders)"), when the server
	// counts them (spanneremu.Options.CountStatements); nil otherwise.
	Statements map[string]int64
}

const dbFileSuffix = ".spandb"

// New starts an engine. With Options.DataDir set it reopens the databases found there.
func New(opts Options) (*Engine, error) {
	if opts.LockWait <= 0 {
		opts.LockWait = 2 * time.Second
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = 10 * time.Second
	}
	if opts.SnapshotIdle <= 0 {
		opts.SnapshotIdle = 5 * time.Second
	}
	if opts.TTLSweepInterval == 0 {
		opts.TTLSweepInterval = time.Minute
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	sqlgen.Register()
	e := &Engine{opts: opts, dbs: map[string]*DB{}, stop: make(chan struct{})}
	if opts.DataDir == "" {
		dir, err := scratchDir()
		if err != nil {
			return nil, internalf("create temporary directory: %v", err)
		}
		e.dir, e.ownsDir = dir, true
	} else {
		if err := os.MkdirAll(opts.DataDir, 0o755); err != nil {
			return nil, internalf("create data directory: %v", err)
		}
		e.dir = opts.DataDir
		if err := e.loadExisting(); err != nil {
			e.Close()
			return nil, err
		}
	}
	e.wg.Add(1)
	go e.janitor()
	return e, nil
}

func (e *Engine) loadExisting() error {
	files, err := filepath.Glob(filepath.Join(e.dir, "*"+dbFileSuffix))
	if err != nil {
		return internalf("list data directory: %v", err)
	}
	for _, f := range files {
		db, err := openDB(e, "", f, false)
		if err != nil {
			return err
		}
		e.dbs[db.name] = db
		e.opts.Logf("spanneremu: reopened database %s", db.name)
	}
	return nil
}

// Close stops background work and closes every database. Databases kept in a temporary
// directory are deleted.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	dbs := e.dbs
	e.dbs = map[string]*DB{}
	e.mu.Unlock()
	close(e.stop)
	e.wg.Wait()
	for _, db := range dbs {
		if db != nil { // a name reserved by a CreateDatabase still running
			db.close()
		}
	}
	if e.ownsDir {
		os.RemoveAll(e.dir)
		memvfs.RemoveDir(e.dir)
	}
	return nil
}

func (e *Engine) fileFor(name string) string {
	return filepath.Join(e.dir, strings.ReplaceAll(name, "/", "~")+dbFileSuffix)
}

// CreateDatabase creates a database and applies ddl to it. On a DDL error nothing is left behind.
func (e *Engine) CreateDatabase(ctx context.Context, name string, ddl []string) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return errorf(codes.Unavailable, "emulator is shutting down")
	}
	if _, ok := e.dbs[name]; ok {
		e.mu.Unlock()
		return errorf(codes.AlreadyExists, "Database already exists: %s", name)
	}
	// Reserve the name while the DDL runs.
	e.dbs[name] = nil
	e.mu.Unlock()

	path := e.fileFor(name)
	removeDBFiles(path)
	db, err := openDB(e, name, path, true)
	if err == nil && len(ddl) > 0 {
		err = db.applyDDL(ctx, ddl)
	}
	if err == nil {
		db.mu.Lock()
		db.creating, db.createdSeq = false, db.occ.seq
		db.mu.Unlock()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		delete(e.dbs, name)
		if db != nil {
			db.close()
		}
		removeDBFiles(path)
		return err
	}
	e.dbs[name] = db
	return nil
}

func removeDBFiles(path string) {
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		os.Remove(path + suffix)
		memvfs.Remove(path + suffix)
	}
}

// Database returns an open database.
func (e *Engine) Database(name string) (*DB, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	db := e.dbs[name]
	if db == nil {
		return nil, errorf(codes.NotFound, "Database not found: %s", name)
	}
	return db, nil
}

// UpdateDDL applies DDL statements to a database, all or nothing.
func (e *Engine) UpdateDDL(ctx context.Context, name string, stmts []string) error {
	db, err := e.Database(name)
	if err != nil {
		return err
	}
	return db.applyDDL(ctx, stmts)
}

// DDL returns the database's schema as DDL statements.
func (e *Engine) DDL(name string) ([]string, error) {
	db, err := e.Database(name)
	if err != nil {
		return nil, err
	}
	return append([]string(nil), db.Schema().Statements...), nil
}

// DropDatabase deletes a database and its data. Open transactions on it fail from then on.
func (e *Engine) DropDatabase(name string) error {
	e.mu.Lock()
	db := e.dbs[name]
	if db == nil {
		e.mu.Unlock()
		return errorf(codes.NotFound, "Database not found: %s", name)
	}
	delete(e.dbs, name)
	e.mu.Unlock()
	db.close()
	removeDBFiles(db.path)
	return nil
}

// ListDatabases lists the databases of an instance (projects/P/instances/I), by name.
func (e *Engine) ListDatabases(instance string) []DatabaseInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []DatabaseInfo
	for name, db := range e.dbs {
		if db != nil && strings.HasPrefix(name, instance+"/databases/") {
			out = append(out, DatabaseInfo{Name: name, CreateTime: db.created})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// DropInstanceDatabases drops every database of an instance.
func (e *Engine) DropInstanceDatabases(instance string) {
	for _, d := range e.ListDatabases(instance) {
		e.DropDatabase(d.Name)
	}
}

func (e *Engine) snapshotDBs() []*DB {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]*DB, 0, len(e.dbs))
	for _, db := range e.dbs {
		if db != nil {
			out = append(out, db)
		}
	}
	return out
}

// janitor aborts abandoned transactions and runs the row deletion policy sweeper.
func (e *Engine) janitor() {
	defer e.wg.Done()
	tick := e.opts.IdleTimeout / 4
	if e.opts.TTLSweepInterval > 0 && e.opts.TTLSweepInterval < tick {
		tick = e.opts.TTLSweepInterval
	}
	if tick > time.Second {
		tick = time.Second
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	lastSweep := time.Now()
	for {
		select {
		case <-e.stop:
			return
		case now := <-t.C:
			sweep := e.opts.TTLSweepInterval > 0 && now.Sub(lastSweep) >= e.opts.TTLSweepInterval
			if sweep {
				lastSweep = now
			}
			for _, db := range e.snapshotDBs() {
				db.abortIdle(now)
				if sweep {
					db.sweepTTL()
				}
			}
		}
	}
}

// metaTable stores the database's name, creation time and schema inside its SQLite file, so a
// data directory is self-describing.
const metaTable = "_spanneremu_meta"

type dbMeta struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	DDL     []string  `json:"ddl"`
}

func readMeta(ctx context.Context, conn *sql.Conn) (*dbMeta, error) {
	var v string
	if err := conn.QueryRowContext(ctx, `SELECT v FROM `+metaTable+` WHERE k = 'meta'`).Scan(&v); err != nil {
		return nil, err
	}
	var m dbMeta
	if err := json.Unmarshal([]byte(v), &m); err != nil {
		return nil, err
	}
	return &m, nil
}

func writeMetaStmt(m *dbMeta) (string, []any) {
	b, _ := json.Marshal(m)
	return `INSERT OR REPLACE INTO ` + metaTable + ` (k, v) VALUES ('meta', ?)`, []any{string(b)}
}

// compiler lets the catalog translate CHECK, DEFAULT and generated column expressions.
var compiler catalog.ExprCompiler = sqlgen.TableExprCompiler{}
