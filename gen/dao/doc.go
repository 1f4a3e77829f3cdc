// Package dao holds the pieces shared by the generated, typed Spanner data access packages under
// gen/dao: ErrNotFound, the Reader interface their read functions take, NullCommitTimestamp and the
// runtime the generated functions call (ReadRow, ReadRows, ReadIndex, ReadUnique, PartialUpdate,
// Keyed), written once here instead of in every generated package.
//
// The packages themselves are written by tools/daogen from the migrations listed in pkg/dbschema and
// are never edited by hand: one per service database (ordersdb, fulfillmentdb, paymentsdb,
// notificationsdb) with the tables of the service's own migrations, and one per migration stream that
// several databases share, with that stream's tables: outboxdb, the outbox and inbox tables of
// pkg/outboxlib/schema (OutboxEvents, ProcessedEvents, OutboxLeases, DeadLetters) that every service
// database carries, generated once and used with a client or transaction of any of them. A database's
// Tables() lists its own tables; outboxdb.Tables() lists the rest. Change a schema with a new migration
// and run
//
//	go generate ./gen/dao/...
//
// A test in this directory fails when the committed code is stale.
//
// Every table T (say Orders) gives a row type named in the singular (Order) with `spanner` tags, a
// table name constant (OrdersTable), column name constants (OrderColStatus, ...), OrderColumns(), a
// key constructor OrderKey(orderId), reads ReadOrder(ctx, r, orderId) and ReadOrderRows(ctx, r,
// keySet), mutation builders (o.Insert(), o.Update(), o.InsertOrUpdate(), o.Replace(), o.Delete(),
// o.UpdateColumns(OrderColStatus, ...), DeleteOrder(orderId)) and, for every index I of the table,
// IIndex, IKey(...), ReadI(ctx, r, key...) (a unique index gives one row or ErrNotFound, any other a
// slice), ReadIBy<Columns>(ctx, r, prefix...) for each key prefix and ReadIKeys(ctx, r, keySet,
// limit). Reads take a Reader, so they run in a read-write transaction, a read-only transaction or a
// single read (client.Single()) alike, with one exception: an index that does not store every column
// is read in two steps (the index, then the table), which needs a read-write or multi-use read-only
// transaction (client.ReadOnlyTransaction()). Mutations are buffered with txn.BufferWrite or applied
// with client.Apply.
//
//	_, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
//		o, err := ordersdb.ReadOrder(ctx, txn, id)
//		if err != nil {
//			return err // errors.Is(err, dao.ErrNotFound) for a missing order
//		}
//		o.Status, o.UpdatedAt = "CONFIRMED", spanner.CommitTimestamp
//		m, err := o.UpdateColumns(ordersdb.OrderColStatus, ordersdb.OrderColUpdatedAt)
//		if err != nil {
//			return err
//		}
//		return txn.BufferWrite([]*spanner.Mutation{m})
//	})
//
// Type mapping: a NOT NULL column has the plain Go type (string, int64, float32, float64, bool,
// []byte, time.Time, civil.Date, big.Rat), a nullable one the client's Null type (spanner.NullString,
// ...). JSON is always spanner.NullJSON (Valid is set for a NOT NULL column); ARRAY columns are slices
// of the Null types, because array elements may be NULL even in a NOT NULL array.
//
// Commit timestamps: a column with allow_commit_timestamp takes spanner.CommitTimestamp (nullable ones
// NullCommitTimestamp); the generated SetCommitTimestamps sets every NOT NULL one, as an insert wants.
//
// The shared outbox and inbox tables also have typed builders in outboxdb: OutboxEventAppend (whose
// Insert writes an unpublished outbox row: CreatedAt = commit timestamp, PublishedAt NULL, Attempts 0,
// PendingShard required) and InsertOrIgnoreProcessedEvent (the inbox statement: a row count of 0 means
// the event was already processed). pkg/outboxlib builds on them, for every service database alike:
//
//	_, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
//		n, err := txn.Update(ctx, outboxdb.InsertOrIgnoreProcessedEvent(eventID, "fulfillment"))
//		if err != nil || n == 0 {
//			return err // n == 0: a redelivery, already processed
//		}
//		// ... the state change, then in the same transaction:
//		ev := &outboxdb.OutboxEventAppend{EventId: id, EventType: "inventory.reserved", PendingShard: shard /* , ... */}
//		return txn.BufferWrite([]*spanner.Mutation{ev.Insert()})
//	})
package dao

//go:generate go run ../../tools/daogen -out .

import (
	"context"
	"errors"

	"cloud.google.com/go/spanner"
)

// ErrNotFound is returned (wrapped, test with errors.Is) by the generated reads when a row does not
// exist.
var ErrNotFound = errors.New("dao: row not found")

// Reader is what the generated reads need. *spanner.ReadWriteTransaction and
// *spanner.ReadOnlyTransaction (including client.Single()) satisfy it.
type Reader interface {
	ReadRow(ctx context.Context, table string, key spanner.Key, columns []string) (*spanner.Row, error)
	Read(ctx context.Context, table string, keys spanner.KeySet, columns []string) *spanner.RowIterator
	ReadWithOptions(ctx context.Context, table string, keys spanner.KeySet, columns []string, opts *spanner.ReadOptions) *spanner.RowIterator
}

var (
	_ Reader = (*spanner.ReadWriteTransaction)(nil)
	_ Reader = (*spanner.ReadOnlyTransaction)(nil)
)

// NullCommitTimestamp is the value that writes the commit timestamp into a nullable
// allow_commit_timestamp column (e.g. OutboxEvents.PublishedAt).
var NullCommitTimestamp = spanner.NullTime{Time: spanner.CommitTimestamp, Valid: true}
