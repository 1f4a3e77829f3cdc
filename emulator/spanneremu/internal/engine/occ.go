package engine

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"

	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/catalog"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/sqlgen"
)

// Optimistic reads and DML in read-write transactions.
//
// A read-write transaction does not hold the write lock while the client thinks: its Read calls
// read the latest committed data on a reader connection and record a footprint (the keys read,
// the key ranges read, or the whole table for index reads) together with the commit sequence
// number it read at. Its DML takes the lock for the statement alone, or a batch's statements
// together (runBatchOptimistic): on the writer it replays the transaction's earlier DML, runs the
// statements, records their footprints (dmlFootprint) and the keys they wrote, and rolls back. When the transaction later
// takes the lock for good (to commit, or to run a SQL query), the footprints are validated: if
// any commit since a read wrote a key (or a key in a range, or for a table footprint anything)
// it read, the transaction is ABORTED and the client retries it. Otherwise the logged DML is
// replayed, writing exactly what it wrote the first time, since nothing it read has changed.
// Reads and DML therefore behave as if they happened at commit time, which keeps read-write
// transactions serializable while independent transactions run side by side.
//
// Every commit records what it wrote: the keys of mutations and of DML rows, and the whole table
// for range deletes, cascades and the row deletion sweeper.

type footprint struct {
	table string    // upper-cased table name
	key   string    // encoded key; "" means a range, or the whole table
	rng   *keyRange // a key range of the table (of index, when set); nil with key "" means the whole table
	index string    // upper-cased index name: rng is a range of that index's key
	seq   uint64    // the commit sequence number the read observed
}

// writeSet is what a commit wrote.
type writeSet struct {
	keys   map[string]writtenKey // by table + key
	tables map[string]bool       // whole tables
}

// writtenKey is a row key a commit wrote, kept decoded so that range reads can be checked, with
// what the write did to the row's entries in the table's indexes, for index reads: idx holds the
// new index key by upper-cased index name (nil when it cannot be told); an index absent from it
// was not changed (an update of other columns, a delete: a row that leaves an index range was
// returned by the read, which covers its key). idxUnknown means any index may have changed.
type writtenKey struct {
	table      string // upper-cased
	vals       []any
	idx        map[string][]any
	idxUnknown bool
}

func newWriteSet() *writeSet {
	return &writeSet{keys: map[string]writtenKey{}, tables: map[string]bool{}}
}

func (w *writeSet) addKey(table string, vals []any) {
	w.addRow(writtenKey{table: strings.ToUpper(table), vals: vals})
}

// addRow adds a written row; a row written twice (mutations and DML) counts as changing any
// index unless neither write changed one.
func (w *writeSet) addRow(wk writtenKey) {
	k := keyString(wk.table, wk.vals)
	if old, ok := w.keys[k]; ok && (old.idxUnknown || len(old.idx) > 0 || wk.idxUnknown || len(wk.idx) > 0) {
		wk.idx, wk.idxUnknown = nil, true
	}
	w.keys[k] = wk
}

func keyString(table string, vals []any) string {
	var b strings.Builder
	b.WriteString(strings.ToUpper(table))
	for _, v := range vals {
		fmt.Fprintf(&b, "\x00%T:%v", v, v)
	}
	return b.String()
}

// addTable marks a whole table written, and the tables a delete there may cascade into.
func (w *writeSet) addTable(s *catalog.Schema, t *catalog.Table) {
	name := strings.ToUpper(t.Name)
	if w.tables[name] {
		return
	}
	w.tables[name] = true
	w.addDependents(s, t)
}

// addDependents marks the tables whose rows a delete or replace in t may change: interleaved
// children and tables with foreign keys to t.
func (w *writeSet) addDependents(s *catalog.Schema, t *catalog.Table) {
	for _, c := range s.Tables {
		dep := strings.EqualFold(c.Parent, t.Name)
		for _, fk := range c.ForeignKeys {
			if strings.EqualFold(fk.ReferencedTable, t.Name) {
				dep = true
			}
		}
		if dep {
			w.addTable(s, c)
		}
	}
}

