package daotest

// The tables of the outbox stream, once per database: each database has its own generated types.

import (
	"cloud.google.com/go/spanner"

	"github.com/spanmart/spanmart/gen/dao/fulfillmentdb"
	"github.com/spanmart/spanmart/gen/dao/notificationsdb"
	"github.com/spanmart/spanmart/gen/dao/ordersdb"
	"github.com/spanmart/spanmart/gen/dao/paymentsdb"
)

func sharedOrders() []tableCase {
	return []tableCase{
		{ordersdb.OutboxEventsTable, lc[ordersdb.OutboxEvent, *ordersdb.OutboxEvent]{
			values: outboxEventValues, change: outboxEventChange, listed: outboxEventListed, unlisted: outboxEventUnlisted,
			read: func(ctx ctxT, r reader, x *ordersdb.OutboxEvent) (*ordersdb.OutboxEvent, error) {
				return ordersdb.ReadOutboxEvent(ctx, r, x.EventId)
			},
			readRows: ordersdb.ReadOutboxEventRows,
			del:      func(x *ordersdb.OutboxEvent) *spanner.Mutation { return ordersdb.DeleteOutboxEvent(x.EventId) },
			indexes: map[string]func(ctxT, reader, *ordersdb.OutboxEvent) ([]*ordersdb.OutboxEvent, error){
				"OutboxPending": func(ctx ctxT, r reader, x *ordersdb.OutboxEvent) ([]*ordersdb.OutboxEvent, error) {
					if !x.PendingShard.Valid {
						return nil, errSkip
					}
					return ordersdb.ReadOutboxPendingByPendingShard(ctx, r, x.PendingShard.Int64)
				},
				"OutboxPending full key": func(ctx ctxT, r reader, x *ordersdb.OutboxEvent) ([]*ordersdb.OutboxEvent, error) {
					if !x.PendingShard.Valid {
						return nil, errSkip
					}
					return ordersdb.ReadOutboxPending(ctx, r, x.PendingShard.Int64, x.CreatedAt)
				},
			},
		}.run},
		{ordersdb.ProcessedEventsTable, lc[ordersdb.ProcessedEvent, *ordersdb.ProcessedEvent]{
			values: processedEventValues, change: processedEventChange, listed: processedEventListed, unlisted: processedEventUnlisted,
			read: func(ctx ctxT, r reader, x *ordersdb.ProcessedEvent) (*ordersdb.ProcessedEvent, error) {
				return ordersdb.ReadProcessedEvent(ctx, r, x.EventId, x.Consumer)
			},
			readRows: ordersdb.ReadProcessedEventRows,
			del: func(x *ordersdb.ProcessedEvent) *spanner.Mutation {
				return ordersdb.DeleteProcessedEvent(x.EventId, x.Consumer)
			},
		}.run},
		{ordersdb.OutboxLeasesTable, lc[ordersdb.OutboxLease, *ordersdb.OutboxLease]{
			values: outboxLeaseValues, change: outboxLeaseChange, listed: outboxLeaseListed, unlisted: outboxLeaseUnlisted,
			read: func(ctx ctxT, r reader, x *ordersdb.OutboxLease) (*ordersdb.OutboxLease, error) {
				return ordersdb.ReadOutboxLease(ctx, r, x.Shard)
			},
			readRows: ordersdb.ReadOutboxLeaseRows,
			del:      func(x *ordersdb.OutboxLease) *spanner.Mutation { return ordersdb.DeleteOutboxLease(x.Shard) },
		}.run},
		{ordersdb.DeadLettersTable, lc[ordersdb.DeadLetter, *ordersdb.DeadLetter]{
			values: deadLetterValues, change: deadLetterChange, listed: deadLetterListed, unlisted: deadLetterUnlisted,
			read: func(ctx ctxT, r reader, x *ordersdb.DeadLetter) (*ordersdb.DeadLetter, error) {
				return ordersdb.ReadDeadLetter(ctx, r, x.EventId, x.Consumer)
			},
			readRows: ordersdb.ReadDeadLetterRows,
			del: func(x *ordersdb.DeadLetter) *spanner.Mutation {
				return ordersdb.DeleteDeadLetter(x.EventId, x.Consumer)
			},
		}.run},
	}
}

