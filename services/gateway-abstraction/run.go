package main

import (
	"context"

	"go.uber.org/zap"

	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/app"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/events"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/httpapi"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/provider"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/provider/komoju"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/provider/stripe"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/store"
)

// run serves until ctx is done, then shuts down gracefully and closes the Spanner client.
func run(ctx context.Context, cfg config, log *zap.Logger) error {
	client, err := platform.NewSpannerClient(ctx, cfg.Database.String())
	if err != nil {
		return err
	}
	defer client.Close()

	providers, err := newProviders(cfg)
	if err != nil {
		return err
	}
	opts := cfg.ServerOptions(log)
	opts.ErrorMapper = httpapi.ErrorMapper
	srv := platform.NewServer(opts)
	srv.AddCheck(platform.SpannerCheck("spanner", client))

	cfgApp := app.Config{
		Repo: store.New(client), Providers: providers, Metrics: app.NewMetrics(srv.Registry),
		Calls: cfg.Calls, ResumeAfter: cfg.ResumeAfter, GiveUpAfter: cfg.GiveUpAfter, ReconcileAfter: cfg.ReconcileAfter,
	}
	// One nudger of the relay for the webhooks, the calls and the event handlers, so their nudges
	// go together; stopped after the server, so the last requests' nudges go out.
	nudger := cfg.Events.NewNudger(events.ConsumerName)
	defer nudger.Stop()
	if nudger != nil {
		cfgApp.Nudger = nudger
	}
	svc, err := app.New(cfgApp)
	if err != nil {
		return err
	}

	consumer, err := cfg.Events.NewConsumer(events.ConsumerName, client, srv.Registry, nudger)
	if err != nil {
		return err
	}
	events.Register(consumer, svc)
	consumer.Register(srv.Echo)
	httpapi.Register(srv.Echo, svc, consumer.OperatorsOnly)

	return srv.Run(ctx, cfg.Config, zap.String("database", cfg.Database.String()),
		zap.String("stripe_api", orDefault(cfg.Stripe.APIURL, "stripe")), zap.String("komoju_api", cfg.Komoju.APIURL))
}

// newProviders builds one adapter per provider (payment.Method.Provider names which takes what).
func newProviders(cfg config) ([]provider.Provider, error) {
	s, err := stripe.New(stripe.Config{APIKey: cfg.Stripe.APIKey, BaseURL: cfg.Stripe.APIURL, WebhookSecret: cfg.Stripe.WebhookSecret})
	if err != nil {
		return nil, err
	}
	k, err := komoju.New(komoju.Config{BaseURL: cfg.Komoju.APIURL, SecretKey: cfg.Komoju.SecretKey, WebhookSecret: cfg.Komoju.WebhookSecret})
	if err != nil {
		return nil, err
	}
	return []provider.Provider{s, k}, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
