package main

import (
	"context"
	"fmt"
	"sync"

	"go.uber.org/zap"

	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/services/fulfillment/internal/app"
	"github.com/spanmart/spanmart/services/fulfillment/internal/carrier"
	"github.com/spanmart/spanmart/services/fulfillment/internal/events"
	"github.com/spanmart/spanmart/services/fulfillment/internal/httpapi"
	"github.com/spanmart/spanmart/services/fulfillment/internal/store"
)

// run serves until ctx is done, then shuts down gracefully: the server drains, the simulated
// carrier (when on) stops, and the Spanner client is closed last.
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

	// One nudger of the relay for the warehouse's actions, the carrier and the event handlers, so
	// their nudges go together; stopped after the server, so the last requests' nudges go out.
	nudger := cfg.Events.NewNudger(events.ConsumerName)
	defer nudger.Stop()
	var appNudger app.Nudger
	if nudger != nil {
		appNudger = nudger
	}
	// One service for every entry point: the public API, the event handlers and the simulated
	// carrier use the same use cases and repository.
	svc := app.New(store.New(client), appNudger, app.NewMetrics(srv.Registry))
	// The warehouse's actions take ID tokens from the deliveries' issuer for the service's URL, as
	// the operator endpoints do, of the warehouses' and the operators' accounts.
	warehouses, err := outboxlib.NewVerifier(outboxlib.VerifierConfig{
		Issuer: cfg.Events.Issuer, Audiences: []string{cfg.Events.Audience}, AllowedEmails: cfg.warehouseCallers(),
	})
	if err != nil {
		return fmt.Errorf("warehouse actions: %w", err)
	}
	httpapi.Register(srv.Echo, svc, warehouses)

	consumer, err := cfg.Events.NewConsumer(events.ConsumerName, client, srv.Registry, nudger)
	if err != nil {
		return err
	}
	events.Register(consumer, svc)
	consumer.Register(srv.Echo) // events, the ledger, and the operators' dead letters under /admin

	// The simulated carrier runs until ctx is done or the server stops (deferred: cancel it, wait
	// for it, then close the client).
	var wg sync.WaitGroup
	defer wg.Wait()
	simCtx, stop := context.WithCancel(ctx)
	defer stop()
	if cfg.Carrier.After > 0 {
		sim := &carrier.Simulator{Shipments: svc, After: cfg.Carrier.After, FailSKUs: cfg.Carrier.FailSKUs, Log: log}
		wg.Go(func() { sim.Run(simCtx) })
	}

	return srv.Run(ctx, cfg.Config, zap.String("database", cfg.Database.String()),
		zap.Duration("carrier_simulate_after", cfg.Carrier.After))
}
