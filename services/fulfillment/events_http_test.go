package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/uuid"

	"github.com/spanmart/spanmart/emulator/oidc"
	"github.com/spanmart/spanmart/gen/dao/fulfillmentdb"
	"github.com/spanmart/spanmart/gen/dao/outboxdb"
	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/platform/platformtest"
	"github.com/spanmart/spanmart/services/fulfillment/internal/events"
)

const (
	testAudience   = "http://fulfillment.test"
	relayEmail     = "relay@spanmart.test"
	operatorMail   = "ops@spanmart.test"
	warehouseEmail = "warehouse@spanmart.test"
)

// fulfillment is the service run in process against a fresh database, with the deliveries' tokens
// minted by an OIDC issuer served over HTTP (discovery and JWKS), as the Tasks emulator does.
type fulfillment struct {
	url    string
	client *spanner.Client
	issuer *oidc.Issuer
}

// startFulfillment starts the service with A1 and BAD (5 on hand each) and the environment extra
// on top of the test's.
func startFulfillment(t *testing.T, extra map[string]string) *fulfillment {
	t.Helper()
	client, name := env.NewDatabase(t, dbschema.Fulfillment)
	var ms []*spanner.Mutation
	for _, sku := range []string{"A1", "BAD"} {
		row := fulfillmentdb.Inventory{Sku: sku, OnHand: 5}
		row.SetCommitTimestamps()
		ms = append(ms, row.Insert())
	}
	if _, err := client.Apply(context.Background(), ms); err != nil {
		t.Fatal(err)
	}

	ln := platformtest.Listen(t)
	issuer, err := oidc.NewIssuer("http://"+ln.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	idp := &httptest.Server{Listener: ln, Config: &http.Server{Handler: issuer.Handler()}}
	idp.Start()
	t.Cleanup(idp.Close)

	vars := map[string]string{
		"SPANNER_DATABASE":         name,
		"PORT":                     "0",
		"OIDC_ISSUER":              idp.URL,
		"OIDC_AUDIENCE":            testAudience,
		"OIDC_ALLOWED_EMAILS":      relayEmail,
		"EVENTS_MAX_ATTEMPTS":      "10",
		"ADMIN_ALLOWED_EMAILS":     operatorMail,
		"WAREHOUSE_ALLOWED_EMAILS": warehouseEmail,
		// Short, so that an early event is dead-lettered within the test (production: 2h).
		"EVENTS_EARLY_PATIENCE": "50ms",
	}
	for k, v := range extra {
		vars[k] = v
	}
	cfg, err := loadConfig(platformtest.Getenv(vars))
	if err != nil {
		t.Fatal(err)
	}
	log, logs := platformtest.NewLogger(t, serviceName)
	platformtest.Start(t, func(ctx context.Context) error { return run(ctx, cfg, log) })
	return &fulfillment{url: platformtest.StartedURL(t, logs), client: client, issuer: issuer}
}

func (f *fulfillment) token(t *testing.T, audience, email string) string {
	t.Helper()
	tok, err := f.issuer.Mint(audience, email, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// deliver posts e to POST /events the way Cloud Tasks does and returns the status and outcome;
// headers are extra header name, value pairs.
func (f *fulfillment) deliver(t *testing.T, e outboxlib.Event, token string, headers ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.url+outboxlib.PathEvents, bytes.NewReader(e.Payload))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range e.Headers() {
		req.Header.Set(k, v)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var r struct {
		Outcome string `json:"outcome"`
	}
	json.Unmarshal(body, &r)
	return resp.StatusCode, r.Outcome, resp.Header
}

func orderEvent(t *testing.T, typ, orderID string, version int64, payload string) outboxlib.Event {
	t.Helper()
	return outboxlib.Event{
		ID: uuid.NewString(), Type: typ, Source: "//spanmart/orders", AggregateType: "order",
		AggregateID: orderID, AggregateVersion: version, SchemaVersion: 1,
		OccurredAt: time.Now().UTC(), Payload: json.RawMessage(payload),
	}
}

func (f *fulfillment) reserved(t *testing.T) int64 {
	t.Helper()
	row, err := fulfillmentdb.ReadInventory(context.Background(), f.client.Single(), "A1")
	if err != nil {
		t.Fatal(err)
	}
	return row.Reserved
}

func (f *fulfillment) outboxTypes(t *testing.T) map[string]int {
	t.Helper()
	rows, err := outboxdb.ReadOutboxEventRows(context.Background(), f.client.Single(), spanner.AllKeys())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range rows {
		out[r.EventType]++
	}
	return out
}

// TestEventsOverHTTP delivers order events through the outboxlib consumer over real HTTP with real
// OIDC tokens: verification, application, the inbox, early events and dead letters.
func TestEventsOverHTTP(t *testing.T) {
	f := startFulfillment(t, nil)
	good := f.token(t, testAudience, relayEmail)
	created := orderEvent(t, "order.created", "o-1", 1,
		`{"order_id":"o-1","customer_id":"c-1","currency":"JPY","total_minor":2400,"lines":[{"sku":"A1","quantity":2,"unit_price_minor":1200}],"note":"unknown fields are fine"}`)

	t.Run("bad tokens are refused and change nothing", func(t *testing.T) {
		for name, tok := range map[string]string{
			"other audience":  f.token(t, "http://other.test", relayEmail),
			"not the relay":   f.token(t, testAudience, "someone@spanmart.test"),
			"not a JWT":       "garbage",
			"no token at all": "",
		} {
			if status, _, _ := f.deliver(t, created, tok); status != http.StatusUnauthorized {
				t.Errorf("%s: status %d, want 401", name, status)
			}
		}
		if got := f.reserved(t); got != 0 {
			t.Errorf("reserved = %d after refused deliveries, want 0", got)
		}
	})

	t.Run("order.cancelled before order.created is early", func(t *testing.T) {
		status, _, h := f.deliver(t, orderEvent(t, "order.cancelled", "o-1", 2, `{"order_id":"o-1","reason":"customer"}`), good)
		if status != http.StatusConflict || h.Get("Retry-After") == "" {
			t.Errorf("status %d, Retry-After %q; want 409 with Retry-After", status, h.Get("Retry-After"))
		}
	})

	t.Run("order.created reserves once", func(t *testing.T) {
		if status, outcome, _ := f.deliver(t, created, good); status != http.StatusOK || outcome != outboxlib.OutcomeApplied {
			t.Fatalf("first delivery: %d %q, want 200 applied", status, outcome)
		}
		if status, outcome, _ := f.deliver(t, created, good); status != http.StatusOK || outcome != outboxlib.OutcomeDuplicate {
			t.Errorf("redelivery: %d %q, want 200 duplicate", status, outcome)
		}
		// The same version under another id: applying or skipping it could be wrong, so it is
		// parked for an operator.
		replay := created
		replay.ID = uuid.NewString()
		if status, outcome, _ := f.deliver(t, replay, good); status != http.StatusOK || outcome != outboxlib.OutcomeDeadLettered {
			t.Errorf("the same version with a new id: %d %q, want 200 dead_lettered", status, outcome)
		}
		if got := f.reserved(t); got != 2 {
			t.Errorf("reserved = %d, want 2", got)
		}
		if _, err := outboxdb.ReadProcessedEvent(context.Background(), f.client.Single(), created.ID, events.ConsumerName); err != nil {
			t.Errorf("ProcessedEvents row of %s: %v", created.ID, err)
		}
		body := platformtest.WaitStatus(t, f.url+"/v1/reservations/o-1", http.StatusOK)
		var r struct {
			Status string `json:"status"`
		}
		if json.Unmarshal(body, &r); r.Status != "HELD" {
			t.Errorf("GET /v1/reservations/o-1 = %s, want HELD", body)
		}
	})

	t.Run("order.cancelled releases", func(t *testing.T) {
		cancelled := orderEvent(t, "order.cancelled", "o-1", 2, `{"order_id":"o-1","reason":"customer"}`)
		if status, outcome, _ := f.deliver(t, cancelled, good); status != http.StatusOK || outcome != outboxlib.OutcomeApplied {
			t.Fatalf("order.cancelled: %d %q, want 200 applied", status, outcome)
		}
		if got := f.reserved(t); got != 0 {
			t.Errorf("reserved = %d after release, want 0", got)
		}
	})

	t.Run("a payload that can never apply is dead-lettered", func(t *testing.T) {
		bad := orderEvent(t, "order.created", "o-2", 1, `{"order_id":"o-2","lines":[]}`)
		if status, outcome, _ := f.deliver(t, bad, good); status != http.StatusOK || outcome != outboxlib.OutcomeDeadLettered {
			t.Fatalf("invalid order.created: %d %q, want 200 dead_lettered", status, outcome)
		}
		if _, err := outboxdb.ReadDeadLetter(context.Background(), f.client.Single(), bad.ID, events.ConsumerName); err != nil {
			t.Errorf("DeadLetters row of %s: %v", bad.ID, err)
		}
	})

	t.Run("an event early beyond the consumer's patience is dead-lettered, then replayed by an operator", func(t *testing.T) {
		poison := orderEvent(t, "order.cancelled", "o-3", 2, `{"order_id":"o-3","reason":"customer"}`)
		// A retry count Cloud Tasks would send after a long outage does not count: the first
		// answer is 409, and the patience runs from it.
		if status, _, _ := f.deliver(t, poison, good, "X-CloudTasks-TaskRetryCount", "9"); status != http.StatusConflict {
			t.Fatalf("order.cancelled before order.created: %d, want 409", status)
		}
		var outcome string
		platformtest.Eventually(t, "order.cancelled dead-lettered once the patience has passed", func() bool {
			var status int
			status, outcome, _ = f.deliver(t, poison, good)
			return status == http.StatusOK
		})
		if outcome != outboxlib.OutcomeDeadLettered {
			t.Fatalf("order.cancelled after the patience: %q, want dead_lettered", outcome)
		}
		created := orderEvent(t, "order.created", "o-3", 1, `{"order_id":"o-3","lines":[{"sku":"A1","quantity":1}]}`)
		if status, outcome, _ := f.deliver(t, created, good); status != http.StatusOK || outcome != outboxlib.OutcomeApplied {
			t.Fatalf("order.created: %d %q, want 200 applied", status, outcome)
		}
		replay := func(token string) *http.Response {
			req, err := http.NewRequest("POST", f.url+"/admin/deadletters/"+poison.ID+"/replay", strings.NewReader(`{"reason":"order.created has arrived"}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp
		}
		// The relay may deliver events, not replay them: only an operator may.
		if resp := replay(good); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("replay with the relay's token: %s, want 403", resp.Status)
		}
		resp := replay(f.token(t, testAudience, operatorMail))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("replay: %s, want 200", resp.Status)
		}
		row, err := fulfillmentdb.ReadOrderReservation(context.Background(), f.client.Single(), "o-3")
		if err != nil || row.Status != "RELEASED" || row.Version != 2 {
			t.Errorf("reservation of o-3 after the replay = %+v (%v), want RELEASED at version 2", row, err)
		}
	})

	want := map[string]int{"inventory.reserved": 2, "inventory.released": 2}
	if got := f.outboxTypes(t); len(got) != len(want) || got["inventory.reserved"] != 2 || got["inventory.released"] != 2 {
		t.Errorf("outbox events by type = %v, want %v", got, want)
	}
}
