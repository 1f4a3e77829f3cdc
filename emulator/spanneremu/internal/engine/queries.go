package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"

	"github.com/cloudspannerecosystem/memefish/ast"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/sqlfuncs"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/sqlgen"
)

// SQL queries in read-write transactions: validated by their result.
//
// What a query read cannot be told as keys or key ranges in general (a WHERE on any column, a
// join, an aggregate), and a footprint of its whole tables would abort it for any write to them.
// So a query records its result instead (a digest of the rows it returned), with the tables it
// read and the commit it read at. As long as no commit wrote any of those tables, the result
// stands. When one did, the query is run again under the write lock, where no commit can happen,
// on the transaction's own DML as it stood when the query first ran: if it returns the same rows,
// the transaction saw what it would see now, and it goes on; otherwise it is aborted. This is
// the transaction's predicate read: it conflicts only with a commit that changed its answer (a
// phantom included), never with writes to rows it did not select.
//
// The rows are compared as a multiset: a query without ORDER BY promises no order, and an
// ORDER BY's order follows from the rows. A query that calls a volatile function (GENERATE_UUID)
// cannot be compared, and takes the write lock for the rest of the transaction as before.

// queryRead is a SQL query run optimistically by a read-write transaction.
type queryRead struct {
	sql    string
	args   []any
	tables []string // upper-cased tables it read
	digest []byte   // of its rows (rowsDigest)
	cols   int      // how many columns it returns
	after  int      // how many of the transaction's logged DML statements ran before it
	seq    uint64   // the commit sequence number its result is known to hold at
}

// rowsDigest is a digest of rows as SQLite returned them, independent of their order.
func rowsDigest(rows [][]any) []byte {
	sums := make([][]byte, len(rows))
	for i, r := range rows {
		h := sha256.New()
		for _, v := range r {
			fmt.Fprintf(h, "%T:%v\x00", v, v)
		}
		sums[i] = h.Sum(nil)
	}
	slices.SortFunc(sums, bytes.Compare)
	h := sha256.New()
	for _, s := range sums {
		h.Write(s)
	}
	return h.Sum(nil)
}

// queryOptimistically runs a query of a read-write transaction that does not hold the lock
// without taking it (optimisticQuery); ok is false for a query that must take it (one that calls
// a volatile function).
func (t *Txn) queryOptimistically(ctx context.Context, st Statement, stmt ast.Statement, declared map[string]spantype.Type) (res *Result, ok bool, err error) {
	c, err := t.db.compile(t.db.Schema(), st, stmt, declared)
	switch {
	case err != nil:
		return nil, true, err
	case c.ReadsInfoSchema:
		return nil, true, errorf(codes.InvalidArgument, "INFORMATION_SCHEMA can only be queried in read-only or single-use transactions.")
	case st.PlanOnly:
		return planResult(c, declared), true, nil
	case sqlfuncs.CallsVolatile(c.SQL):
		return nil, false, nil
	}
	args, err := bindArgs(c, st, declared)
	if err != nil {
		return nil, true, err
	}
	if c.ForUpdate {
		if err := t.lockQueryExclusive(ctx, c, args); err != nil {
			return nil, true, err
		}
	}
	stored, err := t.optimisticQuery(ctx, c, args)
	if err != nil {
		return nil, true, err
	}
	res = &Result{Fields: fields(c.Columns), Rows: make([][]*structpb.Value, 0, len(stored))}
	for _, r := range stored {
		vals, err := encodeRow(r, c.Columns)
		if err != nil {
			return nil, true, err
		}
		res.Rows = append(res.Rows, vals)
	}
	return res, true, nil
}

// optimisticQuery runs a compiled query of a read-write transaction that does not hold the
// lock, records it (see above) and validates the transaction's reads. A query of a table the
// transaction's logged DML changed must see that DML: it runs on the writer under the lock for
// the query alone, with the DML replayed, and rolled back. Any other query reads committed data,
// as a read does (Read): the DML cannot change its answer, so it is recorded as run before it.
// The caller holds t.mu.
func (t *Txn) optimisticQuery(ctx context.Context, c *sqlgen.Compiled, args []any) ([][]any, error) {
	db := t.db
	var (
		stored [][]any
		seq    uint64
		err    error
	)
	after := len(t.dml)
	if !slices.ContainsFunc(c.ReadTables, func(table string) bool { return t.dmlTables[table] }) {
		after = 0
	}
	if after == 0 {
		seq = t.noteRead()
		conn, done := db.reader()
		stored, err = runQuery(ctx, conn, c.SQL, args, len(c.Columns))
		done()
	} else {
		if err := t.lockValidated(ctx); err != nil {
			return nil, err
		}
		if err := t.beginReplayed(ctx, ""); err != nil {
			<-db.lock
			return nil, err
		}
		seq = t.noteRead()
		stored, err = runQuery(ctx, db.writer, c.SQL, args, len(c.Columns))
		db.writer.ExecContext(context.Background(), "ROLLBACK")
		<-db.lock
	}
	if err != nil {
		return nil, blameUntypedParams(c, mapError(err, nil))
	}
	if fps := keyReadFootprints(c, args, seq); after == 0 && fps != nil {
		// It read the key ranges of one aggregate, as a Read would: a commit conflicts with it
		// when it wrote one of those rows, and it is not run again at commit.
		t.addFootprints(fps)
	} else {
		t.queries = append(t.queries, queryRead{sql: c.SQL, args: args, tables: c.ReadTables, cols: len(c.Columns),
			digest: rowsDigest(stored), after: after, seq: seq})
	}
	if err := t.validate(ctx); err != nil {
		return nil, err
	}
	return stored, nil
}

