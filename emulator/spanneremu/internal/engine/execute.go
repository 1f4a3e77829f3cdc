package engine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
	"github.com/cloudspannerecosystem/memefish"
	"github.com/cloudspannerecosystem/memefish/ast"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/catalog"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/sqlgen"
)

// ExecuteSQL runs a query or a DML statement in the transaction.
func (t *Txn) ExecuteSQL(ctx context.Context, st Statement) (*Result, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.checkActive(); err != nil {
		return nil, err
	}
	defer t.touch()
	return t.executeLocked(ctx, st)
}

// BatchDML runs DML statements in order and stops at the first failure. Statements that can run
// optimistically (see runBatchOptimistic) run together, under one hold of the lock, so that a batch
// costs one replay of the transaction's earlier DML, not one per statement.
func (t *Txn) BatchDML(ctx context.Context, sts []Statement) ([]*Result, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.checkActive(); err != nil {
		return nil, err
	}
	defer t.touch()
	if len(sts) == 0 {
		return nil, errorf(codes.InvalidArgument, "No statements in batch DML request.")
	}
	schema := t.db.Schema()
	var prepared []*preparedDML
	var stopErr error // the first statement that cannot run, after the ones before it have run
	for i, st := range sts {
		stmt, err := parseStatement(st.SQL)
		if err != nil {
			stopErr = err
			break
		}
		if _, ok := stmt.(ast.DML); !ok {
			stopErr = errorf(codes.InvalidArgument, "Statement %d in the batch is not a DML statement: %s", i, firstLine(st.SQL))
			break
		}
		p, err := t.prepareDML(schema, st, stmt)
		if err != nil {
			stopErr = err
			break
		}
		prepared = append(prepared, p)
	}
	together := !t.hasLock && len(prepared) > 0
	for _, p := range prepared {
		together = together && p.c.Repeatable
	}
	var out []*Result
	if together {
		res, err := t.runBatchOptimistic(ctx, prepared, schema)
		if err != nil {
			return res, err
		}
		out = res
	} else {
		for _, p := range prepared {
			r, err := t.runPrepared(ctx, p, schema)
			if err != nil {
				return out, err
			}
			out = append(out, r)
		}
	}
	return out, stopErr
}

func parseStatement(sqlText string) (ast.Statement, error) {
	parsedMu.Lock()
	stmt, ok := parsed[sqlText]
	parsedMu.Unlock()
	if ok {
		return stmt, nil
	}
	// Spanner accepts one trailing semicolon after a query or DML statement.
	stmt, err := memefish.ParseStatement("", strings.TrimSuffix(strings.TrimSpace(sqlText), ";"))
	if err != nil {
		return nil, errorf(codes.InvalidArgument, "Syntax error: %s", strings.TrimSpace(cleanParseError(err)))
	}
	parsedMu.Lock()
	if len(parsed) >= maxCachedStatements {
		clear(parsed)
	}
	parsed[sqlText] = stmt
	parsedMu.Unlock()
	return stmt, nil
}

// parsed memoizes parseStatement by SQL text: clients send the same few statements over and
// over, and parsing one cost about as much as running it. A statement's tree does not depend on
// the database, and nothing changes a tree once parsed (sqlgen only reads it).
var (
	parsedMu sync.Mutex
	parsed   = map[string]ast.Statement{}
)

func cleanParseError(err error) string {
	msg := err.Error()
	// memefish prints the offending line with a caret below; keep the first line.
	if i := strings.Index(msg, "\n"); i > 0 {
		return msg[:i]
	}
	return msg
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, "\n"); i > 0 {
		return s[:i] + "..."
	}
	return s
}

func (t *Txn) executeLocked(ctx context.Context, st Statement) (*Result, error) {
	stmt, err := parseStatement(st.SQL)
	if err != nil {
		return nil, err
	}
	return t.executeParsed(ctx, st, stmt)
}

