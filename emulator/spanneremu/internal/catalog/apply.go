package catalog

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cloudspannerecosystem/memefish"
	"github.com/cloudspannerecosystem/memefish/ast"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

// ExprCompiler translates a GoogleSQL expression in the scope of one table's columns to SQLite
// (used for CHECK, generated columns and DEFAULT). The engine supplies it, so that the catalog
// does not depend on the translator.
type ExprCompiler interface {
	CompileTableExpr(t *Table, e ast.Expr) (sql string, typ spantype.Type, err error)
}

// Empty returns a schema with only the INFORMATION_SCHEMA tables.
func Empty() *Schema {
	s := &Schema{Tables: infoSchemaTables()}
	s.reindex()
	return s
}

// Apply applies DDL statements (each element one statement's text without a trailing ';', as
// UpdateDatabaseDdl and CreateDatabase's extra_statements carry them) to s. It returns a new
// schema (s is not modified) and the SQLite statements that take a SQLite database from s to
// the new schema, in order, ending with the re-creation of the INFORMATION_SCHEMA tables (so
// Apply(Empty(), nil) also initialises a fresh database).
//
// The statements must run in one SQLite transaction with PRAGMA foreign_keys=OFF and
// PRAGMA legacy_alter_table=ON: tables that SQLite cannot alter in place are rebuilt (create a
// copy, copy the rows, drop, rename), and with foreign keys on, dropping the old copy would
// cascade into interleaved children. Copying the rows is also what validates existing data
// against a new NOT NULL, length or CHECK constraint; run PRAGMA foreign_key_check afterwards
// to validate new foreign keys.
//
// Errors are gRPC status errors; the first failing statement fails the whole batch.
func Apply(s *Schema, stmts []string, exprs ExprCompiler) (*Schema, []string, error) {
	a := &applier{s: s.clone(), exprs: exprs}
	for _, text := range stmts {
		if err := a.apply(text); err != nil {
			return nil, nil, err
		}
	}
	a.sql = append(a.sql, infoSchemaSQL(a.s)...)
	a.s.Statements = a.s.render()
	return a.s, a.sql, nil
}

// applier holds the state of one Apply call.
type applier struct {
	s     *Schema
	exprs ExprCompiler
	sql   []string
	src   string // text of the statement being applied
}

func invalidf(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}

func notFoundf(format string, args ...any) error {
	return status.Errorf(codes.NotFound, format, args...)
}

func preconditionf(format string, args ...any) error {
	return status.Errorf(codes.FailedPrecondition, format, args...)
}

func unimplementedf(format string, args ...any) error {
	return status.Errorf(codes.Unimplemented, format, args...)
}

// text returns n as written in the statement being applied.
func (a *applier) text(n ast.Node) string {
	return a.src[n.Pos():n.End()]
}

func (a *applier) emit(sql ...string) { a.sql = append(a.sql, sql...) }

func (a *applier) apply(text string) error {
	ddl, err := memefish.ParseDDL("", text)
	if err != nil {
		var me memefish.MultiError
		if errors.As(err, &me) && len(me) > 0 {
			err = me[0]
		}
		return invalidf("Error parsing Spanner DDL statement: %s : %v", text, err)
	}
	a.src = text
	switch d := ddl.(type) {
	case *ast.CreateTable:
		return a.createTable(d)
	case *ast.AlterTable:
		return a.alterTable(d)
	case *ast.DropTable:
		return a.dropTable(d)
	case *ast.CreateIndex:
		return a.createIndex(d)
	case *ast.AlterIndex:
		return a.alterIndex(d)
	case *ast.DropIndex:
		return a.dropIndex(d)
	case *ast.CreateView:
		return a.createView(d)
	case *ast.DropView:
		return a.dropView(d)
	case *ast.CreateSequence:
		return a.createSequence(d)
	case *ast.AlterSequence:
		return a.alterSequence(d)
	case *ast.DropSequence:
		return a.dropSequence(d)
	case *ast.CreateChangeStream:
		if err := a.checkNameFree(d.Name.Name); err != nil {
			return err
		}
		return a.createOther("CHANGE STREAM", d.Name.Name, changeStreamDDL(d))
	case *ast.AlterChangeStream:
		return a.alterChangeStream(d)
	case *ast.DropChangeStream:
		return a.dropOther("CHANGE STREAM", d.Name.Name)
	case *ast.CreateRole:
		return a.createOther("ROLE", d.Name.Name, text)
	case *ast.DropRole:
		return a.dropOther("ROLE", d.Name.Name)
	case *ast.Grant:
		a.s.others = append(a.s.others, other{group: "GRANT", text: text})
		return nil
	case *ast.Revoke, *ast.Analyze, *ast.AlterStatistics:
		// Accepted for compatibility; they change nothing the emulator models.
		return nil
	case *ast.AlterDatabase:
		a.alterDatabase(d)
		return nil
	}
	return unimplementedf("Unsupported DDL statement in the emulator: %s", firstWords(text))
}

