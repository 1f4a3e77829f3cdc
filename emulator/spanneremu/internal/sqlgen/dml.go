package sqlgen

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cloudspannerecosystem/memefish/ast"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/catalog"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/sqlfuncs"
)

func (c *compiler) compileDML(d ast.DML) error {
	var sql string
	var err error
	switch x := d.(type) {
	case *ast.Insert:
		sql, err = c.compileInsert(x)
	case *ast.Update:
		sql, err = c.compileUpdate(x)
	case *ast.Delete:
		sql, err = c.compileDelete(x)
	default:
		return unimplementedf("Unsupported DML statement %T", d)
	}
	if err != nil {
		return err
	}
	c.out.IsDML = true
	c.out.PendingColumns = c.pending
	// Every DML statement returns the keys of the rows it wrote after its THEN RETURN columns:
	// the engine records them (pending commit timestamps, what the transaction wrote).
	ret := append([]string(nil), c.returning...)
	for _, k := range c.out.Table.KeyColumns() {
		c.out.HiddenKeyColumns = append(c.out.HiddenKeyColumns, Column{Name: k.Name, Type: k.Type})
		ret = append(ret, targetColumn(c.out.Table, k))
	}
	sql += " RETURNING " + strings.Join(ret, ", ")
	c.out.Returning = true
	c.out.Repeatable = !sqlfuncs.CallsVolatile(sql)
	if c.out.Insert {
		// Columns an INSERT omits take their defaults, which may be volatile.
		for _, col := range c.out.Table.Columns {
			if col.DefaultSQL != "" && sqlfuncs.CallsVolatile(col.DefaultSQL) {
				c.out.Repeatable = false
			}
		}
	}
	c.finish(sql)
	c.fillParamTypes()
	return nil
}

// targetColumn names a column of the DML target table. The table name qualifies it, so a
// subquery in WHERE or THEN RETURN that reads a table with the same column names cannot
// capture it.
func targetColumn(t *catalog.Table, col *catalog.Column) string {
	return catalog.Quote(t.SQLiteName) + "." + catalog.Quote(col.SQLiteName)
}

// targetScope exposes the target table's columns (under its name and alias).
func (c *compiler) targetScope(path *ast.Path, as *ast.AsAlias) (*catalog.Table, *scope, error) {
	names := make([]string, len(path.Idents))
	for i, id := range path.Idents {
		names[i] = id.Name
	}
	name := strings.Join(names, ".")
	t, ok := c.schema.Table(name)
	if !ok {
		return nil, nil, invalidf("Table not found: %s", name)
	}
	if t.InfoSchema {
		return nil, nil, invalidf("Cannot modify INFORMATION_SCHEMA table %s", name)
	}
	sc := &scope{}
	rv := &rangeVar{name: strings.ToUpper(t.Name)}
	for _, col := range t.Columns {
		col2 := scopeCol{name: col.Name, typ: col.Type, sql: targetColumn(t, col), item: rv.name, hidden: col.Hidden}
		sc.cols = append(sc.cols, col2)
		rv.cols = append(rv.cols, col2)
	}
	sc.vars = append(sc.vars, rv)
	if a := aliasName(as); a != "" {
		sc.vars = append(sc.vars, &rangeVar{name: strings.ToUpper(a), cols: rv.cols})
	}
	c.out.Table = t
	return t, sc, nil
}

func (c *compiler) compileThenReturn(tr *ast.ThenReturn, sc *scope) error {
	if tr == nil {
		return nil
	}
	if tr.WithAction != nil {
		return unimplementedf("THEN RETURN WITH ACTION is not supported by the emulator")
	}
	for _, it := range tr.Items {
		items, err := c.compileSelectItem(it, sc)
		if err != nil {
			return err
		}
		for _, si := range items {
			c.out.Columns = append(c.out.Columns, Column{Name: si.name, Type: si.arg.Type})
			c.returning = append(c.returning, si.arg.SQL)
		}
	}
	return nil
}

