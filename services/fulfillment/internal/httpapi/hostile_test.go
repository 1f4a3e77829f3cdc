package httpapi_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"cloud.google.com/go/spanner"
	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/pkg/platform/platformtest"
	"github.com/spanmart/spanmart/services/fulfillment/internal/app"
	ft "github.com/spanmart/spanmart/services/fulfillment/internal/fulfillmenttest"
	"github.com/spanmart/spanmart/services/fulfillment/internal/shipment"
)

// goWords are words of Go, not of the API, that no problem may show a client.
var goWords = []string{"Go struct", "Go value", "ShipRequest", "FailRequest", "string into", "json: ", "map["}

// TestHostileWarehouseRequests: every malformed request of the warehouse (with its valid ID token)
// to POST /v1/shipments/{id}/ship and /fail gets a 4xx problem in the API's words, and nothing in
// the database changes: the pending shipment, the stock and the outbox are as they were. The
// requests without a valid token are TestWarehouseIdentity's.
func TestHostileWarehouseRequests(t *testing.T) {
	base, client, svc := serve(t)
	ft.Run(t, client, func(ctx context.Context, txn app.Txn) (app.Outcome, error) {
		return svc.CreateShipment(ctx, txn, "o-held")
	})
	held := shipment.IDFor("o-held")
	ship, fail := "/v1/shipments/"+held+"/ship", "/v1/shipments/"+held+"/fail"
	before := readWarehouse(t, client)
	if len(before.shipments) != 1 {
		t.Fatalf("shipments before: %v, want the pending one", before.shipments)
	}
	const good = `{"carrier":"yamato","tracking_number":"T-1"}`
	auth := "Bearer " + token(t, audience, warehouse)
	huge := `{"carrier":"yamato","tracking_number":"` + strings.Repeat("9", platform.DefaultMaxBodyBytes) + `"}`
	for _, tt := range []struct {
		name, path, body string
		shortBy          int // a Content-Length this much longer than the body, then the client stops
		status           int
		detail           string
	}{
		{"malformed JSON", ship, `{"carrier":`, 0, 400, "request body is not valid"},
		{"truncated JSON", ship, good[:len(good)/2], 0, 400, "request body is not valid"},
		{"a body shorter than its Content-Length", ship, good, 10, 400, "the request body could not be read"},
		{"a huge body", ship, huge, 0, 413, "request body exceeds"},
		{"an empty body", ship, ``, 0, 400, "request body is not valid"},
		{"null", ship, `null`, 0, 400, ""},
		{"an array", ship, `[]`, 0, 400, "must be an object"},
		{"a key twice", ship, `{"carrier":"yamato","carrier":"sagawa","tracking_number":"T-1"}`, 0, 400, "carrier is given twice"},
		{"a key in another case", ship, `{"Carrier":"yamato","tracking_number":"T-1"}`, 0, 400, `unknown field "Carrier"`},
		{"an unknown field", ship, `{"carrier":"yamato","tracking_number":"T-1","note":"x"}`, 0, 400, `unknown field "note"`},
		{"carrier a number", ship, `{"carrier":7,"tracking_number":"T-1"}`, 0, 400, "carrier must be a string, got a number"},
		{"tracking number an object", ship, `{"carrier":"yamato","tracking_number":{}}`, 0, 400, "tracking_number must be a string, got an object"},
		{"an escape sequence in the carrier", ship, `{"carrier":"yamato\u001b[2J","tracking_number":"T-1"}`, 0, 400, "invalid"},
		{"a right-to-left override in the tracking number", ship, `{"carrier":"yamato","tracking_number":"T-1\u202e"}`, 0, 400, "invalid"},
		{"invalid UTF-8 in the carrier", ship, "{\"carrier\":\"yamato\xff\",\"tracking_number\":\"T-1\"}", 0, 400, "not valid UTF-8"},
		{"an unpaired surrogate", ship, `{"carrier":"\ud800","tracking_number":"T-1"}`, 0, 400, "surrogate"},
		{"data after the object", ship, good + ` {"carrier":"sagawa"}`, 0, 400, "after the JSON"},
		{"a tracking number too long", ship, `{"carrier":"yamato","tracking_number":"` + strings.Repeat("9", shipment.MaxDetailLen+1) + `"}`, 0, 400, "invalid"},
		{"not a shipment id", "/v1/shipments/o-held/ship", good, 0, 404, "not found"},
		{"an upper-case shipment id", "/v1/shipments/" + strings.ToUpper(held) + "/ship", good, 0, 404, "not found"},
		{"a very long id", "/v1/shipments/" + strings.Repeat("a", 4096) + "/ship", good, 0, 404, "not found"},
		{"an escaped path in the id", "/v1/shipments/..%2F..%2Fv1%2Finventory/ship", good, 0, 404, "not found"},
		{"an unknown shipment", "/v1/shipments/" + shipment.IDFor("o-unknown") + "/ship", good, 0, 404, "not found"},
		{"fail: malformed JSON", fail, `{"reason":`, 0, 400, "request body is not valid"},
		{"fail: a reason not a string", fail, `{"reason":["lost"]}`, 0, 400, "reason must be a string, got an array"},
		{"fail: no reason", fail, `{}`, 0, 400, "invalid"},
		{"fail: a control character in the reason", fail, `{"reason":"lost\u0000"}`, 0, 400, "invalid"},
		{"fail: a huge body", fail, `{"reason":"` + strings.Repeat("x", platform.DefaultMaxBodyBytes) + `"}`, 0, 413, "request body exceeds"},
		{"fail: a body shorter than its Content-Length", fail, `{"reason":"carrier_rejected"}`, 10, 400, "the request body could not be read"},
		{"fail: an unknown shipment", "/v1/shipments/" + shipment.IDFor("o-unknown") + "/fail", `{"reason":"carrier_rejected"}`, 0, 404, "not found"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, ct, body := rawPost(t, base, tt.path, auth, tt.body, tt.shortBy)
			if status != tt.status {
				t.Fatalf("POST %.80s: %d %s, want %d", tt.path, status, body, tt.status)
			}
			if ct != platform.ContentTypeProblem {
				t.Errorf("Content-Type %q, want %s", ct, platform.ContentTypeProblem)
			}
			p := js(t, body)
			text := fmt.Sprint(p["detail"], p["errors"])
			if p["status"] != float64(tt.status) || p["title"] == "" || !strings.Contains(text, tt.detail) {
				t.Errorf("problem %v, want status %d mentioning %q", p, tt.status, tt.detail)
			}
			for _, w := range goWords {
				if strings.Contains(text, w) {
					t.Errorf("problem %q speaks Go (%q)", text, w)
				}
			}
		})
	}
	if diff := cmp.Diff(before, readWarehouse(t, client), cmp.AllowUnexported(warehouseRows{})); diff != "" {
		t.Errorf("the hostile requests changed the database (-before +after):\n%s", diff)
	}
}

