package sqlgen

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/cloudspannerecosystem/memefish/ast"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/catalog"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

// Decision is how a DML statement's outcome can be learned by reading committed data, without
// running the statement: which row it writes, if any. The engine then runs the statement only at
// commit, replayed as any optimistic DML is, once the key it read is validated (nothing wrote it
// since), so the replay writes exactly what the read told.
//
// Only statements that cannot fail once Checks pass and the query finds the table's CHECK
// constraints hold qualify, so that no error Spanner raises at the statement moves to the commit:
// the target has no interleave parent, foreign keys (its own or, for an UPDATE, others'
// referencing it), unique indexes or generated columns; every value written is a parameter of the
// column's own type (no conversion that could fail) or PENDING_COMMIT_TIMESTAMP(); an INSERT names
// every column that has a default or is NOT NULL; and the statement has no THEN RETURN. Two kinds
// qualify:
//   - INSERT OR IGNORE of one row (VALUES): it writes the row exactly when no row has its key;
//   - UPDATE whose WHERE pins the primary key (Compiled.KeyProbe) and reads no other table: it
//     writes the row exactly when the row exists and WHERE holds for it.
type Decision struct {
	// Query reads it, with its own parameters (bound as any statement's): for an INSERT one row,
	// the key the statement writes, then 1 if a row has that key (it writes nothing) or else 0;
	// for an UPDATE the key of the row it writes, if one qualifies (no row: it writes none). Its
	// last column is 1 when the row the statement would write satisfies the table's CHECK
	// constraints, else 0 (the decision then does not hold: the statement fails).
	Query *Compiled
	// Insert is set for an INSERT, whose Query reports the key it writes and whether it exists.
	Insert bool
	// Checks are the values the statement writes from parameters: the decision holds only when
	// each suits its column (Check), which is what SQLite would check when the statement runs.
	Checks []ValueCheck
}

// ValueCheck is a parameter the statement writes into Column (Key: a primary key column).
type ValueCheck struct {
	Param  string
	Column *catalog.Column
	Key    bool
}

// Check reports whether v, the parameter's value in storage form, can be written into the
// column without a constraint failing: not NULL where the column is NOT NULL or in the key, and
// within a STRING(N) or BYTES(N) length. It answers false when in doubt (the engine then runs the
// statement, which reports the error if there is one).
func (vc ValueCheck) Check(v any) bool {
	col := vc.Column
	if v == nil {
		return !col.NotNull && !vc.Key
	}
	if (col.Type.Code != spantype.String && col.Type.Code != spantype.Bytes) || col.Type.Length <= 0 {
		return true
	}
	switch x := v.(type) {
	case string:
		// length() counts characters; a string of at most Length bytes has at most as many.
		return int64(len(x)) <= col.Type.Length || int64(utf8.RuneCountInString(x)) <= col.Type.Length
	case []byte:
		return int64(len(x)) <= col.Type.Length
	}
	return false
}

// decidable reports whether writing to t can fail only on the values written (see Decision);
// update is set for an UPDATE, which must also not change a column another table references.
func (c *compiler) decidable(t *catalog.Table, update bool) bool {
	if t.Parent != "" || len(t.ForeignKeys) > 0 {
		return false
	}
	for _, ix := range c.schema.TableIndexes(t.Name) {
		if ix.Unique {
			return false
		}
	}
	for _, col := range t.Columns {
		if col.Generated != nil || col.GeneratedSQL != "" || col.Type.Code == spantype.Array {
			return false
		}
	}
	if update {
		for _, other := range c.schema.Tables {
			for _, fk := range other.ForeignKeys {
				if strings.EqualFold(fk.ReferencedTable, t.Name) {
					return false
				}
			}
		}
	}
	return true
}

// plainValue is the parameter a value written to col is, when it is exactly one (its SQL the
// parameter's placeholder, of the column's type: no conversion), or CommitTimestampParam for
// PENDING_COMMIT_TIMESTAMP(); ok is false for any other value.
func (c *compiler) plainValue(col *catalog.Column, sql string) (param string, ok bool) {
	var n int
	if _, err := fmt.Sscanf(sql, "\x00p%d\x00", &n); err != nil || sql != fmt.Sprintf("\x00p%d\x00", n) || n >= len(c.params) {
		return "", false
	}
	name := c.params[n]
	if name == CommitTimestampParam {
		return name, true
	}
	if !c.paramType(name).Equal(col.Type) && !c.out.ParamTypes[name].Equal(col.Type) {
		return "", false
	}
	return name, true
}

