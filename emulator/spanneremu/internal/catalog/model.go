// Package catalog is the emulator's schema: the tables, columns, indexes and constraints of one
// database, built by applying Spanner DDL (parsed with memefish) and mirrored into SQLite DDL.
//
// The model is read by the SQL translator (name resolution, types, keys) and by the engine
// (mutations, key order, constraint error messages). A Schema is immutable once built: DDL
// produces a new Schema (see Apply), so readers can hold one without locks.
//
// SQLite conventions of the generated DDL, which the engine and translator rely on:
//   - a table is a WITHOUT ROWID table named Table.SQLiteName, keyed by the Spanner primary key
//     (a table with PRIMARY KEY () gets the hidden key column Table.SyntheticKey); columns are
//     named Column.SQLiteName and declared without a type, so values keep their storage form;
//   - NOT NULL is a SQLite NOT NULL; STRING(N)/BYTES(N) is CHECK constraint
//     LengthConstraintPrefix+"T.C"; a CHECK is CheckConstraintPrefix+"T.Name";
//   - interleaving and foreign keys are SQLite foreign keys (ON DELETE CASCADE when declared);
//     referenced columns that are not the primary key get a managed unique index (Index.Managed);
//   - DEFAULT and generated columns are SQLite DEFAULT and GENERATED ALWAYS AS, with the
//     ExprCompiler's translation coerced to the column type;
//   - secondary indexes are SQLite indexes (NULL_FILTERED as partial indexes; see
//     createIndexSQL for UNIQUE indexes over nullable columns); STORING, INTERLEAVE IN, views,
//     sequences and ROW DELETION POLICY exist only in the model;
//   - the INFORMATION_SCHEMA tables are ordinary SQLite tables that every Apply re-creates and
//     fills with rows describing the new schema.
package catalog

