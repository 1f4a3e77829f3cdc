package catalog

import (
	"fmt"
	"strings"

	"github.com/cloudspannerecosystem/memefish/ast"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

func (a *applier) alterTable(d *ast.AlterTable) error {
	t, err := a.table(d.Name)
	if err != nil {
		return err
	}
	copies := copyAll(t)
	switch alt := d.TableAlteration.(type) {
	case *ast.AddColumn:
		if _, exists := t.Column(alt.Column.Name.Name); exists {
			if alt.IfNotExists {
				return nil
			}
			return preconditionf("Duplicate column name %s.%s.", t.Name, alt.Column.Name.Name)
		}
		if alt.Column.PrimaryKey {
			return invalidf("Cannot add key column %s to existing table %s.", alt.Column.Name.Name, t.Name)
		}
		col, err := a.newColumn(t, alt.Column)
		if err != nil {
			return err
		}
		t.Columns = append(t.Columns, col)
		t.reindex()
		if err := a.columnExprs(t, col, alt.Column.DefaultSemantics); err != nil {
			return err
		}
		if col.NotNull && col.Default == nil && col.Generated == nil {
			// Spanner refuses this whatever the table holds: existing rows would have no value.
			return unimplementedf("Cannot add NOT NULL column %s.%s to existing table %s.", t.Name, col.Name, t.Name)
		}
		if sql := addColumnSQL(t, col); sql != "" {
			a.emit(sql)
			return nil
		}
	case *ast.DropColumn:
		col, ok := t.Column(alt.Name.Name)
		if !ok {
			return notFoundf("Column not found in table %s: %s", t.Name, alt.Name.Name)
		}
		if err := a.checkColumnUnused(t, col); err != nil {
			return err
		}
		t.Columns = deleteItem(t.Columns, col)
		t.reindex()
	case *ast.AlterColumn:
		col, ok := t.Column(alt.Name.Name)
		if !ok {
			return notFoundf("Column not found in table %s: %s", t.Name, alt.Name.Name)
		}
		rebuild, err := a.alterColumn(t, col, alt.Alteration, copies)
		if err != nil || !rebuild {
			return err
		}
	case *ast.AddTableConstraint:
		ix, err := a.addConstraint(t, alt.TableConstraint)
		if err != nil {
			return err
		}
		a.rebuild(t, copies)
		if ix != nil && !strings.EqualFold(ix.Table, t.Name) {
			a.emit(a.s.createIndexSQL(ix))
		}
		return nil
	case *ast.DropConstraint:
		if err := a.dropConstraint(t, alt.Name.Name); err != nil {
			return err
		}
		a.rebuild(t, copies)
		a.dropUnusedBackingIndexes()
		return nil
	case *ast.SetOnDelete:
		if t.Parent == "" {
			return invalidf("Cannot SET ON DELETE on table %s that does not have an INTERLEAVE clause.", t.Name)
		}
		t.OnDeleteCascade = alt.OnDelete == ast.OnDeleteCascade
		if err := a.checkRowDeletion(t); err != nil {
			return err
		}
	case *ast.AddRowDeletionPolicy:
		if t.RowDeletionPolicy != nil {
			return invalidf("Cannot create ROW DELETION POLICY because there is already one on column named %s in table %s.", t.RowDeletionPolicy.Column, t.Name)
		}
		if t.RowDeletionPolicy, err = rowDeletionPolicy(t, alt.RowDeletionPolicy); err != nil {
			return err
		}
		return a.checkRowDeletion(t)
	case *ast.ReplaceRowDeletionPolicy:
		if t.RowDeletionPolicy == nil {
			return invalidf("ROW DELETION POLICY does not exist on table %s.", t.Name)
		}
		t.RowDeletionPolicy, err = rowDeletionPolicy(t, alt.RowDeletionPolicy)
		return err
	case *ast.DropRowDeletionPolicy:
		if t.RowDeletionPolicy == nil {
			return invalidf("ROW DELETION POLICY does not exist on table %s.", t.Name)
		}
		t.RowDeletionPolicy = nil
		return nil
	default:
		return unimplementedf("Unsupported ALTER TABLE action in the emulator: %s", a.text(alt))
	}
	a.rebuild(t, copies)
	return nil
}

// copyAll maps every non-generated column of t to itself: what a rebuild copies when no
// column changes type.
func copyAll(t *Table) map[string]string {
	m := map[string]string{}
	for _, c := range t.Columns {
		if c.Generated == nil {
			m[strings.ToUpper(c.Name)] = Quote(c.SQLiteName)
		}
	}
	return m
}

// rebuild re-creates t in SQLite from the model, copying rows: SQLite's ALTER TABLE cannot
// change column constraints, defaults or table constraints. copies maps an upper-cased column
// name of the new table to the SQLite expression, over the old table, that fills it; columns
// without an entry take their DEFAULT. Copying the rows is what checks them against the new
// definition (the caller runs the batch in a transaction and maps failures).
func (a *applier) rebuild(t *Table, copies map[string]string) {
	tmp := t.SQLiteName + "__spanner_rebuild"
	a.emit(a.s.createTableSQL(t, tmp))
	var cols, exprs []string
	for _, c := range t.Columns {
		if e, ok := copies[strings.ToUpper(c.Name)]; ok && c.Generated == nil {
			cols = append(cols, Quote(c.SQLiteName))
			exprs = append(exprs, e)
		}
	}
	if t.SyntheticKey != "" {
		cols = append(cols, Quote(t.SyntheticKey))
		exprs = append(exprs, Quote(t.SyntheticKey))
	}
	if len(cols) > 0 {
		a.emit(fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s",
			Quote(tmp), strings.Join(cols, ", "), strings.Join(exprs, ", "), Quote(t.SQLiteName)))
	} else {
		a.emit(fmt.Sprintf("INSERT INTO %s DEFAULT VALUES", Quote(tmp)))
	}
	a.emit("DROP TABLE "+Quote(t.SQLiteName), fmt.Sprintf("ALTER TABLE %s RENAME TO %s", Quote(tmp), Quote(t.SQLiteName)))
	for _, ix := range a.s.TableIndexes(t.Name) {
		a.emit(a.s.createIndexSQL(ix))
	}
}

