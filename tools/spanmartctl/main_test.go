package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/emulator/tasksemu"
	"github.com/spanmart/spanmart/internal/adminclient"
	"github.com/spanmart/spanmart/internal/adminclient/adminclienttest"
	"github.com/spanmart/spanmart/internal/localcloud"
	"github.com/spanmart/spanmart/internal/topology"
)

// result is one run of the command line.
type result struct {
	out, err string
	code     int
}

// fake is a fake stack with the scenario installed.
type fake struct {
	*adminclienttest.Stack
	t *testing.T
}

func newFake(t *testing.T) *fake {
	s := adminclienttest.Start(t)
	s.Scenario()
	return &fake{Stack: s, t: t}
}

// urls is the -urls value of the fake stack.
func (f *fake) urls() string {
	var pairs []string
	for name, u := range f.URLs() {
		pairs = append(pairs, name+"="+u)
	}
	sort.Strings(pairs)
	return strings.Join(pairs, ",")
}

// run runs spanmartctl -env prod against the fake with a fixed token ($SPANMART_TOKEN).
func (f *fake) run(args ...string) result {
	f.t.Helper()
	f.t.Setenv(envToken, "pasted-token")
	f.t.Setenv(envURLs, "")
	return runArgs(append([]string{"-env", "prod", "-urls", f.urls()}, args...)...)
}

func runArgs(args ...string) result {
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return result{out.String(), errOut.String(), code}
}

func (r result) check(t *testing.T, code int, out string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit %d, want %d; stderr:\n%s", r.code, code, r.err)
	}
	if out != "" {
		if diff := cmp.Diff(out, r.out); diff != "" {
			t.Errorf("stdout (-want +got):\n%s", diff)
		}
	}
}

const statusTable = `SOURCE               PENDING  OLDEST  QUARANTINED  SHARDS LIVE
orders               0        -       0            16/16
fulfillment          0        -       0            16/16
gateway-abstraction  1        7m1s    1            16/16
notifications        0        -       0            16/16

CONSUMER             DEAD LETTERS  FAILING  DEFERRALS  LAG P50  LAG P99  APPLIED  SINCE
orders               0             0        1          48ms     310ms    412      2026-03-03T08:00:00Z
fulfillment          2             1        3          48ms     310ms    412      2026-03-03T08:00:00Z
gateway-abstraction  0             0        1          48ms     310ms    412      2026-03-03T08:00:00Z
notifications        0             0        1          48ms     310ms    412      2026-03-03T08:00:00Z

`

func TestStatus(t *testing.T) {
	f := newFake(t)
	f.run("status").check(t, exitProblem, statusTable+
		`problem: gateway-abstraction: 1 quarantined event(s) in the outbox, waiting for a replay
problem: gateway-abstraction: 1 pending event(s), the oldest unpublished for 7m1s (over 5m0s)
problem: fulfillment: 2 dead letter(s) not replayed
problem: fulfillment: 1 event(s) failing (answered with an error, not applied yet)
`)

	r := f.run("-o", "json", "status", "-max-pending-age", "10m")
	var ov adminclient.Overview
	if err := json.Unmarshal([]byte(r.out), &ov); err != nil {
		t.Fatalf("JSON %q: %v", r.out, err)
	}
	if r.code != exitProblem || len(ov.Problems) != 3 || len(ov.Consumers) != 4 || ov.Relay == nil {
		t.Errorf("exit %d, overview %+v", r.code, ov)
	}

	t.Run("healthy", func(t *testing.T) {
		f := newFake(t)
		f.Reply(topology.Fulfillment, "GET /admin/status", 200, `{"consumer":"fulfillment","dead_letters":0,"failing":0,"since":"2026-03-03T08:00:00Z",`+
			`"events":{"applied":0,"duplicate":0,"early":0,"transient":0,"dead_lettered":0,"stale":0,"rejected":0},"lag_seconds":{"count":0,"p50":0,"p99":0}}`)
		f.Reply(topology.Relay, "GET /v1/outbox", 200, `{"owner":"r","sources":[{"source":"orders","database":"d","pending":0,"oldest_pending_age_seconds":0,"quarantined":0,"shards":[{"shard":0,"epoch":0,"live":false}]}]}`)
		r := f.run("status")
		r.check(t, exitOK, "")
		for _, want := range []string{"orders  0        -       0            0/1\n", "fulfillment          0             0        0          -        -        0        2026-03-03T08:00:00Z\n", "no problems\n"} {
			if !strings.Contains(r.out, want) {
				t.Errorf("output lacks %q:\n%s", want, r.out)
			}
		}
	})
	t.Run("a consumer down", func(t *testing.T) {
		f := newFake(t)
		f.Down(topology.Notifications)
		r := f.run("status")
		r.check(t, exitFailure, "")
		if !strings.Contains(r.out, "incomplete: notifications: consumer status: notifications: GET /admin/status: ") ||
			!strings.Contains(r.out, "problem: fulfillment: 2 dead letter(s) not replayed") {
			t.Errorf("output:\n%s", r.out)
		}
	})
	t.Run("refused", func(t *testing.T) {
		f := newFake(t)
		f.Down(topology.Notifications)
		f.Refuse(topology.Relay, "GET /v1/outbox", 403)
		r := f.run("status")
		r.check(t, exitRefused, "")
		if !strings.Contains(r.out, "incomplete: relay: outbox status: relay: GET /v1/outbox: 403 Forbidden: the caller is not an operator of this service\n") {
			t.Errorf("output:\n%s", r.out)
		}
	})
}

