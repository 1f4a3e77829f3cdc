package relay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"cloud.google.com/go/spanner"
	"go.uber.org/zap"

	"github.com/spanmart/spanmart/gen/dao"
	"github.com/spanmart/spanmart/gen/dao/outboxdb"
)

// Marking: the rows a batch enqueued become published (with the subscribers whose tasks exist,
// for the delivery ledger), and its failed rows back off or are quarantined, in a read-write
// transaction that writes a batch only if this instance still holds its shard at the epoch it
// was scanned under (fencing). The mark is deferred: a source's mark loop marks every MarkEvery
// all the batches enqueued since, in one transaction, so that a source costs one commit per
// interval rather than one per batch. Delivery does not wait for it (the tasks exist); a scan
// skips the rows enqueued but not marked yet, and a crash before the mark only enqueues them
// again, which their task names make ALREADY_EXISTS.

// markRequest is one batch's results, waiting to be marked.
type markRequest struct {
	shard, epoch int64
	done, failed []*outcome
}

// deferMark queues b for the next mark; its rows are skipped by scans until then.
func (s *source) deferMark(b *markRequest) {
	s.markMu.Lock()
	defer s.markMu.Unlock()
	s.toMark = append(s.toMark, b)
	for _, o := range b.done {
		s.unmarked[o.row.event.ID] = true
	}
	for _, o := range b.failed {
		s.unmarked[o.row.event.ID] = true
	}
}

// skipUnmarked drops from the rows a scan of shards read those enqueued and waiting for their
// mark. A full scan that held some cannot see past them, so their mark wakes the shards;
// otherwise the mark leaves the shards asleep: the rows it skipped are published by the mark.
func (s *source) skipUnmarked(shards []int64, rows []*pendingRow, full bool) []*pendingRow {
	s.markMu.Lock()
	defer s.markMu.Unlock()
	n := len(rows)
	rows = slices.DeleteFunc(rows, func(r *pendingRow) bool { return s.unmarked[r.event.ID] })
	if full && len(rows) < n {
		for _, shard := range shards {
			s.wakeAfterMark[shard] = true
		}
	}
	return rows
}

// markLoop marks the deferred batches every MarkEvery, and once more when ctx ends (a graceful
// stop leaves nothing to enqueue again).
func (s *source) markLoop(ctx context.Context) {
	tick := time.NewTicker(s.r.cfg.MarkEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			s.markDeferred(fctx)
			cancel()
			return
		case <-tick.C:
			s.markDeferred(ctx)
		}
	}
}

// markDeferred marks the batches queued since the last mark, in one transaction. It wakes the
// shards whose full scans skipped rows waiting for this mark (skipUnmarked), and those of the
// batches not marked (the lease lost, or the transaction failed), whose rows are due again for
// whoever holds the shard.
func (s *source) markDeferred(ctx context.Context) {
	s.markMu.Lock()
	group := s.toMark
	s.toMark = nil
	s.markMu.Unlock()
	if len(group) == 0 {
		return
	}
	errs := s.markGroup(ctx, group)
	s.markMu.Lock()
	for _, b := range group {
		for _, o := range b.done {
			delete(s.unmarked, o.row.event.ID)
		}
		for _, o := range b.failed {
			delete(s.unmarked, o.row.event.ID)
		}
	}
	wake := s.wakeAfterMark
	s.wakeAfterMark = map[int64]bool{}
	s.markMu.Unlock()
	for i, b := range group {
		if errs[i] != nil {
			wake[b.shard] = true
		}
		switch err := errs[i]; {
		case err == nil:
			for _, o := range b.done {
				for _, sub := range o.created {
					s.r.metrics.published.WithLabelValues(s.src.Name, sub).Inc()
				}
			}
		case errors.Is(err, errLeaseLost):
		case ctx.Err() == nil:
			s.log.Warn("relay mark failed", zap.Int64("shard", b.shard), zap.Error(err))
		}
	}
	for shard := range wake {
		s.wakeShard(shard)
	}
}

// markSQL reads, in the mark's transaction, the rows of the batches as they stand now, each with
// the shards (of the batches' shards) that this instance holds and at which epoch (the fence):
// one round trip for both. Batches whose rows are all gone have nothing to mark.
const markSQL = `SELECT EventId, PendingShard IS NOT NULL, QuarantinedAt IS NOT NULL, Attempts, ReplayGeneration,
  ARRAY(SELECT AS STRUCT Shard, Epoch FROM OutboxLeases WHERE Shard IN UNNEST(@shards) AND Owner = @owner) AS Held
FROM OutboxEvents
WHERE EventId IN UNNEST(@ids)`

// heldLease is a shard this instance holds, as markSQL reads it.
type heldLease struct {
	Shard, Epoch int64
}