// decideInsert sets Compiled.Decide for an INSERT OR IGNORE of one row into t, when it qualifies
// (see Decision). cols are the columns it names and vals their values' SQL.
func (c *compiler) decideInsert(x *ast.Insert, t *catalog.Table, cols []*catalog.Column, vals []string) {
	if x.InsertOrType != ast.InsertOrTypeIgnore || x.ThenReturn != nil || !c.decidable(t, false) {
		return
	}
	named := map[*catalog.Column]bool{}
	for _, col := range cols {
		named[col] = true
	}
	for _, col := range t.Columns {
		if !named[col] && (col.NotNull || col.DefaultSQL != "") {
			return
		}
	}
	d := &compiler{schema: c.schema, declared: c.declared, now: c.now, out: &Compiled{ParamTypes: map[string]spantype.Type{}}}
	byName := map[*catalog.Column]string{}
	var checks []ValueCheck
	for i, col := range cols {
		p, ok := c.plainValue(col, vals[i])
		if !ok {
			return
		}
		byName[col] = p
		if p != CommitTimestampParam {
			checks = append(checks, ValueCheck{Param: p, Column: col, Key: isKey(t, col)})
		}
	}
	// The row as it would be written, as a subquery whose columns carry the table's column
	// names, so that the CHECK constraints (over bare column names) read it.
	row := make([]string, len(t.Columns))
	for i, col := range t.Columns {
		v := "NULL"
		if p := byName[col]; p != "" {
			v = d.paramPlaceholder(p)
			if p != CommitTimestampParam {
				d.out.ParamTypes[p] = col.Type
			}
		}
		row[i] = v + " AS " + catalog.Quote(col.SQLiteName)
	}
	keyCols := t.KeyColumns()
	sel := make([]string, len(keyCols))
	conds := make([]string, len(keyCols))
	for i, k := range keyCols {
		if p := byName[k]; p == "" || p == CommitTimestampParam {
			return // a key from a default, or the commit timestamp: not known before the commit
		}
		sel[i] = "v." + catalog.Quote(k.SQLiteName)
		conds[i] = targetColumn(t, k) + " = v." + catalog.Quote(k.SQLiteName)
		d.out.Columns = append(d.out.Columns, Column{Name: k.Name, Type: k.Type})
	}
	d.finish(fmt.Sprintf("SELECT %s, EXISTS (SELECT 1 FROM %s WHERE %s), %s FROM (SELECT %s) AS v", strings.Join(sel, ", "),
		catalog.Quote(t.SQLiteName), strings.Join(conds, " AND "), checksHold(t), strings.Join(row, ", ")))
	d.out.Columns = append(d.out.Columns, Column{Name: "exists", Type: spantype.TBool}, Column{Name: "checks", Type: spantype.TBool})
	d.fillParamTypes()
	c.out.Decide = &Decision{Query: d.out, Insert: true, Checks: checks}
}

// decideUpdate sets Compiled.Decide for an UPDATE of t, when it qualifies (see Decision). cols
// are the columns it sets and vals their values' SQL; c.out.KeyProbe must be set already.
func (c *compiler) decideUpdate(x *ast.Update, t *catalog.Table, cols []*catalog.Column, vals []string) {
	if c.out.KeyProbe == nil || x.ThenReturn != nil || len(c.out.ReadTables) > 0 || !c.decidable(t, true) {
		return
	}
	var checks []ValueCheck
	for i, col := range cols {
		p, ok := c.plainValue(col, vals[i])
		if !ok {
			return
		}
		if p != CommitTimestampParam {
			checks = append(checks, ValueCheck{Param: p, Column: col})
		}
	}
	d := &compiler{schema: c.schema, declared: c.declared, now: c.now, out: &Compiled{ParamTypes: map[string]spantype.Type{}}}
	_, sc, err := d.targetScope(x.TableName, x.As)
	if err != nil {
		return
	}
	where, err := d.compileCondition(x.Where.Expr, sc, "WHERE")
	if err != nil || len(d.out.ReadTables) > 0 {
		return
	}
	// The row as the statement would leave it, as a subquery whose columns carry the table's
	// column names, so that the CHECK constraints (over bare column names) read it.
	set := map[*catalog.Column]string{}
	for i, col := range cols {
		p, _ := c.plainValue(col, vals[i])
		set[col] = p
	}
	row := make([]string, len(t.Columns))
	for i, col := range t.Columns {
		v := targetColumn(t, col)
		if p, ok := set[col]; ok {
			v = d.paramPlaceholder(p)
		}
		row[i] = v + " AS " + catalog.Quote(col.SQLiteName)
	}
	keyCols := t.KeyColumns()
	sel := make([]string, len(keyCols))
	for i, k := range keyCols {
		sel[i] = catalog.Quote(k.SQLiteName)
		d.out.Columns = append(d.out.Columns, Column{Name: k.Name, Type: k.Type})
	}
	d.out.Columns = append(d.out.Columns, Column{Name: "checks", Type: spantype.TBool})
	d.finish(fmt.Sprintf("SELECT %s, %s FROM (SELECT %s FROM %s WHERE %s)", strings.Join(sel, ", "), checksHold(t),
		strings.Join(row, ", "), catalog.Quote(t.SQLiteName), where))
	d.fillParamTypes()
	if d.out.Volatile {
		return
	}
	c.out.Decide = &Decision{Query: d.out, Checks: checks}
}

// checksHold is an expression that is 1 when the row in scope (bare column names) satisfies t's
// CHECK constraints and 0 when one fails: a constraint holds unless it is false, as in SQLite.
func checksHold(t *catalog.Table) string {
	if len(t.Checks) == 0 {
		return "1"
	}
	holds := make([]string, len(t.Checks))
	for i, ck := range t.Checks {
		holds[i] = fmt.Sprintf("((%s) IS NULL OR (%s))", ck.SQL, ck.SQL)
	}
	return "CASE WHEN " + strings.Join(holds, " AND ") + " THEN 1 ELSE 0 END"
}
