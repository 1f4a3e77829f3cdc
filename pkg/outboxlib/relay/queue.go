package relay

import (
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// SubscriberQueue is the configuration of every subscriber queue (one per consuming service,
// docs/architecture.md, "Event envelope and delivery contract"): what cloudbuild.yaml applies in production, and what the dev stack and the
// e2e harness create, so that local runs show production behaviour (a root test keeps
// cloudbuild.yaml's flags equal to it).
//
//   - Attempts are unlimited and retrying stops after 72 h. A consumer parks an event it cannot
//     handle in its DeadLetters table after its own attempt limit and answers 2xx, so the queue must
//     never give up first (a queue dropping a task would lose the event silently). 72 h survives a
//     weekend outage, and is far below the 30-day ProcessedEvents retention, which must exceed the
//     longest redelivery window (the relay checks it at start-up).
//   - Back-off from 100 ms (Cloud Tasks' default), so an event that arrived before its predecessor
//     is retried quickly (Cloud Tasks honours Retry-After only on 429 and 503), doubling 10 times
//     to a 60 s cap, so an outage of a consumer is retried every minute rather than every hour
//     (Cloud Tasks' default cap).
//   - 500 dispatches/s, Cloud Tasks' maximum for a queue: orders receives 4–5 deliveries per
//     order, so one queue per consumer carries 100–125 orders/s, the first hot spot of the
//     capacity model (docs/capacity.md), about what one Spanner node commits at 65 % CPU; past it
//     a consumer takes more queues, not a faster one.
//   - 100 concurrent: by Little's law 500/s of deliveries taking 20–50 ms each (3–6 Spanner round
//     trips) are 10–25 in flight, so 100 leaves room for round trips four times slower, and it is
//     below what a consumer's instances work on at once (cloudbuild.yaml's _MAX_INSTANCES ×
//     _CONCURRENCY, 160), so deliveries never wait for Cloud Run's own queue and the rest is
//     left for customers, webhooks and jobs. A queue dispatching more than that would only move
//     its backlog from the queue, where it waits for free, into the instances' lines.
func SubscriberQueue(name string) *cloudtaskspb.Queue {
	return &cloudtaskspb.Queue{
		Name: name,
		RateLimits: &cloudtaskspb.RateLimits{
			MaxDispatchesPerSecond:  500,
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