// dmlValue translates a value written into a column: an expression, or exactly
// PENDING_COMMIT_TIMESTAMP().
func (c *compiler) dmlValue(e ast.Expr, sc *scope) (Arg, error) {
	if call, ok := e.(*ast.CallExpr); ok && len(call.Func.Idents) == 1 &&
		strings.EqualFold(call.Func.Idents[0].Name, "PENDING_COMMIT_TIMESTAMP") {
		if len(call.Args) != 0 {
			return Arg{}, invalidf("PENDING_COMMIT_TIMESTAMP takes no arguments")
		}
		ph := c.paramPlaceholder(CommitTimestampParam)
		if c.pendingArgs == nil {
			c.pendingArgs = map[string]bool{}
		}
		c.pendingArgs[ph] = true
		c.out.ParamTypes[CommitTimestampParam] = spantype.TTimestamp
		return Arg{SQL: ph, Type: spantype.TTimestamp}, nil
	}
	return c.compileExpr(e, sc)
}

// CommitTimestampParam is the parameter PENDING_COMMIT_TIMESTAMP() becomes in a DML statement.
// The engine binds it to spantype.PendingCommitTimestamp, the value a pending commit timestamp is
// stored as until the commit, and to the commit's own timestamp when it runs the statement again
// at the commit, so that the row needs no fixing afterwards. No statement's parameter can have
// this name.
const CommitTimestampParam = "\x00commit_timestamp"

// checkAssignable validates a value written to a column and records pending commit timestamps.
func (c *compiler) checkAssignable(t *catalog.Table, col *catalog.Column, v Arg) (Arg, error) {
	if col.Generated != nil {
		return Arg{}, invalidf("Cannot write into generated column `%s.%s`.", t.Name, col.Name)
	}
	if c.pendingArgs[v.SQL] {
		if !col.AllowCommitTimestamp {
			return Arg{}, status.Errorf(codes.FailedPrecondition, "Cannot write commit timestamp because the allow_commit_timestamp column option is not set to true for column %s, or for all corresponding shared key columns in this table's interleaved table hierarchy.", col.Name)
		}
		for _, p := range c.pending {
			if p == col.SQLiteName {
				return v, nil
			}
		}
		c.pending = append(c.pending, col.SQLiteName)
		return v, nil
	}
	if v.Type.Code == spantype.Unknown && !v.IsNullLiteral {
		// An untyped parameter takes the column's type.
		v.Type = col.Type
		return v, nil
	}
	if v.IsNullLiteral {
		return Arg{SQL: "NULL", Type: col.Type}, nil
	}
	if !v.Type.Equal(col.Type) {
		co, err := sqlfuncs.Coerce(v, col.Type)
		if err != nil {
			return Arg{}, invalidf("Value of type %s cannot be assigned to %s.%s, which has type %s", v.Type, t.Name, col.Name, col.Type)
		}
		v = co
	}
	if col.AllowCommitTimestamp {
		v.SQL = "spq_not_future(" + v.SQL + ")"
	}
	return v, nil
}

