package engine

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/catalog"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/sqlgen"
)

// Read runs a Read/StreamingRead: rows of a table (or through an index) whose key is in the
// key set, in key order.
func (t *Txn) Read(ctx context.Context, r ReadRequest) (*Result, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.checkActive(); err != nil {
		return nil, err
	}
	defer t.touch()
	if t.mode == ReadWrite && !t.hasLock && r.Exclusive {
		if err := t.lockKeysExclusive(ctx, r); err != nil {
			return nil, err
		}
	}
	if t.mode == ReadWrite && !t.hasLock && !t.dmlTables[strings.ToUpper(r.Table)] {
		// A table the transaction's own DML changed is read under the lock, where that DML
		// has been replayed; any other read is optimistic.
		return t.optimisticRead(ctx, r)
	}
	var res *Result
	err := t.readWith(ctx, "read of a table its DML changed: "+r.Table, func(conn querier, schema *catalog.Schema) error {
		q, args, cols, err := buildRead(schema, r, false)
		if err != nil {
			return err
		}
		rows, err := queryRows(ctx, conn, q, args, cols)
		if err != nil {
			return mapError(err, nil)
		}
		res = &Result{Fields: fields(cols), Rows: rows}
		return nil
	})
	return res, err
}

// optimisticRead reads committed data without the write lock and records what it read (see
// occ.go).
func (t *Txn) optimisticRead(ctx context.Context, r ReadRequest) (*Result, error) {
	db := t.db
	schema := db.Schema()
	byIndex := r.Index != ""
	q, args, cols, err := buildRead(schema, r, byIndex)
	if err != nil {
		return nil, err
	}
	seq := t.noteRead()
	conn, done := db.reader()
	sqlRows, err := conn.QueryContext(ctx, q, args...)
	var stored [][]any
	if err == nil {
		stored, err = scanAll(sqlRows, len(cols))
	}
	done()
	if err != nil {
		return nil, mapError(err, nil)
	}
	fps := readFootprint(schema, r)
	table, _ := schema.Table(r.Table) // buildRead found it
	visible := cols[:len(r.Columns)]
	rows := make([][]*structpb.Value, 0, len(stored))
	for _, s := range stored {
		if byIndex && len(fps) > 0 && fps[0].index != "" {
			// An index read covers its index range (a row moving into it) and the rows it
			// returned (one changing or leaving it); a key it cannot tell makes it cover
			// the whole table.
			if key, ok := decodeStoredKey(table, s[len(visible):]); ok {
				fps = append(fps, footprint{table: strings.ToUpper(table.Name), key: keyString(table.Name, key)})
			} else {
				fps = wholeTable(schema, r)
			}
		}
		vals, err := encodeRow(s[:len(visible)], visible)
		if err != nil {
			return nil, err
		}
		rows = append(rows, vals)
	}
	for i := range fps {
		fps[i].seq = seq
	}
	t.addFootprints(fps)
	if err := t.validate(ctx); err != nil {
		return nil, err
	}
	return &Result{Fields: fields(visible), Rows: rows}, nil
}

// buildRead translates a Read. With withKey the table's primary key columns follow the columns
// asked for (hidden: the caller drops them), so that an index read knows the rows it returned.
func buildRead(schema *catalog.Schema, r ReadRequest, withKey bool) (string, []any, []sqlgen.Column, error) {
	t, ok := schema.Table(r.Table)
	if !ok {
		return "", nil, nil, errorf(codes.NotFound, "Table not found: %s", r.Table)
	}
	if len(r.Columns) == 0 {
		return "", nil, nil, errorf(codes.InvalidArgument, "Read requires at least one column.")
	}
	// The key the read is ordered and filtered by: the primary key, or the index key followed
	// by the primary key columns not already in it.
	kc := tableKey(t)
	covered := map[string]bool{}
	var nullFiltered []string
	if r.Index != "" {
		idx, ok := schema.Index(r.Index)
		if !ok || !strings.EqualFold(idx.Table, t.Name) {
			return "", nil, nil, errorf(codes.NotFound, "Index not found on table %s: %s", t.Name, r.Index)
		}
		kc = indexKey(t, idx)
		for _, k := range kc {
			covered[strings.ToUpper(k.col.Name)] = true
		}
		if idx.NullFiltered {
			for _, k := range kc[:len(idx.Keys)] {
				nullFiltered = append(nullFiltered, catalog.Quote(k.col.SQLiteName)+" IS NOT NULL")
			}
		}
		for _, s := range idx.Storing {
			covered[strings.ToUpper(s)] = true
		}
	}
	cols := make([]sqlgen.Column, len(r.Columns))
	sel := make([]string, len(r.Columns))
	for i, name := range r.Columns {
		c, ok := t.Column(name)
		if !ok {
			return "", nil, nil, errorf(codes.NotFound, "Column not found in table %s: %s", t.Name, name)
		}
		if r.Index != "" && !covered[strings.ToUpper(c.Name)] {
			return "", nil, nil, errorf(codes.InvalidArgument, "Index %s does not cover column %s; read it from the table or add it with STORING.", r.Index, c.Name)
		}
		cols[i] = sqlgen.Column{Name: c.Name, Type: c.Type}
		sel[i] = catalog.Quote(c.SQLiteName)
	}
	if withKey {
		for _, k := range tableKey(t) {
			cols = append(cols, sqlgen.Column{Name: k.col.Name, Type: k.col.Type})
			sel = append(sel, catalog.Quote(k.col.SQLiteName))
		}
	}
	exprs := make([]string, len(kc))
	order := make([]string, len(kc))
	for i, k := range kc {
		exprs[i] = catalog.Quote(k.col.SQLiteName)
		order[i] = exprs[i]
		if k.desc {
			order[i] += " DESC"
		}
	}
	var args []any
	cond, err := keySetCondition(kc, exprs, r.KeySet, r.Index != "", &args)
	if err != nil {
		return "", nil, nil, err
	}
	where := append(nullFiltered, "("+cond+")")
	q := fmt.Sprintf("SELECT %s FROM %s WHERE %s", strings.Join(sel, ", "), catalog.Quote(t.SQLiteName), strings.Join(where, " AND "))
	if len(order) > 0 {
		q += " ORDER BY " + strings.Join(order, ", ")
	}
	if r.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", r.Limit)
	}
	return q, args, cols, nil
}
