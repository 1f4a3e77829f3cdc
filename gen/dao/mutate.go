package dao

import (
	"fmt"

	"cloud.google.com/go/spanner"
)

// PartialUpdate returns an Update mutation of table writing the primary key columns and the given
// columns only, each once, in that order. all are the writable columns of the table and values their
// values, in the same order. A column that is not in all is an error (a generated column, a typo).
// It is the runtime of the generated UpdateColumns methods.
func PartialUpdate(table string, primaryKey, all []string, values []any, columns []string) (*spanner.Mutation, error) {
	if len(all) != len(values) {
		return nil, fmt.Errorf("update %s: %d columns but %d values", table, len(all), len(values))
	}
	index := make(map[string]int, len(all))
	for i, c := range all {
		index[c] = i
	}
	n := len(primaryKey) + len(columns)
	seen := make(map[string]bool, n)
	cols := make([]string, 0, n)
	vals := make([]any, 0, n)
	for _, list := range [][]string{primaryKey, columns} {
		for _, c := range list {
			i, ok := index[c]
			if !ok {
				return nil, fmt.Errorf("update %s: no writable column %q", table, c)
			}
			if seen[c] {
				continue
			}
			seen[c] = true
			cols = append(cols, c)
			vals = append(vals, values[i])
		}
	}
	return spanner.Update(table, cols, vals), nil
}
