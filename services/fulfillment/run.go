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

// adminPrefix is where the consumer's operator routes are mounted.
const adminPrefix = "/admin"

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
	consumer.Register(srv.Echo)
	// Operators list and replay dead letters under /admin (GET /admin/deadletters, POST
	// /admin/deadletters/:id/replay). The routes carry no authorization of their own: the service
	// must only be reachable through Cloud Run IAM (as the event deliveries require anyway).
	consumer.RegisterAdmin(srv.Echo.Group(adminPrefix))

	return srv.Run(ctx, cfg.Config, zap.String("database", cfg.Database.String()))
}
