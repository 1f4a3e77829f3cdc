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
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spanmart/spanmart/emulator/oidc"
	"github.com/spanmart/spanmart/emulator/tasksemu"
	"github.com/spanmart/spanmart/internal/emucmd"
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

// Set parses NAME or NAME?setting=value&...: max_dispatches_per_second, max_burst_size,
// max_concurrent_dispatches, max_attempts, max_retry_duration, min_backoff, max_backoff,
// max_doublings (durations as Go durations: 100ms, 10s, 1h).
func (q *queueFlags) Set(v string) error {
	name, query, _ := strings.Cut(v, "?")
	qc := tasksemu.QueueConfig{Name: name}
	settings, err := url.ParseQuery(query)
	if err != nil {
		return fmt.Errorf("queue %s: %w", name, err)
	}
	for key, vals := range settings {
		val := vals[len(vals)-1]
		var err error
		switch key {
		case "max_dispatches_per_second":
			qc.MaxDispatchesPerSecond, err = strconv.ParseFloat(val, 64)
		case "max_burst_size":
			qc.MaxBurstSize, err = strconv.Atoi(val)
		case "max_concurrent_dispatches":
			qc.MaxConcurrentDispatches, err = strconv.Atoi(val)
		case "max_attempts":
			var n int64
			n, err = strconv.ParseInt(val, 10, 32)
			qc.Retry.MaxAttempts = int32(n)
		case "max_doublings":
			var n int64
			n, err = strconv.ParseInt(val, 10, 32)
			qc.Retry.MaxDoublings = int32(n)
		case "max_retry_duration":
			qc.Retry.MaxRetryDuration, err = time.ParseDuration(val)
		case "min_backoff":
			qc.Retry.MinBackoff, err = time.ParseDuration(val)
		case "max_backoff":
			qc.Retry.MaxBackoff, err = time.ParseDuration(val)
		default:
			return fmt.Errorf("queue %s: unknown setting %q", name, key)
		}
		if err != nil {
			return fmt.Errorf("queue %s: %s: %w", name, key, err)
		}
	}
	*q = append(*q, qc)
	return nil
}

func main() {
	var (
		opts    tasksemu.Options
		queues  queueFlags
		verbose bool
		keyFile string
	)
	flag.StringVar(&opts.Host, "host", "127.0.0.1", "interface to listen on")
	flag.IntVar(&opts.Port, "port", 8123, "gRPC port (0 picks a free one)")
	flag.IntVar(&opts.HTTPPort, "http-port", 8124, "port of the OIDC discovery/JWKS endpoints, the metadata identity endpoints (GCE_METADATA_HOST) and the status page (0 picks a free one)")
	flag.StringVar(&opts.DataDir, "data-dir", "", "directory that keeps queues, pending tasks and the OIDC key across restarts (default: in memory)")
	flag.Var(&queues, "queue", "queue to create at start: NAME or NAME?max_dispatches_per_second=100&max_attempts=5&min_backoff=100ms... (repeatable)")
	flag.Float64Var(&opts.MaxDispatchRate, "max-dispatch-rate", 500, "highest max_dispatches_per_second a queue may be given (production: 500)")
	flag.StringVar(&opts.IssuerURL, "issuer", "", "OIDC issuer URL put in tokens (default http://HOST:HTTP-PORT)")
	flag.StringVar(&keyFile, "signing-key", "", "PEM file with the RSA key that signs OIDC tokens (created if missing; default DATA-DIR/oidc-key.pem or a fresh key)")
	flag.DurationVar(&opts.NameReuseWindow, "name-reuse-window", time.Hour, "how long a deleted or executed task's name stays taken")
	flag.DurationVar(&opts.QueueReuseWindow, "queue-reuse-window", 72*time.Hour, "how long a deleted queue's name cannot be re-created")
	flag.StringVar(&opts.ServiceAccount, "service-account", tasksemu.DefaultServiceAccount, "default e-mail in OIDC tokens and the metadata server's default service account")
	flag.BoolVar(&verbose, "v", false, "log every dispatch to standard error")
	flag.Parse()
	opts.Queues = queues
	if keyFile != "" {
		key, err := oidc.LoadOrCreateKey(keyFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "tasksemu:", err)
			os.Exit(2)
		}
		opts.SigningKey = key
	}

	opts.Logf = emucmd.Logf(verbose)
	emucmd.Main("tasksemu", func(ctx context.Context) (string, func() error, error) {
		srv, err := tasksemu.Start(ctx, opts)
		if err != nil {
			return "", nil, err
		}
		return fmt.Sprintf("tasksemu: ready on %s (oidc/status on http://%s)", srv.Addr(), srv.HTTPAddr()), srv.Close, nil
	})
}
