package main

import (
	"context"
	"fmt"
	"os"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/migrate"
	"github.com/spanmart/spanmart/pkg/spannertest"
)

// Queues, one per subscriber (ARCHITECTURE.md §4): a slow or failing consumer backs up only its own
// queue, and each consumer gets its own rate limit.
var queueIDs = []string{"orders-inbox", "fulfillment-inbox", "gateway-inbox", "notifications-inbox"}

func queueName(id string) string { return location + "/queues/" + id }

// queueSettings is the configuration of every queue, production-like so that local runs show
// production behaviour:
//
//   - Attempts are unlimited and retrying stops after 72 h. A consumer parks an event it cannot
//     handle in its DeadLetters table after its own attempt limit and answers 2xx, so the queue must
//     never give up first (a queue dropping a task would lose the event silently). 72 h survives a
//     weekend outage, and is far below the 30-day ProcessedEvents retention, which must exceed the
//     longest redelivery window (ARCHITECTURE.md §3).
//   - Back-off from 100 ms (Cloud Tasks' default), so an event that arrived before its predecessor
//     is retried quickly (Cloud Tasks honours Retry-After only on 429 and 503), doubling 10 times to a 60 s cap, so an outage of a consumer
//     is retried every minute rather than every hour (Cloud Tasks' default cap).
//   - 100 dispatches/s and 100 concurrent per consumer: a backlog drains fast without one consumer's
//     flood starving the others (every service shares the one Spanner instance).
func queueSettings(name string) *cloudtaskspb.Queue {
	return &cloudtaskspb.Queue{
		Name: name,
		RateLimits: &cloudtaskspb.RateLimits{
			MaxDispatchesPerSecond:  100,
			MaxConcurrentDispatches: 100,
		},
		RetryConfig: &cloudtaskspb.RetryConfig{
			MaxAttempts:      -1,
			MaxRetryDuration: durationpb.New(72 * time.Hour),
			MinBackoff:       durationpb.New(100 * time.Millisecond),
			MaxBackoff:       durationpb.New(60 * time.Second),
			MaxDoublings:     10,
		},
	}
}

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
	for _, id := range queueIDs {
		name := queueName(id)
		_, err := client.CreateQueue(ctx, &cloudtaskspb.CreateQueueRequest{Parent: location, Queue: queueSettings(name)})
		switch status.Code(err) {
		case codes.OK:
			st.con.say("queue %s created", name)
		case codes.AlreadyExists:
			// Kept as it is, with its pending tasks; -clean starts over.
		default:
			return fmt.Errorf("create queue %s: %w", name, err)
		}
	}
	return nil
}