// addMutations adds what mutations write to w. A write's table, key and indexes come from its
// plan (plans), worked out once per shape; a write that has none (it names an unknown table or
// column: its commit will fail) is added as well as can be told.
func (w *writeSet) addMutations(s *catalog.Schema, muts []*sppb.Mutation, plans *writePlans) {
	for _, m := range muts {
		var write *sppb.Mutation_Write
		var kind writeKind
		deletes := false
		switch op := m.Operation.(type) {
		case *sppb.Mutation_Insert:
			write, kind = op.Insert, writeInsert
		case *sppb.Mutation_Update:
			write, kind = op.Update, writeUpdate
		case *sppb.Mutation_InsertOrUpdate:
			write, kind = op.InsertOrUpdate, writeInsertOrUpdate
		case *sppb.Mutation_Replace:
			write, kind, deletes = op.Replace, writeReplace, true
		case *sppb.Mutation_Delete_:
			t, ok := s.Table(op.Delete.Table)
			if !ok {
				continue
			}
			ks := op.Delete.KeySet
			if ks.GetAll() || len(ks.GetRanges()) > 0 {
				w.addTable(s, t)
				continue
			}
			kc := tableKey(t)
			for _, k := range ks.GetKeys() {
				vals, err := decodeKey(kc, k, false, "key")
				if err != nil {
					w.addTable(s, t)
					break
				}
				w.addKey(t.Name, vals)
			}
			w.addDependents(s, t)
			continue
		}
		if write == nil {
			continue
		}
		p, err := plans.plan(s, write, kind)
		if err != nil {
			p = unplannedWrite(s, write, kind)
		}
		if p == nil {
			continue
		}
		t := p.t
		if deletes {
			w.addDependents(s, t)
		}
		for _, row := range write.Values {
			lv := make([]*structpb.Value, len(p.kc))
			complete := true
			for i, pos := range p.keyPos {
				if pos < 0 || pos >= len(row.Values) {
					complete = false
					break
				}
				lv[i] = row.Values[pos]
			}
			if !complete {
				w.addTable(s, t)
				break
			}
			vals, err := decodeKey(p.kc, &structpb.ListValue{Values: lv}, false, "key")
			if err != nil {
				w.addTable(s, t)
				break
			}
			wk := writtenKey{table: p.upperTable, vals: vals}
			for _, ix := range p.indexes {
				if wk.idx == nil {
					wk.idx = map[string][]any{}
				}
				wk.idx[ix.name] = ix.key(row)
			}
			w.addRow(wk)
		}
	}
}

// unplannedWrite is what the write set can tell of a write without a plan (its table or a column
// unknown, a key column missing): its table, the key columns it has (keyPos -1 where it has
// not) and the indexes it changes; nil when its table is unknown.
func unplannedWrite(s *catalog.Schema, write *sppb.Mutation_Write, kind writeKind) *writePlan {
	t, ok := s.Table(write.Table)
	if !ok {
		return nil
	}
	kc := tableKey(t)
	pos := make([]int, len(kc))
	for i, k := range kc {
		pos[i] = -1
		for j, c := range write.Columns {
			if strings.EqualFold(c, k.col.Name) {
				pos[i] = j
			}
		}
	}
	return &writePlan{t: t, kc: kc, keyPos: pos, upperTable: strings.ToUpper(t.Name), indexes: mutationIndexes(s, t, write.Columns, kind == writeUpdate)}
}

// mutatedIndex is an index a mutation's rows may change, with where its key's columns are
// among the mutation's (pos; nil when some are missing, so the new key cannot be told).
type mutatedIndex struct {
	name string
	kc   []keyCol
	pos  []int
}

