package spanmart_test

import (
	"encoding/json"
	"io"
	"os/exec"
	"path"
	"strings"
	"testing"
)

const module = "github.com/spanmart/spanmart/"

// The layers of the repository, lowest first (docs/architecture.md, "Layers"). A package imports
// packages of its own layer or lower ones; tests may also import the local stacks' support.
const (
	layerWire       = iota // the wire and schema packages and names every other layer shares
	layerLibrary           // what every deployable links: pkg/*, gen/*
	layerSystem            // the system's own description: the roster, the operators' client
	layerDeployable        // services and the relay
	layerLocal             // emulators, the local stacks, test support
	layerTop               // commands and the end-to-end tests
)

var layerNames = []string{"wire", "library", "system", "deployable", "local", "top"}

// layer returns the layer of the repository package p (a path relative to the module).
func layer(p string) int {
	first, _, _ := strings.Cut(p, "/")
	base := path.Base(p)
	switch {
	case p == "tools/daogen/generator": // daogen's library, which gen/dao's staleness test runs too
		return layerLocal
	case p == "" || first == "e2e" || first == "tools" || p == "emulator/devstack" || strings.HasPrefix(p, "emulator/devstack/"):
		return layerTop
	case strings.HasSuffix(base, "test") || first == "emulator":
		return layerLocal
	case base == "api" || base == "schema" || base == "outboxapi" || p == "internal/localcloud" || p == "internal/atomicfile":
		return layerWire
	case first == "pkg" || first == "gen":
		return layerLibrary
	case p == "internal/topology" || p == "internal/adminclient":
		return layerSystem
	case first == "services" || first == "relay":
		return layerDeployable
	default: // the rest of internal/: the local stacks and their support
		return layerLocal
	}
}

type listedPackage struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
	Deps         []string
	Name         string
}

// listPackages is `go list -json` of every package of the module.
func listPackages(t *testing.T) []listedPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps=false", "-json=ImportPath,Name,Imports,TestImports,XTestImports,Deps", "./...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// own returns the repository-relative paths among imports.
func own(imports []string) []string {
	var out []string
	for _, imp := range imports {
		if rel, ok := strings.CutPrefix(imp, module); ok {
			out = append(out, rel)
		} else if imp == strings.TrimSuffix(module, "/") {
			out = append(out, "")
		}
	}
	return out
}

// TestImportsPointDown: no package imports one of a higher layer; the emulators, which stand in
// for Google's services, import no code of the system they run (a bug there could hide one here);
// the binaries that ship (the deployables, tools/migrate, tools/spanmartctl) link nothing of the
// local stacks; and no test below the top layer reaches into it.
func TestImportsPointDown(t *testing.T) {
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(p.ImportPath, module)
		from := layer(rel)
		for _, imp := range own(p.Imports) {
			if to := layer(imp); to > from {
				t.Errorf("%s (%s) imports %s (%s)", rel, layerNames[from], imp, layerNames[to])
			}
			if strings.HasPrefix(rel, "emulator/") && from == layerLocal && !strings.HasPrefix(imp, "emulator/") && imp != "internal/emucmd" && imp != "internal/atomicfile" {
				t.Errorf("emulator %s imports %s, code of the system it runs", rel, imp)
			}
		}
		if from < layerTop {
			for _, imp := range own(append(p.TestImports, p.XTestImports...)) {
				if layer(imp) == layerTop && imp != rel {
					t.Errorf("the tests of %s import %s (top)", rel, imp)
				}
			}
		}
		if p.Name == "main" && (from == layerDeployable || rel == "tools/migrate" || rel == "tools/spanmartctl") {
			for _, dep := range own(p.Deps) {
				if layer(dep) >= layerLocal {
					t.Errorf("%s, a binary that ships, links %s (%s)", rel, dep, layerNames[layer(dep)])
				}
			}
		}
	}
}
