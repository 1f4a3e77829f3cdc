// Command notifications sends customer e-mails in reaction to order.* and payment.pending
// events, each at most once per (event, template).
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
		fmt.Fprintf(os.Stderr, "notifications: configuration: %v\n", err)
		os.Exit(2)
	}
	log, err := platform.NewLogger(os.Stdout, cfg.LogOptions())
	if err != nil {
		fmt.Fprintf(os.Stderr, "notifications: logger: %v\n", err)
		os.Exit(2)
	}
	defer platform.SetGlobalLogger(log)()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("notifications stopped", zap.Error(err))
		log.Sync()
		os.Exit(1)
	}
	log.Sync()
}
