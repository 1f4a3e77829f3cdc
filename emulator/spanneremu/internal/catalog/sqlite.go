package catalog

import (
	"fmt"
	"strings"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

// Names of the SQLite constraints the engine maps back to Spanner errors. A SQLite message
// reads "CHECK constraint failed: <name>".
const (
	// LengthConstraintPrefix + "Table.Column" checks STRING(N)/BYTES(N).
	LengthConstraintPrefix = "spanner_len:"
	// CheckConstraintPrefix + "Table.Check" is a CHECK constraint.
	CheckConstraintPrefix = "spanner_check:"
	// ForeignKeyConstraintPrefix + "ForeignKeyName" is a FOREIGN KEY. (SQLite does not name
	// the violated foreign key in its error; the name documents the schema.)
	ForeignKeyConstraintPrefix = "spanner_fk:"
	// InterleaveConstraintPrefix + "Table" is the foreign key from a child to its parent.
	InterleaveConstraintPrefix = "spanner_interleave:"
)

// createTableSQL renders t as a SQLite CREATE TABLE named sqliteName.
//
// Columns have no declared type, so SQLite applies no affinity and keeps values exactly in the
// storage form the engine binds. The table is WITHOUT ROWID and keyed by the Spanner primary
// key, so rows are stored in key order. Known difference: SQLite does not allow NULL in the
// key columns of a WITHOUT ROWID table, while Spanner allows NULL in nullable key columns.
func (s *Schema) createTableSQL(t *Table, sqliteName string) string {
	var defs []string
	for _, c := range t.Columns {
		defs = append(defs, columnSQL(c))
	}
	key := make([]string, len(t.PrimaryKey))
	for i, c := range t.KeyColumns() {
		key[i] = Quote(c.SQLiteName)
		if t.PrimaryKey[i].Desc {
			key[i] += " DESC"
		}
	}
	if t.SyntheticKey != "" {
		q := Quote(t.SyntheticKey)
		defs = append(defs, fmt.Sprintf("%s NOT NULL DEFAULT 0 CHECK (%s = 0)", q, q))
		key = []string{q}
	}
	defs = append(defs, "PRIMARY KEY ("+strings.Join(key, ", ")+")")
	for _, c := range t.Columns {
		if check := lengthCheckSQL(t, c); check != "" {
			defs = append(defs, check)
		}
	}
	for _, c := range t.Checks {
		defs = append(defs, fmt.Sprintf("CONSTRAINT %s CHECK (%s)", Quote(CheckConstraintPrefix+t.Name+"."+c.Name), c.SQL))
	}
	if parent, ok := s.Table(t.Parent); ok {
		var cols []string
		for _, k := range parent.PrimaryKey {
			cols = append(cols, k.Column)
		}
		defs = append(defs, foreignKeySQL(InterleaveConstraintPrefix+t.Name, t, cols, parent, cols, t.OnDeleteCascade))
	}
	for _, fk := range t.ForeignKeys {
		ref := t
		if !strings.EqualFold(fk.ReferencedTable, t.Name) {
			ref, _ = s.Table(fk.ReferencedTable)
		}
		defs = append(defs, foreignKeySQL(ForeignKeyConstraintPrefix+fk.Name, t, fk.Columns, ref, fk.ReferencedColumns, fk.OnDeleteCascade))
	}
	return "CREATE TABLE " + Quote(sqliteName) + " (\n  " + strings.Join(defs, ",\n  ") + "\n) WITHOUT ROWID"
}

// columnSQL renders a column definition without its length check.
func columnSQL(c *Column) string {
	def := Quote(c.SQLiteName)
	if c.Type.Code == spantype.Numeric {
		// NUMERIC is stored as decimal text; the collation (registered by the translator)
		// makes keys, indexes and comparisons order it by value.
		def += " COLLATE " + NumericCollation
	}
	if c.NotNull {
		def += " NOT NULL"
	}
	if c.DefaultSQL != "" {
		def += " DEFAULT (" + c.DefaultSQL + ")"
	}
	if c.GeneratedSQL != "" {
		def += " GENERATED ALWAYS AS (" + c.GeneratedSQL + ")"
		if c.Stored {
			def += " STORED"
		} else {
			def += " VIRTUAL"
		}
	}
	return def
}

// lengthCheckSQL renders the CHECK constraint of a STRING(N) or BYTES(N) column ("" for other
// columns). length() counts the characters of TEXT and the bytes of BLOB, as Spanner counts.
func lengthCheckSQL(t *Table, c *Column) string {
	name := Quote(LengthConstraintPrefix + t.Name + "." + c.Name)
	switch {
	case (c.Type.Code == spantype.String || c.Type.Code == spantype.Bytes) && c.Type.Length > 0:
		return fmt.Sprintf("CONSTRAINT %s CHECK (length(%s) <= %d)", name, Quote(c.SQLiteName), c.Type.Length)
	case c.Type.Code == spantype.Array && (c.Type.Elem.Code == spantype.String || c.Type.Elem.Code == spantype.Bytes) && c.Type.Elem.Length > 0:
		// spq_array_max_len (registered by the translator) is the longest element's length.
		return fmt.Sprintf("CONSTRAINT %s CHECK (spq_array_max_len(%s, %s) <= %d)", name, Quote(c.SQLiteName),
			sqlString(c.Type.String()), c.Type.Elem.Length)
	}
	return ""
}

// addColumnSQL returns SQLite's ALTER TABLE ADD COLUMN for c, or "" when SQLite cannot add
// such a column in place (NOT NULL, a DEFAULT expression, a stored generated column) and the
// table must be rebuilt. Adding in place keeps ADD COLUMN cheap on large tables.
func addColumnSQL(t *Table, c *Column) string {
	if c.NotNull || c.DefaultSQL != "" || (c.GeneratedSQL != "" && c.Stored) {
		return ""
	}
	sql := "ALTER TABLE " + Quote(t.SQLiteName) + " ADD COLUMN " + columnSQL(c)
	if check := lengthCheckSQL(t, c); check != "" {
		sql += " " + check
	}
	return sql
}

// foreignKeySQL renders a foreign key from columns cols of t to columns refCols of ref.
func foreignKeySQL(name string, t *Table, cols []string, ref *Table, refCols []string, cascade bool) string {
	sql := fmt.Sprintf("CONSTRAINT %s FOREIGN KEY (%s) REFERENCES %s (%s)",
		Quote(name), t.sqliteColumns(cols), Quote(ref.SQLiteName), ref.sqliteColumns(refCols))
	if cascade {
		sql += " ON DELETE CASCADE"
	}
	return sql
}

// sqliteColumns renders the named columns of t as a quoted SQLite column list.
func (t *Table) sqliteColumns(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		c, _ := t.Column(n)
		q[i] = Quote(c.SQLiteName)
	}
	return strings.Join(q, ", ")
}