// alterColumn applies ALTER COLUMN; it reports whether the table must be rebuilt in SQLite.
func (a *applier) alterColumn(t *Table, col *Column, alt ast.ColumnAlteration, copies map[string]string) (bool, error) {
	switch alt := alt.(type) {
	case *ast.AlterColumnType:
		typ, err := columnType(col.Name, alt.Type)
		if err != nil {
			return false, err
		}
		if err := a.checkColumnChange(t, col, typ, alt.NotNull); err != nil {
			return false, err
		}
		conv, _ := convertColumn(col.Type, typ, Quote(col.SQLiteName))
		switch {
		case col.Generated != nil && alt.GeneratedExpr == nil:
			return false, invalidf("Cannot convert generated column `%s.%s` to a regular column.", t.Name, col.Name)
		case col.Generated == nil && alt.GeneratedExpr != nil:
			return false, invalidf("Cannot convert column `%s.%s` to a generated column.", t.Name, col.Name)
		case col.Generated != nil && col.Stored && !col.Type.Equal(typ):
			return false, invalidf("Cannot change the data type of a stored generated column `%s.%s`.", t.Name, col.Name)
		case col.Generated != nil && col.Stored && a.text(alt.GeneratedExpr.Expr) != col.GeneratedText:
			return false, invalidf("Cannot change the expression of a generated column `%s.%s` because it is stored or has other dependencies.", t.Name, col.Name)
		}
		if col.AllowCommitTimestamp && typ.Code != spantype.Timestamp {
			return false, unallowedCommitTimestamp(col)
		}
		wasGenerated := col.Generated != nil
		col.Type, col.NotNull = typ, alt.NotNull
		// Spanner's ALTER COLUMN restates the whole column: a DEFAULT not repeated is dropped.
		col.Default, col.DefaultSQL, col.DefaultText = nil, "", ""
		if alt.DefaultExpr != nil {
			if err := a.setDefault(t, col, alt.DefaultExpr); err != nil {
				return false, err
			}
		}
		if alt.GeneratedExpr != nil {
			if err := a.setGenerated(t, col, alt.GeneratedExpr); err != nil {
				return false, err
			}
		}
		if !wasGenerated {
			copies[strings.ToUpper(col.Name)] = conv
		}
		// The translation of expressions reading the column may depend on its type.
		return true, a.recompile(t)
	case *ast.AlterColumnSetOptions:
		if err := columnOptions(t, col, alt.Options); err != nil {
			return false, err
		}
		return false, a.checkCommitTimestampUses(t, col)
	case *ast.AlterColumnSetDefault:
		if col.Generated != nil {
			return false, invalidf("Cannot set a default value on generated column %s.%s.", t.Name, col.Name)
		}
		return true, a.setDefault(t, col, alt.DefaultExpr)
	case *ast.AlterColumnDropDefault:
		col.Default, col.DefaultSQL, col.DefaultText = nil, "", ""
		return true, nil
	}
	return false, unimplementedf("Unsupported ALTER COLUMN action in the emulator: %s", alt.SQL())
}

