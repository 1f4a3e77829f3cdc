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
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spanmart/spanmart/emulator/paysim"
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

	logger := log.New(os.Stderr, "", log.LstdFlags|log.Lmicroseconds)
	if verbose {
		opts.Logf = logger.Printf
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, opts); err != nil {
		logger.Printf("paysim: %v", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, opts paysim.Options) error {
	srv, err := paysim.Start(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Printf("paysim: ready on %s\n", srv.URL())
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