import (
	"strings"

	"github.com/cloudspannerecosystem/memefish/ast"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

// Schema is the catalog of one database.
type Schema struct {
	// Tables in creation order (parents before their interleaved children). Includes the
	// read-only INFORMATION_SCHEMA tables (Table.InfoSchema), which come first.
	Tables []*Table
	// Indexes in creation order.
	Indexes []*Index
	// Statements is the DDL that GetDatabaseDdl returns: one canonical statement per object,
	// without trailing semicolons, regenerated from the model after every change and ordered
	// as the official emulator prints them (see render). Applying them to Empty() rebuilds an
	// equal schema.
	Statements []string
	// Views in creation order. They have no SQLite counterpart: the translator expands them.
	Views []*View
	// Sequences in creation order (recorded only; nothing generates values from them yet).
	Sequences []*Sequence

	tables map[string]*Table // by upper-cased name (Spanner names are case-insensitive)
	// tablesAsNamed are the tables by their names as declared: most look-ups name them so, and
	// find them without upper-casing the name (columnsAsNamed likewise).
	tablesAsNamed map[string]*Table
	indexes       map[string]*Index // by upper-cased name
	views         map[string]*View  // by upper-cased name
	// others keeps, in order, the statements the emulator accepts without modelling them
	// (database options, change streams, roles, grants), for Statements.
	others []other
}

// Table looks a table up by name, case-insensitively. INFORMATION_SCHEMA tables are named
// "INFORMATION_SCHEMA.TABLES" and so on.
func (s *Schema) Table(name string) (*Table, bool) {
	if t, ok := s.tablesAsNamed[name]; ok {
		return t, true
	}
	t, ok := s.tables[strings.ToUpper(name)]
	return t, ok
}

// Index looks an index up by name, case-insensitively.
func (s *Schema) Index(name string) (*Index, bool) {
	i, ok := s.indexes[strings.ToUpper(name)]
	return i, ok
}

// View looks a view up by name, case-insensitively.
func (s *Schema) View(name string) (*View, bool) {
	v, ok := s.views[strings.ToUpper(name)]
	return v, ok
}

// TableIndexes returns the secondary indexes of table (including managed foreign-key backing
// indexes), in creation order.
func (s *Schema) TableIndexes(table string) []*Index {
	var out []*Index
	for _, ix := range s.Indexes {
		if strings.EqualFold(ix.Table, table) {
			out = append(out, ix)
		}
	}
	return out
}

// Children returns the tables interleaved in table, in creation order.
func (s *Schema) Children(table string) []*Table {
	var out []*Table
	for _, t := range s.Tables {
		if strings.EqualFold(t.Parent, table) {
			out = append(out, t)
		}
	}
	return out
}

// Table is a Spanner table.
type Table struct {
	Name       string // as declared
	SQLiteName string // the (unquoted) SQLite table name; quote with catalog.Quote
	Columns    []*Column
	PrimaryKey []KeyPart
	// Parent is the interleave parent ("" when top level); OnDeleteCascade is its ON DELETE.
	Parent          string
	OnDeleteCascade bool
	Checks          []*Check
	ForeignKeys     []*ForeignKey
	// RowDeletionPolicy is nil when the table has none.
	RowDeletionPolicy *RowDeletionPolicy
	// InfoSchema marks the read-only INFORMATION_SCHEMA tables.
	InfoSchema bool
	// SyntheticKey is the SQLite name of the hidden key column of a table declared with
	// PRIMARY KEY () (EmptyKeyColumn), "" otherwise. SQLite needs a key for a WITHOUT ROWID
	// table; the column is not in Columns, defaults to 0 and is checked to stay 0, so the
	// table holds at most one row, as in Spanner. Readers and writers never name it.
	SyntheticKey string

	columns        map[string]*Column // by upper-cased name
	columnsAsNamed map[string]*Column
}

// Column looks a column up by name, case-insensitively.
func (t *Table) Column(name string) (*Column, bool) {
	if c, ok := t.columnsAsNamed[name]; ok {
		return c, true
	}
	c, ok := t.columns[strings.ToUpper(name)]
	return c, ok
}

// KeyColumns returns the primary key columns in key order.
func (t *Table) KeyColumns() []*Column {
	out := make([]*Column, len(t.PrimaryKey))
	for i, k := range t.PrimaryKey {
		out[i], _ = t.Column(k.Column)
	}
	return out
}

// Column is a table column.
type Column struct {
	Name       string
	SQLiteName string        // unquoted SQLite column name
	Type       spantype.Type // Length set for STRING(N)/BYTES(N)
	NotNull    bool
	// AllowCommitTimestamp is OPTIONS (allow_commit_timestamp = true).
	AllowCommitTimestamp bool
	// Default is the DEFAULT expression (nil if none); DefaultSQL its SQLite translation;
	// DefaultText the expression as written (INFORMATION_SCHEMA.COLUMNS.COLUMN_DEFAULT).
	Default     ast.Expr
	DefaultSQL  string
	DefaultText string
	// Generated is the AS (expr) expression of a generated column (nil if none); GeneratedSQL its
	// SQLite translation; Stored is true for STORED; GeneratedText the expression as written.
	Generated     ast.Expr
	GeneratedSQL  string
	GeneratedText string
	Stored        bool
	// Hidden is HIDDEN: the column is left out of SELECT * but can be named.
	Hidden bool
}

// KeyPart is one column of a primary or index key.
type KeyPart struct {
	Column string
	Desc   bool
}

// Check is a CHECK constraint. Name is the declared name or a generated one
// (CK_<table>_<hash>, as Spanner names unnamed checks).
type Check struct {
	Name string
	// NameGenerated is set when the DDL did not name the constraint (Name was generated).
	NameGenerated bool
	Expr          ast.Expr
	SQL           string // SQLite translation
	Text          string // the expression as written (CHECK_CONSTRAINTS.CHECK_CLAUSE)
}

// ForeignKey is a FOREIGN KEY constraint.
type ForeignKey struct {
	Name string
	// NameGenerated is set when the DDL did not name the constraint (Name was generated).
	NameGenerated     bool
	Columns           []string
	ReferencedTable   string
	ReferencedColumns []string
	OnDeleteCascade   bool
}

// RowDeletionPolicy is ROW DELETION POLICY (OLDER_THAN(Column, INTERVAL Days DAY)).
type RowDeletionPolicy struct {
	Column string
	Days   int64
}

// Index is a secondary index.
type Index struct {
	Name         string
	SQLiteName   string
	Table        string
	Unique       bool
	NullFiltered bool
	Keys         []KeyPart
	Storing      []string
	// Interleave is the INTERLEAVE IN table ("" if none).
	Interleave string
	// Managed marks an index Spanner created itself to back a foreign key (the referenced
	// columns when they are not the referenced table's primary key). It is unique, absent from
	// Statements, and cannot be dropped by DROP INDEX; it goes away with its last foreign key.
	Managed bool
}

// View is a CREATE VIEW. The translator expands Query where the view is named.
type View struct {
	Name string
	// SQL is the query as written; Query its parse.
	SQL   string
	Query ast.QueryExpr
	// SecurityType is "INVOKER" or "DEFINER".
	SecurityType string
}

// Sequence is a CREATE SEQUENCE, recorded so that its name is taken and GetDatabaseDdl and
// INFORMATION_SCHEMA list it. Nothing draws values from it yet.
type Sequence struct {
	Name    string
	Options []SequenceOption // in declaration order
}

// SequenceOption is one option of a sequence (sequence_kind, skip_range_min, ...), with its
// INFORMATION_SCHEMA.SEQUENCE_OPTIONS type (STRING, INT64 or BOOL) and value text.
type SequenceOption struct {
	Name, Type, Value string
}

// EmptyKeyColumn is the name of the hidden key column of a table with PRIMARY KEY ().
const EmptyKeyColumn = "_spanner_empty_key"

// NumericCollation is the SQLite collation of NUMERIC columns; package sqlgen registers it.
const NumericCollation = "spanner_numeric"

// Quote quotes an identifier for SQLite.
func Quote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }
