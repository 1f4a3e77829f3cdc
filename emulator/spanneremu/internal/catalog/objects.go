package catalog

import (
	"slices"
	"strconv"
	"strings"

	"github.com/cloudspannerecosystem/memefish/ast"
)

// This file handles the schema objects other than tables and indexes: views, sequences, and
// the statements that are only recorded (change streams, roles).

func (a *applier) createView(d *ast.CreateView) error {
	name, err := pathName(d.Name)
	if err != nil {
		return err
	}
	if err := a.checkViewTables(name, d.Query); err != nil {
		return err
	}
	v := &View{Name: name, SQL: a.text(d.Query), Query: d.Query, SecurityType: string(d.SecurityType)}
	if old, ok := a.s.View(name); ok && d.OrReplace {
		v.Name = old.Name
		*old = *v
		return nil
	}
	if err := a.checkNameFree(name); err != nil {
		return err
	}
	a.s.Views = append(a.s.Views, v)
	a.s.reindex()
	return nil
}

// checkViewTables fails when the view's query reads a table or view that does not exist (names
// defined by the query's WITH are allowed). The query is otherwise analysed only when used.
func (a *applier) checkViewTables(view string, q ast.QueryExpr) error {
	ctes := map[string]bool{}
	var missing string
	ast.Inspect(q, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CTE:
			ctes[strings.ToUpper(n.Name.Name)] = true
		case *ast.TableName:
			name := n.Table.Name
			_, isTable := a.s.Table(name)
			_, isView := a.s.View(name)
			if !isTable && !isView && !ctes[strings.ToUpper(name)] && missing == "" {
				missing = name
			}
		}
		return true
	})
	if missing != "" {
		return invalidf("Error analyzing the definition of view `%s`: Table not found: %s", view, missing)
	}
	return nil
}

func (a *applier) dropView(d *ast.DropView) error {
	name, err := pathName(d.Name)
	if err != nil {
		return err
	}
	v, ok := a.s.View(name)
	if !ok {
		if d.IfExists {
			return nil
		}
		return notFoundf("View not found: %s", name)
	}
	for _, other := range a.s.Views {
		if other != v && viewUsesTable(other, v.Name) {
			return preconditionf("Cannot drop view `%s` on which there are dependent views: %s.", v.Name, other.Name)
		}
	}
	a.s.Views = deleteItem(a.s.Views, v)
	a.s.reindex()
	return nil
}

func (a *applier) createSequence(d *ast.CreateSequence) error {
	name, err := pathName(d.Name)
	if err != nil {
		return err
	}
	if a.seqIndex(name) >= 0 && d.IfNotExists {
		return nil
	}
	if err := a.checkNameFree(name); err != nil {
		return err
	}
	seq := &Sequence{Name: name}
	for _, p := range d.Params {
		seq.applyParam(p)
	}
	if err := seq.setOptions(d.Options); err != nil {
		return err
	}
	a.s.Sequences = append(a.s.Sequences, seq)
	return nil
}

func (a *applier) seqIndex(name string) int {
	for i, seq := range a.s.Sequences {
		if strings.EqualFold(seq.Name, name) {
			return i
		}
	}
	return -1
}

func (a *applier) alterSequence(d *ast.AlterSequence) error {
	name, err := pathName(d.Name)
	if err != nil {
		return err
	}
	i := a.seqIndex(name)
	if i < 0 {
		return notFoundf("Sequence not found: %s", name)
	}
	// Sequences are shared with the schema s was cloned from: change a copy.
	seq := &Sequence{Name: a.s.Sequences[i].Name, Options: slices.Clone(a.s.Sequences[i].Options)}
	a.s.Sequences[i] = seq
	if d.RestartCounterWith != nil {
		seq.applyParam(d.RestartCounterWith)
	}
	if d.SkipRange != nil {
		seq.applyParam(d.SkipRange)
	}
	if d.NoSkipRange != nil {
		seq.applyParam(d.NoSkipRange)
	}
	return seq.setOptions(d.Options)
}

// applyParam folds a sequence clause (BIT_REVERSED_POSITIVE, SKIP RANGE, START or RESTART
// COUNTER WITH, NO SKIP RANGE) into the equivalent options, the form Spanner reports.
func (seq *Sequence) applyParam(p ast.Node) {
	switch p := p.(type) {
	case *ast.BitReversedPositive:
		seq.set("sequence_kind", "STRING", "bit_reversed_positive")
	case *ast.SkipRange:
		seq.set("skip_range_min", "INT64", p.Min.Value)
		seq.set("skip_range_max", "INT64", p.Max.Value)
	case *ast.NoSkipRange:
		seq.set("skip_range_min", "", "")
		seq.set("skip_range_max", "", "")
	case *ast.StartCounterWith:
		seq.set("start_with_counter", "INT64", p.Counter.Value)
	case *ast.RestartCounterWith:
		seq.set("start_with_counter", "INT64", p.Counter.Value)
	}
}

// setOptions merges OPTIONS (...) into the sequence; a NULL value removes the option.
func (seq *Sequence) setOptions(o *ast.Options) error {
	if o == nil {
		return nil
	}
	for _, r := range o.Records {
		name := strings.ToLower(r.Name.Name)
		switch v := r.Value.(type) {
		case *ast.StringLiteral:
			seq.set(name, "STRING", v.Value)
		case *ast.IntLiteral:
			seq.set(name, "INT64", v.Value)
		case *ast.BoolLiteral:
			seq.set(name, "BOOL", strings.ToUpper(strconv.FormatBool(v.Value)))
		case *ast.NullLiteral:
			seq.set(name, "", "")
		default:
			return invalidf("Unsupported value for option %s of sequence %s: %s", r.Name.Name, seq.Name, r.Value.SQL())
		}
	}
	return nil
}

// set replaces option name (typ "" removes it).
func (seq *Sequence) set(name, typ, value string) {
	seq.Options = slices.DeleteFunc(seq.Options, func(o SequenceOption) bool { return o.Name == name })
	if typ != "" {
		seq.Options = append(seq.Options, SequenceOption{Name: name, Type: typ, Value: value})
	}
}

func (a *applier) dropSequence(d *ast.DropSequence) error {
	name, err := pathName(d.Name)
	if err != nil {
		return err
	}
	i := a.seqIndex(name)
	if i < 0 {
		if d.IfExists {
			return nil
		}
		return notFoundf("Sequence not found: %s", name)
	}
	a.s.Sequences = append(a.s.Sequences[:i:i], a.s.Sequences[i+1:]...)
	return nil
}

// createOther records a named object the emulator does not model (change stream, role).
func (a *applier) createOther(group, name, text string) error {
	if a.s.hasOther(group, name) {
		return preconditionf("Duplicate name in schema: %s.", name)
	}
	a.s.others = append(a.s.others, other{group: group, name: strings.ToUpper(name), text: text})
	return nil
}

func (a *applier) alterOther(group, name string) error {
	if !a.s.hasOther(group, name) {
		return notFoundf("%s not found: %s", titleCase(group), name)
	}
	return nil
}

func (a *applier) dropOther(group, name string) error {
	if !a.s.hasOther(group, name) {
		return notFoundf("%s not found: %s", titleCase(group), name)
	}
	a.s.removeOther(group, name)
	return nil
}

// titleCase turns "CHANGE STREAM" into "Change stream" for messages.
func titleCase(s string) string {
	return s[:1] + strings.ToLower(s[1:])
}
