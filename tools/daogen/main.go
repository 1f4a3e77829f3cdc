// Command daogen generates the typed Spanner data access packages of gen/dao from the migrations
// of every database listed in pkg/dbschema: one package per database for the tables of its own
// streams, and one per stream that several databases share (outboxdb for the outbox stream). It is
// run by go generate (see gen/dao/doc.go):
//
//	go run ./tools/daogen -out gen/dao            # from the repository root
//	go generate ./gen/dao/...                     # the same, through the directive
//	go run ./tools/daogen -schema DIR -name NAME -out OUT   # one directory of migrations → OUT/NAMEdb
//
// Output is deterministic, so running it again is a no-op; files of dropped tables (and of packages
// no longer generated) are removed. -db also generates the packages of the streams the named
// databases share.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spanmart/spanmart/tools/daogen/generator"
)

func main() {
	out := flag.String("out", "gen/dao", "directory of the generated packages (one subdirectory <db>db per database)")
	dbs := flag.String("db", "", "comma-separated databases to generate (default: all of pkg/dbschema)")
	schema := flag.String("schema", "", "generate from this directory of migrations instead of pkg/dbschema (with -name)")
	name := flag.String("name", "", "with -schema: the database name; the package is <name>db")
	flag.Parse()
	var err error
	if *schema != "" {
		err = runDir(*out, *name, *schema)
	} else {
		err = run(*out, *dbs)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "daogen:", err)
		os.Exit(1)
	}
}

func run(out, dbs string) error {
	var only []string
	if dbs != "" {
		only = strings.Split(dbs, ",")
	}
	files, err := generator.GenerateAll(only...)
	if err != nil {
		return err
	}
	byPkg := map[string]map[string][]byte{}
	for name, src := range files {
		pkg, file, _ := strings.Cut(name, "/")
		if byPkg[pkg] == nil {
			byPkg[pkg] = map[string][]byte{}
		}
		byPkg[pkg][file] = src
	}
	if len(only) == 0 {
		// A database that left pkg/dbschema, or a stream no longer shared: its package loses its
		// generated files (hand-written ones stay), and its directory if nothing is left in it.
		dirs, err := filepath.Glob(filepath.Join(out, "*db"))
		if err != nil {
			return err
		}
		for _, dir := range dirs {
			if _, ok := byPkg[filepath.Base(dir)]; !ok {
				if err := generator.Write(dir, nil); err != nil {
					return err
				}
			}
		}
	}
	pkgs := make([]string, 0, len(byPkg))
	for p := range byPkg {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		if err := generator.Write(filepath.Join(out, p), byPkg[p]); err != nil {
			return err
		}
	}
	return nil
}

func runDir(out, name, dir string) error {
	if name == "" {
		return fmt.Errorf("-schema needs -name")
	}
	d, err := generator.FromDir(name, dir)
	if err != nil {
		return err
	}
	files, err := generator.Generate(d)
	if err != nil {
		return err
	}
	return generator.Write(filepath.Join(out, d.Package()), files)
}
