package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/spanmart/spanmart/internal/topology"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/spanner"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/spanmart/spanmart/e2e/harness"
	"github.com/spanmart/spanmart/emulator/tasksemu"
	"github.com/spanmart/spanmart/pkg/outboxlib"
)

// The databases, by the name of their owner's consumer (ProcessedEvents.Consumer).
var databases = topology.Databases()

// order is the public API's view of an order (GET /v1/orders/{id}).
type order struct {
	ID           string  `json:"id"`
	Status       string  `json:"status"`
	CancelReason *string `json:"cancel_reason"`
	TotalMinor   int64   `json:"total_minor"`
	Payment      struct {
		Method       string `json:"method"`
		Instructions *struct {
			Store       string `json:"store"`
			PaymentCode string `json:"payment_code"`
			ExpiresAt   string `json:"expires_at"`
			Bank        *struct {
				AccountNumber string `json:"account_number"`
			} `json:"bank"`
		} `json:"instructions"`
	} `json:"payment"`
	Shipment *struct {
		ShipmentID     string `json:"shipment_id"`
		Carrier        string `json:"carrier"`
		TrackingNumber string `json:"tracking_number"`
	} `json:"shipment"`
	Compensations   []compensation `json:"compensations"`
	AttentionReason string         `json:"attention_reason"`
	Timeline        []struct {
		Direction string `json:"direction"`
		EventType string `json:"event_type"`
		EventID   string `json:"event_id"`
	} `json:"timeline"`
}

// orderRequest is the body of POST /v1/orders for qty of sku, paid by a card that authorizes, by a
// customer with an e-mail address.
func orderRequest(customer, sku string, qty int64) map[string]any {
	return map[string]any{
		"customer_id": customer, "email": "drill@example.com", "lines": []map[string]any{{"sku": sku, "quantity": qty}},
		"payment": map[string]any{"method": "card", "payment_method": "pm_card_visa"},
	}
}

// owners maps each order the tests placed to its customer, so that reads and cancellations go as
// that customer, as the customer's app would (orders answers a customer for its own orders only).
var owners sync.Map // order id → customer id

// asCustomer returns the Authorization header of customer, signed in.
func asCustomer(ctx context.Context, s *harness.Stack, customer string) (string, error) {
	tok, err := s.CustomerToken(ctx, customer)
	return "Bearer " + tok, err
}

// postOrder sends POST /v1/orders with an Idempotency-Key, signed in as the customer the body
// names (its customer_id), and records whose order it placed.
func postOrder(ctx context.Context, s *harness.Stack, key string, body map[string]any) (*harness.Response, error) {
	customer, _ := body["customer_id"].(string)
	auth, err := asCustomer(ctx, s, customer)
	if err != nil {
		return nil, err
	}
	r, err := s.Do(ctx, http.MethodPost, "orders", "/v1/orders", body, "Authorization", auth, "Idempotency-Key", key)
	if err == nil && r.Status/100 == 2 {
		var o order
		if r.JSON(&o) == nil && o.ID != "" {
			owners.Store(o.ID, customer)
		}
	}
	return r, err
}

// ownerOf is the customer who placed order id through postOrder.
func ownerOf(t *testing.T, id string) string {
	t.Helper()
	c, ok := owners.Load(id)
	if !ok {
		t.Fatalf("order %s was not placed through postOrder: whose is it?", id)
	}
	return c.(string)
}