func TestDeadLetters(t *testing.T) {
	f := newFake(t)
	f.run("deadletters", "list").check(t, exitOK, `CONSUMER     EVENT ID                              TYPE           ATTEMPTS  DEAD AT               LAST ERROR
fulfillment  d1000000-0000-4000-8000-000000000002  order.created  1         2026-03-03T09:12:00Z  permanent: inventory: unknown sku "Z8"
fulfillment  d1000000-0000-4000-8000-000000000001  order.created  1         2026-03-03T09:10:00Z  permanent: inventory: unknown sku "Z9"
`)
	if n := len(f.Requests(topology.Orders)) + len(f.Requests(topology.Gateway)) + len(f.Requests(topology.Notifications)); n != 3 {
		t.Errorf("%d requests to the other consumers, want one each", n)
	}
	f.run("deadletters", "list", "-consumer", "fulfillment", "-all").check(t, exitOK, `CONSUMER     EVENT ID                              TYPE           ATTEMPTS  DEAD AT               LAST ERROR                              REPLAYED
fulfillment  d1000000-0000-4000-8000-000000000002  order.created  1         2026-03-03T09:12:00Z  permanent: inventory: unknown sku "Z8"  -
fulfillment  d1000000-0000-4000-8000-000000000001  order.created  1         2026-03-03T09:10:00Z  permanent: inventory: unknown sku "Z9"  -
fulfillment  d1000000-0000-4000-8000-000000000003  order.created  1         2026-03-02T09:00:00Z  permanent: inventory: unknown sku "Z7"  2026-03-02T09:30:00Z by operator@spanmart-local.iam.gserviceaccount.com
`)
	f.run("deadletters", "list", "-consumer", "orders").check(t, exitOK, "no dead letters\n")
	f.run("deadletters", "list", "-consumer", "relay").check(t, exitUsage, "")

	r := f.run("-o", "json", "deadletters", "list")
	var lists map[string][]adminclient.DeadLetter
	if err := json.Unmarshal([]byte(r.out), &lists); err != nil || len(lists) != 4 || len(lists["fulfillment"]) != 2 || lists["orders"] == nil {
		t.Errorf("JSON %s: %v", r.out, err)
	}

	t.Run("a consumer down", func(t *testing.T) {
		f := newFake(t)
		f.Down(topology.Gateway)
		r := f.run("deadletters", "list")
		r.check(t, exitFailure, "")
		if !strings.Contains(r.out, adminclienttest.DeadLetterSKU1) || !strings.Contains(r.err, "gateway-abstraction: GET /admin/deadletters") {
			t.Errorf("stdout:\n%s\nstderr:\n%s", r.out, r.err)
		}
	})

	f.run("deadletters", "show", "fulfillment", adminclienttest.DeadLetterReplayed).check(t, exitOK, `consumer:    fulfillment
event:       d1000000-0000-4000-8000-000000000003
type:        order.created
source:      //spanmart/orders
attempts:    1
dead at:     2026-03-02T09:00:00Z
last error:  permanent: inventory: unknown sku "Z7"
replayed:    2026-03-02T09:30:00Z by operator@spanmart-local.iam.gserviceaccount.com
reason:      catalog fixed
attributes:
  ce-aggregatetype:     order
  ce-aggregateversion:  1
  ce-id:                d1000000-0000-4000-8000-000000000003
  ce-source:            //spanmart/orders
  ce-specversion:       1.0
  ce-type:              order.created
payload:
  {
    "order_id": "7d1e2f3a-4b5c-4d6e-8f90-a1b2c3d4e5f6",
    "customer_id": "ali",
    "status": "PENDING",
    "currency": "JPY",
    "total_minor": 1200,
    "lines": [
      {
        "sku": "Z7",
        "quantity": 1,
        "unit_price_minor": 1200
      }
    ]
  }
`)
	f.run("deadletters", "show", "fulfillment", "no-such-event").check(t, exitNotFound, "")
	f.run("deadletters", "show", "fulfillment").check(t, exitUsage, "")

	t.Run("a body that is not JSON", func(t *testing.T) {
		f := newFake(t)
		f.Reply(topology.Orders, "GET /admin/deadletters", 200, `{"dead_letters":[{"event_id":"x","event_type":"t","source":"s","attributes":{},`+
			`"body_bytes":"`+base64.StdEncoding.EncodeToString([]byte("not json"))+`","attempts":2,"last_error":"malformed","dead_at":"2026-03-03T09:00:00Z"}]}`)
		r := f.run("deadletters", "show", "orders", "x")
		r.check(t, exitOK, "")
		if !strings.Contains(r.out, "payload:\n  (not JSON, 8 bytes, base64) bm90IGpzb24=\n") || !strings.Contains(r.out, "replayed:    no\n") {
			t.Errorf("output:\n%s", r.out)
		}
	})
}

