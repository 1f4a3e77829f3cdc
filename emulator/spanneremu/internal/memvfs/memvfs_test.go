package memvfs

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	_ "modernc.org/sqlite"
)

func TestMain(m *testing.M) {
	if err := Register(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// TestReadWriteTruncate: reads past the end are short, a file grows across chunks with zeros in
// any gap, and bytes cut off by a truncation read as zeros when the file grows again.
func TestReadWriteTruncate(t *testing.T) {
	f := &file{}
	buf := make([]byte, 10)
	if n := f.readAt(buf, 0); n != 0 {
		t.Fatalf("read of an empty file: %d bytes", n)
	}
	data := bytes.Repeat([]byte("abcdefgh"), chunkSize/4) // two chunks
	f.writeAt(data, 100)
	if f.size != int64(100+len(data)) || len(f.chunks) != 3 {
		t.Fatalf("size %d in %d chunks after writing %d bytes at 100", f.size, len(f.chunks), len(data))
	}
	got := make([]byte, len(data)+100)
	if n := f.readAt(got, 0); n != len(got) {
		t.Fatalf("read %d bytes, want %d", n, len(got))
	}
	if !bytes.Equal(got[:100], make([]byte, 100)) || !bytes.Equal(got[100:], data) {
		t.Fatal("read back something else than the zeros and the bytes written")
	}
	if n := f.readAt(buf, f.size-4); n != 4 {
		t.Fatalf("read across the end: %d bytes, want 4", n)
	}
	f.truncate(chunkSize + 10)
	if f.size != chunkSize+10 || len(f.chunks) != 2 {
		t.Fatalf("size %d in %d chunks after truncating to %d", f.size, len(f.chunks), chunkSize+10)
	}
	f.writeAt([]byte("z"), 3*chunkSize)
	got = make([]byte, 2*chunkSize)
	f.readAt(got, chunkSize+10)
	if !bytes.Equal(got[:2*chunkSize-10], make([]byte, 2*chunkSize-10)) {
		t.Error("bytes cut off by the truncation came back when the file grew again")
	}
}

func open(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?vfs="+Name+"&_pragma=journal_mode(WAL)&_pragma=busy_timeout(20000)&_pragma=cache_size(20)")
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func diskSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestDatabaseInMemory: a WAL database's pages live in memory, not in its files on disk (which
// exist, empty, for SQLite's locks), and its WAL index in the heap (no -shm file: unix-excl),
// through commits, concurrent readers, a checkpoint that truncates the WAL, and every connection
// closing (SQLite deletes the WAL then) and opening again. Remove drops the contents.
func TestDatabaseInMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mem.db")
	db := open(t, path)
	db.SetMaxOpenConns(5)
	if _, err := db.Exec("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	const rows = 500
	value := func(k int) string { return strings.Repeat(string(rune('a'+k%26)), 300) }
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	wg.Go(func() {
		for k := range rows {
			if _, err := db.Exec("INSERT INTO t VALUES (?, ?)", k, value(k)); err != nil {
				errs <- err
				return
			}
		}
	})
	for range 3 {
		wg.Go(func() {
			for range 50 {
				// The keys of a snapshot are 0..n-1, each with its value.
				var n, bad int
				if err := db.QueryRow("SELECT COUNT(*), COUNT(*) FILTER (WHERE k >= (SELECT COUNT(*) FROM t)) FROM t").Scan(&n, &bad); err != nil {
					errs <- err
					return
				}
				if bad != 0 {
					errs <- fmt.Errorf("a snapshot of %d rows has %d keys past its count", n, bad)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	size, ok := Size(path)
	wal, walOK := Size(path + "-wal")
	if !ok || !walOK || size == 0 || wal == 0 {
		t.Fatalf("in memory: database %d bytes (%v), WAL %d bytes (%v)", size, ok, wal, walOK)
	}
	if d, w := diskSize(t, path), diskSize(t, path+"-wal"); d != 0 || w != 0 {
		t.Errorf("on disk: database %d bytes, WAL %d bytes; want both empty", d, w)
	}
	if _, err := os.Stat(path + "-shm"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the WAL index is a file on disk (stat: %v); want it in the heap", err)
	}
	check := func(when string) {
		t.Helper()
		var integrity string
		if err := db.QueryRow("PRAGMA integrity_check").Scan(&integrity); err != nil || integrity != "ok" {
			t.Fatalf("%s: integrity_check %q, %v", when, integrity, err)
		}
		rs, err := db.Query("SELECT k, v FROM t ORDER BY k")
		if err != nil {
			t.Fatal(err)
		}
		defer rs.Close()
		k := 0
		for ; rs.Next(); k++ {
			var got int
			var v string
			if err := rs.Scan(&got, &v); err != nil {
				t.Fatal(err)
			}
			if got != k || v != value(k) {
				t.Fatalf("%s: row %d is (%d, %.5q…)", when, k, got, v)
			}
		}
		if err := rs.Err(); err != nil || k != rows {
			t.Fatalf("%s: %d rows (%v), want %d", when, k, err, rows)
		}
	}
	check("after the inserts")

	var busy, frames, done int
	if err := db.QueryRow("PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &frames, &done); err != nil || busy != 0 {
		t.Fatalf("checkpoint: busy %d, %v", busy, err)
	}
	if wal, _ := Size(path + "-wal"); wal != 0 {
		t.Errorf("WAL after a truncating checkpoint: %d bytes", wal)
	}
	check("after the checkpoint")

	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := Size(path + "-wal"); ok {
		t.Error("the WAL is still in memory after its last connection closed")
	}
	db = open(t, path)
	defer db.Close()
	check("opened again")

	db.Close()
	Remove(path, path+"-wal")
	if _, ok := Size(path); ok {
		t.Error("the database is still in memory after Remove")
	}
}
