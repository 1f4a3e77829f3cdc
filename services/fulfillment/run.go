package main

import (
	"context"

	"go.uber.org/zap"

	"github.com/spanmart/spanmart/pkg/platform"
)

// run serves until ctx is done, then shuts down gracefully and closes the Spanner client.
func run(ctx context.Context, cfg config, log *zap.Logger) error {
	client, err := platform.NewSpannerClient(ctx, cfg.Database.String())
	if err != nil {
		return err
	}
	defer client.Close()

	srv := platform.NewServer(cfg.ServerOptions(log))
	srv.AddCheck(platform.SpannerCheck("spanner", client))
	return srv.Run(ctx, cfg.Config, zap.String("database", cfg.Database.String()))
}
