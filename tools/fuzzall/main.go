// Command fuzzall fuzzes every fuzz target of the repository, one after the other, for -fuzztime
// each (make fuzz). The targets are found, not listed (internal/fuzzall); the README's test
// command runs the same targets for a couple of seconds each (the root package's
// TestFuzzTargets).
//
//	go run ./tools/fuzzall [-fuzztime 30s] [-list] [-run REGEXP]
//
// It exits 1 when a target fails, after running the others; the failing input is left in the
// target's testdata/fuzz directory.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"time"

	"github.com/spanmart/spanmart/internal/fuzzall"
)

func main() {
	fuzztime := flag.String("fuzztime", "30s", "how long to fuzz each target (a go test -fuzztime value)")
	list := flag.Bool("list", false, "print the targets and exit")
	run := flag.String("run", "", "fuzz only the targets whose dir.Name matches this regular expression")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(fuzz(ctx, *fuzztime, *list, *run))
}

func fuzz(ctx context.Context, fuzztime string, list bool, run string) int {
	match, err := regexp.Compile(run)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fuzzall: -run:", err)
		return 2
	}
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fuzzall:", err)
		return 2
	}
	targets, err := fuzzall.Find(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fuzzall:", err)
		return 2
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		fmt.Fprintln(os.Stderr, "fuzzall:", err)
		return 2
	}
	failed := 0
	for _, t := range targets {
		if !match.MatchString(t.String()) {
			continue
		}
		if list {
			fmt.Println(t)
			continue
		}
		fmt.Printf("=== %s (%s)\n", t, fuzztime)
		start := time.Now()
		out, err := fuzzall.Run(ctx, goBin, root, t, fuzztime)
		os.Stdout.Write(out)
		if err != nil {
			failed++
			fmt.Printf("--- FAIL %s (%s): %v\n", t, time.Since(start).Round(time.Second), err)
			if ctx.Err() != nil {
				return 1
			}
			continue
		}
		fmt.Printf("--- ok %s (%s)\n", t, time.Since(start).Round(time.Second))
	}
	if failed > 0 {
		fmt.Printf("%d fuzz target(s) failed\n", failed)
		return 1
	}
	return 0
}

// moduleRoot is the nearest directory at or above the working directory that holds go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the module: no go.mod above the working directory")
		}
		dir = parent
	}
}
