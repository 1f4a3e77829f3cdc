package sqlgen

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/cloudspannerecosystem/memefish/ast"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/sqlfuncs"
)

// compileExpr translates an expression in scope sc.
func (c *compiler) compileExpr(e ast.Expr, sc *scope) (Arg, error) {
	switch x := e.(type) {
	case *ast.ParenExpr:
		a, err := c.compileExpr(x.Expr, sc)
		if err != nil {
			return a, err
		}
		a.SQL = "(" + a.SQL + ")"
		return a, nil
	case *ast.NullLiteral:
		return Arg{SQL: "NULL", IsNullLiteral: true}, nil
	case *ast.BoolLiteral:
		if x.Value {
			return Arg{SQL: "1", Type: spantype.TBool}, nil
		}
		return Arg{SQL: "0", Type: spantype.TBool}, nil
	case *ast.IntLiteral:
		n, err := strconv.ParseInt(x.Value, 0, 64)
		if err != nil {
			u, uerr := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(x.Value), "0x"), 16, 64)
			if uerr != nil || x.Base != 16 {
				return Arg{}, invalidf("Invalid integer literal: %s", x.Value)
			}
			n = int64(u)
		}
		return Arg{SQL: strconv.FormatInt(n, 10), Type: spantype.TInt64}, nil
	case *ast.FloatLiteral:
		f, err := strconv.ParseFloat(x.Value, 64)
		if err != nil {
			return Arg{}, invalidf("Invalid floating point literal: %s", x.Value)
		}
		s := strconv.FormatFloat(f, 'e', -1, 64)
		return Arg{SQL: s, Type: spantype.TFloat64}, nil
	case *ast.StringLiteral:
		v := x.Value
		return Arg{SQL: quoteString(v), Type: spantype.TString, StringLiteral: &v}, nil
	case *ast.BytesLiteral:
		return Arg{SQL: "X'" + hex.EncodeToString(x.Value) + "'", Type: spantype.TBytes}, nil
	case *ast.DateLiteral:
		d, err := spantype.ParseDateString(x.Value.Value)
		if err != nil {
			return Arg{}, invalidf("Invalid DATE literal: %s", x.Value.Value)
		}
		return Arg{SQL: quoteString(spantype.FormatDate(d)), Type: spantype.TDate}, nil
	case *ast.TimestampLiteral:
		t, err := spantype.ParseTimestampString(x.Value.Value)
		if err != nil {
			return Arg{}, invalidf("Invalid TIMESTAMP literal: %s", x.Value.Value)
		}
		return Arg{SQL: quoteString(spantype.FormatTimestamp(t)), Type: spantype.TTimestamp}, nil
	case *ast.NumericLiteral:
		n, err := spantype.NormalizeNumeric(x.Value.Value)
		if err != nil {
			return Arg{}, invalidf("Invalid NUMERIC literal: %s", x.Value.Value)
		}
		return Arg{SQL: quoteString(n), Type: spantype.TNumeric}, nil
	case *ast.JSONLiteral:
		j, err := spantype.NormalizeJSON(x.Value.Value)
		if err != nil {
			return Arg{}, invalidf("Invalid JSON literal: %v", err)
		}
		return Arg{SQL: quoteString(j), Type: spantype.TJSON}, nil
	case *ast.Param:
		t := c.paramType(x.Name)
		c.out.ParamTypes[x.Name] = t
		return Arg{SQL: c.paramPlaceholder(x.Name), Type: t}, nil
	case *ast.Ident:
		return c.resolveName([]string{x.Name}, sc)
	case *ast.Path:
		names := make([]string, len(x.Idents))
		for i, id := range x.Idents {
			names[i] = id.Name
		}
		return c.resolveName(names, sc)
	case *ast.SelectorExpr:
		base, err := c.compileExpr(x.Expr, sc)
		if err != nil {
			return Arg{}, err
		}
		return fieldAccess(base, x.Ident.Name)
	case *ast.IndexExpr:
		return c.compileIndex(x, sc)
	case *ast.BinaryExpr:
		l, err := c.compileExpr(x.Left, sc)
		if err != nil {
			return Arg{}, err
		}
		r, err := c.compileExpr(x.Right, sc)
		if err != nil {
			return Arg{}, err
		}
		return sqlfuncs.Binary(string(x.Op), l, r)
	case *ast.UnaryExpr:
		a, err := c.compileExpr(x.Expr, sc)
		if err != nil {
			return Arg{}, err
		}
		return sqlfuncs.Unary(string(x.Op), a)
	case *ast.IsNullExpr:
		a, err := c.compileExpr(x.Left, sc)
		if err != nil {
			return Arg{}, err
		}
		op := "IS NULL"
		if x.Not {
			op = "IS NOT NULL"
		}
		return Arg{SQL: fmt.Sprintf("(%s %s)", a.SQL, op), Type: spantype.TBool}, nil
	case *ast.IsBoolExpr:
		a, err := c.compileExpr(x.Left, sc)
		if err != nil {
			return Arg{}, err
		}
		if a.Type.Code != spantype.Bool && a.Type.Code != spantype.Unknown {
			return Arg{}, invalidf("IS TRUE/IS FALSE needs a BOOL operand, got %s", a.Type)
		}
		v := "FALSE"
		if x.Right {
			v = "TRUE"
		}
		op := "IS"
		if x.Not {
			op = "IS NOT"
		}
		return Arg{SQL: fmt.Sprintf("(%s %s %s)", a.SQL, op, v), Type: spantype.TBool}, nil
	case *ast.BetweenExpr:
		l, err := c.compileExpr(x.Left, sc)
		if err != nil {
			return Arg{}, err
		}
		lo, err := c.compileExpr(x.RightStart, sc)
		if err != nil {
			return Arg{}, err
		}
		hi, err := c.compileExpr(x.RightEnd, sc)
		if err != nil {
			return Arg{}, err
		}
		ge, err := sqlfuncs.Binary(">=", l, lo)
		if err != nil {
			return Arg{}, err
		}
		le, err := sqlfuncs.Binary("<=", l, hi)
		if err != nil {
			return Arg{}, err
		}
		s := fmt.Sprintf("(%s AND %s)", ge.SQL, le.SQL)
		if x.Not {
			s = "(NOT " + s + ")"
		}
		return Arg{SQL: s, Type: spantype.TBool}, nil
	case *ast.InExpr:
		return c.compileIn(x, sc)
	case *ast.CallExpr:
		return c.compileCall(x, sc)
	case *ast.CountStarExpr:
		return sqlfuncs.Aggregate(sqlfuncs.Call{Name: "COUNT"})
	case *ast.CastExpr:
		a, err := c.compileExpr(x.Expr, sc)
		if err != nil {
			return Arg{}, err
		}
		t, err := columnType(x.Type)
		if err != nil {
			return Arg{}, err
		}
		return sqlfuncs.Cast(a, t, x.Safe)
	case *ast.ExtractExpr:
		a, err := c.compileExpr(x.Expr, sc)
		if err != nil {
			return Arg{}, err
		}
		var tz *Arg
		if x.AtTimeZone != nil {
			t, err := c.compileExpr(x.AtTimeZone.Expr, sc)
			if err != nil {
				return Arg{}, err
			}
			tz = &t
		}
		return sqlfuncs.Extract(strings.ToUpper(x.Part.Name), a, tz)
	case *ast.CaseExpr:
		return c.compileCase(x, sc)
	case *ast.IfExpr:
		args, err := c.compileExprs(sc, x.Expr, x.TrueResult, x.ElseResult)
		if err != nil {
			return Arg{}, err
		}
		return sqlfuncs.Function(sqlfuncs.Call{Name: "IF", Args: args})
	case *ast.ScalarSubQuery:
		r, err := c.compileQueryExpr(x.Query, sc)
		if err != nil {
			return Arg{}, err
		}
		if len(r.cols) != 1 && !r.asValue {
			if len(r.cols) == 0 {
				return Arg{}, invalidf("Scalar subquery must return a column")
			}
			// SELECT a, b in a scalar subquery is an implicit struct.
			return Arg{}, invalidf("Scalar subquery cannot have more than one column unless using SELECT AS STRUCT to build STRUCT values")
		}
		// GoogleSQL fails when a scalar subquery returns more than one row; SQLite would take
		// the first.
		col := r.sqlNames[0]
		return Arg{SQL: fmt.Sprintf("(SELECT CASE WHEN count(*) > 1 THEN spq_raise('OUT_OF_RANGE', 'A scalar subquery returned more than one row.') ELSE min(%s) END FROM (SELECT %s FROM (%s) LIMIT 2))",
			col, col, r.sql), Type: r.cols[0].Type}, nil
	case *ast.ExistsSubQuery:
		r, err := c.compileQueryExpr(x.Query, sc)
		if err != nil {
			return Arg{}, err
		}
		return Arg{SQL: "EXISTS (" + r.sql + ")", Type: spantype.TBool}, nil
	case *ast.ArraySubQuery:
		r, err := c.compileQueryExpr(x.Query, sc)
		if err != nil {
			return Arg{}, err
		}
		if len(r.cols) != 1 {
			return Arg{}, invalidf("ARRAY subquery cannot have more than one column unless using SELECT AS STRUCT to build STRUCT values")
		}
		et := r.cols[0].Type
		if et.Code == spantype.Array {
			return Arg{}, invalidf("Cannot use array subquery with column of type %s because nested arrays are not supported", et)
		}
		at := spantype.ArrayOf(et)
		return Arg{SQL: fmt.Sprintf("(SELECT COALESCE(json_group_array(json(spq_json_elem(%s, %s))), '[]') FROM (%s))",
			r.sqlNames[0], quoteString(et.String()), r.sql), Type: at}, nil
	case *ast.ArrayLiteral:
		return c.compileArrayLiteral(x, sc)
	case *ast.TupleStructLiteral:
		args, err := c.compileExprs(sc, x.Values...)
		if err != nil {
			return Arg{}, err
		}
		fields := make([]spantype.Field, len(args))
		for i, a := range args {
			fields[i] = spantype.Field{Type: a.Type}
		}
		st := spantype.StructOf(fields...)
		return Arg{SQL: makeStruct(st, args), Type: st}, nil
	case *ast.TypelessStructLiteral:
		var args []Arg
		var fields []spantype.Field
		for _, v := range x.Values {
			var e ast.Expr
			name := ""
			switch a := v.(type) {
			case *ast.ExprArg:
				e = a.Expr
				name = impliedName(a.Expr)
			case *ast.Alias:
				e = a.Expr
				name = a.As.Alias.Name
			}
			a, err := c.compileExpr(e, sc)
			if err != nil {
				return Arg{}, err
			}
			args = append(args, a)
			fields = append(fields, spantype.Field{Name: name, Type: a.Type})
		}
		st := spantype.StructOf(fields...)
		return Arg{SQL: makeStruct(st, args), Type: st}, nil
	case *ast.TypedStructLiteral:
		var fields []spantype.Field
		for _, f := range x.Fields {
			t, err := columnType(f.Type)
			if err != nil {
				return Arg{}, err
			}
			name := ""
			if f.Ident != nil {
				name = f.Ident.Name
			}
			fields = append(fields, spantype.Field{Name: name, Type: t})
		}
		if len(x.Values) != len(fields) {
			return Arg{}, invalidf("STRUCT type has %d fields but constructor call has %d", len(fields), len(x.Values))
		}
		args, err := c.compileExprs(sc, x.Values...)
		if err != nil {
			return Arg{}, err
		}
		for i := range args {
			if args[i], err = sqlfuncs.Coerce(args[i], fields[i].Type); err != nil {
				return Arg{}, err
			}
		}
		st := spantype.StructOf(fields...)
		return Arg{SQL: makeStruct(st, args), Type: st}, nil
	case *ast.IntervalLiteralSingle:
		return Arg{}, invalidf("INTERVAL is only supported as an argument of date and timestamp functions")
	}
	return Arg{}, unimplementedf("Unsupported expression: %s", e.SQL())
}

