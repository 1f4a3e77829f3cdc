package engine

import (
	"context"
	"database/sql"
	"sync"
)

// Statement caches. Preparing a statement costs SQLite about as much as running a point read,
// and the same few statements (a mutation's INSERT, a translated query) run over and over, so
// connections keep their prepared statements by SQL text. SQLite re-prepares a cached
// statement by itself after a schema change.

const maxCachedStatements = 1024

// cachedConn is a connection with its own statement cache. Only one goroutine uses it at a
// time (the writer connection is used under the write lock).
type cachedConn struct {
	*sql.Conn
	stmts map[string]*sql.Stmt
}

func newCachedConn(c *sql.Conn) *cachedConn {
	return &cachedConn{Conn: c, stmts: map[string]*sql.Stmt{}}
}

func (c *cachedConn) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	if s, ok := c.stmts[q]; ok {
		return s, nil
	}
	s, err := c.Conn.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if len(c.stmts) >= maxCachedStatements {
		c.closeStatements()
	}
	c.stmts[q] = s
	return s, nil
}

func (c *cachedConn) closeStatements() {
	for q, s := range c.stmts {
		s.Close()
		delete(c.stmts, q)
	}
}

// ExecContext runs a statement through the cache.
func (c *cachedConn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	s, err := c.stmt(ctx, q)
	if err != nil {
		return nil, err
	}
	return s.ExecContext(ctx, args...)
}

// QueryContext runs a query through the cache.
func (c *cachedConn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	s, err := c.stmt(ctx, q)
	if err != nil {
		return nil, err
	}
	return s.QueryContext(ctx, args...)
}

// QueryRowContext runs a single-row query through the cache.
func (c *cachedConn) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	s, err := c.stmt(ctx, q)
	if err != nil {
		return c.Conn.QueryRowContext(ctx, q, args...)
	}
	return s.QueryRowContext(ctx, args...)
}

// Close closes the cached statements and the connection.
func (c *cachedConn) Close() error {
	c.closeStatements()
	return c.Conn.Close()
}

// cachedPool runs reads on any pooled connection with statements prepared once per
// connection (database/sql keeps a DB-level statement prepared on each connection it used).
type cachedPool struct {
	db    *sql.DB
	mu    sync.Mutex
	stmts map[string]*sql.Stmt
}

func (p *cachedPool) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	p.mu.Lock()
	s, ok := p.stmts[q]
	if !ok {
		var err error
		if s, err = p.db.PrepareContext(ctx, q); err != nil {
			p.mu.Unlock()
			return nil, err
		}
		if len(p.stmts) >= maxCachedStatements {
			for k, old := range p.stmts {
				old.Close()
				delete(p.stmts, k)
			}
		}
		p.stmts[q] = s
	}
	p.mu.Unlock()
	return s.QueryContext(ctx, args...)
}

func (p *cachedPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, s := range p.stmts {
		s.Close()
		delete(p.stmts, k)
	}
}

// reader returns the connection a read of the newest committed data runs on, and done, to be
// called once the read's rows are read: the writer connection when no transaction holds the
// write lock (taken for the read, so no commit lands in it), else a pooled connection. In WAL
// mode SQLite throws a connection's page cache away whenever another connection has committed
// since its last read, which under a stream of commits is nearly every read on a pooled
// connection: it reads every page its statement walks again, from the root down. The writer's
// cache holds the pages its own commits wrote and read. reader never waits for the lock, so it
// cannot deadlock a caller that holds other locks, and a commit waiting for the lock gets it
// before the next reader (a channel's blocked sender is served as the buffer frees).
func (db *DB) reader() (q querier, done func()) {
	select {
	case db.lock <- struct{}{}:
		return db.writer, db.unlockReader
	default:
		return db.pool, func() {}
	}
}

func (db *DB) unlockReader() { <-db.lock }
