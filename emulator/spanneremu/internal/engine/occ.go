package engine

import (
	"fmt"
	"strings"

	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/catalog"
)

// Optimistic reads in read-write transactions.
//
// A read-write transaction that only reads through the Read API (the common "read a row, then
// buffer mutations" shape) does not take the write lock for its reads: it reads the latest
// committed data on a reader connection and records a footprint (the keys it read, or the
// whole table for range and index reads) together with the commit sequence number it read at.
// When the transaction later takes the lock (to commit, or to run SQL), the footprint is
// validated: if any commit since the read wrote a key (or, for a table footprint, anything) it
// read, the transaction is ABORTED and the client retries it. Reads therefore behave as if
// they happened at commit time, which keeps read-write transactions serializable while letting
// independent transactions run their reads in parallel.
//
// Every commit records what it wrote: the keys of insert/update/replace/delete mutations, and
// the whole table for DML, range deletes, cascades and the row deletion sweeper.

type footprint struct {
	table string // upper-cased table name
	key   string // encoded key; "" means the whole table
	seq   uint64 // the commit sequence number the read observed
}

// writeSet is what a commit wrote.
type writeSet struct {
	keys   map[string]bool // table + key
	tables map[string]bool // whole tables
}

func newWriteSet() *writeSet {
	return &writeSet{keys: map[string]bool{}, tables: map[string]bool{}}
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

// mutationWrites adds what mutations write to w.
func (w *writeSet) addMutations(s *catalog.Schema, muts []*sppb.Mutation) {
	for _, m := range muts {
		var write *sppb.Mutation_Write
		deletes := false
		switch op := m.Operation.(type) {
		case *sppb.Mutation_Insert:
			write = op.Insert
		case *sppb.Mutation_Update:
			write = op.Update
		case *sppb.Mutation_InsertOrUpdate:
			write = op.InsertOrUpdate
		case *sppb.Mutation_Replace:
			write, deletes = op.Replace, true
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
				w.keys[keyString(t.Name, vals)] = true
			}
			w.addDependents(s, t)
			continue
		}
		if write == nil {
			continue
		}
		t, ok := s.Table(write.Table)
		if !ok {
			continue
		}
		if deletes {
			w.addDependents(s, t)
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
		for _, row := range write.Values {
			lv := make([]*structpb.Value, len(kc))
			complete := true
			for i, p := range pos {
				if p < 0 || p >= len(row.Values) {
					complete = false
					break
				}
				lv[i] = row.Values[p]
			}
			if !complete {
				w.addTable(s, t)
				break
			}
			vals, err := decodeKey(kc, &structpb.ListValue{Values: lv}, false, "key")
			if err != nil {
				w.addTable(s, t)
				break
			}
			w.keys[keyString(t.Name, vals)] = true
		}
	}
}

// readFootprint returns what a Read touches: its keys when it reads whole keys of the base
// table, else the whole table.
func readFootprint(s *catalog.Schema, r ReadRequest) []footprint {
	t, ok := s.Table(r.Table)
	if !ok {
		return nil
	}
	ks := r.KeySet
	if r.Index != "" || ks == nil || ks.All || len(ks.Ranges) > 0 {
		return []footprint{{table: strings.ToUpper(t.Name)}}
	}
	kc := tableKey(t)
	var out []footprint
	for _, k := range ks.Keys {
		vals, err := decodeKey(kc, k, false, "key")
		if err != nil {
			return []footprint{{table: strings.ToUpper(t.Name)}}
		}
		out = append(out, footprint{table: strings.ToUpper(t.Name), key: keyString(t.Name, vals)})
	}
	return out
}

// occState is the per-database record of recent writes, guarded by DB.mu.
type occState struct {
	seq      uint64
	keySeq   map[string]uint64
	tableSeq map[string]uint64 // last commit that wrote anything in the table
	wideSeq  map[string]uint64 // last commit that wrote the table in a way keys cannot describe
	allSeq   uint64            // last schema change: invalidates every read before it
}

func newOCCState() occState {
	return occState{keySeq: map[string]uint64{}, tableSeq: map[string]uint64{}, wideSeq: map[string]uint64{}}
}

// record notes a commit's writes and returns its sequence number. Caller holds DB.mu.
func (o *occState) record(w *writeSet) uint64 {
	o.seq++
	for k := range w.keys {
		o.keySeq[k] = o.seq
		o.tableSeq[k[:strings.IndexByte(k+"\x00", 0)]] = o.seq
	}
	for t := range w.tables {
		o.wideSeq[t] = o.seq
		o.tableSeq[t] = o.seq
	}
	return o.seq
}

// conflicts reports whether a read footprint was overwritten since it was read. Caller holds
// DB.mu.
func (o *occState) conflicts(fps []footprint) bool {
	for _, f := range fps {
		if o.allSeq > f.seq {
			return true
		}
		if f.key == "" {
			if o.tableSeq[f.table] > f.seq {
				return true
			}
			continue
		}
		if o.wideSeq[f.table] > f.seq || o.keySeq[f.key] > f.seq {
			return true
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
}