// customerDo sends a request to orders as the customer who placed order id.
func customerDo(t *testing.T, s *harness.Stack, id, method, path string, headers ...string) *harness.Response {
	t.Helper()
	ctx := context.Background()
	auth, err := asCustomer(ctx, s, ownerOf(t, id))
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Do(ctx, method, "orders", path, nil, append([]string{"Authorization", auth}, headers...)...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// placeOrder places an order of qty × sku and returns its id; it fails the test on anything but a
// 2xx answer with an id.
func placeOrder(t *testing.T, s *harness.Stack, sku string, qty int64) string {
	t.Helper()
	r, err := postOrder(context.Background(), s, uuid.NewString(), orderRequest("cust-"+t.Name(), sku, qty))
	if err != nil {
		t.Fatalf("POST /v1/orders: %v", err)
	}
	if r.Status != http.StatusCreated && r.Status != http.StatusOK {
		t.Fatalf("POST /v1/orders: %s", r)
	}
	var o order
	if err := r.JSON(&o); err != nil || o.ID == "" {
		t.Fatalf("POST /v1/orders: no order id in %s (%v)", r, err)
	}
	return o.ID
}

// getOrder reads an order through the public API, as its customer.
func getOrder(t *testing.T, s *harness.Stack, id string) order {
	t.Helper()
	r := customerDo(t, s, id, http.MethodGet, "/v1/orders/"+id)
	var o order
	if r.Status != http.StatusOK {
		t.Fatalf("GET /v1/orders/%s: %s", id, r)
	}
	if err := r.JSON(&o); err != nil {
		t.Fatalf("GET /v1/orders/%s: %v", id, err)
	}
	return o
}

// query runs sql on a database and returns every row as strings (NULL as "NULL").
func query(t *testing.T, s *harness.Stack, db, sql string, params map[string]any) [][]string {
	t.Helper()
	rows, err := queryErr(s, db, sql, params)
	if err != nil {
		t.Fatalf("%s: %s: %v", db, sql, err)
	}
	return rows
}

// queryErr runs sql, whose columns must all be STRING (CAST the others), and returns the rows
// (NULL as "NULL").
func queryErr(s *harness.Stack, db, sql string, params map[string]any) ([][]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out [][]string
	err := s.DB(db).Single().Query(ctx, spanner.Statement{SQL: sql, Params: params}).Do(func(r *spanner.Row) error {
		var row []string
		for i := 0; i < r.Size(); i++ {
			var v spanner.NullString
			if err := r.Column(i, &v); err != nil {
				return err
			}
			if !v.Valid {
				row = append(row, "NULL")
				continue
			}
			row = append(row, v.StringVal)
		}
		out = append(out, row)
		return nil
	})
	return out, err
}

// count runs a SELECT COUNT(*) (or any single INT64) query.
func count(t *testing.T, s *harness.Stack, db, sql string, params map[string]any) int64 {
	t.Helper()
	n, err := countErr(s, db, sql, params)
	if err != nil {
		t.Fatalf("%s: %s: %v", db, sql, err)
	}
	return n
}

func countErr(s *harness.Stack, db, sql string, params map[string]any) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var n int64
	err := s.DB(db).Single().Query(ctx, spanner.Statement{SQL: sql, Params: params}).Do(func(r *spanner.Row) error {
		return r.Column(0, &n)
	})
	return n, err
}

// snapshot is the state of every database a drill asserts, in a form cmp.Diff prints readably.
type snapshot struct {
	// Orders: order id → "STATUS" or "STATUS reason".
	Orders map[string]string
	// Stock: sku → "on_hand/reserved".
	Stock map[string]string
	// Reservations: "order sku" → "quantity STATUS".
	Reservations map[string]string
	// Outbox: database → event type → rows (all of them, published or not).
	Outbox map[string]map[string]int64
	// Unpublished: database → rows whose PublishedAt is NULL.
	Unpublished map[string]int64
	// Processed: "database/consumer" → ProcessedEvents rows.
	Processed map[string]int64
	// DeadLetters: database → rows not yet replayed.
	DeadLetters map[string]int64
	// Payments: order id → the status of its payment (payments database).
	Payments map[string]string
	// Shipments: order id → the status of its shipment (fulfillment database).
	Shipments map[string]string
	// Mail: order id → the templates of the e-mails about it (notifications database), sorted,
	// each with its status: "order_confirmed SENT".
	Mail map[string][]string
}

func takeSnapshot(t *testing.T, s *harness.Stack) snapshot {
	t.Helper()
	snap, err := takeSnapshotErr(s)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func takeSnapshotErr(s *harness.Stack) (snapshot, error) {
	snap := snapshot{
		Orders: map[string]string{}, Stock: map[string]string{}, Reservations: map[string]string{},
		Outbox: map[string]map[string]int64{}, Unpublished: map[string]int64{},
		Processed: map[string]int64{}, DeadLetters: map[string]int64{}, Payments: map[string]string{},
		Shipments: map[string]string{}, Mail: map[string][]string{},
	}
	rows, err := queryErr(s, "orders", "SELECT OrderId, Status, IFNULL(CancelReason, '') FROM Orders", nil)
	if err != nil {
		return snap, err
	}
	for _, r := range rows {
		snap.Orders[r[0]] = strings.TrimSpace(r[1] + " " + r[2])
	}
	if rows, err = queryErr(s, "payments", "SELECT OrderId, Status FROM Payments", nil); err != nil {
		return snap, err
	}
	for _, r := range rows {
		snap.Payments[r[0]] = r[1]
	}
	if rows, err = queryErr(s, "fulfillment", "SELECT OrderId, Status FROM Shipments", nil); err != nil {
		return snap, err
	}
	for _, r := range rows {
		snap.Shipments[r[0]] = r[1]
	}
	if rows, err = queryErr(s, "notifications", "SELECT OrderId, Template, Status FROM Notifications ORDER BY OrderId, Template", nil); err != nil {
		return snap, err
	}
	for _, r := range rows {
		snap.Mail[r[0]] = append(snap.Mail[r[0]], r[1]+" "+r[2])
	}
	if rows, err = queryErr(s, "fulfillment", "SELECT Sku, CAST(OnHand AS STRING), CAST(Reserved AS STRING) FROM Inventory", nil); err != nil {
		return snap, err
	}
	for _, r := range rows {
		snap.Stock[r[0]] = r[1] + "/" + r[2]
	}
	if rows, err = queryErr(s, "fulfillment", "SELECT OrderId, Sku, CAST(Quantity AS STRING), Status FROM Reservations", nil); err != nil {
		return snap, err
	}
	for _, r := range rows {
		snap.Reservations[r[0]+" "+r[1]] = r[2] + " " + r[3]
	}
	for _, db := range databases {
		if rows, err = queryErr(s, db, "SELECT EventType, CAST(COUNT(*) AS STRING) FROM OutboxEvents GROUP BY EventType", nil); err != nil {
			return snap, err
		}
		for _, r := range rows {
			if snap.Outbox[db] == nil {
				snap.Outbox[db] = map[string]int64{}
			}
			var n int64
			fmt.Sscan(r[1], &n)
			snap.Outbox[db][r[0]] = n
		}
		n, err := countErr(s, db, "SELECT COUNT(*) FROM OutboxEvents WHERE PublishedAt IS NULL", nil)
		if err != nil {
			return snap, err
		}
		if n > 0 {
			snap.Unpublished[db] = n
		}
		if rows, err = queryErr(s, db, "SELECT Consumer, CAST(COUNT(*) AS STRING) FROM ProcessedEvents GROUP BY Consumer", nil); err != nil {
			return snap, err
		}
		for _, r := range rows {
			var n int64
			fmt.Sscan(r[1], &n)
			snap.Processed[db+"/"+r[0]] = n
		}
		n, err = countErr(s, db, "SELECT COUNT(*) FROM DeadLetters WHERE ReplayedAt IS NULL", nil)
		if err != nil {
			return snap, err
		}
		if n > 0 {
			snap.DeadLetters[db] = n
		}
	}
	return snap, nil
}

// queues is the Tasks emulator's status page by queue id.
func queues(s *harness.Stack) (map[string]tasksemu.QueueStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.Queues(ctx)
}

// settled reports whether every outbox is published and every consumer's queue holds no task: the
// flow has come to rest.
func settled(s *harness.Stack) (bool, string) {
	for _, db := range databases {
		n, err := countErr(s, db, "SELECT COUNT(*) FROM OutboxEvents WHERE PublishedAt IS NULL", nil)
		if err != nil {
			return false, err.Error()
		}
		if n > 0 {
			return false, fmt.Sprintf("%d unpublished outbox rows in %s", n, db)
		}
	}
	qs, err := queues(s)
	if err != nil {
		return false, "tasks status: " + err.Error()
	}
	for _, id := range topology.Queues() {
		if q := qs[id]; q.Depth > 0 || q.InFlight > 0 {
			return false, fmt.Sprintf("queue %s depth %d, in flight %d", id, q.Depth, q.InFlight)
		}
	}
	return true, ""
}

// waitSettled waits until the flow has come to rest and returns the snapshot then. At rest means
// settled twice in a row with the same snapshot between: an event can still appear after one
// settled check (a provider's webhook, which no queue holds, lands and emits), and the next check
// then sees it.
func waitSettled(t *testing.T, s *harness.Stack) snapshot {
	t.Helper()
	var last *snapshot
	harness.Until(t, "every outbox published and every queue empty, twice with the same state", func() (bool, string) {
		if ok, why := settled(s); !ok {
			last = nil
			return false, why
		}
		snap, err := takeSnapshotErr(s)
		if err != nil {
			return false, err.Error()
		}
		if ok, why := settled(s); !ok {
			last = nil
			return false, why
		}
		if last != nil && cmp.Equal(*last, snap) {
			return true, ""
		}
		last = &snap
		return false, "settled once; checking that it stays so"
	})
	return *last
}

// waitStatus waits until an order has the status (and optional reason).
func waitStatus(t *testing.T, s *harness.Stack, id, want string) {
	t.Helper()
	harness.Until(t, fmt.Sprintf("order %s is %s", id, want), func() (bool, string) {
		rows, err := queryErr(s, "orders", "SELECT Status, IFNULL(CancelReason, '') FROM Orders WHERE OrderId = @id", map[string]any{"id": id})
		if err != nil || len(rows) == 0 {
			return false, fmt.Sprintf("no order (%v)", err)
		}
		got := strings.TrimSpace(rows[0][0] + " " + rows[0][1])
		return got == want, got
	})
}

// outboxEvent reads an event back from a database's outbox as the relay would send it.
func outboxEvent(t *testing.T, s *harness.Stack, db, aggregateID, eventType string) outboxlib.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, err := s.OutboxEvent(ctx, db, aggregateID, eventType)
	if err != nil {
		t.Fatalf("read %s of %s from the %s outbox: %v", eventType, aggregateID, db, err)
	}
	return e
}

// deliver creates a Cloud Tasks task that delivers e to a consumer's POST /events exactly as the
// relay does (CloudEvents headers, OIDC token for the consumer's URL as the relay's account), under
// the given task id ("" for a random one), dispatched at `at` (zero: now).
func deliver(t *testing.T, s *harness.Stack, consumer, queueID string, e outboxlib.Event, taskID string, at time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tc, err := s.TasksClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	task := &cloudtaskspb.Task{
		MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
			Url: s.URL(consumer) + "/events", HttpMethod: cloudtaskspb.HttpMethod_POST,
			Headers: e.Headers(), Body: e.Payload,
			AuthorizationHeader: &cloudtaskspb.HttpRequest_OidcToken{OidcToken: &cloudtaskspb.OidcToken{
				ServiceAccountEmail: harness.ServiceAccount, Audience: s.URL(consumer),
			}},
		}},
	}
	if taskID != "" {
		task.Name = harness.QueueName(queueID) + "/tasks/" + taskID
	}
	if !at.IsZero() {
		task.ScheduleTime = timestamppb.New(at)
	}
	if _, err := tc.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: harness.QueueName(queueID), Task: task}); err != nil {
		t.Fatalf("create task for %s %s: %v", e.Type, e.ID, err)
	}
}

