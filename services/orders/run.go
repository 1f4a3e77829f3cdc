package main

import (
	"context"

	"go.uber.org/zap"

	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/services/orders/api"
	"github.com/spanmart/spanmart/services/orders/internal/app"
	"github.com/spanmart/spanmart/services/orders/internal/events"
	"github.com/spanmart/spanmart/services/orders/internal/httpapi"
	"github.com/spanmart/spanmart/services/orders/internal/peers"
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

	// One nudger of the relay for the API and the event handlers, so their nudges go together;
	// stopped after the server, so the last requests' nudges go out.
	nudger := cfg.Events.NewNudger(events.ConsumerName)
	defer nudger.Stop()
	var appNudger app.Nudger
	if nudger != nil {
		appNudger = nudger
	}
	// One service for both entry points: the public API and the event handlers use the same use
	// cases and repository.
	repo := store.New(client)
	svc := app.New(repo, appNudger)
	customers, err := cfg.Customers.verifier()
	if err != nil {
		return err
	}
	httpapi.Register(srv.Echo, svc, httpapi.NewCustomers(customers))
	// Past capacity, new orders are refused within milliseconds (503, Retry-After) rather than
	// wait in line behind the deliveries of orders already accepted; the customers' reads and
	// cancels of those orders wait in line with the deliveries (pkg/platform/admission.go).
	srv.ShedFirst(api.PathOrders)

	consumer, err := cfg.Events.NewConsumer(events.ConsumerName, client, srv.Registry, nudger)
	if err != nil {
		return err
	}
	events.Register(consumer, svc)
	consumer.Register(srv.Echo)

	// The operators' audit and reads, guarded like the consumer's own /admin routes.
	audit := app.NewAudit(app.AuditConfig{
		Repo: repo, StuckAfter: cfg.Audit.StuckAfter, Peers: newPeers(cfg.Audit),
		Settle: cfg.Audit.Settle, Window: cfg.Audit.Window, Metrics: app.NewAuditMetrics(srv.Registry),
	})
	httpapi.RegisterAdmin(srv.Echo, svc, audit, consumer.OperatorsOnly)

	return srv.Run(ctx, cfg.Config, zap.String("database", cfg.Database.String()))
}

// newPeers returns the reconciliation's client of fulfillment and the gateway, nil when they are
// not configured. Both are called with an ID token of the service's account for their URL:
// fulfillment requires one at the Cloud Run layer, the gateway's operator read checks that the
// account is in its ADMIN_ALLOWED_EMAILS.
func newPeers(cfg auditConfig) app.Peers {
	if !cfg.reconciles() {
		return nil
	}
	tokens := platform.NewIDTokenSource(nil, platform.WithServiceAccount(cfg.ServiceAccount))
	return peers.New(peers.Config{
		FulfillmentURL: cfg.FulfillmentURL, Fulfillment: tokens.Client(cfg.FulfillmentURL),
		GatewayURL: cfg.GatewayURL, Gateway: tokens.Client(cfg.GatewayURL),
	})
}
