package engine

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
	"google.golang.org/grpc/codes"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/catalog"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

// applyMutations applies a commit's mutations in order on conn (inside the committing SQLite
// transaction). ts is the commit timestamp that replaces spanner.CommitTimestamp values.
func applyMutations(ctx context.Context, conn execer, schema *catalog.Schema, muts []*sppb.Mutation, ts time.Time) error {
	tsText := spantype.FormatTimestamp(ts)
	for _, m := range muts {
		var err error
		switch op := m.Operation.(type) {
		case *sppb.Mutation_Insert:
			err = applyWrite(ctx, conn, schema, op.Insert, writeInsert, tsText)
		case *sppb.Mutation_Update:
			err = applyWrite(ctx, conn, schema, op.Update, writeUpdate, tsText)
		case *sppb.Mutation_InsertOrUpdate:
			err = applyWrite(ctx, conn, schema, op.InsertOrUpdate, writeInsertOrUpdate, tsText)
		case *sppb.Mutation_Replace:
			err = applyWrite(ctx, conn, schema, op.Replace, writeReplace, tsText)
		case *sppb.Mutation_Delete_:
			err = applyDelete(ctx, conn, schema, op.Delete)
		default:
			err = errorf(codes.InvalidArgument, "Unsupported mutation kind %T.", m.Operation)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// execer is the writer connection.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

type writeKind int

const (
	writeInsert writeKind = iota
	writeUpdate
	writeInsertOrUpdate
	writeReplace
)

func lookupTable(schema *catalog.Schema, name string) (*catalog.Table, error) {
	t, ok := schema.Table(name)
	if !ok || t.InfoSchema {
		return nil, errorf(codes.NotFound, "Table not found: %s", name)
	}
	return t, nil
}

func applyWrite(ctx context.Context, conn execer, schema *catalog.Schema, w *sppb.Mutation_Write, kind writeKind, tsText string) error {
	t, err := lookupTable(schema, w.Table)
	if err != nil {
		return err
	}
	cols := make([]*catalog.Column, len(w.Columns))
	seen := map[string]bool{}
	for i, name := range w.Columns {
		c, ok := t.Column(name)
		if !ok {
			return errorf(codes.NotFound, "Column not found in table %s: %s", t.Name, name)
		}
		if seen[strings.ToUpper(c.Name)] {
			return errorf(codes.InvalidArgument, "Multiple values for column %s.", c.Name)
		}
		seen[strings.ToUpper(c.Name)] = true
		if c.Generated != nil {
			return errorf(codes.FailedPrecondition, "Cannot write into generated column `%s.%s`.", t.Name, c.Name)
		}
		cols[i] = c
	}
	kc := tableKey(t)
	keyPos := make([]int, len(kc))
	for i, k := range kc {
		keyPos[i] = -1
		for j, c := range cols {
			if c == k.col {
				keyPos[i] = j
			}
		}
		if keyPos[i] < 0 {
			return errorf(codes.FailedPrecondition, "Mutation for table %s is missing primary key column %s.", t.Name, k.col.Name)
		}
	}
	q := writeSQL(t, cols, kc, kind)
	insertSQL := writeSQL(t, cols, kc, writeInsert)
	var del string
	if kind == writeReplace {
		del = deleteByKeySQL(t, kc)
	}
	for _, row := range w.Values {
		if len(row.Values) != len(cols) {
			return errorf(codes.InvalidArgument, "Mutation has %d values for %d columns.", len(row.Values), len(cols))
		}
		vals := make([]any, len(cols))
		for i, c := range cols {
			v, err := spantype.ToStorage(c.Type, row.Values[i])
			if err != nil {
				return errorf(codes.FailedPrecondition, "Invalid value for column %s in table %s: %v", c.Name, t.Name, err)
			}
			if v == spantype.PendingCommitTimestamp && c.Type.Code == spantype.Timestamp {
				if !c.AllowCommitTimestamp {
					return errorf(codes.FailedPrecondition, "Cannot write commit timestamp because the allow_commit_timestamp column option is not set to true for column %s, or for all corresponding shared key columns in this table's interleaved table hierarchy.", c.Name)
				}
				v = tsText
			} else if c.AllowCommitTimestamp && v != nil {
				if s, ok := v.(string); ok && s > tsText {
					return errorf(codes.FailedPrecondition, "Cannot write timestamps in the future %s (commit timestamp %s) to a commit timestamp column %s.", s, tsText, c.Name)
				}
			}
			vals[i] = v
		}
		key := make([]any, len(kc))
		size := 0
		for i, p := range keyPos {
			key[i] = vals[p]
			size += storedSize(vals[p])
		}
		if size > maxKeySize {
			return errorf(codes.InvalidArgument, "Key too large for table %s: the key is %d bytes, the limit is %d bytes.", t.Name, size, maxKeySize)
		}
		wc := &writeContext{table: t, key: renderKey(kc, key), insert: kind != writeUpdate, schema: schema}
		if kind == writeReplace {
			if _, err := conn.ExecContext(ctx, del, key...); err != nil {
				return mapError(err, &writeContext{table: t, key: wc.key, schema: schema})
			}
		}
		if kind == writeUpdate || kind == writeInsertOrUpdate {
			// InsertOrUpdate is an update, then an insert when no row was there: SQLite's
			// upsert would check NOT NULL on the omitted columns before noticing the row exists.
			res, err := conn.ExecContext(ctx, q, append(append([]any(nil), vals...), key...)...)
			if err != nil {
				return mapError(err, &writeContext{table: t, key: wc.key, schema: schema})
			}
			if n, _ := res.RowsAffected(); n > 0 {
				continue
			}
			if kind == writeUpdate {
				return errorf(codes.NotFound, "Table %s: Row %s not found.", t.Name, wc.key)
			}
			if _, err := conn.ExecContext(ctx, insertSQL, vals...); err != nil {
				return mapError(err, wc)
			}
			continue
		}
		if _, err := conn.ExecContext(ctx, q, vals...); err != nil {
			return mapError(err, wc)
		}
	}
	return nil
}

// maxKeySize is Spanner's limit on the size of a key (8 KiB).
const maxKeySize = 8192

// storedSize approximates a value's size as Spanner counts it for the key limit.
func storedSize(v any) int {
	switch x := v.(type) {
	case string:
		return len(x)
	case []byte:
		return len(x)
	case nil:
		return 1
	}
	return 8
}

// writeSQL renders the statement for one row of a write mutation.
func writeSQL(t *catalog.Table, cols []*catalog.Column, kc []keyCol, kind writeKind) string {
	names := make([]string, len(cols))
	marks := make([]string, len(cols))
	for i, c := range cols {
		names[i] = catalog.Quote(c.SQLiteName)
		marks[i] = "?"
	}
	tbl := catalog.Quote(t.SQLiteName)
	if kind == writeUpdate || kind == writeInsertOrUpdate {
		sets := make([]string, len(cols))
		for i, n := range names {
			sets[i] = n + " = ?"
		}
		return fmt.Sprintf("UPDATE %s SET %s WHERE %s", tbl, strings.Join(sets, ", "), keyEquals(kc))
	}
	return fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", tbl, strings.Join(names, ", "), strings.Join(marks, ", "))
}

func keyEquals(kc []keyCol) string {
	conds := make([]string, len(kc))
	for i, k := range kc {
		conds[i] = catalog.Quote(k.col.SQLiteName) + " = ?"
	}
	if len(conds) == 0 {
		return "1"
	}
	return strings.Join(conds, " AND ")
}

func deleteByKeySQL(t *catalog.Table, kc []keyCol) string {
	return fmt.Sprintf("DELETE FROM %s WHERE %s", catalog.Quote(t.SQLiteName), keyEquals(kc))
}

func applyDelete(ctx context.Context, conn execer, schema *catalog.Schema, d *sppb.Mutation_Delete) error {
	t, err := lookupTable(schema, d.Table)
	if err != nil {
		return err
	}
	kc := tableKey(t)
	exprs := make([]string, len(kc))
	for i, k := range kc {
		exprs[i] = catalog.Quote(k.col.SQLiteName)
	}
	var args []any
	// A delete names whole keys in Keys; ranges may use prefixes.
	cond, err := keySetCondition(kc, exprs, d.KeySet, false, &args)
	if err != nil {
		return err
	}
	q := fmt.Sprintf("DELETE FROM %s WHERE %s", catalog.Quote(t.SQLiteName), cond)
	if _, err := conn.ExecContext(ctx, q, args...); err != nil {
		return mapError(err, &writeContext{table: t, schema: schema})
	}
	return nil
}
