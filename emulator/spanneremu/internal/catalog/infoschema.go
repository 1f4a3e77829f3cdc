package catalog

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

// InfoSchemaName is the schema name of the INFORMATION_SCHEMA tables: Table.Name is
// InfoSchemaName + "." + the table's name.
const InfoSchemaName = "INFORMATION_SCHEMA"

// infoTable defines one INFORMATION_SCHEMA table: its columns and its rows for a schema, in
// storage form and column order.
type infoTable struct {
	name string
	rows func(s *Schema) [][]any
}

// infoTables lists the INFORMATION_SCHEMA tables the emulator serves (SPANNER_SYS, and the
// views about roles, privileges, change streams, models and routines, are omitted).
var infoTables = []infoTable{
	{"SCHEMATA", schemataRows},
	{"DATABASE_OPTIONS", databaseOptionsRows},
	{"TABLES", tablesRows},
	{"COLUMNS", columnsRows},
	{"COLUMN_COLUMN_USAGE", columnColumnUsageRows},
	{"COLUMN_OPTIONS", columnOptionsRows},
	{"INDEXES", indexesRows},
	{"INDEX_COLUMNS", indexColumnsRows},
	{"TABLE_CONSTRAINTS", tableConstraintsRows},
	{"CHECK_CONSTRAINTS", checkConstraintsRows},
	{"REFERENTIAL_CONSTRAINTS", referentialConstraintsRows},
	{"KEY_COLUMN_USAGE", keyColumnUsageRows},
	{"CONSTRAINT_COLUMN_USAGE", constraintColumnUsageRows},
	{"CONSTRAINT_TABLE_USAGE", constraintTableUsageRows},
	{"VIEWS", viewsRows},
	{"SEQUENCES", sequencesRows},
	{"SEQUENCE_OPTIONS", sequenceOptionsRows},
}

