package dao_test

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/spanmart/spanmart/tools/daogen/generator"
)

const fix = "run `go generate ./gen/dao/...` from the repository root and commit the result"

// TestGeneratedCodeIsFresh regenerates every package in memory (the packages of the databases, the
// package of the shared outbox stream, outboxdb, and daotest/typesdb) and compares it with the files
// in this directory, so a migration committed without regenerating fails here (no .git needed).
func TestGeneratedCodeIsFresh(t *testing.T) {
	want, err := generator.GenerateAll()
	if err != nil {
		t.Fatal(err)
	}
	// daotest/typesdb: the golden "types" case of the generator, compiled and run by daotest.
	types, err := generator.FromDir("types", "../../tools/daogen/testdata/types")
	if err != nil {
		t.Fatal(err)
	}
	files, err := generator.Generate(types)
	if err != nil {
		t.Fatal(err)
	}
	for name, src := range files {
		want["daotest/"+types.Package()+"/"+name] = src
	}
	names := make([]string, 0, len(want))
	pkgs := map[string]bool{}
	for name := range want {
		names = append(names, name)
		pkgs[filepath.Dir(name)] = true
	}
	sort.Strings(names)
	for _, name := range names {
		got, err := os.ReadFile(filepath.FromSlash(name))
		if err != nil {
			t.Errorf("gen/dao/%s is missing: %s", name, fix)
			continue
		}
		if string(got) != string(want[name]) {
			t.Errorf("gen/dao/%s is stale (%s):\n%s", name, fix, firstDifference(string(want[name]), string(got)))
		}
	}
	// A package no longer generated (a database that left pkg/dbschema, a stream no longer shared)
	// must not keep generated files either.
	dirs, err := filepath.Glob("*db")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		pkgs[dir] = true
	}
	for pkg := range pkgs {
		files, err := filepath.Glob(filepath.Join(pkg, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if _, ok := want[filepath.ToSlash(f)]; !ok && generator.IsGenerated(f) {
				t.Errorf("gen/dao/%s is generated code of a table or package that is no longer generated: %s", filepath.ToSlash(f), fix)
			}
		}
	}
}

func firstDifference(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return "first difference at line " + strconv.Itoa(i+1) + ":\n  generated: " + wl + "\n  committed: " + gl
		}
	}
	return "(no line differs)"
}
