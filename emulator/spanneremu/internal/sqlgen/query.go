package sqlgen

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cloudspannerecosystem/memefish/ast"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/catalog"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/sqlfuncs"
)

// queryResult is a translated query expression: SQL whose result columns are named by
// sqlNames, with the user-visible names and types in cols.
type queryResult struct {
	sql      string
	cols     []Column
	sqlNames []string
	// asValue marks SELECT AS STRUCT / AS VALUE: a value table with one column.
	asValue bool
	// notNull marks columns that can never be NULL (ARRAY subqueries), when known.
	notNull []bool
}

func (c *compiler) compileQueryStatement(s *ast.QueryStatement) error {
	r, err := c.compileQueryExpr(s.Query, nil)
	if err != nil {
		return err
	}
	for i, col := range r.cols {
		if col.Type.Code == spantype.Struct {
			return unimplementedf("Unsupported query shape: A struct value cannot be returned as a column value. Rewrite the query to flatten the struct fields in the result.")
		}
		if col.Type.Code == spantype.Array && col.Type.Elem.Code == spantype.Struct && (i >= len(r.notNull) || !r.notNull[i]) {
			return unimplementedf("Unsupported query shape: This query can return a null-valued array of struct, which is not supported by Spanner.")
		}
	}
	c.out.Columns = r.cols
	c.finish(r.sql)
	c.fillParamTypes()
	c.out.KeyReads = c.keyReads(s)
	ast.Inspect(s, func(n ast.Node) bool {
		if q, ok := n.(*ast.Query); ok && q.ForUpdate != nil {
			c.out.ForUpdate = true
		}
		return !c.out.ForUpdate
	})
	return nil
}

func (c *compiler) fillParamTypes() {
	for _, p := range c.params {
		if _, ok := c.out.ParamTypes[p]; !ok {
			c.out.ParamTypes[p] = c.paramType(p)
		}
	}
}

func (c *compiler) paramType(name string) spantype.Type {
	if t, ok := c.declared[name]; ok {
		return t
	}
	for k, t := range c.declared {
		if strings.EqualFold(k, name) {
			return t
		}
	}
	if t, ok := c.out.ParamTypes[name]; ok {
		return t
	}
	return spantype.TUnknown
}

// compileQueryExpr translates any query expression. outer is the enclosing scope for
// correlated references (nil at top level).
func (c *compiler) compileQueryExpr(q ast.QueryExpr, outer *scope) (*queryResult, error) {
	switch x := q.(type) {
	case *ast.Query:
		return c.compileQuery(x, outer)
	case *ast.Select:
		return c.compileSelect(x, outer, nil, nil)
	case *ast.SubQuery:
		r, err := c.compileQueryExpr(x.Query, outer)
		if err != nil {
			return nil, err
		}
		return r, nil
	case *ast.CompoundQuery:
		return c.compileCompound(x, outer)
	case *ast.FromQuery:
		return nil, unimplementedf("FROM-first queries are not supported")
	}
	return nil, unimplementedf("Unsupported query form %T", q)
}

func (c *compiler) compileQuery(q *ast.Query, outer *scope) (*queryResult, error) {
	if len(q.PipeOperators) > 0 {
		return nil, unimplementedf("Pipe syntax is not supported")
	}
	var withSQL string
	if q.With != nil {
		defs := map[string]*cte{}
		c.ctes = append(c.ctes, defs)
		defer func() { c.ctes = c.ctes[:len(c.ctes)-1] }()
		var parts []string
		for _, d := range q.With.CTEs {
			r, err := c.compileQueryExpr(d.QueryExpr, outer)
			if err != nil {
				return nil, err
			}
			name := c.newAlias("w")
			def := &cte{name: name}
			for i, col := range r.cols {
				def.cols = append(def.cols, scopeCol{name: col.Name, typ: col.Type, sql: r.sqlNames[i]})
			}
			defs[strings.ToUpper(d.Name.Name)] = def
			parts = append(parts, fmt.Sprintf("%s AS (%s)", name, r.sql))
		}
		withSQL = "WITH " + strings.Join(parts, ", ") + " "
	}
	var r *queryResult
	var err error
	if sel, ok := q.Query.(*ast.Select); ok {
		r, err = c.compileSelect(sel, outer, q.OrderBy, q.Limit)
	} else {
		r, err = c.compileQueryExpr(q.Query, outer)
		if err == nil && (q.OrderBy != nil || q.Limit != nil) {
			r, err = c.wrapOrderLimit(r, q.OrderBy, q.Limit)
		}
	}
	if err != nil {
		return nil, err
	}
	if withSQL != "" {
		r.sql = withSQL + r.sql
	}
	return r, nil
}

