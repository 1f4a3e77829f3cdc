package engine

import (
	"context"
	"slices"
	"strings"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/catalog"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/sqlgen"
)

// decideBatch runs DML statements of a transaction that does not hold the lock without taking it
// for them, when a read of committed data tells what each writes (sqlgen.Decision): an INSERT OR
// IGNORE of one row, an UPDATE pinned by key, such as a consumer's inbox row and its claim of an
// aggregate's version. Spanner locks the rows a statement touches, not the database, while
// runBatchOptimistic takes the database's write lock to run the statements and roll them back:
// every commit of the database waits meanwhile, for statements that write nothing yet.
//
// Each statement's read is a key read, recorded as the transaction's other optimistic reads are
// (a footprint validated at commit), and the statement is logged to be replayed at commit, as
// runBatchOptimistic logs it. The replay then writes exactly what the read told: nothing wrote
// the key in between, and the statement cannot fail on its values (the decision's checks). ok is
// false, and nothing recorded, when a statement does not qualify: it has no decision, a value or
// the row fails a check (the statement, run, reports the error Spanner would), an earlier
// statement of the transaction or the batch wrote its table (committed data would not show that
// write), or a read failed; the caller then runs the batch as before.
func (t *Txn) decideBatch(ctx context.Context, ps []*preparedDML, schema *catalog.Schema) (res []*Result, ok bool, err error) {
	db := t.db
	if schema != db.Schema() {
		return nil, false, nil
	}
	var written []string // the batch's tables so far
	for _, p := range ps {
		d := p.c.Decide
		if d == nil || p.decide == nil {
			return nil, false, nil
		}
		table := strings.ToUpper(p.c.Table.Name)
		if t.dmlTables[table] || slices.Contains(written, table) {
			return nil, false, nil
		}
		for _, vc := range d.Checks {
			if v, _ := argOf(p.c, p.args, vc.Param); !vc.Check(v) {
				return nil, false, nil
			}
		}
		written = append(written, table)
	}
	seq := t.noteRead()
	conn, done := db.reader()
	outs := make([]*dmlOutcome, len(ps))
	var fps []footprint
	for i, p := range ps {
		out, key, err := decide(ctx, conn, p)
		if err != nil {
			done()
			return nil, false, nil
		}
		fp, ok := keyFootprint(p.c, key, seq)
		if !ok {
			done()
			return nil, false, nil
		}
		outs[i], fps = out, append(fps, fp)
	}
	done()
	db.e.stats.decidedDML.Add(int64(len(ps)))
	t.addFootprints(fps)
	t.logOptimistic(schema, ps, outs)
	for _, out := range outs {
		res = append(res, out.res)
	}
	return res, true, t.validate(ctx)
}

// decide runs a statement's decision query on q and returns what the statement writes (as runDML
// would report it) and the key it read.
func decide(ctx context.Context, q querier, p *preparedDML) (out *dmlOutcome, key []any, err error) {
	c, d := p.c, p.c.Decide
	rows, err := runQuery(ctx, q, d.Query.SQL, p.decide, len(d.Query.Columns))
	if err != nil {
		return nil, nil, err
	}
	nKey := len(c.HiddenKeyColumns)
	out = &dmlOutcome{res: &Result{IsDML: true, Fields: fields(c.Columns)}}
	if len(rows) == 1 {
		if holds, _ := rows[0][len(rows[0])-1].(int64); holds != 1 {
			return nil, nil, errNotDecided // a CHECK constraint fails: the statement reports it
		}
	}
	switch {
	case d.Insert && len(rows) == 1:
		key = rows[0][:nKey]
		if exists, _ := rows[0][nKey].(int64); exists == 0 {
			out.keys = [][]any{key}
		}
	case !d.Insert && len(rows) == 1:
		key = rows[0][:nKey]
		out.keys = [][]any{key}
	case !d.Insert && len(rows) == 0:
		probed, err := runQuery(ctx, q, c.KeyProbe.SQL, p.probe, len(c.KeyProbe.Columns))
		if err != nil || len(probed) != 1 {
			return nil, nil, errNotDecided
		}
		key = probed[0]
	default:
		return nil, nil, errNotDecided
	}
	out.res.RowCount = int64(len(out.keys))
	for _, k := range out.keys {
		for _, col := range c.PendingColumns {
			out.pending = append(out.pending, pendingTimestamp{table: c.Table, column: col, key: k})
		}
	}
	return out, key, nil
}

// errNotDecided is decide's answer when its read did not tell what the statement writes.
var errNotDecided = internalf("the statement's decision read no single key")

// argOf is the value bound to the statement's parameter name (args are c's, in the order of
// c.Params; names compare as GoogleSQL compares them, without case); ok is false if c has no such
// parameter.
func argOf(c *sqlgen.Compiled, args []any, name string) (v any, ok bool) {
	for i, n := range c.Params {
		if strings.EqualFold(n, name) {
			return args[i], true
		}
	}
	return nil, false
}

// keyFootprint is the read of one key of a DML statement's target (stored: the key as SQLite
// returns it), at commit sequence seq.
func keyFootprint(c *sqlgen.Compiled, stored []any, seq uint64) (footprint, bool) {
	vals, ok := storedKey(c, stored)
	if !ok {
		return footprint{}, false
	}
	return footprint{table: strings.ToUpper(c.Table.Name), key: keyString(c.Table.Name, vals), seq: seq}, true
}
