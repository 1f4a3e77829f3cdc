package engine

import (
	"context"
	"slices"
	"strings"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/sqlgen"
)

// Exclusive locks: the LOCK_HINT_EXCLUSIVE of a read, and a query's FOR UPDATE, in a read-write
// transaction.
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
// (commit, rollback or abort). Conflicts between exclusive locks are resolved by wound-wait, as
// on Spanner: a transaction that wants a key held by a younger one wounds it (the holder is
// aborted at once if it is between requests, else at its next read, wait or commit; one that is
// already committing finishes), and one that wants a key held by an older one waits for it to
// end. Waits go only from younger to older, so they never form a cycle, and need no time limit:
// every holder ends, if only by the idle timeout. The waiting read then reads what the holder
// wrote, so validation finds nothing stale.
//
// A query with FOR UPDATE takes the same locks on the rows it reads by their whole key, where the
// clause covers them (all of the query's, or a subquery's), when it has the shape of a read by
// key (sqlgen's keyReads: rows by their keys, with subqueries of rows by theirs), before it runs.
// Spanner locks every range a FOR UPDATE query scans; here a query of another shape, like a read
// of ranges, takes none.
//
// The hint only orders exclusive-hinted readers: a read without it still reads optimistically,
// and a commit that writes a locked key is not held up by the lock (the holder's read goes stale
// and it aborts, as when a writer older than it wounds it on Spanner). A read of key ranges, of
// all keys or through an index takes no lock (the hint is a hint: Spanner does not promise it
// either), and neither does a transaction that holds the database lock already (it ran a SQL
// query that calls a volatile function, or DML that scans: no other transaction can commit
// until it ends).

// exclusiveLocks are the keys locked exclusively, by encoded key (keyString), guarded by DB.mu.
type exclusiveLocks map[string]*exclusiveLock

// exclusiveLock is one key's lock: its holder (nil when free) and the transactions waiting for
// it. changed is closed (and replaced) when the lock is freed, or a waiter leaves without it.
type exclusiveLock struct {
	holder  *Txn
	waiters map[*Txn]bool
	changed chan struct{}
}

// grantable reports whether t may take the lock now: it is free (or t's) and no older
// transaction waits for it, so that a freed lock goes to the oldest waiter rather than to
// whichever wakes first (which the oldest would then wound).
func (l *exclusiveLock) grantable(t *Txn) bool {
	if l.holder != nil && l.holder != t && !l.holder.finished() {
		return false
	}
	for w := range l.waiters {
		if w != t && !w.finished() && w.begun.Before(t.begun) {
			return false
		}
	}
	return true
}

// lockKeysExclusive takes the exclusive locks a LOCK_HINT_EXCLUSIVE read of r asks for (see
// above). The caller holds t.mu, not the database lock.
func (t *Txn) lockKeysExclusive(ctx context.Context, r ReadRequest) error {
	schema := t.db.Schema()
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
	return t.lockKeys(ctx, keys)
}

// lockQueryExclusive takes the exclusive locks a query with FOR UPDATE asks for: those of the
// rows it reads by their whole key (sqlgen.Compiled.KeyReads) where FOR UPDATE covers the read,
// with the values args give them. Like a read of key ranges, a query of any other shape, or the
// part of one that reads a range (the children of a row, by its key), takes no lock. The caller
// holds t.mu, not the database lock.
func (t *Txn) lockQueryExclusive(ctx context.Context, c *sqlgen.Compiled, args []any) error {
	var keys []string
	for _, r := range c.KeyReads {
		if !r.Lock || len(r.Params) != len(r.Table.PrimaryKey) {
			continue
		}
		prefixes, _ := keyReadPrefixes(c, r, args)
		for _, vals := range prefixes {
			keys = append(keys, keyString(r.Table.Name, vals))
		}
	}
	return t.lockKeys(ctx, keys)
}

