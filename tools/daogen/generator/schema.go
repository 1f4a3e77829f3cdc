package generator

import (
	"fmt"
	"strings"

	"github.com/cloudspannerecosystem/memefish"
	"github.com/cloudspannerecosystem/memefish/ast"
)

// A Statement is one DDL statement of a migration file.
type Statement struct {
	File   string // for messages, e.g. services/orders/schema/0001_init.sql
	SQL    string
	Stream string // the migration stream of the file, e.g. orders; "" when there is only one
}

// Schema is the schema of a database after every migration has been applied, in creation order.
type Schema struct {
	Tables []*Table
	// CrossStream lists the statements that change a table created by another stream (ALTER TABLE,
	// DROP TABLE, CREATE or DROP INDEX on it), in order.
	CrossStream []CrossStreamChange
}

// CrossStreamChange is a statement of one stream that changes a table created by another.
type CrossStreamChange struct {
	Statement Statement
	Table     string
	Owner     string // the stream that created the table
}

// Table is a table of the schema.
type Table struct {
	Name       string
	Columns    []*Column
	PrimaryKey []KeyPart
	Parent     string // INTERLEAVE IN [PARENT]; "" for a top-level table
	Cascade    bool   // ON DELETE CASCADE
	Indexes    []*Index
	Stream     string // the stream of the statement that created the table
}

// Column is a column of a table.
type Column struct {
	Name            string
	Type            Type
	NotNull         bool
	CommitTimestamp bool // OPTIONS (allow_commit_timestamp = true)
	Generated       bool // AS (...) [STORED]: read-only
}

// Type is a column type: a scalar, or an array of one.
type Type struct {
	Base  string // BOOL, INT64, FLOAT32, FLOAT64, STRING, BYTES, DATE, TIMESTAMP, NUMERIC, JSON
	Array bool
}

func (t Type) String() string {
	if t.Array {
		return "ARRAY<" + t.Base + ">"
	}
	return t.Base
}

// KeyPart is a column of a primary or index key.
type KeyPart struct {
	Column string
	Desc   bool
}

// Index is a secondary index.
type Index struct {
	Name         string
	Table        string
	Unique       bool
	NullFiltered bool
	Keys         []KeyPart
	Storing      []string
}

// Table returns the table called name (case-insensitively, like Spanner), or nil.
func (s *Schema) Table(name string) *Table {
	for _, t := range s.Tables {
		if strings.EqualFold(t.Name, name) {
			return t
		}
	}
	return nil
}

func (s *Schema) index(name string) (*Table, int) {
	for _, t := range s.Tables {
		for i, ix := range t.Indexes {
			if strings.EqualFold(ix.Name, name) {
				return t, i
			}
		}
	}
	return nil, -1
}

// Column returns the column called name, or nil.
func (t *Table) Column(name string) *Column {
	for _, c := range t.Columns {
		if strings.EqualFold(c.Name, name) {
			return c
		}
	}
	return nil
}

// IsKey reports whether column name is part of the primary key.
func (t *Table) IsKey(name string) bool {
	for _, k := range t.PrimaryKey {
		if strings.EqualFold(k.Column, name) {
			return true
		}
	}
	return false
}

// LoadSchema applies the statements in order to an empty schema.
func LoadSchema(stmts []Statement) (*Schema, error) {
	s := &Schema{}
	for _, st := range stmts {
		ddl, err := memefish.ParseDDL(st.File, st.SQL)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", st.File, err)
		}
		if t := s.changes(ddl); t != nil && t.Stream != st.Stream {
			s.CrossStream = append(s.CrossStream, CrossStreamChange{Statement: st, Table: t.Name, Owner: t.Stream})
		}
		if err := s.apply(ddl, st.Stream); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", st.File, firstLine(st.SQL), err)
		}
	}
	return s, nil
}

func firstLine(sql string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(sql), "\n")
	return strings.TrimSpace(line)
}