func sharedFulfillment() []tableCase {
	return []tableCase{
		{fulfillmentdb.OutboxEventsTable, lc[fulfillmentdb.OutboxEvent, *fulfillmentdb.OutboxEvent]{
			values: outboxEventValues, change: outboxEventChange, listed: outboxEventListed, unlisted: outboxEventUnlisted,
			read: func(ctx ctxT, r reader, x *fulfillmentdb.OutboxEvent) (*fulfillmentdb.OutboxEvent, error) {
				return fulfillmentdb.ReadOutboxEvent(ctx, r, x.EventId)
			},
			readRows: fulfillmentdb.ReadOutboxEventRows,
			del: func(x *fulfillmentdb.OutboxEvent) *spanner.Mutation {
				return fulfillmentdb.DeleteOutboxEvent(x.EventId)
			},
			indexes: map[string]func(ctxT, reader, *fulfillmentdb.OutboxEvent) ([]*fulfillmentdb.OutboxEvent, error){
				"OutboxPending": func(ctx ctxT, r reader, x *fulfillmentdb.OutboxEvent) ([]*fulfillmentdb.OutboxEvent, error) {
					if !x.PendingShard.Valid {
						return nil, errSkip
					}
					return fulfillmentdb.ReadOutboxPendingByPendingShard(ctx, r, x.PendingShard.Int64)
				},
				"OutboxPending full key": func(ctx ctxT, r reader, x *fulfillmentdb.OutboxEvent) ([]*fulfillmentdb.OutboxEvent, error) {
					if !x.PendingShard.Valid {
						return nil, errSkip
					}
					return fulfillmentdb.ReadOutboxPending(ctx, r, x.PendingShard.Int64, x.CreatedAt)
				},
			},
		}.run},
		{fulfillmentdb.ProcessedEventsTable, lc[fulfillmentdb.ProcessedEvent, *fulfillmentdb.ProcessedEvent]{
			values: processedEventValues, change: processedEventChange, listed: processedEventListed, unlisted: processedEventUnlisted,
			read: func(ctx ctxT, r reader, x *fulfillmentdb.ProcessedEvent) (*fulfillmentdb.ProcessedEvent, error) {
				return fulfillmentdb.ReadProcessedEvent(ctx, r, x.EventId, x.Consumer)
			},
			readRows: fulfillmentdb.ReadProcessedEventRows,
			del: func(x *fulfillmentdb.ProcessedEvent) *spanner.Mutation {
				return fulfillmentdb.DeleteProcessedEvent(x.EventId, x.Consumer)
			},
		}.run},
		{fulfillmentdb.OutboxLeasesTable, lc[fulfillmentdb.OutboxLease, *fulfillmentdb.OutboxLease]{
			values: outboxLeaseValues, change: outboxLeaseChange, listed: outboxLeaseListed, unlisted: outboxLeaseUnlisted,
			read: func(ctx ctxT, r reader, x *fulfillmentdb.OutboxLease) (*fulfillmentdb.OutboxLease, error) {
				return fulfillmentdb.ReadOutboxLease(ctx, r, x.Shard)
			},
			readRows: fulfillmentdb.ReadOutboxLeaseRows,
			del:      func(x *fulfillmentdb.OutboxLease) *spanner.Mutation { return fulfillmentdb.DeleteOutboxLease(x.Shard) },
		}.run},
		{fulfillmentdb.DeadLettersTable, lc[fulfillmentdb.DeadLetter, *fulfillmentdb.DeadLetter]{
			values: deadLetterValues, change: deadLetterChange, listed: deadLetterListed, unlisted: deadLetterUnlisted,
			read: func(ctx ctxT, r reader, x *fulfillmentdb.DeadLetter) (*fulfillmentdb.DeadLetter, error) {
				return fulfillmentdb.ReadDeadLetter(ctx, r, x.EventId, x.Consumer)
			},
			readRows: fulfillmentdb.ReadDeadLetterRows,
			del: func(x *fulfillmentdb.DeadLetter) *spanner.Mutation {
				return fulfillmentdb.DeleteDeadLetter(x.EventId, x.Consumer)
			},
		}.run},
	}
}

