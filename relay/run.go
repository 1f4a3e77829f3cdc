package main

import (
	"context"
	"fmt"
	"sync"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/spanner"
	"go.uber.org/zap"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/spanmart/spanmart/pkg/faults"
	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/outboxlib/relay"
	"github.com/spanmart/spanmart/pkg/platform"
)

// run serves and relays until ctx is done, then shuts both down (the relay releases its shard
// leases) and closes the clients. A relay that refuses to start (a queue's redelivery window too
// long) stops the server too: a relay that serves health checks but delivers nothing would hide
// the outage.
func run(ctx context.Context, cfg config, log *zap.Logger) error {
	srv := platform.NewServer(cfg.ServerOptions(log))
	clients := make([]*spanner.Client, 0, len(cfg.Sources))
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	names := make([]string, 0, len(cfg.Sources))
	var sources []relay.Source
	for _, db := range cfg.Sources {
		client, err := platform.NewSpannerClient(ctx, db.String())
		if err != nil {
			return err
		}
		clients = append(clients, client)
		names = append(names, db.String())
		sources = append(sources, relay.Source{Name: cfg.Services[db.Database], Client: client, Database: db.String()})
		// Readiness fails if any source is unreachable: its outbox would silently back up.
		srv.AddCheck(platform.SpannerCheck("spanner "+db.String(), client))
	}
	tasks, err := newTasksClient(ctx, cfg.TasksEmulator)
	if err != nil {
		return err
	}
	defer tasks.Close()
	var tokens relay.TokenSource
	if cfg.Ledger {
		tokens = platform.NewIDTokenSource(nil)
	}
	core, err := relay.New(relay.Config{
		Sources: sources, Routes: cfg.Routing.Routes, Tasks: tasks, ServiceAccount: cfg.ServiceAccount,
		Registerer: srv.Registry, Logger: log.Named("relay"),
		Tokens: tokens, LedgerInterval: cfg.LedgerInterval, LedgerMinAge: cfg.LedgerMinAge, LedgerGrace: cfg.LedgerGrace,
		BeforeMark: func(_ context.Context, _ string, _ int64, enqueued []string) error {
			if len(enqueued) > 0 {
				// The drills' crash between enqueue and mark (off unless SPANMART_FAULTS names it).
				faults.Hit(faults.RelayAfterEnqueue)
			}
			return nil
		},
	})
	if err != nil {
		return err
	}
	operators, err := outboxlib.NewOperators(cfg.Issuer, cfg.Audience, cfg.Operators, cfg.Delegates)
	if err != nil {
		return err
	}
	nudgers, err := outboxlib.NewGuard(cfg.Issuer, cfg.Audience, cfg.Nudgers, nudgeRefusals)
	if err != nil {
		return err
	}
	registerAPI(srv, core, operators, nudgers)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var relayErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		if relayErr = core.Run(ctx); relayErr != nil {
			cancel()
		}
	})
	err = srv.Run(ctx, cfg.Config, zap.Strings("sources", names), zap.String("tasks_emulator", cfg.TasksEmulator))
	cancel()
	wg.Wait()
	if relayErr != nil {
		return relayErr
	}
	return err
}

// newTasksClient returns the Cloud Tasks client: Google's endpoint with the default credentials, or
// the emulator at host (plaintext gRPC, no credentials), the official client either way.
func newTasksClient(ctx context.Context, host string) (*cloudtasks.Client, error) {
	opts := platform.GoogleClientOptions()
	if host != "" {
		opts = append(opts, option.WithEndpoint(host), option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	}
	c, err := cloudtasks.NewClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("cloud tasks client: %w", err)
	}
	return c, nil
}