func pathName(p *ast.Path) (string, error) {
	if len(p.Idents) != 1 {
		return "", fmt.Errorf("named schemas are not supported: %s", p.SQL())
	}
	return p.Idents[0].Name, nil
}

// changes returns the existing table that ddl alters, drops or adds or drops an index of, or nil.
func (s *Schema) changes(ddl ast.DDL) *Table {
	var p *ast.Path
	switch d := ddl.(type) {
	case *ast.CreateIndex:
		p = d.TableName
	case *ast.AlterTable:
		p = d.Name
	case *ast.DropTable:
		p = d.Name
	case *ast.DropIndex:
		if name, err := pathName(d.Name); err == nil {
			t, _ := s.index(name)
			return t
		}
	}
	if p == nil {
		return nil
	}
	name, err := pathName(p)
	if err != nil {
		return nil
	}
	return s.Table(name)
}

func (s *Schema) apply(ddl ast.DDL, stream string) error {
	switch d := ddl.(type) {
	case *ast.CreateTable:
		return s.createTable(d, stream)
	case *ast.CreateIndex:
		return s.createIndex(d)
	case *ast.AlterTable:
		return s.alterTable(d)
	case *ast.DropTable:
		return s.dropTable(d)
	case *ast.DropIndex:
		name, err := pathName(d.Name)
		if err != nil {
			return err
		}
		t, i := s.index(name)
		if t == nil {
			if d.IfExists {
				return nil
			}
			return fmt.Errorf("drop index: no index %s", name)
		}
		t.Indexes = append(t.Indexes[:i], t.Indexes[i+1:]...)
		return nil
	default:
		return fmt.Errorf("unsupported DDL statement %T (daogen understands CREATE/DROP TABLE, CREATE/DROP INDEX and ALTER TABLE)", ddl)
	}
}

func (s *Schema) createTable(d *ast.CreateTable, stream string) error {
	name, err := pathName(d.Name)
	if err != nil {
		return err
	}
	if s.Table(name) != nil {
		if d.IfNotExists {
			return nil
		}
		return fmt.Errorf("create table: table %s already exists", name)
	}
	t := &Table{Name: name, Stream: stream}
	for _, cd := range d.Columns {
		c, err := column(cd)
		if err != nil {
			return fmt.Errorf("table %s: %w", name, err)
		}
		if t.Column(c.Name) != nil {
			return fmt.Errorf("table %s: duplicate column %s", name, c.Name)
		}
		t.Columns = append(t.Columns, c)
		if cd.PrimaryKey {
			t.PrimaryKey = append(t.PrimaryKey, KeyPart{Column: c.Name})
		}
	}
	pk := d.PrimaryKeys
	for _, tc := range d.TableConstraints {
		if p, ok := tc.Constraint.(*ast.TablePrimaryKey); ok {
			pk = append(pk, p.Columns...)
		}
	}
	for _, k := range pk {
		t.PrimaryKey = append(t.PrimaryKey, KeyPart{Column: k.Name.Name, Desc: k.Dir == ast.DirectionDesc})
	}
	if len(t.PrimaryKey) == 0 {
		return fmt.Errorf("table %s has no primary key", name)
	}
	for i, k := range t.PrimaryKey {
		c := t.Column(k.Column)
		if c == nil {
			return fmt.Errorf("table %s: primary key column %s does not exist", name, k.Column)
		}
		t.PrimaryKey[i].Column = c.Name
	}
	if d.Cluster != nil {
		parent, err := pathName(d.Cluster.TableName)
		if err != nil {
			return err
		}
		p := s.Table(parent)
		if p == nil {
			return fmt.Errorf("table %s: interleaved in unknown table %s", name, parent)
		}
		if len(p.PrimaryKey) >= len(t.PrimaryKey) {
			return fmt.Errorf("table %s: primary key must extend the key of its parent %s", name, p.Name)
		}
		for i, k := range p.PrimaryKey {
			if !strings.EqualFold(k.Column, t.PrimaryKey[i].Column) {
				return fmt.Errorf("table %s: primary key must start with the key of its parent %s", name, p.Name)
			}
		}
		t.Parent = p.Name
		t.Cascade = d.Cluster.OnDelete == ast.OnDeleteCascade
	}
	s.Tables = append(s.Tables, t)
	return nil
}