// checkColumnChange validates ALTER COLUMN's new type and nullability for col against what
// depends on it: keys, interleaving, foreign keys, checks and stored generated columns.
func (a *applier) checkColumnChange(t *Table, col *Column, typ spantype.Type, notNull bool) error {
	if _, ok := convertColumn(col.Type, typ, ""); !ok {
		return invalidf("Cannot change type of column `%s` from `%s` to `%s`", col.Name, col.Type.ColumnString(), typ.ColumnString())
	}
	sameType := col.Type.Equal(typ)
	changed := !sameType || col.Type.Length != typ.Length
	nullChanged := col.NotNull != notNull
	if parent, ok := a.s.Table(t.Parent); ok && parent.isKeyColumn(col.Name) && (changed || nullChanged) {
		return invalidf("Cannot alter parent key column %s.", col.Name)
	}
	if t.isKeyColumn(col.Name) {
		// Nullable key columns would also need SQLite keys that hold NULL, which they cannot.
		if !sameType || nullChanged {
			return invalidf("Cannot change key column %s.", col.Name)
		}
		if changed && len(a.s.Children(t.Name)) > 0 {
			return invalidf("Requested change to key column %s could not be made.", col.Name)
		}
	}
	if fks := a.foreignKeysUsing(t, col); len(fks) > 0 {
		if changed {
			return preconditionf("Cannot change the type for column `%s` of table `%s`. It is used by one or more foreign keys: %s.", col.Name, t.Name, strings.Join(fks, ", "))
		}
		if nullChanged {
			return preconditionf("Cannot change the nullability for column `%s` of table `%s`. It is used by one or more foreign keys: %s.", col.Name, t.Name, strings.Join(fks, ", "))
		}
	}
	if !sameType {
		for _, c := range t.Checks {
			if refersTo(c.Expr, col.Name) {
				return invalidf("Cannot change the data type of column `%s`, which is used by check constraint `%s`.", col.Name, c.Name)
			}
		}
		for _, g := range t.Columns {
			if g != col && g.Generated != nil && g.Stored && refersTo(g.Generated, col.Name) {
				return preconditionf("Cannot change the data type of column `%s`, which has a dependent stored generated column.", col.Name)
			}
		}
	}
	return nil
}

// checkCommitTimestampUses fails when col allows commit timestamps but a CHECK, a stored
// generated column or a foreign key reads it: they would see the pending-timestamp placeholder.
func (a *applier) checkCommitTimestampUses(t *Table, col *Column) error {
	if !col.AllowCommitTimestamp {
		return nil
	}
	for _, c := range t.Checks {
		if refersTo(c.Expr, col.Name) {
			return invalidf("Column `%s` has option commit_timestamp, which is not supported in check constraint.", col.Name)
		}
	}
	for _, g := range t.Columns {
		if g.Generated != nil && g.Stored && refersTo(g.Generated, col.Name) {
			return preconditionf("Cannot use commit timestamp column `%s` as a dependency of a materialized generated column.", col.Name)
		}
	}
	if fks := a.foreignKeysUsing(t, col); len(fks) > 0 {
		return preconditionf("Cannot set the commit_timestamp option for column `%s` of table `%s`. It is used by one or more foreign keys: %s.", col.Name, t.Name, strings.Join(fks, ", "))
	}
	return nil
}

