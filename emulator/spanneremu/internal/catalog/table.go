package catalog

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"

	"github.com/cloudspannerecosystem/memefish/ast"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/sqlfuncs"
)

// Spanner's limits: declared lengths of STRING(N) and BYTES(N) columns, and the depth of a
// table hierarchy (a top-level table and six levels of interleaved children).
const (
	maxStringLength    = 2621440
	maxBytesLength     = 10485760
	maxInterleaveDepth = 7
)

func (a *applier) createTable(d *ast.CreateTable) error {
	name, err := pathName(d.Name)
	if err != nil {
		return err
	}
	if _, exists := a.s.Table(name); exists && d.IfNotExists {
		return nil
	}
	if err := a.checkNameFree(name); err != nil {
		return err
	}
	if len(d.Synonyms) > 0 {
		return unimplementedf("SYNONYM is not supported by the emulator")
	}
	if d.Options != nil {
		return unimplementedf("Table OPTIONS are not supported by the emulator")
	}
	t := &Table{Name: name, SQLiteName: name}
	t.reindex()
	// Columns first, then their expressions: a generated column may read a column declared
	// after it, and the compiler resolves names against t.
	for _, cd := range d.Columns {
		col, err := a.newColumn(t, cd)
		if err != nil {
			return err
		}
		if _, dup := t.Column(col.Name); dup {
			return preconditionf("Duplicate column name %s.%s.", t.Name, col.Name)
		}
		t.Columns = append(t.Columns, col)
		t.reindex()
	}
	for _, cd := range d.Columns {
		col, _ := t.Column(cd.Name.Name)
		if err := a.columnExprs(t, col, cd.DefaultSemantics); err != nil {
			return err
		}
	}
	if err := a.primaryKey(t, d); err != nil {
		return err
	}
	if d.Cluster != nil {
		if err := a.interleave(t, d.Cluster); err != nil {
			return err
		}
	}
	var newIndexes []*Index
	for _, tc := range d.TableConstraints {
		ix, err := a.addConstraint(t, tc)
		if err != nil {
			return err
		}
		if ix != nil {
			newIndexes = append(newIndexes, ix)
		}
	}
	if d.RowDeletionPolicy != nil {
		if t.RowDeletionPolicy, err = rowDeletionPolicy(t, d.RowDeletionPolicy.RowDeletionPolicy); err != nil {
			return err
		}
	}
	if err := a.checkRowDeletion(t); err != nil {
		return err
	}
	a.s.Tables = append(a.s.Tables, t)
	a.s.reindex()
	a.emit(a.s.createTableSQL(t, t.SQLiteName))
	for _, ix := range newIndexes {
		a.emit(a.s.createIndexSQL(ix))
	}
	return nil
}

// columnType converts the declared type of column name.
func columnType(name string, st ast.SchemaType) (spantype.Type, error) {
	switch st := st.(type) {
	case *ast.ScalarSchemaType:
		t, ok := spantype.ParseScalarName(string(st.Name))
		if !ok {
			return t, unimplementedf("Column type %s is not supported by the emulator", st.Name)
		}
		return t, nil
	case *ast.SizedSchemaType:
		t, ok := spantype.ParseScalarName(string(st.Name))
		if !ok || (t.Code != spantype.String && t.Code != spantype.Bytes) {
			return t, invalidf("Type %s does not take a length", st.Name)
		}
		if st.Max {
			return t, nil
		}
		lit, ok := st.Size.(*ast.IntLiteral)
		if !ok {
			return t, invalidf("Invalid length for %s column: %s", st.Name, st.Size.SQL())
		}
		n, err := strconv.ParseInt(lit.Value, 0, 64)
		limit := int64(maxStringLength)
		if t.Code == spantype.Bytes {
			limit = maxBytesLength
		}
		if err != nil || n < 1 || n > limit {
			return t, invalidf("Bad length for column %s: %s : Allowed length range: [1, %d].", name, lit.Value, limit)
		}
		t.Length = n
		return t, nil
	case *ast.ArraySchemaType:
		if len(st.NamedArgs) > 0 {
			return spantype.Type{}, unimplementedf("ARRAY options (vector_length) are not supported by the emulator")
		}
		if _, nested := st.Item.(*ast.ArraySchemaType); nested {
			return spantype.Type{}, invalidf("Arrays of arrays are not supported: %s", st.SQL())
		}
		elem, err := columnType(name, st.Item)
		if err != nil {
			return elem, err
		}
		return spantype.ArrayOf(elem), nil
	case *ast.NamedType:
		// UUID is a built-in type that the parser sees as a name. PROTO and ENUM types would
		// have to come from a proto bundle, which the emulator does not support.
		if len(st.Path) == 1 && strings.EqualFold(st.Path[0].Name, "UUID") {
			return spantype.TUUID, nil
		}
		return spantype.Type{}, invalidf("Type not found: %s", st.SQL())
	}
	return spantype.Type{}, invalidf("Unsupported column type: %s", st.SQL())
}