func TestDeadLetterReplay(t *testing.T) {
	f := newFake(t)
	path := "/admin/deadletters/" + adminclienttest.DeadLetterSKU1 + "/replay"

	// The reason is required: refused before anything is sent.
	f.run("deadletters", "replay", "fulfillment", adminclienttest.DeadLetterSKU1).check(t, exitUsage, "")
	r := f.run("deadletters", "replay", "fulfillment", adminclienttest.DeadLetterSKU1, "-reason", "  ")
	r.check(t, exitUsage, "")
	if !strings.Contains(r.err, "-reason is required") {
		t.Errorf("stderr %q", r.err)
	}
	if n := len(f.Requests("")); n != 0 {
		t.Fatalf("%d requests sent without a reason", n)
	}

	f.run("deadletters", "replay", "fulfillment", adminclienttest.DeadLetterSKU1, "-reason", "SKU Z9 added").
		check(t, exitOK, "fulfillment "+adminclienttest.DeadLetterSKU1+": applied\n")
	posts := f.Posts(topology.Fulfillment, path)
	if len(posts) != 1 || posts[0].Body != `{"reason":"SKU Z9 added"}` || posts[0].Header.Get("Authorization") != "Bearer pasted-token" {
		t.Errorf("replays sent: %+v", posts)
	}
	// Flags before the arguments work too.
	f.run("deadletters", "replay", "-reason", "again", "fulfillment", adminclienttest.DeadLetterSKU1).check(t, exitOK, "")

	r = f.run("deadletters", "replay", "fulfillment", adminclienttest.DeadLetterReplayed, "-reason", "again")
	r.check(t, exitProblem, "")
	if !strings.Contains(r.err, "409 Conflict: outboxlib: dead letter already replayed") {
		t.Errorf("stderr %q", r.err)
	}
	f.run("deadletters", "replay", "fulfillment", "no-such-event", "-reason", "x").check(t, exitNotFound, "")
	f.Reply(topology.Fulfillment, "POST /admin/deadletters/e422/replay", 422, adminclienttest.Problem(422, "outboxlib: permanent: bad payload", ""))
	f.run("deadletters", "replay", "fulfillment", "e422", "-reason", "x").check(t, exitProblem, "")
	f.Refuse(topology.Orders, "POST /admin/deadletters/e401/replay", 401)
	r = f.run("deadletters", "replay", "orders", "e401", "-reason", "x")
	r.check(t, exitRefused, "")
	if !strings.Contains(r.err, "ADMIN_ALLOWED_EMAILS") {
		t.Errorf("stderr %q: no hint about the token", r.err)
	}
	f.run("deadletters", "replay", "warehouse", "e", "-reason", "x").check(t, exitUsage, "")

	r = f.run("-o", "json", "deadletters", "replay", "fulfillment", adminclienttest.DeadLetterSKU2, "-reason", "x")
	var rep adminclient.DeadLetterReplay
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil || rep != (adminclient.DeadLetterReplay{Consumer: "fulfillment", EventID: adminclienttest.DeadLetterSKU2, Outcome: "applied"}) {
		t.Errorf("JSON %s: %v", r.out, err)
	}
}

