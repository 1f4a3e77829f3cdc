package sqlgen

import (
	"testing"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/catalog"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

// Statements whose outcome a read of committed data tells get a decision (sqlgen.Decision): an
// INSERT OR IGNORE of one row of parameters, an UPDATE pinned by key that sets parameters, into a
// table where nothing else can fail (a CHECK constraint the decision's query evaluates). Anything else gets none, and the engine runs it as before.
func TestDecision(t *testing.T) {
	s, _, err := catalog.Apply(catalog.Empty(), []string{
		`CREATE TABLE Versions (Id STRING(8) NOT NULL, Version INT64 NOT NULL, Note STRING(MAX),
			UpdatedAt TIMESTAMP OPTIONS (allow_commit_timestamp = true)) PRIMARY KEY (Id)`,
		`CREATE TABLE Parents (Id STRING(8) NOT NULL, Code STRING(8)) PRIMARY KEY (Id)`,
		`CREATE UNIQUE INDEX ParentsByCode ON Parents (Code)`,
		`CREATE TABLE Children (Id STRING(8) NOT NULL, N INT64 NOT NULL) PRIMARY KEY (Id, N), INTERLEAVE IN PARENT Parents`,
		`CREATE TABLE Checked (Id STRING(8) NOT NULL, N INT64, CONSTRAINT positive CHECK (N > 0)) PRIMARY KEY (Id)`,
		`CREATE TABLE Defaulted (Id STRING(8) NOT NULL, N INT64 DEFAULT (1)) PRIMARY KEY (Id)`,
		`CREATE TABLE Referenced (Id STRING(8) NOT NULL, N INT64) PRIMARY KEY (Id)`,
		`CREATE TABLE Referencing (Id STRING(8) NOT NULL, Ref STRING(8), CONSTRAINT fk FOREIGN KEY (Ref) REFERENCES Referenced (Id)) PRIMARY KEY (Id)`,
	}, TableExprCompiler{})
	if err != nil {
		t.Fatal(err)
	}
	params := map[string]spantype.Type{"id": spantype.TString, "v": spantype.TInt64, "note": spantype.TString, "ts": spantype.TTimestamp, "vs": spantype.TString}
	tests := []struct {
		sql    string
		insert bool // a decision for an INSERT
		update bool // a decision for an UPDATE
		checks int
	}{
		{"INSERT OR IGNORE INTO Versions (Id, Version, UpdatedAt) VALUES (@id, @v, PENDING_COMMIT_TIMESTAMP())", true, false, 2},
		{"INSERT OR IGNORE INTO Versions (Id, Version, Note) VALUES (@id, @v, @note)", true, false, 3},
		{"UPDATE Versions SET Version = @v, UpdatedAt = PENDING_COMMIT_TIMESTAMP() WHERE Id = @id AND Version < @v", false, true, 1},
		{"UPDATE Referencing SET Ref = @id WHERE Id = @id", false, false, 0}, // it has a foreign key
		{"UPDATE Referenced SET N = @v WHERE Id = @id", false, false, 0},     // another table references it
		{"INSERT OR IGNORE INTO Referenced (Id, N) VALUES (@id, @v)", true, false, 2},
		{"INSERT OR IGNORE INTO Checked (Id, N) VALUES (@id, @v)", true, false, 2}, // the query checks the CHECK
		{"UPDATE Checked SET N = @v WHERE Id = @id", false, true, 1},
		// Not decided: the shape.
		{"INSERT INTO Versions (Id, Version) VALUES (@id, @v)", false, false, 0},
		{"INSERT OR UPDATE INTO Versions (Id, Version) VALUES (@id, @v)", false, false, 0},
		{"INSERT OR IGNORE INTO Versions (Id, Version) VALUES (@id, @v), ('b', 2)", false, false, 0},
		{"INSERT OR IGNORE INTO Versions (Id, Version) VALUES (@id, 2)", false, false, 0},
		{"INSERT OR IGNORE INTO Versions (Id, Version) VALUES (@id, @v) THEN RETURN Version", false, false, 0},
		{"INSERT OR IGNORE INTO Versions (Id, Version) VALUES (@id, CAST(@vs AS INT64))", false, false, 0},
		{"INSERT OR IGNORE INTO Versions (Id, Version, UpdatedAt) VALUES (@id, @v, @ts)", false, false, 0}, // a check that it is not in the future
		{"INSERT OR IGNORE INTO Versions (Id, Note) VALUES (@id, @note)", false, false, 0},                 // NOT NULL Version left out
		{"UPDATE Versions SET Version = @v WHERE Version < @v", false, false, 0},                           // not pinned by key
		{"UPDATE Versions SET Version = 3 WHERE Id = @id", false, false, 0},
		{"UPDATE Versions SET Note = (SELECT Code FROM Parents WHERE Id = @id) WHERE Id = @id", false, false, 0},
		// Not decided: the table.
		{"INSERT OR IGNORE INTO Parents (Id, Code) VALUES (@id, @note)", false, false, 0},
		{"INSERT OR IGNORE INTO Children (Id, N) VALUES (@id, @v)", false, false, 0},
		{"INSERT OR IGNORE INTO Defaulted (Id) VALUES (@id)", false, false, 0},
		{"INSERT OR IGNORE INTO Referencing (Id, Ref) VALUES (@id, @id)", false, false, 0},
	}
	for _, tt := range tests {
		c, err := compile(t, s, tt.sql, params)
		if err != nil {
			t.Errorf("%s: %v", tt.sql, err)
			continue
		}
		d := c.Decide
		switch {
		case !tt.insert && !tt.update:
			if d != nil {
				t.Errorf("%s: decided by %q, want no decision", tt.sql, d.Query.SQL)
			}
		case d == nil:
			t.Errorf("%s: no decision", tt.sql)
		case d.Insert != tt.insert || len(d.Checks) != tt.checks:
			t.Errorf("%s: decision insert %v with %d checks, want insert %v with %d", tt.sql, d.Insert, len(d.Checks), tt.insert, tt.checks)
		}
	}
}

// A value passes its check when the statement cannot fail on it: not NULL in a NOT NULL or key
// column, within a STRING(N) in characters (not bytes) or a BYTES(N) in bytes.
func TestValueCheck(t *testing.T) {
	str8 := &catalog.Column{Name: "S", Type: spantype.Type{Code: spantype.String, Length: 8}, NotNull: true}
	bytes2 := &catalog.Column{Name: "B", Type: spantype.Type{Code: spantype.Bytes, Length: 2}}
	nullable := &catalog.Column{Name: "N", Type: spantype.TInt64}
	tests := []struct {
		vc   ValueCheck
		v    any
		want bool
	}{
		{ValueCheck{Column: str8}, "12345678", true},
		{ValueCheck{Column: str8}, "123456789", false},
		{ValueCheck{Column: str8}, "ééééééé", true}, // 14 bytes, 7 characters
		{ValueCheck{Column: str8}, nil, false},
		{ValueCheck{Column: str8}, int64(1), false}, // not a string: in doubt
		{ValueCheck{Column: bytes2}, []byte{1, 2}, true},
		{ValueCheck{Column: bytes2}, []byte{1, 2, 3}, false},
		{ValueCheck{Column: bytes2}, nil, true},
		{ValueCheck{Column: nullable}, nil, true},
		{ValueCheck{Column: nullable, Key: true}, nil, false},
		{ValueCheck{Column: nullable}, int64(5), true},
	}
	for _, tt := range tests {
		if got := tt.vc.Check(tt.v); got != tt.want {
			t.Errorf("%s (key %v) = %#v: %v, want %v", tt.vc.Column.Name, tt.vc.Key, tt.v, got, tt.want)
		}
	}
}
