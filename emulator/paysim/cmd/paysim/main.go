// Command paysim runs the payment provider sandbox as a process. It prints one line to
// standard output once it accepts connections ("paysim: ready on http://HOST:PORT"), so
// scripts can wait for it, and shuts down cleanly on SIGINT or SIGTERM.
//
// Usage:
//
//	paysim -host 127.0.0.1 -port 12111 [-webhook-url URL] [-webhook-secret whsec_...] [-api-key sk_test_...]
//	       [-komoju-webhook-url URL] [-komoju-webhook-secret SECRET] [-komoju-secret-key sk_test_...]
//	       [-wallet-balances ali=50000,sara=2000] [-komoju-refund-payout 24h] [-data-dir DIR] [-v]
//
// With -data-dir the sandbox keeps its state in DIR/paysim.json across restarts (see the
// package's README.md, "Persistence").
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
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
	flag.Func("webhook-events", "event types the Stripe endpoint is subscribed to, comma-separated, wildcards like payment_intent.* (default: every type)", func(v string) error {
		for _, t := range strings.Split(v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				opts.WebhookEvents = append(opts.WebhookEvents, t)
			}
		}
		return nil
	})
	flag.IntVar(&opts.WebhookRetry.MaxAttempts, "webhook-max-attempts", 4, "attempts per webhook delivery, the first included")
	flag.DurationVar(&opts.WebhookRetry.MinBackoff, "webhook-min-backoff", time.Second, "gap before the first webhook retry (doubled per retry)")
	flag.DurationVar(&opts.WebhookRetry.MaxBackoff, "webhook-max-backoff", time.Minute, "largest gap between webhook retries")
	flag.StringVar(&opts.KomojuSecretKey, "komoju-secret-key", "", "the only KOMOJU secret key accepted (default: any sk_test_... key)")
	flag.StringVar(&opts.KomojuWebhookURL, "komoju-webhook-url", "", "URL that receives every KOMOJU event as a KOMOJU webhook (default: none)")
	flag.StringVar(&opts.KomojuWebhookSecret, "komoju-webhook-secret", "komoju_whsec_paysim", "secret that signs KOMOJU webhooks (X-Komoju-Signature)")
	flag.Func("wallet-balances", "PayPay wallets as customer=balance,... in minor units (default ali=50000,sara=2000)", func(v string) error {
		balances, err := parseBalances(v)
		opts.WalletBalances = balances
		return err
	})
	flag.DurationVar(&opts.KomojuRefundPayout, "komoju-refund-payout", paysim.DefaultKomojuRefundPayout, "virtual time KOMOJU takes to pay out a konbini or bank transfer refund (pending until then)")
	flag.StringVar(&clockStart, "clock-start", "", "virtual time at start, RFC 3339 (default: now; a -data-dir with a saved state keeps its clock)")
	flag.StringVar(&opts.DataDir, "data-dir", "", "directory that keeps payments, events, idempotency keys, wallets and the clock across restarts (default: in memory)")
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

// parseBalances reads "ali=50000,sara=2000"; "" is no wallet at all.
func parseBalances(v string) (map[string]int64, error) {
	balances := map[string]int64{}
	for _, pair := range strings.Split(v, ",") {
		if pair = strings.TrimSpace(pair); pair == "" {
			continue
		}
		customer, amount, ok := strings.Cut(pair, "=")
		n, err := strconv.ParseInt(amount, 10, 64)
		if !ok || customer == "" || err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not customer=balance (a whole number of minor units)", pair)
		}
		balances[customer] = n
	}
	return balances, nil
}
