// Command fulfillment owns inventory (on-hand stock, reservations) and shipments and emits
// inventory.* and shipment.* events.
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
		fmt.Fprintf(os.Stderr, "fulfillment: configuration: %v\n", err)
		os.Exit(2)
	}
	log, err := platform.NewLogger(os.Stdout, cfg.LogOptions())
	if err != nil {
		fmt.Fprintf(os.Stderr, "fulfillment: logger: %v\n", err)
		os.Exit(2)
	}
	defer platform.SetGlobalLogger(log)()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("fulfillment stopped", zap.Error(err))
		log.Sync()
		os.Exit(1)
	}
	log.Sync()
}