func TestDeadLetterGroupReplay(t *testing.T) {
	f := newFake(t)
	f.run("deadletters", "replay", "fulfillment", "-group", adminclienttest.DeadLetterGroup, "-reason", "catalog fixed").check(t, exitOK,
		`EVENT ID                              RESULT   LAST ERROR
d1000000-0000-4000-8000-000000000002  applied  permanent: inventory: unknown sku "Z8"
d1000000-0000-4000-8000-000000000001  applied  permanent: inventory: unknown sku "Z9"
`)
	for _, id := range []string{adminclienttest.DeadLetterSKU1, adminclienttest.DeadLetterSKU2} {
		if n := len(f.Posts(topology.Fulfillment, "/admin/deadletters/"+id+"/replay")); n != 1 {
			t.Errorf("%s replayed %d times", id, n)
		}
	}
	// Only unreplayed dead letters are candidates (the replayed one also matches the text).
	if n := len(f.Posts(topology.Fulfillment, "/admin/deadletters/"+adminclienttest.DeadLetterReplayed+"/replay")); n != 0 {
		t.Errorf("the replayed dead letter was replayed again")
	}

	f.run("deadletters", "replay", "fulfillment", "-group", "Z9", "-reason", "x").check(t, exitOK,
		"EVENT ID                              RESULT   LAST ERROR\nd1000000-0000-4000-8000-000000000001  applied  permanent: inventory: unknown sku \"Z9\"\n")
	r := f.run("deadletters", "replay", "fulfillment", "-group", "no such error", "-reason", "x")
	r.check(t, exitNotFound, "")
	if !strings.Contains(r.err, `fulfillment has no unreplayed dead letter whose last error contains "no such error"`) {
		t.Errorf("stderr %q", r.err)
	}
	f.run("deadletters", "replay", "fulfillment", "-group", "x").check(t, exitUsage, "")
	f.run("deadletters", "replay", "fulfillment", "-group", "", "-reason", "x").check(t, exitUsage, "")
	f.run("deadletters", "replay", "fulfillment", adminclienttest.DeadLetterSKU1, "-group", "x", "-reason", "x").check(t, exitUsage, "")

	// One fails: the others are still replayed, and the exit code is the failure's.
	f.Reply(topology.Fulfillment, "POST /admin/deadletters/"+adminclienttest.DeadLetterSKU2+"/replay", 409,
		adminclienttest.Problem(409, "outboxlib: event is early: predecessor version 1 not applied", ""))
	r = f.run("-o", "json", "deadletters", "replay", "fulfillment", "-group", adminclienttest.DeadLetterGroup, "-reason", "x")
	r.check(t, exitProblem, "")
	var results []groupResult
	if err := json.Unmarshal([]byte(r.out), &results); err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 || results[0].Error == "" || results[0].Outcome != "" || results[1].Outcome != "applied" || results[1].Error != "" {
		t.Errorf("results %+v", results)
	}
}

func TestOutbox(t *testing.T) {
	f := newFake(t)
	f.run("outbox", "quarantined").check(t, exitOK, `SOURCE               EVENT ID                              TYPE            AGGREGATE                                        ATTEMPTS  COMMITTED             LAST ERROR
gateway-abstraction  e1000000-0000-4000-8000-000000000006  payment.voided  payment 3c2b1a09-8f7e-4d6c-9b5a-493827161504 v3  12        2026-03-03T10:53:00Z  create task: rpc error: code = InvalidArgument desc = Task …
`)
	var evs []adminclient.QuarantinedEvent
	if err := json.Unmarshal([]byte(f.run("-o", "json", "outbox", "quarantined").out), &evs); err != nil || len(evs) != 1 || len(evs[0].Payload) == 0 {
		t.Errorf("JSON: %+v, %v", evs, err)
	}
	f.Reply(topology.Relay, "GET /v1/outbox/quarantined", 200, `{"events":[]}`)
	f.run("outbox", "quarantined").check(t, exitOK, "no quarantined events\n")

	f.run("outbox", "replay", topology.Gateway, adminclienttest.EventQuarantined).check(t, exitUsage, "")
	if n := len(f.Posts(topology.Relay, "/v1/outbox/gateway-abstraction/events/"+adminclienttest.EventQuarantined+"/replay")); n != 0 {
		t.Fatalf("replayed without a reason")
	}
	f.run("outbox", "replay", topology.Gateway, adminclienttest.EventQuarantined, "-reason", "task size limit raised").check(t, exitOK,
		"gateway-abstraction e1000000-0000-4000-8000-000000000006: replayed (pending again: the relay publishes it on its next pass)\n")
	posts := f.Posts(topology.Relay, "/v1/outbox/gateway-abstraction/events/"+adminclienttest.EventQuarantined+"/replay")
	if len(posts) != 1 || posts[0].Body != `{"reason":"task size limit raised"}` {
		t.Errorf("replays %+v", posts)
	}
	f.run("outbox", "replay", topology.Gateway, "no-such-event", "-reason", "x").check(t, exitNotFound, "")
	f.Down(topology.Relay)
	f.run("outbox", "replay", topology.Gateway, adminclienttest.EventQuarantined, "-reason", "x").check(t, exitFailure, "")
}

