package catalog

import (
	"fmt"
	"strings"

	"github.com/cloudspannerecosystem/memefish/token"
)

// render regenerates Statements from the model, one statement per object in creation order,
// formatted the way Spanner's GetDatabaseDdl prints them.
//
// A foreign key is printed inside its table's CREATE TABLE when the referenced table is created
// before it, and otherwise as an ALTER TABLE ADD CONSTRAINT right after the referenced table's
// CREATE TABLE, so that the statements can be applied in order.
func (s *Schema) render() []string {
	created := map[string]bool{}
	deferred := map[string][]string{} // upper-cased referenced table -> ALTER TABLE statements
	var out []string
	for _, o := range s.objects {
		switch o.kind {
		case objTable:
			t, ok := s.tables[o.name]
			if !ok {
				continue
			}
			created[o.name] = true
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
			out = append(out, deferred[o.name]...)
		case objIndex:
			if ix, ok := s.indexes[o.name]; ok {
				out = append(out, ix.ddl())
			}
		case objView:
			if v, ok := s.views[o.name]; ok {
				out = append(out, fmt.Sprintf("CREATE VIEW %s SQL SECURITY %s AS %s", ident(v.Name), v.SecurityType, v.SQL))
			}
		case objSequence:
			for _, seq := range s.Sequences {
				if strings.EqualFold(seq.Name, o.name) {
					out = append(out, seq.ddl())
				}
			}
		default:
			out = append(out, o.text)
		}
	}
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
		fmt.Fprintf(&b, "  CONSTRAINT %s CHECK(%s),\n", ident(c.Name), c.Text)
	}
	fmt.Fprintf(&b, ") PRIMARY KEY(%s)", keyList(t.PrimaryKey))
	if t.Parent != "" {
		fmt.Fprintf(&b, ",\n  INTERLEAVE IN PARENT %s", ident(t.Parent))
		if t.OnDeleteCascade {
			b.WriteString(" ON DELETE CASCADE")
		}
	}
	if p := t.RowDeletionPolicy; p != nil {
		fmt.Fprintf(&b, ",\n  ROW DELETION POLICY (%s)", p.expression())
	}
	return b.String()
}

func (fk *ForeignKey) ddl() string {
	sql := fmt.Sprintf("CONSTRAINT %s FOREIGN KEY(%s) REFERENCES %s(%s)", ident(fk.Name), identList(fk.Columns), ident(fk.ReferencedTable), identList(fk.ReferencedColumns))
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
			v = token.QuoteSQLString(v)
		case "BOOL":
			v = strings.ToLower(v)
		}
		opts[i] = "  " + o.Name + " = " + v
	}
	return "CREATE SEQUENCE " + ident(seq.Name) + " OPTIONS (\n" + strings.Join(opts, ",\n") + "\n)"
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