// foreignKeysUsing returns the names of the foreign keys that reference col of t or that t
// declares on col.
func (a *applier) foreignKeysUsing(t *Table, col *Column) []string {
	var names []string
	for _, other := range a.s.Tables {
		for _, fk := range other.ForeignKeys {
			if (other == t && containsFold(fk.Columns, col.Name)) ||
				(strings.EqualFold(fk.ReferencedTable, t.Name) && containsFold(fk.ReferencedColumns, col.Name)) {
				names = append(names, fk.Name)
			}
		}
	}
	return names
}

// recompile translates t's CHECK and generated column expressions again, after a column
// changed type.
func (a *applier) recompile(t *Table) error {
	for i, c := range t.Checks {
		sql, _, err := a.compile(t, c.Expr, checkErrorPrefix(t, c.Name, c.Text))
		if err != nil {
			return err
		}
		nc := *c
		nc.SQL = sql
		t.Checks[i] = &nc
	}
	for _, col := range t.Columns {
		if col.Generated == nil {
			continue
		}
		sql, err := a.compileColumnExpr(t, col, col.Generated, true)
		if err != nil {
			return err
		}
		col.GeneratedSQL = sql
	}
	return nil
}

// convertColumn returns the SQLite expression converting a stored value of type from to type
// to, for the type changes Spanner allows (STRING and BYTES lengths, STRING <-> BYTES).
func convertColumn(from, to spantype.Type, q string) (string, bool) {
	switch {
	case from.Equal(to):
		return q, true
	case from.Code == spantype.String && to.Code == spantype.Bytes:
		return "CAST(" + q + " AS BLOB)", true
	case from.Code == spantype.Bytes && to.Code == spantype.String:
		// Spanner also requires the bytes to be valid UTF-8; that is not checked here.
		return "CAST(" + q + " AS TEXT)", true
	}
	return "", false
}