// newColumn builds a column from its definition, without its DEFAULT or generation
// expression (see columnExprs).
func (a *applier) newColumn(t *Table, cd *ast.ColumnDef) (*Column, error) {
	typ, err := columnType(cd.Name.Name, cd.Type)
	if err != nil {
		return nil, err
	}
	if cd.PlacementKey != nil {
		return nil, unimplementedf("PLACEMENT KEY is not supported by the emulator")
	}
	col := &Column{
		Name:       cd.Name.Name,
		SQLiteName: cd.Name.Name,
		Type:       typ,
		NotNull:    cd.NotNull,
		Hidden:     !cd.Hidden.Invalid(),
	}
	if err := columnOptions(t, col, cd.Options); err != nil {
		return nil, err
	}
	return col, nil
}

// columnOptions applies OPTIONS (...) of a column definition or ALTER COLUMN SET OPTIONS.
func columnOptions(t *Table, col *Column, o *ast.Options) error {
	if o == nil {
		return nil
	}
	for _, r := range o.Records {
		if !strings.EqualFold(r.Name.Name, "allow_commit_timestamp") {
			return invalidf("Option: %s is unknown.", r.Name.Name)
		}
		switch v := r.Value.(type) {
		case *ast.BoolLiteral:
			col.AllowCommitTimestamp = v.Value
		case *ast.NullLiteral:
			col.AllowCommitTimestamp = false
		default:
			return invalidf("Option allow_commit_timestamp of column %s.%s must be true, false or null", t.Name, col.Name)
		}
		if col.AllowCommitTimestamp && col.Type.Code != spantype.Timestamp {
			return unallowedCommitTimestamp(col)
		}
	}
	return nil
}

func unallowedCommitTimestamp(col *Column) error {
	return preconditionf("Column %s has invalid allow_commit_timestamp option.  Option only allowed on TIMESTAMP columns.", col.Name)
}

// columnExprs compiles a column's DEFAULT or generation expression.
func (a *applier) columnExprs(t *Table, col *Column, sem ast.ColumnDefaultSemantics) error {
	switch s := sem.(type) {
	case nil:
		return nil
	case *ast.ColumnDefaultExpr:
		return a.setDefault(t, col, s)
	case *ast.GeneratedColumnExpr:
		return a.setGenerated(t, col, s)
	}
	return unimplementedf("Identity and AUTO_INCREMENT columns are not supported by the emulator")
}

func (a *applier) setDefault(t *Table, col *Column, d *ast.ColumnDefaultExpr) error {
	if d.OnUpdate != nil {
		return unimplementedf("ON UPDATE is not supported by the emulator")
	}
	for _, other := range t.Columns {
		if refersTo(d.Expr, other.Name) {
			// SQLite would refuse the table too: a DEFAULT must be constant.
			return invalidf("Default value of column %s.%s cannot reference column %s.", t.Name, col.Name, other.Name)
		}
	}
	sql, err := a.compileColumnExpr(t, col, d.Expr, false)
	if err != nil {
		return err
	}
	col.Default, col.DefaultSQL, col.DefaultText = d.Expr, sql, a.text(d.Expr)
	return nil
}

