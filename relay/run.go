package main

import (
	"context"

	"cloud.google.com/go/spanner"
	"go.uber.org/zap"

	"github.com/spanmart/spanmart/pkg/platform"
)

// run serves until ctx is done, then shuts down gracefully and closes the Spanner clients.
func run(ctx context.Context, cfg config, log *zap.Logger) error {
	srv := platform.NewServer(cfg.ServerOptions(log))
	clients := make([]*spanner.Client, 0, len(cfg.Sources))
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	names := make([]string, 0, len(cfg.Sources))
	for _, db := range cfg.Sources {
		client, err := platform.NewSpannerClient(ctx, db.String())
		if err != nil {
			return err
		}
		clients = append(clients, client)
		names = append(names, db.String())
		// Readiness fails if any source is unreachable: its outbox would silently back up.
		srv.AddCheck(platform.SpannerCheck("spanner "+db.String(), client))
	}
	return srv.Run(ctx, cfg.Config, zap.Strings("sources", names))
}