func (c *compiler) compileExprs(sc *scope, es ...ast.Expr) ([]Arg, error) {
	out := make([]Arg, len(es))
	for i, e := range es {
		a, err := c.compileExpr(e, sc)
		if err != nil {
			return nil, err
		}
		out[i] = a
	}
	return out, nil
}

// resolveName resolves a (possibly dotted) name: a column, a range variable's column, a value
// range variable, then struct field / JSON member accesses; outer scopes are searched after
// inner ones (correlated references).
func (c *compiler) resolveName(names []string, sc *scope) (Arg, error) {
	for s := sc; s != nil; s = s.parent {
		base, rest, ok, err := s.resolveHead(names)
		if err != nil {
			return Arg{}, err
		}
		if !ok {
			continue
		}
		for _, f := range rest {
			if base, err = fieldAccess(base, f); err != nil {
				return Arg{}, err
			}
		}
		return base, nil
	}
	if len(names) > 1 {
		return Arg{}, invalidf("Unrecognized name: %s", names[0])
	}
	return Arg{}, invalidf("Unrecognized name: %s", names[0])
}

func (s *scope) resolveHead(names []string) (Arg, []string, bool, error) {
	// A range variable (table alias, UNNEST alias) takes precedence over a column of the same
	// name, as in ZetaSQL.
	rv := s.lookupVar(names[0])
	if rv == nil {
		col, ok, err := s.lookupCol(names[0])
		if err != nil || !ok {
			return Arg{}, nil, false, err
		}
		return Arg{SQL: col.sql, Type: col.typ}, names[1:], true, nil
	}
	if rv.value != nil {
		return *rv.value, names[1:], true, nil
	}
	if len(names) < 2 {
		// A table range variable used as a value is a STRUCT of its columns.
		var fields []spantype.Field
		var args []Arg
		for _, c := range rv.cols {
			fields = append(fields, spantype.Field{Name: c.name, Type: c.typ})
			args = append(args, Arg{SQL: c.sql, Type: c.typ})
		}
		st := spantype.StructOf(fields...)
		return Arg{SQL: makeStruct(st, args), Type: st}, nil, true, nil
	}
	for _, c := range rv.cols {
		if strings.EqualFold(c.name, names[1]) {
			return Arg{SQL: c.sql, Type: c.typ}, names[2:], true, nil
		}
	}
	return Arg{}, nil, false, invalidf("Name %s not found inside %s", names[1], names[0])
}

