// Command devstack runs the whole Spanmart system on one machine with nothing but Go: it builds every
// binary, starts the Spanner and Cloud Tasks emulators as processes, creates the instance, the four
// service databases (with every migration applied), the Cloud Tasks queues and a small product
// catalog, starts the five services on fixed ports, waits until each one is ready and prints where
// everything is. Ctrl-C stops it all.
//
//	go run ./emulator/devstack            # or: make dev
//	go run ./emulator/devstack -clean     # forget every database, queue and task
//
// Everything runs as a separate process, exactly as in production each service is its own Cloud Run
// container: a service that crashes, leaks or hangs does so on its own, and its logs are its own
// (prefixed with its name on the terminal and kept in STATE/logs/NAME.log). State (the emulators'
// data, logs, binaries) lives under -state-dir, .state/ at the repository root by default, so a
// restart keeps databases, queues and pending tasks.
//
// The devstack owns its children: they run in their own process groups (so a terminal's Ctrl-C reaches
// only the devstack, which stops services before the emulators they depend on) and, on Linux, get
// SIGTERM from the kernel if the devstack dies without cleaning up, so no orphan keeps a port busy.
//
// See README.md in this directory for ports, flags and how to look at logs.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spanmart/spanmart/internal/topology"
)

// config is everything the command line decides.
type config struct {
	// repo is the root of the spanmart checkout (where go.mod is); binaries are built from there.
	repo     string
	stateDir string

	clean      bool
	noServices bool
	smoke      bool

	portOffset   int
	readyTimeout time.Duration
	stopTimeout  time.Duration
	logLevel     string
	jobsEvery    time.Duration
	verbose      bool
	rawLogs      bool
}

func main() {
	repo, err := findRepo()
	if err != nil {
		fmt.Fprintln(os.Stderr, "devstack:", err)
		os.Exit(2)
	}
	cfg := config{repo: repo}
	flag.StringVar(&cfg.stateDir, "state-dir", filepath.Join(repo, ".state"), "directory for the emulators' data, logs and binaries (kept across restarts)")
	flag.BoolVar(&cfg.clean, "clean", false, "remove the state directory (every database, queue, task and log) and exit")
	flag.BoolVar(&cfg.noServices, "no-services", false, "start only the emulators, create the schema and seed the catalog (run services yourself, e.g. from an IDE)")
	flag.BoolVar(&cfg.smoke, "smoke", false, "start everything, check every process is healthy, stop and exit (0 = healthy)")
	flag.IntVar(&cfg.portOffset, "port-offset", 0, "add this to every port (e.g. 1000: orders on 9081, Spanner on 10010) to run a second stack beside the first")
	flag.DurationVar(&cfg.readyTimeout, "ready-timeout", 2*time.Minute, "how long to wait for each step (emulator start, schema, every /readyz) before giving up")
	flag.DurationVar(&cfg.stopTimeout, "stop-timeout", 10*time.Second, "how long a process may take to exit after SIGTERM before it is killed")
	flag.DurationVar(&cfg.jobsEvery, "jobs-every", topology.JobEvery, "how often the local scheduler calls Cloud Scheduler's jobs (the payment and e-mail sweeps, orders' audit) as scheduler@, as production does every 5 minutes; 0: never")
	flag.StringVar(&cfg.logLevel, "log-level", "info", "LOG_LEVEL given to the services (debug, info, warn, error)")
	flag.BoolVar(&cfg.rawLogs, "raw-logs", false, "show the services' JSON log lines as they are, instead of as \"SEVERITY message key=value ...\" (log files always keep the JSON)")
	flag.BoolVar(&cfg.verbose, "v", false, "run the emulators with -v (one log line per RPC diagnostic / task dispatch)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: go run ./emulator/devstack [flags]\n\nRuns the Spanner and Cloud Tasks emulators and every Spanmart service locally (see emulator/devstack/README.md).\n\nFlags:\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	switch cfg.logLevel {
	case "debug", "info", "warn", "error":
	default:
		fmt.Fprintf(os.Stderr, "devstack: -log-level %q: want debug, info, warn or error\n", cfg.logLevel)
		os.Exit(2)
	}
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "devstack: unexpected arguments %q (flags only; see -h)\n", flag.Args())
		os.Exit(2)
	}
	if cfg.stateDir, err = filepath.Abs(cfg.stateDir); err != nil {
		fmt.Fprintln(os.Stderr, "devstack:", err)
		os.Exit(2)
	}

	// The first SIGINT/SIGTERM/SIGHUP (a closed terminal) cancels ctx, an orderly stop; a second one
	// makes the stop kill at once.
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals...)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "devstack: error:", err)
		os.Exit(1)
	}
}

// stopSignals end the dev stack.
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

func run(ctx context.Context, cfg config) error {
	if cfg.clean {
		return cleanState(cfg.stateDir)
	}
	st, err := newStack(cfg)
	if err != nil {
		return err
	}
	defer st.close()
	err = st.up(ctx)
	if err == nil && !cfg.smoke {
		err = st.serve(ctx)
	}
	st.down()
	if err != nil && ctx.Err() != nil {
		// Stopped by Ctrl-C or SIGTERM, whatever step was running (and failed because of it): that is
		// how a dev stack is meant to end.
		st.con.say("stopped")
		return nil
	}
	if err == nil && cfg.smoke {
		st.con.say("smoke check passed: every process came up healthy and stopped cleanly")
	}
	return err
}
