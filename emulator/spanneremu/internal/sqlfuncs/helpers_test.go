package sqlfuncs

import (
	"database/sql"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	_ "modernc.org/sqlite"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

var (
	testDBOnce sync.Once
	testDB     *sql.DB
)

func db(t *testing.T) *sql.DB {
	t.Helper()
	testDBOnce.Do(func() {
		Register()
		d, err := sql.Open("sqlite", ":memory:")
		if err != nil {
			panic(err)
		}
		d.SetMaxOpenConns(1)
		testDB = d
	})
	return testDB
}

// Eval runs SELECT <x.SQL> with params bound in storage form and returns the single value, or
// the SQLite error.
func Eval(t *testing.T, x Arg, params ...any) (any, error) {
	t.Helper()
	var v any
	err := db(t).QueryRow("SELECT "+x.SQL, params...).Scan(&v)
	return v, err
}

// runtimeCode extracts the gRPC code from an error raised by a registered function.
func runtimeCode(err error) string {
	if err == nil {
		return ""
	}
	code, _, ok := ParseRuntimeError(err)
	if !ok {
		return "NOT A RUNTIME ERROR: " + err.Error()
	}
	return code
}

// p returns a parameter argument of type t.
func p(i int, t spantype.Type) Arg { return Arg{SQL: fmt.Sprintf("?%d", i), Type: t} }

// lit returns a STRING literal argument.
func lit(s string) Arg {
	return Arg{SQL: sqlString(s), Type: spantype.TString, StringLiteral: &s}
}

func null() Arg { return Arg{SQL: "NULL", IsNullLiteral: true} }

func intLit(n int64) Arg { return Arg{SQL: fmt.Sprint(n), Type: spantype.TInt64} }

func floatLit(f float64) Arg { return Arg{SQL: floatLiteral(f), Type: spantype.TFloat64} }

// evalCase is one expression to evaluate: want is the storage value, or wantCode the runtime
// error code.
type evalCase struct {
	name     string
	expr     func() (Arg, error)
	params   []any
	want     any
	wantType spantype.Type
	wantCode string
}

func runEvalCases(t *testing.T, cases []evalCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x, err := c.expr()
			if err != nil {
				t.Fatalf("translate: %v", err)
			}
			if c.wantType.Code != spantype.Unknown && !c.wantType.Equal(x.Type) {
				t.Errorf("type = %s, want %s", x.Type, c.wantType)
			}
			got, err := Eval(t, x, c.params...)
			if c.wantCode != "" {
				if code := runtimeCode(err); code != c.wantCode {
					t.Fatalf("SQL %s: error %v (code %q), want code %s (value %#v)", x.SQL, err, code, c.wantCode, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("SQL %s: %v", x.SQL, err)
			}
			if s, ok := got.([]byte); ok {
				if _, wantBytes := c.want.([]byte); !wantBytes {
					got = string(s)
				}
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("SQL %s (-want +got):\n%s", x.SQL, diff)
			}
		})
	}
}

func bin(op string, l, r Arg) func() (Arg, error) {
	return func() (Arg, error) { return Binary(op, l, r) }
}

func fn(name string, args ...Arg) func() (Arg, error) {
	return func() (Arg, error) { return Function(Call{Name: name, Args: args}) }
}