// infoColumns holds the columns of the INFORMATION_SCHEMA tables as Spanner defines them:
// table, column, IS_NULLABLE and SPANNER_TYPE, in column order.
const infoColumns = `
SCHEMATA CATALOG_NAME NO STRING(MAX)
SCHEMATA SCHEMA_NAME NO STRING(MAX)
SCHEMATA EFFECTIVE_TIMESTAMP YES INT64
SCHEMATA SCHEMA_OWNER YES STRING(MAX)
DATABASE_OPTIONS CATALOG_NAME NO STRING(MAX)
DATABASE_OPTIONS SCHEMA_NAME NO STRING(MAX)
DATABASE_OPTIONS OPTION_NAME NO STRING(MAX)
DATABASE_OPTIONS OPTION_TYPE NO STRING(MAX)
DATABASE_OPTIONS OPTION_VALUE NO STRING(MAX)
TABLES TABLE_CATALOG NO STRING(MAX)
TABLES TABLE_SCHEMA NO STRING(MAX)
TABLES TABLE_NAME NO STRING(MAX)
TABLES PARENT_TABLE_NAME YES STRING(MAX)
TABLES ON_DELETE_ACTION YES STRING(MAX)
TABLES TABLE_TYPE NO STRING(32)
TABLES SPANNER_STATE YES STRING(MAX)
TABLES INTERLEAVE_TYPE YES STRING(MAX)
TABLES ROW_DELETION_POLICY_EXPRESSION YES STRING(MAX)
COLUMNS TABLE_CATALOG NO STRING(MAX)
COLUMNS TABLE_SCHEMA NO STRING(MAX)
COLUMNS TABLE_NAME NO STRING(MAX)
COLUMNS COLUMN_NAME NO STRING(MAX)
COLUMNS ORDINAL_POSITION NO INT64
COLUMNS COLUMN_DEFAULT YES STRING(MAX)
COLUMNS DATA_TYPE YES STRING(MAX)
COLUMNS IS_NULLABLE YES STRING(MAX)
COLUMNS SPANNER_TYPE YES STRING(MAX)
COLUMNS IS_GENERATED NO STRING(MAX)
COLUMNS IS_HIDDEN NO BOOL
COLUMNS GENERATION_EXPRESSION YES STRING(MAX)
COLUMNS ON_UPDATE_EXPRESSION YES STRING(MAX)
COLUMNS IS_STORED YES STRING(MAX)
COLUMNS SPANNER_STATE YES STRING(MAX)
COLUMNS IS_IDENTITY YES STRING(MAX)
COLUMNS IDENTITY_GENERATION YES STRING(MAX)
COLUMNS IDENTITY_KIND YES STRING(MAX)
COLUMNS IDENTITY_START_WITH_COUNTER YES STRING(MAX)
COLUMNS IDENTITY_SKIP_RANGE_MIN YES STRING(MAX)
COLUMNS IDENTITY_SKIP_RANGE_MAX YES STRING(MAX)
COLUMN_COLUMN_USAGE TABLE_CATALOG NO STRING(MAX)
COLUMN_COLUMN_USAGE TABLE_SCHEMA NO STRING(MAX)
COLUMN_COLUMN_USAGE TABLE_NAME NO STRING(MAX)
COLUMN_COLUMN_USAGE COLUMN_NAME NO STRING(MAX)
COLUMN_COLUMN_USAGE DEPENDENT_COLUMN NO STRING(MAX)
COLUMN_OPTIONS TABLE_CATALOG NO STRING(MAX)
COLUMN_OPTIONS TABLE_SCHEMA NO STRING(MAX)
COLUMN_OPTIONS TABLE_NAME NO STRING(MAX)
COLUMN_OPTIONS COLUMN_NAME NO STRING(MAX)
COLUMN_OPTIONS OPTION_NAME NO STRING(MAX)
COLUMN_OPTIONS OPTION_TYPE NO STRING(MAX)
COLUMN_OPTIONS OPTION_VALUE NO STRING(MAX)
INDEXES TABLE_CATALOG NO STRING(MAX)
INDEXES TABLE_SCHEMA NO STRING(MAX)
INDEXES TABLE_NAME NO STRING(MAX)
INDEXES INDEX_NAME NO STRING(MAX)
INDEXES INDEX_TYPE NO STRING(MAX)
INDEXES PARENT_TABLE_NAME NO STRING(MAX)
INDEXES IS_UNIQUE NO BOOL
INDEXES IS_NULL_FILTERED NO BOOL
INDEXES INDEX_STATE NO STRING(100)
INDEXES FILTER YES STRING(MAX)
INDEXES SPANNER_IS_MANAGED NO BOOL
INDEX_COLUMNS TABLE_CATALOG NO STRING(MAX)
INDEX_COLUMNS TABLE_SCHEMA NO STRING(MAX)
INDEX_COLUMNS TABLE_NAME NO STRING(MAX)
INDEX_COLUMNS INDEX_NAME NO STRING(MAX)
INDEX_COLUMNS INDEX_TYPE NO STRING(MAX)
INDEX_COLUMNS COLUMN_NAME NO STRING(MAX)
INDEX_COLUMNS ORDINAL_POSITION YES INT64
INDEX_COLUMNS COLUMN_ORDERING YES STRING(MAX)
INDEX_COLUMNS IS_NULLABLE YES STRING(MAX)
INDEX_COLUMNS SPANNER_TYPE YES STRING(MAX)
TABLE_CONSTRAINTS CONSTRAINT_CATALOG NO STRING(MAX)
TABLE_CONSTRAINTS CONSTRAINT_SCHEMA NO STRING(MAX)
TABLE_CONSTRAINTS CONSTRAINT_NAME NO STRING(MAX)
TABLE_CONSTRAINTS TABLE_CATALOG NO STRING(MAX)
TABLE_CONSTRAINTS TABLE_SCHEMA NO STRING(MAX)
TABLE_CONSTRAINTS TABLE_NAME NO STRING(MAX)
TABLE_CONSTRAINTS CONSTRAINT_TYPE NO STRING(MAX)
TABLE_CONSTRAINTS IS_DEFERRABLE NO STRING(MAX)
TABLE_CONSTRAINTS INITIALLY_DEFERRED NO STRING(MAX)
TABLE_CONSTRAINTS ENFORCED NO STRING(MAX)
CHECK_CONSTRAINTS CONSTRAINT_CATALOG NO STRING(MAX)
CHECK_CONSTRAINTS CONSTRAINT_SCHEMA NO STRING(MAX)
CHECK_CONSTRAINTS CONSTRAINT_NAME NO STRING(MAX)
CHECK_CONSTRAINTS CHECK_CLAUSE NO STRING(MAX)
CHECK_CONSTRAINTS SPANNER_STATE NO STRING(MAX)
REFERENTIAL_CONSTRAINTS CONSTRAINT_CATALOG NO STRING(MAX)
REFERENTIAL_CONSTRAINTS CONSTRAINT_SCHEMA NO STRING(MAX)
REFERENTIAL_CONSTRAINTS CONSTRAINT_NAME NO STRING(MAX)
REFERENTIAL_CONSTRAINTS UNIQUE_CONSTRAINT_CATALOG YES STRING(MAX)
REFERENTIAL_CONSTRAINTS UNIQUE_CONSTRAINT_SCHEMA YES STRING(MAX)
REFERENTIAL_CONSTRAINTS UNIQUE_CONSTRAINT_NAME YES STRING(MAX)
REFERENTIAL_CONSTRAINTS MATCH_OPTION NO STRING(MAX)
REFERENTIAL_CONSTRAINTS UPDATE_RULE NO STRING(MAX)
REFERENTIAL_CONSTRAINTS DELETE_RULE NO STRING(MAX)
REFERENTIAL_CONSTRAINTS SPANNER_STATE NO STRING(MAX)
KEY_COLUMN_USAGE CONSTRAINT_CATALOG NO STRING(MAX)
KEY_COLUMN_USAGE CONSTRAINT_SCHEMA NO STRING(MAX)
KEY_COLUMN_USAGE CONSTRAINT_NAME NO STRING(MAX)
KEY_COLUMN_USAGE TABLE_CATALOG NO STRING(MAX)
KEY_COLUMN_USAGE TABLE_SCHEMA NO STRING(MAX)
KEY_COLUMN_USAGE TABLE_NAME NO STRING(MAX)
KEY_COLUMN_USAGE COLUMN_NAME NO STRING(MAX)
KEY_COLUMN_USAGE ORDINAL_POSITION NO INT64
KEY_COLUMN_USAGE POSITION_IN_UNIQUE_CONSTRAINT YES INT64
CONSTRAINT_COLUMN_USAGE TABLE_CATALOG NO STRING(MAX)
CONSTRAINT_COLUMN_USAGE TABLE_SCHEMA NO STRING(MAX)
CONSTRAINT_COLUMN_USAGE TABLE_NAME NO STRING(MAX)
CONSTRAINT_COLUMN_USAGE COLUMN_NAME NO STRING(MAX)
CONSTRAINT_COLUMN_USAGE CONSTRAINT_CATALOG NO STRING(MAX)
CONSTRAINT_COLUMN_USAGE CONSTRAINT_SCHEMA NO STRING(MAX)
CONSTRAINT_COLUMN_USAGE CONSTRAINT_NAME NO STRING(MAX)
CONSTRAINT_TABLE_USAGE TABLE_CATALOG NO STRING(MAX)
CONSTRAINT_TABLE_USAGE TABLE_SCHEMA NO STRING(MAX)
CONSTRAINT_TABLE_USAGE TABLE_NAME NO STRING(MAX)
CONSTRAINT_TABLE_USAGE CONSTRAINT_CATALOG NO STRING(MAX)
CONSTRAINT_TABLE_USAGE CONSTRAINT_SCHEMA NO STRING(MAX)
CONSTRAINT_TABLE_USAGE CONSTRAINT_NAME NO STRING(MAX)
VIEWS TABLE_CATALOG NO STRING(MAX)
VIEWS TABLE_SCHEMA NO STRING(MAX)
VIEWS TABLE_NAME NO STRING(MAX)
VIEWS VIEW_DEFINITION YES STRING(MAX)
VIEWS SECURITY_TYPE NO STRING(MAX)
SEQUENCES CATALOG NO STRING(MAX)
SEQUENCES SCHEMA NO STRING(MAX)
SEQUENCES NAME NO STRING(MAX)
SEQUENCES DATA_TYPE NO STRING(MAX)
SEQUENCE_OPTIONS CATALOG NO STRING(MAX)
SEQUENCE_OPTIONS SCHEMA NO STRING(MAX)
SEQUENCE_OPTIONS NAME NO STRING(MAX)
SEQUENCE_OPTIONS OPTION_NAME NO STRING(MAX)
SEQUENCE_OPTIONS OPTION_TYPE NO STRING(MAX)
SEQUENCE_OPTIONS OPTION_VALUE NO STRING(MAX)
`

