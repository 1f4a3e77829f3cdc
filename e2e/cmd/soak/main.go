// Command soak runs Spanmart's fault-injecting soak (package e2e/soak) on a stack of its own: mixed
// load through the whole order saga for -duration while a seeded schedule kills and restarts the
// relay, each consumer and the Cloud Tasks emulator, pauses queues and makes the payment sandbox
// duplicate, reorder, delay and drop webhooks and answer 500s; then it waits for the system to
// drain and checks every invariant. It prints the fault log as it happens, then a summary, writes
// a PNG chart (outbox lag and order throughput over time, the faults marked) and exits 1 if an
// invariant failed.
//
//	go run ./e2e/cmd/soak                          # 10 minutes at 5 orders/s (make soak)
//	go run ./e2e/cmd/soak -duration 2m -rate 3 -seed 7 -chart /tmp/soak.png -keep
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/spanmart/spanmart/e2e/harness"
	"github.com/spanmart/spanmart/e2e/soak"
)

func main() {
	var cfg soak.Config
	flag.DurationVar(&cfg.Duration, "duration", 10*time.Minute, "how long orders are placed (faults start within it)")
	flag.Float64Var(&cfg.Rate, "rate", 5, "orders per second")
	flag.Uint64Var(&cfg.Seed, "seed", 1, "seeds the order mix and the fault schedule")
	noFaults := flag.Bool("no-faults", false, "run the load without faults")
	drain := flag.Duration("drain", 5*time.Minute, "how long the system may take to drain after the faults cleared")
	chart := flag.String("chart", "docs/soak.png", "write the chart here (relative to the repository root unless absolute; \"\" for none)")
	keep := flag.Bool("keep", false, "keep the stack's state directory (process logs, the Tasks emulator's data) after a pass too (a failed run always keeps it)")
	verbose := flag.Bool("v", false, "print the harness's progress lines")
	flag.Parse()
	cfg.NoFaults, cfg.DrainTimeout = *noFaults, *drain
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	passed, err := run(ctx, cfg, *chart, *keep, *verbose)
	if err != nil {
		fmt.Fprintf(os.Stderr, "\nsoak FAILED to run: %v\n", err)
		os.Exit(2)
	}
	if !passed {
		os.Exit(1)
	}
}

func logf(format string, args ...any) { fmt.Printf(format+"\n", args...) }

func run(ctx context.Context, cfg soak.Config, chart string, keep, verbose bool) (passed bool, err error) {
	opts := soak.StackOptions()
	// The state (the processes' logs) is what explains a failure: kept then, removed after a pass
	// unless -keep.
	opts.KeepState = true
	if verbose {
		opts.Logf = func(f string, a ...any) { logf("    [harness] "+f, a...) }
	}
	logf("starting the stack: both emulators, the payment sandbox and a mail server in-process, four databases, five processes (the first run builds them)")
	s, err := harness.New(ctx, opts)
	if err != nil {
		return false, err
	}
	defer func() {
		s.Close()
		if passed && !keep {
			os.RemoveAll(s.StateDir())
			return
		}
		logf("state kept in %s (the processes' logs in logs/)", s.StateDir())
	}()
	logf("up in %s; state in %s", s.Timings["total"].Round(100*time.Millisecond), s.StateDir())
	cfg.Logf = logf
	res := soak.Run(ctx, s, cfg)
	res.WriteSummary(os.Stdout)
	if !res.Drain.Drained {
		// Both emulators and the sandbox run in this process: what their goroutines wait for is
		// what a stuck system waits for.
		if err := dumpGoroutines(filepath.Join(s.StateDir(), "goroutines.txt")); err != nil {
			logf("goroutine dump: %v", err)
		} else {
			logf("the goroutines of the emulators (this process) are in %s", filepath.Join(s.StateDir(), "goroutines.txt"))
		}
	}
	if chart != "" {
		if !filepath.IsAbs(chart) {
			root, err := harness.RepoRoot()
			if err != nil {
				return false, err
			}
			chart = filepath.Join(root, chart)
		}
		if err := res.WriteChart(chart); err != nil {
			return false, fmt.Errorf("write the chart: %w", err)
		}
		logf("chart: %s", chart)
	}
	if res.Err != nil {
		return false, res.Err
	}
	return res.Passed(), nil
}

// dumpGoroutines writes every goroutine's stack to path.
func dumpGoroutines(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("goroutine").WriteTo(f, 2); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
