package histcheck

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"

	"cloud.google.com/go/spanner"
	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
)

// Schema is the DDL of the database the workloads run on: one table per workload, each with an
// INT64 key Id, a non-key INT64 column Grp (Id mod 3) with a secondary index storing Val, and
// the value Val.
var Schema = []string{
	`CREATE TABLE Accounts (Id INT64 NOT NULL, Grp INT64 NOT NULL, Val INT64 NOT NULL) PRIMARY KEY (Id)`,
	`CREATE INDEX AccountsByGrp ON Accounts(Grp) STORING (Val)`,
	`CREATE TABLE Lists (Id INT64 NOT NULL, Grp INT64 NOT NULL, Val STRING(MAX) NOT NULL) PRIMARY KEY (Id)`,
	`CREATE INDEX ListsByGrp ON Lists(Grp) STORING (Val)`,
	`CREATE TABLE Registers (Id INT64 NOT NULL, Grp INT64 NOT NULL, Val INT64 NOT NULL) PRIMARY KEY (Id)`,
	`CREATE INDEX RegistersByGrp ON Registers(Grp) STORING (Val)`,
}

const (
	acctPrefix = "acct"
	listPrefix = "list"
	regPrefix  = "reg"
	groups     = 3
)

// table is one workload table: rows 0..n-1, all created by the setup and never deleted.
type table struct {
	name, index, prefix string
	intVal              bool
	n                   int
}

func (tb *table) key(id int64) Key { return Key(tb.prefix + strconv.FormatInt(id, 10)) }

func group(id int64) int64 { return id % groups }