// infoColumnsOf returns the columns of INFORMATION_SCHEMA table name, parsed from infoColumns.
func infoColumnsOf(name string) []*Column {
	var out []*Column
	for _, line := range strings.Split(strings.TrimSpace(infoColumns), "\n") {
		f := strings.Fields(line)
		if f[0] != name {
			continue
		}
		typ := spantype.TString
		switch {
		case f[3] == "INT64":
			typ = spantype.TInt64
		case f[3] == "BOOL":
			typ = spantype.TBool
		case f[3] == "STRING(32)":
			typ.Length = 32
		case f[3] == "STRING(100)":
			typ.Length = 100
		}
		out = append(out, &Column{Name: f[1], SQLiteName: f[1], Type: typ, NotNull: f[2] == "NO"})
	}
	return out
}

// infoSchemaTables returns the model of the INFORMATION_SCHEMA tables. They have no primary
// key: SQLite stores them as ordinary rowid tables.
func infoSchemaTables() []*Table {
	var out []*Table
	for _, it := range infoTables {
		t := &Table{
			Name:       InfoSchemaName + "." + it.name,
			SQLiteName: strings.ToLower(InfoSchemaName + "." + it.name),
			Columns:    infoColumnsOf(it.name),
			InfoSchema: true,
		}
		t.reindex()
		out = append(out, t)
	}
	return out
}

