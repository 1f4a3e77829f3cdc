package engine

import (
	"context"
	"time"
)

// Exclusive locks: the LOCK_HINT_EXCLUSIVE of a read in a read-write transaction.
//
// On Spanner a read-write transaction's reads take shared locks, upgraded to exclusive at
// commit for what it writes. Two transactions that read one row and then write it (a payment
// recorded once from the provider's answer and once from its webhook) both hold the shared lock
// and both want the exclusive one: a deadlock Spanner breaks by aborting one of them. A read
// with LOCK_HINT_EXCLUSIVE takes the exclusive lock at once instead, so the second transaction
// waits for the first to end and then reads what it wrote: the two are serialized without an
// abort, which is what Google recommends the hint for ("high write contention").
//
// Here a transaction's reads are optimistic (occ.go) and the shared locks are modelled by the
// commit's wait for older readers (readers.go). An exclusive-hinted read of keys of a table
// takes, before it reads, an exclusive lock on each key, held until the transaction ends
// (commit, rollback or abort): a second exclusive-hinted read of a key waits for the holder to
// end, at most LockWait in all, and is then aborted like a lock wait that timed out. Its read
// starts after the holder's commit is recorded, so validation finds nothing stale. The hint only
// orders exclusive-hinted readers: a read without it still reads optimistically, and a commit
// that writes a locked key is not held up by the lock (it wounds the holder, whose read is
// invalidated, as a writer older than the holder would on Spanner). A read of key ranges, of all
// keys or through an index takes no lock (the hint is a hint: Spanner does not promise it
// either), and neither does a transaction that holds the database lock already (it ran a SQL
// query: no other transaction can commit until it ends). Waits are not checked for cycles: two
// transactions that lock two keys in opposite orders wait until LockWait aborts one of them.

// exclusiveLocks are the keys held exclusively, by encoded key (keyString), guarded by DB.mu.
type exclusiveLocks map[string]*Txn

// lockKeysExclusive takes the exclusive locks a LOCK_HINT_EXCLUSIVE read of r asks for (see
// above). The caller holds t.mu, not the database lock.
func (t *Txn) lockKeysExclusive(ctx context.Context, r ReadRequest) error {
	db := t.db
	schema := db.Schema()
	if r.Index != "" || r.KeySet == nil || r.KeySet.All || len(r.KeySet.Ranges) > 0 {
		return nil
	}
	table, ok := schema.Table(r.Table)
	if !ok {
		return nil // the read itself reports it
	}
	kc := tableKey(table)
	keys := make([]string, 0, len(r.KeySet.Keys))
	for _, k := range r.KeySet.Keys {
		vals, err := decodeKey(kc, k, false, "key")
		if err != nil {
			return nil // the read itself reports it
		}
		keys = append(keys, keyString(table.Name, vals))
	}
	var timer *time.Timer
	for _, k := range keys {
		for {
			db.mu.Lock()
			holder := db.exclusive[k]
			if holder == nil || holder == t || holder.finished() {
				if db.exclusive == nil {
					db.exclusive = exclusiveLocks{}
				}
				db.exclusive[k] = t
				t.exclusive = append(t.exclusive, k)
				db.mu.Unlock()
				break
			}
			db.mu.Unlock()
			if timer == nil {
				timer = time.NewTimer(db.e.opts.LockWait)
				defer timer.Stop()
				db.e.stats.exclusiveWaits.Add(1)
			}
			select {
			case <-holder.ended:
			case <-timer.C:
				db.e.stats.lockTimeouts.Add(1)
				t.abortLocked("Transaction was aborted because it could not acquire a lock held by a concurrent transaction in time; retry the transaction.")
				return abortedError(t.abortReason)
			case <-ctx.Done():
				return contextError(ctx)
			}
		}
	}
	return nil
}

// releaseExclusive frees the transaction's exclusive locks (at its end).
func (t *Txn) releaseExclusive() {
	if len(t.exclusive) == 0 {
		return
	}
	db := t.db
	db.mu.Lock()
	for _, k := range t.exclusive {
		if db.exclusive[k] == t {
			delete(db.exclusive, k)
		}
	}
	db.mu.Unlock()
	t.exclusive = nil
}
