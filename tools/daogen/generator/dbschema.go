package generator

import (
	"fmt"
	"reflect"

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
			d.Statements = append(d.Statements, Statement{File: m.Path, SQL: st, Stream: m.Stream})
		}
	}
	return d, nil
}

// GenerateAll generates the packages of the databases of pkg/dbschema (or only those named, and the
// streams they share), keyed by "<package>/<file>"; see GenerateDatabases.
func GenerateAll(only ...string) (map[string][]byte, error) {
	return GenerateDatabases(dbschema.Databases(), only...)
}

// GenerateDatabases generates a package per database of dbs (or only of those named) and, for every
// stream that more than one database of dbs carries, one package of the stream's tables, named after
// the stream (outbox → outboxdb) and shared by those databases, whose packages leave the tables out.
// A database whose other streams change a table of a shared stream is an error: the one package of
// the stream would be wrong for it. The files are keyed by "<package>/<file>".
func GenerateDatabases(dbs []migrate.Database, only ...string) (map[string][]byte, error) {
	want := map[string]bool{}
	for _, n := range only {
		want[n] = true
	}
	// Who carries which stream, over every database: sharing does not depend on the selection.
	carriers := map[string][]string{}
	streams := map[string]migrate.Stream{}
	for _, db := range dbs {
		for _, s := range db.Streams {
			if prev, ok := streams[s.Name]; ok && prev.Dir != s.Dir {
				return nil, fmt.Errorf("stream %s is %s in database %s but %s in database %s",
					s.Name, prev.Dir, carriers[s.Name][0], s.Dir, db.Name)
			}
			streams[s.Name] = s
			carriers[s.Name] = append(carriers[s.Name], db.Name)
		}
	}
	out := map[string][]byte{}
	add := func(d Database, files map[string][]byte) {
		for name, src := range files {
			out[d.Package()+"/"+name] = src
		}
	}
	dbNames := map[string]bool{}
	for _, db := range dbs {
		dbNames[db.Name] = true
	}
	sharedSchemas := map[string]*Schema{}
	var sharedOrder []string // in order of first use
	for _, db := range dbs {
		if len(only) > 0 && !want[db.Name] {
			continue
		}
		d, err := FromMigrations(db)
		if err != nil {
			return nil, err
		}
		d.Sources = nil
		for _, s := range db.Streams {
			if len(carriers[s.Name]) < 2 {
				d.Sources = append(d.Sources, s.Dir)
				continue
			}
			if d.Shared == nil {
				d.Shared = map[string]string{}
			}
			d.Shared[s.Name] = Database{Name: s.Name}.Package()
			if _, done := sharedSchemas[s.Name]; !done {
				sd, err := sharedStream(s, carriers[s.Name], dbNames)
				if err != nil {
					return nil, err
				}
				ss, err := LoadSchema(sd.Statements)
				if err != nil {
					return nil, fmt.Errorf("stream %s (shared by %v): %w", s.Name, sd.SharedBy, err)
				}
				files, err := GenerateSchema(sd, ss)
				if err != nil {
					return nil, err
				}
				add(sd, files)
				sharedSchemas[s.Name] = ss
				sharedOrder = append(sharedOrder, s.Name)
			}
		}
		if len(d.Sources) == 0 {
			d.Sources = []string{db.Streams[0].Dir} // only shared streams: name the first
		}
		s, err := LoadSchema(d.Statements)
		if err != nil {
			return nil, fmt.Errorf("database %s: %w", d.Name, err)
		}
		files, err := GenerateSchema(d, s)
		if err != nil {
			return nil, err
		}
		// The cross-stream check of GenerateSchema names the statement; this one is the guarantee:
		// each table of a shared stream is in the database exactly as the stream alone defines it.
		for _, name := range sharedOrder {
			if d.Shared[name] == "" {
				continue
			}
			for _, st := range sharedSchemas[name].Tables {
				if t := s.Table(st.Name); t == nil || !reflect.DeepEqual(t, st) {
					return nil, fmt.Errorf("database %s: table %s is not as stream %s defines it, so package %s does not fit it",
						d.Name, st.Name, name, d.Shared[name])
				}
			}
		}
		add(d, files)
	}
	return out, nil
}

// sharedStream is the generator's input for the package of stream s, carried by the databases by.
func sharedStream(s migrate.Stream, by []string, dbNames map[string]bool) (Database, error) {
	d, err := FromMigrations(migrate.Database{Name: s.Name, Streams: []migrate.Stream{s}})
	if err != nil {
		return Database{}, err
	}
	if dbNames[s.Name] {
		// A database called like the stream would get the same package.
		return Database{}, fmt.Errorf("stream %s is shared by databases %v and also the name of a database: both would be package %s",
			s.Name, by, d.Package())
	}
	d.SharedBy = by
	return d, nil
}
