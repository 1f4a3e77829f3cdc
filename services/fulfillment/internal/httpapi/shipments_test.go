package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/services/fulfillment/internal/app"
	ft "github.com/spanmart/spanmart/services/fulfillment/internal/fulfillmenttest"
	"github.com/spanmart/spanmart/services/fulfillment/internal/inventory"
	"github.com/spanmart/spanmart/services/fulfillment/internal/shipment"
)

// post sends a warehouse action as the warehouse: with an ID token of its account.
func post(t *testing.T, url, body string) (int, string, map[string]any) {
	t.Helper()
	return do(t, http.MethodPost, url, "Bearer "+token(t, audience, warehouse), body)
}

// shipments serves the API with four shipments: pending (o-held's), shipped (by the warehouse),
// failed (by the operator) and cancelled, and returns the URL, the database and their ids.
func shipments(t *testing.T) (url string, client *spanner.Client, ids map[string]string) {
	t.Helper()
	url, client, svc := serve(t)
	ctx := context.Background()
	ids = map[string]string{}
	for _, name := range []string{"held", "shipped", "failed", "cancelled"} {
		orderID := "o-" + name
		if name != "held" {
			sku := "B2"
			if name == "cancelled" {
				sku = "A1" // B2 has 3 units: o-held, o-shipped and o-failed hold them
			}
			ft.Run(t, client, func(ctx context.Context, txn app.Txn) (app.Outcome, error) {
				return svc.Reserve(ctx, txn, orderID, []inventory.Line{{SKU: sku, Quantity: 1}})
			})
		}
		ft.Run(t, client, func(ctx context.Context, txn app.Txn) (app.Outcome, error) {
			return svc.CreateShipment(ctx, txn, orderID)
		})
		ids[name] = shipment.IDFor(orderID)
		if _, err := svc.Shipment(ctx, ids[name]); err != nil {
			t.Fatalf("shipment of %s: %v", orderID, err)
		}
	}
	if _, _, err := svc.Ship(ctx, ids["shipped"], "yamato", "T-1", warehouse); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Fail(ctx, ids["failed"], shipment.ReasonCarrierRejected, operator); err != nil {
		t.Fatal(err)
	}
	ft.Run(t, client, func(ctx context.Context, txn app.Txn) (app.Outcome, error) {
		return svc.Cancel(ctx, txn, "o-cancelled")
	})
	return url, client, ids
}

// withoutTimes checks that the timestamps of a shipment are RFC 3339 (shipped_at only once
// shipped) and removes them, so that the rest compares as a literal.
func withoutTimes(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	for _, k := range []string{"created_at", "updated_at", "shipped_at"} {
		v, ok := m[k]
		if !ok {
			t.Errorf("%s is missing", k)
			continue
		}
		if k == "shipped_at" && (v == nil) == (m["status"] == "SHIPPED") {
			t.Errorf("shipped_at = %v with status %v", v, m["status"])
		}
		if v != nil {
			if ts, err := time.Parse(time.RFC3339Nano, v.(string)); err != nil || ts.IsZero() {
				t.Errorf("%s = %v, want an RFC 3339 timestamp", k, v)
			}
		}
		delete(m, k)
	}
	return m
}

func pending(id string) string {
	return `{"shipment_id":"` + id + `","order_id":"o-held","status":"PENDING","version":1,
		"carrier":null,"tracking_number":null,"failure_reason":null,"shipped_by":null,"failed_by":null,
		"lines":[{"sku":"A1","quantity":2},{"sku":"B2","quantity":1}]}`
}