func (a *applier) setGenerated(t *Table, col *Column, g *ast.GeneratedColumnExpr) error {
	if !g.Stored.Invalid() {
		// A stored value computed from a commit timestamp would hold the placeholder.
		for _, dep := range t.Columns {
			if dep.AllowCommitTimestamp && refersTo(g.Expr, dep.Name) {
				return preconditionf("Cannot use commit timestamp column `%s` as a dependency of a materialized generated column.", dep.Name)
			}
		}
	}
	sql, err := a.compileColumnExpr(t, col, g.Expr, true)
	if err != nil {
		return err
	}
	col.Generated, col.GeneratedSQL, col.GeneratedText = g.Expr, sql, a.text(g.Expr)
	col.Stored = !g.Stored.Invalid()
	return nil
}

// compileColumnExpr translates the DEFAULT (generated false) or generation expression e of col
// and converts its value to the column's type.
func (a *applier) compileColumnExpr(t *Table, col *Column, e ast.Expr, generated bool) (string, error) {
	what, prefix := "Default value", fmt.Sprintf("Error parsing the default value of column `%s`.`%s`", t.Name, col.Name)
	if generated {
		what, prefix = "Generated value", fmt.Sprintf("Error parsing the definition of generated column `%s`.`%s`", t.Name, col.Name)
	}
	sql, typ, err := a.compile(t, e, prefix)
	if err != nil {
		return "", err
	}
	sql, ok := coerceTo(e, sql, typ, col)
	if !ok {
		return "", invalidf("%s of column %s.%s has type %s, which cannot be assigned to the column's type %s.", what, t.Name, col.Name, typ, col.Type.ColumnString())
	}
	return sql, nil
}

// coerceTo converts a compiled DEFAULT or generation expression to the column's type as
// GoogleSQL assigns values (INT64 widened to FLOAT64 or NUMERIC, a STRING literal read as a
// DATE, TIMESTAMP, NUMERIC or JSON), so that SQLite stores the column's storage form. ok is
// false when the types are not assignable.
func coerceTo(e ast.Expr, sql string, typ spantype.Type, col *Column) (string, bool) {
	arg := sqlfuncs.Arg{SQL: sql, Type: typ}
	switch lit := e.(type) {
	case *ast.StringLiteral:
		v := lit.Value
		arg.StringLiteral = &v
	case *ast.NullLiteral:
		arg.IsNullLiteral = true
	}
	out, err := sqlfuncs.Coerce(arg, col.Type)
	if err != nil {
		return "", false
	}
	return out.SQL, true
}

// primaryKey fills t.PrimaryKey from PRIMARY KEY (...), a PRIMARY KEY table constraint or
// column-level PRIMARY KEY.
func (a *applier) primaryKey(t *Table, d *ast.CreateTable) error {
	keys := d.PrimaryKeys
	declared := !d.PrimaryKeyRparen.Invalid()
	for _, tc := range d.TableConstraints {
		if pk, ok := tc.Constraint.(*ast.TablePrimaryKey); ok {
			keys, declared = pk.Columns, true
		}
	}
	for _, cd := range d.Columns {
		if cd.PrimaryKey {
			keys = append(keys, &ast.IndexKey{Name: cd.Name})
			declared = true
		}
	}
	if !declared {
		return invalidf("Table %s does not specify a PRIMARY KEY.", t.Name)
	}
	for _, k := range keys {
		col, ok := t.Column(k.Name.Name)
		if !ok {
			return preconditionf("Table %s references nonexistent key column %s.", t.Name, k.Name.Name)
		}
		if t.isKeyColumn(col.Name) {
			return invalidf("Table %s references key column %s more than once.", t.Name, col.Name)
		}
		if !col.Type.Orderable() {
			return invalidf("Column %s has type %s, but is part of the primary key.", col.Name, col.Type.ColumnString())
		}
		if col.Generated != nil {
			// SQLite cannot key a table by a generated column.
			return unimplementedf("Generated key column %s.%s is not supported by the emulator", t.Name, col.Name)
		}
		t.PrimaryKey = append(t.PrimaryKey, KeyPart{Column: col.Name, Desc: k.Dir == ast.DirectionDesc})
	}
	if len(t.PrimaryKey) == 0 {
		t.SyntheticKey = EmptyKeyColumn
	}
	return nil
}