func column(cd *ast.ColumnDef) (*Column, error) {
	typ, err := schemaType(cd.Type)
	if err != nil {
		return nil, fmt.Errorf("column %s: %w", cd.Name.Name, err)
	}
	c := &Column{Name: cd.Name.Name, Type: typ, NotNull: cd.NotNull}
	if _, ok := cd.DefaultSemantics.(*ast.GeneratedColumnExpr); ok {
		c.Generated = true
	}
	if err := c.setOptions(cd.Options); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Column) setOptions(o *ast.Options) error {
	if o == nil {
		return nil
	}
	v, err := o.BoolField("allow_commit_timestamp")
	switch {
	case err == ast.ErrFieldNotFound:
	case err != nil:
		return fmt.Errorf("column %s: allow_commit_timestamp: %w", c.Name, err)
	default:
		c.CommitTimestamp = v != nil && *v
	}
	if c.CommitTimestamp && c.Type != (Type{Base: "TIMESTAMP"}) {
		return fmt.Errorf("column %s: allow_commit_timestamp on a %s column", c.Name, c.Type)
	}
	return nil
}

var scalarTypes = map[ast.ScalarTypeName]bool{
	ast.BoolTypeName: true, ast.Int64TypeName: true, ast.Float32TypeName: true, ast.Float64TypeName: true,
	ast.StringTypeName: true, ast.BytesTypeName: true, ast.DateTypeName: true, ast.TimestampTypeName: true,
	ast.NumericTypeName: true, ast.JSONTypeName: true,
}

func schemaType(t ast.SchemaType) (Type, error) {
	switch t := t.(type) {
	case *ast.ScalarSchemaType:
		if !scalarTypes[t.Name] {
			return Type{}, fmt.Errorf("unsupported type %s", t.Name)
		}
		return Type{Base: string(t.Name)}, nil
	case *ast.SizedSchemaType:
		return Type{Base: string(t.Name)}, nil
	case *ast.ArraySchemaType:
		item, err := schemaType(t.Item)
		if err != nil {
			return Type{}, err
		}
		if item.Array {
			return Type{}, fmt.Errorf("unsupported type %s", t.SQL())
		}
		return Type{Base: item.Base, Array: true}, nil
	default:
		return Type{}, fmt.Errorf("unsupported type %s", t.SQL())
	}
}

func (s *Schema) createIndex(d *ast.CreateIndex) error {
	name, err := pathName(d.Name)
	if err != nil {
		return err
	}
	if t, _ := s.index(name); t != nil || s.Table(name) != nil {
		if d.IfNotExists {
			return nil
		}
		return fmt.Errorf("create index: name %s is already used", name)
	}
	tname, err := pathName(d.TableName)
	if err != nil {
		return err
	}
	t := s.Table(tname)
	if t == nil {
		return fmt.Errorf("create index %s: no table %s", name, tname)
	}
	if d.Where != nil {
		return fmt.Errorf("create index %s: WHERE is not supported", name)
	}
	ix := &Index{Name: name, Table: t.Name, Unique: d.Unique, NullFiltered: d.NullFiltered}
	for _, k := range d.Keys {
		c := t.Column(k.Name.Name)
		if c == nil {
			return fmt.Errorf("create index %s: table %s has no column %s", name, t.Name, k.Name.Name)
		}
		ix.Keys = append(ix.Keys, KeyPart{Column: c.Name, Desc: k.Dir == ast.DirectionDesc})
	}
	if d.Storing != nil {
		for _, id := range d.Storing.Columns {
			c := t.Column(id.Name)
			if c == nil {
				return fmt.Errorf("create index %s: table %s has no column %s", name, t.Name, id.Name)
			}
			ix.Storing = append(ix.Storing, c.Name)
		}
	}
	t.Indexes = append(t.Indexes, ix)
	return nil
}

