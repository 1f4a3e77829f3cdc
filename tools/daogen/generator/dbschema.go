package generator

import (
	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/migrate"
)

// FromMigrations turns a database of pkg/migrate into the generator's input.
func FromMigrations(db migrate.Database) (Database, error) {
	migs, err := db.Migrations()
	if err != nil {
		return Database{}, err
	}
	d := Database{Name: db.Name}
	for _, s := range db.Streams {
		d.Sources = append(d.Sources, s.Dir)
	}
	for _, m := range migs {
		for _, st := range m.Statements {
			d.Statements = append(d.Statements, Statement{File: m.Path, SQL: st})
		}
	}
	return d, nil
}

// GenerateAll generates the package of every database of pkg/dbschema (or only those named), keyed
// by "<package>/<file>".
func GenerateAll(only ...string) (map[string][]byte, error) {
	want := map[string]bool{}
	for _, n := range only {
		want[n] = true
	}
	out := map[string][]byte{}
	for _, db := range dbschema.Databases() {
		if len(only) > 0 && !want[db.Name] {
			continue
		}
		d, err := FromMigrations(db)
		if err != nil {
			return nil, err
		}
		files, err := Generate(d)
		if err != nil {
			return nil, err
		}
		for name, src := range files {
			out[d.Package()+"/"+name] = src
		}
	}
	return out, nil
}
