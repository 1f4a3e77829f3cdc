package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/spanmart/spanmart/e2e/harness"
	"github.com/spanmart/spanmart/pkg/outboxlib/outboxapi"
)

// ledgerEnv makes the relay's delivery ledger audit every 200 ms and ask about deliveries at once
// (production: every minute, deliveries older than a minute).
var ledgerEnv = map[string][]string{"relay": {"RELAY_LEDGER_INTERVAL=200ms", "RELAY_LEDGER_MIN_AGE=10ms", "RELAY_LEDGER_GRACE=200ms"}}

// ledger is GET /v1/ledger on the relay.
type ledger struct {
	Sources []struct {
		Source  string                      `json:"source"`
		Missing []outboxapi.MissingDelivery `json:"missing"`
	} `json:"sources"`
}

func readLedger(s *harness.Stack) (map[string][]outboxapi.MissingDelivery, error) {
	r, err := s.AdminDo(context.Background(), http.MethodGet, "relay", "/v1/ledger", nil)
	if err != nil {
		return nil, err
	}
	var l ledger
	if err := r.JSON(&l); err != nil {
		return nil, err
	}
	out := map[string][]outboxapi.MissingDelivery{}
	for _, src := range l.Sources {
		out[src.Source] = src.Missing
	}
	return out, nil
}

// unaudited counts the published rows the ledger has not settled, in every database.
func unaudited(s *harness.Stack) (int64, error) {
	var total int64
	for _, db := range databases {
		n, err := countErr(s, db, "SELECT COUNT(*) FROM OutboxEvents WHERE AuditShard IS NOT NULL", nil)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// The delivery ledger through the real stack. A healthy flow: every published delivery is
// confirmed by its subscriber and nothing is reported. Then fulfillment is down while its queue
// gives up on order.created (as Cloud Tasks does once a queue's retry limits are reached): the
// event is published, the task is gone, and nothing else would ever notice. The ledger reports the
// delivery missing; an operator's replay through the relay delivers it, and the order moves on.
func TestLedgerReportsDroppedDelivery(t *testing.T) {
	s := harness.Start(t, harness.Options{Env: ledgerEnv})
	ctx := context.Background()

	healthy := placeOrder(t, s, "A1", 1)
	waitStatus(t, s, healthy, "CONFIRMED")
	waitSettled(t, s)
	harness.Until(t, "the ledger to settle every published row", func() (bool, string) {
		n, err := unaudited(s)
		return err == nil && n == 0, fmt.Sprintf("%d unsettled (%v)", n, err)
	})
	if l, err := readLedger(s); err != nil || len(l["orders"])+len(l["fulfillment"]) != 0 {
		t.Fatalf("ledger after a healthy run = %v, %v; want nothing missing", l, err)
	}

	// fulfillment's queue now gives up after two attempts, 50 ms apart.
	tc, err := s.TasksClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	q := harness.QueueName("fulfillment-inbox")
	setRetry := func(rc *cloudtaskspb.RetryConfig) {
		t.Helper()
		if _, err := tc.UpdateQueue(ctx, &cloudtaskspb.UpdateQueueRequest{
			Queue: &cloudtaskspb.Queue{Name: q, RetryConfig: rc}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"retry_config"}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	original, err := tc.GetQueue(ctx, &cloudtaskspb.GetQueueRequest{Name: q})
	if err != nil {
		t.Fatal(err)
	}
	setRetry(&cloudtaskspb.RetryConfig{MaxAttempts: 2, MinBackoff: durationpb.New(50 * time.Millisecond), MaxBackoff: durationpb.New(50 * time.Millisecond)})
	s.Kill("fulfillment")
	lost := placeOrder(t, s, "A1", 2)
	created := outboxEvent(t, s, "orders", lost, "order.created")
	harness.Until(t, "order.created published and given up by the queue", func() (bool, string) {
		qs, err := queues(s)
		if err != nil {
			return false, err.Error()
		}
		n, err := countErr(s, "orders", "SELECT COUNT(*) FROM OutboxEvents WHERE EventId = @id AND PublishedAt IS NOT NULL", map[string]any{"id": created.ID})
		return err == nil && n == 1 && qs["fulfillment-inbox"].Depth == 0, fmt.Sprintf("published %d (%v), queue %+v", n, err, qs["fulfillment-inbox"])
	})
	if err := s.Start(ctx, "fulfillment"); err != nil {
		t.Fatal(err)
	}

	var missing []outboxapi.MissingDelivery
	harness.Until(t, "the ledger to report the lost delivery", func() (bool, string) {
		l, err := readLedger(s)
		missing = l["orders"]
		return err == nil && len(missing) == 1, fmt.Sprintf("%v (%v)", l, err)
	})
	// The ledger judges by the queue's retry horizon as it is configured now: restore it only after.
	setRetry(original.RetryConfig)
	if m := missing[0]; m.EventID != created.ID || m.Subscriber != "fulfillment" || m.EventType != "order.created" {
		t.Errorf("missing delivery = %+v, want fulfillment's order.created %s", m, created.ID)
	}
	if n, err := metric(s, "relay", "outbox_ledger_missing_deliveries", `source="orders"`, `subscriber="fulfillment"`); err != nil || n != 1 {
		t.Errorf("relay's missing gauge = %v (%v), want 1", n, err)
	}
	if o := getOrder(t, s, lost); o.Status != "PENDING" {
		t.Fatalf("order %s is %s, want PENDING: fulfillment never heard of it", lost, o.Status)
	}

	r, err := s.AdminDo(ctx, http.MethodPost, "relay", "/v1/ledger/orders/events/"+created.ID+"/replay", map[string]string{"reason": "fulfillment was down while its queue gave up"})
	if err != nil || r.Status != http.StatusAccepted {
		t.Fatalf("replay of the missing delivery: %v %v", r, err)
	}
	waitStatus(t, s, lost, "CONFIRMED")
	harness.Until(t, "the ledger to clear", func() (bool, string) {
		l, err := readLedger(s)
		n, err2 := metric(s, "relay", "outbox_ledger_missing_deliveries", `source="orders"`, `subscriber="fulfillment"`)
		return err == nil && err2 == nil && len(l["orders"]) == 0 && n == 0, fmt.Sprintf("%v %v (%v %v)", l, n, err, err2)
	})
	r, err = s.AdminDo(ctx, http.MethodPost, "relay", "/v1/ledger/orders/events/"+created.ID+"/replay", map[string]string{"reason": "again"})
	if err != nil || r.Status != http.StatusConflict {
		t.Errorf("second replay of the delivery: %v %v, want 409", r, err)
	}
	checkSnapshot(t, wantSnapshot(5, placed{healthy, 1, reserved}, placed{lost, 2, reserved}), waitSettled(t, s))
}
