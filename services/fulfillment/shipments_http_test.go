package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/platform/platformtest"
	"github.com/spanmart/spanmart/services/fulfillment/internal/carrier"
	"github.com/spanmart/spanmart/services/fulfillment/internal/shipment"
)

// relayNudges is a relay that records the nudges it gets.
type relayNudges struct {
	mu  sync.Mutex
	got map[string]bool // "source=...&shard=..."
}

func startRelay(t *testing.T) (*relayNudges, string) {
	t.Helper()
	r := &relayNudges{got: map[string]bool{}}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPost && req.URL.Path == "/nudge" {
			// A nudge names one source and every shard nudged since the last (gathered).
			q := req.URL.Query()
			r.mu.Lock()
			for _, shard := range q["shard"] {
				r.got["source="+q.Get("source")+"&shard="+shard] = true
			}
			r.mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(hs.Close)
	return r, hs.URL
}

func (r *relayNudges) nudged(aggregateID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[fmt.Sprintf("source=%s&shard=%d", serviceName, outboxlib.ShardOf(aggregateID))]
}

func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode
}

type shipmentJSON struct {
	ShipmentID     string `json:"shipment_id"`
	Status         string `json:"status"`
	Version        int64  `json:"version"`
	Carrier        string `json:"carrier"`
	TrackingNumber string `json:"tracking_number"`
	FailureReason  string `json:"failure_reason"`
	ShippedBy      string `json:"shipped_by"`
	FailedBy       string `json:"failed_by"`
}

// post sends a warehouse action with the given Authorization header ("" for none) and returns the
// status and the shipment answered (zero for a problem).
func post(t *testing.T, url, authorization, body string) (int, shipmentJSON) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sh shipmentJSON
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&sh); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, sh
}