func (c *compiler) compileInsert(x *ast.Insert) (string, error) {
	t, sc, err := c.targetScope(x.TableName, x.As)
	if err != nil {
		return "", err
	}
	c.out.Insert = true
	if x.OnConflict != nil || x.AssertRowsModified != nil {
		return "", unimplementedf("INSERT ... ON CONFLICT / ASSERT_ROWS_MODIFIED is not supported by the emulator")
	}
	if len(x.Columns) == 0 {
		return "", invalidf("INSERT must list the columns it writes")
	}
	cols := make([]*catalog.Column, len(x.Columns))
	seen := map[string]bool{}
	for i, id := range x.Columns {
		col, ok := t.Column(id.Name)
		if !ok {
			return "", invalidf("Column %s is not present in table %s", id.Name, t.Name)
		}
		if seen[strings.ToUpper(col.Name)] {
			return "", invalidf("INSERT has columns with duplicate name: %s", col.Name)
		}
		seen[strings.ToUpper(col.Name)] = true
		cols[i] = col
	}
	keyCols := t.KeyColumns()
	for _, k := range keyCols {
		if !seen[strings.ToUpper(k.Name)] && k.Default == nil {
			return "", invalidf("INSERT must specify a value for every primary key column; %s is missing", k.Name)
		}
	}
	names := make([]string, len(cols))
	for i, col := range cols {
		names[i] = catalog.Quote(col.SQLiteName)
	}
	// INSERT OR UPDATE of an existing row may omit NOT NULL columns, but SQLite checks NOT NULL
	// before it notices the conflict. Each omitted NOT NULL column is therefore given the
	// row's current value (NULL when the row does not exist, which then fails as it should).
	var carried []*catalog.Column
	if x.InsertOrType == ast.InsertOrTypeUpdate {
		for _, col := range t.Columns {
			if col.NotNull && !seen[strings.ToUpper(col.Name)] && col.Generated == nil && col.Default == nil && !isKey(t, col) {
				carried = append(carried, col)
				names = append(names, catalog.Quote(col.SQLiteName))
			}
		}
	}
	var body string
	var firstRow []string // the first row's values, before any carried column
	switch in := x.Input.(type) {
	case *ast.ValuesInput:
		var rows []string
		for _, r := range in.Rows {
			if len(r.Exprs) != len(cols) {
				return "", invalidf("Inserted row has wrong column count; Has %d, expected %d", len(r.Exprs), len(cols))
			}
			vals := make([]string, len(cols))
			for i, de := range r.Exprs {
				if de.Default {
					vals[i] = defaultSQL(cols[i])
					continue
				}
				v, err := c.dmlValue(de.Expr, &scope{})
				if err != nil {
					return "", err
				}
				v, err = c.checkAssignable(t, cols[i], v)
				if err != nil {
					return "", err
				}
				vals[i] = v.SQL
			}
			if firstRow == nil {
				firstRow = slices.Clone(vals)
			}
			for _, col := range carried {
				var conds []string
				for _, k := range keyCols {
					for i, lc := range cols {
						if lc == k {
							conds = append(conds, catalog.Quote(k.SQLiteName)+" = "+vals[i])
						}
					}
				}
				vals = append(vals, fmt.Sprintf("(SELECT %s FROM %s WHERE %s)", catalog.Quote(col.SQLiteName), catalog.Quote(t.SQLiteName), strings.Join(conds, " AND ")))
			}
			rows = append(rows, "("+strings.Join(vals, ", ")+")")
		}
		body = "VALUES " + strings.Join(rows, ", ")
		c.out.InsertRows = len(rows)
	case *ast.SubQueryInput:
		r, err := c.compileQueryExpr(in.Query, nil)
		if err != nil {
			return "", err
		}
		if len(r.cols) != len(cols) {
			return "", invalidf("Inserted row has wrong column count; Has %d, expected %d", len(r.cols), len(cols))
		}
		if len(carried) > 0 {
			return "", unimplementedf("INSERT OR UPDATE ... SELECT must list every NOT NULL column in the emulator")
		}
		sel := make([]string, len(cols))
		for i := range cols {
			v, err := c.checkAssignable(t, cols[i], Arg{SQL: r.sqlNames[i], Type: r.cols[i].Type})
			if err != nil {
				return "", err
			}
			sel[i] = v.SQL
		}
		// "WHERE 1" keeps SQLite from reading a following ON CONFLICT as a join constraint.
		body = fmt.Sprintf("SELECT %s FROM (%s) WHERE 1", strings.Join(sel, ", "), r.sql)
	default:
		return "", unimplementedf("Unsupported INSERT input %T", x.Input)
	}
	if err := c.compileThenReturn(x.ThenReturn, sc); err != nil {
		return "", err
	}
	if c.out.InsertRows == 1 {
		c.decideInsert(x, t, cols, firstRow)
	}
	sql := fmt.Sprintf("INSERT INTO %s (%s) %s", catalog.Quote(t.SQLiteName), strings.Join(names, ", "), body)
	keyNames := make([]string, len(keyCols))
	for i, k := range keyCols {
		keyNames[i] = catalog.Quote(k.SQLiteName)
	}
	switch x.InsertOrType {
	case ast.InsertOrTypeIgnore:
		// Only a duplicate primary key is ignored; other constraint violations still fail.
		sql += fmt.Sprintf(" ON CONFLICT (%s) DO NOTHING", strings.Join(keyNames, ", "))
	case ast.InsertOrTypeUpdate:
		var sets []string
		for _, col := range cols {
			if !isKey(t, col) {
				n := catalog.Quote(col.SQLiteName)
				sets = append(sets, n+" = excluded."+n)
			}
		}
		if len(sets) == 0 {
			sql += fmt.Sprintf(" ON CONFLICT (%s) DO NOTHING", strings.Join(keyNames, ", "))
		} else {
			sql += fmt.Sprintf(" ON CONFLICT (%s) DO UPDATE SET %s", strings.Join(keyNames, ", "), strings.Join(sets, ", "))
		}
	}
	return sql, nil
}

