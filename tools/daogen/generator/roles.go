package generator

import (
	"fmt"
	"strings"
)

// Roles give the shared outbox and inbox tables (docs/architecture.md, "Databases and migrations") typed builders beyond the
// per-table code. They are driven by the tables present: the package that has the table gets the
// builder (outboxdb, the package of the shared outbox stream, for the service databases), and the builder follows the table's columns (a column added by a later migration becomes a
// field). A role only names what is fixed about the table's use; a missing column is an error.

// fixedKind says what an append role writes into a column whatever the caller gives.
type fixedKind int

const (
	fixCommitTimestamp fixedKind = iota // spanner.CommitTimestamp (NOT NULL allow_commit_timestamp)
	fixNull                             // NULL (a nullable column)
	fixZero                             // 0 (a NOT NULL number)
)

// appendRole: an insert-only builder with some columns fixed and some nullable columns required.
type appendRole struct {
	Table    string
	Fixed    map[string]fixedKind
	Required []string // nullable columns the caller must give: typed NOT NULL in the builder
	Doc      string
}

// insertOrIgnoreRole: an INSERT OR IGNORE DML statement writing PENDING_COMMIT_TIMESTAMP() into the
// commit-timestamp columns and parameters into the others; its row count tells a first insert (1)
// from a duplicate (0).
type insertOrIgnoreRole struct {
	Table string
	Doc   string
}

var appendRoles = []appendRole{{
	Table: "OutboxEvents",
	Fixed: map[string]fixedKind{
		"CreatedAt": fixCommitTimestamp, "PublishedAt": fixNull, "Attempts": fixZero,
		"NextAttemptAt": fixNull, "LastError": fixNull, "QuarantinedAt": fixNull,
		"ReplayGeneration": fixZero, "ReplayReason": fixNull, "PublishedTo": fixNull, "AuditShard": fixNull,
	},
	Required: []string{"PendingShard"},
	Doc:      "an unpublished outbox row: the relay picks it up through index OutboxPending",
}}

var insertOrIgnoreRoles = []insertOrIgnoreRole{{
	Table: "ProcessedEvents",
	Doc:   "the inbox record of a consumer: run it in the transaction of the state change and skip the event when the row count is 0 (a duplicate delivery)",
}, {
	Table: "ProviderEvents",
	Doc:   "the record of a provider's webhook: run it in the transaction that applies the webhook and skip it when the row count is 0 (the provider delivered it again)",
}}

type outboxView struct {
	Type   string
	Doc    string
	Fields []fieldView
	Values []string // Go expression per writable column, in v.Write order
	Fixed  []string // "CreatedAt = commit timestamp", ...
}

type inboxView struct {
	Func   string
	Doc    string
	Params []fieldView
	SQL    string
}

func (v *tableView) roles(n names, imports map[string]bool) error {
	for _, r := range appendRoles {
		if r.Table != v.T.Name {
			continue
		}
		o := &outboxView{Type: v.Type + "Append", Doc: r.Doc}
		required := map[string]bool{}
		for _, c := range r.Required {
			col := v.T.Column(c)
			if col == nil || col.NotNull || col.Generated {
				return fmt.Errorf("append role: table %s needs a nullable column %s", v.T.Name, c)
			}
			required[col.Name] = true
		}
		for c, kind := range r.Fixed {
			col := v.T.Column(c)
			ok := col != nil && !col.Generated
			switch kind {
			case fixCommitTimestamp:
				ok = ok && col.CommitTimestamp && col.NotNull
			case fixNull:
				ok = ok && !col.NotNull
			case fixZero:
				ok = ok && col.NotNull && !col.Type.Array && (col.Type.Base == "INT64" || col.Type.Base == "FLOAT64")
			}
			if !ok {
				return fmt.Errorf("append role: table %s has no suitable column %s", v.T.Name, c)
			}
		}
		for _, f := range v.Write {
			kind, fixed := r.Fixed[f.Column]
			switch {
			case !fixed:
				if required[f.Column] {
					col := v.T.Column(f.Column)
					f.Type, _ = goType(col.Type, true)
				}
				o.Fields = append(o.Fields, f)
				o.Values = append(o.Values, "a."+f.Name)
			case kind == fixCommitTimestamp:
				o.Values = append(o.Values, "spanner.CommitTimestamp")
				o.Fixed = append(o.Fixed, f.Column+" = the commit timestamp")
			case kind == fixNull && strings.HasPrefix(f.Type, "[]"):
				o.Values = append(o.Values, "nil") // an empty slice would write an empty array, not NULL
				o.Fixed = append(o.Fixed, f.Column+" = NULL")
			case kind == fixNull:
				o.Values = append(o.Values, f.Type+"{}")
				o.Fixed = append(o.Fixed, f.Column+" = NULL")
			case kind == fixZero:
				o.Values = append(o.Values, f.Type+"(0)")
				o.Fixed = append(o.Fixed, f.Column+" = 0")
			}
		}
		if err := n.add(o.Type, "append role of "+v.T.Name); err != nil {
			return err
		}
		v.Outbox = o
	}
	for _, r := range insertOrIgnoreRoles {
		if r.Table != v.T.Name {
			continue
		}
		in := &inboxView{Func: "InsertOrIgnore" + v.Type, Doc: r.Doc}
		var cols, vals []string
		for _, f := range v.Write {
			cols = append(cols, f.Column)
			if v.T.Column(f.Column).CommitTimestamp {
				vals = append(vals, "PENDING_COMMIT_TIMESTAMP()")
				continue
			}
			vals = append(vals, "@"+f.Column)
			in.Params = append(in.Params, f)
		}
		in.SQL = fmt.Sprintf("INSERT OR IGNORE INTO %s (%s) VALUES (%s)", v.T.Name, strings.Join(cols, ", "), strings.Join(vals, ", "))
		if err := n.add(in.Func, "insert-or-ignore role of "+v.T.Name); err != nil {
			return err
		}
		v.Inbox = in
	}
	return nil
}
