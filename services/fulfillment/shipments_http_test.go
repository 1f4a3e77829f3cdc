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
			r.mu.Lock()
			r.got[req.URL.RawQuery] = true
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
}

// TestShipmentsWithTheSimulatedCarrier runs the service with the simulated carrier on: confirmed
// orders get shipments, which the carrier ships (or fails, for a SKU it rejects) through the same
// use cases as the warehouse's HTTP actions; the relay is nudged for their events, a cancellation
// after shipping is reported, and the transitions are counted at /metrics.
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
	if good.Status != "SHIPPED" || good.Carrier != carrier.Name || good.TrackingNumber != carrier.TrackingNumber(good.ShipmentID) || good.ShipmentID != shipment.IDFor("o-good") {
		t.Errorf("shipment of o-good = %+v, want shipped by the simulated carrier", good)
	}
	if bad.Status != "FAILED" || bad.FailureReason != shipment.ReasonCarrierRejected {
		t.Errorf("shipment of o-bad = %+v, want failed (carrier_rejected)", bad)
	}
	platformtest.Eventually(t, "the relay nudged for both shipments' events", func() bool {
		return relay.nudged(good.ShipmentID) && relay.nudged(bad.ShipmentID)
	})

	// The warehouse repeating the carrier's request changes nothing.
	resp, err := http.Post(f.url+"/v1/shipments/"+good.ShipmentID+"/ship", "application/json",
		strings.NewReader(`{"carrier":"`+carrier.Name+`","tracking_number":"`+good.TrackingNumber+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	var again shipmentJSON
	json.NewDecoder(resp.Body).Decode(&again)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || again.Version != good.Version {
		t.Errorf("repeated ship = %s %+v, want 200 at version %d", resp.Status, again, good.Version)
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
