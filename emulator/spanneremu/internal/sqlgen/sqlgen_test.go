package sqlgen

import (
	"testing"

	"github.com/cloudspannerecosystem/memefish"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/catalog"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

func testSchema(t *testing.T) *catalog.Schema {
	t.Helper()
	s, _, err := catalog.Apply(catalog.Empty(), []string{
		`CREATE TABLE Singers (SingerId INT64 NOT NULL, Name STRING(MAX), Tags ARRAY<STRING(MAX)>) PRIMARY KEY (SingerId)`,
		`CREATE TABLE Albums (SingerId INT64 NOT NULL, AlbumId INT64 NOT NULL, Title STRING(MAX),
			CreatedAt TIMESTAMP OPTIONS (allow_commit_timestamp = true)) PRIMARY KEY (SingerId, AlbumId), INTERLEAVE IN PARENT Singers`,
		`CREATE INDEX AlbumsByTitle ON Albums (Title)`,
	}, TableExprCompiler{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func compile(t *testing.T, s *catalog.Schema, sql string, params map[string]spantype.Type) (*Compiled, error) {
	t.Helper()
	stmt, err := memefish.ParseStatement("", sql)
	if err != nil {
		t.Fatalf("parse %q: %v", sql, err)
	}
	return Compile(s, stmt, params)
}

// Result columns carry the names and types GoogleSQL gives them.
func TestResultColumns(t *testing.T) {
	s := testSchema(t)
	tests := []struct {
		sql  string
		want []Column
	}{
		{"SELECT SingerId, Name AS n, 5/2, [1, 2] FROM Singers",
			[]Column{{"SingerId", spantype.TInt64}, {"n", spantype.TString}, {"", spantype.TFloat64}, {"", spantype.ArrayOf(spantype.TInt64)}}},
		{"SELECT SingerId, s.Name, a.Title FROM Singers AS s JOIN Albums AS a USING (SingerId)",
			[]Column{{"SingerId", spantype.TInt64}, {"Name", spantype.TString}, {"Title", spantype.TString}}},
		{"SELECT * FROM Singers",
			[]Column{{"SingerId", spantype.TInt64}, {"Name", spantype.TString}, {"Tags", spantype.ArrayOf(spantype.TString)}}},
		{"SELECT x, o FROM UNNEST(@ids) AS x WITH OFFSET AS o",
			[]Column{{"x", spantype.TInt64}, {"o", spantype.TInt64}}},
		{"SELECT ARRAY(SELECT AS STRUCT AlbumId, Title FROM Albums) AS a",
			[]Column{{"a", spantype.ArrayOf(spantype.StructOf(spantype.Field{Name: "AlbumId", Type: spantype.TInt64}, spantype.Field{Name: "Title", Type: spantype.TString}))}}},
		{"SELECT COUNT(*) AS n FROM Albums GROUP BY SingerId HAVING n > 1",
			[]Column{{"n", spantype.TInt64}}},
	}
	for _, tt := range tests {
		c, err := compile(t, s, tt.sql, map[string]spantype.Type{"ids": spantype.ArrayOf(spantype.TInt64)})
		if err != nil {
			t.Errorf("%s: %v", tt.sql, err)
			continue
		}
		if diff := cmp.Diff(tt.want, c.Columns); diff != "" {
			t.Errorf("%s: columns (-want +got):\n%s", tt.sql, diff)
		}
	}
}

// Translation errors carry the codes Spanner uses.
func TestCompileErrors(t *testing.T) {
	s := testSchema(t)
	tests := []struct {
		sql  string
		code codes.Code
	}{
		{"SELECT * FROM Nope", codes.InvalidArgument},
		{"SELECT Nope FROM Singers", codes.InvalidArgument},
		{"SELECT * FROM Singers@{FORCE_INDEX=Missing}", codes.InvalidArgument},
		{"SELECT STRUCT(1 AS a)", codes.Unimplemented},
		{"UPDATE Singers SET SingerId = 2 WHERE true", codes.InvalidArgument},
		{"SELECT PENDING_COMMIT_TIMESTAMP()", codes.InvalidArgument},
		{"SELECT SingerId FROM Singers, Albums", codes.InvalidArgument}, // ambiguous
		{"INSERT INTO Albums (SingerId, AlbumId, Title) VALUES (1, 2, 3)", codes.InvalidArgument},
		{"SELECT 1 INTERSECT ALL SELECT 1", codes.Unimplemented},
	}
	for _, tt := range tests {
		_, err := compile(t, s, tt.sql, nil)
		if got := status.Code(err); got != tt.code {
			t.Errorf("%s: code %v (%v), want %v", tt.sql, got, err, tt.code)
		}
	}
}

// DML that writes PENDING_COMMIT_TIMESTAMP() returns the keys of the rows it wrote, so the
// engine can fill in the commit timestamp.
func TestPendingCommitTimestampDML(t *testing.T) {
	s := testSchema(t)
	c, err := compile(t, s, "INSERT INTO Albums (SingerId, AlbumId, CreatedAt) VALUES (1, 2, PENDING_COMMIT_TIMESTAMP())", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !c.IsDML || !c.Returning || len(c.PendingColumns) != 1 || len(c.HiddenKeyColumns) != 2 {
		t.Errorf("compiled %+v, want DML returning the two key columns for one pending column", c)
	}
	if _, err := compile(t, s, "UPDATE Singers SET Name = CAST(PENDING_COMMIT_TIMESTAMP() AS STRING) WHERE true", nil); err == nil {
		t.Errorf("PENDING_COMMIT_TIMESTAMP() outside an allow_commit_timestamp column compiled, want an error")
	}
}

// DML says what the engine needs to run it optimistically: a key probe when WHERE pins the
// primary key, the tables it reads besides its target, the row count of INSERT ... VALUES, and
// whether running it again writes the same rows.
func TestDMLFootprintFacts(t *testing.T) {
	s := testSchema(t)
	params := map[string]spantype.Type{"id": spantype.TInt64, "a": spantype.TInt64, "n": spantype.TString}
	tests := []struct {
		sql        string
		probe      string // KeyProbe.SQL, "" for none
		reads      []string
		rows       int
		repeatable bool
	}{
		{"UPDATE Singers SET Name = @n WHERE SingerId = @id", "SELECT (+?)", nil, 0, true},
		{"UPDATE Singers s SET Name = @n WHERE (s.SingerId = 7) AND Name IS NULL", "SELECT 7", nil, 0, true},
		{"DELETE FROM Albums WHERE AlbumId = @a AND SingerId = @id", "SELECT (+?), (+?)", nil, 0, true},
		{"DELETE FROM Albums WHERE SingerId = @id", "", nil, 0, true},
		{"UPDATE Singers SET Name = @n WHERE SingerId = @id OR Name = @n", "", nil, 0, true},
		{"UPDATE Singers SET Name = @n WHERE SingerId > @id", "", nil, 0, true},
		{"UPDATE Singers SET Name = @n WHERE SingerId = (SELECT MAX(SingerId) FROM Albums)", "", []string{"ALBUMS"}, 0, true},
		{"INSERT INTO Singers (SingerId, Name) VALUES (1, 'a'), (2, 'b')", "", nil, 2, true},
		{"INSERT INTO Singers (SingerId, Name) SELECT SingerId, Title FROM Albums", "", []string{"ALBUMS"}, 0, true},
		{"INSERT INTO Singers (SingerId, Name) VALUES (1, GENERATE_UUID())", "", nil, 1, false},
	}
	for _, tt := range tests {
		c, err := compile(t, s, tt.sql, params)
		if err != nil {
			t.Errorf("%s: %v", tt.sql, err)
			continue
		}
		probe := ""
		if c.KeyProbe != nil {
			probe = c.KeyProbe.SQL
		}
		if probe != tt.probe || !cmp.Equal(c.ReadTables, tt.reads) || c.InsertRows != tt.rows || c.Repeatable != tt.repeatable {
			t.Errorf("%s:\n got probe %q, reads %v, rows %d, repeatable %v\nwant probe %q, reads %v, rows %d, repeatable %v",
				tt.sql, probe, c.ReadTables, c.InsertRows, c.Repeatable, tt.probe, tt.reads, tt.rows, tt.repeatable)
		}
		if c.KeyProbe != nil && len(c.KeyProbe.Columns) != len(c.Table.KeyColumns()) {
			t.Errorf("%s: probe columns %v", tt.sql, c.KeyProbe.Columns)
		}
	}
}