// fieldAccess is base.name: a STRUCT field, or a JSON member.
func fieldAccess(base Arg, name string) (Arg, error) {
	switch base.Type.Code {
	case spantype.Struct:
		for i, f := range base.Type.Fields {
			if strings.EqualFold(f.Name, name) {
				return sqlfuncs.StructField(base, i)
			}
		}
		return Arg{}, invalidf("Field name %s does not exist in %s", name, base.Type)
	case spantype.JSON:
		path := "$." + strconv.Quote(name)
		return sqlfuncs.Function(sqlfuncs.Call{Name: "JSON_QUERY", Args: []Arg{base, {SQL: quoteString(path), Type: spantype.TString, StringLiteral: &path}}})
	}
	return Arg{}, invalidf("Cannot access field %s on a value with type %s", name, base.Type)
}

func (c *compiler) compileIndex(x *ast.IndexExpr, sc *scope) (Arg, error) {
	base, err := c.compileExpr(x.Expr, sc)
	if err != nil {
		return Arg{}, err
	}
	mode := "OFFSET"
	var ie ast.Expr
	switch s := x.Index.(type) {
	case *ast.SubscriptSpecifierKeyword:
		mode = string(s.Keyword)
		ie = s.Expr
	case *ast.ExprArg:
		ie = s.Expr
	default:
		return Arg{}, unimplementedf("Unsupported subscript %T", x.Index)
	}
	idx, err := c.compileExpr(ie, sc)
	if err != nil {
		return Arg{}, err
	}
	if base.Type.Code == spantype.JSON {
		var path string
		if idx.StringLiteral != nil {
			path = "$." + strconv.Quote(*idx.StringLiteral)
		} else if lit, ok := ie.(*ast.IntLiteral); ok {
			path = "$[" + lit.Value + "]"
		} else {
			return Arg{}, unimplementedf("JSON subscripts must be literals in the emulator")
		}
		return sqlfuncs.Function(sqlfuncs.Call{Name: "JSON_QUERY", Args: []Arg{base, {SQL: quoteString(path), Type: spantype.TString, StringLiteral: &path}}})
	}
	return sqlfuncs.ArrayElement(base, idx, mode)
}

