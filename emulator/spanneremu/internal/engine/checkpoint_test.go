package engine

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// No commit runs a checkpoint (the writer's wal_autocheckpoint is 0); the checkpointer copies the
// WAL once commits have woken it, and once it has copied all of it SQLite restarts the WAL from
// its start at the next commit, so the WAL holds that commit's frames only.
func TestCheckpointsRunOffTheWriteLock(t *testing.T) {
	_, db := newTestEngine(t, Options{NoHistory: true}, `CREATE TABLE Singers (SingerId INT64 NOT NULL, Name STRING(MAX)) PRIMARY KEY (SingerId)`)
	ctx := context.Background()
	var autocheckpoint int
	if err := db.writer.QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&autocheckpoint); err != nil {
		t.Fatal(err)
	}
	if autocheckpoint != 0 {
		t.Errorf("the writer's wal_autocheckpoint is %d, want 0: a commit would checkpoint with the write lock held", autocheckpoint)
	}
	cols := []string{"SingerId", "Name"}
	body := strings.Repeat("x", 5_000) // two pages a commit
	n := 0
	write := func() {
		t.Helper()
		n++
		if err := commit(t, db, insert("Singers", cols, row(str(strconv.Itoa(n)), str(body)))); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 * checkpointEvery {
		write()
	}
	deadline := time.Now().Add(10 * time.Second)
	for db.checkpoints.copiedTo.Load() < db.checkpoints.commits.Load() {
		if time.Now().After(deadline) {
			t.Fatalf("after %d commits the checkpointer has not copied the whole WAL (%d passes)", n, db.checkpoints.passes.Load())
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