// TestShipmentsWithTheSimulatedCarrier runs the service with the simulated carrier on: confirmed
// orders get shipments, which the carrier ships (or fails, for a SKU it rejects) through the same
// use cases as the warehouse's HTTP actions, recorded as done by the carrier; the relay is nudged
// for their events, a cancellation after shipping is reported, and the transitions are counted at
// /metrics.
func TestShipmentsWithTheSimulatedCarrier(t *testing.T) {
	relay, relayURL := startRelay(t)
	f := startFulfillment(t, map[string]string{
		"CARRIER_SIMULATE_AFTER":     "30ms",
		"CARRIER_SIMULATE_FAIL_SKUS": "BAD",
		"RELAY_URL":                  relayURL,
	})
	token := f.token(t, testAudience, relayEmail)
	deliver := func(e outboxlib.Event, predecessor int64) {
		t.Helper()
		status, outcome, _ := f.deliver(t, e, token, outboxlib.HeaderPredecessorVersion, fmt.Sprint(predecessor))
		if status != http.StatusOK || outcome != outboxlib.OutcomeApplied {
			t.Fatalf("%s %s: %d %q, want 200 applied", e.Type, e.AggregateID, status, outcome)
		}
	}
	for id, sku := range map[string]string{"o-good": "A1", "o-bad": "BAD"} {
		deliver(orderEvent(t, "order.created", id, 1, `{"order_id":"`+id+`","lines":[{"sku":"`+sku+`","quantity":2}]}`), 0)
		// order.awaiting_payment (version 2) is not routed to fulfillment: the relay names version 1.
		deliver(orderEvent(t, "order.confirmed", id, 3, `{"order_id":"`+id+`","status":"CONFIRMED"}`), 1)
	}

	shipmentOf := func(orderID string) shipmentJSON {
		t.Helper()
		var list struct {
			Items []shipmentJSON `json:"items"`
		}
		if status := getJSON(t, f.url+"/v1/shipments?order_id="+orderID, &list); status != http.StatusOK || len(list.Items) != 1 {
			t.Fatalf("shipments of %s: %d %+v", orderID, status, list)
		}
		return list.Items[0]
	}
	platformtest.Eventually(t, "the simulated carrier handling both shipments", func() bool {
		return shipmentOf("o-good").Status != "PENDING" && shipmentOf("o-bad").Status != "PENDING"
	})
	good, bad := shipmentOf("o-good"), shipmentOf("o-bad")
	if good.Status != "SHIPPED" || good.Carrier != carrier.Name || good.TrackingNumber != carrier.TrackingNumber(good.ShipmentID) ||
		good.ShipmentID != shipment.IDFor("o-good") || good.ShippedBy != carrier.Actor {
		t.Errorf("shipment of o-good = %+v, want shipped by the simulated carrier", good)
	}
	if bad.Status != "FAILED" || bad.FailureReason != shipment.ReasonCarrierRejected || bad.FailedBy != carrier.Actor {
		t.Errorf("shipment of o-bad = %+v, want failed (carrier_rejected) by the simulated carrier", bad)
	}
	platformtest.Eventually(t, "the relay nudged for both shipments' events", func() bool {
		return relay.nudged(good.ShipmentID) && relay.nudged(bad.ShipmentID)
	})

	// The warehouse repeating the carrier's request changes nothing: the carrier stays who shipped.
	repeat := `{"carrier":"` + carrier.Name + `","tracking_number":"` + good.TrackingNumber + `"}`
	status, again := post(t, f.url+"/v1/shipments/"+good.ShipmentID+"/ship", "Bearer "+f.token(t, testAudience, warehouseEmail), repeat)
	if status != http.StatusOK || again.Version != good.Version || again.ShippedBy != carrier.Actor {
		t.Errorf("repeated ship = %d %+v, want 200 at version %d, by %s", status, again, good.Version, carrier.Actor)
	}

	// Cancelled after shipping: reported, once.
	cancelled := orderEvent(t, "order.cancelled", "o-good", 4, `{"order_id":"o-good","reason":"customer_request"}`)
	deliver(cancelled, 3)
	if got := f.outboxTypes(t); got["inventory.release_failed"] != 1 || got["shipment.shipped"] != 1 || got["shipment.failed"] != 1 {
		t.Errorf("outbox events by type = %v", got)
	}

	metrics := platformtest.WaitStatus(t, f.url+"/metrics", http.StatusOK)
	for _, want := range []string{
		`fulfillment_shipments_total{status="PENDING"} 2`,
		`fulfillment_shipments_total{status="SHIPPED"} 1`,
		`fulfillment_shipments_total{status="FAILED"} 1`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
}

// TestWarehouseAccounts runs the service as configured in production: its warehouse's actions take
// an ID token for its URL of a warehouse's account (WAREHOUSE_ALLOWED_EMAILS) or an operator's
// (ADMIN_ALLOWED_EMAILS, but not the console's, a delegate); not the relay's, which delivers events.
// The account that ships is recorded; a repeat by another keeps it.
func TestWarehouseAccounts(t *testing.T) {
	const console = "console@spanmart.test"
	f := startFulfillment(t, map[string]string{
		"ADMIN_ALLOWED_EMAILS":  operatorMail + "," + console,
		"ADMIN_DELEGATE_EMAILS": console,
	})
	relayToken := f.token(t, testAudience, relayEmail)
	for _, e := range []struct {
		e           outboxlib.Event
		predecessor int64
	}{
		{orderEvent(t, "order.created", "o-1", 1, `{"order_id":"o-1","lines":[{"sku":"A1","quantity":2}]}`), 0},
		{orderEvent(t, "order.confirmed", "o-1", 3, `{"order_id":"o-1","status":"CONFIRMED"}`), 1},
	} {
		if status, outcome, _ := f.deliver(t, e.e, relayToken, outboxlib.HeaderPredecessorVersion, fmt.Sprint(e.predecessor)); status != http.StatusOK || outcome != outboxlib.OutcomeApplied {
			t.Fatalf("%s: %d %q, want 200 applied", e.e.Type, status, outcome)
		}
	}
	ship := f.url + "/v1/shipments/" + shipment.IDFor("o-1") + "/ship"
	const body = `{"carrier":"yamato","tracking_number":"YT-1"}`
	bearer := func(audience, account string) string { return "Bearer " + f.token(t, audience, account) }
	for _, tt := range []struct {
		name, auth string
		status     int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"the warehouse's token for another audience", bearer("http://orders.test", warehouseEmail), http.StatusUnauthorized},
		{"the relay's token", "Bearer " + relayToken, http.StatusForbidden},
		{"the console's own token", bearer(testAudience, console), http.StatusForbidden},
		{"an operator's token", bearer(testAudience, operatorMail), http.StatusOK},
		{"the warehouse's token, a repeat", bearer(testAudience, warehouseEmail), http.StatusOK},
	} {
		status, sh := post(t, ship, tt.auth, body)
		if status != tt.status {
			t.Errorf("%s: POST ship = %d, want %d", tt.name, status, tt.status)
		}
		if status == http.StatusOK && (sh.Status != "SHIPPED" || sh.Version != 2 || sh.ShippedBy != operatorMail) {
			t.Errorf("%s: shipment %+v, want SHIPPED at version 2 by %s", tt.name, sh, operatorMail)
		}
	}
	if got := f.outboxTypes(t); got["shipment.shipped"] != 1 {
		t.Errorf("outbox events by type = %v, want one shipment.shipped", got)
	}
}