// checkColumnUnused fails when col cannot be dropped because something depends on it.
func (a *applier) checkColumnUnused(t *Table, col *Column) error {
	if t.isKeyColumn(col.Name) {
		return invalidf("Cannot drop key column %s from table %s.", col.Name, t.Name)
	}
	for _, ix := range a.s.TableIndexes(t.Name) {
		if containsFold(ix.keyColumns(), col.Name) || containsFold(ix.Storing, col.Name) {
			return preconditionf("Cannot drop column %s from table %s because it is used by index %s.", col.Name, t.Name, ix.Name)
		}
	}
	if fks := a.foreignKeysUsing(t, col); len(fks) > 0 {
		return preconditionf("Cannot drop column `%s` from table `%s`. It is used by one or more foreign keys: %s. You must drop the foreign keys before dropping the column.",
			col.Name, t.Name, strings.Join(fks, ", "))
	}
	for _, c := range t.Checks {
		if refersTo(c.Expr, col.Name) {
			return invalidf("Cannot drop column `%s` from table `%s` because it is referenced by check constraint `%s`.", col.Name, t.Name, c.Name)
		}
	}
	for _, g := range t.Columns {
		if g.Generated != nil && g != col && refersTo(g.Generated, col.Name) {
			return preconditionf("Cannot drop column `%s` from table `%s` because it is referenced by generated column `%s`.", col.Name, t.Name, g.Name)
		}
	}
	if p := t.RowDeletionPolicy; p != nil && strings.EqualFold(p.Column, col.Name) {
		return invalidf("ROW DELETION POLICY will break if drop/alter column named %s in table %s. Row Deletion Policy must be set on column of type TIMESTAMP.", col.Name, t.Name)
	}
	return nil
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// refersTo reports whether expression e reads column col. Identifiers that name something
// else (function names, named arguments, struct fields, EXTRACT parts) are not column
// references.
func refersTo(e ast.Node, col string) bool {
	found := false
	var visit func(n ast.Node) bool
	visit = func(n ast.Node) bool {
		if found {
			return false
		}
		switch n := n.(type) {
		case *ast.Ident:
			found = strings.EqualFold(n.Name, col)
		case *ast.CallExpr:
			for _, arg := range n.Args {
				ast.Inspect(arg, visit)
			}
			for _, na := range n.NamedArgs {
				ast.Inspect(na.Value, visit)
			}
			return false
		case *ast.Path:
			// In a table's own expressions a.b is field b of column a (table-qualified
			// names are not handled).
			found = strings.EqualFold(n.Idents[0].Name, col)
			return false
		case *ast.SelectorExpr:
			ast.Inspect(n.Expr, visit)
			return false
		case *ast.ExtractExpr:
			ast.Inspect(n.Expr, visit)
			if n.AtTimeZone != nil {
				ast.Inspect(n.AtTimeZone.Expr, visit)
			}
			return false
		}
		return !found
	}
	ast.Inspect(e, visit)
	return found
}

func (a *applier) dropConstraint(t *Table, name string) error {
	for i, c := range t.Checks {
		if strings.EqualFold(c.Name, name) {
			t.Checks = append(t.Checks[:i:i], t.Checks[i+1:]...)
			return nil
		}
	}
	for i, fk := range t.ForeignKeys {
		if strings.EqualFold(fk.Name, name) {
			t.ForeignKeys = append(t.ForeignKeys[:i:i], t.ForeignKeys[i+1:]...)
			return nil
		}
	}
	return notFoundf("%s is not a constraint in %s", name, t.Name)
}

func (a *applier) dropTable(d *ast.DropTable) error {
	name, err := pathName(d.Name)
	if err != nil {
		return err
	}
	t, ok := a.s.Table(name)
	if !ok || t.InfoSchema {
		if d.IfExists {
			return nil
		}
		return notFoundf("Table not found: %s", name)
	}
	if children := a.s.Children(t.Name); len(children) > 0 {
		return preconditionf("Cannot drop table %s with interleaved tables: %s.", t.Name, strings.Join(tableNames(children), ", "))
	}
	var indexes []string
	for _, ix := range a.s.TableIndexes(t.Name) {
		if !ix.Managed {
			indexes = append(indexes, ix.Name)
		}
	}
	if len(indexes) > 0 {
		return preconditionf("Cannot drop table %s with indices: %s.", t.Name, strings.Join(indexes, ", "))
	}
	var fks []string
	for _, other := range a.s.Tables {
		for _, fk := range other.ForeignKeys {
			if other != t && strings.EqualFold(fk.ReferencedTable, t.Name) {
				fks = append(fks, fk.Name)
			}
		}
	}
	if len(fks) > 0 {
		return preconditionf("Cannot drop table `%s`. It is referenced by one or more foreign keys: %s. You must drop the foreign keys before dropping the table.",
			t.Name, strings.Join(fks, ", "))
	}
	for _, v := range a.s.Views {
		if viewUsesTable(v, t.Name) {
			return preconditionf("Cannot drop table `%s` on which there are dependent views: %s.", t.Name, v.Name)
		}
	}
	a.emit("DROP TABLE " + Quote(t.SQLiteName))
	a.s.Tables = deleteItem(a.s.Tables, t)
	a.s.reindex()
	a.dropUnusedBackingIndexes()
	return nil
}

func tableNames(ts []*Table) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

// viewUsesTable reports whether the view's query reads table (a table or view, by a one-part
// name).
func viewUsesTable(v *View, table string) bool {
	found := false
	ast.Inspect(v.Query, func(n ast.Node) bool {
		if tn, ok := n.(*ast.TableName); ok && strings.EqualFold(tn.Table.Name, table) {
			found = true
		}
		return !found
	})
	return found
}