const traceTable = `order 0b0c6f4e-3c1a-4c8e-9a55-6f7d2a1b9e01 CONFIRMED

TIME                     EVENT                      SOURCE → SUBSCRIBER           COMMITTED→PUBLISHED  →APPLIED  END-TO-END  EVENT ID
2026-03-01 10:00:00.000  order.created v1           orders → fulfillment          40ms                 50ms      90ms        e1000000-0000-4000-8000-000000000001
2026-03-01 10:00:00.000  order.created v1           orders → notifications        40ms                 110ms     150ms       e1000000-0000-4000-8000-000000000001
2026-03-01 10:00:00.090  inventory.reserved v1      fulfillment → orders          30ms                 50ms      80ms        e1000000-0000-4000-8000-000000000002
2026-03-01 10:00:00.170  order.awaiting_payment v2  orders → gateway-abstraction  40ms                 50ms      90ms        e1000000-0000-4000-8000-000000000003
2026-03-01 10:00:01.260  payment.authorized v1      gateway-abstraction → orders  40ms                 50ms      90ms        e1000000-0000-4000-8000-000000000004
2026-03-01 10:00:01.350  order.confirmed v3         orders → fulfillment          40ms                 50ms      90ms        e1000000-0000-4000-8000-000000000005
2026-03-01 10:00:01.350  order.confirmed v3         orders → notifications        40ms                 3s        3.04s       e1000000-0000-4000-8000-000000000005  ◀ slowest

problem: orders: stuck in CONFIRMED for 48h59m58s, waiting for shipment
`

func TestOrderTrace(t *testing.T) {
	f := newFake(t)
	f.run("order", "trace", adminclienttest.OrderID).check(t, exitProblem, traceTable)

	r := f.run("-o", "json", "order", "trace", adminclienttest.OrderID)
	var tr adminclient.Trace
	if err := json.Unmarshal([]byte(r.out), &tr); err != nil {
		t.Fatal(err)
	}
	if len(tr.Hops) != 7 || tr.Slowest() != 6 || tr.Stuck == nil || tr.Hops[6].EndToEnd == nil || tr.Hops[6].EndToEnd.Milliseconds() != 3040 {
		t.Errorf("trace %+v", tr)
	}

	t.Run("healthy", func(t *testing.T) {
		f := newFake(t)
		f.Reply(topology.Orders, "GET /admin/stuck-orders", 200, `{"checked_at":"2026-03-03T11:00:00Z","stuck_after":{},"counts":{},"truncated":[],"orders":[]}`)
		f.run("order", "trace", adminclienttest.OrderID).check(t, exitOK, strings.TrimSuffix(traceTable, "problem: orders: stuck in CONFIRMED for 48h59m58s, waiting for shipment\n"))
	})
	t.Run("a subscriber down", func(t *testing.T) {
		f := newFake(t)
		f.Down(topology.Notifications)
		r := f.run("order", "trace", adminclienttest.OrderID)
		r.check(t, exitFailure, "")
		for _, want := range []string{
			"orders → notifications        40ms                 ?         ?           e1000000-0000-4000-8000-000000000001\n",
			"orders → fulfillment          40ms                 50ms      90ms        e1000000-0000-4000-8000-000000000001  ◀ slowest\n",
			"incomplete: notifications: processed events: notifications: GET /admin/processed?",
		} {
			if !strings.Contains(r.out, want) {
				t.Errorf("output lacks %q:\n%s", want, r.out)
			}
		}
	})
	t.Run("pending, dead-lettered, not yet applied, no subscriber", func(t *testing.T) {
		f := newFake(t)
		f.Handle(topology.Relay, "GET /v1/outbox/events", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("aggregate_type") != "order" {
				fmt.Fprint(w, `{"events":[]}`)
				return
			}
			fmt.Fprint(w, `{"events":[`+
				`{"source":"orders","event_id":"`+adminclienttest.EventOrderCreated+`","type":"order.created","aggregate_type":"order","aggregate_id":"`+adminclienttest.OrderID+`","aggregate_version":1,"committed_at":"2026-03-01T10:00:00Z","published_at":"2026-03-01T10:00:00.04Z","quarantined":false,"subscribers":["fulfillment","notifications"]},`+
				`{"source":"orders","event_id":"n1","type":"order.completed","aggregate_type":"order","aggregate_id":"`+adminclienttest.OrderID+`","aggregate_version":4,"committed_at":"2026-03-01T10:00:02Z","published_at":"2026-03-01T10:00:02.01Z","quarantined":false,"subscribers":[]},`+
				`{"source":"orders","event_id":"p1","type":"order.shipped","aggregate_type":"order","aggregate_id":"`+adminclienttest.OrderID+`","aggregate_version":5,"committed_at":"2026-03-01T10:00:03Z","published_at":null,"quarantined":true,"subscribers":["gateway-abstraction"]}]}`)
		})
		f.Reply(topology.Fulfillment, "GET /admin/deadletters", 200, `{"dead_letters":[{"event_id":"`+adminclienttest.EventOrderCreated+`","event_type":"order.created","source":"//spanmart/orders","attributes":{},"body":{},"attempts":1,"last_error":"x","dead_at":"2026-03-01T10:00:00.09Z"}]}`)
		r := f.run("order", "trace", adminclienttest.OrderID)
		r.check(t, exitProblem, `order 0b0c6f4e-3c1a-4c8e-9a55-6f7d2a1b9e01 CONFIRMED

TIME                     EVENT               SOURCE → SUBSCRIBER           COMMITTED→PUBLISHED  →APPLIED     END-TO-END  EVENT ID
2026-03-01 10:00:00.000  order.created v1    orders → fulfillment          40ms                 dead letter  -           e1000000-0000-4000-8000-000000000001
2026-03-01 10:00:00.000  order.created v1    orders → notifications        40ms                 110ms        150ms       e1000000-0000-4000-8000-000000000001  ◀ slowest
2026-03-01 10:00:02.000  order.completed v4  orders → (no subscriber)      10ms                                          n1
2026-03-01 10:00:03.000  order.shipped v5    orders → gateway-abstraction  quarantined          not yet      -           p1

problem: orders: stuck in CONFIRMED for 48h59m58s, waiting for shipment
problem: fulfillment: dead-lettered event e1000000-0000-4000-8000-000000000001 (order.created)
problem: orders: event p1 (order.shipped) is quarantined in the outbox
`)
	})
	t.Run("unknown order", func(t *testing.T) {
		r := f.run("order", "trace", "no-such-order")
		r.check(t, exitNotFound, "order no-such-order (status unknown)\n\nno events\nincomplete: orders: order: orders: GET /admin/orders/no-such-order: 404 Not Found: no route GET /admin/orders/no-such-order in the fake orders\n")
		if !strings.Contains(r.err, "orders does not know it and the relay has no event of it") {
			t.Errorf("stderr %q", r.err)
		}
	})
	f.run("order", "trace").check(t, exitUsage, "")
	f.run("order", "show", adminclienttest.OrderID).check(t, exitUsage, "")
}