// interleave validates INTERLEAVE IN PARENT: the parent's key must prefix t's key.
func (a *applier) interleave(t *Table, c *ast.Cluster) error {
	if !c.Enforced {
		return unimplementedf("INTERLEAVE IN without PARENT is not supported by the emulator")
	}
	pname, err := pathName(c.TableName)
	if err != nil {
		return err
	}
	parent, ok := a.s.Table(pname)
	if !ok || parent.InfoSchema {
		return notFoundf("Table not found: %s", pname)
	}
	if err := checkParentKey("Table", t.Name, parent, t.PrimaryKey, t); err != nil {
		return err
	}
	if len(t.Columns) == len(parent.PrimaryKey) {
		return preconditionf("Table %s adds no columns and is not a top level table.", t.Name)
	}
	depth := 1
	for p, ok := parent, true; ok; p, ok = a.s.Table(p.Parent) {
		depth++
	}
	if depth > maxInterleaveDepth {
		return preconditionf("Table %s is too deeply nested; the limit is %d.", t.Name, maxInterleaveDepth)
	}
	t.Parent = parent.Name
	t.OnDeleteCascade = c.OnDelete == ast.OnDeleteCascade
	return nil
}

// checkParentKey checks that key (of a table or index on table t, named kind name) starts
// with parent's primary key: same columns, positions, order, type, length and nullability.
func checkParentKey(kind, name string, parent *Table, key []KeyPart, t *Table) error {
	for i, pk := range parent.PrimaryKey {
		pos := slices.IndexFunc(key, func(k KeyPart) bool { return strings.EqualFold(k.Column, pk.Column) })
		switch {
		case pos < 0:
			indexWord := ""
			if kind == "Index" {
				indexWord = "index "
			}
			return preconditionf("%s %s does not reference %sparent key column %s.", kind, name, indexWord, pk.Column)
		case pos != i:
			return preconditionf("%s %s references parent key column %s at incorrect position %d.", kind, name, pk.Column, pos+1)
		case key[i].Desc != pk.Desc:
			order := "ASC"
			if key[i].Desc {
				order = "DESC"
			}
			return preconditionf("%s %s references parent key column %s with incorrect order %s.", kind, name, pk.Column, order)
		}
		pc, _ := parent.Column(pk.Column)
		cc, _ := t.Column(pk.Column)
		switch {
		case !pc.Type.Equal(cc.Type):
			return preconditionf("%s %s references parent key column %s with incorrect type %s (should be %s).",
				kind, name, pk.Column, cc.Type.ColumnString(), pc.Type.ColumnString())
		case pc.Type.Length != cc.Type.Length:
			return preconditionf("%s %s references parent key column %s with incorrect length %s (should be %s).",
				kind, name, pk.Column, lengthString(cc.Type), lengthString(pc.Type))
		case kind == "Table" && pc.NotNull != cc.NotNull:
			return preconditionf("%s %s references parent key column %s that is %s, but child key is %s.",
				kind, name, pk.Column, nullability(pc), nullability(cc))
		}
	}
	return nil
}

func lengthString(t spantype.Type) string {
	if t.Length == 0 {
		return "MAX"
	}
	return strconv.FormatInt(t.Length, 10)
}

