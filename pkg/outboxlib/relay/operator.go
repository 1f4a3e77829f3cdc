package relay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/spanner"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"

	"github.com/spanmart/spanmart/gen/dao/outboxdb"
	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/outboxlib/outboxapi"
)

// Status reads the state of every source's outbox (and updates the gauges). A source's PublishLag
// is over this instance's last outboxlib.LagWindowSize publications of it (replays excluded).
func (r *Relay) Status(ctx context.Context) ([]outboxapi.SourceStatus, error) {
	out := make([]outboxapi.SourceStatus, 0, len(r.sources))
	for _, s := range r.sources {
		st, err := s.status(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

const (
	pendingStatsSQL = `SELECT COUNTIF(QuarantinedAt IS NULL) AS n, MIN(CreatedAt) AS oldest FROM OutboxEvents@{FORCE_INDEX=OutboxPending}
WHERE PendingShard IS NOT NULL`
	quarantinedSQL = `SELECT COUNT(*) AS n FROM OutboxEvents@{FORCE_INDEX=OutboxPending}
WHERE PendingShard IS NOT NULL AND QuarantinedAt IS NOT NULL`
)

func (s *source) status(ctx context.Context) (outboxapi.SourceStatus, error) {
	st := outboxapi.SourceStatus{Source: s.src.Name, Database: s.src.Database, PublishLag: s.publishLag.Summary()}
	txn := s.src.Client.ReadOnlyTransaction()
	defer txn.Close()
	var oldest spanner.NullTime
	err := txn.Query(ctx, spanner.Statement{SQL: pendingStatsSQL}).Do(func(row *spanner.Row) error {
		return row.Columns(&st.Pending, &oldest)
	})
	if err == nil {
		err = txn.Query(ctx, spanner.Statement{SQL: quarantinedSQL}).Do(func(row *spanner.Row) error {
			return row.Columns(&st.Quarantined)
		})
	}
	var leases []*outboxdb.OutboxLease
	if err == nil {
		leases, err = outboxdb.ReadOutboxLeaseRows(ctx, txn, spanner.KeyRange{Start: spanner.Key{int64(0)}, End: spanner.Key{int64(outboxlib.Shards)}, Kind: spanner.ClosedOpen})
	}
	if err != nil {
		return outboxapi.SourceStatus{}, fmt.Errorf("relay: status of %s: %w", s.src.Name, err)
	}
	now := time.Now()
	if oldest.Valid {
		st.OldestPendingAgeSeconds = max(now.Sub(oldest.Time).Seconds(), 0)
	}
	byShard := map[int64]*outboxdb.OutboxLease{}
	for _, l := range leases {
		byShard[l.Shard] = l
	}
	for shard := range int64(outboxlib.Shards) {
		ss := outboxapi.ShardStatus{Shard: shard}
		if l := byShard[shard]; l != nil {
			ss.Owner, ss.Epoch = l.Owner.StringVal, l.Epoch
			if l.ExpiresAt.Valid {
				t := l.ExpiresAt.Time
				ss.ExpiresAt = &t
				ss.Live = l.Owner.Valid && t.After(now)
			}
		}
		st.Shards = append(st.Shards, ss)
	}
	m := s.r.metrics
	m.pending.WithLabelValues(s.src.Name).Set(float64(st.Pending))
	m.oldestAge.WithLabelValues(s.src.Name).Set(st.OldestPendingAgeSeconds)
	m.quarantined.WithLabelValues(s.src.Name).Set(float64(st.Quarantined))
	return st, nil
}

// statusLoop refreshes the gauges every StatusInterval while this instance holds a shard of the
// source (one instance suffices; the gauges of the others would only repeat it).
func (s *source) statusLoop(ctx context.Context) {
	t := time.NewTicker(s.r.cfg.StatusInterval)
	defer t.Stop()
	for {
		if s.heldCount() > 0 {
			if _, err := s.status(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("refresh outbox gauges", zap.Error(err))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Replay re-queues event eventID of source, keeping its id: a quarantined event, a published one
// (within the outbox's 7-day retention) or one backing off (which is then retried at once). The
// row gets its pending shard back, Attempts 0, no NextAttemptAt, no QuarantinedAt, no LastError
// (the errors of the new attempts are recorded again), PublishedAt NULL (so the TTL cannot delete
// it while pending), no PublishedTo or AuditShard (the ledger audits it again once it is
// published) and ReplayReason = reason. A published event also moves to the next replay
// generation (ReplayGeneration + 1), which gives its tasks new names; a pending or quarantined one
// keeps its generation. ReplayedBy is the operator of ctx (outboxlib.OperatorOf: the verified
// identity of the request). See the package documentation.
func (r *Relay) Replay(ctx context.Context, sourceName, eventID, reason string) error {
	return r.replay(ctx, sourceName, eventID, reason, nil)
}

// replay is Replay, with more to do in its transaction.
func (r *Relay) replay(ctx context.Context, sourceName, eventID, reason string, also func(context.Context, *spanner.ReadWriteTransaction) error) error {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return ErrNoReason
	}
	s, err := r.source(sourceName)
	if err != nil {
		return err
	}
	var gen int64
	who := outboxlib.OperatorOf(ctx)
	by := spanner.NullString{StringVal: who, Valid: who != ""}
	_, err = s.src.Client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		row, err := txn.ReadRow(ctx, outboxdb.OutboxEventsTable, outboxdb.OutboxEventKey(eventID),
			[]string{outboxdb.OutboxEventColAggregateId, outboxdb.OutboxEventColPendingShard, outboxdb.OutboxEventColReplayGeneration})
		if spanner.ErrCode(err) == codes.NotFound {
			return fmt.Errorf("%w: %s in %s", ErrEventNotFound, eventID, sourceName)
		}
		if err != nil {
			return err
		}
		var (
			aggregateID string
			shard       spanner.NullInt64
		)
		if err := row.Columns(&aggregateID, &shard, &gen); err != nil {
			return err
		}
		if !shard.Valid {
			gen++ // published: its tasks' names are taken
		}
		if also != nil {
			if err := also(ctx, txn); err != nil {
				return err
			}
		}
		return txn.BufferWrite([]*spanner.Mutation{spanner.Update(outboxdb.OutboxEventsTable,
			[]string{outboxdb.OutboxEventColEventId, outboxdb.OutboxEventColPendingShard, outboxdb.OutboxEventColPublishedAt,
				outboxdb.OutboxEventColAttempts, outboxdb.OutboxEventColNextAttemptAt, outboxdb.OutboxEventColLastError, outboxdb.OutboxEventColQuarantinedAt,
				outboxdb.OutboxEventColReplayGeneration, outboxdb.OutboxEventColReplayReason, outboxdb.OutboxEventColReplayedBy,
				outboxdb.OutboxEventColPublishedTo, outboxdb.OutboxEventColAuditShard},
			[]any{eventID, outboxlib.ShardOf(aggregateID), spanner.NullTime{}, int64(0), spanner.NullTime{}, spanner.NullString{}, spanner.NullTime{},
				gen, reason, by, []string(nil), spanner.NullInt64{}})})
	})
	if err != nil {
		if errors.Is(err, ErrEventNotFound) || errors.Is(err, ErrNotMissing) {
			return err
		}
		return fmt.Errorf("relay: replay %s in %s: %w", eventID, sourceName, err)
	}
	s.log.Info("outbox event replayed", zap.String("event_id", eventID), zap.String("reason", reason), zap.String("by", who), zap.Int64("generation", gen))
	r.Nudge()
	return nil
}
