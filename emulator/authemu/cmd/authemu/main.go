// Command authemu runs the local customer identity issuer (package authemu) as a process, for the
// dev stack and the Docker compose stack. It prints one line to standard output once it accepts
// connections ("authemu: ready on http://HOST:PORT"), and shuts down on SIGINT or SIGTERM.
//
// Usage:
//
//	authemu -host 127.0.0.1 -port 8125 -audience spanmart-local [-iap-audience AUD] [-iap-issuer ISS] [-data-dir DIR] [-v]
//
// A customer's token, on the dev stack (a development endpoint; in production the customer's app
// gets it from Identity Platform):
//
//	curl -s -X POST 127.0.0.1:8125/token -d '{"sub":"ali"}'
//
// An Identity-Aware Proxy assertion of an operator (what IAP adds to the operator's requests in
// front of the console), verified against http://127.0.0.1:8125/iap/verify/public_key-jwk:
//
//	curl -s -X POST 127.0.0.1:8125/iap/assertion -d '{"email":"operator@spanmart-local.iam.gserviceaccount.com"}'
package main

import (
	"context"
	"flag"

	"github.com/spanmart/spanmart/emulator/authemu"
	"github.com/spanmart/spanmart/internal/emucmd"
)

func main() {
	var (
		opts    authemu.Options
		verbose bool
	)
	flag.StringVar(&opts.Host, "host", "127.0.0.1", "interface to listen on")
	flag.IntVar(&opts.Port, "port", 8125, "port (0 picks a free one)")
	flag.StringVar(&opts.Audience, "audience", "spanmart-local", "aud of the tokens (Identity Platform's: the project id)")
	flag.StringVar(&opts.IAPAudience, "iap-audience", authemu.DefaultIAPAudience, "aud of the IAP assertions (the console's CONSOLE_IAP_AUDIENCE)")
	flag.StringVar(&opts.IAPIssuer, "iap-issuer", authemu.IAPIssuer, "iss of the IAP assertions")
	flag.StringVar(&opts.DataDir, "data-dir", "", "directory that keeps the signing keys across restarts (default: a new key each start)")
	flag.BoolVar(&verbose, "v", false, "log every token minted to standard error")
	flag.Parse()
	opts.Logf = emucmd.Logf(verbose)
	emucmd.Main("authemu", func(ctx context.Context) (string, func() error, error) {
		srv, err := authemu.Start(ctx, opts)
		if err != nil {
			return "", nil, err
		}
		return "authemu: ready on " + srv.URL(), srv.Close, nil
	})
}
