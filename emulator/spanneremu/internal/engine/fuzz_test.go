package engine

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/spanmart/spanmart/pkg/dbschema"
)

// FuzzExecuteSQL: whatever SQL text and parameters an ExecuteSql request carries, the SQL front
// end (memefish's parser, the translation to SQLite in sqlgen, the binding of parameters, and the
// run itself against the services' real schemas) never panics: a statement it cannot run is a
// gRPC status error with a code Spanner uses for a caller's mistake, never Unknown or Internal.
// A statement it runs returns rows as wide as their fields. Read-write runs are rolled back, so
// every input starts from the same empty databases.
//
// The seeds are the SQL statements of the repository's code (see sqlSeeds), with parameters of
// the types their names suggest, and a few hostile statements of each kind in
// testdata/fuzz/FuzzExecuteSQL (deep nesting, unterminated literals and comments, hints,
// overflowing and invalid literals, values that do not fit their parameter's type); the whole
// list of those is TestHostileStatements, kept out of the corpus because every corpus entry costs
// the short fuzz run of the test command a tenth of a second of coverage gathering.
func FuzzExecuteSQL(f *testing.F) {
	dbs := sqlDatabases(f)
	for _, sql := range sqlSeeds(f) {
		req, err := protojson.Marshal(&sppb.ExecuteSqlRequest{Params: guessParams(sql)})
		if err != nil {
			f.Fatal(err)
		}
		mode := uint8(0) // DML runs read-write, a query read-only
		if !dmlStart.MatchString(sql) {
			mode = 1
		}
		f.Add(uint8(databaseOf(dbs, sql)), mode, sql, req)
	}
	f.Fuzz(func(t *testing.T, which, mode uint8, sql string, request []byte) {
		checkStatement(t, dbs, which, mode, sql, request)
	})
}

// sqlDatabases starts an engine with a database of each service's schema (every migration of
// pkg/dbschema), closed when tb ends.
func sqlDatabases(tb testing.TB) []*DB {
	tb.Helper()
	e, err := New(Options{TTLSweepInterval: -1})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.Close() })
	var dbs []*DB
	for _, d := range dbschema.Databases() {
		migs, err := d.Migrations()
		if err != nil {
			tb.Fatal(err)
		}
		var ddl []string
		for _, m := range migs {
			ddl = append(ddl, m.Statements...)
		}
		name := "projects/p/instances/i/databases/" + d.Name
		if err := e.CreateDatabase(context.Background(), name, ddl); err != nil {
			tb.Fatalf("create database %s: %v", d.Name, err)
		}
		db, err := e.Database(name)
		if err != nil {
			tb.Fatal(err)
		}
		dbs = append(dbs, db)
	}
	return dbs
}

// checkStatement runs sql in database dbs[which] (mod their number), in a read-write transaction
// it rolls back (mode even) or a read-only one (odd); request is the rest of an ExecuteSqlRequest
// in protojson (params, paramTypes, queryMode), one that does not parse a request without
// parameters. It fails t unless the statement runs, its rows as wide as their fields, or fails
// with a gRPC status of a caller's mistake.
func checkStatement(t *testing.T, dbs []*DB, which, mode uint8, sql string, request []byte) {
	t.Helper()
	var req sppb.ExecuteSqlRequest
	if protojson.Unmarshal(request, &req) != nil {
		req.Reset()
	}
	st := Statement{SQL: sql, Params: req.GetParams(), ParamTypes: req.GetParamTypes(), PlanOnly: req.GetQueryMode() == sppb.ExecuteSqlRequest_PLAN}
	txnMode := ReadWrite
	if mode%2 == 1 {
		txnMode = ReadOnly
	}
	tx, err := dbs[int(which)%len(dbs)].Begin(TxnOptions{Mode: txnMode})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	// A bound on a statement that would run for long (a cross join of big arrays): its answer is
	// then DEADLINE_EXCEEDED, an error like any other.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := tx.ExecuteSQL(ctx, st)
	if err != nil {
		s, ok := status.FromError(err)
		if !ok {
			t.Fatalf("%.200q: %T %v is not a gRPC status", sql, err, err)
		}
		if slices.Contains([]codes.Code{codes.Unknown, codes.Internal, codes.OK}, s.Code()) {
			t.Fatalf("%.200q: %v, want the code of a caller's mistake", sql, err)
		}
		return
	}
	for i, row := range res.Rows {
		if len(row) != len(res.Fields) {
			t.Fatalf("%.200q: row %d has %d values for %d fields", sql, i, len(row), len(res.Fields))
		}
	}
}