func TestGetShipments(t *testing.T) {
	url, _, ids := shipments(t)
	for _, tt := range []struct {
		path string
		want string
	}{
		{"/v1/shipments/" + ids["held"], pending(ids["held"])},
		{"/v1/shipments/" + ids["shipped"], `{"shipment_id":"` + ids["shipped"] + `","order_id":"o-shipped","status":"SHIPPED","version":2,
			"carrier":"yamato","tracking_number":"T-1","failure_reason":null,"shipped_by":"` + warehouse + `","failed_by":null,
			"lines":[{"sku":"B2","quantity":1}]}`},
		{"/v1/shipments/" + ids["failed"], `{"shipment_id":"` + ids["failed"] + `","order_id":"o-failed","status":"FAILED","version":2,
			"carrier":null,"tracking_number":null,"failure_reason":"carrier_rejected","shipped_by":null,"failed_by":"` + operator + `",
			"lines":[{"sku":"B2","quantity":1}]}`},
		{"/v1/shipments/" + ids["cancelled"], `{"shipment_id":"` + ids["cancelled"] + `","order_id":"o-cancelled","status":"CANCELLED","version":2,
			"carrier":null,"tracking_number":null,"failure_reason":null,"shipped_by":null,"failed_by":null,
			"lines":[{"sku":"A1","quantity":1}]}`},
		{"/v1/shipments?order_id=o-held", `{"items":[` + pending(ids["held"]) + `]}`},
		{"/v1/shipments?order_id=o-rejected", `{"items":[]}`},
		{"/v1/shipments?order_id=o-unknown", `{"items":[]}`},
	} {
		t.Run(tt.path, func(t *testing.T) {
			status, ct, got := get(t, url+tt.path)
			if status != http.StatusOK || !strings.HasPrefix(ct, "application/json") {
				t.Fatalf("GET %s = %d %s %v", tt.path, status, ct, got)
			}
			if items, ok := got["items"].([]any); ok {
				for _, it := range items {
					withoutTimes(t, it.(map[string]any))
				}
			} else {
				withoutTimes(t, got)
			}
			if diff := cmp.Diff(js(t, tt.want), got); diff != "" {
				t.Errorf("GET %s (-want +got):\n%s", tt.path, diff)
			}
		})
	}
	for path, want := range map[string]int{
		"/v1/shipments/" + shipment.IDFor("o-unknown"):      http.StatusNotFound,
		"/v1/shipments/not-a-uuid":                          http.StatusNotFound,
		"/v1/shipments":                                     http.StatusBadRequest,
		"/v1/shipments?order_id=":                           http.StatusBadRequest,
		"/v1/shipments?order_id=" + strings.Repeat("x", 37): http.StatusBadRequest,
	} {
		t.Run(path, func(t *testing.T) {
			status, ct, got := get(t, url+path)
			if status != want || ct != platform.ContentTypeProblem || got["status"] != float64(want) {
				t.Errorf("GET %s = %d %s %v, want a %d problem", path, status, ct, got, want)
			}
		})
	}
}

