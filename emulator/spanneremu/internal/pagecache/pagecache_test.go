package pagecache_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/pagecache"
)

func TestMain(m *testing.M) {
	if err := pagecache.Install(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// open opens a database with a small page cache, so that pages are recycled, refused and
// spilled, not only cached.
func open(t *testing.T, dsn string, cachePages int) *sql.DB {
	t.Helper()
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	db, err := sql.Open("sqlite", fmt.Sprintf("%s%s_pragma=busy_timeout(20000)&_pragma=cache_size(%d)", dsn, sep, cachePages))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func exec(t *testing.T, db interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, query string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func integrityCheck(t *testing.T, db *sql.DB) {
	t.Helper()
	var got string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != "ok" {
		t.Fatalf("integrity_check: %s", got)
	}
}

// TestSecondInstallIsHarmless: the engine installs the cache at init and tests may call Install
// again; once a connection is open, installing again must not fail or change the cache.
func TestSecondInstallIsHarmless(t *testing.T) {
	db := open(t, "file:"+filepath.Join(t.TempDir(), "a.db"), 100)
	exec(t, db, "CREATE TABLE t (k INTEGER PRIMARY KEY)")
	if err := pagecache.Install(); err != nil {
		t.Fatalf("Install after a connection opened: %v", err)
	}
	// Connections opened afterwards still take their pages from this cache.
	before := pagecache.ReadStats()
	db2 := open(t, "file:"+filepath.Join(t.TempDir(), "b.db"), 100)
	exec(t, db2, "CREATE TABLE t (k INTEGER PRIMARY KEY)")
	if after := pagecache.ReadStats(); after.Allocs+after.Reused == before.Allocs+before.Reused {
		t.Errorf("a connection opened after the second Install made no page here (stats before %+v, after %+v)", before, after)
	}
}

// TestConcurrentTransfersKeepEveryReadConsistent runs writers moving amounts between accounts
// (the total never changes) on a WAL database with a 20-page cache, while readers on their own
// connections sum the accounts in a transaction: every sum must be the total, the database must
// pass integrity_check, and the final balances must be the ones the writers made. The readers'
// caches are thrown away after nearly every commit, so their pages come from the blocks they
// kept: the test also checks that blocks were reused.
func TestConcurrentTransfersKeepEveryReadConsistent(t *testing.T) {
	const accounts, initial, writers, readers, transfers = 400, 1000, 2, 4, 300
	db := open(t, "file:"+filepath.Join(t.TempDir(), "bank.db")+"?_pragma=journal_mode(WAL)", 20)
	db.SetMaxOpenConns(writers + readers + 1)
	// A long padding column spreads the accounts over many pages, so a sum reads far more pages
	// than the cache holds.
	exec(t, db, "CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL, pad TEXT NOT NULL)")
	for i := range accounts {
		exec(t, db, "INSERT INTO accounts VALUES (?, ?, ?)", i, initial, strings.Repeat("x", 300))
	}
	before := pagecache.ReadStats()

	want := make([]int, accounts)
	for i := range want {
		want[i] = initial
	}
	var mu sync.Mutex // guards want
	ctx := context.Background()
	errs := make(chan error, writers+readers)
	var wwg, rwg sync.WaitGroup
	for w := range writers {
		wwg.Go(func() {
			for n := range transfers {
				from, to, amount := (w*7919+n*31)%accounts, (w*104729+n*17+1)%accounts, n%50+1
				if from == to {
					continue
				}
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					errs <- err
					return
				}
				if _, err := tx.Exec("UPDATE accounts SET balance = balance - ? WHERE id = ?", amount, from); err != nil {
					tx.Rollback()
					errs <- err
					return
				}
				if _, err := tx.Exec("UPDATE accounts SET balance = balance + ?, pad = ? WHERE id = ?", amount, strings.Repeat(string(rune('a'+n%26)), 300), to); err != nil {
					tx.Rollback()
					errs <- err
					return
				}
				if err := tx.Commit(); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				want[from] -= amount
				want[to] += amount
				mu.Unlock()
			}
		})
	}
	done := make(chan struct{})
	sums := make([]int, readers)
	for r := range readers {
		rwg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
				if err != nil {
					errs <- err
					return
				}
				var sum, n int
				err = tx.QueryRow("SELECT SUM(balance), COUNT(*) FROM accounts").Scan(&sum, &n)
				tx.Rollback()
				if err != nil {
					errs <- err
					return
				}
				if sum != accounts*initial || n != accounts {
					errs <- fmt.Errorf("reader %d: sum %d over %d accounts, want %d over %d", r, sum, n, accounts*initial, accounts)
					return
				}
				sums[r]++
			}
		})
	}
	// The readers run until the writers are done.
	wwg.Wait()
	close(done)
	rwg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for r, n := range sums {
		if n == 0 {
			t.Errorf("reader %d never completed a read", r)
		}
	}

	integrityCheck(t, db)
	rows, err := db.Query("SELECT id, balance FROM accounts ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, balance int
		if err := rows.Scan(&id, &balance); err != nil {
			t.Fatal(err)
		}
		if balance != want[id] {
			t.Errorf("account %d: balance %d, want %d", id, balance, want[id])
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	after := pagecache.ReadStats()
	if after.Reused == before.Reused {
		t.Errorf("no page was made from a kept block (stats before %+v, after %+v)", before, after)
	}
}

// TestAutoVacuumMovesAndTruncatesPages: with auto_vacuum=FULL, deleting most rows makes SQLite
// move pages from the end of the file into the freed ones (xRekey) and cut the file
// (xTruncate above page 0); the rows left must read back intact.
func TestAutoVacuumMovesAndTruncatesPages(t *testing.T) {
	db := open(t, "file:"+filepath.Join(t.TempDir(), "vacuum.db")+"?_pragma=auto_vacuum(FULL)", 20)
	db.SetMaxOpenConns(1)
	exec(t, db, "CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)")
	exec(t, db, "CREATE INDEX t_v ON t (v)")
	const rows = 2000
	for i := range rows {
		exec(t, db, "INSERT INTO t VALUES (?, ?)", i, fmt.Sprintf("%04d-%s", i, strings.Repeat("v", 400)))
	}
	pages := func() int {
		var n int
		if err := db.QueryRow("PRAGMA page_count").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	full, before := pages(), pagecache.ReadStats()
	exec(t, db, "DELETE FROM t WHERE k % 4 != 0")
	if got := pages(); got >= full {
		t.Errorf("page_count %d after deleting three rows in four, was %d: the file was not cut", got, full)
	}
	if after := pagecache.ReadStats(); after.Rekeys == before.Rekeys {
		t.Errorf("no page was moved (stats before %+v, after %+v)", before, after)
	}
	integrityCheck(t, db)
	var n, sum int
	if err := db.QueryRow("SELECT COUNT(*), SUM(k) FROM t WHERE v = printf('%04d-', k) || ?", strings.Repeat("v", 400)).Scan(&n, &sum); err != nil {
		t.Fatal(err)
	}
	wantN, wantSum := 0, 0
	for k := 0; k < rows; k += 4 {
		wantN, wantSum = wantN+1, wantSum+k
	}
	if n != wantN || sum != wantSum {
		t.Errorf("rows left: %d with keys summing to %d, want %d and %d", n, sum, wantN, wantSum)
	}
}

// TestInMemoryDatabaseKeepsEveryPage: an in-memory database has nowhere to write a page back, so
// its cache (not purgeable) must keep every page however small cache_size is.
func TestInMemoryDatabaseKeepsEveryPage(t *testing.T) {
	db := open(t, "file::memory:", 10)
	db.SetMaxOpenConns(1) // every connection to :memory: is a database of its own
	exec(t, db, "CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)")
	const rows = 2000
	for i := range rows {
		exec(t, db, "INSERT INTO t VALUES (?, ?)", i, strings.Repeat(string(rune('a'+i%26)), 500))
	}
	var pages int
	if err := db.QueryRow("PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if pages <= 10 {
		t.Fatalf("page_count %d: the table fits the cache, the test proves nothing", pages)
	}
	integrityCheck(t, db)
	rowsRead, err := db.Query("SELECT k, v FROM t ORDER BY k")
	if err != nil {
		t.Fatal(err)
	}
	defer rowsRead.Close()
	got := 0
	for rowsRead.Next() {
		var k int
		var v string
		if err := rowsRead.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		if want := strings.Repeat(string(rune('a'+k%26)), 500); k != got || v != want {
			t.Fatalf("row %d: key %d, value %.10q…, want %.10q…", got, k, v, want)
		}
		got++
	}
	if err := rowsRead.Err(); err != nil {
		t.Fatal(err)
	}
	if got != rows {
		t.Errorf("read %d rows, want %d", got, rows)
	}
}