func runQuery(ctx context.Context, q querier, sqlText string, args []any, n int) ([][]any, error) {
	rows, err := q.QueryContext(ctx, sqlText, args...)
	if err != nil {
		return nil, err
	}
	return scanAll(rows, n)
}

// staleQueries returns the indexes of the queries a commit may have changed the answer of since
// they were known to hold, and whether a schema change makes them all stale for good. Caller
// holds DB.mu.
func (o *occState) staleQueries(qs []queryRead) (stale []int, schemaChanged bool) {
	for i, q := range qs {
		if o.allSeq > q.seq {
			return nil, true
		}
		for _, tb := range q.tables {
			if o.tableSeq[tb] > q.seq || o.wideSeq[tb] > q.seq {
				stale = append(stale, i)
				break
			}
		}
	}
	return stale, false
}

// recheckQueries runs the stale queries again, each on the transaction's DML as it stood when the
// query first ran, and returns the first whose rows changed (nil if none did); the rest then
// hold as of now (seq). The caller holds t.mu and the lock.
func (t *Txn) recheckQueries(ctx context.Context, stale []int, seq uint64) (*queryRead, error) {
	w := t.db.writer
	slices.SortFunc(stale, func(a, b int) int { return t.queries[a].after - t.queries[b].after })
	replayed, began := 0, false
	defer func() {
		if began {
			w.ExecContext(context.Background(), "ROLLBACK TO recheck")
			w.ExecContext(context.Background(), "RELEASE recheck")
		}
	}()
	for _, i := range stale {
		q := &t.queries[i]
		t.db.e.stats.queryRechecks.Add(1)
		if q.after > 0 && !began {
			if _, err := w.ExecContext(ctx, "SAVEPOINT recheck"); err != nil {
				return nil, internalf("savepoint: %v", err)
			}
			began = true
		}
		for ; replayed < q.after; replayed++ {
			if err := t.dml[replayed].run(ctx, w, ""); err != nil {
				return q, nil // it cannot have run on this state: the answer changed
			}
		}
		rows, err := runQuery(ctx, w, q.sql, q.args, q.cols)
		if err != nil || !bytes.Equal(rowsDigest(rows), q.digest) {
			return q, nil
		}
	}
	for _, i := range stale {
		t.queries[i].seq = seq
	}
	return nil, nil
}

// keyReadFootprints are the footprints of a query's key ranges (sqlgen.Compiled.KeyReads), with
// the values its arguments give them, read at seq: each a closed range of the key prefix, which
// compares values as SQLite orders them (a value it cannot order counts as inside). nil when the
// query has none, or an argument cannot be told.
func keyReadFootprints(c *sqlgen.Compiled, args []any, seq uint64) []footprint {
	if len(c.KeyReads) == 0 {
		return nil
	}
	fps := make([]footprint, 0, len(c.KeyReads))
	for _, r := range c.KeyReads {
		prefixes, ok := keyReadPrefixes(c, r, args)
		if !ok {
			return nil
		}
		for _, vals := range prefixes {
			fps = append(fps, footprint{table: strings.ToUpper(r.Table.Name), seq: seq,
				rng: &keyRange{kc: tableKey(r.Table), start: vals, end: vals, hasStart: true, hasEnd: true}})
		}
	}
	return fps
}

// keyReadPrefixes are the key prefixes r reads: the arguments of its parameters (argOf), one
// prefix per element of its array when r.Set (none for an empty or
// NULL array, which reads nothing); ok is false if one of them is not among c's parameters or
// its array cannot be decoded.
func keyReadPrefixes(c *sqlgen.Compiled, r sqlgen.KeyRead, args []any) (prefixes [][]any, ok bool) {
	vals := make([]any, len(r.Params))
	for i, p := range r.Params {
		if vals[i], ok = argOf(c, args, p); !ok {
			return nil, false
		}
	}
	if !r.Set {
		return [][]any{vals}, true
	}
	last := len(vals) - 1
	if vals[last] == nil {
		return nil, true
	}
	text, isText := vals[last].(string)
	if !isText {
		return nil, false
	}
	elems, err := spantype.DecodeArray(spantype.ArrayOf(r.Table.KeyColumns()[last].Type), text)
	if err != nil {
		return nil, false
	}
	for _, e := range elems {
		prefixes = append(prefixes, append(slices.Clone(vals[:last]), e))
	}
	return prefixes, true
}