// value converts a canonical value to the column's Go type.
func (tb *table) value(v string) any {
	if tb.intVal {
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	return v
}

// reader is what read-write, read-only and single-use transactions have in common.
type reader interface {
	ReadRow(ctx context.Context, table string, key spanner.Key, columns []string) (*spanner.Row, error)
	Read(ctx context.Context, table string, keys spanner.KeySet, columns []string) *spanner.RowIterator
	ReadWithOptions(ctx context.Context, table string, keys spanner.KeySet, columns []string, opts *spanner.ReadOptions) *spanner.RowIterator
	ReadUsingIndex(ctx context.Context, table, index string, keys spanner.KeySet, columns []string) *spanner.RowIterator
	Query(ctx context.Context, statement spanner.Statement) *spanner.RowIterator
}

// readMethod is a way to read rows; each covers the target ids and perhaps more.
type readMethod int

const (
	mReadRow     readMethod = iota // ReadRow by key
	mReadKeys                      // Read with a KeySet of keys
	mReadRange                     // Read with a KeyRange around the targets
	mReadIndex                     // ReadUsingIndex on the Grp index
	mQueryKey                      // SELECT ... WHERE Id = @id / Id IN UNNEST(@ids)
	mQueryRange                    // SELECT ... WHERE Id >= @lo AND Id < @hi
	mQueryGroup                    // SELECT ... WHERE Grp = @g (non-key column)
	mQueryValue                    // SELECT ... WHERE Val IS NOT NULL AND Id ... (non-key predicate)
	mReadLocked                    // Read of keys with LOCK_HINT_EXCLUSIVE (in a read-only transaction the client drops the hint)
	mQueryLocked                   // mQueryKey's query ending in FOR UPDATE (in a read-write transaction)
	mReadAll                       // Read(AllKeys)
	nReadMethods
)

// readOne reads at least the row id with a random method.
func (tb *table) readOne(ctx context.Context, r reader, rng *rand.Rand, id int64) Op {
	return tb.read(ctx, r, readMethod(rng.IntN(int(mReadAll))), rng, []int64{id})
}

// readSome reads at least ids with a random method fit for several keys.
func (tb *table) readSome(ctx context.Context, r reader, rng *rand.Rand, ids []int64) Op {
	ms := []readMethod{mReadKeys, mReadRange, mReadIndex, mQueryKey, mQueryRange, mQueryGroup, mQueryValue, mReadLocked, mQueryLocked, mReadAll}
	return tb.read(ctx, r, ms[rng.IntN(len(ms))], rng, ids)
}

// readAll reads every row with one read.
func (tb *table) readAll(ctx context.Context, r reader, rng *rand.Rand) Op {
	ids := make([]int64, tb.n)
	for i := range ids {
		ids[i] = int64(i)
	}
	ms := []readMethod{mReadRange, mReadIndex, mQueryRange, mQueryGroup, mQueryValue, mReadAll, mReadKeys}
	return tb.read(ctx, r, ms[rng.IntN(len(ms))], rng, ids)
}

// read runs a read that covers at least the target ids and records every row it covers.
func (tb *table) read(ctx context.Context, r reader, m readMethod, rng *rand.Rand, ids []int64) Op {
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	lo, hi := ids[0], ids[len(ids)-1]
	cols := []string{"Id", "Val"}
	covered := map[int64]bool{}
	cover := func(pred func(id int64) bool) {
		for id := int64(0); id < int64(tb.n); id++ {
			if pred(id) {
				covered[id] = true
			}
		}
	}
	in := func(id int64) bool {
		for _, x := range ids {
			if x == id {
				return true
			}
		}
		return false
	}
	var it *spanner.RowIterator
	var method string
	switch m {
	case mReadRow:
		if len(ids) > 1 {
			return tb.read(ctx, r, mReadKeys, rng, ids)
		}
		method = "ReadRow"
		covered[lo] = true
		row, err := r.ReadRow(ctx, tb.name, spanner.Key{lo}, cols)
		op := Op{Kind: OpRead, Method: method}
		if err != nil && spanner.ErrCode(err) != codes.NotFound {
			op.Err, op.err = err.Error(), err
			return op
		}
		var rows []*spanner.Row
		if err == nil {
			rows = []*spanner.Row{row}
		}
		return tb.observe(op, rows, covered)
	case mReadKeys, mReadLocked:
		method = "Read(keys)"
		opts := &spanner.ReadOptions{}
		if m == mReadLocked {
			method, opts.LockHint = "Read(keys, LOCK_HINT_EXCLUSIVE)", sppb.ReadRequest_LOCK_HINT_EXCLUSIVE
		}
		var keys []spanner.KeySet
		for _, id := range ids {
			keys = append(keys, spanner.Key{id})
			covered[id] = true
		}
		it = r.ReadWithOptions(ctx, tb.name, spanner.KeySets(keys...), cols, opts)
	case mReadRange:
		// A random kind of range that still holds [lo, hi].
		kinds := []spanner.KeyRangeKind{spanner.ClosedClosed, spanner.ClosedOpen, spanner.OpenClosed, spanner.OpenOpen}
		kind := kinds[rng.IntN(len(kinds))]
		start, end := lo-int64(rng.IntN(2)), hi+int64(rng.IntN(2))
		startOpen := kind == spanner.OpenClosed || kind == spanner.OpenOpen
		endOpen := kind == spanner.ClosedOpen || kind == spanner.OpenOpen
		if startOpen && start == lo {
			start--
		}
		if endOpen && end == hi {
			end++
		}
		lb, rb := "[", "]"
		if startOpen {
			lb = "("
		}
		if endOpen {
			rb = ")"
		}
		method = fmt.Sprintf("Read(KeyRange %s%d,%d%s)", lb, start, end, rb)
		cover(func(id int64) bool {
			return (id > start || (!startOpen && id == start)) && (id < end || (!endOpen && id == end))
		})
		it = r.Read(ctx, tb.name, spanner.KeyRange{Start: spanner.Key{start}, End: spanner.Key{end}, Kind: kind}, cols)
	case mReadIndex:
		gs := map[int64]bool{}
		var keys []spanner.KeySet
		for _, id := range ids {
			if g := group(id); !gs[g] {
				gs[g] = true
				keys = append(keys, spanner.Key{g})
			}
		}
		method = fmt.Sprintf("ReadUsingIndex(%s, %d groups)", tb.index, len(keys))
		cover(func(id int64) bool { return gs[group(id)] })
		it = r.ReadUsingIndex(ctx, tb.name, tb.index, spanner.KeySets(keys...), cols)
	case mQueryKey, mQueryLocked:
		var st spanner.Statement
		if len(ids) == 1 {
			st = spanner.Statement{SQL: "SELECT Id, Val FROM " + tb.name + " WHERE Id = @id", Params: map[string]any{"id": lo}}
			method = "Query(WHERE Id = @id)"
		} else {
			st = spanner.Statement{SQL: "SELECT Id, Val FROM " + tb.name + " WHERE Id IN UNNEST(@ids) ORDER BY Id", Params: map[string]any{"ids": ids}}
			method = "Query(WHERE Id IN UNNEST(@ids))"
		}
		// In read-write transactions only: what Spanner does with FOR UPDATE in a read-only one is
		// not checked here.
		if _, rw := r.(*spanner.ReadWriteTransaction); m == mQueryLocked && rw {
			st.SQL += " FOR UPDATE"
			method = strings.Replace(method, ")", " FOR UPDATE)", 1)
		}
		cover(in)
		it = r.Query(ctx, st)
	case mQueryRange:
		method = "Query(WHERE Id >= @lo AND Id < @hi)"
		cover(func(id int64) bool { return id >= lo && id < hi+1 })
		it = r.Query(ctx, spanner.Statement{SQL: "SELECT Id, Val FROM " + tb.name + " WHERE Id >= @lo AND Id < @hi", Params: map[string]any{"lo": lo, "hi": hi + 1}})
	case mQueryGroup:
		gs := map[int64]bool{}
		var list []int64
		for _, id := range ids {
			if g := group(id); !gs[g] {
				gs[g] = true
				list = append(list, g)
			}
		}
		cover(func(id int64) bool { return gs[group(id)] })
		if len(list) == 1 {
			method = "Query(WHERE Grp = @g)"
			it = r.Query(ctx, spanner.Statement{SQL: "SELECT Id, Val FROM " + tb.name + " WHERE Grp = @g", Params: map[string]any{"g": list[0]}})
		} else {
			method = "Query(WHERE Grp IN UNNEST(@gs))"
			it = r.Query(ctx, spanner.Statement{SQL: "SELECT Id, Val FROM " + tb.name + " WHERE Grp IN UNNEST(@gs)", Params: map[string]any{"gs": list}})
		}
	case mQueryValue:
		// A predicate on the value column, true for every row, with the ids as a second
		// condition so that the read still covers exactly the targets.
		cover(in)
		if tb.intVal {
			method = "Query(WHERE Val > @min AND Id IN UNNEST(@ids))"
			it = r.Query(ctx, spanner.Statement{SQL: "SELECT Id, Val FROM " + tb.name + " WHERE Val > @min AND Id IN UNNEST(@ids)", Params: map[string]any{"min": int64(-1 << 62), "ids": ids}})
		} else {
			method = "Query(WHERE Val IS NOT NULL AND Id IN UNNEST(@ids))"
			it = r.Query(ctx, spanner.Statement{SQL: "SELECT Id, Val FROM " + tb.name + " WHERE Val IS NOT NULL AND Id IN UNNEST(@ids)", Params: map[string]any{"ids": ids}})
		}
	default:
		method = "Read(AllKeys)"
		cover(func(int64) bool { return true })
		it = r.Read(ctx, tb.name, spanner.AllKeys(), cols)
	}
	op := Op{Kind: OpRead, Method: method}
	rows, err := drain(it)
	if err != nil {
		op.Err, op.err = err.Error(), err
		return op
	}
	return tb.observe(op, rows, covered)
}

// observe fills op.Obs with the rows returned and a not-found entry for every covered row
// that did not come back.
func (tb *table) observe(op Op, rows []*spanner.Row, covered map[int64]bool) Op {
	got := map[int64]string{}
	for _, row := range rows {
		var id int64
		var v string
		var err error
		if tb.intVal {
			var n int64
			err = row.Columns(&id, &n)
			v = strconv.FormatInt(n, 10)
		} else {
			var s string
			err = row.Columns(&id, &s)
			v = canonList(s)
		}
		if err != nil {
			op.Err, op.err = err.Error(), err
			op.Obs = nil
			return op
		}
		got[id] = v
		covered[id] = true // a row outside the workload's ids would be reported by the checkers
	}
	ids := make([]int64, 0, len(covered))
	for id := range covered {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		v, ok := got[id]
		op.Obs = append(op.Obs, Obs{Key: tb.key(id), Value: v, Found: ok})
	}
	return op
}

func drain(it *spanner.RowIterator) ([]*spanner.Row, error) {
	defer it.Stop()
	var rows []*spanner.Row
	for {
		row, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return rows, nil
		}
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
}

// canonList normalizes a list value: space-separated integers, single spaces.
func canonList(s string) string { return strings.Join(strings.Fields(s), " ") }

// parseList parses a canonical list value.
func parseList(s string) []int64 {
	fs := strings.Fields(s)
	out := make([]int64, 0, len(fs))
	for _, f := range fs {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			n = -1 // not a number: shows up as a garbage element
		}
		out = append(out, n)
	}
	return out
}

