// Command paysim runs the payment provider sandbox as a process. It prints one line to
// standard output once it accepts connections ("paysim: ready on http://HOST:PORT"), so
// scripts can wait for it, and shuts down cleanly on SIGINT or SIGTERM.
//
// Usage:
//
//	paysim -host 127.0.0.1 -port 12111 [-webhook-url URL] [-webhook-secret whsec_...] [-api-key sk_test_...] [-v]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/spanmart/spanmart/emulator/paysim"
	"github.com/spanmart/spanmart/internal/emucmd"
)

func main() {
	var (
		opts       paysim.Options
		clockStart string
		verbose    bool
	)
	flag.StringVar(&opts.Host, "host", "127.0.0.1", "interface to listen on")
	flag.IntVar(&opts.Port, "port", 12111, "port of the API and the /_sandbox/ endpoints (0 picks a free one)")
	flag.StringVar(&opts.APIKey, "api-key", "", "the only secret key accepted (default: any sk_test_... key)")
	flag.StringVar(&opts.WebhookURL, "webhook-url", "", "URL that receives every event as a Stripe webhook (default: none)")
	flag.StringVar(&opts.WebhookSecret, "webhook-secret", "whsec_paysim", "secret that signs webhooks (Stripe-Signature)")
	flag.IntVar(&opts.WebhookRetry.MaxAttempts, "webhook-max-attempts", 4, "attempts per webhook delivery, the first included")
	flag.DurationVar(&opts.WebhookRetry.MinBackoff, "webhook-min-backoff", time.Second, "gap before the first webhook retry (doubled per retry)")
	flag.DurationVar(&opts.WebhookRetry.MaxBackoff, "webhook-max-backoff", time.Minute, "largest gap between webhook retries")
	flag.StringVar(&clockStart, "clock-start", "", "virtual time at start, RFC 3339 (default: now)")
	flag.BoolVar(&verbose, "v", false, "log every request and webhook attempt to standard error")
	flag.Parse()
	if clockStart != "" {
		t, err := time.Parse(time.RFC3339, clockStart)
		if err != nil {
			fmt.Fprintln(os.Stderr, "paysim: -clock-start:", err)
			os.Exit(2)
		}
		opts.ClockStart = t
	}

	opts.Logf = emucmd.Logf(verbose)
	emucmd.Main("paysim", func(ctx context.Context) (string, func() error, error) {
		srv, err := paysim.Start(ctx, opts)
		if err != nil {
			return "", nil, err
		}
		return "paysim: ready on " + srv.URL(), srv.Close, nil
	})
}