func isKey(t *catalog.Table, col *catalog.Column) bool {
	for _, k := range t.PrimaryKey {
		if strings.EqualFold(k.Column, col.Name) {
			return true
		}
	}
	return false
}

func defaultSQL(col *catalog.Column) string {
	if col.DefaultSQL != "" {
		return "(" + col.DefaultSQL + ")"
	}
	return "NULL"
}

func (c *compiler) compileUpdate(x *ast.Update) (string, error) {
	t, sc, err := c.targetScope(x.TableName, x.As)
	if err != nil {
		return "", err
	}
	var (
		sets    []string
		setCols []*catalog.Column
		setVals []string
	)
	for _, u := range x.Updates {
		item, ok := u.(*ast.UpdateItemSetValue)
		if !ok {
			return "", unimplementedf("Nested DML in UPDATE is not supported")
		}
		path := item.Path
		if len(path) == 2 && (strings.EqualFold(path[0].Name, t.Name) || (x.As != nil && strings.EqualFold(path[0].Name, aliasName(x.As)))) {
			path = path[1:]
		}
		if len(path) != 1 {
			return "", unimplementedf("Updating STRUCT fields is not supported")
		}
		col, ok := t.Column(path[0].Name)
		if !ok {
			return "", invalidf("Column %s is not present in table %s", path[0].Name, t.Name)
		}
		if isKey(t, col) {
			return "", invalidf("Cannot modify a primary key column: %s", col.Name)
		}
		var v Arg
		if item.DefaultExpr.Default {
			v = Arg{SQL: defaultSQL(col), Type: col.Type}
		} else {
			if v, err = c.dmlValue(item.DefaultExpr.Expr, sc); err != nil {
				return "", err
			}
			if v, err = c.checkAssignable(t, col, v); err != nil {
				return "", err
			}
		}
		sets = append(sets, catalog.Quote(col.SQLiteName)+" = "+v.SQL)
		setCols, setVals = append(setCols, col), append(setVals, v.SQL)
	}
	where, err := c.compileCondition(x.Where.Expr, sc, "WHERE")
	if err != nil {
		return "", err
	}
	if err := c.compileThenReturn(x.ThenReturn, sc); err != nil {
		return "", err
	}
	c.out.KeyProbe = c.keyProbe(t, x.Where.Expr, aliasName(x.As))
	c.decideUpdate(x, t, setCols, setVals)
	return fmt.Sprintf("UPDATE %s SET %s WHERE %s", catalog.Quote(t.SQLiteName), strings.Join(sets, ", "), where), nil
}