// writeMethod is a way to write one row.
type writeMethod int

const (
	wMutUpdate         writeMethod = iota // BufferWrite(Update)
	wMutInsertOrUpdate                    // BufferWrite(InsertOrUpdate)
	wDMLUpdateSet                         // UPDATE ... SET Val = @v WHERE Id = @id
	wDMLInsertOrUpdate                    // INSERT OR UPDATE INTO ... VALUES (...)
	nSetMethods
)

// set writes Val = v to row id with method m, recording the write.
func (tb *table) set(ctx context.Context, tx *spanner.ReadWriteTransaction, m writeMethod, id int64, v string) Op {
	op := Op{Kind: OpWrite, Key: tb.key(id), Write: WriteSet, Arg: v}
	var err error
	switch m {
	case wMutUpdate:
		op.Method = "BufferWrite(Update)"
		err = tx.BufferWrite([]*spanner.Mutation{spanner.Update(tb.name, []string{"Id", "Val"}, []any{id, tb.value(v)})})
	case wMutInsertOrUpdate:
		op.Method = "BufferWrite(InsertOrUpdate)"
		err = tx.BufferWrite([]*spanner.Mutation{spanner.InsertOrUpdate(tb.name, []string{"Id", "Grp", "Val"}, []any{id, group(id), tb.value(v)})})
	case wDMLUpdateSet:
		op.Method, op.Visible = "DML UPDATE SET Val = @v WHERE Id = @id", true
		err = dmlOne(ctx, tx, spanner.Statement{SQL: "UPDATE " + tb.name + " SET Val = @v WHERE Id = @id", Params: map[string]any{"v": tb.value(v), "id": id}})
	default:
		op.Method, op.Visible = "DML INSERT OR UPDATE", true
		err = dmlOne(ctx, tx, spanner.Statement{SQL: "INSERT OR UPDATE INTO " + tb.name + " (Id, Grp, Val) VALUES (@id, @g, @v)", Params: map[string]any{"v": tb.value(v), "id": id, "g": group(id)}})
	}
	if err != nil {
		op.Err, op.err = err.Error(), err
	}
	return op
}