func TestAuditCommands(t *testing.T) {
	f := newFake(t)
	stuck := `ORDER                                 STATUS     SINCE                 FOR        WAITING FOR  CANCEL REASON
0b0c6f4e-3c1a-4c8e-9a55-6f7d2a1b9e01  CONFIRMED  2026-03-01T10:00:01Z  48h59m58s  shipment     -
`
	rec := `12 orders checked, last changed from 2026-03-02T11:00:00Z to 2026-03-03T10:58:00Z

ORDER                                 STATUS     CHECK      PROBLEMS                                  FULFILLMENT  GATEWAY
7d1e2f3a-4b5c-4d6e-8f90-a1b2c3d4e5f6  CANCELLED  cancelled  fulfillment still holds the stock (HELD)  HELD         VOIDED
`
	f.run("stuck").check(t, exitProblem, stuck)
	f.run("reconcile").check(t, exitProblem, rec)
	f.run("audit").check(t, exitProblem, "STUCK ORDERS\n"+stuck+"\nRECONCILIATION\n"+rec)
	if n := len(f.Posts(topology.Orders, "/admin/audit")); n != 1 {
		t.Errorf("audit: %d POSTs", n)
	}
	var rep adminclient.AuditReport
	if err := json.Unmarshal([]byte(f.run("-o", "json", "audit").out), &rep); err != nil || len(rep.Stuck.Orders) != 1 || len(rep.Reconciliation.Mismatches) != 1 {
		t.Errorf("JSON %+v, %v", rep, err)
	}

	f.Reply(topology.Orders, "GET /admin/stuck-orders", 200, `{"checked_at":"2026-03-03T11:00:00Z","stuck_after":{},"counts":{},"truncated":["CONFIRMED"],"orders":[]}`)
	f.run("stuck").check(t, exitOK, "no stuck orders\ntruncated: more orders may be stuck in CONFIRMED\n")
	f.Reply(topology.Orders, "GET /admin/reconciliation", 200, `{"configured":false,"detail":"no peers to compare with: FULFILLMENT_URL and GATEWAY_URL are not set"}`)
	f.run("reconcile").check(t, exitFailure, "reconciliation not configured: no peers to compare with: FULFILLMENT_URL and GATEWAY_URL are not set\n")
	f.Reply(topology.Orders, "GET /admin/reconciliation", 200, `{"configured":true,"checked_at":"2026-03-03T11:00:00Z","window":{"from":"2026-03-02T11:00:00Z","to":"2026-03-03T10:58:00Z"},"checked":3,"partial":true,`+
		`"unchecked":{"gateway-abstraction":2},"unreachable":{"gateway-abstraction":"gateway-abstraction: GET http://x/admin/payments?order_id=1: status 403"},"mismatches":[],`+
		`"flagged":[{"order_id":"f1","since":"2026-03-03T10:00:00Z","attention_reason":"capture_failed","fulfillment":{"reservation":"SHIPPED"},"gateway":{"payments":null,"error":"timeout"}}]}`)
	f.run("reconcile").check(t, exitFailure, `3 orders checked, last changed from 2026-03-02T11:00:00Z to 2026-03-03T10:58:00Z

NEEDS ATTENTION  SINCE                 REASON          FULFILLMENT  GATEWAY
f1               2026-03-03T10:00:00Z  capture_failed  SHIPPED      error: timeout
partial: gateway-abstraction did not answer for 2 order(s): gateway-abstraction: GET http://x/admin/payments?order_id=1: status 403
`)
	f.Reply(topology.Orders, "GET /admin/reconciliation", 200, `{"configured":true,"checked":3,"partial":false,"mismatches":[],"flagged":[]}`)
	f.run("reconcile").check(t, exitOK, "3 orders checked, last changed from - to -\nno mismatches\n")
	f.Refuse(topology.Orders, "GET /admin/stuck-orders", 403)
	f.run("stuck").check(t, exitRefused, "")
}

