// Package sqlgen translates GoogleSQL statements (parsed by memefish) into SQLite statements
// over the emulator's storage form, type-checking them on the way. It owns the structure of a
// query (scopes, name resolution, FROM items, joins, subqueries, set operations, DML targets);
// the meaning of functions and operators comes from package sqlfuncs.
//
// Every FROM item gets a unique SQLite alias (t1, t2, ...) and every derived column a generated
// name (c1, c2, ...), so user names never clash with each other or with SQLite keywords, and
// correlated subqueries can always name the outer column unambiguously.
package sqlgen

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cloudspannerecosystem/memefish/ast"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/catalog"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/sqlfuncs"
)

// Column is a result column.
type Column struct {
	Name string
	Type spantype.Type
}

// Compiled is a translated statement.
type Compiled struct {
	SQL string
	// Params names the parameter bound to each '?' of SQL, in order.
	Params []string
	// ParamTypes holds the type of every parameter the statement uses (declared, or inferred
	// from context for undeclared ones).
	ParamTypes map[string]spantype.Type
	// Columns are the result columns (for DML, the THEN RETURN columns).
	Columns []Column
	// ReadsInfoSchema is set when the statement reads INFORMATION_SCHEMA, which Spanner allows
	// only outside read-write transactions.
	ReadsInfoSchema bool
	// Volatile is set when the SQL embeds the statement's time (CURRENT_TIMESTAMP), so the
	// translation must not be reused for another execution.
	Volatile bool

	// DML only.
	IsDML  bool
	Table  *catalog.Table
	Insert bool // the statement can insert rows
	Delete bool // the statement deletes rows (which may cascade)
	// InsertRows is the number of rows of INSERT ... VALUES (0 for other statements).
	InsertRows int
	// Returning: SQL returns rows: Columns, then HiddenKeyColumns (the target's primary key)
	// of every row the statement wrote. A DML statement always returns.
	Returning        bool
	HiddenKeyColumns []Column
	// PendingColumns are the columns the statement sets to PENDING_COMMIT_TIMESTAMP().
	PendingColumns []string
	// KeyProbe, for an UPDATE or DELETE whose WHERE pins the target's primary key, is a query
	// computing that key from the statement's parameters (one row, the key columns in order):
	// the statement reads at most that row.
	KeyProbe *Compiled
	// Decide, for a DML statement whose outcome a read of committed data tells, is that read
	// (see Decision); nil for other statements.
	Decide *Decision
	// ReadTables are the tables the statement reads through FROM clauses and subqueries (not
	// counting the target table's rows it writes), upper-cased.
	ReadTables []string
	// KeyReads, for a query that reads rows by their keys (keyReads), are the key ranges it
	// reads: all of them, so that it can be validated by the keys commits wrote.
	KeyReads []KeyRead
	// ForUpdate is set for a query with FOR UPDATE, at its top level or in a subquery: in a
	// read-write transaction it asks for exclusive locks on what it reads (there, or in that
	// subquery), as LOCK_HINT_EXCLUSIVE does for a read. KeyRead.Lock marks the key reads it
	// covers.
	ForUpdate bool
	// Repeatable is set when running the DML again on the same data writes the same rows:
	// it calls no volatile function (GENERATE_UUID, the current time in a column default).
	Repeatable bool
}

func (c *Compiled) addRead(t *catalog.Table) {
	name := strings.ToUpper(t.Name)
	if !slices.Contains(c.ReadTables, name) {
		c.ReadTables = append(c.ReadTables, name)
	}
}

// Compile translates a query or DML statement. params holds the declared parameter types.
func Compile(schema *catalog.Schema, stmt ast.Statement, params map[string]spantype.Type) (*Compiled, error) {
	now := time.Now().UTC()
	c := &compiler{schema: schema, declared: params, now: &now, out: &Compiled{ParamTypes: map[string]spantype.Type{}}}
	var err error
	switch s := stmt.(type) {
	case *ast.QueryStatement:
		err = c.compileQueryStatement(s)
	case ast.DML:
		err = c.compileDML(s)
	default:
		err = invalidf("Unsupported statement type %T", stmt)
	}
	if err != nil {
		return nil, toStatus(err)
	}
	return c.out, nil
}

func toStatus(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	if fe, ok := err.(*sqlfuncs.Error); ok {
		code := codes.InvalidArgument
		switch fe.Code {
		case "UNIMPLEMENTED":
			code = codes.Unimplemented
		case "OUT_OF_RANGE":
			code = codes.OutOfRange
		case "NOT_FOUND":
			code = codes.NotFound
		}
		return status.Error(code, fe.Msg)
	}
	return status.Error(codes.InvalidArgument, err.Error())
}

func invalidf(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}

func unimplementedf(format string, args ...any) error {
	return status.Errorf(codes.Unimplemented, format, args...)
}

// compiler holds the state of one translation.
type compiler struct {
	schema   *catalog.Schema
	declared map[string]spantype.Type
	out      *Compiled
	nextID   int
	// args collects the parameter names in the order their '?' appear. Because fragments are
	// built out of order (a select list before its FROM clause is printed), parameters are
	// written as placeholders «p:N» and numbered when the final SQL is assembled.
	params  []string
	pending []string // columns set to PENDING_COMMIT_TIMESTAMP(), collected by DML
	// pendingArgs are the placeholders of PENDING_COMMIT_TIMESTAMP() values (CommitTimestampParam).
	pendingArgs map[string]bool
	ctes        []map[string]*cte
	// now is the statement's time, which CURRENT_TIMESTAMP() returns; nil in schema
	// expressions (a DEFAULT is evaluated per row).
	now       *time.Time
	returning []string // THEN RETURN expressions, in order
}

