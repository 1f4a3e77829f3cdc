package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmart/spanmart/emulator/tasksemu"
	"github.com/spanmart/spanmart/internal/topology"
	"github.com/spanmart/spanmart/pkg/outboxlib"
)

// Start starts a stack for a test: it fails the test if the stack does not come up, stops it when
// the test ends, and prints the last lines of every process log first if the test failed.
func Start(t testing.TB, opts Options) *Stack {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := New(ctx, opts)
	if err != nil {
		t.Fatalf("start the stack: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			s.DumpLogs(t.Logf, 40)
		}
		s.Close()
	})
	return s
}

// DumpLogs writes the last n lines of every process log through logf.
func (s *Stack) DumpLogs(logf func(string, ...any), n int) {
	names := s.Names()
	sort.Strings(names)
	for _, name := range names {
		logf("--- last %d lines of %s (%s):\n%s", n, name, s.LogPath(name), strings.Join(s.LogTail(name, n), "\n"))
	}
}

// DefaultWait bounds Eventually.
var DefaultWait = 30 * time.Second

// Eventually polls cond every 50 ms until it holds, failing the test after DefaultWait with what
// (the condition, in words). cond may call t.Log-free helpers only; it must not call t.Fatal.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	EventuallyWithin(t, DefaultWait, what, cond)
}

// EventuallyWithin is Eventually with its own deadline.
func EventuallyWithin(t testing.TB, wait time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", wait, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Until is Eventually for a condition that says why it does not hold yet: the last reason is in the
// failure message.
func Until(t testing.TB, what string, cond func() (ok bool, why string)) {
	t.Helper()
	deadline := time.Now().Add(DefaultWait)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s (last: %s)", DefaultWait, what, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Poll is Eventually for programs: it returns an error instead of failing a test.
func Poll(ctx context.Context, wait time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s: %s", wait, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// Response is an HTTP answer read in full.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v.
func (r *Response) JSON(v any) error {
	if err := json.Unmarshal(r.Body, v); err != nil {
		return fmt.Errorf("decode %d answer %q: %w", r.Status, truncate(r.Body), err)
	}
	return nil
}

func (r *Response) String() string { return fmt.Sprintf("%d %s", r.Status, truncate(r.Body)) }

func truncate(b []byte) string {
	if len(b) > 500 {
		return string(b[:500]) + "..."
	}
	return string(b)
}

// Do sends a request to a process (name) at path; body, when not nil, is sent as JSON (a []byte
// or string as it is). headers are name, value pairs. A transport error (refused, reset) is
// returned as an error.
func (s *Stack) Do(ctx context.Context, method, name, path string, body any, headers ...string) (*Response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.URL(name)+path, rd)
	if err != nil {
		return nil, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := s.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: data}, nil
}

// GetJSON GETs path from a process and decodes a 200 answer into v.
func (s *Stack) GetJSON(ctx context.Context, name, path string, v any) error {
	r, err := s.Do(ctx, http.MethodGet, name, path, nil)
	if err != nil {
		return err
	}
	if r.Status != http.StatusOK {
		return fmt.Errorf("GET %s%s: %s", name, path, r)
	}
	return r.JSON(v)
}

// Queues returns the Tasks emulator's queues (its GET /status page, as an operator sees it) by
// queue id.
func (s *Stack) Queues(ctx context.Context) (map[string]tasksemu.QueueStatus, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.TasksHTTP()+"/status", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var st struct {
		Queues []tasksemu.QueueStatus `json:"queues"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("tasks emulator status: %w", err)
	}
	out := make(map[string]tasksemu.QueueStatus, len(st.Queues))
	for _, q := range st.Queues {
		out[q.Name[strings.LastIndex(q.Name, "/")+1:]] = q
	}
	return out, nil
}

// OutboxEvent reads back the event of type eventType that aggregateID's service wrote to the
// outbox of database db, as the relay would publish it.
func (s *Stack) OutboxEvent(ctx context.Context, db, aggregateID, eventType string) (outboxlib.Event, error) {
	var e outboxlib.Event
	found := false
	err := s.DB(db).Single().Query(ctx, spanner.Statement{
		SQL: `SELECT EventId, EventType, AggregateType, AggregateId, AggregateVersion, SchemaVersion,
		             TO_JSON_STRING(Payload), IFNULL(TraceParent, ''), OccurredAt
		      FROM OutboxEvents WHERE AggregateId = @id AND EventType = @type`,
		Params: map[string]any{"id": aggregateID, "type": eventType},
	}).Do(func(r *spanner.Row) error {
		var payload string
		found = true
		err := r.Columns(&e.ID, &e.Type, &e.AggregateType, &e.AggregateID, &e.AggregateVersion,
			&e.SchemaVersion, &payload, &e.TraceParent, &e.OccurredAt)
		e.Payload = json.RawMessage(payload)
		return err
	})
	if err == nil && !found {
		err = fmt.Errorf("no %s event of %s in the %s outbox", eventType, aggregateID, db)
	}
	e.Source = "//spanmart/" + db
	return e, err
}

// AuditReport is the part of orders' POST /admin/audit answer that the tests and the demo read:
// the stuck orders and the reconciliation (services/orders/README.md).
type AuditReport struct {
	Stuck struct {
		Orders []struct {
			OrderID    string `json:"order_id"`
			Status     string `json:"status"`
			For        string `json:"for"`
			WaitingFor string `json:"waiting_for"`
		} `json:"orders"`
	} `json:"stuck"`
	Reconciliation Reconciliation `json:"reconciliation"`
}

// Reconciliation is orders' reconciliation report: the audit's, or GET
// /admin/reconciliation[?order_id=].
type Reconciliation struct {
	Configured bool  `json:"configured"`
	Checked    *int  `json:"checked"`
	Partial    *bool `json:"partial"`
	Mismatches []struct {
		OrderID  string   `json:"order_id"`
		Check    string   `json:"check"`
		Problems []string `json:"problems"`
	} `json:"mismatches"`
	Flagged []struct {
		OrderID         string `json:"order_id"`
		AttentionReason string `json:"attention_reason"`
	} `json:"flagged"`
}

// Audit runs orders' audit (POST /admin/audit, what Cloud Scheduler calls) as the operator.
func (s *Stack) Audit(ctx context.Context) (AuditReport, error) {
	var a AuditReport
	r, err := s.AdminDo(ctx, http.MethodPost, "orders", "/admin/audit", nil)
	if err != nil {
		return a, err
	}
	if r.Status != http.StatusOK {
		return a, fmt.Errorf("POST /admin/audit: %s", r)
	}
	return a, r.JSON(&a)
}

// AdminDo is Do with the operator's ID token for the process's URL: for its operator endpoints
// (the relay's /v1/*, the services' /admin/*).
func (s *Stack) AdminDo(ctx context.Context, method, name, path string, body any, headers ...string) (*Response, error) {
	token, err := s.OperatorToken(ctx, name)
	if err != nil {
		return nil, err
	}
	return s.Do(ctx, method, name, path, body, append([]string{"Authorization", "Bearer " + token}, headers...)...)
}

// WarehouseDo is Do on fulfillment with the warehouse's ID token: for the warehouse's actions
// (POST /v1/shipments/{id}/ship and /fail).
func (s *Stack) WarehouseDo(ctx context.Context, method, path string, body any, headers ...string) (*Response, error) {
	token, err := s.WarehouseToken(ctx)
	if err != nil {
		return nil, err
	}
	return s.Do(ctx, method, topology.Fulfillment, path, body, append([]string{"Authorization", "Bearer " + token}, headers...)...)
}
