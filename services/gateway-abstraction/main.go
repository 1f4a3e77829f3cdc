// Command gateway-abstraction hides the payment providers and methods behind one internal
// contract and turns provider webhooks into payment.* events. Its database is "payments".
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"

	"github.com/spanmart/spanmart/pkg/platform"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := loadConfig(os.Getenv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gateway-abstraction: configuration: %v\n", err)
		os.Exit(2)
	}
	log, err := platform.NewLogger(os.Stdout, cfg.LogOptions())
	if err != nil {
		fmt.Fprintf(os.Stderr, "gateway-abstraction: logger: %v\n", err)
		os.Exit(2)
	}
	defer platform.SetGlobalLogger(log)()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("gateway-abstraction stopped", zap.Error(err))
		log.Sync()
		os.Exit(1)
	}
	log.Sync()
}