func (s *Schema) alterTable(d *ast.AlterTable) error {
	name, err := pathName(d.Name)
	if err != nil {
		return err
	}
	t := s.Table(name)
	if t == nil {
		return fmt.Errorf("alter table: no table %s", name)
	}
	switch a := d.TableAlteration.(type) {
	case *ast.AddColumn:
		if t.Column(a.Column.Name.Name) != nil {
			if a.IfNotExists {
				return nil
			}
			return fmt.Errorf("alter table %s: column %s already exists", t.Name, a.Column.Name.Name)
		}
		c, err := column(a.Column)
		if err != nil {
			return fmt.Errorf("alter table %s: %w", t.Name, err)
		}
		t.Columns = append(t.Columns, c)
	case *ast.DropColumn:
		c := t.Column(a.Name.Name)
		if c == nil {
			return fmt.Errorf("alter table %s: no column %s", t.Name, a.Name.Name)
		}
		if t.IsKey(c.Name) {
			return fmt.Errorf("alter table %s: cannot drop key column %s", t.Name, c.Name)
		}
		for _, ix := range t.Indexes {
			for _, k := range append(keyNames(ix.Keys), ix.Storing...) {
				if k == c.Name {
					return fmt.Errorf("alter table %s: cannot drop column %s used by index %s", t.Name, c.Name, ix.Name)
				}
			}
		}
		for i, cc := range t.Columns {
			if cc == c {
				t.Columns = append(t.Columns[:i], t.Columns[i+1:]...)
				break
			}
		}
	case *ast.AlterColumn:
		c := t.Column(a.Name.Name)
		if c == nil {
			return fmt.Errorf("alter table %s: no column %s", t.Name, a.Name.Name)
		}
		switch ca := a.Alteration.(type) {
		case *ast.AlterColumnType:
			typ, err := schemaType(ca.Type)
			if err != nil {
				return fmt.Errorf("alter table %s: column %s: %w", t.Name, c.Name, err)
			}
			c.Type, c.NotNull = typ, ca.NotNull
			c.Generated = ca.GeneratedExpr != nil
		case *ast.AlterColumnSetOptions:
			if err := c.setOptions(ca.Options); err != nil {
				return fmt.Errorf("alter table %s: %w", t.Name, err)
			}
		case *ast.AlterColumnSetDefault, *ast.AlterColumnDropDefault:
			// Defaults do not change the generated code.
		default:
			return fmt.Errorf("alter table %s: unsupported column alteration %T", t.Name, ca)
		}
	case *ast.AddTableConstraint, *ast.DropConstraint, *ast.AddRowDeletionPolicy,
		*ast.DropRowDeletionPolicy, *ast.ReplaceRowDeletionPolicy, *ast.SetOnDelete:
		// Constraints and TTL policies do not change the generated code (ON DELETE is only documented).
		if sd, ok := a.(*ast.SetOnDelete); ok {
			t.Cascade = sd.OnDelete == ast.OnDeleteCascade
		}
	default:
		return fmt.Errorf("alter table %s: unsupported alteration %T", t.Name, a)
	}
	return nil
}

func (s *Schema) dropTable(d *ast.DropTable) error {
	name, err := pathName(d.Name)
	if err != nil {
		return err
	}
	t := s.Table(name)
	if t == nil {
		if d.IfExists {
			return nil
		}
		return fmt.Errorf("drop table: no table %s", name)
	}
	if len(t.Indexes) > 0 {
		return fmt.Errorf("drop table %s: drop its indexes first (%s)", t.Name, t.Indexes[0].Name)
	}
	for _, c := range s.Tables {
		if c.Parent == t.Name {
			return fmt.Errorf("drop table %s: table %s is interleaved in it", t.Name, c.Name)
		}
	}
	for i, tt := range s.Tables {
		if tt == t {
			s.Tables = append(s.Tables[:i], s.Tables[i+1:]...)
			break
		}
	}
	return nil
}

func keyNames(ks []KeyPart) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.Column
	}
	return out
}