// add runs UPDATE ... SET Val = Val + @d: an integer write that does not need a read.
func (tb *table) add(ctx context.Context, tx *spanner.ReadWriteTransaction, id, d int64) Op {
	op := Op{Kind: OpWrite, Key: tb.key(id), Write: WriteAdd, Arg: strconv.FormatInt(d, 10), Visible: true,
		Method: "DML UPDATE SET Val = Val + @d WHERE Id = @id"}
	if err := dmlOne(ctx, tx, spanner.Statement{SQL: "UPDATE " + tb.name + " SET Val = Val + @d WHERE Id = @id", Params: map[string]any{"d": d, "id": id}}); err != nil {
		op.Err, op.err = err.Error(), err
	}
	return op
}

// appendElem runs UPDATE ... SET Val = CONCAT(Val, @s): a blind list append.
func (tb *table) appendElem(ctx context.Context, tx *spanner.ReadWriteTransaction, id, e int64) Op {
	op := Op{Kind: OpWrite, Key: tb.key(id), Write: WriteAppend, Arg: strconv.FormatInt(e, 10), Elem: e, Visible: true,
		Method: "DML UPDATE SET Val = CONCAT(Val, @s) WHERE Id = @id"}
	if err := dmlOne(ctx, tx, spanner.Statement{SQL: "UPDATE " + tb.name + " SET Val = CONCAT(Val, @s) WHERE Id = @id", Params: map[string]any{"s": " " + op.Arg, "id": id}}); err != nil {
		op.Err, op.err = err.Error(), err
	}
	return op
}

// errNoRow is a DML write that found no row: every workload row exists, so it is reported.
var errNoRow = errors.New("DML statement wrote no row")

func dmlOne(ctx context.Context, tx *spanner.ReadWriteTransaction, st spanner.Statement) error {
	n, err := tx.Update(ctx, st)
	if err == nil && n != 1 {
		return fmt.Errorf("%w: row count %d", errNoRow, n)
	}
	return err
}