func (c *compiler) compileIn(x *ast.InExpr, sc *scope) (Arg, error) {
	l, err := c.compileExpr(x.Left, sc)
	if err != nil {
		return Arg{}, err
	}
	not := ""
	if x.Not {
		not = "NOT "
	}
	switch r := x.Right.(type) {
	case *ast.ValuesInCondition:
		vals, err := c.compileExprs(sc, r.Exprs...)
		if err != nil {
			return Arg{}, err
		}
		ts := []spantype.Type{l.Type}
		for _, v := range vals {
			ts = append(ts, v.Type)
		}
		st, err := sqlfuncs.Supertype(ts...)
		if err != nil {
			// Fall back to per-value equality, which knows literal coercions.
			var eqs []string
			for _, v := range vals {
				eq, err := sqlfuncs.Binary("=", l, v)
				if err != nil {
					return Arg{}, err
				}
				eqs = append(eqs, eq.SQL)
			}
			return Arg{SQL: fmt.Sprintf("(%s(%s))", not, strings.Join(eqs, " OR ")), Type: spantype.TBool}, nil
		}
		if l, err = coerceIfNeeded(l, st); err != nil {
			return Arg{}, err
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			if v, err = coerceIfNeeded(v, st); err != nil {
				return Arg{}, err
			}
			parts[i] = v.SQL
		}
		return Arg{SQL: fmt.Sprintf("(%s %sIN (%s))", l.SQL, not, strings.Join(parts, ", ")), Type: spantype.TBool}, nil
	case *ast.UnnestInCondition:
		arr, err := c.compileExpr(r.Expr, sc)
		if err != nil {
			return Arg{}, err
		}
		if arr.Type.Code == spantype.Unknown {
			arr.Type = spantype.ArrayOf(l.Type)
			c.inferParam(r.Expr, arr.Type)
		}
		if arr.Type.Code != spantype.Array {
			return Arg{}, invalidf("Second argument of IN UNNEST must be an array but was %s", arr.Type)
		}
		elem := Arg{SQL: decodeElem("value", *arr.Type.Elem), Type: *arr.Type.Elem}
		st, err := sqlfuncs.Supertype(l.Type, elem.Type)
		if err != nil {
			return Arg{}, invalidf("IN UNNEST: cannot compare %s with elements of %s", l.Type, arr.Type)
		}
		if l, err = coerceIfNeeded(l, st); err != nil {
			return Arg{}, err
		}
		if elem, err = coerceIfNeeded(elem, st); err != nil {
			return Arg{}, err
		}
		return Arg{SQL: fmt.Sprintf("(%s %sIN (SELECT %s FROM json_each(%s)))", l.SQL, not, elem.SQL, arr.SQL), Type: spantype.TBool}, nil
	case *ast.SubQueryInCondition:
		q, err := c.compileQueryExpr(r.Query, sc)
		if err != nil {
			return Arg{}, err
		}
		if len(q.cols) != 1 {
			return Arg{}, invalidf("Subquery of type IN must have only one output column")
		}
		return Arg{SQL: fmt.Sprintf("(%s %sIN (SELECT %s FROM (%s)))", l.SQL, not, q.sqlNames[0], q.sql), Type: spantype.TBool}, nil
	}
	return Arg{}, unimplementedf("Unsupported IN form %T", x.Right)
}