// warehouseRows are what a warehouse action may change: every shipment, the stock and the outbox.
type warehouseRows struct {
	shipments []string
	stock     []string
	outbox    int64
}

func readWarehouse(t *testing.T, client *spanner.Client) warehouseRows {
	t.Helper()
	ctx := context.Background()
	var w warehouseRows
	rows := func(sql string, into *[]string) {
		err := client.Single().Query(ctx, spanner.Statement{SQL: sql}).Do(func(r *spanner.Row) error {
			var s string
			if err := r.Columns(&s); err != nil {
				return err
			}
			*into = append(*into, s)
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	rows(`SELECT CONCAT(ShipmentId, " ", Status, " ", CAST(Version AS STRING), " ", IFNULL(Carrier, "-"), " ", IFNULL(TrackingNumber, "-"), " ", IFNULL(FailureReason, "-"),
		" ", IFNULL(ShippedBy, "-"), " ", IFNULL(FailedBy, "-"))
		FROM Shipments ORDER BY ShipmentId`, &w.shipments)
	rows(`SELECT CONCAT(Sku, " ", CAST(OnHand AS STRING), " ", CAST(Reserved AS STRING)) FROM Inventory ORDER BY Sku`, &w.stock)
	err := client.Single().Query(ctx, spanner.Statement{SQL: "SELECT COUNT(*) FROM OutboxEvents"}).Do(func(r *spanner.Row) error {
		return r.Columns(&w.outbox)
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// rawPost sends a JSON POST with an Authorization header byte by byte (so that a body shorter than
// its Content-Length can be sent) and returns the status, the content type and the body.
func rawPost(t *testing.T, base, path, authorization, body string, shortBy int) (int, string, string) {
	t.Helper()
	status, header, b := platformtest.RawPost(t, base, platformtest.RawRequest{Path: path,
		Header: map[string]string{"Content-Type": "application/json", "Authorization": authorization}, Body: body, ShortBy: shortBy})
	return status, header.Get("Content-Type"), string(b)
}
