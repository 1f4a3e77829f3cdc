package dao

import (
	"context"
	"fmt"

	"cloud.google.com/go/spanner"
	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
	"google.golang.org/grpc/codes"
)

// The reads below are the runtime of the generated packages: their Read<T>, Read<T>Rows and index
// reads are one-line calls of these with the table's names and columns. They are exported for the
// generated code; application code calls the typed functions of the generated packages instead.

// Keyed is a row type of a generated package: a pointer to it can say its primary key.
type Keyed[T any] interface {
	*T
	Key() spanner.Key
}

// ReadRow reads the row of table at key into a new T, mapping a missing row to ErrNotFound (wrapped).
// what names the row in errors.
func ReadRow[T any](ctx context.Context, r Reader, table string, key spanner.Key, columns []string, what string) (*T, error) {
	row, err := r.ReadRow(ctx, table, key, columns)
	if spanner.ErrCode(err) == codes.NotFound {
		return nil, fmt.Errorf("read %s %v: %w", what, key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s %v: %w", what, key, err)
	}
	v := new(T)
	if err := row.ToStruct(v); err != nil {
		return nil, fmt.Errorf("read %s %v: %w", what, key, err)
	}
	return v, nil
}

// ReadRows decodes every row of iter into a new T and stops iter. what names the rows in errors.
func ReadRows[T any](iter *spanner.RowIterator, what string) ([]*T, error) {
	var out []*T
	err := iter.Do(func(row *spanner.Row) error {
		v := new(T)
		if err := row.ToStruct(v); err != nil {
			return err
		}
		out = append(out, v)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	return out, nil
}

// ReadIndex reads the rows of table whose key of index is in keys, in index order, at most limit rows
// when limit > 0. An index holds only its key, the primary key and its STORING columns: when it covers
// every column (covering) the rows are read from the index in one read; otherwise ReadIndex reads the
// primary keys from the index, then the rows from the table, so it needs a transaction that allows
// two reads (a read-write or multi-use read-only transaction, not client.Single()). primaryKey are the
// table's key columns, columns the columns of T.
func ReadIndex[T any, P Keyed[T]](ctx context.Context, r Reader, table, index string, covering bool, keys spanner.KeySet, limit int, primaryKey, columns []string, what string) ([]*T, error) {
	byIndex := what + " by index " + index
	if covering {
		return ReadRows[T](r.ReadWithOptions(ctx, table, keys, columns, &spanner.ReadOptions{Index: index, Limit: limit}), byIndex)
	}
	ids, err := ReadRows[T](r.ReadWithOptions(ctx, table, keys, primaryKey, &spanner.ReadOptions{Index: index, Limit: limit}), byIndex)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	pks := make([]spanner.Key, len(ids))
	for i, id := range ids {
		pks[i] = P(id).Key()
	}
	rows, err := ReadRows[T](r.Read(ctx, table, spanner.KeySetFromKeys(pks...), columns), what)
	if err != nil {
		return nil, err
	}
	byKey := make(map[string]*T, len(rows))
	for _, row := range rows {
		byKey[P(row).Key().String()] = row
	}
	// Index order; a row deleted between the two reads (possible only outside a transaction) is left out.
	out := make([]*T, 0, len(pks))
	for _, pk := range pks {
		if row, ok := byKey[pk.String()]; ok {
			out = append(out, row)
		}
	}
	return out, nil
}

// ReadUnique is ReadIndex for the full key of a unique index: the one row, or ErrNotFound (wrapped).
func ReadUnique[T any, P Keyed[T]](ctx context.Context, r Reader, table, index string, covering bool, key spanner.Key, primaryKey, columns []string, what string) (*T, error) {
	rows, err := ReadIndex[T, P](ctx, r, table, index, covering, key, 0, primaryKey, columns, what)
	if err != nil {
		return nil, err
	}
	switch len(rows) {
	case 0:
		return nil, fmt.Errorf("read %s by %s %v: %w", what, index, key, ErrNotFound)
	case 1:
		return rows[0], nil
	default:
		return nil, fmt.Errorf("read %s by %s %v: %d rows in a unique index", what, index, key, len(rows))
	}
}

// Exclusive returns a Reader over txn whose reads take exclusive locks (LOCK_HINT_EXCLUSIVE)
// on the rows they read, for a read-modify-write of a row that other transactions are likely
// to read and write at the same moment. With the default shared locks two such transactions
// both read the row, both want to upgrade their lock to write it, and Spanner aborts one of
// them; with exclusive locks the second waits for the first to commit and then reads its row.
// Use it only for rows with real write contention: an exclusive lock also keeps readers waiting.
func Exclusive(txn *spanner.ReadWriteTransaction) Reader { return exclusive{txn} }

type exclusive struct{ txn *spanner.ReadWriteTransaction }

func (x exclusive) ReadRow(ctx context.Context, table string, key spanner.Key, columns []string) (*spanner.Row, error) {
	return x.txn.ReadRowWithOptions(ctx, table, key, columns, x.options(nil))
}

func (x exclusive) Read(ctx context.Context, table string, keys spanner.KeySet, columns []string) *spanner.RowIterator {
	return x.txn.ReadWithOptions(ctx, table, keys, columns, x.options(nil))
}

func (x exclusive) ReadWithOptions(ctx context.Context, table string, keys spanner.KeySet, columns []string, opts *spanner.ReadOptions) *spanner.RowIterator {
	return x.txn.ReadWithOptions(ctx, table, keys, columns, x.options(opts))
}

// options returns opts (a copy) with the exclusive lock hint.
func (exclusive) options(opts *spanner.ReadOptions) *spanner.ReadOptions {
	o := spanner.ReadOptions{}
	if opts != nil {
		o = *opts
	}
	o.LockHint = sppb.ReadRequest_LOCK_HINT_EXCLUSIVE
	return &o
}