// inferParam records the type an undeclared parameter gets from its context.
func (c *compiler) inferParam(e ast.Expr, t spantype.Type) {
	if p, ok := e.(*ast.Param); ok {
		if c.paramType(p.Name).Code == spantype.Unknown {
			c.out.ParamTypes[p.Name] = t
		}
	}
}

func coerceIfNeeded(a Arg, t spantype.Type) (Arg, error) {
	if a.Type.Equal(t) && !a.IsNullLiteral {
		return a, nil
	}
	if t.Code == spantype.Unknown {
		return a, nil
	}
	return sqlfuncs.Coerce(a, t)
}

func (c *compiler) compileCase(x *ast.CaseExpr, sc *scope) (Arg, error) {
	var subject *Arg
	if x.Expr != nil {
		s, err := c.compileExpr(x.Expr, sc)
		if err != nil {
			return Arg{}, err
		}
		subject = &s
	}
	var conds, thens []Arg
	for _, w := range x.Whens {
		cond, err := c.compileExpr(w.Cond, sc)
		if err != nil {
			return Arg{}, err
		}
		if subject != nil {
			if cond, err = sqlfuncs.Binary("=", *subject, cond); err != nil {
				return Arg{}, err
			}
		} else if cond.Type.Code != spantype.Bool && cond.Type.Code != spantype.Unknown {
			return Arg{}, invalidf("CASE WHEN condition must be BOOL, got %s", cond.Type)
		}
		then, err := c.compileExpr(w.Then, sc)
		if err != nil {
			return Arg{}, err
		}
		conds = append(conds, cond)
		thens = append(thens, then)
	}
	var els *Arg
	if x.Else != nil {
		e, err := c.compileExpr(x.Else.Expr, sc)
		if err != nil {
			return Arg{}, err
		}
		els = &e
	}
	ts := make([]spantype.Type, 0, len(thens)+1)
	for _, t := range thens {
		ts = append(ts, t.Type)
	}
	if els != nil {
		ts = append(ts, els.Type)
	}
	rt, err := sqlfuncs.Supertype(ts...)
	if err != nil {
		return Arg{}, invalidf("No matching signature for CASE: %v", err)
	}
	var b strings.Builder
	b.WriteString("(CASE")
	for i := range conds {
		t, err := coerceIfNeeded(thens[i], rt)
		if err != nil {
			return Arg{}, err
		}
		fmt.Fprintf(&b, " WHEN %s THEN %s", conds[i].SQL, t.SQL)
	}
	if els != nil {
		e, err := coerceIfNeeded(*els, rt)
		if err != nil {
			return Arg{}, err
		}
		fmt.Fprintf(&b, " ELSE %s", e.SQL)
	}
	b.WriteString(" END)")
	return Arg{SQL: b.String(), Type: rt}, nil
}