// infoSchemaSQL returns the statements that re-create and fill the INFORMATION_SCHEMA tables
// for s.
func infoSchemaSQL(s *Schema) []string {
	var out []string
	for _, it := range infoTables {
		q := Quote(strings.ToLower(InfoSchemaName + "." + it.name))
		var names []string
		for _, c := range infoColumnsOf(it.name) {
			names = append(names, c.Name)
		}
		// Re-created rather than emptied, so a database kept by an older emulator version
		// gets the current columns.
		out = append(out, "DROP TABLE IF EXISTS "+q, fmt.Sprintf("CREATE TABLE %s (%s)", q, quoteList(names)))
		rows := it.rows(s)
		if len(rows) == 0 {
			continue
		}
		values := make([]string, len(rows))
		for i, r := range rows {
			lits := make([]string, len(r))
			for j, v := range r {
				lits[j] = sqlLiteral(v)
			}
			values[i] = "(" + strings.Join(lits, ", ") + ")"
		}
		out = append(out, fmt.Sprintf("INSERT INTO %s (%s) VALUES\n%s", q, quoteList(names), strings.Join(values, ",\n")))
	}
	return out
}

// sqlLiteral renders a storage value (nil, string, int64 or bool) as a SQLite literal.
func sqlLiteral(v any) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case string:
		return sqlString(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case int:
		return strconv.Itoa(v)
	case bool:
		if v {
			return "1"
		}
		return "0"
	}
	panic(fmt.Sprintf("catalog: unexpected INFORMATION_SCHEMA value %T", v))
}

// userTables returns the tables that are not INFORMATION_SCHEMA tables.
func (s *Schema) userTables() []*Table {
	var out []*Table
	for _, t := range s.Tables {
		if !t.InfoSchema {
			out = append(out, t)
		}
	}
	return out
}

// schemaAndName splits a table name into its INFORMATION_SCHEMA row's TABLE_SCHEMA and
// TABLE_NAME.
func schemaAndName(t *Table) (string, string) {
	if t.InfoSchema {
		return InfoSchemaName, strings.TrimPrefix(t.Name, InfoSchemaName+".")
	}
	return "", t.Name
}

func yesNo(b bool) string {
	if b {
		return "YES"
	}
	return "NO"
}

// orNull returns nil for "", so empty optional texts read as NULL.
func orNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}

const committed = "COMMITTED"

func schemataRows(*Schema) [][]any {
	return [][]any{{"", "", nil, nil}, {"", InfoSchemaName, nil, nil}}
}

func databaseOptionsRows(*Schema) [][]any {
	return [][]any{{"", "", "database_dialect", "STRING", "GOOGLE_STANDARD_SQL"}}
}

func tablesRows(s *Schema) [][]any {
	var rows [][]any
	for _, t := range s.Tables {
		schema, name := schemaAndName(t)
		if t.InfoSchema {
			rows = append(rows, []any{"", schema, name, nil, nil, "VIEW", nil, nil, nil})
			continue
		}
		var parent, onDelete, interleave, rdp any
		if t.Parent != "" {
			parent, onDelete, interleave = t.Parent, "NO ACTION", "IN PARENT"
			if t.OnDeleteCascade {
				onDelete = "CASCADE"
			}
		}
		if t.RowDeletionPolicy != nil {
			rdp = t.RowDeletionPolicy.expression()
		}
		rows = append(rows, []any{"", "", name, parent, onDelete, "BASE TABLE", committed, interleave, rdp})
	}
	for _, v := range s.Views {
		rows = append(rows, []any{"", "", v.Name, nil, nil, "VIEW", nil, nil, nil})
	}
	return rows
}