// mutationIndexes returns the indexes of t that a write of columns changes: all of them, but for
// an update those whose key columns it does not write (their entries keep their keys).
func mutationIndexes(s *catalog.Schema, t *catalog.Table, columns []string, isUpdate bool) []mutatedIndex {
	var out []mutatedIndex
	for _, idx := range s.TableIndexes(t.Name) {
		kc := indexKey(t, idx)
		pos := make([]int, len(kc))
		written := 0
		for i, k := range kc {
			pos[i] = -1
			for j, c := range columns {
				if strings.EqualFold(c, k.col.Name) {
					pos[i] = j
				}
			}
			if i < len(idx.Keys) && pos[i] >= 0 {
				written++
			}
		}
		if isUpdate && written == 0 {
			continue
		}
		if slices.Contains(pos, -1) {
			pos = nil
		}
		out = append(out, mutatedIndex{name: strings.ToUpper(idx.Name), kc: kc, pos: pos})
	}
	return out
}

// key is the row's new key in the index, nil when it cannot be told. (A row that a NULL keeps out
// of a NULL_FILTERED index is checked as if it were in it: a needless conflict at worst.)
func (m mutatedIndex) key(row *structpb.ListValue) []any {
	if m.pos == nil {
		return nil
	}
	lv := &structpb.ListValue{Values: make([]*structpb.Value, len(m.pos))}
	for i, p := range m.pos {
		if p >= len(row.Values) {
			return nil
		}
		lv.Values[i] = row.Values[p]
	}
	vals, err := decodeKey(m.kc, lv, false, "key")
	if err != nil {
		return nil
	}
	return vals
}

// readFootprint returns what a Read touches: its keys and key ranges, of the table or, for an
// index read, of the index (the rows an index read returned are added by the read). A read of
// all keys covers the whole table.
func readFootprint(s *catalog.Schema, r ReadRequest) []footprint {
	t, ok := s.Table(r.Table)
	if !ok {
		return nil
	}
	name := strings.ToUpper(t.Name)
	whole := wholeTable(s, r)
	ks := r.KeySet
	if ks == nil || ks.All {
		return whole
	}
	kc, index, prefixKeys := tableKey(t), "", false
	if r.Index != "" {
		idx, ok := s.Index(r.Index)
		if !ok {
			return whole
		}
		kc, index, prefixKeys = indexKey(t, idx), strings.ToUpper(idx.Name), true
	}
	var out []footprint
	for _, k := range ks.Keys {
		vals, err := decodeKey(kc, k, prefixKeys, "key")
		if err != nil {
			return whole
		}
		if index == "" {
			out = append(out, footprint{table: name, key: keyString(t.Name, vals)})
			continue
		}
		// An index key (or a prefix of one) is the closed range of the entries it matches.
		out = append(out, footprint{table: name, index: index,
			rng: &keyRange{kc: kc, start: vals, end: vals, hasStart: true, hasEnd: true}})
	}
	for _, kr := range ks.Ranges {
		rng, err := decodeRange(kc, kr)
		if err != nil {
			return whole
		}
		out = append(out, footprint{table: name, rng: rng, index: index})
	}
	return out
}

// wholeTable is the footprint of a read covering all of its table.
func wholeTable(s *catalog.Schema, r ReadRequest) []footprint {
	t, ok := s.Table(r.Table)
	if !ok {
		return nil
	}
	return []footprint{{table: strings.ToUpper(t.Name)}}
}

// keyRange is a KeyRange of a table decoded to storage values; a nil bound is unbounded.
type keyRange struct {
	kc                 []keyCol
	start, end         []any
	hasStart, hasEnd   bool
	startOpen, endOpen bool
}

func decodeRange(kc []keyCol, kr *sppb.KeyRange) (*keyRange, error) {
	r := &keyRange{kc: kc}
	var err error
	switch b := kr.StartKeyType.(type) {
	case *sppb.KeyRange_StartClosed:
		r.start, err = decodeKey(kc, b.StartClosed, true, "range start")
		r.hasStart = true
	case *sppb.KeyRange_StartOpen:
		r.start, err = decodeKey(kc, b.StartOpen, true, "range start")
		r.hasStart, r.startOpen = true, true
	}
	if err != nil {
		return nil, err
	}
	switch b := kr.EndKeyType.(type) {
	case *sppb.KeyRange_EndClosed:
		r.end, err = decodeKey(kc, b.EndClosed, true, "range end")
		r.hasEnd = true
	case *sppb.KeyRange_EndOpen:
		r.end, err = decodeKey(kc, b.EndOpen, true, "range end")
		r.hasEnd, r.endOpen = true, true
	}
	return r, err
}

