package fuzzall_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/internal/fuzzall"
)

// writeTree writes files (slash paths relative to a new temporary directory) and returns the
// directory.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, text := range files {
		path := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// Find applies go test's rules: Fuzz followed by anything but a lower-case letter, one
// *testing.F parameter (under whatever name testing is imported), test files only, build
// constraints honoured, testdata and hidden directories skipped.
func TestFind(t *testing.T) {
	root := writeTree(t, map[string]string{
		"go.mod": "module example.com/m\n\ngo 1.26\n",
		"a/a_test.go": `package a
import "testing"
func FuzzA(f *testing.F) {}
func Fuzz(f *testing.F) {}
func Fuzz_x(f *testing.F) {}
func Fuzzy(f *testing.F) {}
func FuzzTwo(f *testing.F, n int) {}
func FuzzT(t *testing.T) {}
type r struct{}
func (r) FuzzMethod(f *testing.F) {}
`,
		"a/b/b_test.go": `package b
import tst "testing"
func FuzzAliased(f *tst.F) {}
`,
		"a/a.go":               "package a\nimport \"testing\"\nfunc FuzzNotATest(f *testing.F) {}\n",
		"a/ignored_test.go":    "//go:build ignore\n\npackage a\nimport \"testing\"\nfunc FuzzIgnored(f *testing.F) {}\n",
		"a/testdata/x_test.go": "package x\nimport \"testing\"\nfunc FuzzInTestdata(f *testing.F) {}\n",
		".hidden/h_test.go":    "package h\nimport \"testing\"\nfunc FuzzHidden(f *testing.F) {}\n",
		"c/other_test.go":      "package c\nimport testing \"example.com/m/fake\"\nfunc FuzzFake(f *testing.F) {}\n",
		"c/noimport_test.go":   "package c\nfunc FuzzNoImport(f *F) {}\ntype F struct{}\n",
		"d/d_test.go":          "package d\nimport \"testing\"\nfunc FuzzD(f *testing.F) {}\n",
		"d/d_external_test.go": "package d_test\nimport \"testing\"\nfunc FuzzDExternal(f *testing.F) {}\n",
	})
	got, err := fuzzall.Find(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []fuzzall.Target{
		{Dir: "a", Name: "Fuzz"}, {Dir: "a", Name: "FuzzA"}, {Dir: "a", Name: "Fuzz_x"},
		{Dir: "a/b", Name: "FuzzAliased"},
		{Dir: "d", Name: "FuzzD"}, {Dir: "d", Name: "FuzzDExternal"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Find (-want +got):\n%s", diff)
	}
}

// Run passes a target that holds and leaves nothing behind; one the fuzzer breaks fails, naming
// the input go test wrote to testdata/fuzz, which stays there to reproduce the failure.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and fuzzes a module: not short")
	}
	root := writeTree(t, map[string]string{
		"go.mod": "module example.com/m\n\ngo 1.26\n",
		"p/p_test.go": `package p

import "testing"

func FuzzHolds(f *testing.F) {
	f.Add("a")
	f.Fuzz(func(t *testing.T, s string) { _ = len(s) })
}

func FuzzBreaks(f *testing.F) {
	f.Add("a")
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 1 {
			t.Fatalf("%q is longer than one byte", s)
		}
	})
}
`,
	})
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			t.Skip("no go command")
		}
	}
	ctx := context.Background()
	if out, err := fuzzall.Run(ctx, goBin, root, fuzzall.Target{Dir: "p", Name: "FuzzHolds"}, "1s"); err != nil {
		t.Fatalf("FuzzHolds: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(root, "p", "testdata")); !os.IsNotExist(err) {
		t.Errorf("a passing run left p/testdata behind (stat: %v)", err)
	}

	out, err := fuzzall.Run(ctx, goBin, root, fuzzall.Target{Dir: "p", Name: "FuzzBreaks"}, "30s")
	if err == nil {
		t.Fatalf("FuzzBreaks passed:\n%s", out)
	}
	if !strings.Contains(string(out), "is longer than one byte") {
		t.Errorf("the output does not show the failure:\n%s", out)
	}
	entries, rerr := os.ReadDir(filepath.Join(root, "p", "testdata", "fuzz", "FuzzBreaks"))
	if rerr != nil || len(entries) != 1 {
		t.Fatalf("the failing input was not kept in testdata (%v, %v)", entries, rerr)
	}
	if crasher := filepath.Join("p", "testdata", "fuzz", "FuzzBreaks", entries[0].Name()); !strings.Contains(err.Error(), crasher) {
		t.Errorf("error %q does not name the failing input %s", err, crasher)
	}
}