func nullability(c *Column) string {
	if c.NotNull {
		return "NOT NULL"
	}
	return "nullable"
}

// checkRowDeletion checks that rows a ROW DELETION POLICY deletes can take their interleaved
// descendants with them (ON DELETE CASCADE all the way down) and are not referenced by foreign
// keys, for t as a table with a policy and as a descendant of tables with one.
func (a *applier) checkRowDeletion(t *Table) error {
	if t.RowDeletionPolicy != nil {
		for children := a.s.Children(t.Name); len(children) > 0; {
			c := children[0]
			children = append(children[1:], a.s.Children(c.Name)...)
			if !c.OnDeleteCascade {
				return invalidf("Cannot create row deletion policy on %s because there is a descendant Table %s with ON DELETE NO ACTION.", t.Name, c.Name)
			}
		}
		var fks []string
		for _, other := range a.s.Tables {
			for _, fk := range other.ForeignKeys {
				if other != t && strings.EqualFold(fk.ReferencedTable, t.Name) {
					fks = append(fks, fk.Name)
				}
			}
		}
		if len(fks) > 0 {
			return invalidf("Cannot add a row deletion policy to table `%s`. It is referenced by one or more foreign keys: `%s`.", t.Name, strings.Join(fks, ", "))
		}
	}
	if t.Parent != "" && !t.OnDeleteCascade {
		for p, ok := a.s.Table(t.Parent); ok; p, ok = a.s.Table(p.Parent) {
			if p.RowDeletionPolicy != nil {
				return invalidf("Cannot create or alter table %s with ON DELETE NO ACTION because there is a row deletion policy on ancestor table %s.", t.Name, p.Name)
			}
		}
	}
	return nil
}

func rowDeletionPolicy(t *Table, p *ast.RowDeletionPolicy) (*RowDeletionPolicy, error) {
	col, ok := t.Column(p.ColumnName.Name)
	if !ok {
		return nil, invalidf("Cannot create ROW DELETION POLICY because there is no column named %s in table %s.", p.ColumnName.Name, t.Name)
	}
	if col.Type.Code != spantype.Timestamp {
		return nil, invalidf("Cannot create ROW DELETION POLICY because column %s in table %s is not of type TIMESTAMP.", col.Name, t.Name)
	}
	days, err := strconv.ParseInt(p.NumDays.Value, 0, 64)
	if err != nil || days < 0 {
		return nil, invalidf("Row deletion policy of table %s: invalid number of days %s.", t.Name, p.NumDays.Value)
	}
	return &RowDeletionPolicy{Column: col.Name, Days: days}, nil
}

// addConstraint adds a CHECK or FOREIGN KEY to t. It returns the backing index it created
// for a foreign key, if any, which the caller must create in SQLite.
func (a *applier) addConstraint(t *Table, tc *ast.TableConstraint) (*Index, error) {
	name := ""
	if tc.Name != nil {
		name = tc.Name.Name
		if err := a.constraintNameFree(t, name); err != nil {
			return nil, err
		}
	}
	switch c := tc.Constraint.(type) {
	case *ast.Check:
		return nil, a.addCheck(t, name, c)
	case *ast.ForeignKey:
		return a.addForeignKey(t, name, c)
	case *ast.TablePrimaryKey:
		return nil, nil // handled by primaryKey
	}
	return nil, unimplementedf("Unsupported constraint: %s", tc.SQL())
}

// constraintNameFree also looks at t's own constraints, since t may not be in the schema yet.
func (a *applier) constraintNameFree(t *Table, name string) error {
	if err := a.checkNameFree(name); err != nil {
		return err
	}
	if t.constraintNamed(name) {
		return preconditionf("Duplicate name in schema: %s.", name)
	}
	return nil
}