// wrapOrderLimit applies ORDER BY / LIMIT to a compound query by wrapping it; ORDER BY may only
// name output columns there.
func (c *compiler) wrapOrderLimit(r *queryResult, ob *ast.OrderBy, lim *ast.Limit) (*queryResult, error) {
	sc := &scope{}
	for i, col := range r.cols {
		sc.cols = append(sc.cols, scopeCol{name: col.Name, typ: col.Type, sql: r.sqlNames[i]})
	}
	sql := "SELECT * FROM (" + r.sql + ")"
	if ob != nil {
		order, err := c.compileOrderBy(ob, sc, nil)
		if err != nil {
			return nil, err
		}
		sql += " ORDER BY " + order
	}
	if lim != nil {
		l, err := c.compileLimit(lim)
		if err != nil {
			return nil, err
		}
		sql += l
	}
	return &queryResult{sql: sql, cols: r.cols, sqlNames: r.sqlNames, asValue: r.asValue}, nil
}

func (c *compiler) compileCompound(q *ast.CompoundQuery, outer *scope) (*queryResult, error) {
	var op string
	distinct := q.AllOrDistinct == ast.AllOrDistinctDistinct
	switch q.Op {
	case ast.SetOpUnion:
		op = "UNION ALL"
		if distinct {
			op = "UNION"
		}
	case ast.SetOpIntersect, ast.SetOpExcept:
		if !distinct {
			return nil, unimplementedf("%s ALL is not supported by the emulator", q.Op)
		}
		op = string(q.Op)
	default:
		return nil, unimplementedf("Set operation %s is not supported", q.Op)
	}
	var parts []*queryResult
	for _, sub := range q.Queries {
		r, err := c.compileQueryExpr(sub, outer)
		if err != nil {
			return nil, err
		}
		if len(parts) > 0 && len(r.cols) != len(parts[0].cols) {
			return nil, invalidf("Queries in %s have mismatched column count; query 1 has %d columns, query %d has %d columns", q.Op, len(parts[0].cols), len(parts)+1, len(r.cols))
		}
		parts = append(parts, r)
	}
	n := len(parts[0].cols)
	types := make([]spantype.Type, n)
	for i := 0; i < n; i++ {
		var ts []spantype.Type
		for _, p := range parts {
			ts = append(ts, p.cols[i].Type)
		}
		st, err := sqlfuncs.Supertype(ts...)
		if err != nil {
			return nil, invalidf("Column %d in %s has incompatible types: %v", i+1, q.Op, err)
		}
		types[i] = st
	}
	names := make([]string, n)
	for i := range names {
		names[i] = c.newAlias("c")
	}
	sqls := make([]string, len(parts))
	for pi, p := range parts {
		sel := make([]string, n)
		for i := 0; i < n; i++ {
			a := Arg{SQL: p.sqlNames[i], Type: p.cols[i].Type}
			if !p.cols[i].Type.Equal(types[i]) {
				co, err := sqlfuncs.Coerce(a, types[i])
				if err != nil {
					return nil, err
				}
				a = co
			}
			sel[i] = fmt.Sprintf("%s AS %s", a.SQL, names[i])
		}
		sqls[pi] = fmt.Sprintf("SELECT %s FROM (%s)", strings.Join(sel, ", "), p.sql)
	}
	cols := make([]Column, n)
	for i := range cols {
		cols[i] = Column{Name: parts[0].cols[i].Name, Type: types[i]}
	}
	return &queryResult{sql: strings.Join(sqls, " "+op+" "), cols: cols, sqlNames: names, asValue: parts[0].asValue}, nil
}