// alterDatabase records database options (version_retention_period, default_leader, ...),
// which have no effect here, one statement per option as GetDatabaseDdl prints them; a NULL
// value removes the option.
func (a *applier) alterDatabase(d *ast.AlterDatabase) {
	for _, r := range d.Options.Records {
		a.s.removeOther("DATABASE", r.Name.Name)
		if _, null := r.Value.(*ast.NullLiteral); null {
			continue
		}
		text := fmt.Sprintf("ALTER DATABASE %s SET OPTIONS (%s = %s)", ident(d.Name.Name), r.Name.Name, a.text(r.Value))
		a.s.others = append(a.s.others, other{group: "DATABASE", name: strings.ToUpper(r.Name.Name), text: text})
	}
}

// firstWords returns the statement's leading keywords, for error messages.
func firstWords(text string) string {
	f := strings.Fields(text)
	if len(f) > 3 {
		f = f[:3]
	}
	return strings.Join(f, " ")
}

// pathName returns the name of a one-part path; named schemas are not supported.
func pathName(p *ast.Path) (string, error) {
	if len(p.Idents) != 1 {
		return "", unimplementedf("Named schemas are not supported: %s", p.SQL())
	}
	return p.Idents[0].Name, nil
}

// checkNameFree fails when name is taken by any schema object: Spanner keeps tables, views,
// indexes, constraints and sequences in one namespace.
func (a *applier) checkNameFree(name string) error {
	if a.nameTaken(name) {
		return preconditionf("Duplicate name in schema: %s.", name)
	}
	return nil
}

func (a *applier) nameTaken(name string) bool {
	if _, ok := a.s.Table(name); ok {
		return true
	}
	if _, ok := a.s.Index(name); ok {
		return true
	}
	if _, ok := a.s.View(name); ok {
		return true
	}
	if a.seqIndex(name) >= 0 || a.s.hasOther("CHANGE STREAM", name) {
		return true
	}
	for _, t := range a.s.Tables {
		for _, c := range t.Checks {
			if strings.EqualFold(c.Name, name) {
				return true
			}
		}
		for _, fk := range t.ForeignKeys {
			if strings.EqualFold(fk.Name, name) {
				return true
			}
		}
	}
	return false
}

// table looks up a user table for a statement that names it.
func (a *applier) table(p *ast.Path) (*Table, error) {
	name, err := pathName(p)
	if err != nil {
		return nil, err
	}
	t, ok := a.s.Table(name)
	if !ok || t.InfoSchema {
		return nil, notFoundf("Table not found: %s", name)
	}
	return t, nil
}

// compile translates e in the scope of t. A translator error keeps its status code and gets
// prefix, which says which expression failed.
func (a *applier) compile(t *Table, e ast.Expr, prefix string) (string, spantype.Type, error) {
	if a.exprs == nil {
		return "", spantype.Type{}, unimplementedf("%s: expressions are not supported without an expression compiler", prefix)
	}
	sql, typ, err := a.exprs.CompileTableExpr(t, e)
	if err != nil {
		if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
			return "", typ, status.Errorf(st.Code(), "%s: %s", prefix, st.Message())
		}
		return "", typ, invalidf("%s: %v", prefix, err)
	}
	return sql, typ, nil
}

// deleteItem returns list without item (compared by identity).
func deleteItem[T any](list []*T, item *T) []*T {
	out := make([]*T, 0, len(list))
	for _, x := range list {
		if x != item {
			out = append(out, x)
		}
	}
	return out
}

// quoteList quotes names for SQLite and joins them with ", ".
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = Quote(n)
	}
	return strings.Join(q, ", ")
}

// sqlString renders s as a SQLite string literal.
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
