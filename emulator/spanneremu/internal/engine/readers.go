package engine

import (
	"context"
	"time"
)

// Commits wait for older readers, as Spanner's read locks make them.
//
// On Spanner a read-write transaction's reads take shared locks, and a commit that writes a row
// another transaction holds a shared lock on is resolved by wound-wait: a writer younger than
// the reader waits for the reader to finish, an older one wounds (aborts) it. Validation alone
// (occ.go) always lets the writer through and aborts the reader, so a transaction that read a
// row another one then wrote was aborted even where Spanner would have let it commit first: the
// webhook that reads a payment while the provider's answer is being recorded, the relay's mark
// that reads its shard's lease while the lease is renewed. So before a commit takes the lock it
// looks for active transactions older than itself whose optimistic reads cover what it writes,
// and waits for them to end (at most LockWait in all, after which it goes ahead and the reader
// is aborted as before). A writer never waits for a younger reader, so waits cannot form a
// cycle. The wait only decides which transaction goes first: validation still decides whether
// a read went stale, so two transactions that both read and write a row still end with one of
// them aborted, as on Spanner.

// readerIndex finds the active read-write transactions whose optimistic reads cover a write.
// Guarded by DB.mu.
type readerIndex struct {
	byKey   map[string]map[*Txn]bool // key footprints, by encoded key
	byTable map[string]map[*Txn]bool // every transaction with a footprint in the table
}

func (x *readerIndex) add(t *Txn, fps []footprint) {
	if x.byKey == nil {
		x.byKey, x.byTable = map[string]map[*Txn]bool{}, map[string]map[*Txn]bool{}
	}
	for _, f := range fps {
		if f.key != "" {
			addReader(x.byKey, f.key, t)
		}
		addReader(x.byTable, f.table, t)
	}
}

func addReader(m map[string]map[*Txn]bool, k string, t *Txn) {
	s := m[k]
	if s == nil {
		s = map[*Txn]bool{}
		m[k] = s
	}
	s[t] = true
}

func (x *readerIndex) remove(t *Txn, fps []footprint) {
	for _, f := range fps {
		if f.key != "" {
			removeReader(x.byKey, f.key, t)
		}
		removeReader(x.byTable, f.table, t)
	}
}

func removeReader(m map[string]map[*Txn]bool, k string, t *Txn) {
	if s := m[k]; s != nil {
		delete(s, t)
		if len(s) == 0 {
			delete(m, k)
		}
	}
}

// olderReader returns an active transaction begun before t whose reads cover something ws
// writes, nil if there is none.
func (x *readerIndex) olderReader(t *Txn, ws *writeSet) *Txn {
	older := func(r *Txn) bool { return r != t && r.begun.Before(t.begun) && !r.finished() }
	for table := range ws.tables {
		for r := range x.byTable[table] {
			if older(r) {
				return r
			}
		}
	}
	for k, wk := range ws.keys {
		for r := range x.byKey[k] {
			if older(r) {
				return r
			}
		}
		for r := range x.byTable[wk.table] {
			if !older(r) {
				continue
			}
			for _, f := range r.footprints {
				if f.key == "" && f.covers(wk) {
					return r
				}
			}
		}
	}
	return nil
}

// waitForOlderReaders waits until no active transaction older than t has read what ws writes,
// at most LockWait. The caller holds t.mu, not the lock.
func (t *Txn) waitForOlderReaders(ctx context.Context, ws *writeSet) error {
	db := t.db
	var timer *time.Timer
	for {
		db.mu.Lock()
		r := db.readers.olderReader(t, ws)
		db.mu.Unlock()
		if r == nil {
			return nil
		}
		if timer == nil {
			timer = time.NewTimer(db.e.opts.LockWait)
			defer timer.Stop()
			db.e.stats.readerWaits.Add(1)
		}
		select {
		case <-r.ended:
		case <-timer.C:
			return nil
		case <-t.wound:
			return t.abortWounded()
		case <-ctx.Done():
			return contextError(ctx)
		}
	}
}