// selectItem is one translated select-list column.
type selectItem struct {
	name    string
	arg     Arg
	sql     string // generated output name
	notNull bool   // an ARRAY subquery, never NULL
}

func (c *compiler) compileSelect(sel *ast.Select, outer *scope, ob *ast.OrderBy, lim *ast.Limit) (*queryResult, error) {
	sc := &scope{parent: outer}
	var b strings.Builder
	var fromSQL string
	if sel.From != nil {
		f, err := c.compileTableExpr(sel.From.Source, sc)
		if err != nil {
			return nil, err
		}
		fromSQL = f
	}
	var items []selectItem
	for _, it := range sel.Results {
		got, err := c.compileSelectItem(it, sc)
		if err != nil {
			return nil, err
		}
		items = append(items, got...)
	}
	for i := range items {
		items[i].sql = c.newAlias("c")
	}
	b.WriteString("SELECT ")
	if sel.AllOrDistinct == ast.AllOrDistinctDistinct {
		for _, it := range items {
			if !it.arg.Type.Orderable() && it.arg.Type.Code != spantype.Struct {
				return nil, invalidf("Column %s of type %s cannot be used in SELECT DISTINCT", it.name, it.arg.Type)
			}
		}
		b.WriteString("DISTINCT ")
	}
	res := &queryResult{}
	switch sel.As.(type) {
	case *ast.AsStruct:
		fields := make([]spantype.Field, len(items))
		args := make([]Arg, len(items))
		for i, it := range items {
			fields[i] = spantype.Field{Name: it.name, Type: it.arg.Type}
			args[i] = it.arg
		}
		st := spantype.StructOf(fields...)
		items = []selectItem{{name: "", arg: Arg{SQL: makeStruct(st, args), Type: st}, sql: c.newAlias("c")}}
		res.asValue = true
	case *ast.AsValue:
		if len(items) != 1 {
			return nil, invalidf("SELECT AS VALUE query must have exactly one column")
		}
		res.asValue = true
	case nil:
	default:
		return nil, unimplementedf("SELECT AS <type> is not supported")
	}
	outs := make([]string, len(items))
	for i, it := range items {
		outs[i] = it.arg.SQL + " AS " + it.sql
		res.cols = append(res.cols, Column{Name: it.name, Type: it.arg.Type})
		res.sqlNames = append(res.sqlNames, it.sql)
		res.notNull = append(res.notNull, it.notNull)
	}
	b.WriteString(strings.Join(outs, ", "))
	if fromSQL != "" {
		b.WriteString(" FROM " + fromSQL)
	}
	if sel.Where != nil {
		w, err := c.compileCondition(sel.Where.Expr, sc, "WHERE")
		if err != nil {
			return nil, err
		}
		b.WriteString(" WHERE " + w)
	}
	if sel.GroupBy != nil {
		var gs []string
		for _, e := range sel.GroupBy.Exprs {
			g, err := c.resolveOutputRef(e, items, sc)
			if err != nil {
				return nil, err
			}
			if !g.Type.Orderable() && g.Type.Code != spantype.Struct {
				return nil, invalidf("Grouping by expressions of type %s is not allowed", g.Type)
			}
			gs = append(gs, g.SQL)
		}
		b.WriteString(" GROUP BY " + strings.Join(gs, ", "))
	}
	if sel.Having != nil {
		// HAVING sees the FROM columns and, after them, the select-list aliases.
		hsc := &scope{parent: sc.parent, vars: sc.vars, cols: append([]scopeCol(nil), sc.cols...)}
		for _, it := range items {
			if it.name != "" {
				hsc.cols = append(hsc.cols, scopeCol{name: it.name, typ: it.arg.Type, sql: it.arg.SQL})
			}
		}
		h, err := c.compileCondition(sel.Having.Expr, hsc, "HAVING")
		if err != nil {
			return nil, err
		}
		b.WriteString(" HAVING " + h)
	}
	if ob != nil {
		order, err := c.compileOrderBy(ob, sc, items)
		if err != nil {
			return nil, err
		}
		b.WriteString(" ORDER BY " + order)
	}
	if lim != nil {
		l, err := c.compileLimit(lim)
		if err != nil {
			return nil, err
		}
		b.WriteString(l)
	}
	res.sql = b.String()
	return res, nil
}