func TestUsage(t *testing.T) {
	f := newFake(t)
	for _, tt := range []struct {
		name string
		args []string
		code int
	}{
		{"help", []string{"-h"}, exitOK},
		{"no command", nil, exitUsage},
		{"unknown command", []string{"frobnicate"}, exitUsage},
		{"unknown flag", []string{"-frob", "status"}, exitUsage},
		{"bad output", []string{"-o", "yaml", "status"}, exitUsage},
		{"bad env", []string{"-env", "staging", "status"}, exitUsage},
		{"prod without URLs", []string{"-env", "prod", "status"}, exitUsage},
		{"bad URL", []string{"-env", "prod", "-urls", "orders=127.0.0.1:8081", "status"}, exitUsage},
		{"unknown service", []string{"-env", "prod", "-urls", "warehouse=http://x", "status"}, exitUsage},
		{"URL twice", []string{"-env", "prod", "-urls", "orders=http://x,orders=http://y", "status"}, exitUsage},
		{"extra argument", []string{"-env", "prod", "-urls", f.urls(), "stuck", "now"}, exitUsage},
		{"unknown subcommand flag", []string{"-env", "prod", "-urls", f.urls(), "deadletters", "list", "-newest"}, exitUsage},
		{"deadletters without a verb", []string{"deadletters"}, exitUsage},
		{"outbox without a verb", []string{"outbox", "list"}, exitUsage},
	} {
		t.Setenv(envToken, "")
		t.Setenv(envURLs, "")
		if r := runArgs(tt.args...); r.code != tt.code {
			t.Errorf("%s: exit %d, want %d; stderr:\n%s", tt.name, r.code, tt.code, r.err)
		}
	}
	if n := len(f.Requests("")); n != 0 {
		t.Errorf("%d requests sent by command lines that are wrong", n)
	}
	// A service without a URL: the command names it.
	t.Setenv(envToken, "t")
	r := runArgs("-env", "prod", "-urls", "relay="+f.URL(topology.Relay), "stuck")
	r.check(t, exitUsage, "")
	if !strings.Contains(r.err, "orders: adminclient: no URL configured for the service") {
		t.Errorf("stderr %q", r.err)
	}
	// $SPANMART_URLS stands in for -urls, and -as is refused with a fixed token.
	t.Setenv(envURLs, f.urls())
	runArgs("-env", "prod", "stuck").check(t, exitProblem, "")
	runArgs("-env", "prod", "-as", "someone@x.iam.gserviceaccount.com", "stuck").check(t, exitUsage, "")
}

