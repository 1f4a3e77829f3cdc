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

// infoTable defines one INFORMATION_SCHEMA table: its columns (Spanner's names and types)
// and its rows for a schema, in storage form.
type infoTable struct {
	name string
	cols []infoColumn
	rows func(s *Schema) [][]any
}

type infoColumn struct {
	name string
	typ  spantype.Type
}

func cols(typ spantype.Type, names ...string) []infoColumn {
	out := make([]infoColumn, len(names))
	for i, n := range names {
		out[i] = infoColumn{n, typ}
	}
	return out
}

func concat(parts ...[]infoColumn) []infoColumn {
	var out []infoColumn
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

var (
	str = spantype.TString
	i64 = spantype.TInt64
	bl  = spantype.TBool
)

// infoTables lists the INFORMATION_SCHEMA tables the emulator serves (SPANNER_SYS is omitted).
var infoTables = []infoTable{
	{"SCHEMATA", concat(cols(str, "CATALOG_NAME", "SCHEMA_NAME"), cols(i64, "EFFECTIVE_TIMESTAMP")), schemataRows},
	{"TABLES", cols(str, "TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME", "TABLE_TYPE", "PARENT_TABLE_NAME",
		"ON_DELETE_ACTION", "SPANNER_STATE", "INTERLEAVE_TYPE", "ROW_DELETION_POLICY_EXPRESSION"), tablesRows},
	{"COLUMNS", concat(cols(str, "TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME", "COLUMN_NAME"), cols(i64, "ORDINAL_POSITION"),
		cols(str, "COLUMN_DEFAULT", "DATA_TYPE", "IS_NULLABLE", "SPANNER_TYPE", "IS_GENERATED", "GENERATION_EXPRESSION",
			"IS_STORED", "SPANNER_STATE")), columnsRows},
	{"INDEXES", concat(cols(str, "TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME", "INDEX_NAME", "INDEX_TYPE", "PARENT_TABLE_NAME"),
		cols(bl, "IS_UNIQUE", "IS_NULL_FILTERED"), cols(str, "INDEX_STATE"), cols(bl, "SPANNER_IS_MANAGED")), indexesRows},
	{"INDEX_COLUMNS", concat(cols(str, "TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME", "INDEX_NAME", "INDEX_TYPE", "COLUMN_NAME"),
		cols(i64, "ORDINAL_POSITION"), cols(str, "COLUMN_ORDERING", "IS_NULLABLE", "SPANNER_TYPE")), indexColumnsRows},
	{"COLUMN_OPTIONS", cols(str, "TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME", "COLUMN_NAME", "OPTION_NAME", "OPTION_TYPE",
		"OPTION_VALUE"), columnOptionsRows},
	{"TABLE_CONSTRAINTS", cols(str, "CONSTRAINT_CATALOG", "CONSTRAINT_SCHEMA", "CONSTRAINT_NAME", "TABLE_CATALOG", "TABLE_SCHEMA",
		"TABLE_NAME", "CONSTRAINT_TYPE", "IS_DEFERRABLE", "INITIALLY_DEFERRED", "ENFORCED"), tableConstraintsRows},
	{"CHECK_CONSTRAINTS", cols(str, "CONSTRAINT_CATALOG", "CONSTRAINT_SCHEMA", "CONSTRAINT_NAME", "CHECK_CLAUSE", "SPANNER_STATE"),
		checkConstraintsRows},
	{"REFERENTIAL_CONSTRAINTS", cols(str, "CONSTRAINT_CATALOG", "CONSTRAINT_SCHEMA", "CONSTRAINT_NAME", "UNIQUE_CONSTRAINT_CATALOG",
		"UNIQUE_CONSTRAINT_SCHEMA", "UNIQUE_CONSTRAINT_NAME", "MATCH_OPTION", "UPDATE_RULE", "DELETE_RULE", "SPANNER_STATE"),
		referentialConstraintsRows},
	{"KEY_COLUMN_USAGE", concat(cols(str, "CONSTRAINT_CATALOG", "CONSTRAINT_SCHEMA", "CONSTRAINT_NAME", "TABLE_CATALOG",
		"TABLE_SCHEMA", "TABLE_NAME", "COLUMN_NAME"), cols(i64, "ORDINAL_POSITION", "POSITION_IN_UNIQUE_CONSTRAINT")),
		keyColumnUsageRows},
	{"CONSTRAINT_COLUMN_USAGE", cols(str, "TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME", "COLUMN_NAME", "CONSTRAINT_CATALOG",
		"CONSTRAINT_SCHEMA", "CONSTRAINT_NAME"), constraintColumnUsageRows},
	{"VIEWS", cols(str, "TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME", "VIEW_DEFINITION", "SECURITY_TYPE"), viewsRows},
}

// infoSchemaTables returns the model of the INFORMATION_SCHEMA tables. They have no primary
// key: SQLite stores them as ordinary rowid tables.
func infoSchemaTables() []*Table {
	var out []*Table
	for _, it := range infoTables {
		t := &Table{
			Name:       InfoSchemaName + "." + it.name,
			SQLiteName: strings.ToLower(InfoSchemaName + "." + it.name),
			InfoSchema: true,
		}
		for _, c := range it.cols {
			t.Columns = append(t.Columns, &Column{Name: c.name, SQLiteName: c.name, Type: c.typ})
		}
		t.reindex()
		out = append(out, t)
	}
	return out
}

// infoSchemaSQL returns the statements that (create if needed and) refill the
// INFORMATION_SCHEMA tables for s.
func infoSchemaSQL(s *Schema) []string {
	var out []string
	for _, it := range infoTables {
		q := Quote(strings.ToLower(InfoSchemaName + "." + it.name))
		names := make([]string, len(it.cols))
		for i, c := range it.cols {
			names[i] = c.name
		}
		out = append(out, fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (%s)", q, quoteList(names)), "DELETE FROM "+q)
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
	return [][]any{{"", "", nil}, {"", InfoSchemaName, nil}}
}

func tablesRows(s *Schema) [][]any {
	var rows [][]any
	for _, t := range s.Tables {
		schema, name := schemaAndName(t)
		if t.InfoSchema {
			rows = append(rows, []any{"", schema, name, "VIEW", nil, nil, nil, nil, nil})
			continue
		}
		var onDelete, interleave any
		if t.Parent != "" {
			onDelete, interleave = "NO ACTION", "IN PARENT"
			if t.OnDeleteCascade {
				onDelete = "CASCADE"
			}
		}
		var rdp any
		if t.RowDeletionPolicy != nil {
			rdp = t.RowDeletionPolicy.expression()
		}
		rows = append(rows, []any{"", "", name, "BASE TABLE", t.Parent, onDelete, committed, interleave, rdp})
	}
	for _, v := range s.Views {
		rows = append(rows, []any{"", "", v.Name, "VIEW", nil, nil, committed, nil, nil})
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
				yesNo(!c.NotNull), c.Type.ColumnString(), generated, orNull(c.GeneratedText), stored, state})
		}
	}
	return rows
}