// resolveOutputRef resolves a GROUP BY / ORDER BY item: an ordinal, a select-list alias, or an
// expression over the FROM clause.
func (c *compiler) resolveOutputRef(e ast.Expr, items []selectItem, sc *scope) (Arg, error) {
	if lit, ok := e.(*ast.IntLiteral); ok && items != nil {
		n, err := strconv.Atoi(lit.Value)
		if err != nil || n < 1 || n > len(items) {
			return Arg{}, invalidf("ORDER BY/GROUP BY column number %s is out of range", lit.Value)
		}
		return Arg{SQL: items[n-1].sql, Type: items[n-1].arg.Type}, nil
	}
	if id, ok := e.(*ast.Ident); ok {
		for _, it := range items {
			if it.name != "" && strings.EqualFold(it.name, id.Name) {
				// A select alias wins over a FROM column of the same name only when the
				// column does not exist; GoogleSQL prefers the alias in ORDER BY/GROUP BY.
				return Arg{SQL: it.sql, Type: it.arg.Type}, nil
			}
		}
	}
	return c.compileExpr(e, sc)
}

func (c *compiler) compileOrderBy(ob *ast.OrderBy, sc *scope, items []selectItem) (string, error) {
	var parts []string
	for _, it := range ob.Items {
		a, err := c.resolveOutputRef(it.Expr, items, sc)
		if err != nil {
			return "", err
		}
		key, err := sqlfuncs.OrderKey(a)
		if err != nil {
			return "", invalidf("ORDER BY does not support expressions of type %s", a.Type)
		}
		if it.Dir == ast.DirectionDesc {
			key += " DESC"
		}
		parts = append(parts, key)
	}
	return strings.Join(parts, ", "), nil
}

func (c *compiler) compileLimit(l *ast.Limit) (string, error) {
	count, err := c.intValue(l.Count, "LIMIT")
	if err != nil {
		return "", err
	}
	s := " LIMIT " + count
	if l.Offset != nil {
		off, err := c.intValue(l.Offset.Value, "OFFSET")
		if err != nil {
			return "", err
		}
		s += " OFFSET " + off
	}
	return s, nil
}

func (c *compiler) intValue(v ast.IntValue, what string) (string, error) {
	switch x := v.(type) {
	case *ast.IntLiteral:
		n, err := strconv.ParseInt(x.Value, 0, 64)
		if err != nil {
			return "", invalidf("Invalid %s value %s", what, x.Value)
		}
		if n < 0 {
			return "", invalidf("%s expects a non-negative integer literal or parameter", what)
		}
		return strconv.FormatInt(n, 10), nil
	case *ast.Param:
		t := c.paramType(x.Name)
		if t.Code != spantype.Int64 && t.Code != spantype.Unknown {
			return "", invalidf("%s expects an integer literal or parameter, got parameter of type %s", what, t)
		}
		c.out.ParamTypes[x.Name] = spantype.TInt64
		return c.paramPlaceholder(x.Name), nil
	case *ast.CastIntValue:
		return c.intValue(x.Expr, what)
	}
	return "", invalidf("%s expects an integer literal or parameter", what)
}

func (c *compiler) compileCondition(e ast.Expr, sc *scope, clause string) (string, error) {
	a, err := c.compileExpr(e, sc)
	if err != nil {
		return "", err
	}
	if a.Type.Code != spantype.Bool && a.Type.Code != spantype.Unknown {
		return "", invalidf("%s clause should return type BOOL, but returns %s", clause, a.Type)
	}
	return a.SQL, nil
}