func sharedPayments() []tableCase {
	return []tableCase{
		{paymentsdb.OutboxEventsTable, lc[paymentsdb.OutboxEvent, *paymentsdb.OutboxEvent]{
			values: outboxEventValues, change: outboxEventChange, listed: outboxEventListed, unlisted: outboxEventUnlisted,
			read: func(ctx ctxT, r reader, x *paymentsdb.OutboxEvent) (*paymentsdb.OutboxEvent, error) {
				return paymentsdb.ReadOutboxEvent(ctx, r, x.EventId)
			},
			readRows: paymentsdb.ReadOutboxEventRows,
			del:      func(x *paymentsdb.OutboxEvent) *spanner.Mutation { return paymentsdb.DeleteOutboxEvent(x.EventId) },
			indexes: map[string]func(ctxT, reader, *paymentsdb.OutboxEvent) ([]*paymentsdb.OutboxEvent, error){
				"OutboxPending": func(ctx ctxT, r reader, x *paymentsdb.OutboxEvent) ([]*paymentsdb.OutboxEvent, error) {
					if !x.PendingShard.Valid {
						return nil, errSkip
					}
					return paymentsdb.ReadOutboxPendingByPendingShard(ctx, r, x.PendingShard.Int64)
				},
				"OutboxPending full key": func(ctx ctxT, r reader, x *paymentsdb.OutboxEvent) ([]*paymentsdb.OutboxEvent, error) {
					if !x.PendingShard.Valid {
						return nil, errSkip
					}
					return paymentsdb.ReadOutboxPending(ctx, r, x.PendingShard.Int64, x.CreatedAt)
				},
			},
		}.run},
		{paymentsdb.ProcessedEventsTable, lc[paymentsdb.ProcessedEvent, *paymentsdb.ProcessedEvent]{
			values: processedEventValues, change: processedEventChange, listed: processedEventListed, unlisted: processedEventUnlisted,
			read: func(ctx ctxT, r reader, x *paymentsdb.ProcessedEvent) (*paymentsdb.ProcessedEvent, error) {
				return paymentsdb.ReadProcessedEvent(ctx, r, x.EventId, x.Consumer)
			},
			readRows: paymentsdb.ReadProcessedEventRows,
			del: func(x *paymentsdb.ProcessedEvent) *spanner.Mutation {
				return paymentsdb.DeleteProcessedEvent(x.EventId, x.Consumer)
			},
		}.run},
		{paymentsdb.OutboxLeasesTable, lc[paymentsdb.OutboxLease, *paymentsdb.OutboxLease]{
			values: outboxLeaseValues, change: outboxLeaseChange, listed: outboxLeaseListed, unlisted: outboxLeaseUnlisted,
			read: func(ctx ctxT, r reader, x *paymentsdb.OutboxLease) (*paymentsdb.OutboxLease, error) {
				return paymentsdb.ReadOutboxLease(ctx, r, x.Shard)
			},
			readRows: paymentsdb.ReadOutboxLeaseRows,
			del:      func(x *paymentsdb.OutboxLease) *spanner.Mutation { return paymentsdb.DeleteOutboxLease(x.Shard) },
		}.run},
		{paymentsdb.DeadLettersTable, lc[paymentsdb.DeadLetter, *paymentsdb.DeadLetter]{
			values: deadLetterValues, change: deadLetterChange, listed: deadLetterListed, unlisted: deadLetterUnlisted,
			read: func(ctx ctxT, r reader, x *paymentsdb.DeadLetter) (*paymentsdb.DeadLetter, error) {
				return paymentsdb.ReadDeadLetter(ctx, r, x.EventId, x.Consumer)
			},
			readRows: paymentsdb.ReadDeadLetterRows,
			del: func(x *paymentsdb.DeadLetter) *spanner.Mutation {
				return paymentsdb.DeleteDeadLetter(x.EventId, x.Consumer)
			},
		}.run},
	}
}