func (t *Table) constraintNamed(name string) bool {
	return slices.ContainsFunc(t.Checks, func(c *Check) bool { return strings.EqualFold(c.Name, name) }) ||
		slices.ContainsFunc(t.ForeignKeys, func(f *ForeignKey) bool { return strings.EqualFold(f.Name, name) })
}

// generatedName returns prefix_<hash of seed>, unique in the schema, as Spanner names unnamed
// constraints and backing indexes: deterministic, so re-applying the same DDL gives the same
// names.
func (a *applier) generatedName(t *Table, prefix, seed string) string {
	for i := 0; ; i++ {
		h := fnv.New64a()
		fmt.Fprintf(h, "%s\x00%d", seed, i)
		name := fmt.Sprintf("%s_%016X", prefix, h.Sum64())
		if !a.nameTaken(name) && !t.constraintNamed(name) {
			return name
		}
	}
}

func checkErrorPrefix(t *Table, name, text string) string {
	return fmt.Sprintf("Error parsing expression '%s' from check constraint '%s' in table '%s'", text, name, t.Name)
}

func (a *applier) addCheck(t *Table, name string, c *ast.Check) error {
	text := a.text(c.Expr)
	generated := name == ""
	if generated {
		name = a.generatedName(t, "CK_"+t.Name, t.Name+"\x00"+text)
	}
	sql, typ, err := a.compile(t, c.Expr, checkErrorPrefix(t, name, text))
	if err != nil {
		return err
	}
	if typ.Code != spantype.Unknown && typ.Code != spantype.Bool {
		return invalidf("Expected type BOOL; found %s in check constraint `%s`.`%s`", typ, t.Name, name)
	}
	usesColumn := false
	for _, col := range t.Columns {
		if !refersTo(c.Expr, col.Name) {
			continue
		}
		if col.AllowCommitTimestamp {
			return invalidf("Column `%s` has option commit_timestamp, which is not supported in check constraint.", col.Name)
		}
		usesColumn = usesColumn || col.Generated == nil
	}
	if !usesColumn {
		return invalidf("Check constraint `%s`.`%s` does not use any non generated column. Expression: '%s'. A check constraint expression requires at least one non-generated column as dependency.", t.Name, name, text)
	}
	t.Checks = append(t.Checks, &Check{Name: name, NameGenerated: generated, Expr: c.Expr, SQL: sql, Text: text})
	return nil
}

func (a *applier) addForeignKey(t *Table, name string, fk *ast.ForeignKey) (*Index, error) {
	if fk.Enforcement == ast.NotEnforced {
		return nil, unimplementedf("NOT ENFORCED foreign keys are not supported by the emulator")
	}
	refName, err := pathName(fk.ReferenceTable)
	if err != nil {
		return nil, err
	}
	ref, ok := a.s.Table(refName)
	if strings.EqualFold(refName, t.Name) {
		ref, ok = t, true
	}
	if !ok || ref.InfoSchema {
		return nil, notFoundf("Table not found: %s", refName)
	}
	label := name
	if label == "" {
		label = "FK_" + t.Name + "_" + ref.Name
	}
	if len(fk.Columns) != len(fk.ReferenceColumns) {
		return nil, preconditionf("The number of columns are different for table `%s` and table `%s` in foreign key `%s`.", t.Name, ref.Name, label)
	}
	cols, err := fkColumns(label, t, fk.Columns)
	if err != nil {
		return nil, err
	}
	refCols, err := fkColumns(label, ref, fk.ReferenceColumns)
	if err != nil {
		return nil, err
	}
	for i := range cols {
		if !cols[i].Type.Equal(refCols[i].Type) {
			return nil, preconditionf("The column types are different for column `%s` of table `%s` and column `%s` of table `%s` in foreign key `%s`.",
				cols[i].Name, t.Name, refCols[i].Name, ref.Name, label)
		}
	}
	generated := name == ""
	if generated {
		name = a.generatedName(t, label, strings.Join(columnNames(cols), ",")+"\x00"+strings.Join(columnNames(refCols), ","))
	}
	f := &ForeignKey{
		Name:              name,
		NameGenerated:     generated,
		Columns:           columnNames(cols),
		ReferencedTable:   ref.Name,
		ReferencedColumns: columnNames(refCols),
		OnDeleteCascade:   fk.OnDelete == ast.OnDeleteCascade,
	}
	t.ForeignKeys = append(t.ForeignKeys, f)
	return a.backingIndex(t, ref, f.ReferencedColumns), nil
}

