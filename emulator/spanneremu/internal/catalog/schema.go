package catalog

import (
	"slices"
	"strings"
)

// other is a statement the emulator records but does not model (ALTER DATABASE, change
// streams, roles, grants): its text is kept as is for Statements.
type other struct {
	group string // "DATABASE", "CHANGE STREAM", "ROLE" or "GRANT"
	name  string // upper-cased look-up name; "" for unnamed statements
	text  string
}

// clone returns a copy of s whose tables, columns and indexes can be modified without
// touching s. AST nodes are shared: they are never modified.
func (s *Schema) clone() *Schema {
	c := &Schema{
		Statements: slices.Clone(s.Statements),
		Sequences:  slices.Clone(s.Sequences),
		others:     slices.Clone(s.others),
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
	s.tablesAsNamed = make(map[string]*Table, len(s.Tables))
	for _, t := range s.Tables {
		s.tables[strings.ToUpper(t.Name)] = t
		s.tablesAsNamed[t.Name] = t
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
	t.columnsAsNamed = make(map[string]*Column, len(t.Columns))
	for _, c := range t.Columns {
		t.columns[strings.ToUpper(c.Name)] = c
		t.columnsAsNamed[c.Name] = c
	}
}

// isKeyColumn reports whether name is one of t's primary key columns.
func (t *Table) isKeyColumn(name string) bool {
	return slices.ContainsFunc(t.PrimaryKey, func(k KeyPart) bool { return strings.EqualFold(k.Column, name) })
}

// removeOther drops the recorded statement of the given group and name.
func (s *Schema) removeOther(group, name string) {
	key := strings.ToUpper(name)
	s.others = slices.DeleteFunc(s.others, func(o other) bool { return o.group == group && o.name == key })
}

func (s *Schema) hasOther(group, name string) bool {
	key := strings.ToUpper(name)
	return slices.ContainsFunc(s.others, func(o other) bool { return o.group == group && o.name == key })
}