func (c *compiler) compileSelectItem(it ast.SelectItem, sc *scope) ([]selectItem, error) {
	switch x := it.(type) {
	case *ast.Star:
		var out []selectItem
		for _, col := range sc.cols {
			if col.hidden {
				continue
			}
			out = append(out, selectItem{name: col.name, arg: Arg{SQL: col.sql, Type: col.typ}})
		}
		if len(out) == 0 {
			return nil, invalidf("SELECT * must have a FROM clause")
		}
		return applyStarModifiers(c, out, x.Except, x.Replace, sc)
	case *ast.DotStar:
		var out []selectItem
		if id, ok := x.Expr.(*ast.Ident); ok {
			if rv := sc.lookupVar(id.Name); rv != nil && rv.value == nil {
				for _, col := range rv.cols {
					out = append(out, selectItem{name: col.name, arg: Arg{SQL: col.sql, Type: col.typ}})
				}
				return applyStarModifiers(c, out, x.Except, x.Replace, sc)
			}
		}
		a, err := c.compileExpr(x.Expr, sc)
		if err != nil {
			return nil, err
		}
		if a.Type.Code != spantype.Struct {
			return nil, invalidf("Dot-star is only supported for range variables and STRUCTs, not %s", a.Type)
		}
		for i, f := range a.Type.Fields {
			fa, err := sqlfuncs.StructField(a, i)
			if err != nil {
				return nil, err
			}
			out = append(out, selectItem{name: f.Name, arg: fa})
		}
		return applyStarModifiers(c, out, x.Except, x.Replace, sc)
	case *ast.Alias:
		a, err := c.compileExpr(x.Expr, sc)
		if err != nil {
			return nil, err
		}
		return []selectItem{{name: x.As.Alias.Name, arg: a, notNull: isArraySubquery(x.Expr)}}, nil
	case *ast.ExprSelectItem:
		a, err := c.compileExpr(x.Expr, sc)
		if err != nil {
			return nil, err
		}
		return []selectItem{{name: impliedName(x.Expr), arg: a, notNull: isArraySubquery(x.Expr)}}, nil
	}
	return nil, unimplementedf("Unsupported select item %T", it)
}

func applyStarModifiers(c *compiler, items []selectItem, ex *ast.StarModifierExcept, rep *ast.StarModifierReplace, sc *scope) ([]selectItem, error) {
	if ex != nil {
		drop := map[string]bool{}
		for _, id := range ex.Columns {
			drop[strings.ToUpper(id.Name)] = true
		}
		var kept []selectItem
		for _, it := range items {
			if !drop[strings.ToUpper(it.name)] {
				kept = append(kept, it)
			}
		}
		items = kept
	}
	if rep != nil {
		for _, r := range rep.Columns {
			a, err := c.compileExpr(r.Expr, sc)
			if err != nil {
				return nil, err
			}
			for i := range items {
				if strings.EqualFold(items[i].name, r.Name.Name) {
					items[i].arg = a
				}
			}
		}
	}
	return items, nil
}

func isArraySubquery(e ast.Expr) bool {
	for {
		switch x := e.(type) {
		case *ast.ParenExpr:
			e = x.Expr
		case *ast.ArraySubQuery:
			return true
		default:
			return false
		}
	}
}

// impliedName is the column name GoogleSQL gives an unaliased select item.
func impliedName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.Path:
		return x.Idents[len(x.Idents)-1].Name
	case *ast.SelectorExpr:
		return x.Ident.Name
	case *ast.ParenExpr:
		return impliedName(x.Expr)
	}
	return ""
}

