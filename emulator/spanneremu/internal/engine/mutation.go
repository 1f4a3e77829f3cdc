package engine

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"time"

	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
	"google.golang.org/grpc/codes"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/catalog"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

// applyMutations applies a commit's mutations in order on conn (inside the committing SQLite
// transaction). ts is the commit timestamp that replaces spanner.CommitTimestamp values.
func applyMutations(ctx context.Context, conn execer, plans *writePlans, schema *catalog.Schema, muts []*sppb.Mutation, ts time.Time) error {
	tsText := spantype.FormatTimestamp(ts)
	for _, m := range muts {
		var err error
		switch op := m.Operation.(type) {
		case *sppb.Mutation_Insert:
			err = applyWrite(ctx, conn, plans, schema, op.Insert, writeInsert, tsText)
		case *sppb.Mutation_Update:
			err = applyWrite(ctx, conn, plans, schema, op.Update, writeUpdate, tsText)
		case *sppb.Mutation_InsertOrUpdate:
			err = applyWrite(ctx, conn, plans, schema, op.InsertOrUpdate, writeInsertOrUpdate, tsText)
		case *sppb.Mutation_Replace:
			err = applyWrite(ctx, conn, plans, schema, op.Replace, writeReplace, tsText)
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

// writePlan is what applyWrite needs of a write mutation's table and columns, worked out once
// per shape (table, columns, kind) and schema: the rows of a commit, and the commits of a
// service, mostly share a few shapes.
type writePlan struct {
	t         *catalog.Table
	cols      []*catalog.Column
	kc        []keyCol
	keyPos    []int  // where each key column is among cols
	q         string // the statement of one row
	insertSQL string // InsertOrUpdate's insert, when its update found no row
	del       string // Replace's delete, before its insert
	// For the commit's write set (writeSet.addMutations): the table's name as the write set keys
	// it, and the indexes the write changes.
	upperTable string
	indexes    []mutatedIndex
}

// planKey identifies a write mutation's shape.
func planKey(w *sppb.Mutation_Write, kind writeKind) string {
	var b strings.Builder
	b.WriteString(w.Table)
	b.WriteByte(byte('0' + kind))
	for _, c := range w.Columns {
		b.WriteByte(0)
		b.WriteString(c)
	}
	return b.String()
}

// writePlans caches writePlans for one schema.
type writePlans struct {
	mu     sync.Mutex
	schema *catalog.Schema
	plans  map[string]*writePlan
}

// maxWritePlans bounds the cache: past it, it starts again (a client writing ever new column
// sets).
const maxWritePlans = 1024

// plan returns the plan of w's shape under schema, working it out (and checking the mutation's
// table and columns) the first time.
func (wp *writePlans) plan(schema *catalog.Schema, w *sppb.Mutation_Write, kind writeKind) (*writePlan, error) {
	key := planKey(w, kind)
	wp.mu.Lock()
	if wp.schema != schema || len(wp.plans) >= maxWritePlans {
		wp.schema, wp.plans = schema, map[string]*writePlan{}
	}
	p, ok := wp.plans[key]
	wp.mu.Unlock()
	if ok {
		return p, nil
	}
	p, err := newWritePlan(schema, w, kind)
	if err != nil {
		return nil, err
	}
	wp.mu.Lock()
	if wp.schema == schema {
		wp.plans[key] = p
	}
	wp.mu.Unlock()
	return p, nil
}

func newWritePlan(schema *catalog.Schema, w *sppb.Mutation_Write, kind writeKind) (*writePlan, error) {
	t, err := lookupTable(schema, w.Table)
	if err != nil {
		return nil, err
	}
	cols := make([]*catalog.Column, len(w.Columns))
	seen := map[string]bool{}
	for i, name := range w.Columns {
		c, ok := t.Column(name)
		if !ok {
			return nil, errorf(codes.NotFound, "Column not found in table %s: %s", t.Name, name)
		}
		if seen[strings.ToUpper(c.Name)] {
			return nil, errorf(codes.InvalidArgument, "Multiple values for column %s.", c.Name)
		}
		seen[strings.ToUpper(c.Name)] = true
		if c.Generated != nil {
			return nil, errorf(codes.FailedPrecondition, "Cannot write into generated column `%s.%s`.", t.Name, c.Name)
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
			return nil, errorf(codes.FailedPrecondition, "Mutation for table %s is missing primary key column %s.", t.Name, k.col.Name)
		}
	}
	p := &writePlan{t: t, cols: cols, kc: kc, keyPos: keyPos, q: writeSQL(t, cols, kc, kind), insertSQL: writeSQL(t, cols, kc, writeInsert),
		upperTable: strings.ToUpper(t.Name), indexes: mutationIndexes(schema, t, w.Columns, kind == writeUpdate)}
	if kind == writeReplace {
		p.del = deleteByKeySQL(t, kc)
	}
	return p, nil
}

func applyWrite(ctx context.Context, conn execer, plans *writePlans, schema *catalog.Schema, w *sppb.Mutation_Write, kind writeKind, tsText string) error {
	p, err := plans.plan(schema, w, kind)
	if err != nil {
		return err
	}
	t, cols := p.t, p.cols
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
		key := make([]any, len(p.kc))
		size := 0
		for i, pos := range p.keyPos {
			key[i] = vals[pos]
			size += storedSize(vals[pos])
		}
		if size > maxKeySize {
			return errorf(codes.InvalidArgument, "Key too large for table %s: the key is %d bytes, the limit is %d bytes.", t.Name, size, maxKeySize)
		}
		// The key is rendered only for an error's message.
		wc := func(insert bool) *writeContext {
			return &writeContext{table: t, key: renderKey(p.kc, key), insert: insert, schema: schema}
		}
		if kind == writeReplace {
			if _, err := conn.ExecContext(ctx, p.del, key...); err != nil {
				return mapError(err, wc(false))
			}
		}
		if kind == writeUpdate || kind == writeInsertOrUpdate {
			// InsertOrUpdate is an update, then an insert when no row was there: SQLite's
			// upsert would check NOT NULL on the omitted columns before noticing the row exists.
			res, err := conn.ExecContext(ctx, p.q, append(append([]any(nil), vals...), key...)...)
			if err != nil {
				return mapError(err, wc(false))
			}
			if n, _ := res.RowsAffected(); n > 0 {
				continue
			}
			if kind == writeUpdate {
				return errorf(codes.NotFound, "Table %s: Row %s not found.", t.Name, renderKey(p.kc, key))
			}
			if _, err := conn.ExecContext(ctx, p.insertSQL, vals...); err != nil {
				return mapError(err, wc(true))
			}
			continue
		}
		if _, err := conn.ExecContext(ctx, p.q, vals...); err != nil {
			return mapError(err, wc(kind != writeUpdate))
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
