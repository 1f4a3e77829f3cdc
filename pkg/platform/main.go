package platform

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"
)

// Configured is a binary's configuration: it embeds Config.
type Configured interface {
	LogOptions() LogOptions
}

// Main is the whole main function of a Spanmart binary. It loads the configuration from the
// environment (exit status 2 and one message naming every problem when it is wrong, never a
// panic), builds the JSON logger, and runs until SIGTERM (Cloud Run's stop signal) or SIGINT
// cancels the context; run must then shut down within ShutdownBudget. A run error exits 1.
func Main[C Configured](service string, load func(getenv func(string) string) (C, error), run func(context.Context, C, *zap.Logger) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := load(os.Getenv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: configuration: %v\n", service, err)
		os.Exit(2)
	}
	log, err := NewLogger(os.Stdout, cfg.LogOptions())
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: logger: %v\n", service, err)
		os.Exit(2)
	}
	restore := SetGlobalLogger(log)
	err = run(ctx, cfg, log)
	if err != nil {
		log.Error(service+" stopped", zap.Error(err))
	}
	log.Sync()
	restore()
	if err != nil {
		os.Exit(1)
	}
}
