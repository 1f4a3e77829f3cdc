package sqlgen

import (
	"strings"

	"github.com/cloudspannerecosystem/memefish/ast"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/catalog"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

// KeyRead is a key range a query reads: the rows of Table whose primary key starts with the
// values of Params (parameter names, one per leading key column; all of them: one row). When Set,
// the last of Params is an array (key IN UNNEST(@p)), and the read is of each of its elements in
// that position: a key range for each. Lock is set when FOR UPDATE covers the read (the query's,
// or its subquery's).
type KeyRead struct {
	Table  *catalog.Table
	Params []string
	Set    bool
	Lock   bool
}

// keyReads finds what a query that reads rows by key reads, as key ranges, so that a read-write
// transaction can validate it as it validates a Read (by the keys a commit wrote) and need not run
// it again at commit whenever a commit wrote anything to its tables. The shape is either
//
//	SELECT ..., (subqueries) FROM Root [AS r] WHERE r.K1 = @p1 AND ... AND r.Kn = @pn [AND ...]
//
// where the WHERE pins all of Root's primary key to parameters (the last key column may be pinned
// to the elements of an array instead: r.Kn IN UNNEST(@ps)), and each subquery in the select list
// reads one table, whose WHERE pins a leading part of its primary key the same way, to parameters
// or to Root's key columns (an interleaved child read by its parent's key: c.K1 = r.K1); or
//
//	SELECT (subquery), (subquery), ...
//
// without FROM, whose subqueries pin their keys to parameters. The statement, or a subquery, may
// end in FOR UPDATE (which locks what the ranges it covers read: KeyRead.Lock). Anything else (a join,
// UNNEST in FROM, a view, a subquery elsewhere or inside a subquery, a key pinned by an
// expression, two arrays in one key) gives nil, and the query is validated by its tables as
// before. Conjuncts that filter further only narrow what is read inside the ranges.
func (c *compiler) keyReads(s *ast.QueryStatement) []KeyRead {
	root, ok := plainSelect(s.Query)
	if !ok || len(root.Results) == 0 {
		return nil
	}
	lockAll := forUpdate(s.Query)
	var (
		reads      []KeyRead
		rootTable  *catalog.Table
		rootAlias  string
		rootParams []string
		rootSet    bool
		selects    = 1
	)
	if root.From != nil {
		if rootTable, rootAlias, ok = c.singleTable(root); !ok {
			return nil
		}
		rootParams, rootSet = pinnedKey(rootTable, rootAlias, root.Where, nil, "")
		if len(rootParams) != len(rootTable.PrimaryKey) {
			return nil
		}
		reads = append(reads, KeyRead{Table: rootTable, Params: rootParams, Set: rootSet, Lock: lockAll})
	} else if root.Where != nil {
		return nil
	}
	for _, it := range root.Results {
		var e ast.Expr
		switch x := it.(type) {
		case *ast.ExprSelectItem:
			e = x.Expr
		case *ast.Alias:
			e = x.Expr
		default:
			return nil // * and r.*: only columns, but keep the shape simple
		}
		q, isSub := subquery(e)
		if !isSub {
			continue
		}
		sub, ok := plainSelect(q)
		if !ok {
			return nil
		}
		t, alias, ok := c.singleTable(sub)
		if !ok || (rootTable != nil && strings.EqualFold(rangeName(t, alias), rangeName(rootTable, rootAlias))) {
			return nil // the subquery's name for its rows hides the root's
		}
		params, set := pinnedKey(t, alias, sub.Where, rootTable, rootAlias)
		for i, p := range params {
			if strings.HasPrefix(p, "\x00") { // a root key column: its parameter
				j := keyIndex(rootTable, p[1:])
				params[i] = rootParams[j]
				if rootSet && j == len(rootParams)-1 { // the root's array: the last pinned, as for set
					if set || i != len(params)-1 {
						return nil
					}
					set = true
				}
			}
		}
		if len(params) == 0 {
			return nil
		}
		reads = append(reads, KeyRead{Table: t, Params: params, Set: set, Lock: lockAll || forUpdate(q)})
		selects++
	}
	if len(reads) == 0 {
		return nil
	}
	// Nothing else may read a table: every SELECT and every table in the statement is one of
	// those above.
	var nSelect, nTable int
	clean := true
	ast.Inspect(s, func(n ast.Node) bool {
		switch n.(type) {
		case *ast.Select:
			nSelect++
		case *ast.TableName:
			nTable++
		case *ast.Join, *ast.Unnest, *ast.SubQueryTableExpr, *ast.ParenTableExpr, *ast.PathTableExpr, *ast.TVFCallExpr, *ast.CompoundQuery, *ast.With:
			clean = false
		}
		return clean
	})
	if !clean || nSelect != selects || nTable != len(reads) {
		return nil
	}
	for _, r := range reads {
		for i, p := range r.Params {
			want := keyColumnType(r.Table, i)
			if r.Set && i == len(r.Params)-1 {
				want = spantype.ArrayOf(want)
			}
			if !c.paramType(p).Equal(want) {
				return nil
			}
		}
	}
	return reads
}

// rangeName is the name a table read as alias ("": none) has in the query: its alias, else its
// own name.
func rangeName(t *catalog.Table, alias string) string {
	if alias != "" {
		return alias
	}
	return t.Name
}

// forUpdate reports whether a query expression ends in FOR UPDATE.
func forUpdate(q ast.QueryExpr) bool {
	x, ok := q.(*ast.Query)
	return ok && x.ForUpdate != nil
}

// plainSelect unwraps a query expression to its SELECT: ORDER BY, LIMIT and FOR UPDATE are
// allowed, not WITH or pipes.
func plainSelect(q ast.QueryExpr) (*ast.Select, bool) {
	if x, ok := q.(*ast.Query); ok {
		if x.With != nil || len(x.PipeOperators) > 0 {
			return nil, false
		}
		q = x.Query
	}
	s, ok := q.(*ast.Select)
	if !ok || s.As != nil && !isAsStruct(s.As) {
		return nil, false
	}
	return s, ok
}

func isAsStruct(a ast.SelectAs) bool {
	_, ok := a.(*ast.AsStruct)
	return ok
}

// subquery returns the query of a select item that is a subquery (scalar, ARRAY or EXISTS).
func subquery(e ast.Expr) (ast.QueryExpr, bool) {
	for {
		p, ok := e.(*ast.ParenExpr)
		if !ok {
			break
		}
		e = p.Expr
	}
	switch x := e.(type) {
	case *ast.ScalarSubQuery:
		return x.Query, true
	case *ast.ArraySubQuery:
		return x.Query, true
	case *ast.ExistsSubQuery:
		return x.Query, true
	}
	return nil, false
}

// singleTable returns the one table a SELECT reads (FROM a table, not a view) and its alias ("":
// none).
func (c *compiler) singleTable(s *ast.Select) (*catalog.Table, string, bool) {
	if s.From == nil || s.GroupBy != nil || s.Having != nil {
		return nil, "", false
	}
	tn, ok := s.From.Source.(*ast.TableName)
	if !ok || tn.Sample != nil {
		return nil, "", false
	}
	t, ok := c.schema.Table(tn.Table.Name)
	if !ok {
		return nil, "", false
	}
	return t, aliasName(tn.As), true
}

// pinnedKey returns, for the leading primary key columns of t that where pins with an equality
// to a parameter (or, given outer, to a primary key column of outer: then "\x00" and the column's
// name), the parameter names, up to the first column not so pinned. A column pinned to the
// elements of an array parameter (K IN UNNEST(@p)) ends them: set reports it.
func pinnedKey(t *catalog.Table, alias string, where *ast.Where, outer *catalog.Table, outerAlias string) (params []string, set bool) {
	if where == nil {
		return nil, false
	}
	pinned := make([]string, len(t.PrimaryKey))
	inArray := make([]bool, len(t.PrimaryKey))
	forKeyEqualities(t, alias, where.Expr, func(i int, other ast.Expr) bool {
		if pinned[i] != "" {
			return false
		}
		if p, ok := other.(*ast.Param); ok {
			pinned[i] = p.Name
			return true
		}
		if outer != nil {
			if j := outerKeyColumn(outer, outerAlias, t, alias, other); j >= 0 {
				pinned[i] = "\x00" + outer.KeyColumns()[j].Name
				return true
			}
		}
		return false
	})
	keyCols := t.KeyColumns()
	for _, e := range conjuncts(where.Expr) {
		in, ok := e.(*ast.InExpr)
		if !ok || in.Not {
			continue
		}
		u, ok := in.Right.(*ast.UnnestInCondition)
		if !ok {
			continue
		}
		if p, ok := u.Expr.(*ast.Param); ok {
			if i := keyColumnIndex(t, keyCols, in.Left, alias); i >= 0 && pinned[i] == "" {
				pinned[i], inArray[i] = p.Name, true
			}
		}
	}
	for i, p := range pinned {
		if p == "" {
			break
		}
		params = append(params, p)
		if inArray[i] {
			return params, true
		}
	}
	return params, false
}

// outerKeyColumn is the index among outer's key columns of the column e names as outerAlias.Col
// (qualified: an unqualified name is the inner table's), -1 if it names none.
func outerKeyColumn(outer *catalog.Table, outerAlias string, inner *catalog.Table, innerAlias string, e ast.Expr) int {
	p, ok := e.(*ast.Path)
	if !ok || len(p.Idents) != 2 {
		return -1
	}
	q := p.Idents[0].Name
	if strings.EqualFold(q, innerAlias) || (innerAlias == "" && strings.EqualFold(q, inner.Name)) {
		return -1 // the inner table's own column
	}
	if outerAlias != "" {
		if !strings.EqualFold(q, outerAlias) {
			return -1
		}
	} else if !strings.EqualFold(q, outer.Name) {
		return -1
	}
	for i, k := range outer.KeyColumns() {
		if strings.EqualFold(k.Name, p.Idents[1].Name) {
			return i
		}
	}
	return -1
}

// forKeyEqualities calls f for each conjunct of where (split at its top-level ANDs) that is an
// equality between a primary key column of t (its position i) and another expression, with that
// expression, trying each side of the equality as the column until f takes it (returns true).
func forKeyEqualities(t *catalog.Table, alias string, where ast.Expr, f func(i int, other ast.Expr) bool) {
	keyCols := t.KeyColumns()
	for _, e := range conjuncts(where) {
		b, ok := e.(*ast.BinaryExpr)
		if !ok || b.Op != ast.OpEqual {
			continue
		}
		for _, side := range [2][2]ast.Expr{{b.Left, b.Right}, {b.Right, b.Left}} {
			if i := keyColumnIndex(t, keyCols, side[0], alias); i >= 0 && f(i, side[1]) {
				break
			}
		}
	}
}

// conjuncts splits a condition at its top-level ANDs.
func conjuncts(e ast.Expr) []ast.Expr {
	switch x := e.(type) {
	case *ast.ParenExpr:
		return conjuncts(x.Expr)
	case *ast.BinaryExpr:
		if x.Op == ast.OpAnd {
			return append(conjuncts(x.Left), conjuncts(x.Right)...)
		}
	}
	return []ast.Expr{e}
}

// keyIndex is the position of the key column named name in t's primary key.
func keyIndex(t *catalog.Table, name string) int {
	for i, k := range t.KeyColumns() {
		if strings.EqualFold(k.Name, name) {
			return i
		}
	}
	return -1
}

func keyColumnType(t *catalog.Table, i int) spantype.Type {
	return t.KeyColumns()[i].Type
}
