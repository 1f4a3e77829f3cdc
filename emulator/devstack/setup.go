package main

import (
	"context"
	"fmt"
	"os"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/spanmart/spanmart/internal/localenv"
	"github.com/spanmart/spanmart/internal/topology"
	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/migrate"
	"github.com/spanmart/spanmart/pkg/spannertest"
)

// Queues, one per subscriber (docs/architecture.md, "Event envelope and delivery contract"): a
// slow or failing consumer backs up only its own queue, and each consumer gets its own rate limit.
var queueIDs = topology.Queues()

func queueName(id string) string { return localenv.Queue(id) }

// setup creates the instance, the databases with their schema, the queues and the catalog. Every
// step is idempotent, so it runs on every start: a restart on existing state only applies migrations
// added since, and leaves data alone.
func (st *stack) setup(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, st.cfg.readyTimeout)
	defer cancel()
	start := time.Now()
	// The official clients read this when they are created: plaintext gRPC, no credentials.
	os.Setenv("SPANNER_EMULATOR_HOST", st.spannerAddr())
	if err := st.setupSpanner(ctx); err != nil {
		return err
	}
	if err := st.setupQueues(ctx); err != nil {
		return err
	}
	st.con.say("schema, queues and catalog ready in %s", time.Since(start).Round(100*time.Millisecond))
	return nil
}

func (st *stack) setupSpanner(ctx context.Context) error {
	if err := spannertest.SetUp(ctx, instance, st.con.say); err != nil {
		return err
	}
	orders, err := migrate.NewClient(ctx, databaseName(dbschema.Orders))
	if err != nil {
		return err
	}
	defer orders.Close()
	fulfillment, err := migrate.NewClient(ctx, databaseName(dbschema.Fulfillment))
	if err != nil {
		return err
	}
	defer fulfillment.Close()
	return st.seedCatalog(ctx, orders, fulfillment)
}

func (st *stack) setupQueues(ctx context.Context) error {
	client, err := cloudtasks.NewClient(ctx,
		option.WithEndpoint(st.tasksAddr()),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		return fmt.Errorf("cloud tasks client: %w", err)
	}
	defer client.Close()
	// Existing queues are kept as they are, with their pending tasks; -clean starts over.
	created, err := localenv.CreateQueues(ctx, client, nil)
	for _, name := range created {
		st.con.say("queue %s created", name)
	}
	return err
}