// compileTableExpr translates a FROM item, binding its names in sc.
func (c *compiler) compileTableExpr(te ast.TableExpr, sc *scope) (string, error) {
	switch x := te.(type) {
	case *ast.TableName:
		forced, err := c.checkTableHint(x.Table.Name, x.Hint)
		if err != nil {
			return "", err
		}
		return c.bindTable(x.Table.Name, aliasName(x.As), sc, forced)
	case *ast.PathTableExpr:
		names := make([]string, len(x.Path.Idents))
		for i, id := range x.Path.Idents {
			names[i] = id.Name
		}
		full := strings.Join(names, ".")
		if _, ok := c.schema.Table(full); ok {
			return c.bindTable(full, aliasName(x.As), sc, nil)
		}
		// t.array_column: an implicit UNNEST.
		return c.bindUnnest(x.Path, aliasName(x.As), x.WithOffset, sc)
	case *ast.SubQueryTableExpr:
		r, err := c.compileQueryExpr(x.Query, sc.parent)
		if err != nil {
			return "", err
		}
		alias := c.newAlias("t")
		rv := &rangeVar{name: strings.ToUpper(aliasName(x.As))}
		for i, col := range r.cols {
			sc2 := scopeCol{name: col.Name, typ: col.Type, sql: alias + "." + r.sqlNames[i], item: rv.name}
			rv.cols = append(rv.cols, sc2)
			sc.cols = append(sc.cols, sc2)
		}
		if r.asValue && len(r.cols) == 1 {
			v := Arg{SQL: alias + "." + r.sqlNames[0], Type: r.cols[0].Type}
			rv.value = &v
		}
		if rv.name != "" {
			sc.vars = append(sc.vars, rv)
		}
		return "(" + r.sql + ") AS " + alias, nil
	case *ast.ParenTableExpr:
		inner, err := c.compileTableExpr(x.Source, sc)
		if err != nil {
			return "", err
		}
		return "(" + inner + ")", nil
	case *ast.Unnest:
		return c.bindUnnest(x.Expr, aliasName(x.As), x.WithOffset, sc)
	case *ast.Join:
		return c.compileJoin(x, sc)
	}
	return "", unimplementedf("Unsupported FROM item %T", te)
}

// checkTableHint validates @{FORCE_INDEX=...}: the index must exist on the table. SQLite picks
// its own plan, so the hint has no other effect.
// checkTableHint validates a table hint and returns the index FORCE_INDEX names (nil for none
// or _BASE_TABLE).
func (c *compiler) checkTableHint(table string, h *ast.Hint) (*catalog.Index, error) {
	if h == nil {
		return nil, nil
	}
	var forced *catalog.Index
	for _, r := range h.Records {
		if !strings.EqualFold(r.Key.SQL(), "FORCE_INDEX") {
			continue
		}
		idx := strings.Trim(r.Value.SQL(), "`")
		if strings.EqualFold(idx, "_BASE_TABLE") {
			continue
		}
		i, ok := c.schema.Index(idx)
		if !ok || !strings.EqualFold(i.Table, table) {
			return nil, invalidf("The table %s does not have a secondary index called %s", table, idx)
		}
		forced = i
	}
	return forced, nil
}

func aliasName(a *ast.AsAlias) string {
	if a == nil || a.Alias == nil {
		return ""
	}
	return a.Alias.Name
}

func (c *compiler) lookupCTE(name string) *cte {
	for i := len(c.ctes) - 1; i >= 0; i-- {
		if d, ok := c.ctes[i][strings.ToUpper(name)]; ok {
			return d
		}
	}
	return nil
}