func columnsRows(s *Schema) [][]any {
	var rows [][]any
	for _, t := range s.Tables {
		schema, name := schemaAndName(t)
		for i, c := range t.Columns {
			generated, stored := "NEVER", any(nil)
			if c.Generated != nil {
				generated, stored = "ALWAYS", yesNo(c.Stored)
			}
			state := any(committed)
			if t.InfoSchema {
				state = nil
			}
			rows = append(rows, []any{"", schema, name, c.Name, i + 1, orNull(c.DefaultText), nil,
				yesNo(!c.NotNull), c.Type.ColumnString(), generated, c.Hidden, orNull(c.GeneratedText), nil, stored, state,
				"NO", nil, nil, nil, nil, nil})
		}
	}
	return rows
}

func columnColumnUsageRows(s *Schema) [][]any {
	var rows [][]any
	for _, t := range s.userTables() {
		for _, g := range t.Columns {
			if g.Generated == nil {
				continue
			}
			for _, c := range t.Columns {
				if c != g && refersTo(g.Generated, c.Name) {
					rows = append(rows, []any{"", "", t.Name, c.Name, g.Name})
				}
			}
		}
	}
	return rows
}

func columnOptionsRows(s *Schema) [][]any {
	var rows [][]any
	for _, t := range s.userTables() {
		for _, c := range t.Columns {
			if c.AllowCommitTimestamp {
				rows = append(rows, []any{"", "", t.Name, c.Name, "allow_commit_timestamp", "BOOL", "TRUE"})
			}
		}
	}
	return rows
}

// indexesRows lists each table's PRIMARY_KEY pseudo-index and the secondary indexes.
// PARENT_TABLE_NAME is the INTERLEAVE IN table of a secondary index, "" otherwise.
func indexesRows(s *Schema) [][]any {
	var rows [][]any
	for _, t := range s.userTables() {
		rows = append(rows, []any{"", "", t.Name, "PRIMARY_KEY", "PRIMARY_KEY", "", true, false, nil, nil, false})
	}
	for _, ix := range s.Indexes {
		rows = append(rows, []any{"", "", ix.Table, ix.Name, "INDEX", ix.Interleave, ix.Unique, ix.NullFiltered, "READ_WRITE", nil, ix.Managed})
	}
	return rows
}

func indexColumnsRows(s *Schema) [][]any {
	var rows [][]any
	add := func(t *Table, index, typ string, nullFiltered bool, keys []KeyPart, storing []string) {
		for i, k := range keys {
			c, _ := t.Column(k.Column)
			order := "ASC"
			if k.Desc {
				order = "DESC"
			}
			// A NULL_FILTERED index holds no NULL in its key columns.
			nullable := !c.NotNull && !nullFiltered
			rows = append(rows, []any{"", "", t.Name, index, typ, c.Name, i + 1, order, yesNo(nullable), c.Type.ColumnString()})
		}
		for _, name := range storing {
			c, _ := t.Column(name)
			rows = append(rows, []any{"", "", t.Name, index, typ, c.Name, nil, nil, yesNo(!c.NotNull), c.Type.ColumnString()})
		}
	}
	for _, t := range s.userTables() {
		add(t, "PRIMARY_KEY", "PRIMARY_KEY", false, t.PrimaryKey, nil)
	}
	for _, ix := range s.Indexes {
		t, _ := s.Table(ix.Table)
		add(t, ix.Name, "INDEX", ix.NullFiltered, ix.Keys, ix.Storing)
	}
	return rows
}

// constraint is one row of TABLE_CONSTRAINTS with the columns it constrains. For a foreign
// key, refTable and columns are the referenced table and columns, as CONSTRAINT_TABLE_USAGE
// and CONSTRAINT_COLUMN_USAGE report them.
type constraint struct {
	name, table, typ string
	refTable         string
	columns          []string
}