func (c *compiler) compileDelete(x *ast.Delete) (string, error) {
	t, sc, err := c.targetScope(x.TableName, x.As)
	if err != nil {
		return "", err
	}
	where, err := c.compileCondition(x.Where.Expr, sc, "WHERE")
	if err != nil {
		return "", err
	}
	if err := c.compileThenReturn(x.ThenReturn, sc); err != nil {
		return "", err
	}
	c.out.Delete = true
	c.out.KeyProbe = c.keyProbe(t, x.Where.Expr, aliasName(x.As))
	return fmt.Sprintf("DELETE FROM %s WHERE %s", catalog.Quote(t.SQLiteName), where), nil
}

// TableExprCompiler translates CHECK, DEFAULT and generated-column expressions for the catalog.
// Column references are bare quoted column names, as SQLite table constraints require.
type TableExprCompiler struct{}

// CompileTableExpr implements catalog.ExprCompiler.
func (TableExprCompiler) CompileTableExpr(t *catalog.Table, e ast.Expr) (string, spantype.Type, error) {
	c := &compiler{schema: nil, out: &Compiled{ParamTypes: map[string]spantype.Type{}}}
	sc := &scope{}
	if t != nil {
		for _, col := range t.Columns {
			sc.cols = append(sc.cols, scopeCol{name: col.Name, typ: col.Type, sql: catalog.Quote(col.SQLiteName)})
		}
	}
	a, err := c.compileExpr(e, sc)
	if err != nil {
		return "", spantype.TUnknown, toStatus(err)
	}
	if len(c.params) > 0 {
		return "", spantype.TUnknown, invalidf("Query parameters are not allowed in schema expressions")
	}
	return a.SQL, a.Type, nil
}

// keyProbe recognises an UPDATE or DELETE whose WHERE pins the target's whole primary key:
// conjuncts "key column = expression" for every key column, where the expressions read no
// column (parameters, literals). It returns a query computing that key from the statement's
// parameters, so the engine knows the one row the statement can read; nil otherwise. Other
// conjuncts may follow (WHERE Id = @id AND Status = 'NEW'): they only narrow that row.
func (c *compiler) keyProbe(t *catalog.Table, where ast.Expr, alias string) *Compiled {
	keyCols := t.KeyColumns()
	probe := c.subCompiler()
	exprs := make([]string, len(keyCols))
	forKeyEqualities(t, alias, where, func(i int, other ast.Expr) bool {
		if exprs[i] != "" {
			return false
		}
		v, err := probe.compileExpr(other, &scope{})
		if err != nil {
			return false // it reads a column, or is not an expression the probe can compute
		}
		if v.Type.Code == spantype.Unknown {
			if p, ok := other.(*ast.Param); ok {
				probe.out.ParamTypes[p.Name] = keyCols[i].Type
				v.Type = keyCols[i].Type
			}
		}
		if !v.Type.Equal(keyCols[i].Type) {
			return false
		}
		exprs[i] = v.SQL
		return true
	})
	for _, e := range exprs {
		if e == "" {
			return nil
		}
	}
	probe.finish("SELECT " + strings.Join(exprs, ", "))
	probe.fillParamTypes()
	if probe.out.Volatile || sqlfuncs.CallsVolatile(probe.out.SQL) || len(probe.out.ReadTables) > 0 {
		return nil // the key depends on the time, on chance or on other rows
	}
	for _, k := range keyCols {
		probe.out.Columns = append(probe.out.Columns, Column{Name: k.Name, Type: k.Type})
	}
	return probe.out
}

// keyColumnIndex is the position in keyCols of the key column e names (Col, Table.Col or
// Alias.Col), or -1.
func keyColumnIndex(t *catalog.Table, keyCols []*catalog.Column, e ast.Expr, alias string) int {
	var name string
	switch x := e.(type) {
	case *ast.Ident:
		name = x.Name
	case *ast.Path:
		if len(x.Idents) != 2 {
			return -1
		}
		q := x.Idents[0].Name
		if !strings.EqualFold(q, t.Name) && (alias == "" || !strings.EqualFold(q, alias)) {
			return -1
		}
		name = x.Idents[1].Name
	default:
		return -1
	}
	for i, k := range keyCols {
		if strings.EqualFold(k.Name, name) {
			return i
		}
	}
	return -1
}
