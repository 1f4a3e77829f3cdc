package daotest

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmart/spanmart/gen/dao"
	"github.com/spanmart/spanmart/pkg/spannertest"
)

var env *spannertest.Env

func TestMain(m *testing.M) { os.Exit(spannertest.Main(m, &env)) }

// errSkip from an index read: the row is not in the index in this state (a NULL_FILTERED key is NULL).
var errSkip = errors.New("not in index")

type tableCase struct {
	table string
	run   func(t *testing.T, client *spanner.Client)
}

type reader = dao.Reader

type ctxT = context.Context

var (
	t0 = time.Date(2026, 11, 29, 10, 0, 0, 123456000, time.UTC)
	t1 = t0.Add(time.Hour)
)

func js(v any) spanner.NullJSON       { return spanner.NullJSON{Value: v, Valid: true} }
func str(s string) spanner.NullString { return spanner.NullString{StringVal: s, Valid: true} }
func i64(n int64) spanner.NullInt64   { return spanner.NullInt64{Int64: n, Valid: true} }
func tm(t time.Time) spanner.NullTime { return spanner.NullTime{Time: t, Valid: true} }

// Column values of the tables every database shares.
var (
	outboxEventValues = map[string]any{
		"EventId": "8d7a2a3e-0000-4000-8000-000000000001", "AggregateType": "order", "AggregateId": "o-1",
		"AggregateVersion": int64(1), "EventType": "order.created", "SchemaVersion": int64(1),
		"Payload": js(map[string]any{"orderId": "o-1"}), "TraceParent": str("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
		"OccurredAt": t0, "CreatedAt": spanner.CommitTimestamp, "PendingShard": i64(3), "PublishedAt": spanner.NullTime{},
		"Attempts": int64(0), "NextAttemptAt": spanner.NullTime{}, "LastError": spanner.NullString{}, "QuarantinedAt": spanner.NullTime{},
		"ReplayGeneration": int64(0), "ReplayReason": spanner.NullString{},
		"PublishedTo": []spanner.NullString(nil), "AuditShard": spanner.NullInt64{},
	}
	// A failure that quarantines the event (QuarantinedAt takes the commit timestamp), then a replay
	// after publication: the next generation, with the operator's reason.
	outboxEventChange = map[string]any{
		"Attempts": int64(1), "NextAttemptAt": tm(t1), "LastError": str("400 from tasks"), "QuarantinedAt": dao.NullCommitTimestamp,
	}
	outboxEventListed = map[string]any{
		"PendingShard": spanner.NullInt64{}, "PublishedAt": dao.NullCommitTimestamp, "QuarantinedAt": spanner.NullTime{},
		"ReplayGeneration": int64(1), "ReplayReason": str("consumer lost its state"),
		"PublishedTo": []spanner.NullString{str("fulfillment"), str("notifications")}, "AuditShard": i64(3),
	}
	outboxEventUnlisted = map[string]any{"EventType": "order.changed"}

	processedEventValues   = map[string]any{"EventId": "8d7a2a3e-0000-4000-8000-000000000002", "Consumer": "fulfillment", "ProcessedAt": spanner.CommitTimestamp}
	processedEventChange   = map[string]any{"ProcessedAt": spanner.CommitTimestamp}
	processedEventListed   = map[string]any{"ProcessedAt": spanner.CommitTimestamp}
	processedEventUnlisted = map[string]any{}

	outboxLeaseValues   = map[string]any{"Shard": int64(2), "Owner": str("relay-a"), "Epoch": int64(1), "ExpiresAt": tm(t1), "UpdatedAt": spanner.CommitTimestamp}
	outboxLeaseChange   = map[string]any{"Owner": str("relay-b"), "Epoch": int64(2)}
	outboxLeaseListed   = map[string]any{"Owner": spanner.NullString{}, "ExpiresAt": spanner.NullTime{}}
	outboxLeaseUnlisted = map[string]any{"Epoch": int64(9)}

	deadLetterValues = map[string]any{
		"EventId": "8d7a2a3e-0000-4000-8000-000000000003", "Consumer": "notifications", "EventType": "order.confirmed",
		"Source": "//spanmart/orders", "Attributes": js(map[string]any{"ce-type": "order.confirmed"}), "Body": []byte(`{"orderId":"o-1"}`),
		"Attempts": int64(5), "LastError": "template missing", "DeadAt": spanner.CommitTimestamp,
		"ReplayedAt": spanner.NullTime{}, "ReplayReason": spanner.NullString{}, "ReplayedBy": spanner.NullString{},
	}
	deadLetterChange   = map[string]any{"Attempts": int64(6), "LastError": "still missing"}
	deadLetterListed   = map[string]any{"ReplayedAt": dao.NullCommitTimestamp, "ReplayReason": str("template fixed"), "ReplayedBy": str("ops@spanmart")}
	deadLetterUnlisted = map[string]any{"Body": []byte("changed")}

	consumerVersionValues = map[string]any{
		"AggregateId": "5b0c1c9e-0000-4000-8000-000000000001", "AggregateType": "order", "Consumer": "fulfillment",
		"Version": int64(1), "EventId": "8d7a2a3e-0000-4000-8000-000000000004", "UpdatedAt": spanner.CommitTimestamp,
	}
	consumerVersionChange   = map[string]any{"Version": int64(2), "EventId": "8d7a2a3e-0000-4000-8000-000000000005"}
	consumerVersionListed   = map[string]any{"Version": int64(3)}
	consumerVersionUnlisted = map[string]any{"EventId": "8d7a2a3e-0000-4000-8000-000000000006"}

	deliveryFailureValues = map[string]any{
		"EventId": "8d7a2a3e-0000-4000-8000-000000000007", "Consumer": "orders", "Failures": int64(1), "Deferrals": int64(0),
		"FirstDeferredAt": spanner.NullTime{}, "LastError": "spanner unavailable", "UpdatedAt": spanner.CommitTimestamp,
	}
	deliveryFailureChange   = map[string]any{"Deferrals": int64(1), "FirstDeferredAt": tm(t1), "LastError": "early"}
	deliveryFailureListed   = map[string]any{"Failures": int64(2)}
	deliveryFailureUnlisted = map[string]any{"LastError": "other"}

	missingDeliveryValues = map[string]any{
		"EventId": "8d7a2a3e-0000-4000-8000-000000000008", "Subscriber": "fulfillment", "EventType": "order.created",
		"AggregateId": "o-1", "ReplayGeneration": int64(0), "PublishedAt": t0, "DetectedAt": spanner.CommitTimestamp,
		"ReplayedAt": spanner.NullTime{}, "ReplayReason": spanner.NullString{},
	}
	missingDeliveryChange   = map[string]any{"ReplayGeneration": int64(1)}
	missingDeliveryListed   = map[string]any{"ReplayedAt": dao.NullCommitTimestamp, "ReplayReason": str("audience fixed")}
	missingDeliveryUnlisted = map[string]any{"EventType": "order.changed"}
)