// createIndexSQL renders a secondary index. STORING and INTERLEAVE IN have no SQLite effect.
//
// Spanner's unique indexes treat NULL as a value (two rows with NULL in the same nullable key
// column conflict unless the index is NULL_FILTERED), while SQLite's treat NULLs as distinct.
// Such key columns are therefore indexed as ifnull(column, sentinel) with a sentinel of a
// SQLite storage class the column never holds. SQLite then reports a violation as
// "UNIQUE constraint failed: index '<name>'" instead of "UNIQUE constraint failed: T.c, ...".
func (s *Schema) createIndexSQL(ix *Index) string {
	t, _ := s.Table(ix.Table)
	var keys, filter []string
	for _, k := range ix.Keys {
		col, _ := t.Column(k.Column)
		q := Quote(col.SQLiteName)
		expr := q
		if ix.Unique && !ix.NullFiltered && !col.NotNull && !ix.Managed {
			expr = "ifnull(" + q + ", " + nullSentinel(col.Type) + ")"
		}
		if k.Desc {
			expr += " DESC"
		}
		keys = append(keys, expr)
		if !col.NotNull {
			// Only nullable keys filter: SQLite drops "IS NOT NULL" on a NOT NULL column
			// from a query, and could then no longer prove the query fits the index.
			filter = append(filter, q+" IS NOT NULL")
		}
	}
	sql := "CREATE "
	if ix.Unique {
		sql += "UNIQUE "
	}
	sql += "INDEX " + Quote(ix.SQLiteName) + " ON " + Quote(t.SQLiteName) + " (" + strings.Join(keys, ", ") + ")"
	if ix.NullFiltered && len(filter) > 0 {
		sql += " WHERE " + strings.Join(filter, " AND ")
	}
	return sql
}

// nullSentinel returns a SQLite value that no stored value of type t can equal: BYTES are
// BLOBs, every other indexable type is stored as INTEGER, REAL or TEXT.
func nullSentinel(t spantype.Type) string {
	if t.Code == spantype.Bytes {
		return "'spanner:null'"
	}
	return "X'00'"
}

// UniqueIndexViolated returns the unique index of table t that a SQLite "UNIQUE constraint
// failed" message refers to. SQLite names either the index ("... failed: index 'I'", for the
// indexes built over ifnull(...) expressions, see createIndexSQL) or the indexed columns
// ("... failed: T.a, T.b"); the latter is matched against t's unique indexes by key columns.
// It returns false for a primary key violation or an unknown index.
func (s *Schema) UniqueIndexViolated(t *Table, msg string) (*Index, bool) {
	_, detail, ok := strings.Cut(msg, "UNIQUE constraint failed: ")
	if !ok {
		return nil, false
	}
	if name, ok := strings.CutPrefix(detail, "index '"); ok {
		name, _, _ = strings.Cut(name, "'")
		for _, ix := range s.Indexes {
			if ix.SQLiteName == name {
				return ix, true
			}
		}
		return nil, false
	}
	var cols []string
	for _, c := range strings.Split(detail, ",") {
		c = strings.TrimSpace(c)
		// Drop the "Table." qualifier and anything SQLite appends after the list.
		c = strings.TrimPrefix(c, t.SQLiteName+".")
		c, _, _ = strings.Cut(c, " ")
		cols = append(cols, c)
	}
	for _, ix := range s.TableIndexes(t.Name) {
		if ix.Unique && sameNames(ix.keyColumns(), cols) {
			return ix, true
		}
	}
	return nil, false
}
