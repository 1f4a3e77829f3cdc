// Command tasksemu runs the Cloud Tasks emulator as a process. It prints one line to standard
// output once it accepts connections
// ("tasksemu: ready on HOST:PORT (oidc/status on http://HOST:HTTP_PORT)"), so scripts can wait
// for it, and shuts down cleanly on SIGINT or SIGTERM.
//
// Usage:
//
//	tasksemu -host 127.0.0.1 -port 8123 -http-port 8124 [-data-dir DIR] [-queue projects/p/locations/l/queues/q ...] [-v]
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spanmart/spanmart/emulator/tasksemu"
)

// queueFlags collects repeated -queue flags.
type queueFlags []tasksemu.QueueConfig

func (q *queueFlags) String() string {
	names := make([]string, len(*q))
	for i, c := range *q {
		names[i] = c.Name
	}
	return strings.Join(names, ",")
}

func (q *queueFlags) Set(name string) error {
	*q = append(*q, tasksemu.QueueConfig{Name: name})
	return nil
}

func main() {
	var (
		opts    tasksemu.Options
		queues  queueFlags
		verbose bool
	)
	flag.StringVar(&opts.Host, "host", "127.0.0.1", "interface to listen on")
	flag.IntVar(&opts.Port, "port", 8123, "gRPC port (0 picks a free one)")
	flag.IntVar(&opts.HTTPPort, "http-port", 8124, "port of the OIDC discovery/JWKS endpoints and the status page (0 picks a free one)")
	flag.StringVar(&opts.DataDir, "data-dir", "", "directory that keeps queues, pending tasks and the OIDC key across restarts (default: in memory)")
	flag.Var(&queues, "queue", "queue to create at start with default settings (repeatable)")
	flag.DurationVar(&opts.NameReuseWindow, "name-reuse-window", time.Hour, "how long a deleted or executed task's name stays taken")
	flag.DurationVar(&opts.QueueReuseWindow, "queue-reuse-window", 72*time.Hour, "how long a deleted queue's name cannot be re-created")
	flag.StringVar(&opts.ServiceAccount, "service-account", tasksemu.DefaultServiceAccount, "default e-mail in OIDC tokens")
	flag.BoolVar(&verbose, "v", false, "log every dispatch to standard error")
	flag.Parse()
	opts.Queues = queues

	logger := log.New(os.Stderr, "", log.LstdFlags|log.Lmicroseconds)
	if verbose {
		opts.Logf = logger.Printf
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, opts); err != nil {
		logger.Printf("tasksemu: %v", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, opts tasksemu.Options) error {
	srv, err := tasksemu.Start(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Printf("tasksemu: ready on %s (oidc/status on http://%s)\n", srv.Addr(), srv.HTTPAddr())
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
