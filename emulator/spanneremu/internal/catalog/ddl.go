package catalog

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cloudspannerecosystem/memefish/token"
)

// render regenerates Statements from the model, formatted and ordered as the official
// emulator's GetDatabaseDdl prints them: database options, sequences, each table followed by
// its indexes (by name; managed ones omitted), change streams, views, then roles and grants.
//
// A foreign key is printed inside its table's CREATE TABLE when the referenced table comes
// before it, and otherwise as an ALTER TABLE ADD CONSTRAINT right after the referenced table,
// so that the statements can be applied in order.
func (s *Schema) render() []string {
	var out []string
	others := func(group string) {
		for _, o := range s.others {
			if o.group == group {
				out = append(out, o.text)
			}
		}
	}
	others("DATABASE")
	for _, seq := range s.Sequences {
		out = append(out, seq.ddl())
	}
	created := map[string]bool{}
	deferred := map[string][]string{} // upper-cased referenced table -> ALTER TABLE statements
	for _, t := range s.userTables() {
		key := strings.ToUpper(t.Name)
		created[key] = true
		var inline []*ForeignKey
		for _, fk := range t.ForeignKeys {
			ref := strings.ToUpper(fk.ReferencedTable)
			if created[ref] {
				inline = append(inline, fk)
			} else {
				deferred[ref] = append(deferred[ref], fmt.Sprintf("ALTER TABLE %s ADD %s", ident(t.Name), fk.ddl()))
			}
		}
		out = append(out, t.ddl(inline))
		out = append(out, deferred[key]...)
		indexes := slices.DeleteFunc(s.TableIndexes(t.Name), func(ix *Index) bool { return ix.Managed })
		slices.SortFunc(indexes, func(a, b *Index) int { return strings.Compare(a.Name, b.Name) })
		for _, ix := range indexes {
			out = append(out, ix.ddl())
		}
	}
	others("CHANGE STREAM")
	for _, v := range s.Views {
		out = append(out, fmt.Sprintf("CREATE VIEW %s SQL SECURITY %s AS %s", ident(v.Name), v.SecurityType, v.SQL))
	}
	others("ROLE")
	others("GRANT")
	return out
}

// ident quotes a name with backticks when GoogleSQL needs it (keywords, odd characters).
func ident(name string) string { return token.QuoteSQLIdent(name) }

func identList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = ident(n)
	}
	return strings.Join(q, ", ")
}

func keyList(keys []KeyPart) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = ident(k.Column)
		if k.Desc {
			q[i] += " DESC"
		}
	}
	return strings.Join(q, ", ")
}

// ddl renders the table's CREATE TABLE with the given foreign keys.
func (t *Table) ddl(fks []*ForeignKey) string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE %s (\n", ident(t.Name))
	for _, c := range t.Columns {
		fmt.Fprintf(&b, "  %s %s", ident(c.Name), c.Type.ColumnString())
		if c.NotNull {
			b.WriteString(" NOT NULL")
		}
		if c.Default != nil {
			fmt.Fprintf(&b, " DEFAULT (%s)", c.DefaultText)
		}
		if c.Generated != nil {
			fmt.Fprintf(&b, " AS (%s)", c.GeneratedText)
			if c.Stored {
				b.WriteString(" STORED")
			}
		}
		if c.Hidden {
			b.WriteString(" HIDDEN")
		}
		if c.AllowCommitTimestamp {
			b.WriteString(" OPTIONS (\n    allow_commit_timestamp = true\n  )")
		}
		b.WriteString(",\n")
	}
	for _, fk := range fks {
		fmt.Fprintf(&b, "  %s,\n", fk.ddl())
	}
	for _, c := range t.Checks {
		b.WriteString("  ")
		if !c.NameGenerated {
			fmt.Fprintf(&b, "CONSTRAINT %s ", ident(c.Name))
		}
		fmt.Fprintf(&b, "CHECK(%s),\n", c.Text)
	}
	fmt.Fprintf(&b, ") PRIMARY KEY(%s)", keyList(t.PrimaryKey))
	if t.Parent != "" {
		onDelete := "NO ACTION"
		if t.OnDeleteCascade {
			onDelete = "CASCADE"
		}
		fmt.Fprintf(&b, ",\n  INTERLEAVE IN PARENT %s ON DELETE %s", ident(t.Parent), onDelete)
	}
	if p := t.RowDeletionPolicy; p != nil {
		fmt.Fprintf(&b, ", ROW DELETION POLICY (%s)", p.expression())
	}
	return b.String()
}

// ddl renders the foreign key as a table element; a generated name is not printed.
func (fk *ForeignKey) ddl() string {
	sql := ""
	if !fk.NameGenerated {
		sql = "CONSTRAINT " + ident(fk.Name) + " "
	}
	sql += fmt.Sprintf("FOREIGN KEY(%s) REFERENCES %s(%s)", identList(fk.Columns), ident(fk.ReferencedTable), identList(fk.ReferencedColumns))
	if fk.OnDeleteCascade {
		sql += " ON DELETE CASCADE"
	}
	return sql
}

// expression renders the policy as INFORMATION_SCHEMA.TABLES.ROW_DELETION_POLICY_EXPRESSION
// shows it.
func (p *RowDeletionPolicy) expression() string {
	return fmt.Sprintf("OLDER_THAN(%s, INTERVAL %d DAY)", ident(p.Column), p.Days)
}

// ddl renders the sequence's CREATE SEQUENCE, with its clauses folded into OPTIONS.
func (seq *Sequence) ddl() string {
	if len(seq.Options) == 0 {
		return "CREATE SEQUENCE " + ident(seq.Name)
	}
	opts := make([]string, len(seq.Options))
	for i, o := range seq.Options {
		v := o.Value
		switch o.Type {
		case "STRING":
			v = singleQuoted(v)
		case "BOOL":
			v = strings.ToLower(v)
		}
		opts[i] = "  " + o.Name + " = " + v
	}
	return "CREATE SEQUENCE " + ident(seq.Name) + " OPTIONS (\n" + strings.Join(opts, ",\n") + "\n)"
}

// singleQuoted renders s as a single-quoted GoogleSQL string literal.
func singleQuoted(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`)
	return "'" + r.Replace(s) + "'"
}

// ddl renders the index's CREATE INDEX.
func (ix *Index) ddl() string {
	var b strings.Builder
	b.WriteString("CREATE ")
	if ix.Unique {
		b.WriteString("UNIQUE ")
	}
	if ix.NullFiltered {
		b.WriteString("NULL_FILTERED ")
	}
	fmt.Fprintf(&b, "INDEX %s ON %s(%s)", ident(ix.Name), ident(ix.Table), keyList(ix.Keys))
	if len(ix.Storing) > 0 {
		fmt.Fprintf(&b, " STORING (%s)", identList(ix.Storing))
	}
	if ix.Interleave != "" {
		fmt.Fprintf(&b, ", INTERLEAVE IN %s", ident(ix.Interleave))
	}
	return b.String()
}
