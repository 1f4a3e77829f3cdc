package engine

import (
	"context"
	"sync/atomic"
)

// Checkpoints off the write lock.
//
// In WAL mode SQLite copies the WAL's pages into the database file (a checkpoint) when a commit
// has taken the WAL past wal_autocheckpoint pages (1000), inside that commit's COMMIT: here with
// the database's write lock held, so every commit queued behind it waited while hundreds of pages
// were read and written. So a goroutine per database checkpoints first, woken every
// checkpointEvery commits: PASSIVE, on a pooled connection, so it waits for no reader or writer
// and no commit waits for it. A checkpoint copies the WAL as it was when it began, so the
// checkpointer runs again at once while commits made meanwhile are left (a few, copied in far
// less time); once it has copied all of it, SQLite restarts the WAL from its start at the next
// commit, well before 1000 pages. SQLite's own checkpoint stays as the backstop: when commits come
// so fast that the checkpointer never finds the WAL copied in between, the commit that takes it
// past 1000 pages checkpoints as before, copying only what the checkpointer has not, and the WAL
// stays as short as it always was.

// checkpointEvery is how many commits wake the checkpointer: the stack's commits write about
// eight pages each (seventeen writes, README "Performance"), so at about 400 pages, half SQLite's
// threshold.
const checkpointEvery = 50

// checkpointPasses bounds the checkpoints of one wake-up: a reader's snapshot can hold frames
// that no pass may copy, and under a steady stream of commits the next wake-up comes soon.
const checkpointPasses = 4

// checkpointer checkpoints a database's WAL on its own goroutine.
type checkpointer struct {
	commits atomic.Int64
	// passes counts the checkpoints run; copiedTo is the count of commits when the last pass that
	// copied the whole WAL began: every commit up to it is in the database file (tests).
	passes   atomic.Int64
	copiedTo atomic.Int64
	kick     chan struct{} // buffered: a wake-up while it runs is one more checkpoint, not many
	done     chan struct{}
	stopped  chan struct{}
}

func newCheckpointer() *checkpointer {
	return &checkpointer{kick: make(chan struct{}, 1), done: make(chan struct{}), stopped: make(chan struct{})}
}

func (c *checkpointer) start(db *DB) {
	go func() {
		defer close(c.stopped)
		for {
			select {
			case <-c.done:
				return
			case <-c.kick:
			}
			c.checkpoint(db)
		}
	}()
}

// checkpoint copies the WAL into the database file until it has copied all of it, a pass copies
// nothing more (a reader holds the rest), or checkpointPasses.
func (c *checkpointer) checkpoint(db *DB) {
	copied := -1
	for range checkpointPasses {
		var busy, frames, done int
		commits := c.commits.Load()
		if err := db.sqldb.QueryRowContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &frames, &done); err != nil {
			db.e.opts.Logf("spanneremu: %s: checkpoint: %v", db.name, err)
			return
		}
		c.passes.Add(1)
		if frames == done {
			c.copiedTo.Store(commits)
			return
		}
		if done == copied {
			return
		}
		copied = done
	}
}

// committed counts n commits, and wakes the checkpointer each time the count passes a multiple of
// checkpointEvery.
func (c *checkpointer) committed(n int) {
	after := c.commits.Add(int64(n))
	if (after-int64(n))/checkpointEvery != after/checkpointEvery {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
}

// stop ends the checkpointer; the database is closing.
func (c *checkpointer) stop() {
	close(c.done)
	<-c.stopped
}