func sharedNotifications() []tableCase {
	return []tableCase{
		{notificationsdb.OutboxEventsTable, lc[notificationsdb.OutboxEvent, *notificationsdb.OutboxEvent]{
			values: outboxEventValues, change: outboxEventChange, listed: outboxEventListed, unlisted: outboxEventUnlisted,
			read: func(ctx ctxT, r reader, x *notificationsdb.OutboxEvent) (*notificationsdb.OutboxEvent, error) {
				return notificationsdb.ReadOutboxEvent(ctx, r, x.EventId)
			},
			readRows: notificationsdb.ReadOutboxEventRows,
			del: func(x *notificationsdb.OutboxEvent) *spanner.Mutation {
				return notificationsdb.DeleteOutboxEvent(x.EventId)
			},
			indexes: map[string]func(ctxT, reader, *notificationsdb.OutboxEvent) ([]*notificationsdb.OutboxEvent, error){
				"OutboxPending": func(ctx ctxT, r reader, x *notificationsdb.OutboxEvent) ([]*notificationsdb.OutboxEvent, error) {
					if !x.PendingShard.Valid {
						return nil, errSkip
					}
					return notificationsdb.ReadOutboxPendingByPendingShard(ctx, r, x.PendingShard.Int64)
				},
				"OutboxPending full key": func(ctx ctxT, r reader, x *notificationsdb.OutboxEvent) ([]*notificationsdb.OutboxEvent, error) {
					if !x.PendingShard.Valid {
						return nil, errSkip
					}
					return notificationsdb.ReadOutboxPending(ctx, r, x.PendingShard.Int64, x.CreatedAt)
				},
			},
		}.run},
		{notificationsdb.ProcessedEventsTable, lc[notificationsdb.ProcessedEvent, *notificationsdb.ProcessedEvent]{
			values: processedEventValues, change: processedEventChange, listed: processedEventListed, unlisted: processedEventUnlisted,
			read: func(ctx ctxT, r reader, x *notificationsdb.ProcessedEvent) (*notificationsdb.ProcessedEvent, error) {
				return notificationsdb.ReadProcessedEvent(ctx, r, x.EventId, x.Consumer)
			},
			readRows: notificationsdb.ReadProcessedEventRows,
			del: func(x *notificationsdb.ProcessedEvent) *spanner.Mutation {
				return notificationsdb.DeleteProcessedEvent(x.EventId, x.Consumer)
			},
		}.run},
		{notificationsdb.OutboxLeasesTable, lc[notificationsdb.OutboxLease, *notificationsdb.OutboxLease]{
			values: outboxLeaseValues, change: outboxLeaseChange, listed: outboxLeaseListed, unlisted: outboxLeaseUnlisted,
			read: func(ctx ctxT, r reader, x *notificationsdb.OutboxLease) (*notificationsdb.OutboxLease, error) {
				return notificationsdb.ReadOutboxLease(ctx, r, x.Shard)
			},
			readRows: notificationsdb.ReadOutboxLeaseRows,
			del: func(x *notificationsdb.OutboxLease) *spanner.Mutation {
				return notificationsdb.DeleteOutboxLease(x.Shard)
			},
		}.run},
		{notificationsdb.DeadLettersTable, lc[notificationsdb.DeadLetter, *notificationsdb.DeadLetter]{
			values: deadLetterValues, change: deadLetterChange, listed: deadLetterListed, unlisted: deadLetterUnlisted,
			read: func(ctx ctxT, r reader, x *notificationsdb.DeadLetter) (*notificationsdb.DeadLetter, error) {
				return notificationsdb.ReadDeadLetter(ctx, r, x.EventId, x.Consumer)
			},
			readRows: notificationsdb.ReadDeadLetterRows,
			del: func(x *notificationsdb.DeadLetter) *spanner.Mutation {
				return notificationsdb.DeleteDeadLetter(x.EventId, x.Consumer)
			},
		}.run},
	}
}
