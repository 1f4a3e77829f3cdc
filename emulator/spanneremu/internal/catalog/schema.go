package catalog

import (
	"slices"
	"strings"
)

// objectKind says which model list an object entry refers to.
type objectKind int

const (
	objTable objectKind = iota
	objIndex
	objView
	objSequence
	// objOther is a statement the emulator records but does not model (change streams,
	// roles, grants, database options): its text is kept as is.
	objOther
)

// object is one entry of the creation-ordered list behind Schema.Statements.
type object struct {
	kind objectKind
	name string // upper-cased look-up name; "" for unnamed statements (GRANT)
	// group tells objOther entries apart when names could collide across kinds
	// ("CHANGE STREAM", "ROLE", "GRANT", "DATABASE").
	group string
	text  string // objOther only
}

// clone returns a copy of s whose tables, columns and indexes can be modified without
// touching s. AST nodes are shared: they are never modified.
func (s *Schema) clone() *Schema {
	c := &Schema{
		Statements: slices.Clone(s.Statements),
		Sequences:  slices.Clone(s.Sequences),
		objects:    slices.Clone(s.objects),
	}
	for _, t := range s.Tables {
		c.Tables = append(c.Tables, t.clone())
	}
	for _, ix := range s.Indexes {
		ci := *ix
		ci.Keys = slices.Clone(ix.Keys)
		ci.Storing = slices.Clone(ix.Storing)
		c.Indexes = append(c.Indexes, &ci)
	}
	for _, v := range s.Views {
		cv := *v
		c.Views = append(c.Views, &cv)
	}
	c.reindex()
	return c
}

func (t *Table) clone() *Table {
	c := *t
	c.Columns = nil
	for _, col := range t.Columns {
		cc := *col
		c.Columns = append(c.Columns, &cc)
	}
	c.PrimaryKey = slices.Clone(t.PrimaryKey)
	c.Checks = slices.Clone(t.Checks)
	c.ForeignKeys = slices.Clone(t.ForeignKeys)
	c.reindex()
	return &c
}

// reindex rebuilds the look-up maps after the slices changed.
func (s *Schema) reindex() {
	s.tables = make(map[string]*Table, len(s.Tables))
	for _, t := range s.Tables {
		s.tables[strings.ToUpper(t.Name)] = t
	}
	s.indexes = make(map[string]*Index, len(s.Indexes))
	for _, ix := range s.Indexes {
		s.indexes[strings.ToUpper(ix.Name)] = ix
	}
	s.views = make(map[string]*View, len(s.Views))
	for _, v := range s.Views {
		s.views[strings.ToUpper(v.Name)] = v
	}
}

func (t *Table) reindex() {
	t.columns = make(map[string]*Column, len(t.Columns))
	for _, c := range t.Columns {
		t.columns[strings.ToUpper(c.Name)] = c
	}
}

// isKeyColumn reports whether name is one of t's primary key columns.
func (t *Table) isKeyColumn(name string) bool {
	return slices.ContainsFunc(t.PrimaryKey, func(k KeyPart) bool { return strings.EqualFold(k.Column, name) })
}

// removeObject drops the object entry of the given kind and name.
func (s *Schema) removeObject(kind objectKind, group, name string) {
	key := strings.ToUpper(name)
	s.objects = slices.DeleteFunc(s.objects, func(o object) bool {
		return o.kind == kind && o.group == group && o.name == key
	})
}

func (s *Schema) hasObject(kind objectKind, group, name string) bool {
	key := strings.ToUpper(name)
	return slices.ContainsFunc(s.objects, func(o object) bool {
		return o.kind == kind && o.group == group && o.name == key
	})
}
