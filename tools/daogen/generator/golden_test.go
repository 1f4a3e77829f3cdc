package generator

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/*/ from the generator's output")

// loadCase reads the migrations of testdata/<name>/ (NNNN_description.sql, in version order).
func loadCase(t *testing.T, dir string) Database {
	t.Helper()
	d, err := FromDir(filepath.Base(dir), dir)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestGolden generates the package of every testdata/<case>/ and compares each file with
// testdata/<case>/<file>.golden. Run `go test ./tools/daogen/... -update` to accept a change.
func TestGolden(t *testing.T) {
	dirs, err := filepath.Glob("../testdata/*")
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatal("no golden cases in ../testdata")
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			files, err := Generate(loadCase(t, dir))
			if err != nil {
				t.Fatal(err)
			}
			if *update {
				old, _ := filepath.Glob(filepath.Join(dir, "*.golden"))
				for _, f := range old {
					os.Remove(f)
				}
				for name, src := range files {
					if err := os.WriteFile(filepath.Join(dir, name+".golden"), src, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				return
			}
			golden, _ := filepath.Glob(filepath.Join(dir, "*.golden"))
			var want []string
			for _, g := range golden {
				want = append(want, strings.TrimSuffix(filepath.Base(g), ".golden"))
			}
			if diff := cmp.Diff(want, sortedKeys(files)); diff != "" {
				t.Errorf("generated files (-golden +generated):\n%s", diff)
			}
			for name, src := range files {
				g, err := os.ReadFile(filepath.Join(dir, name+".golden"))
				if err != nil {
					continue
				}
				if diff := cmp.Diff(string(g), string(src)); diff != "" {
					t.Errorf("%s (-golden +generated):\n%s", name, diff)
				}
			}
		})
	}
}

// TestDeterministic: generating twice gives the same bytes (no map order leaks into the output).
func TestDeterministic(t *testing.T) {
	first, err := GenerateAll()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		again, err := GenerateAll()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(first, again); diff != "" {
			t.Fatalf("second generation differs:\n%s", diff)
		}
	}
}