// bindTable binds a table (or CTE, or view) as a FROM item. forced is the index a FORCE_INDEX
// hint names: a query through a NULL_FILTERED index sees only the rows the index holds, those
// whose index keys are all non-NULL, as in Spanner; saying so in SQL also lets SQLite use the
// index, which it stores as a partial index with exactly that filter.
func (c *compiler) bindTable(name, alias string, sc *scope, forced *catalog.Index) (string, error) {
	if alias == "" {
		alias = name
		if i := strings.LastIndex(alias, "."); i >= 0 {
			alias = alias[i+1:]
		}
	}
	sqlAlias := c.newAlias("t")
	rv := &rangeVar{name: strings.ToUpper(alias)}
	if d := c.lookupCTE(name); d != nil {
		for _, col := range d.cols {
			col2 := scopeCol{name: col.name, typ: col.typ, sql: sqlAlias + "." + col.sql, item: rv.name}
			rv.cols = append(rv.cols, col2)
			sc.cols = append(sc.cols, col2)
		}
		sc.vars = append(sc.vars, rv)
		return d.name + " AS " + sqlAlias, nil
	}
	if v, ok := c.schema.View(name); ok {
		return c.bindView(v, rv, sqlAlias, sc)
	}
	t, ok := c.schema.Table(name)
	if !ok {
		return "", invalidf("Table not found: %s", name)
	}
	if t.InfoSchema {
		c.out.ReadsInfoSchema = true
	}
	c.out.addRead(t)
	for _, col := range t.Columns {
		if col.Hidden && strings.HasPrefix(col.Name, "_") {
			continue
		}
		col2 := scopeCol{name: col.Name, typ: col.Type, sql: sqlAlias + "." + catalog.Quote(col.SQLiteName), item: rv.name, hidden: col.Hidden}
		rv.cols = append(rv.cols, col2)
		sc.cols = append(sc.cols, col2)
	}
	sc.vars = append(sc.vars, rv)
	if forced != nil && forced.NullFiltered {
		var filter []string
		for _, k := range forced.Keys {
			if col, _ := t.Column(k.Column); !col.NotNull {
				filter = append(filter, catalog.Quote(col.SQLiteName)+" IS NOT NULL")
			}
		}
		if len(filter) == 0 {
			return catalog.Quote(t.SQLiteName) + " AS " + sqlAlias, nil
		}
		return fmt.Sprintf("(SELECT * FROM %s WHERE %s) AS %s", catalog.Quote(t.SQLiteName), strings.Join(filter, " AND "), sqlAlias), nil
	}
	return catalog.Quote(t.SQLiteName) + " AS " + sqlAlias, nil
}

// bindView expands a view as a subquery (views are SQL SECURITY INVOKER: the query runs as if
// written in place).
func (c *compiler) bindView(v *catalog.View, rv *rangeVar, sqlAlias string, sc *scope) (string, error) {
	r, err := c.compileQueryExpr(v.Query, nil)
	if err != nil {
		return "", invalidf("Error in view %s: %v", v.Name, err)
	}
	for i, col := range r.cols {
		col2 := scopeCol{name: col.Name, typ: col.Type, sql: sqlAlias + "." + r.sqlNames[i], item: rv.name}
		rv.cols = append(rv.cols, col2)
		sc.cols = append(sc.cols, col2)
	}
	sc.vars = append(sc.vars, rv)
	return "(" + r.sql + ") AS " + sqlAlias, nil
}

func (c *compiler) bindUnnest(e ast.Expr, alias string, off *ast.WithOffset, sc *scope) (string, error) {
	arr, err := c.compileExpr(e, sc)
	if err != nil {
		return "", err
	}
	if arr.Type.Code == spantype.Unknown {
		arr.Type = spantype.ArrayOf(spantype.TUnknown)
	}
	if arr.Type.Code != spantype.Array {
		return "", invalidf("Values referenced in UNNEST must be arrays. UNNEST contains expression of type %s", arr.Type)
	}
	if alias == "" {
		if p, ok := e.(*ast.Path); ok {
			alias = p.Idents[len(p.Idents)-1].Name
		}
	}
	sqlAlias := c.newAlias("t")
	elemType := *arr.Type.Elem
	elem := Arg{SQL: decodeElem(sqlAlias+".value", elemType), Type: elemType}
	rv := &rangeVar{name: strings.ToUpper(alias), value: &elem}
	if elemType.Code == spantype.Struct {
		// SELECT * FROM UNNEST(array_of_structs) yields the fields as columns.
		for i, f := range elemType.Fields {
			fa, err := sqlfuncs.StructField(elem, i)
			if err != nil {
				return "", err
			}
			sc.cols = append(sc.cols, scopeCol{name: f.Name, typ: f.Type, sql: fa.SQL, item: rv.name})
		}
	} else {
		sc.cols = append(sc.cols, scopeCol{name: alias, typ: elemType, sql: elem.SQL, item: rv.name})
	}
	if alias != "" {
		sc.vars = append(sc.vars, rv)
	}
	if off != nil {
		name := "offset"
		if off.As != nil {
			name = off.As.Alias.Name
		}
		sc.cols = append(sc.cols, scopeCol{name: name, typ: spantype.TInt64, sql: sqlAlias + ".key", item: rv.name})
	}
	return "json_each(" + arr.SQL + ") AS " + sqlAlias, nil
}