// contains reports whether a full key may lie in the range, comparing each bound as a key prefix
// the way the Read itself does (see keySetCondition). Values it cannot order as SQLite does
// (mixed storage classes) count as inside: a needless abort is safe, a missed conflict is not.
func (r *keyRange) contains(vals []any) bool {
	if r.hasStart {
		c, ok := comparePrefix(r.kc, vals, r.start)
		if ok && (c < 0 || (r.startOpen && c == 0)) {
			return false
		}
	}
	if r.hasEnd {
		c, ok := comparePrefix(r.kc, vals, r.end)
		if ok && (c > 0 || (r.endOpen && c == 0)) {
			return false
		}
	}
	return true
}

// comparePrefix compares a key with a bound on the bound's columns, in key order (NULL first,
// DESC columns reversed); ok is false when two values cannot be ordered here.
func comparePrefix(kc []keyCol, key, bound []any) (c int, ok bool) {
	for i, b := range bound {
		if i >= len(key) {
			return 0, true
		}
		if c, ok = compareStored(key[i], b); !ok {
			return 0, false
		}
		if kc[i].desc {
			c = -c
		}
		if c != 0 {
			return c, true
		}
	}
	return 0, true
}

// compareStored orders two storage values of one key column as SQLite does (NULL first,
// integers and reals numerically, text and blobs bytewise); ok is false for a mix it does not
// order.
func compareStored(a, b any) (int, bool) {
	switch {
	case a == nil && b == nil:
		return 0, true
	case a == nil:
		return -1, true
	case b == nil:
		return 1, true
	}
	switch x := a.(type) {
	case int64:
		if y, ok := b.(int64); ok {
			return cmp.Compare(x, y), true
		}
	case float64:
		if y, ok := b.(float64); ok {
			return cmp.Compare(x, y), true
		}
	case string:
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), true
		}
	case []byte:
		if y, ok := b.([]byte); ok {
			return bytes.Compare(x, y), true
		}
	}
	return 0, false
}

// occState is the per-database record of recent writes, guarded by DB.mu.
type occState struct {
	seq      uint64
	keySeq   map[string]uint64
	tableSeq map[string]uint64 // last commit that wrote anything in the table
	wideSeq  map[string]uint64 // last commit that wrote the table in a way keys cannot describe
	allSeq   uint64            // last schema change: invalidates every read before it
	// log holds the keys each recent commit wrote, oldest first, for range reads.
	log []committedKeys
}

type committedKeys struct {
	seq  uint64
	keys []writtenKey
}

func newOCCState() occState {
	return occState{keySeq: map[string]uint64{}, tableSeq: map[string]uint64{}, wideSeq: map[string]uint64{}}
}

// record notes a commit's writes and returns its sequence number. Caller holds DB.mu.
func (o *occState) record(w *writeSet) uint64 {
	o.seq++
	entry := committedKeys{seq: o.seq, keys: make([]writtenKey, 0, len(w.keys))}
	for k, wk := range w.keys {
		o.keySeq[k] = o.seq
		o.tableSeq[wk.table] = o.seq
		entry.keys = append(entry.keys, wk)
	}
	o.log = append(o.log, entry)
	for t := range w.tables {
		o.wideSeq[t] = o.seq
		o.tableSeq[t] = o.seq
	}
	return o.seq
}

// conflict returns the first read footprint a commit overwrote since it was read, nil if none.
// Caller holds DB.mu.
func (o *occState) conflict(fps []footprint) *footprint {
	for i := range fps {
		if f := &fps[i]; o.stale(f) {
			return f
		}
	}
	return nil
}

// stale reports whether a commit after f was read wrote what f covers. Caller holds DB.mu.
func (o *occState) stale(f *footprint) bool {
	if o.allSeq > f.seq {
		return true
	}
	switch {
	case f.key != "":
		return o.wideSeq[f.table] > f.seq || o.keySeq[f.key] > f.seq
	case f.rng != nil:
		return o.wideSeq[f.table] > f.seq || (o.tableSeq[f.table] > f.seq && o.rangeWritten(*f))
	default:
		return o.tableSeq[f.table] > f.seq
	}
}

