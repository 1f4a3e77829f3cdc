package engine

import (
	"strings"

	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
)

// MutationCount counts a commit's mutations the way Spanner's commit statistics do: one per
// column per written row, plus, for every secondary index the write changes, one per index
// column (key and STORING) per row; one per deleted key or range.
func (db *DB) MutationCount(muts []*sppb.Mutation) int64 {
	schema := db.Schema()
	var n int64
	for _, m := range muts {
		var w *sppb.Mutation_Write
		all := false // inserts and replaces write every index of the table
		switch op := m.GetOperation().(type) {
		case *sppb.Mutation_Insert:
			w, all = op.Insert, true
		case *sppb.Mutation_Replace:
			w, all = op.Replace, true
		case *sppb.Mutation_Update:
			w = op.Update
		case *sppb.Mutation_InsertOrUpdate:
			w = op.InsertOrUpdate
		case *sppb.Mutation_Delete_:
			ks := op.Delete.GetKeySet()
			if ks.GetAll() {
				n++
			}
			n += int64(len(ks.GetKeys()) + len(ks.GetRanges()))
			continue
		}
		if w == nil {
			continue
		}
		perRow := int64(len(w.GetColumns()))
		if t, ok := schema.Table(w.GetTable()); ok {
			written := map[string]bool{}
			for _, c := range w.GetColumns() {
				written[strings.ToUpper(c)] = true
			}
			for _, idx := range schema.TableIndexes(t.Name) {
				touched := all
				for _, k := range idx.Keys {
					touched = touched || written[strings.ToUpper(k.Column)]
				}
				for _, c := range idx.Storing {
					touched = touched || written[strings.ToUpper(c)]
				}
				if touched {
					perRow += int64(len(idx.Keys) + len(idx.Storing))
				}
			}
		}
		n += perRow * int64(len(w.GetValues()))
	}
	return n
}
