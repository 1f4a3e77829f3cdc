package main

import (
	"context"

	"go.uber.org/zap"

	"github.com/spanmart/spanmart/pkg/platform"
)

// run serves until ctx is done, then shuts down gracefully.
func run(ctx context.Context, cfg config, log *zap.Logger) error {
	srv := platform.NewServer(cfg.ServerOptions(log))
	return srv.Run(ctx, cfg.Config)
}
