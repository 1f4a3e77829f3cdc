package main

import (
	"context"

	"go.uber.org/zap"

	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/services/notifications/internal/app"
	"github.com/spanmart/spanmart/services/notifications/internal/events"
	"github.com/spanmart/spanmart/services/notifications/internal/httpapi"
	"github.com/spanmart/spanmart/services/notifications/internal/mailer"
	"github.com/spanmart/spanmart/services/notifications/internal/store"
	"github.com/spanmart/spanmart/services/notifications/internal/templates"
)

// run serves until ctx is done, then shuts down gracefully and closes the Spanner client.
func run(ctx context.Context, cfg config, log *zap.Logger) error {
	client, err := platform.NewSpannerClient(ctx, cfg.Database.String())
	if err != nil {
		return err
	}
	defer client.Close()

	renderer, err := templates.New()
	if err != nil {
		return err
	}
	sender, err := mailer.New(cfg.SMTP)
	if err != nil {
		return err
	}
	defer sender.Close() // QUIT the sessions kept for the next e-mails
	opts := cfg.ServerOptions(log)
	opts.ErrorMapper = httpapi.ErrorMapper
	srv := platform.NewServer(opts)
	srv.AddCheck(platform.SpannerCheck("spanner", client))

	svc, err := app.New(app.Config{
		Repo: store.New(client), Sender: sender, Templates: renderer, Metrics: app.NewMetrics(srv.Registry),
		MaxAttempts: cfg.MaxAttempts, ResumeAfter: cfg.ResumeAfter, SendTimeout: cfg.SMTP.Timeout,
	})
	if err != nil {
		return err
	}
	// Stopped after the server, so the last deliveries' nudges go out.
	nudger := cfg.Events.NewNudger(events.ConsumerName)
	defer nudger.Stop()
	consumer, err := cfg.Events.NewConsumer(events.ConsumerName, client, srv.Registry, nudger)
	if err != nil {
		return err
	}
	events.Register(consumer, svc)
	consumer.Register(srv.Echo) // events, the ledger, and the operators' dead letters under /admin
	httpapi.Register(srv.Echo, svc, consumer.OperatorsOnly)

	return srv.Run(ctx, cfg.Config, zap.String("database", cfg.Database.String()),
		zap.String("smtp_addr", cfg.SMTP.Addr), zap.String("smtp_starttls", string(cfg.SMTP.StartTLS)))
}