type cte struct {
	name string
	cols []scopeCol
}

func (c *compiler) newAlias(prefix string) string {
	c.nextID++
	return fmt.Sprintf("%s%d", prefix, c.nextID)
}

// paramPlaceholder records a use of parameter name and returns its placeholder.
func (c *compiler) paramPlaceholder(name string) string {
	c.params = append(c.params, name)
	return fmt.Sprintf("\x00p%d\x00", len(c.params)-1)
}

// finish numbers the parameter placeholders in the order they appear in sql.
//
// Each becomes (+?), not ?: SQLite's planner looks at the values bound to a bare ? where they
// may change the plan (a LIMIT, an equality on a column of a partial index under an ORDER BY:
// the relay's scan of a shard), and then marks the statement to be prepared again whenever that
// parameter is bound anew, which database/sql does on every run. A cached statement was thus
// compiled again on every execution (a benchmark of the relay's scan alone spent 11 % of its CPU
// re-preparing; BenchmarkShardScan has that shape). The unary plus is a no-op on a value and a
// parameter has no affinity to drop, but it hides the value from the planner, so a statement is
// prepared once.
func (c *compiler) finish(sql string) {
	var b strings.Builder
	for {
		i := strings.IndexByte(sql, 0)
		if i < 0 {
			b.WriteString(sql)
			break
		}
		j := strings.IndexByte(sql[i+1:], 0)
		var n int
		fmt.Sscanf(sql[i+2:i+1+j], "%d", &n)
		c.out.Params = append(c.out.Params, c.params[n])
		b.WriteString(sql[:i])
		b.WriteString("(+?)")
		sql = sql[i+j+2:]
	}
	c.out.SQL = b.String()
}

// scopeCol is a column visible in a scope: a FROM item's column.
type scopeCol struct {
	name  string // user-visible name ("" for anonymous)
	typ   spantype.Type
	sql   string // SQLite expression that reads it
	item  string // the FROM item's range variable name (alias or table name), upper-cased
	using bool   // merged by JOIN USING (not ambiguous)
	// hidden columns are not expanded by SELECT * (e.g. the element of a value table).
	hidden bool
}

// rangeVar is a name bound by a FROM item: a table alias, or an UNNEST alias (a value).
type rangeVar struct {
	name  string // upper-cased
	cols  []scopeCol
	value *Arg // for UNNEST aliases and value tables: the element value
}

// scope is the name environment of one SELECT.
type scope struct {
	parent *scope
	cols   []scopeCol
	vars   []*rangeVar
	// aggregate context: set while translating a select list with GROUP BY or aggregates.
}

func (s *scope) lookupVar(name string) *rangeVar {
	for i := len(s.vars) - 1; i >= 0; i-- {
		if s.vars[i].name == strings.ToUpper(name) {
			return s.vars[i]
		}
	}
	return nil
}

// lookupCol finds an unqualified column name. ok is false when not found; an ambiguous name is
// an error.
func (s *scope) lookupCol(name string) (*scopeCol, bool, error) {
	var found *scopeCol
	up := strings.ToUpper(name)
	for i := range s.cols {
		col := &s.cols[i]
		if strings.ToUpper(col.name) != up || col.name == "" {
			continue
		}
		if found != nil && !(found.using && col.using) {
			if found.sql == col.sql {
				continue
			}
			return nil, false, invalidf("Column name %s is ambiguous", name)
		}
		if found == nil {
			found = col
		}
	}
	return found, found != nil, nil
}

// Arg is a translated expression (re-exported from sqlfuncs for brevity).
type Arg = sqlfuncs.Arg

// columnType converts a memefish type to a spantype.Type.
func columnType(t ast.Type) (spantype.Type, error) {
	switch x := t.(type) {
	case *ast.SimpleType:
		st, ok := spantype.ParseScalarName(string(x.Name))
		if !ok {
			return spantype.TUnknown, unimplementedf("Type %s is not supported", x.Name)
		}
		return st, nil
	case *ast.ArrayType:
		e, err := columnType(x.Item)
		if err != nil {
			return spantype.TUnknown, err
		}
		return spantype.ArrayOf(e), nil
	case *ast.StructType:
		var fs []spantype.Field
		for _, f := range x.Fields {
			ft, err := columnType(f.Type)
			if err != nil {
				return spantype.TUnknown, err
			}
			name := ""
			if f.Ident != nil {
				name = f.Ident.Name
			}
			fs = append(fs, spantype.Field{Name: name, Type: ft})
		}
		return spantype.StructOf(fs...), nil
	case *ast.NamedType:
		if len(x.Path) == 1 {
			if st, ok := spantype.ParseScalarName(x.Path[0].Name); ok {
				return st, nil
			}
		}
		return spantype.TUnknown, unimplementedf("Type %s is not supported", x.SQL())
	}
	return spantype.TUnknown, unimplementedf("Type %s is not supported", t.SQL())
}

func quoteString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func quoteIdent(s string) string { return catalog.Quote(s) }