func fkColumns(label string, t *Table, idents []*ast.Ident) ([]*Column, error) {
	var cols []*Column
	for _, id := range idents {
		col, ok := t.Column(id.Name)
		if !ok {
			return nil, preconditionf("Column `%s` not found for table `%s` in foreign key `%s`.", id.Name, t.Name, label)
		}
		if slices.Contains(cols, col) {
			return nil, preconditionf("Column `%s` used more than once for table `%s` in foreign key `%s`.", col.Name, t.Name, label)
		}
		if !col.Type.Orderable() {
			return nil, preconditionf("Column `%s` for foreign key `%s` on table `%s` has an unsupported type.", col.Name, label, t.Name)
		}
		if col.AllowCommitTimestamp {
			return nil, preconditionf("Commit timestamp column is not supported for column `%s` of table `%s` in foreign key `%s`.", col.Name, t.Name, label)
		}
		cols = append(cols, col)
	}
	return cols, nil
}

func columnNames(cols []*Column) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.Name
	}
	return out
}

// backingIndex makes sure the referenced columns of a foreign key are unique in SQLite, which
// requires the parent key of a foreign key to be the primary key or to have a unique index.
// Spanner likewise backs such a key with a managed unique index. It returns the index when it
// had to create one (nil when the columns are the primary key or an index already exists).
func (a *applier) backingIndex(t, ref *Table, cols []string) *Index {
	if len(cols) == len(ref.PrimaryKey) && !slices.ContainsFunc(cols, func(c string) bool { return !ref.isKeyColumn(c) }) {
		return nil
	}
	for _, ix := range a.s.Indexes {
		if ix.Managed && strings.EqualFold(ix.Table, ref.Name) && sameNames(ix.keyColumns(), cols) {
			return nil
		}
	}
	name := a.generatedName(t, "IDX_"+ref.Name+"_"+strings.Join(cols, "_")+"_U", ref.Name+"\x00"+strings.Join(cols, ","))
	ix := &Index{Name: name, SQLiteName: name, Table: ref.Name, Unique: true, Managed: true}
	for _, c := range cols {
		ix.Keys = append(ix.Keys, KeyPart{Column: c})
	}
	a.s.Indexes = append(a.s.Indexes, ix)
	a.s.reindex()
	return ix
}

func (ix *Index) keyColumns() []string {
	out := make([]string, len(ix.Keys))
	for i, k := range ix.Keys {
		out[i] = k.Column
	}
	return out
}

func sameNames(a, b []string) bool {
	return slices.EqualFunc(a, b, strings.EqualFold)
}

// dropUnusedBackingIndexes removes managed indexes that no foreign key needs any more.
func (a *applier) dropUnusedBackingIndexes() {
	var keep []*Index
	for _, ix := range a.s.Indexes {
		if ix.Managed && !a.indexBacksForeignKey(ix) {
			if _, ok := a.s.Table(ix.Table); ok {
				a.emit("DROP INDEX " + Quote(ix.SQLiteName))
			}
			continue
		}
		keep = append(keep, ix)
	}
	a.s.Indexes = keep
	a.s.reindex()
}

func (a *applier) indexBacksForeignKey(ix *Index) bool {
	for _, t := range a.s.Tables {
		for _, fk := range t.ForeignKeys {
			if strings.EqualFold(fk.ReferencedTable, ix.Table) && sameNames(fk.ReferencedColumns, ix.keyColumns()) {
				return true
			}
		}
	}
	return false
}