func (t *Txn) executeParsed(ctx context.Context, st Statement, stmt ast.Statement) (*Result, error) {
	declared, err := declaredParamTypes(st)
	if err != nil {
		return nil, err
	}
	switch stmt.(type) {
	case *ast.QueryStatement:
		if t.mode == ReadWrite && !t.hasLock {
			if res, ok, err := t.queryOptimistically(ctx, st, stmt, declared); ok {
				return res, err
			}
		}
		var res *Result
		err := t.readWith(ctx, "query: "+heldSQL(st.SQL), func(conn querier, schema *catalog.Schema) error {
			c, err := t.db.compile(schema, st, stmt, declared)
			if err != nil {
				return err
			}
			if c.ReadsInfoSchema && t.mode != ReadOnly {
				return errorf(codes.InvalidArgument, "INFORMATION_SCHEMA can only be queried in read-only or single-use transactions.")
			}
			if st.PlanOnly {
				res = planResult(c, declared)
				return nil
			}
			args, err := bindArgs(c, st, declared)
			if err != nil {
				return err
			}
			rows, err := queryRows(ctx, conn, c.SQL, args, c.Columns)
			if err != nil {
				return blameUntypedParams(c, mapError(err, nil))
			}
			res = &Result{Fields: fields(c.Columns), Rows: rows}
			return nil
		})
		return res, err
	case ast.DML:
		schema := t.db.Schema()
		p, err := t.prepareDML(schema, st, stmt)
		if err != nil {
			return nil, err
		}
		if st.PlanOnly {
			r := planResult(p.c, p.declared)
			r.IsDML = true
			return r, nil
		}
		return t.runPrepared(ctx, p, schema)
	case ast.DDL:
		return nil, errorf(codes.InvalidArgument, "DDL statements cannot be executed with ExecuteSql; use UpdateDatabaseDdl.")
	}
	return nil, errorf(codes.InvalidArgument, "Unsupported statement: %s", firstLine(st.SQL))
}

// preparedDML is a DML statement compiled against a schema, with its arguments bound.
type preparedDML struct {
	st       Statement
	c        *sqlgen.Compiled
	declared map[string]spantype.Type
	args     []any
	probe    []any // the key probe's arguments (c.KeyProbe), nil without one
	decide   []any // the decision's arguments (c.Decide), nil without one
}

