// Command spanneremu runs the Cloud Spanner emulator as a process. It prints one line to
// standard output once it accepts connections ("spanneremu: ready on HOST:PORT"), so scripts can
// wait for it, and shuts down cleanly on SIGINT or SIGTERM.
//
// Usage:
//
//	spanneremu -host 127.0.0.1 -port 9010 [-data-dir DIR] [-ttl-sweep-interval 1m] [-v]
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spanmart/spanmart/emulator/spanneremu"
)

func main() {
	var (
		opts    spanneremu.Options
		verbose bool
	)
	flag.StringVar(&opts.Host, "host", "127.0.0.1", "interface to listen on")
	flag.IntVar(&opts.Port, "port", 9010, "TCP port to listen on (0 picks a free one)")
	flag.StringVar(&opts.DataDir, "data-dir", "", "directory that keeps instances and databases across restarts (default: in memory)")
	flag.DurationVar(&opts.TTLSweepInterval, "ttl-sweep-interval", 0, "period of the ROW DELETION POLICY sweeper (0 = engine default, negative disables)")
	flag.DurationVar(&opts.LockWait, "lock-wait", 0, "how long a transaction waits for a lock before it is aborted (0 = engine default)")
	flag.DurationVar(&opts.IdleTimeout, "idle-timeout", 0, "abort transactions idle for this long (0 = engine default)")
	history := flag.Bool("history", true, "keep versions for exact-timestamp reads (ReadTimestamp, ExactStaleness); false saves CPU under sustained load, and such reads then fail unless nothing was committed since their timestamp")
	flag.BoolVar(&verbose, "v", false, "log diagnostics to standard error")
	flag.Parse()
	opts.NoHistory = !*history

	logger := log.New(os.Stderr, "", log.LstdFlags|log.Lmicroseconds)
	if verbose {
		opts.Logf = logger.Printf
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, opts); err != nil {
		logger.Printf("spanneremu: %v", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, opts spanneremu.Options) error {
	srv, err := spanneremu.Start(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Printf("spanneremu: ready on %s\n", srv.Addr())
	<-ctx.Done()
	done := make(chan error, 1)
	go func() { done <- srv.Close() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		return fmt.Errorf("shutdown took longer than 30s")
	}
}
