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

	"github.com/spanmart/spanmart/emulator/spanneremu"
	"github.com/spanmart/spanmart/internal/emucmd"
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
	flag.DurationVar(&opts.LockWait, "lock-wait", 0, "how long a transaction waits for a lock before it is aborted, and a commit for older readers of what it writes before it goes ahead (0 = engine default)")
	flag.DurationVar(&opts.IdleTimeout, "idle-timeout", 0, "abort transactions idle for this long (0 = engine default)")
	history := flag.Bool("history", true, "keep versions for exact-timestamp reads (ReadTimestamp, ExactStaleness); false saves CPU under sustained load, and such reads then fail unless nothing was committed since their timestamp")
	flag.BoolVar(&verbose, "v", false, "log diagnostics to standard error")
	flag.Parse()
	opts.NoHistory = !*history

	opts.Logf = emucmd.Logf(verbose)
	emucmd.Main("spanneremu", func(ctx context.Context) (string, func() error, error) {
		srv, err := spanneremu.Start(ctx, opts)
		if err != nil {
			return "", nil, err
		}
		return "spanneremu: ready on " + srv.Addr(), srv.Close, nil
	})
}