// kind names the shape of a footprint in the conflict counters (Stats).
func (f *footprint) kind() string {
	switch {
	case f.key != "":
		return "key"
	case f.index != "":
		return "index range"
	case f.rng != nil:
		return "range"
	}
	return "table"
}

// covers reports whether a range or table footprint covers a written row: the row's key is in
// the range, or for an index range, its new index entry may be.
func (f *footprint) covers(wk writtenKey) bool {
	switch {
	case wk.table != f.table:
		return false
	case f.index != "":
		if wk.idxUnknown {
			return true
		}
		key, changed := wk.idx[f.index]
		return changed && (key == nil || f.rng.contains(key))
	case f.rng != nil:
		return f.rng.contains(wk.vals)
	}
	return true
}

// rangeWritten reports whether a commit after the footprint's read wrote a key in its range.
func (o *occState) rangeWritten(f footprint) bool {
	i := sort.Search(len(o.log), func(i int) bool { return o.log[i].seq > f.seq })
	if i == 0 && (len(o.log) == 0 || o.log[0].seq > f.seq+1) {
		return true // the log no longer reaches back to the read: assume the worst
	}
	for _, c := range o.log[i:] {
		for _, k := range c.keys {
			if f.covers(k) {
				return true
			}
		}
	}
	return false
}

// prune forgets writes no active transaction can conflict with. Caller holds DB.mu.
func (o *occState) prune(oldest uint64) {
	for k, s := range o.keySeq {
		if s <= oldest {
			delete(o.keySeq, k)
		}
	}
	i := sort.Search(len(o.log), func(i int) bool { return o.log[i].seq > oldest })
	o.log = append(o.log[:0:0], o.log[i:]...)
}

// storedKey converts a row key as SQLite returned it (RETURNING) to the form of the keys of
// Read and mutations, which come from the API.
func storedKey(c *sqlgen.Compiled, stored []any) ([]any, bool) {
	return decodeStoredKey(c.Table, stored)
}

// decodeStoredKey converts a row's primary key as SQLite returned it to the form of the keys of
// Read and mutations.
func decodeStoredKey(t *catalog.Table, stored []any) ([]any, bool) {
	kc := tableKey(t)
	if len(stored) != len(kc) {
		return nil, false
	}
	lv := &structpb.ListValue{Values: make([]*structpb.Value, len(stored))}
	for i, v := range stored {
		pv, err := spantype.FromStorage(kc[i].col.Type, v)
		if err != nil {
			return nil, false
		}
		lv.Values[i] = pv
	}
	vals, err := decodeKey(kc, lv, false, "key")
	return vals, err == nil
}

// dmlFootprint is what a DML statement read, at commit sequence seq, when that is exactly a set
// of keys:
//   - an INSERT ... VALUES that wrote every row it lists (as inserted or updated) read exactly
//     those keys, whether they existed or not;
//   - an UPDATE or DELETE whose WHERE pins the primary key read that key (probed: the key its
//     probe computed), whether the row existed and matched or not.
//
// exact is false for any other statement (a scanning WHERE; an INSERT OR IGNORE that skipped a
// row, whose key RETURNING does not report; a subquery reading other tables) and a failed one.
func dmlFootprint(c *sqlgen.Compiled, out *dmlOutcome, probed []any, seq uint64) (fps []footprint, exact bool) {
	if out == nil || len(c.ReadTables) > 0 {
		return nil, false
	}
	var keys [][]any
	switch {
	case c.Insert && c.InsertRows > 0 && len(out.keys) == c.InsertRows:
		keys = out.keys
	case c.KeyProbe != nil && probed != nil && len(out.keys) <= 1:
		keys = [][]any{probed}
	default:
		return nil, false
	}
	for _, k := range keys {
		fp, ok := keyFootprint(c, k, seq)
		if !ok {
			return nil, false
		}
		fps = append(fps, fp)
	}
	return fps, true
}
