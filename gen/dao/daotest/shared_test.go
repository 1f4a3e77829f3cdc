package daotest

// The tables of the shared outbox stream: one generated package, outboxdb, for every database. The
// cases run in each database (TestEveryTable), so the one package is checked against all of them.

import (
	"cloud.google.com/go/spanner"

	"github.com/spanmart/spanmart/gen/dao/outboxdb"
)

func sharedCases() []tableCase {
	return []tableCase{
		{outboxdb.OutboxEventsTable, lc[outboxdb.OutboxEvent, *outboxdb.OutboxEvent]{
			values: outboxEventValues, change: outboxEventChange, listed: outboxEventListed, unlisted: outboxEventUnlisted,
			read: func(ctx ctxT, r reader, x *outboxdb.OutboxEvent) (*outboxdb.OutboxEvent, error) {
				return outboxdb.ReadOutboxEvent(ctx, r, x.EventId)
			},
			readRows: outboxdb.ReadOutboxEventRows,
			del:      func(x *outboxdb.OutboxEvent) *spanner.Mutation { return outboxdb.DeleteOutboxEvent(x.EventId) },
			indexes: map[string]func(ctxT, reader, *outboxdb.OutboxEvent) ([]*outboxdb.OutboxEvent, error){
				"OutboxPending": func(ctx ctxT, r reader, x *outboxdb.OutboxEvent) ([]*outboxdb.OutboxEvent, error) {
					if !x.PendingShard.Valid {
						return nil, errSkip
					}
					return outboxdb.ReadOutboxPendingByPendingShard(ctx, r, x.PendingShard.Int64)
				},
				"OutboxPending full key": func(ctx ctxT, r reader, x *outboxdb.OutboxEvent) ([]*outboxdb.OutboxEvent, error) {
					if !x.PendingShard.Valid {
						return nil, errSkip
					}
					return outboxdb.ReadOutboxPending(ctx, r, x.PendingShard.Int64, x.CreatedAt)
				},
				"OutboxUnaudited": func(ctx ctxT, r reader, x *outboxdb.OutboxEvent) ([]*outboxdb.OutboxEvent, error) {
					if !x.AuditShard.Valid || !x.PublishedAt.Valid {
						return nil, errSkip
					}
					return outboxdb.ReadOutboxUnaudited(ctx, r, x.AuditShard.Int64, x.PublishedAt.Time)
				},
				"OutboxByAggregate": func(ctx ctxT, r reader, x *outboxdb.OutboxEvent) ([]*outboxdb.OutboxEvent, error) {
					return outboxdb.ReadOutboxByAggregate(ctx, r, x.AggregateId, x.AggregateType, x.AggregateVersion)
				},
			},
		}.run},
		{outboxdb.ProcessedEventsTable, lc[outboxdb.ProcessedEvent, *outboxdb.ProcessedEvent]{
			values: processedEventValues, change: processedEventChange, listed: processedEventListed, unlisted: processedEventUnlisted,
			read: func(ctx ctxT, r reader, x *outboxdb.ProcessedEvent) (*outboxdb.ProcessedEvent, error) {
				return outboxdb.ReadProcessedEvent(ctx, r, x.EventId, x.Consumer)
			},
			readRows: outboxdb.ReadProcessedEventRows,
			del: func(x *outboxdb.ProcessedEvent) *spanner.Mutation {
				return outboxdb.DeleteProcessedEvent(x.EventId, x.Consumer)
			},
		}.run},
		{outboxdb.OutboxLeasesTable, lc[outboxdb.OutboxLease, *outboxdb.OutboxLease]{
			values: outboxLeaseValues, change: outboxLeaseChange, listed: outboxLeaseListed, unlisted: outboxLeaseUnlisted,
			read: func(ctx ctxT, r reader, x *outboxdb.OutboxLease) (*outboxdb.OutboxLease, error) {
				return outboxdb.ReadOutboxLease(ctx, r, x.Shard)
			},
			readRows: outboxdb.ReadOutboxLeaseRows,
			del:      func(x *outboxdb.OutboxLease) *spanner.Mutation { return outboxdb.DeleteOutboxLease(x.Shard) },
		}.run},
		{outboxdb.DeadLettersTable, lc[outboxdb.DeadLetter, *outboxdb.DeadLetter]{
			values: deadLetterValues, change: deadLetterChange, listed: deadLetterListed, unlisted: deadLetterUnlisted,
			read: func(ctx ctxT, r reader, x *outboxdb.DeadLetter) (*outboxdb.DeadLetter, error) {
				return outboxdb.ReadDeadLetter(ctx, r, x.EventId, x.Consumer)
			},
			readRows: outboxdb.ReadDeadLetterRows,
			del: func(x *outboxdb.DeadLetter) *spanner.Mutation {
				return outboxdb.DeleteDeadLetter(x.EventId, x.Consumer)
			},
		}.run},
		{outboxdb.ConsumerVersionsTable, lc[outboxdb.ConsumerVersion, *outboxdb.ConsumerVersion]{
			values: consumerVersionValues, change: consumerVersionChange, listed: consumerVersionListed, unlisted: consumerVersionUnlisted,
			read: func(ctx ctxT, r reader, x *outboxdb.ConsumerVersion) (*outboxdb.ConsumerVersion, error) {
				return outboxdb.ReadConsumerVersion(ctx, r, x.AggregateId, x.AggregateType, x.Consumer)
			},
			readRows: outboxdb.ReadConsumerVersionRows,
			del: func(x *outboxdb.ConsumerVersion) *spanner.Mutation {
				return outboxdb.DeleteConsumerVersion(x.AggregateId, x.AggregateType, x.Consumer)
			},
		}.run},
		{outboxdb.DeliveryFailuresTable, lc[outboxdb.DeliveryFailure, *outboxdb.DeliveryFailure]{
			values: deliveryFailureValues, change: deliveryFailureChange, listed: deliveryFailureListed, unlisted: deliveryFailureUnlisted,
			read: func(ctx ctxT, r reader, x *outboxdb.DeliveryFailure) (*outboxdb.DeliveryFailure, error) {
				return outboxdb.ReadDeliveryFailure(ctx, r, x.EventId, x.Consumer)
			},
			readRows: outboxdb.ReadDeliveryFailureRows,
			del: func(x *outboxdb.DeliveryFailure) *spanner.Mutation {
				return outboxdb.DeleteDeliveryFailure(x.EventId, x.Consumer)
			},
		}.run},
		{outboxdb.MissingDeliveriesTable, lc[outboxdb.MissingDelivery, *outboxdb.MissingDelivery]{
			values: missingDeliveryValues, change: missingDeliveryChange, listed: missingDeliveryListed, unlisted: missingDeliveryUnlisted,
			read: func(ctx ctxT, r reader, x *outboxdb.MissingDelivery) (*outboxdb.MissingDelivery, error) {
				return outboxdb.ReadMissingDelivery(ctx, r, x.EventId, x.Subscriber)
			},
			readRows: outboxdb.ReadMissingDeliveryRows,
			del: func(x *outboxdb.MissingDelivery) *spanner.Mutation {
				return outboxdb.DeleteMissingDelivery(x.EventId, x.Subscriber)
			},
		}.run},
	}
}