func (c *compiler) compileArrayLiteral(x *ast.ArrayLiteral, sc *scope) (Arg, error) {
	args, err := c.compileExprs(sc, x.Values...)
	if err != nil {
		return Arg{}, err
	}
	var et spantype.Type
	if x.Type != nil {
		if et, err = columnType(x.Type); err != nil {
			return Arg{}, err
		}
	} else {
		ts := make([]spantype.Type, len(args))
		for i, a := range args {
			ts[i] = a.Type
		}
		if et, err = sqlfuncs.Supertype(ts...); err != nil {
			return Arg{}, invalidf("Array elements of types %v do not have a common supertype", ts)
		}
	}
	if et.Code == spantype.Array {
		return Arg{}, invalidf("Arrays of arrays are not supported")
	}
	for i := range args {
		if args[i], err = coerceIfNeeded(args[i], et); err != nil {
			return Arg{}, err
		}
	}
	at := spantype.ArrayOf(et)
	return Arg{SQL: makeArray(at, args), Type: at}, nil
}

// makeStruct renders a STRUCT constructor.
func makeStruct(t spantype.Type, args []Arg) string {
	parts := []string{quoteString(t.String())}
	for _, a := range args {
		parts = append(parts, a.SQL)
	}
	return "spq_make(" + strings.Join(parts, ", ") + ")"
}

// makeArray renders an ARRAY constructor.
func makeArray(t spantype.Type, args []Arg) string { return makeStruct(t, args) }

// dateParts are the names a date/timestamp function takes as a bare identifier argument.
var dateParts = map[string]bool{
	"NANOSECOND": true, "MICROSECOND": true, "MILLISECOND": true, "SECOND": true, "MINUTE": true,
	"HOUR": true, "DAY": true, "DAYOFWEEK": true, "DAYOFYEAR": true, "WEEK": true, "ISOWEEK": true,
	"MONTH": true, "QUARTER": true, "YEAR": true, "ISOYEAR": true, "DATE": true,
}

