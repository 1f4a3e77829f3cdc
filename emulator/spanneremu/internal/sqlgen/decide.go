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
	if name != CommitTimestampParam && !c.paramType(name).Equal(col.Type) {
		return "", false
	}
	return name, true
}

// plainValues is plainValue of each value a statement writes to t (cols, their values' SQL
// vals): the parameter by column, and the checks of those that are not the commit timestamp;
// ok is false when one is not a plain parameter.
func (c *compiler) plainValues(t *catalog.Table, cols []*catalog.Column, vals []string) (params map[*catalog.Column]string, checks []ValueCheck, ok bool) {
	params = map[*catalog.Column]string{}
	for i, col := range cols {
		p, ok := c.plainValue(col, vals[i])
		if !ok {
			return nil, nil, false
		}
		params[col] = p
		if p != CommitTimestampParam {
			checks = append(checks, ValueCheck{Param: p, Column: col, Key: isKey(t, col)})
		}
	}
	return params, checks, true
}

// subCompiler is a compiler for another statement over the same schema, parameters and time
// (a key probe, a decision's query).
func (c *compiler) subCompiler() *compiler {
	return &compiler{schema: c.schema, declared: c.declared, now: c.now, out: &Compiled{ParamTypes: map[string]spantype.Type{}}}
}

// rowAs is a row of t as a select list whose columns carry t's column names (so that its CHECK
// constraints, over bare column names, can read it): each column's value is d's placeholder of
// the parameter params gives it, or else other's SQL for it.
func (d *compiler) rowAs(t *catalog.Table, params map[*catalog.Column]string, other func(*catalog.Column) string) string {
	row := make([]string, len(t.Columns))
	for i, col := range t.Columns {
		v := other(col)
		if p, ok := params[col]; ok {
			v = d.paramPlaceholder(p)
		}
		row[i] = v + " AS " + catalog.Quote(col.SQLiteName)
	}
	return strings.Join(row, ", ")
}

// decideInsert sets Compiled.Decide for an INSERT OR IGNORE of one row into t, when it qualifies
// (see Decision). cols are the columns it names and vals their values' SQL.
func (c *compiler) decideInsert(x *ast.Insert, t *catalog.Table, cols []*catalog.Column, vals []string) {
	if x.InsertOrType != ast.InsertOrTypeIgnore || x.ThenReturn != nil || !c.decidable(t, false) {
		return
	}
	params, checks, ok := c.plainValues(t, cols, vals)
	if !ok {
		return
	}
	for _, col := range t.Columns {
		if _, named := params[col]; !named && (col.NotNull || col.DefaultSQL != "") {
			return
		}
	}
	keyCols := t.KeyColumns()
	d := c.subCompiler()
	sel := make([]string, len(keyCols))
	conds := make([]string, len(keyCols))
	for i, k := range keyCols {
		if p := params[k]; p == "" || p == CommitTimestampParam {
			return // a key from a default, or the commit timestamp: not known before the commit
		}
		sel[i] = "v." + catalog.Quote(k.SQLiteName)
		conds[i] = targetColumn(t, k) + " = v." + catalog.Quote(k.SQLiteName)
		d.out.Columns = append(d.out.Columns, Column{Name: k.Name, Type: k.Type})
	}
	// The row as it would be written (a column it does not name is NULL: see above).
	row := d.rowAs(t, params, func(*catalog.Column) string { return "NULL" })
	d.finish(fmt.Sprintf("SELECT %s, EXISTS (SELECT 1 FROM %s WHERE %s), %s FROM (SELECT %s) AS v", strings.Join(sel, ", "),
		catalog.Quote(t.SQLiteName), strings.Join(conds, " AND "), checksHold(t), row))
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
	params, checks, ok := c.plainValues(t, cols, vals)
	if !ok {
		return
	}
	d := c.subCompiler()
	_, sc, err := d.targetScope(x.TableName, x.As)
	if err != nil {
		return
	}
	// The row as the statement would leave it: its columns before, with the values it sets.
	row := d.rowAs(t, params, func(col *catalog.Column) string { return targetColumn(t, col) })
	where, err := d.compileCondition(x.Where.Expr, sc, "WHERE")
	if err != nil || len(d.out.ReadTables) > 0 {
		return
	}
	keyCols := t.KeyColumns()
	sel := make([]string, len(keyCols))
	for i, k := range keyCols {
		sel[i] = catalog.Quote(k.SQLiteName)
		d.out.Columns = append(d.out.Columns, Column{Name: k.Name, Type: k.Type})
	}
	d.out.Columns = append(d.out.Columns, Column{Name: "checks", Type: spantype.TBool})
	d.finish(fmt.Sprintf("SELECT %s, %s FROM (SELECT %s FROM %s WHERE %s)", strings.Join(sel, ", "), checksHold(t),
		row, catalog.Quote(t.SQLiteName), where))
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
