package catalog

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/cloudspannerecosystem/memefish/ast"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	_ "modernc.org/sqlite"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

// fakeCompiler translates the small expression subset the tests need: column references,
// literals, comparisons, AND/OR, IS [NOT] NULL and arithmetic.
type fakeCompiler struct{}

func (fakeCompiler) CompileTableExpr(t *Table, e ast.Expr) (string, spantype.Type, error) {
	switch e := e.(type) {
	case *ast.Ident:
		c, ok := t.Column(e.Name)
		if !ok {
			return "", spantype.Type{}, status.Errorf(codes.InvalidArgument, "Unrecognized name: %s", e.Name)
		}
		return Quote(c.SQLiteName), c.Type, nil
	case *ast.IntLiteral:
		return e.Value, spantype.TInt64, nil
	case *ast.StringLiteral:
		return sqlString(e.Value), spantype.TString, nil
	case *ast.BoolLiteral:
		if e.Value {
			return "1", spantype.TBool, nil
		}
		return "0", spantype.TBool, nil
	case *ast.NullLiteral:
		return "NULL", spantype.Type{}, nil
	case *ast.ParenExpr:
		return fakeCompiler{}.CompileTableExpr(t, e.Expr)
	case *ast.IsNullExpr:
		x, _, err := fakeCompiler{}.CompileTableExpr(t, e.Left)
		if err != nil {
			return "", spantype.Type{}, err
		}
		if e.Not {
			return "(" + x + " IS NOT NULL)", spantype.TBool, nil
		}
		return "(" + x + " IS NULL)", spantype.TBool, nil
	case *ast.BinaryExpr:
		l, lt, err := fakeCompiler{}.CompileTableExpr(t, e.Left)
		if err != nil {
			return "", lt, err
		}
		r, _, err := fakeCompiler{}.CompileTableExpr(t, e.Right)
		if err != nil {
			return "", lt, err
		}
		typ := spantype.TBool
		switch e.Op {
		case ast.OpAdd, ast.OpSub, ast.OpMul:
			typ = lt
		case ast.OpConcat:
			typ = spantype.TString
		}
		return fmt.Sprintf("(%s %s %s)", l, e.Op, r), typ, nil
	}
	return "", spantype.Type{}, fmt.Errorf("fake compiler: unsupported expression %s", e.SQL())
}

// testDB is an in-memory SQLite database kept in step with a schema, the way the engine runs
// Apply's statements.
type testDB struct {
	t      *testing.T
	conn   *sql.Conn
	schema *Schema
}

func newTestDB(t *testing.T) *testDB {
	t.Helper()
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	d := &testDB{t: t, conn: conn, schema: Empty()}
	if err := d.ddl(); err != nil {
		t.Fatal(err)
	}
	return d
}

// ddl applies statements to the schema and runs the resulting SQLite statements in one
// transaction with foreign keys off, checking foreign keys at the end, as the engine does.
// On failure the schema is left unchanged.
func (d *testDB) ddl(stmts ...string) error {
	s, sqls, err := Apply(d.schema, stmts, fakeCompiler{})
	if err != nil {
		return err
	}
	ctx := context.Background()
	for _, p := range []string{"PRAGMA foreign_keys=OFF", "PRAGMA legacy_alter_table=ON", "BEGIN"} {
		if _, err := d.conn.ExecContext(ctx, p); err != nil {
			d.t.Fatal(err)
		}
	}
	err = func() error {
		for _, q := range sqls {
			if _, err := d.conn.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		rows, err := d.conn.QueryContext(ctx, "PRAGMA foreign_key_check")
		if err != nil {
			return err
		}
		defer rows.Close()
		if rows.Next() {
			return fmt.Errorf("foreign key violation")
		}
		return rows.Err()
	}()
	end := "COMMIT"
	if err != nil {
		end = "ROLLBACK"
	}
	for _, p := range []string{end, "PRAGMA foreign_keys=ON"} {
		if _, err := d.conn.ExecContext(ctx, p); err != nil {
			d.t.Fatal(err)
		}
	}
	if err == nil {
		d.schema = s
		d.checkInSync()
	}
	return err
}

// checkInSync fails the test when SQLite's tables, columns and indexes differ from the model.
func (d *testDB) checkInSync() {
	d.t.Helper()
	sorted := cmpopts.SortSlices(func(a, b string) bool { return a < b })
	var wantTables, wantIndexes []string
	for _, t := range d.schema.Tables {
		wantTables = append(wantTables, t.SQLiteName)
		var cols []string
		for _, c := range t.Columns {
			cols = append(cols, c.SQLiteName)
		}
		if t.SyntheticKey != "" {
			cols = append(cols, t.SyntheticKey)
		}
		var got []string
		for _, r := range d.query(fmt.Sprintf("SELECT name FROM pragma_table_xinfo(%s)", sqlString(t.SQLiteName))) {
			got = append(got, r[0])
		}
		// Compared as sets: a column added in place follows the synthetic key column.
		if diff := cmp.Diff(cols, got, sorted); diff != "" {
			d.t.Errorf("SQLite columns of %s (-model +sqlite):\n%s", t.Name, diff)
		}
	}
	for _, ix := range d.schema.Indexes {
		wantIndexes = append(wantIndexes, ix.SQLiteName)
	}
	var gotTables, gotIndexes []string
	for _, r := range d.query(`SELECT type, name FROM sqlite_schema WHERE sql IS NOT NULL`) {
		if r[0] == "table" {
			gotTables = append(gotTables, r[1])
		} else {
			gotIndexes = append(gotIndexes, r[1])
		}
	}
	if diff := cmp.Diff(wantTables, gotTables, sorted); diff != "" {
		d.t.Errorf("SQLite tables (-model +sqlite):\n%s", diff)
	}
	if diff := cmp.Diff(wantIndexes, gotIndexes, sorted, cmpopts.EquateEmpty()); diff != "" {
		d.t.Errorf("SQLite indexes (-model +sqlite):\n%s", diff)
	}
}

func (d *testDB) mustDDL(stmts ...string) {
	d.t.Helper()
	if err := d.ddl(stmts...); err != nil {
		d.t.Fatalf("DDL %q: %v", stmts, err)
	}
}

func (d *testDB) exec(q string) error {
	_, err := d.conn.ExecContext(context.Background(), q)
	return err
}

func (d *testDB) mustExec(q string) {
	d.t.Helper()
	if err := d.exec(q); err != nil {
		d.t.Fatalf("%s: %v", q, err)
	}
}

// query returns the rows of q with every value rendered by fmt (NULL as "NULL").
func (d *testDB) query(q string) [][]string {
	d.t.Helper()
	rows, err := d.conn.QueryContext(context.Background(), q)
	if err != nil {
		d.t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out [][]string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			d.t.Fatal(err)
		}
		row := make([]string, len(cols))
		for i, v := range vals {
			switch v := v.(type) {
			case nil:
				row[i] = "NULL"
			case []byte:
				row[i] = string(v)
			default:
				row[i] = fmt.Sprint(v)
			}
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		d.t.Fatal(err)
	}
	return out
}

// errContains reports whether err's text contains want ("" means no error expected).
func errContains(err error, want string) bool {
	if want == "" {
		return err == nil
	}
	return err != nil && strings.Contains(err.Error(), want)
}
