package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"

	"github.com/spanmart/spanmart/e2e/harness"
	"github.com/spanmart/spanmart/internal/localcloud"
	"github.com/spanmart/spanmart/pkg/outboxlib/relay"
)

// The orders subscriber spread over two queues (relay/routes.yaml with a second queue, as
// docs/capacity.md's knob for the first hot spot): with the second queue paused, exactly the
// orders whose inventory.reserved hashes to it stay PENDING, the others move on (to
// AWAITING_PAYMENT and beyond); once it resumes they all move on.
func TestSubscriberOverTwoQueuesInTheStack(t *testing.T) {
	routes, err := os.ReadFile(filepath.Join("..", "relay", "routes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	first := "      - ${TASKS_LOCATION}/queues/orders-inbox\n"
	if strings.Count(string(routes), first) != 1 {
		t.Fatalf("relay/routes.yaml does not list orders-inbox once as %q", first)
	}
	split := strings.Replace(string(routes), first, first+"      - ${TASKS_LOCATION}/queues/orders-inbox-b\n", 1)
	path := filepath.Join(t.TempDir(), "routes.yaml")
	if err := os.WriteFile(path, []byte(split), 0o644); err != nil {
		t.Fatal(err)
	}
	s := harness.Start(t, harness.Options{Seed: paymentSeed, Env: map[string][]string{"relay": {"RELAY_ROUTES=" + path}}})
	ctx := context.Background()
	tc, err := s.TasksClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	second := relay.SubscriberQueue(harness.QueueName("orders-inbox-b"))
	harness.FastQueue(second)
	if _, err := tc.CreateQueue(ctx, &cloudtaskspb.CreateQueueRequest{Parent: localcloud.Location, Queue: second}); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.PauseQueue(ctx, &cloudtaskspb.PauseQueueRequest{Name: second.Name}); err != nil {
		t.Fatal(err)
	}
	sub := relay.Subscriber{Queues: []string{harness.QueueName("orders-inbox"), second.Name}}

	// Place orders until both queues have some. inventory.reserved, the one event that moves an
	// order out of PENDING, is of the reservation aggregate, whose id is the order's.
	held, flowing := map[string]bool{}, map[string]bool{}
	for len(held) == 0 || len(flowing) == 0 {
		if len(held)+len(flowing) == 40 {
			t.Fatalf("40 orders and one queue took them all (%d held, %d flowing)", len(held), len(flowing))
		}
		id := placeOrder(t, s, "A1", 1)
		if sub.QueueFor(id) == second.Name {
			held[id] = true
		} else {
			flowing[id] = true
		}
	}
	movedOn := func(id string) {
		t.Helper()
		harness.Until(t, "order "+id+" leaves PENDING", func() (bool, string) {
			st := getOrder(t, s, id).Status
			return st != "PENDING", st
		})
	}
	for id := range flowing {
		movedOn(id)
	}
	// The paused queue holds a task per held order, and any other event for orders whose aggregate
	// (a payment, say) hashes to it.
	harness.Until(t, "the paused queue holds a task per held order", func() (bool, string) {
		qs, err := queues(s)
		if err != nil {
			return false, err.Error()
		}
		q := qs["orders-inbox-b"]
		return q.Depth >= len(held), fmt.Sprintf("depth %d, %d held orders", q.Depth, len(held))
	})
	for id := range held {
		if st := getOrder(t, s, id).Status; st != "PENDING" {
			t.Errorf("order %s is %s while the queue of its inventory.reserved is paused, want PENDING", id, st)
		}
	}
	if _, err := tc.ResumeQueue(ctx, &cloudtaskspb.ResumeQueueRequest{Name: second.Name}); err != nil {
		t.Fatal(err)
	}
	for id := range held {
		movedOn(id)
	}
}
