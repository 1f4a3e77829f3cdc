package engine

import (
	"fmt"
	"strings"

	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/catalog"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

// keyCol is one column of a key (table primary key or index key) in key order.
type keyCol struct {
	col  *catalog.Column
	desc bool
}

// indexKey is the key an index orders its entries by: its key columns, then the table's primary
// key columns not among them.
func indexKey(t *catalog.Table, idx *catalog.Index) []keyCol {
	var out []keyCol
	inKey := map[string]bool{}
	for _, k := range idx.Keys {
		c, _ := t.Column(k.Column)
		out = append(out, keyCol{col: c, desc: k.Desc})
		inKey[strings.ToUpper(c.Name)] = true
	}
	for _, k := range tableKey(t) {
		if !inKey[strings.ToUpper(k.col.Name)] {
			out = append(out, k)
		}
	}
	return out
}

func tableKey(t *catalog.Table) []keyCol {
	out := make([]keyCol, len(t.PrimaryKey))
	for i, k := range t.PrimaryKey {
		c, _ := t.Column(k.Column)
		out[i] = keyCol{col: c, desc: k.Desc}
	}
	return out
}

// decodeKey converts a key from the wire (a prefix of the key columns is allowed when
// allowPrefix) to storage values.
func decodeKey(kc []keyCol, lv *structpb.ListValue, allowPrefix bool, what string) ([]any, error) {
	n := len(lv.GetValues())
	if n > len(kc) || (!allowPrefix && n != len(kc)) {
		return nil, errorf(codes.InvalidArgument, "Wrong number of key parts in %s: expected %d, got %d.", what, len(kc), n)
	}
	out := make([]any, n)
	for i, v := range lv.GetValues() {
		s, err := spantype.ToStorage(kc[i].col.Type, v)
		if err != nil {
			return nil, errorf(codes.InvalidArgument, "Invalid value for key column %s: %v", kc[i].col.Name, err)
		}
		out[i] = s
	}
	return out, nil
}

// keySetCondition renders a KeySet as a SQL condition over the key columns (with their SQL
// expressions in exprs), appending bind values to args. An empty KeySet matches nothing.
func keySetCondition(kc []keyCol, exprs []string, ks *sppb.KeySet, allowPrefixKeys bool, args *[]any) (string, error) {
	if ks == nil {
		return "", errorf(codes.InvalidArgument, "Missing key set.")
	}
	if ks.All {
		return "1", nil
	}
	var parts []string
	for _, k := range ks.Keys {
		vals, err := decodeKey(kc, k, allowPrefixKeys, "key")
		if err != nil {
			return "", err
		}
		conds := make([]string, len(vals))
		for i, v := range vals {
			if v == nil {
				conds[i] = exprs[i] + " IS NULL"
				continue
			}
			conds[i] = exprs[i] + " = ?"
			*args = append(*args, v)
		}
		if len(conds) == 0 {
			parts = append(parts, "1")
			continue
		}
		parts = append(parts, "("+strings.Join(conds, " AND ")+")")
	}
	for _, r := range ks.Ranges {
		var conds []string
		if r.StartKeyType != nil {
			var lv *structpb.ListValue
			op := ">="
			switch s := r.StartKeyType.(type) {
			case *sppb.KeyRange_StartClosed:
				lv = s.StartClosed
			case *sppb.KeyRange_StartOpen:
				lv, op = s.StartOpen, ">"
			}
			vals, err := decodeKey(kc, lv, true, "range start")
			if err != nil {
				return "", err
			}
			if len(vals) > 0 {
				conds = append(conds, lexCompare(kc, exprs, vals, op, args))
			} else if op == ">" {
				conds = append(conds, "0")
			}
		}
		if r.EndKeyType != nil {
			var lv *structpb.ListValue
			op := "<"
			switch e := r.EndKeyType.(type) {
			case *sppb.KeyRange_EndClosed:
				lv, op = e.EndClosed, "<="
			case *sppb.KeyRange_EndOpen:
				lv = e.EndOpen
			}
			vals, err := decodeKey(kc, lv, true, "range end")
			if err != nil {
				return "", err
			}
			if len(vals) > 0 {
				conds = append(conds, lexCompare(kc, exprs, vals, op, args))
			} else if op == "<" {
				conds = append(conds, "0")
			}
		}
		if len(conds) == 0 {
			parts = append(parts, "1")
		} else {
			parts = append(parts, "("+strings.Join(conds, " AND ")+")")
		}
	}
	if len(parts) == 0 {
		return "0", nil
	}
	return strings.Join(parts, " OR "), nil
}

// lexCompare renders "key prefix <op> vals" in key order, where a DESC column compares
// reversed. op is one of > >= < <=.
func lexCompare(kc []keyCol, exprs []string, vals []any, op string, args *[]any) string {
	strict := op == ">" || op == "<"
	var build func(i int) string
	build = func(i int) string {
		greater := op == ">" || op == ">="
		if kc[i].desc {
			greater = !greater
		}
		cmp := "<"
		if greater {
			cmp = ">"
		}
		e := exprs[i]
		if vals[i] == nil {
			// NULL sorts first in key order.
			if i == len(vals)-1 {
				if strict {
					if greater {
						return e + " IS NOT NULL"
					}
					return "0"
				}
				if greater {
					return "1"
				}
				return e + " IS NULL"
			}
			if greater {
				return fmt.Sprintf("(%s IS NOT NULL OR (%s IS NULL AND %s))", e, e, build(i+1))
			}
			return fmt.Sprintf("(%s IS NULL AND %s)", e, build(i+1))
		}
		if i == len(vals)-1 {
			*args = append(*args, vals[i])
			if strict {
				return fmt.Sprintf("%s %s ?", e, cmp)
			}
			return fmt.Sprintf("%s %s= ?", e, cmp)
		}
		*args = append(*args, vals[i], vals[i])
		return fmt.Sprintf("(%s %s ? OR (%s = ? AND %s))", e, cmp, e, build(i+1))
	}
	return build(0)
}

// renderKey renders key values the way Spanner prints keys in error messages:
// {Int64(1), String("a")}.
func renderKey(kc []keyCol, vals []any) string {
	parts := make([]string, len(vals))
	for i, v := range vals {
		t := kc[i].col.Type
		name := strings.Title(strings.ToLower(t.String()))
		switch {
		case v == nil:
			parts[i] = "NULL"
		case t.Code == spantype.String || t.Code == spantype.Date || t.Code == spantype.Timestamp:
			parts[i] = fmt.Sprintf("%s(%q)", name, v)
		case t.Code == spantype.Bytes:
			parts[i] = fmt.Sprintf("Bytes(%q)", v)
		default:
			parts[i] = fmt.Sprintf("%s(%v)", name, v)
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
