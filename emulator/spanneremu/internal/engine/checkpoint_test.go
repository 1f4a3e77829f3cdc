package engine

import (
	"context"
	"strings"
	"testing"
	"time"
)

// Below SQLite's threshold no commit checkpoints; the checkpointer copies the WAL once commits
// have woken it, and once it has copied all of it SQLite restarts the WAL from its start at the
// next commit, so the WAL holds that commit's frames only.
func TestCheckpointsRunOffTheWriteLock(t *testing.T) {
	_, db := newTestEngine(t, Options{NoHistory: true}, `CREATE TABLE Singers (SingerId INT64 NOT NULL, Name STRING(MAX)) PRIMARY KEY (SingerId)`)
	ctx := context.Background()
	// A row a page: the commits stay far below the 1000 pages at which a commit checkpoints.
	w := &singerWriter{t: t, db: db, body: strings.Repeat("x", 2_000)}
	write := w.write
	for range 3 * checkpointEvery {
		write()
	}
	// The WAL's extent bounds the frames it ever held: under 1000, no commit checkpointed.
	if size := walSize(t, db); size >= 1000*(4096+24) {
		t.Fatalf("WAL of %d bytes after %d commits: SQLite's own threshold was reached, the test proves nothing", size, w.n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for db.checkpoints.copiedTo.Load() < db.checkpoints.commits.Load() {
		if time.Now().After(deadline) {
			t.Fatalf("after %d commits the checkpointer has not copied the whole WAL (%d passes)", w.n, db.checkpoints.passes.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	write()
	// A passive checkpoint reports the frames in the WAL: after a restart, only the last commit's.
	var busy, frames, done int
	if err := db.sqldb.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &frames, &done); err != nil {
		t.Fatal(err)
	}
	if frames > 10 {
		t.Errorf("the WAL holds %d frames after the checkpointer caught up and one more commit: it did not restart", frames)
	}
}
