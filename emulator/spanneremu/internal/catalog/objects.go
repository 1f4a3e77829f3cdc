package catalog

import (
	"slices"
	"strconv"
	"strings"

	"github.com/cloudspannerecosystem/memefish"
	"github.com/cloudspannerecosystem/memefish/ast"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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

// alterChangeStream applies ALTER CHANGE STREAM to the recorded CREATE CHANGE STREAM, so that
// Statements show the stream as it now is.
func (a *applier) alterChangeStream(d *ast.AlterChangeStream) error {
	i := slices.IndexFunc(a.s.others, func(o other) bool {
		return o.group == "CHANGE STREAM" && o.name == strings.ToUpper(d.Name.Name)
	})
	if i < 0 {
		return notFoundf("Change stream not found: %s", d.Name.Name)
	}
	parsed, err := memefish.ParseDDL("", a.s.others[i].text)
	if err != nil {
		return status.Errorf(codes.Internal, "re-parse change stream %s: %v", d.Name.Name, err)
	}
	cs := parsed.(*ast.CreateChangeStream)
	switch alt := d.ChangeStreamAlteration.(type) {
	case *ast.ChangeStreamSetFor:
		cs.For = alt.For
	case *ast.ChangeStreamDropForAll:
		cs.For = nil
	case *ast.ChangeStreamSetOptions:
		cs.Options = mergeOptions(cs.Options, alt.Options)
	}
	a.s.others[i].text = changeStreamDDL(cs)
	return nil
}

// changeStreamDDL renders a change stream as GetDatabaseDdl prints it.
func changeStreamDDL(cs *ast.CreateChangeStream) string {
	out := "CREATE CHANGE STREAM " + ident(cs.Name.Name)
	if cs.For != nil {
		out += " " + cs.For.SQL()
	}
	if cs.Options != nil {
		opts := make([]string, len(cs.Options.Records))
		for i, r := range cs.Options.Records {
			v := r.Value.SQL()
			if lit, ok := r.Value.(*ast.StringLiteral); ok {
				v = singleQuoted(lit.Value)
			}
			opts[i] = r.Name.Name + " = " + v
		}
		out += " OPTIONS ( " + strings.Join(opts, ", ") + " )"
	}
	return out
}

// mergeOptions returns old with the records of set replacing those of the same name; a NULL
// value removes the option.
func mergeOptions(old, set *ast.Options) *ast.Options {
	var records []*ast.OptionsDef
	if old != nil {
		records = slices.Clone(old.Records)
	}
	for _, r := range set.Records {
		records = slices.DeleteFunc(records, func(o *ast.OptionsDef) bool { return strings.EqualFold(o.Name.Name, r.Name.Name) })
		if _, null := r.Value.(*ast.NullLiteral); !null {
			records = append(records, r)
		}
	}
	if len(records) == 0 {
		return nil
	}
	return &ast.Options{Records: records}
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
