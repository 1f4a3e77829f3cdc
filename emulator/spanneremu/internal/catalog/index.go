package catalog

import (
	"strings"

	"github.com/cloudspannerecosystem/memefish/ast"
)

func (a *applier) createIndex(d *ast.CreateIndex) error {
	name, err := pathName(d.Name)
	if err != nil {
		return err
	}
	t, err := a.table(d.TableName)
	if err != nil {
		return err
	}
	if _, exists := a.s.Index(name); exists && d.IfNotExists {
		return nil
	}
	if err := a.checkNameFree(name); err != nil {
		return err
	}
	if d.Where != nil {
		return unimplementedf("Index %s: WHERE is not supported by the emulator", name)
	}
	if d.Options != nil {
		return unimplementedf("Index %s: OPTIONS are not supported by the emulator", name)
	}
	if strings.EqualFold(name, "PRIMARY_KEY") {
		return invalidf("Cannot use reserved name PRIMARY_KEY for a secondary index")
	}
	ix := &Index{Name: name, SQLiteName: name, Table: t.Name, Unique: d.Unique, NullFiltered: d.NullFiltered}
	for _, k := range d.Keys {
		col, ok := t.Column(k.Name.Name)
		if !ok {
			return invalidf("Index %s specifies key column %s which does not exist in the index's base table.", name, k.Name.Name)
		}
		if containsFold(ix.keyColumns(), col.Name) {
			return invalidf("Index %s specifies key column %s twice.", name, col.Name)
		}
		if !col.Type.Orderable() {
			return invalidf("Index %s is defined on a column of unsupported type %s.", name, col.Type.ColumnString())
		}
		ix.Keys = append(ix.Keys, KeyPart{Column: col.Name, Desc: k.Dir == ast.DirectionDesc})
	}
	if d.Storing != nil {
		for _, id := range d.Storing.Columns {
			if err := addStored(t, ix, id.Name); err != nil {
				return err
			}
		}
	}
	if d.InterleaveIn != nil {
		if err := a.indexInterleave(t, ix, d.InterleaveIn.TableName.Name); err != nil {
			return err
		}
	}
	a.s.Indexes = append(a.s.Indexes, ix)
	a.s.reindex()
	a.emit(a.s.createIndexSQL(ix))
	return nil
}

// addStored adds column name to the STORING list of ix on table t.
func addStored(t *Table, ix *Index, name string) error {
	col, ok := t.Column(name)
	switch {
	case !ok:
		return preconditionf("Index %s specifies nonexistent stored column %s.", ix.Name, name)
	case t.isKeyColumn(col.Name):
		return preconditionf("Index %s specifies stored column %s which is a key of table %s.", ix.Name, col.Name, t.Name)
	case containsFold(ix.keyColumns(), col.Name):
		return invalidf("Index %s specifies stored column %s already specified as primary key.", ix.Name, col.Name)
	case containsFold(ix.Storing, col.Name):
		return invalidf("Index %s specifies stored column %s twice.", ix.Name, col.Name)
	}
	ix.Storing = append(ix.Storing, col.Name)
	return nil
}

// indexInterleave validates INTERLEAVE IN: the table must be an ancestor of the indexed
// table whose key prefixes the index key.
func (a *applier) indexInterleave(t *Table, ix *Index, parentName string) error {
	parent, ok := a.s.Table(parentName)
	if !ok || parent.InfoSchema {
		return preconditionf("Cannot interleave index %s within nonexistent table %s.", ix.Name, parentName)
	}
	ancestor := false
	for p := t.Parent; p != ""; {
		if strings.EqualFold(p, parent.Name) {
			ancestor = true
			break
		}
		pt, _ := a.s.Table(p)
		p = pt.Parent
	}
	if !ancestor {
		return preconditionf("Cannot interleave index %s of table %s within table %s because %s is not an ancestor of %s.",
			ix.Name, t.Name, parent.Name, parent.Name, t.Name)
	}
	if err := checkParentKey("Index", ix.Name, parent, ix.Keys, t); err != nil {
		return err
	}
	ix.Interleave = parent.Name
	return nil
}

func (a *applier) alterIndex(d *ast.AlterIndex) error {
	name, err := pathName(d.Name)
	if err != nil {
		return err
	}
	ix, ok := a.s.Index(name)
	if !ok {
		return notFoundf("Index not found: %s", name)
	}
	t, _ := a.s.Table(ix.Table)
	switch alt := d.IndexAlteration.(type) {
	case *ast.AddStoredColumn:
		return addStored(t, ix, alt.Name.Name)
	case *ast.DropStoredColumn:
		for i, c := range ix.Storing {
			if strings.EqualFold(c, alt.Name.Name) {
				ix.Storing = append(ix.Storing[:i:i], ix.Storing[i+1:]...)
				return nil
			}
		}
		return invalidf("Column %s in index %s is not a stored column. Only stored columns may be dropped from indices.", alt.Name.Name, ix.Name)
	}
	return unimplementedf("Unsupported ALTER INDEX action in the emulator: %s", d.IndexAlteration.SQL())
}

func (a *applier) dropIndex(d *ast.DropIndex) error {
	name, err := pathName(d.Name)
	if err != nil {
		return err
	}
	ix, ok := a.s.Index(name)
	if !ok {
		if d.IfExists {
			return nil
		}
		return notFoundf("Index not found: %s", name)
	}
	if ix.Managed {
		return preconditionf("Cannot drop index `%s`. It is in use by foreign keys: %s.", ix.Name, strings.Join(a.foreignKeysBackedBy(ix), ", "))
	}
	a.emit("DROP INDEX " + Quote(ix.SQLiteName))
	a.s.Indexes = deleteItem(a.s.Indexes, ix)
	a.s.reindex()
	return nil
}

// foreignKeysBackedBy returns the names of the foreign keys a managed index backs.
func (a *applier) foreignKeysBackedBy(ix *Index) []string {
	var names []string
	for _, t := range a.s.Tables {
		for _, fk := range t.ForeignKeys {
			if strings.EqualFold(fk.ReferencedTable, ix.Table) && sameNames(fk.ReferencedColumns, ix.keyColumns()) {
				names = append(names, fk.Name)
			}
		}
	}
	return names
}