// metric returns the sum of a counter's samples on a process's /metrics whose labels contain every
// one of labels (e.g. `outcome="duplicate"`).
func metric(s *harness.Stack, process, name string, labels ...string) (float64, error) {
	r, err := s.Do(context.Background(), http.MethodGet, process, "/metrics", nil)
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, line := range strings.Split(string(r.Body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			if !strings.Contains(line, l) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		var v float64
		fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v)
		sum += v
	}
	return sum, nil
}

// sourceStatus is one source of the relay's GET /v1/outbox.
type sourceStatus struct {
	Source                  string  `json:"source"`
	Database                string  `json:"database"`
	Pending                 int64   `json:"pending"`
	OldestPendingAgeSeconds float64 `json:"oldest_pending_age_seconds"`
	Quarantined             int64   `json:"quarantined"`
}

// outboxStatus reads the relay's GET /v1/outbox (a list of sources, bare or under "sources").
func outboxStatus(s *harness.Stack, relay string) (map[string]sourceStatus, error) {
	r, err := s.AdminDo(context.Background(), http.MethodGet, relay, "/v1/outbox", nil)
	if err != nil {
		return nil, err
	}
	if r.Status != http.StatusOK {
		return nil, fmt.Errorf("GET /v1/outbox: %s", r)
	}
	var list []sourceStatus
	if err := json.Unmarshal(r.Body, &list); err != nil {
		var wrapped struct {
			Sources []sourceStatus `json:"sources"`
		}
		if err := r.JSON(&wrapped); err != nil {
			return nil, err
		}
		list = wrapped.Sources
	}
	out := map[string]sourceStatus{}
	for _, st := range list {
		out[st.Source] = st
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
