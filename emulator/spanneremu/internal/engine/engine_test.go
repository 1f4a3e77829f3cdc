package engine

import (
	"context"
	"testing"

	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"
)

const testDB = "projects/p/instances/i/databases/d"

func newTestDB(t *testing.T, ddl ...string) *DB {
	t.Helper()
	e, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if err := e.CreateDatabase(context.Background(), testDB, ddl); err != nil {
		t.Fatalf("CreateDatabase: %v", err)
	}
	db, err := e.Database(testDB)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func str(s string) *structpb.Value { return structpb.NewStringValue(s) }

func row(vs ...*structpb.Value) *structpb.ListValue { return &structpb.ListValue{Values: vs} }

func insert(table string, cols []string, rows ...*structpb.ListValue) *sppb.Mutation {
	return &sppb.Mutation{Operation: &sppb.Mutation_Insert{Insert: &sppb.Mutation_Write{Table: table, Columns: cols, Values: rows}}}
}

func commit(t *testing.T, db *DB, muts ...*sppb.Mutation) error {
	t.Helper()
	tx, err := db.Begin(TxnOptions{Mode: ReadWrite})
	if err != nil {
		t.Fatal(err)
	}
	_, err = tx.Commit(context.Background(), muts)
	return err
}

func query(t *testing.T, db *DB, sql string) [][]*structpb.Value {
	t.Helper()
	tx, err := db.Begin(TxnOptions{Mode: ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	res, err := tx.ExecuteSQL(context.Background(), Statement{SQL: sql})
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return res.Rows
}

func TestMutationsAndQuery(t *testing.T) {
	db := newTestDB(t, `CREATE TABLE Singers (SingerId INT64 NOT NULL, Name STRING(10)) PRIMARY KEY (SingerId)`)
	if err := commit(t, db, insert("Singers", []string{"SingerId", "Name"}, row(str("1"), str("Ann")), row(str("2"), str("Bob")))); err != nil {
		t.Fatal(err)
	}
	err := commit(t, db, insert("Singers", []string{"SingerId", "Name"}, row(str("1"), str("Dup"))))
	if status.Code(err) != codes.AlreadyExists {
		t.Errorf("duplicate insert: got %v, want ALREADY_EXISTS", err)
	}
	got := query(t, db, "SELECT SingerId, Name FROM Singers ORDER BY SingerId DESC")
	want := [][]*structpb.Value{{str("2"), str("Bob")}, {str("1"), str("Ann")}}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
}
