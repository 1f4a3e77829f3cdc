package main

import (
	"context"

	"go.uber.org/zap"

	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/services/orders/internal/app"
	"github.com/spanmart/spanmart/services/orders/internal/events"
	"github.com/spanmart/spanmart/services/orders/internal/httpapi"
	"github.com/spanmart/spanmart/services/orders/internal/store"
)

// run serves until ctx is done, then shuts down gracefully and closes the Spanner client.
func run(ctx context.Context, cfg config, log *zap.Logger) error {
	client, err := platform.NewSpannerClient(ctx, cfg.Database.String())
	if err != nil {
		return err
	}
	defer client.Close()

	opts := cfg.ServerOptions(log)
	opts.ErrorMapper = httpapi.ErrorMapper
	srv := platform.NewServer(opts)
	srv.AddCheck(platform.SpannerCheck("spanner", client))

	var nudger app.Nudger
	if n := outboxlib.NewNudger(cfg.Events.RelayURL, events.ConsumerName); n != nil {
		nudger = n
	}
	// One service for both entry points: the public API and the event handlers use the same use
	// cases and repository.
	svc := app.New(store.New(client), nudger)
	httpapi.Register(srv.Echo, svc)

	consumer, err := cfg.Events.NewConsumer(events.ConsumerName, client, srv.Registry)
	if err != nil {
		return err
	}
	events.Register(consumer, svc)
	consumer.Register(srv.Echo)

	return srv.Run(ctx, cfg.Config, zap.String("database", cfg.Database.String()))
}