func (c *compiler) compileCall(x *ast.CallExpr, sc *scope) (Arg, error) {
	names := make([]string, len(x.Func.Idents))
	for i, id := range x.Func.Idents {
		names[i] = id.Name
	}
	name := strings.ToUpper(strings.Join(names, "."))
	if name == "PENDING_COMMIT_TIMESTAMP" {
		// Only the value written into a column may be PENDING_COMMIT_TIMESTAMP() (see
		// dmlValue); anywhere else the commit timestamp is not known yet.
		return Arg{}, invalidf("The PENDING_COMMIT_TIMESTAMP() function may only be used as a value for INSERT or UPDATE of an appropriately typed column. It cannot be used in SELECT, or as the input to any other scalar expression.")
	}
	if c.now != nil && len(x.Args) == 0 {
		// CURRENT_TIMESTAMP is one value for the whole statement.
		switch name {
		case "CURRENT_TIMESTAMP":
			c.out.Volatile = true
			return Arg{SQL: quoteString(spantype.FormatTimestamp(*c.now)), Type: spantype.TTimestamp}, nil
		case "CURRENT_DATE":
			c.out.Volatile = true
			return Arg{SQL: quoteString(spantype.FormatDate(c.now.In(spantype.DefaultTimeZone))), Type: spantype.TDate}, nil
		}
	}
	call := sqlfuncs.Call{Name: name, Distinct: x.Distinct}
	if _, ok := x.NullHandling.(*ast.IgnoreNulls); ok {
		call.IgnoreNulls = true
	}
	takesPart := strings.Contains(name, "DATE") || strings.Contains(name, "TIMESTAMP") || strings.Contains(name, "TIME")
	for _, a := range x.Args {
		ea, ok := a.(*ast.ExprArg)
		if !ok {
			return Arg{}, unimplementedf("Unsupported argument kind %T in %s", a, name)
		}
		// INTERVAL n PART becomes two arguments: n and the part name.
		if iv, ok := ea.Expr.(*ast.IntervalLiteralSingle); ok {
			n, err := c.compileExpr(iv.Value.(ast.Expr), sc)
			if err != nil {
				return Arg{}, err
			}
			part := string(iv.DateTimePart)
			call.Args = append(call.Args, n, Arg{SQL: quoteString(part), Type: spantype.TString, StringLiteral: &part})
			continue
		}
		if id, ok := ea.Expr.(*ast.Ident); ok && takesPart && dateParts[strings.ToUpper(id.Name)] {
			if _, found, _ := sc.lookupCol(id.Name); !found {
				part := strings.ToUpper(id.Name)
				call.Args = append(call.Args, Arg{SQL: quoteString(part), Type: spantype.TString, StringLiteral: &part})
				continue
			}
		}
		arg, err := c.compileExpr(ea.Expr, sc)
		if err != nil {
			return Arg{}, err
		}
		call.Args = append(call.Args, arg)
	}
	if len(x.NamedArgs) > 0 {
		call.NamedArgs = map[string]Arg{}
		for _, na := range x.NamedArgs {
			v, err := c.compileExpr(na.Value, sc)
			if err != nil {
				return Arg{}, err
			}
			call.NamedArgs[strings.ToLower(na.Name.Name)] = v
		}
	}
	if sqlfuncs.IsAggregate(name) {
		if err := c.aggregateModifiers(x, sc, &call); err != nil {
			return Arg{}, err
		}
		return sqlfuncs.Aggregate(call)
	}
	if x.Distinct {
		return Arg{}, invalidf("DISTINCT is only allowed in aggregate functions, not %s", name)
	}
	return sqlfuncs.Function(call)
}

// aggregateModifiers translates HAVING MAX/MIN, ORDER BY and LIMIT inside an aggregate call.
func (c *compiler) aggregateModifiers(x *ast.CallExpr, sc *scope, call *sqlfuncs.Call) error {
	switch h := x.Having.(type) {
	case nil:
	case *ast.HavingMax:
		e, err := c.compileExpr(h.Expr, sc)
		if err != nil {
			return err
		}
		call.Having = &sqlfuncs.Having{Max: true, Expr: e}
	case *ast.HavingMin:
		e, err := c.compileExpr(h.Expr, sc)
		if err != nil {
			return err
		}
		call.Having = &sqlfuncs.Having{Expr: e}
	default:
		return unimplementedf("Unsupported aggregate modifier %T", x.Having)
	}
	if x.OrderBy != nil {
		for _, it := range x.OrderBy.Items {
			e, err := c.compileExpr(it.Expr, sc)
			if err != nil {
				return err
			}
			call.OrderBy = append(call.OrderBy, sqlfuncs.OrderItem{Expr: e, Desc: it.Dir == ast.DirectionDesc})
		}
	}
	if x.Limit != nil {
		n, err := c.intValue(x.Limit.Count, "LIMIT")
		if err != nil {
			return err
		}
		call.Limit = &Arg{SQL: n, Type: spantype.TInt64}
	}
	return nil
}