// TestShipAndFail sends every request the two actions distinguish and checks the status, the
// answer and what is left in the database.
func TestShipAndFail(t *testing.T) {
	url, _, ids := shipments(t)
	action := func(name, action string) string { return url + "/v1/shipments/" + ids[name] + "/" + action }
	for _, tt := range []struct {
		name   string
		url    string
		body   string
		status int
		// want is the status of the shipment answered (200) or a substring of the problem's detail.
		want string
	}{
		{"bad JSON", action("held", "ship"), `{"carrier":`, http.StatusBadRequest, "not valid"},
		{"no body", action("held", "ship"), ``, http.StatusBadRequest, "not valid"},
		{"unknown field", action("held", "ship"), `{"carrier":"yamato","tracking_number":"T","tracking_no":"T"}`, http.StatusBadRequest, "unknown field"},
		{"trailing data", action("held", "ship"), `{"carrier":"yamato","tracking_number":"T"} {}`, http.StatusBadRequest, "after the JSON"},
		{"no carrier", action("held", "ship"), `{"tracking_number":"T"}`, http.StatusBadRequest, "invalid"},
		{"tracking number too long", action("held", "ship"), `{"carrier":"yamato","tracking_number":"` + strings.Repeat("9", 65) + `"}`, http.StatusBadRequest, "invalid"},
		{"no reason", action("held", "fail"), `{}`, http.StatusBadRequest, "invalid"},
		{"reason not a string", action("held", "fail"), `{"reason":7}`, http.StatusBadRequest, "not valid"},
		{"ship unknown", url + "/v1/shipments/" + shipment.IDFor("o-unknown") + "/ship", `{"carrier":"yamato","tracking_number":"T"}`, http.StatusNotFound, "not found"},
		{"ship not a shipment id", url + "/v1/shipments/o-held/ship", `{"carrier":"yamato","tracking_number":"T"}`, http.StatusNotFound, "not found"},
		{"fail unknown", url + "/v1/shipments/" + shipment.IDFor("o-unknown") + "/fail", `{"reason":"carrier_rejected"}`, http.StatusNotFound, "not found"},
		{"ship", action("held", "ship"), `{"carrier":"sagawa","tracking_number":"S-1"}`, http.StatusOK, "SHIPPED"},
		{"ship again, the same", action("held", "ship"), `{"carrier":"sagawa","tracking_number":"S-1"}`, http.StatusOK, "SHIPPED"},
		{"ship again, another tracking number", action("held", "ship"), `{"carrier":"sagawa","tracking_number":"S-2"}`, http.StatusConflict, "shipped with sagawa S-1"},
		{"ship again, another carrier", action("shipped", "ship"), `{"carrier":"sagawa","tracking_number":"T-1"}`, http.StatusConflict, "conflict"},
		{"ship a failed one", action("failed", "ship"), `{"carrier":"yamato","tracking_number":"T-9"}`, http.StatusConflict, "FAILED"},
		{"ship a cancelled one", action("cancelled", "ship"), `{"carrier":"yamato","tracking_number":"T-9"}`, http.StatusConflict, "CANCELLED"},
		{"fail a shipped one", action("shipped", "fail"), `{"reason":"lost_before_handover"}`, http.StatusConflict, "SHIPPED"},
		{"fail a cancelled one", action("cancelled", "fail"), `{"reason":"lost_before_handover"}`, http.StatusConflict, "CANCELLED"},
		{"fail again, the same", action("failed", "fail"), `{"reason":"carrier_rejected"}`, http.StatusOK, "FAILED"},
		{"fail again, another reason", action("failed", "fail"), `{"reason":"lost_before_handover"}`, http.StatusConflict, "conflict"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, ct, got := post(t, tt.url, tt.body)
			if status != tt.status {
				t.Fatalf("POST %s %s = %d %v, want %d", tt.url, tt.body, status, got, tt.status)
			}
			if status == http.StatusOK {
				if !strings.HasPrefix(ct, "application/json") || got["status"] != tt.want {
					t.Errorf("answer %s %v, want a shipment %s", ct, got, tt.want)
				}
				return
			}
			if detail, _ := got["detail"].(string); ct != platform.ContentTypeProblem || !strings.Contains(detail, tt.want) {
				t.Errorf("problem %s %v, want a detail with %q", ct, got, tt.want)
			}
		})
	}

	// The shipped shipment answers its shipping: version 2 (one change, however often repeated),
	// shipped_at set; the stock of o-held left the warehouse once.
	_, _, got := get(t, url+"/v1/shipments/"+ids["held"])
	if got["version"] != float64(2) || got["shipped_at"] == nil || got["carrier"] != "sagawa" {
		t.Errorf("shipment of o-held = %v", got)
	}
	_, _, inv := get(t, url+"/v1/inventory")
	want := ft.JS(t, `{"items":[{"sku":"A1","on_hand":3,"reserved":0,"available":3},{"sku":"B2","on_hand":1,"reserved":1,"available":0}]}`)
	if diff := cmp.Diff(want, any(inv)); diff != "" {
		t.Errorf("inventory (-want +got):\n%s", diff)
	}
}

// TestValidationListsProblems: a request with several problems lists each one.
func TestValidationListsProblems(t *testing.T) {
	url, _, ids := shipments(t)
	status, _, got := post(t, url+"/v1/shipments/"+ids["held"]+"/ship", `{"carrier":"","tracking_number":"`+strings.Repeat("x", 65)+`"}`)
	if status != http.StatusBadRequest {
		t.Fatalf("status %d, want 400", status)
	}
	if errs, _ := got["errors"].([]any); len(errs) != 2 {
		t.Errorf("errors = %v, want 2 problems", got["errors"])
	}
}