// prepareDML compiles a DML statement of the transaction and binds its arguments.
func (t *Txn) prepareDML(schema *catalog.Schema, st Statement, stmt ast.Statement) (*preparedDML, error) {
	if t.mode == ReadOnly {
		return nil, errorf(codes.InvalidArgument, "DML statements can only be performed in a read-write or partitioned-dml transaction.")
	}
	declared, err := declaredParamTypes(st)
	if err != nil {
		return nil, err
	}
	c, err := t.db.compile(schema, st, stmt, declared)
	if err != nil {
		return nil, err
	}
	p := &preparedDML{st: st, c: c, declared: declared}
	if st.PlanOnly {
		return p, nil
	}
	if p.args, err = bindArgs(c, st, declared); err != nil {
		return nil, err
	}
	if c.KeyProbe != nil {
		if p.probe, err = bindArgs(c.KeyProbe, st, declared); err != nil {
			return nil, err
		}
	}
	if c.Decide != nil {
		if p.decide, err = bindArgs(c.Decide.Query, st, declared); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// runPrepared runs one prepared DML statement: optimistically when it can, else under the lock,
// which the transaction then keeps.
func (t *Txn) runPrepared(ctx context.Context, p *preparedDML, schema *catalog.Schema) (*Result, error) {
	if !t.hasLock && p.c.Repeatable {
		res, err := t.runBatchOptimistic(ctx, []*preparedDML{p}, schema)
		if err != nil {
			return nil, err
		}
		return res[0], nil
	}
	if err := t.acquireLock(ctx, "DML: "+heldSQL(p.st.SQL), nil); err != nil {
		return nil, err
	}
	if schema != t.db.Schema() {
		t.abortLocked("Transaction was aborted because the schema changed; retry the transaction.")
		return nil, abortedError(t.abortReason)
	}
	out, err := t.runDML(ctx, p.c, p.args, schema)
	if err != nil {
		return nil, blameUntypedParams(p.c, err)
	}
	t.recordDMLWrites(schema, p.c, out.keys)
	t.pending = append(t.pending, out.pending...)
	return out.res, nil
}

// blameUntypedParams turns an INTERNAL error of a statement with parameters of no known type into
// INVALID_ARGUMENT. A parameter sent without param_types whose type the statement does not fix
// (SELECT -@n, UNNEST(@list)) reaches SQLite and the SQL functions as the JSON string it was sent
// as; what they then fail on (a string where an INT64 or an array was expected) is the caller's
// ambiguity, not a fault of the emulator, and a client must not see it as a server error.
func blameUntypedParams(c *sqlgen.Compiled, err error) error {
	if status.Code(err) != codes.Internal {
		return err
	}
	var untyped []string
	for _, name := range c.Params {
		if c.ParamTypes[name].Code == spantype.Unknown && !slices.Contains(untyped, "@"+name) {
			untyped = append(untyped, "@"+name)
		}
	}
	if len(untyped) == 0 {
		return err
	}
	return errorf(codes.InvalidArgument, "%s (parameter %s has no type here: send its param_types)", status.Convert(err).Message(), strings.Join(untyped, ", "))
}

// compile translates a statement, reusing an earlier translation of the same text with the
// same parameter types against the same schema.
func (db *DB) compile(schema *catalog.Schema, st Statement, stmt ast.Statement, declared map[string]spantype.Type) (*sqlgen.Compiled, error) {
	key := compileKey(st.SQL, declared)
	db.compiledMu.Lock()
	e, ok := db.compiled[key]
	db.compiledMu.Unlock()
	if ok && e.schema == schema {
		return e.c, nil
	}
	c, err := sqlgen.Compile(schema, stmt, declared)
	if err != nil || c.Volatile {
		return c, err
	}
	db.compiledMu.Lock()
	if len(db.compiled) >= maxCachedStatements {
		clear(db.compiled)
	}
	db.compiled[key] = compiledEntry{schema: schema, c: c}
	db.compiledMu.Unlock()
	return c, nil
}

type compiledEntry struct {
	schema *catalog.Schema
	c      *sqlgen.Compiled
}

func compileKey(sqlText string, declared map[string]spantype.Type) string {
	names := make([]string, 0, len(declared))
	for n := range declared {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(sqlText)
	for _, n := range names {
		b.WriteString("\x00" + n + "=" + declared[n].String())
	}
	return b.String()
}

// dmlOutcome is what a DML statement did: its result, the keys of the rows it wrote and the
// cells it set to the pending commit timestamp.
type dmlOutcome struct {
	res     *Result
	keys    [][]any
	pending []pendingTimestamp
}

// loggedDML is a DML statement run optimistically, kept to be run again under the lock; stamps
// are the positions among args of its PENDING_COMMIT_TIMESTAMP() values.
type loggedDML struct {
	sql    string
	args   []any
	stamps []int
}

// runDML executes a compiled DML statement on the writer connection, atomically (a savepoint
// undoes a failed statement without ending the SQLite transaction). The caller holds the lock.
func (t *Txn) runDML(ctx context.Context, c *sqlgen.Compiled, args []any, schema *catalog.Schema) (*dmlOutcome, error) {
	w := t.db.writer
	if _, err := w.ExecContext(ctx, "SAVEPOINT dml"); err != nil {
		return nil, internalf("savepoint: %v", err)
	}
	wc := &writeContext{table: c.Table, insert: c.Insert, schema: schema}
	fail := func(err error) (*dmlOutcome, error) {
		w.ExecContext(context.Background(), "ROLLBACK TO dml")
		w.ExecContext(context.Background(), "RELEASE dml")
		return nil, mapError(err, wc)
	}
	all := append(append([]sqlgen.Column(nil), c.Columns...), c.HiddenKeyColumns...)
	rows, err := w.QueryContext(ctx, c.SQL, args...)
	if err != nil {
		return fail(err)
	}
	stored, err := scanAll(rows, len(all))
	if err != nil {
		return fail(err)
	}
	out := &dmlOutcome{res: &Result{IsDML: true, Fields: fields(c.Columns), RowCount: int64(len(stored))}}
	nVisible := len(c.Columns)
	for _, r := range stored {
		key := r[nVisible:]
		out.keys = append(out.keys, key)
		for _, col := range c.PendingColumns {
			out.pending = append(out.pending, pendingTimestamp{table: c.Table, column: col, key: key})
		}
		if nVisible > 0 {
			vals, err := encodeRow(r[:nVisible], c.Columns)
			if err != nil {
				return fail(err)
			}
			out.res.Rows = append(out.res.Rows, vals)
		}
	}
	if _, err := w.ExecContext(ctx, "RELEASE dml"); err != nil {
		return fail(err)
	}
	return out, nil
}

// runBatchOptimistic runs DML statements in order without keeping the lock when it can: without
// taking it at all when a read of committed data tells what each writes (decideBatch), else under
// the lock for the statements alone, where it replays the transaction's earlier DML, runs them,
// notes the keys each read and wrote, and rolls back. The statements are replayed at commit (or
// when the transaction takes the lock for good), after their footprints are validated. See
// occ.go. Once a statement's reads are not exactly known keys (one that scans, or skipped a row,
// or failed), the transaction keeps the lock instead, with the effects of the statements run so
// far in place, as if it had taken it from the start; the statements after it run under it. It
// returns the results of the statements that ran, and the error of the one that failed.
func (t *Txn) runBatchOptimistic(ctx context.Context, ps []*preparedDML, schema *catalog.Schema) ([]*Result, error) {
	if res, ok, err := t.decideBatch(ctx, ps, schema); ok {
		return res, err
	}
	db := t.db
	if err := t.lockValidated(ctx); err != nil {
		return nil, err
	}
	if schema != db.Schema() {
		<-db.lock
		t.abortLocked("Transaction was aborted because the schema changed; retry the transaction.")
		return nil, abortedError(t.abortReason)
	}
	if err := t.beginReplayed(ctx, ""); err != nil {
		<-db.lock
		return nil, err
	}
	var (
		results []*Result
		outs    []*dmlOutcome
		fps     []footprint
		held    string // why the transaction keeps the lock, "" while it need not
		runErr  error
	)
	for _, p := range ps {
		seq := t.noteRead()
		out, err := t.runDML(ctx, p.c, p.args, schema)
		if err != nil {
			runErr = blameUntypedParams(p.c, err)
			if held == "" {
				held = "DML failed: " + heldSQL(p.st.SQL)
			}
			break
		}
		results, outs = append(results, out.res), append(outs, out)
		if held != "" {
			continue
		}
		var probed []any
		if p.c.KeyProbe != nil {
			probed = t.probeKey(ctx, p.c.KeyProbe, p.probe)
		}
		f, exact := dmlFootprint(p.c, out, probed, seq)
		if !exact {
			held = "DML not exact: " + heldSQL(p.st.SQL)
			continue
		}
		fps = append(fps, f...)
	}
	if held != "" {
		// Keep the lock: what a statement read cannot be validated later. The footprints so
		// far were validated when the lock was taken and nothing committed since.
		db.countHeld(held)
		t.validated()
		t.pending = append(t.pending, t.replayPending...) // replayed above with the pending value
		t.dml, t.dmlTables, t.replayPending = nil, nil, nil
		t.hasLock = true
		db.heldAcross.Store(t)
		db.retainVersion()
		for i, out := range outs {
			t.recordDMLWrites(schema, ps[i].c, out.keys)
			t.pending = append(t.pending, out.pending...)
		}
		return results, runErr
	}
	db.writer.ExecContext(context.Background(), "ROLLBACK")
	<-db.lock
	t.addFootprints(fps)
	t.logOptimistic(schema, ps, outs)
	return results, nil
}

// logOptimistic records DML statements run (or decided) without keeping the lock, with what each
// did (outs): logged to be replayed at commit, their writes and pending commit timestamps.
func (t *Txn) logOptimistic(schema *catalog.Schema, ps []*preparedDML, outs []*dmlOutcome) {
	if t.dmlTables == nil {
		t.dmlTables = map[string]bool{}
	}
	for i, out := range outs {
		c := ps[i].c
		t.dml = append(t.dml, loggedDML{sql: c.SQL, args: ps[i].args, stamps: stampArgs(c)})
		// A statement that wrote no row (an update whose row did not qualify) changed no table: a
		// read after it has no own write to see and stays optimistic, as does the statement
		// itself. Its replay at commit writes nothing either, since its footprint is validated
		// first.
		if len(out.keys) > 0 {
			touched := newWriteSet()
			touched.addTable(schema, c.Table)
			for name := range touched.tables {
				t.dmlTables[name] = true
			}
		}
		t.recordDMLWrites(schema, c, out.keys)
		t.replayPending = append(t.replayPending, out.pending...)
	}
}

// stampArgs are the positions of a compiled DML statement's PENDING_COMMIT_TIMESTAMP() values
// among its arguments (sqlgen.CommitTimestampParam).
func stampArgs(c *sqlgen.Compiled) []int {
	var out []int
	for i, name := range c.Params {
		if name == sqlgen.CommitTimestampParam {
			out = append(out, i)
		}
	}
	return out
}

// probeKey runs a statement's key probe (see sqlgen.Compiled.KeyProbe) and returns the key of
// the one row the statement can read, nil if it cannot be computed. The caller holds the lock.
func (t *Txn) probeKey(ctx context.Context, probe *sqlgen.Compiled, args []any) []any {
	rows, err := t.db.writer.QueryContext(ctx, probe.SQL, args...)
	if err != nil {
		return nil
	}
	stored, err := scanAll(rows, len(probe.Columns))
	if err != nil || len(stored) != 1 {
		return nil
	}
	return stored[0]
}

// recordDMLWrites adds the rows a DML statement wrote to the transaction's write set: their
// keys, and for a delete the tables it may cascade into.
func (t *Txn) recordDMLWrites(schema *catalog.Schema, c *sqlgen.Compiled, keys [][]any) {
	if t.writes == nil {
		t.writes = newWriteSet()
	}
	indexed := len(schema.TableIndexes(c.Table.Name)) > 0
	for _, k := range keys {
		vals, ok := storedKey(c, k)
		if !ok {
			t.writes.addTable(schema, c.Table)
			return
		}
		// Which columns DML set is not told here: any index of the table may have changed.
		t.writes.addRow(writtenKey{table: strings.ToUpper(c.Table.Name), vals: vals, idxUnknown: indexed})
	}
	if c.Delete {
		t.writes.addDependents(schema, c.Table)
	}
}

// fixPendingTimestamps writes the commit timestamp into the cells DML filled with
// PENDING_COMMIT_TIMESTAMP().
func (t *Txn) fixPendingTimestamps(ctx context.Context, ts time.Time) error {
	if len(t.pending) == 0 {
		return nil
	}
	tsText := spantype.FormatTimestamp(ts)
	for _, p := range t.pending {
		keyCols := p.table.KeyColumns()
		conds := make([]string, len(keyCols))
		for i, k := range keyCols {
			conds[i] = catalog.Quote(k.SQLiteName) + " = ?"
		}
		q := fmt.Sprintf("UPDATE %s SET %s = ? WHERE %s AND %s = ?", catalog.Quote(p.table.SQLiteName),
			catalog.Quote(p.column), strings.Join(conds, " AND "), catalog.Quote(p.column))
		args := append([]any{tsText}, p.key...)
		args = append(args, spantype.PendingCommitTimestamp)
		if _, err := t.db.writer.ExecContext(ctx, q, args...); err != nil {
			return mapError(err, &writeContext{table: p.table})
		}
	}
	return nil
}

func declaredParamTypes(st Statement) (map[string]spantype.Type, error) {
	out := map[string]spantype.Type{}
	for name, pt := range st.ParamTypes {
		t, err := spantype.FromProto(pt)
		if err != nil {
			return nil, errorf(codes.InvalidArgument, "Invalid type for parameter %s: %v", name, err)
		}
		out[name] = t
	}
	if st.Params != nil {
		for name, v := range st.Params.Fields {
			if _, ok := out[name]; ok {
				continue
			}
			// An untyped parameter: infer what we can from the JSON value; the translator
			// decides the rest from context.
			switch v.Kind.(type) {
			case *structpb.Value_BoolValue:
				out[name] = spantype.TBool
			case *structpb.Value_NumberValue:
				out[name] = spantype.TFloat64
			}
		}
	}
	return out, nil
}

func bindArgs(c *sqlgen.Compiled, st Statement, declared map[string]spantype.Type) ([]any, error) {
	args := make([]any, len(c.Params))
	for i, name := range c.Params {
		if name == sqlgen.CommitTimestampParam {
			args[i] = spantype.PendingCommitTimestamp
			continue
		}
		v, ok := lookupParam(st.Params, name)
		if !ok {
			return nil, errorf(codes.InvalidArgument, "No parameter found for binding: %s", name)
		}
		typ, ok := c.ParamTypes[name]
		if !ok {
			typ = declared[name]
		}
		s, err := spantype.ToStorage(typ, v)
		if err != nil {
			return nil, errorf(codes.InvalidArgument, "Invalid value for bind parameter %s: %v", name, err)
		}
		args[i] = s
	}
	return args, nil
}

func lookupParam(params *structpb.Struct, name string) (*structpb.Value, bool) {
	if params == nil {
		return nil, false
	}
	if v, ok := params.Fields[name]; ok {
		return v, true
	}
	for k, v := range params.Fields {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return nil, false
}

func planResult(c *sqlgen.Compiled, declared map[string]spantype.Type) *Result {
	r := &Result{Fields: fields(c.Columns)}
	for name, typ := range c.ParamTypes {
		if _, ok := declared[name]; !ok {
			r.UndeclaredParams = append(r.UndeclaredParams, &sppb.StructType_Field{Name: name, Type: typ.Proto()})
		}
	}
	return r
}

func fields(cols []sqlgen.Column) []*sppb.StructType_Field {
	out := make([]*sppb.StructType_Field, len(cols))
	for i, c := range cols {
		out[i] = &sppb.StructType_Field{Name: c.Name, Type: c.Type.Proto()}
	}
	return out
}

// querier is a *sql.Conn or a *sql.DB.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func queryRows(ctx context.Context, conn querier, q string, args []any, cols []sqlgen.Column) ([][]*structpb.Value, error) {
	rows, err := conn.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	stored, err := scanAll(rows, len(cols))
	if err != nil {
		return nil, err
	}
	out := make([][]*structpb.Value, 0, len(stored))
	for _, r := range stored {
		vals, err := encodeRow(r, cols)
		if err != nil {
			return nil, err
		}
		out = append(out, vals)
	}
	return out, nil
}

func scanAll(rows *sql.Rows, n int) ([][]any, error) {
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		r := make([]any, n)
		ptrs := make([]any, n)
		for i := range r {
			ptrs[i] = &r[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func encodeRow(r []any, cols []sqlgen.Column) ([]*structpb.Value, error) {
	vals := make([]*structpb.Value, len(cols))
	for i, c := range cols {
		v, err := spantype.FromStorage(c.Type, r[i])
		if err != nil {
			if errors.Is(err, spantype.ErrPendingCommitTimestamp) {
				return nil, status.Errorf(codes.InvalidArgument, "%s: column %s", err.Error(), c.Name)
			}
			return nil, internalf("encode column %s: %v", c.Name, err)
		}
		vals[i] = v
	}
	return vals, nil
}

func isAborted(err error) bool { return status.Code(err) == codes.Aborted }