func (c *compiler) compileJoin(j *ast.Join, sc *scope) (string, error) {
	left, err := c.compileTableExpr(j.Left, sc)
	if err != nil {
		return "", err
	}
	leftEnd := len(sc.cols)
	right, err := c.compileTableExpr(j.Right, sc)
	if err != nil {
		return "", err
	}
	var op string
	switch j.Op {
	case ast.CommaJoin:
		op = ","
	case ast.CrossJoin:
		op = "CROSS JOIN"
	case ast.InnerJoin:
		op = "JOIN"
	case ast.LeftOuterJoin:
		op = "LEFT JOIN"
	case ast.RightOuterJoin:
		op = "RIGHT JOIN"
	case ast.FullOuterJoin:
		op = "FULL JOIN"
	default:
		return "", unimplementedf("Join type %s is not supported", j.Op)
	}
	sql := left + " " + op + " " + right
	switch cond := j.Cond.(type) {
	case nil:
		if j.Op != ast.CommaJoin && j.Op != ast.CrossJoin {
			if _, isUnnest := j.Right.(*ast.Unnest); !isUnnest {
				return "", invalidf("%s requires an ON or USING clause", j.Op)
			}
			sql += " ON 1"
		}
	case *ast.On:
		on, err := c.compileCondition(cond.Expr, sc, "ON")
		if err != nil {
			return "", err
		}
		sql += " ON " + on
	case *ast.Using:
		var conds []string
		for _, id := range cond.Idents {
			li, ri := -1, -1
			for i := 0; i < len(sc.cols); i++ {
				if strings.EqualFold(sc.cols[i].name, id.Name) && !sc.cols[i].hidden {
					if i < leftEnd && li < 0 {
						li = i
					} else if i >= leftEnd && ri < 0 {
						ri = i
					}
				}
			}
			if li < 0 || ri < 0 {
				return "", invalidf("Column %s in USING clause not found on both sides of the join", id.Name)
			}
			eq, err := sqlfuncs.Binary("=", Arg{SQL: sc.cols[li].sql, Type: sc.cols[li].typ}, Arg{SQL: sc.cols[ri].sql, Type: sc.cols[ri].typ})
			if err != nil {
				return "", err
			}
			conds = append(conds, eq.SQL)
			switch j.Op {
			case ast.RightOuterJoin:
				sc.cols[li].sql = sc.cols[ri].sql
			case ast.FullOuterJoin:
				sc.cols[li].sql = fmt.Sprintf("COALESCE(%s, %s)", sc.cols[li].sql, sc.cols[ri].sql)
			}
			sc.cols[li].using = true
			sc.cols[ri].hidden = true
			sc.cols[ri].name = ""
		}
		sql += " ON " + strings.Join(conds, " AND ")
	default:
		return "", unimplementedf("Unsupported join condition %T", j.Cond)
	}
	return sql, nil
}

// decodeElem turns the value json_each yields for an array element into storage form.
func decodeElem(sql string, t spantype.Type) string {
	switch t.Code {
	case spantype.Bytes, spantype.Float64, spantype.Float32, spantype.Array, spantype.Struct:
		return fmt.Sprintf("spq_elem(%s, %s)", sql, quoteString(t.String()))
	}
	return sql
}