// databaseOf returns the index of the database in dbs whose schema has the most of the tables
// sql names (the first one on a tie: every database has the outbox tables).
func databaseOf(dbs []*DB, sql string) int {
	best, bestHits := 0, 0
	for i, db := range dbs {
		hits := 0
		for _, word := range identifier.FindAllString(sql, -1) {
			if t, ok := db.Schema().Table(word); ok && !t.InfoSchema {
				hits++
			}
		}
		if hits > bestHits {
			best, bestHits = i, hits
		}
	}
	return best
}

var (
	identifier = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
	dmlStart   = regexp.MustCompile(`^\s*(INSERT|UPDATE|DELETE)\b`)
)

// sqlStart is how the text of a query or DML statement starts.
var sqlStart = regexp.MustCompile(`^\s*(\(\s*)*(SELECT|WITH|INSERT|UPDATE|DELETE|@\{)\b`)

// sqlSeeds returns the distinct SQL statements of the repository's Go code outside its tests and
// the emulators (the services, the generated DAO, the outbox library and relay, the harness and
// its tools): string literals, and sums of string literals, that start as a query or DML
// statement does. Reading them from the source keeps the seeds in step with the statements the
// services run.
func sqlSeeds(tb testing.TB) []string {
	tb.Helper()
	root, err := filepath.Abs(".")
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(root)
		if parent == root {
			tb.Fatal("no go.mod above the package directory")
		}
		root = parent
	}
	seen := map[string]bool{}
	var out []string
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed while the walk ran
		}
		if err != nil {
			return err
		}
		if d.IsDir() {
			// The emulator's own code speaks SQLite, not Spanner.
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "emulator") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil // another helper's half-written file is not our business
		}
		ast.Inspect(file, func(n ast.Node) bool {
			expr, ok := n.(ast.Expr)
			if !ok {
				return true
			}
			s, ok := stringConstant(expr)
			if !ok {
				return true
			}
			if sqlStart.MatchString(s) && !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
			return false // the parts of a sum are not statements of their own
		})
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// stringConstant returns the value of a string literal or of a sum of string literals.
func stringConstant(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		x, ok := stringConstant(e.X)
		if !ok {
			return "", false
		}
		y, ok := stringConstant(e.Y)
		return x + y, ok
	case *ast.ParenExpr:
		return stringConstant(e.X)
	}
	return "", false
}

var paramName = regexp.MustCompile(`@([A-Za-z_][A-Za-z0-9_]*)`)

// guessParams binds each parameter of sql to a value of the type its name suggests (untyped, as
// a client that sends no param_types does: the translator infers the type from the statement).
func guessParams(sql string) *structpb.Struct {
	fields := map[string]any{}
	for _, m := range paramName.FindAllStringSubmatch(sql, -1) {
		name := m[1]
		lower := strings.ToLower(name)
		switch {
		case strings.HasSuffix(lower, "ids") || strings.HasSuffix(lower, "s") && strings.Contains(lower, "key"):
			fields[name] = []any{"0b7c3f5e-2f44-4c8e-9a51-4f1f8e3d2a10", "a1"}
		case slices.Contains([]string{"limit", "n", "shard", "version", "seq", "count", "offset"}, lower) || strings.HasSuffix(lower, "version") || strings.HasSuffix(lower, "count"):
			fields[name] = "10"
		case slices.Contains([]string{"now", "cutoff", "before", "after", "from", "to", "since", "until"}, lower) || strings.HasSuffix(lower, "at") || strings.HasSuffix(lower, "time"):
			fields[name] = "2026-12-01T09:30:00Z"
		default:
			fields[name] = "a1"
		}
	}
	s, err := structpb.NewStruct(fields)
	if err != nil {
		panic(err) // the values above are all JSON
	}
	return s
}
