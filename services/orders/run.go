package main

import (
	"context"

	"go.uber.org/zap"

	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/services/orders/internal/httpapi"
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
	httpapi.Register(srv.Echo, httpapi.Info{Service: cfg.Service, Version: cfg.Version})

	ln, err := cfg.Listen()
	if err != nil {
		return err
	}
	log.Info("starting",
		zap.String("service", cfg.Service),
		zap.String("version", cfg.Version),
		zap.Int("port", platform.Port(ln)),
		zap.String("addr", ln.Addr().String()),
		zap.String("database", cfg.Database.String()),
		zap.String("emulator", platform.EmulatorHost()))
	return srv.Serve(ctx, ln)
}
