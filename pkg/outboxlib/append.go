package outboxlib

import (
	"context"
	"fmt"
	"hash/fnv"

	"cloud.google.com/go/spanner"

	"github.com/spanmart/spanmart/gen/dao/outboxdb"
)

// Shards is the number of pending shards of every outbox. A pending row's shard is a hash of its
// aggregate id, so one aggregate's events stay in one shard (the relay publishes a shard in
// CreatedAt order) while the OutboxPending index avoids a single hot timestamp range. The relay
// leases shards 0..Shards-1; changing it needs a migration of pending rows, so it is a constant.
const Shards = 16

// ShardOf returns the pending shard of an aggregate.
func ShardOf(aggregateID string) int64 {
	h := fnv.New64a()
	h.Write([]byte(aggregateID))
	return int64(h.Sum64() % Shards)
}

// Append buffers the outbox rows of events in txn: they commit, or not, with the caller's state
// change. It is pure (no I/O beyond buffering), so it is safe in a transaction function the
// client may retry. Inside a consumer's handler it also tells the consumer which shards to nudge
// once the transaction has committed.
func Append(ctx context.Context, txn *spanner.ReadWriteTransaction, events ...Event) error {
	ms := make([]*spanner.Mutation, 0, len(events))
	for _, e := range events {
		if err := e.validate(false); err != nil {
			return err
		}
		row := outboxdb.OutboxEventAppend{
			EventId: e.ID, AggregateType: e.AggregateType, AggregateId: e.AggregateID,
			AggregateVersion: e.AggregateVersion, EventType: e.Type, SchemaVersion: e.SchemaVersion,
			Payload:      spanner.NullJSON{Value: e.Payload, Valid: true},
			TraceParent:  spanner.NullString{StringVal: e.TraceParent, Valid: e.TraceParent != ""},
			OccurredAt:   e.OccurredAt,
			PendingShard: ShardOf(e.AggregateID),
		}
		ms = append(ms, row.Insert())
		appended(ctx, row.PendingShard)
	}
	if err := txn.BufferWrite(ms); err != nil {
		return fmt.Errorf("append %d outbox events: %w", len(events), err)
	}
	return nil
}
