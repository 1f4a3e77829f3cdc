package engine

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// A read-only transaction keeps its snapshot pinned until the janitor finds it idle (the Go
// client never ends one), and SQLite cannot restart a WAL that a snapshot holds. Without
// versions, a WAL past walRestartBytes has the janitor release the read-only snapshots idle for
// largeWALSnapshotIdle and truncate it, and it then stays short; a database that keeps versions
// is left alone until maxWALBytes (its versions hold the WAL anyway).
func TestIdleReadOnlySnapshotsDoNotHoldTheWAL(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     Options
		released bool
	}{
		{"without history", Options{NoHistory: true}, true},
		{"with history", Options{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, db := newTestEngine(t, tc.opts, `CREATE TABLE Singers (SingerId INT64 NOT NULL, Name STRING(MAX)) PRIMARY KEY (SingerId)`)
			w := &singerWriter{t: t, db: db, body: strings.Repeat("x", 40_000)} // about ten pages a commit
			write := w.write
			write()
			ro, err := db.Begin(TxnOptions{Mode: ReadOnly})
			if err != nil {
				t.Fatal(err)
			}
			read(t, ro, "Singers", str("1")) // pins its snapshot
			for walSize(t, db) <= walRestartBytes {
				write()
			}
			n := w.n
			t.Logf("%d commits, WAL %d bytes", n, walSize(t, db))
			db.trimHistory(time.Now().Add(time.Second)) // the janitor, the snapshot idle for a second
			db.mu.Lock()
			pinned := db.pinned[ro]
			db.mu.Unlock()
			if pinned == tc.released {
				t.Fatalf("read-only snapshot pinned after the janitor's round: %v, want %v (WAL %d bytes)", pinned, !tc.released, walSize(t, db))
			}
			if !tc.released {
				return
			}
			if size := walSize(t, db); size != 0 {
				t.Errorf("WAL after the janitor's round: %d bytes, want it truncated", size)
			}
			// With nothing holding it, SQLite restarts the WAL after each checkpoint.
			for range n {
				write()
			}
			if size := walSize(t, db); size > walRestartBytes {
				t.Errorf("WAL after %d more commits: %d bytes, want at most %d", n, size, walRestartBytes)
			}
		})
	}
}

// singerWriter commits a Singers row of body per write, keyed 1, 2, ...
type singerWriter struct {
	t    *testing.T
	db   *DB
	body string
	n    int // rows written
}

func (w *singerWriter) write() {
	w.t.Helper()
	w.n++
	if err := commit(w.t, w.db, insert("Singers", []string{"SingerId", "Name"}, row(str(strconv.Itoa(w.n)), str(w.body)))); err != nil {
		w.t.Fatal(err)
	}
}

func walSize(t *testing.T, db *DB) int64 {
	t.Helper()
	return db.walSize()
}