// constraints lists the table constraints Spanner reports: the primary key (PK_<table>), one
// CHECK per NOT NULL column (CK_IS_NOT_NULL_<table>_<column>), CHECK constraints, foreign keys
// and the unique constraints of their managed backing indexes.
func (s *Schema) constraints() []constraint {
	var out []constraint
	for _, t := range s.userTables() {
		var key []string
		for _, k := range t.PrimaryKey {
			key = append(key, k.Column)
		}
		out = append(out, constraint{"PK_" + t.Name, t.Name, "PRIMARY KEY", t.Name, key})
		for _, c := range t.Columns {
			if c.NotNull {
				out = append(out, constraint{notNullName(t, c), t.Name, "CHECK", t.Name, []string{c.Name}})
			}
		}
		for _, c := range t.Checks {
			var used []string
			for _, col := range t.Columns {
				if refersTo(c.Expr, col.Name) {
					used = append(used, col.Name)
				}
			}
			out = append(out, constraint{c.Name, t.Name, "CHECK", t.Name, used})
		}
		for _, fk := range t.ForeignKeys {
			out = append(out, constraint{fk.Name, t.Name, "FOREIGN KEY", fk.ReferencedTable, fk.ReferencedColumns})
		}
	}
	for _, ix := range s.Indexes {
		if ix.Managed {
			out = append(out, constraint{ix.Name, ix.Table, "UNIQUE", ix.Table, ix.keyColumns()})
		}
	}
	return out
}

func notNullName(t *Table, c *Column) string { return "CK_IS_NOT_NULL_" + t.Name + "_" + c.Name }

func tableConstraintsRows(s *Schema) [][]any {
	var rows [][]any
	for _, c := range s.constraints() {
		rows = append(rows, []any{"", "", c.name, "", "", c.table, c.typ, "NO", "NO", "YES"})
	}
	return rows
}

func checkConstraintsRows(s *Schema) [][]any {
	var rows [][]any
	for _, t := range s.userTables() {
		for _, c := range t.Columns {
			if c.NotNull {
				rows = append(rows, []any{"", "", notNullName(t, c), c.Name + " IS NOT NULL", committed})
			}
		}
		for _, c := range t.Checks {
			rows = append(rows, []any{"", "", c.Name, c.Text, committed})
		}
	}
	return rows
}

// uniqueConstraint returns the name of the unique constraint a foreign key references: the
// referenced table's primary key or the managed index backing it.
func (s *Schema) uniqueConstraint(fk *ForeignKey) string {
	for _, ix := range s.Indexes {
		if ix.Managed && strings.EqualFold(ix.Table, fk.ReferencedTable) && sameNames(ix.keyColumns(), fk.ReferencedColumns) {
			return ix.Name
		}
	}
	return "PK_" + fk.ReferencedTable
}

func referentialConstraintsRows(s *Schema) [][]any {
	var rows [][]any
	for _, t := range s.userTables() {
		for _, fk := range t.ForeignKeys {
			rule := "NO ACTION"
			if fk.OnDeleteCascade {
				rule = "CASCADE"
			}
			rows = append(rows, []any{"", "", fk.Name, "", "", s.uniqueConstraint(fk), "SIMPLE", "NO ACTION", rule, committed})
		}
	}
	return rows
}

func keyColumnUsageRows(s *Schema) [][]any {
	var rows [][]any
	for _, c := range s.constraints() {
		switch c.typ {
		case "PRIMARY KEY", "UNIQUE":
			for i, col := range c.columns {
				rows = append(rows, []any{"", "", c.name, "", "", c.table, col, i + 1, nil})
			}
		}
	}
	for _, t := range s.userTables() {
		for _, fk := range t.ForeignKeys {
			for i, col := range fk.Columns {
				rows = append(rows, []any{"", "", fk.Name, "", "", t.Name, col, i + 1, i + 1})
			}
		}
	}
	return rows
}

func constraintColumnUsageRows(s *Schema) [][]any {
	var rows [][]any
	for _, c := range s.constraints() {
		for _, col := range c.columns {
			rows = append(rows, []any{"", "", c.refTable, col, "", "", c.name})
		}
	}
	return rows
}

func constraintTableUsageRows(s *Schema) [][]any {
	var rows [][]any
	for _, c := range s.constraints() {
		rows = append(rows, []any{"", "", c.refTable, "", "", c.name})
	}
	return rows
}

func viewsRows(s *Schema) [][]any {
	var rows [][]any
	for _, v := range s.Views {
		rows = append(rows, []any{"", "", v.Name, v.SQL, v.SecurityType})
	}
	return rows
}

func sequencesRows(s *Schema) [][]any {
	var rows [][]any
	for _, seq := range s.Sequences {
		rows = append(rows, []any{"", "", seq.Name, "INT64"})
	}
	return rows
}

func sequenceOptionsRows(s *Schema) [][]any {
	var rows [][]any
	for _, seq := range s.Sequences {
		for _, o := range seq.Options {
			rows = append(rows, []any{"", "", seq.Name, o.Name, o.Type, o.Value})
		}
	}
	return rows
}
