package main

import (
	"context"

	"go.uber.org/zap"

	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/services/fulfillment/internal/events"
	"github.com/spanmart/spanmart/services/fulfillment/internal/httpapi"
	"github.com/spanmart/spanmart/services/fulfillment/internal/store"
)

// consumerName is fulfillment's name in ProcessedEvents, ConsumerVersions and DeadLetters.
const consumerName = "fulfillment"

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
	httpapi.Register(srv.Echo, store.Reads{Client: client})

	consumer, err := cfg.Events.NewConsumer(consumerName, client, srv.Registry)
	if err != nil {
		return err
	}
	events.Register(consumer)
	consumer.Register(srv.Echo) // events, the ledger, and the operators' dead letters under /admin

	return srv.Run(ctx, cfg.Config, zap.String("database", cfg.Database.String()))
}