func TestExitCodes(t *testing.T) {
	apiErr := func(status int) error {
		return fmt.Errorf("wrapped: %w", &adminclient.Error{Service: "orders", StatusCode: status})
	}
	for _, tt := range []struct {
		err  error
		want int
	}{
		{nil, exitOK},
		{usageErrorf("x"), exitUsage},
		{adminclient.ErrNoReason, exitUsage},
		{fmt.Errorf("x: %w", adminclient.ErrNoURL), exitUsage},
		{fmt.Errorf("x: %w", adminclient.ErrUnknownService), exitUsage},
		{apiErr(400), exitUsage},
		{apiErr(401), exitRefused},
		{apiErr(403), exitRefused},
		{apiErr(404), exitNotFound},
		{fmt.Errorf("dead letter: %w", adminclient.ErrNotFound), exitNotFound},
		{apiErr(409), exitProblem},
		{apiErr(422), exitProblem},
		{apiErr(500), exitFailure},
		{apiErr(503), exitFailure},
		{errors.New("dial tcp 127.0.0.1:8081: connection refused"), exitFailure},
		{context.DeadlineExceeded, exitFailure},
	} {
		if got := exitCode(tt.err); got != tt.want {
			t.Errorf("exitCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
	if got := worst(exitProblem, exitFailure, exitOK); got != exitFailure {
		t.Errorf("worst(1, 5, 0) = %d", got)
	}
	if got := worst(exitProblem, exitRefused, exitFailure); got != exitRefused {
		t.Errorf("worst(1, 3, 5) = %d", got)
	}
}

// -env dev: the dev stack's URLs (its ports after -port-offset), and tokens the Tasks emulator
// mints for the local operator (or -as) on the dev stack's Tasks port.
func TestDevEnvironment(t *testing.T) {
	want := map[string]string{}
	for _, s := range topology.Services() {
		want[s.Name] = "http://127.0.0.1:" + strconv.Itoa(s.DevPort+1000)
	}
	if diff := cmp.Diff(want, devURLs(1000)); diff != "" {
		t.Errorf("dev URLs with offset 1000 (-want +got):\n%s", diff)
	}
	if got := devURLs(0)[topology.Orders]; got != "http://127.0.0.1:8081" {
		t.Errorf("orders' dev URL %q", got)
	}
	if got := devTasksHost(1000); got != "127.0.0.1:9124" {
		t.Errorf("Tasks host %q", got)
	}

	emu, err := tasksemu.Start(context.Background(), tasksemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emu.Close() })
	_, port, _ := strings.Cut(emu.HTTPAddr(), ":")
	p, _ := strconv.Atoi(port)
	offset := strconv.Itoa(p - devTasksHTTPPort)
	t.Setenv("GCE_METADATA_HOST", "127.0.0.1:1") // not asked: the dev stack's Tasks port is
	t.Setenv(envToken, "ignored in dev")

	f := newFake(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, localcloud.Operator},
		{[]string{"-as", "console@spanmart-local.iam.gserviceaccount.com"}, "console@spanmart-local.iam.gserviceaccount.com"},
	} {
		before := len(f.Requests(""))
		args := append([]string{"-port-offset", offset, "-urls", f.urls()}, tt.args...)
		runArgs(append(args, "stuck")...).check(t, exitProblem, "")
		runArgs(append(args, "outbox", "quarantined")...).check(t, exitOK, "")
		reqs := f.Requests("")[before:]
		if len(reqs) != 2 {
			t.Fatalf("%d requests", len(reqs))
		}
		for _, r := range reqs {
			email, aud := adminclienttest.TokenClaims(t, r.Header.Get("Authorization"))
			if email != tt.want || aud != f.URL(r.Service) {
				t.Errorf("token to %s of %q for %q, want %q for %q", r.Service, email, aud, tt.want, f.URL(r.Service))
			}
		}
	}

	// No Tasks emulator answers at the offset: no token, which is a failure (5), not a refusal.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := lis.Addr().(*net.TCPAddr).Port
	lis.Close()
	r := runArgs("-port-offset", strconv.Itoa(closed-devTasksHTTPPort), "-urls", f.urls(), "stuck")
	r.check(t, exitFailure, "")
	if !strings.Contains(r.err, "orders: GET /admin/stuck-orders: ID token for "+f.URL(topology.Orders)) {
		t.Errorf("stderr %q", r.err)
	}
}

// -env prod without $SPANMART_TOKEN: the metadata server's tokens.
func TestProdMetadataTokens(t *testing.T) {
	emu, err := tasksemu.Start(context.Background(), tasksemu.Options{ServiceAccount: "ops@spanmart.iam.gserviceaccount.com"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emu.Close() })
	t.Setenv("GCE_METADATA_HOST", emu.HTTPAddr())
	t.Setenv(envToken, "")
	f := newFake(t)
	runArgs("-env", "prod", "-urls", f.urls(), "stuck").check(t, exitProblem, "")
	r := f.Requests(topology.Orders)[0]
	if email, aud := adminclienttest.TokenClaims(t, r.Header.Get("Authorization")); email != "ops@spanmart.iam.gserviceaccount.com" || aud != f.URL(topology.Orders) {
		t.Errorf("token of %q for %q", email, aud)
	}
}
