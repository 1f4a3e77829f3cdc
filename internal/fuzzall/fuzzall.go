// Package fuzzall finds every fuzz target of the repository and runs one with go test -fuzz. The
// root package's TestFuzzTargets (a short run of each, in the README's test command) and
// tools/fuzzall (make fuzz: a longer run) both take the list from Find, so a target added
// anywhere is fuzzed without being listed anywhere.
package fuzzall

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spanmart/spanmart/internal/childproc"
)

// Target is one fuzz target: func Name(f *testing.F) in the test files of the package in Dir.
type Target struct {
	Dir  string // the package directory relative to the root, slash-separated: "pkg/platform"
	Name string // "FuzzDecodeJSONStrict"
}

// Package is the target's package as go test names it: "./pkg/platform".
func (t Target) Package() string { return "./" + t.Dir }

func (t Target) String() string { return t.Dir + "." + t.Name }

// Find returns the fuzz targets of the Go test files under root, sorted by directory and name: a
// top-level func named Fuzz followed by anything but a lower-case letter (the go test rule),
// taking a single *testing.F, in a file the default build context compiles. Hidden directories
// and testdata are skipped, as the go command skips them.
func Find(root string) ([]Target, error) {
	var out []Target
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed while the walk ran
		}
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, "_test.go") || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			return nil
		}
		dir := filepath.Dir(path)
		ok, err := build.Default.MatchFile(dir, name)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if !ok {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("find fuzz targets: %w", err)
		}
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			return err
		}
		for _, name := range targets(f) {
			out = append(out, Target{Dir: filepath.ToSlash(rel), Name: name})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Target) int { return strings.Compare(a.String(), b.String()) })
	return out, nil
}

// targets returns the names of the fuzz targets f declares.
func targets(f *ast.File) []string {
	testing := ""
	for _, imp := range f.Imports {
		if p, err := strconv.Unquote(imp.Path.Value); err == nil && p == "testing" {
			testing = "testing"
			if imp.Name != nil {
				testing = imp.Name.Name
			}
		}
	}
	if testing == "" || testing == "_" || testing == "." {
		return nil
	}
	var names []string
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Recv != nil || !isFuzzName(fn.Name.Name) || fn.Type.TypeParams != nil {
			continue
		}
		params := fn.Type.Params.List
		if len(params) != 1 || len(params[0].Names) > 1 {
			continue
		}
		star, ok := params[0].Type.(*ast.StarExpr)
		if !ok {
			continue
		}
		sel, ok := star.X.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "F" {
			continue
		}
		if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == testing {
			names = append(names, fn.Name.Name)
		}
	}
	return names
}

// isFuzzName is go test's rule: "Fuzz" alone, or followed by a rune that is not lower case.
func isFuzzName(name string) bool {
	rest, ok := strings.CutPrefix(name, "Fuzz")
	if !ok {
		return false
	}
	if rest == "" {
		return true
	}
	r, _ := utf8.DecodeRuneInString(rest)
	return !unicode.IsLower(r)
}

// Run fuzzes t for fuzztime (a go test -fuzztime value: "2s", "30s", "1000x") with the go command
// goBin, from root, passing flags (more go test flags: "-parallel", "1") too, and returns the
// command's combined output. A failure (a crasher, which go test
// writes to the package's testdata/fuzz/<Name>/ for the developer to reproduce and commit as a
// seed) is an error that names the new corpus files. A run that passes must leave the package's
// testdata untouched (go test keeps what it learns in GOCACHE); one that does not is an error too.
func Run(ctx context.Context, goBin, root string, t Target, fuzztime string, flags ...string) ([]byte, error) {
	corpus := filepath.Join(root, filepath.FromSlash(t.Dir), "testdata", "fuzz", t.Name)
	before, err := files(corpus)
	if err != nil {
		return nil, err
	}
	args := append([]string{"test", "-run", "^$", "-fuzz", "^" + t.Name + "$", "-fuzztime", fuzztime}, flags...)
	cmd := exec.Command(goBin, append(args, t.Package())...)
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// In a process group of its own, so that a cancelled run stops the test binary and its fuzz
	// workers too, not only the go command.
	p, err := childproc.Run(cmd, syscall.SIGKILL, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t, err)
	}
	select {
	case <-p.Done():
	case <-ctx.Done():
		p.Stop(10*time.Second, nil)
	}
	runErr := p.Err()
	if ctx.Err() != nil {
		runErr = fmt.Errorf("stopped: %w", ctx.Err())
	}
	after, err := files(corpus)
	if err != nil {
		return out.Bytes(), err
	}
	var added []string
	for _, f := range after {
		if !slices.Contains(before, f) {
			added = append(added, filepath.Join(t.Dir, "testdata", "fuzz", t.Name, f))
		}
	}
	switch {
	case runErr != nil && len(added) == 0 && ctx.Err() == nil && coordinatorRace(out.Bytes(), t.Name):
		// Go's fuzzing coordinator can report its own -fuzztime deadline as a failure of the
		// target (go.dev/issue/75804, fixed in Go 1.27): no input failed, none was written.
		return out.Bytes(), nil
	case runErr != nil && len(added) > 0:
		return out.Bytes(), fmt.Errorf("%s failed; the failing input is in %s (go test -run '%s/%s' %s reproduces it; fix the code, then commit the file as a seed): %w",
			t, strings.Join(added, ", "), t.Name, filepath.Base(added[0]), t.Package(), runErr)
	case runErr != nil:
		return out.Bytes(), fmt.Errorf("%s: go test -fuzz: %w", t, runErr)
	case len(added) > 0:
		return out.Bytes(), fmt.Errorf("%s passed but wrote %s into the repository", t, strings.Join(added, ", "))
	}
	return out.Bytes(), nil
}

// coordinatorRace reports whether out is a fuzz run whose only failure is the coordinator's own
// deadline: "--- FAIL: Name (…s)" followed by "context deadline exceeded" alone, and no failing
// input (a target's real failure, crash or hang, always names the input it wrote).
func coordinatorRace(out []byte, name string) bool {
	if bytes.Contains(out, []byte("Failing input written to")) {
		return false
	}
	return regexp.MustCompile(`(?m)^--- FAIL: ` + regexp.QuoteMeta(name) + ` \([0-9.]+s\)\n\s+context deadline exceeded\n(FAIL\n)?(exit status \d+\n)?(FAIL\s[^\n]*\n?)?\z`).Match(out)
}

// files lists the names of the files in dir, none if it does not exist.
func files(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names, nil
}