// lockKeys takes the exclusive locks of keys (keyString), in one order whatever order they came
// in, so that two reads of the same keys do not take them crosswise (wound-wait would resolve
// it, with an abort).
func (t *Txn) lockKeys(ctx context.Context, keys []string) error {
	slices.Sort(keys)
	waited := false
	for _, k := range slices.Compact(keys) {
		if err := t.lockExclusive(ctx, k, &waited); err != nil {
			return err
		}
	}
	return nil
}

// lockExclusive takes the exclusive lock of key k, waiting for an older holder and wounding a
// younger one. waited is set (and counted once per read) when it had to wait.
func (t *Txn) lockExclusive(ctx context.Context, k string, waited *bool) error {
	db := t.db
	db.mu.Lock()
	if db.exclusive == nil {
		db.exclusive = exclusiveLocks{}
	}
	l := db.exclusive[k]
	if l == nil {
		l = &exclusiveLock{waiters: map[*Txn]bool{}, changed: make(chan struct{})}
		db.exclusive[k] = l
	}
	defer func() {
		if l.waiters[t] && l.holder != t && len(l.waiters) > 1 {
			// Leaving without the lock (aborted, or its context done): a younger waiter may
			// have stood back for it while the lock was free, so wake the waiters to look again.
			close(l.changed)
			l.changed = make(chan struct{})
		}
		delete(l.waiters, t)
		if l.holder == nil && len(l.waiters) == 0 && db.exclusive[k] == l {
			delete(db.exclusive, k)
		}
		db.mu.Unlock()
	}()
	for {
		if l.grantable(t) {
			if l.holder != t {
				l.holder = t
				t.exclusive = append(t.exclusive, k)
			}
			return nil
		}
		l.waiters[t] = true
		if !*waited {
			*waited = true
			db.e.stats.exclusiveWaits.Add(1)
		}
		holder, changed := l.holder, l.changed
		db.mu.Unlock()
		if holder != nil && t.begun.Before(holder.begun) {
			holder.woundBy(k[:strings.IndexByte(k, 0)])
		}
		var err error
		select {
		case <-changed:
		case <-t.wound:
			err = t.abortWounded()
		case <-ctx.Done():
			err = contextError(ctx)
		}
		db.mu.Lock()
		if err != nil {
			return err
		}
	}
}

// releaseExclusive frees the transaction's exclusive locks (at its end).
func (t *Txn) releaseExclusive() {
	if len(t.exclusive) == 0 {
		return
	}
	db := t.db
	db.mu.Lock()
	for _, k := range t.exclusive {
		l := db.exclusive[k]
		if l == nil || l.holder != t {
			continue
		}
		l.holder = nil
		close(l.changed)
		l.changed = make(chan struct{})
		if len(l.waiters) == 0 {
			delete(db.exclusive, k)
		}
	}
	db.mu.Unlock()
	t.exclusive = nil
}

// woundBy aborts the transaction because an older one wants an exclusive lock it holds on a key
// of table: at once if no request of its own is running, else at its next check (checkReads) or
// wait.
func (t *Txn) woundBy(table string) {
	t.woundOnce.Do(func() {
		t.woundedOn = table
		close(t.wound)
	})
	if t.mu.TryLock() {
		if t.state == active {
			t.abortWounded()
		}
		t.mu.Unlock()
	}
}

// wounded reports whether an older transaction wounded t.
func (t *Txn) wounded() bool {
	select {
	case <-t.wound:
		return true
	default:
		return false
	}
}

// abortWounded aborts the transaction as wounded (see woundBy). The caller holds t.mu.
func (t *Txn) abortWounded() error {
	if t.state == active {
		t.db.e.stats.wounds.Add(1)
		t.db.mu.Lock()
		t.db.countConflict(t.woundedOn + " wounded")
		t.db.mu.Unlock()
		t.abortLocked("Transaction was aborted because an older transaction wanted a lock it held (wound-wait); retry the transaction.")
	}
	return abortedError(t.abortReason)
}
