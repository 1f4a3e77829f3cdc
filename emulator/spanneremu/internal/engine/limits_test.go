package engine

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// Statements that are the caller's mistake, found by FuzzExecuteSQL answering INTERNAL: a
// parameter without a type the statement does not fix, and nesting deeper than SQLite's parser
// takes. Each is INVALID_ARGUMENT, saying what to change.
func TestCallerMistakesAreInvalidArgument(t *testing.T) {
	db := newTestDB(t)
	for _, tt := range []struct {
		name, sql string
		params    map[string]*structpb.Value
		want      string
	}{
		{"an untyped parameter negated", "SELECT -@n", map[string]*structpb.Value{"n": str("x")}, "parameter @n has no type here: send its param_types"},
		{"an untyped parameter unnested", "SELECT x FROM UNNEST(@list) AS x", map[string]*structpb.Value{"list": str("x")}, "parameter @list has no type"},
		{"parentheses 3000 deep", "SELECT " + strings.Repeat("(", 3000) + "1" + strings.Repeat(")", 3000), nil, "too deeply nested or too large"},
		{"1 + 1 + ... 5000 times", "SELECT 1" + strings.Repeat(" + 1", 5000), nil, "too deeply nested or too large"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tx, err := db.Begin(TxnOptions{Mode: ReadOnly})
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			_, err = tx.ExecuteSQL(context.Background(), Statement{SQL: tt.sql, Params: &structpb.Struct{Fields: tt.params}})
			if s := status.Convert(err); s.Code() != codes.InvalidArgument || !strings.Contains(s.Message(), tt.want) {
				t.Errorf("%v, want INVALID_ARGUMENT mentioning %q", err, tt.want)
			}
		})
	}
}