// rowState is a row of a batch as the mark's transaction reads it.
type rowState struct {
	pending, quarantined bool
	attempts, generation int64
}

// markGroup marks group in one transaction and returns each batch's outcome. Only rows still
// pending at the replay generation that was scanned (and, for failures, not quarantined) are
// touched: another instance or an operator may have changed them since the scan, and a row
// replayed into a new generation needs tasks under its new names before it may be marked
// published. A batch whose shard this instance no longer holds at its epoch writes nothing and
// gets errLeaseLost; the other batches are marked.
func (s *source) markGroup(ctx context.Context, group []*markRequest) []error {
	var ids []string
	var shards []int64
	for _, b := range group {
		shards = append(shards, b.shard)
		for _, o := range b.done {
			ids = append(ids, o.row.event.ID)
		}
		for _, o := range b.failed {
			ids = append(ids, o.row.event.ID)
		}
	}
	stmt := spanner.Statement{SQL: markSQL, Params: map[string]any{"ids": ids, "shards": shards, "owner": s.r.cfg.Owner}}
	errs := make([]error, len(group))
	var quarantined []*outcome
	_, err := s.src.Client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		cur := map[string]rowState{}
		var held []*heldLease
		err := txn.Query(ctx, stmt).Do(func(r *spanner.Row) error {
			var (
				id string
				st rowState
			)
			if err := r.Columns(&id, &st.pending, &st.quarantined, &st.attempts, &st.generation, &held); err != nil {
				return err
			}
			cur[id] = st
			return nil
		})
		if err != nil {
			return err
		}
		epochs := map[int64]int64{}
		for _, l := range held {
			epochs[l.Shard] = l.Epoch
		}
		var ms []*spanner.Mutation
		quarantined = nil
		for i, b := range group {
			if epoch, ok := epochs[b.shard]; len(cur) > 0 && (!ok || epoch != b.epoch) {
				errs[i] = errLeaseLost
				continue
			}
			errs[i] = nil
			var q []*outcome
			ms, q = s.markBatch(ms, b, cur)
			quarantined = append(quarantined, q...)
		}
		return txn.BufferWrite(ms)
	})
	if err != nil {
		err = fmt.Errorf("mark %d batches: %w", len(group), err)
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	for _, o := range quarantined {
		s.log.Error("outbox event quarantined", zap.String("event_id", o.row.event.ID), zap.String("event_type", o.row.event.Type), zap.Error(o.err))
	}
	return errs
}

// markBatch appends to ms the writes that mark b, given its rows as they stand (cur), and returns
// them with the outcomes it quarantines.
func (s *source) markBatch(ms []*spanner.Mutation, b *markRequest, cur map[string]rowState) ([]*spanner.Mutation, []*outcome) {
	cfg := s.r.cfg
	for _, o := range b.done {
		st := cur[o.row.event.ID]
		if !st.pending || st.generation != o.row.generation {
			continue // published meanwhile by another instance, or replayed into a new generation
		}
		published := make([]string, len(o.created))
		copy(published, o.created)
		sort.Strings(published)
		audit := spanner.NullInt64{}
		if s.r.audited(published) {
			audit = spanner.NullInt64{Int64: b.shard, Valid: true}
		}
		ms = append(ms, spanner.Update(outboxdb.OutboxEventsTable,
			[]string{outboxdb.OutboxEventColEventId, outboxdb.OutboxEventColPendingShard, outboxdb.OutboxEventColPublishedAt,
				outboxdb.OutboxEventColNextAttemptAt, outboxdb.OutboxEventColPublishedTo, outboxdb.OutboxEventColAuditShard},
			[]any{o.row.event.ID, spanner.NullInt64{}, dao.NullCommitTimestamp, spanner.NullTime{}, published, audit}))
	}
	var quarantined []*outcome
	now := time.Now()
	for _, o := range b.failed {
		st := cur[o.row.event.ID]
		if !st.pending || st.quarantined || st.generation != o.row.generation {
			continue
		}
		attempts := st.attempts + 1
		cols := []string{outboxdb.OutboxEventColEventId, outboxdb.OutboxEventColAttempts, outboxdb.OutboxEventColLastError}
		vals := []any{o.row.event.ID, attempts, o.err.Error()}
		if o.permanent || attempts >= cfg.MaxAttempts {
			cols = append(cols, outboxdb.OutboxEventColQuarantinedAt)
			vals = append(vals, dao.NullCommitTimestamp)
			quarantined = append(quarantined, o)
		} else {
			cols = append(cols, outboxdb.OutboxEventColNextAttemptAt)
			vals = append(vals, now.Add(s.backoff(attempts)))
		}
		ms = append(ms, spanner.Update(outboxdb.OutboxEventsTable, cols, vals))
	}
	return ms, quarantined
}