func indexesRows(s *Schema) [][]any {
	var rows [][]any
	for _, t := range s.userTables() {
		rows = append(rows, []any{"", "", t.Name, "PRIMARY_KEY", "PRIMARY_KEY", t.Parent, true, false, nil, false})
	}
	for _, ix := range s.Indexes {
		rows = append(rows, []any{"", "", ix.Table, ix.Name, "INDEX", ix.Interleave, ix.Unique, ix.NullFiltered, "READ_WRITE", ix.Managed})
	}
	return rows
}

func indexColumnsRows(s *Schema) [][]any {
	var rows [][]any
	add := func(t *Table, index, typ string, keys []KeyPart, storing []string) {
		for i, k := range keys {
			c, _ := t.Column(k.Column)
			order := "ASC"
			if k.Desc {
				order = "DESC"
			}
			rows = append(rows, []any{"", "", t.Name, index, typ, c.Name, i + 1, order, yesNo(!c.NotNull), c.Type.ColumnString()})
		}
		for _, name := range storing {
			c, _ := t.Column(name)
			rows = append(rows, []any{"", "", t.Name, index, typ, c.Name, nil, nil, yesNo(!c.NotNull), c.Type.ColumnString()})
		}
	}
	for _, t := range s.userTables() {
		add(t, "PRIMARY_KEY", "PRIMARY_KEY", t.PrimaryKey, nil)
	}
	for _, ix := range s.Indexes {
		t, _ := s.Table(ix.Table)
		add(t, ix.Name, "INDEX", ix.Keys, ix.Storing)
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

// constraint is one row of TABLE_CONSTRAINTS with the columns it constrains.
type constraint struct {
	name, table, typ string
	columns          []string
}

// constraints lists the table constraints Spanner reports: the primary key (PK_<table>), one
// CHECK per NOT NULL column (CK_IS_NOT_NULL_<table>_<column>), CHECK constraints, foreign keys
// and the unique constraints of managed backing indexes.
func (s *Schema) constraints() []constraint {
	var out []constraint
	for _, t := range s.userTables() {
		var key []string
		for _, k := range t.PrimaryKey {
			key = append(key, k.Column)
		}
		out = append(out, constraint{"PK_" + t.Name, t.Name, "PRIMARY KEY", key})
		for _, c := range t.Columns {
			if c.NotNull {
				out = append(out, constraint{notNullName(t, c), t.Name, "CHECK", []string{c.Name}})
			}
		}
		for _, c := range t.Checks {
			var used []string
			for _, col := range t.Columns {
				if refersTo(c.Expr, col.Name) {
					used = append(used, col.Name)
				}
			}
			out = append(out, constraint{c.Name, t.Name, "CHECK", used})
		}
		for _, fk := range t.ForeignKeys {
			out = append(out, constraint{fk.Name, t.Name, "FOREIGN KEY", fk.Columns})
		}
	}
	for _, ix := range s.Indexes {
		if ix.Managed {
			out = append(out, constraint{ix.Name, ix.Table, "UNIQUE", ix.keyColumns()})
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
			ref, _ := s.Table(fk.ReferencedTable)
			for i, col := range fk.Columns {
				rows = append(rows, []any{"", "", fk.Name, "", "", t.Name, col, i + 1, positionInUnique(ref, s.uniqueConstraint(fk), fk.ReferencedColumns[i], i)})
			}
		}
	}
	return rows
}

// positionInUnique returns the 1-based position of a referenced column in the referenced
// unique constraint.
func positionInUnique(ref *Table, unique, col string, i int) int {
	if unique == "PK_"+ref.Name {
		for j, k := range ref.PrimaryKey {
			if strings.EqualFold(k.Column, col) {
				return j + 1
			}
		}
	}
	return i + 1
}

func constraintColumnUsageRows(s *Schema) [][]any {
	var rows [][]any
	for _, c := range s.constraints() {
		if c.typ == "FOREIGN KEY" {
			continue
		}
		for _, col := range c.columns {
			rows = append(rows, []any{"", "", c.table, col, "", "", c.name})
		}
	}
	// A foreign key is listed against the referenced columns, as Spanner does.
	for _, t := range s.userTables() {
		for _, fk := range t.ForeignKeys {
			for _, col := range fk.ReferencedColumns {
				rows = append(rows, []any{"", "", fk.ReferencedTable, col, "", "", fk.Name})
			}
		}
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
