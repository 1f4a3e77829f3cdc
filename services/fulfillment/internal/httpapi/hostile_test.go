package httpapi_test

import (
	"context"
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
	header := map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + token(t, audience, warehouse)}
	huge := `{"carrier":"yamato","tracking_number":"` + strings.Repeat("9", platform.DefaultMaxBodyBytes) + `"}`
	cases := []platformtest.Hostile{
		{Name: "malformed JSON", Path: ship, Body: `{"carrier":`, Status: 400, Detail: "request body is not valid"},
		{Name: "truncated JSON", Path: ship, Body: good[:len(good)/2], Status: 400, Detail: "request body is not valid"},
		{Name: "a body shorter than its Content-Length", Path: ship, Body: good, ShortBy: 10, Status: 400, Detail: "the request body could not be read"},
		{Name: "a huge body", Path: ship, Body: huge, Status: 413, Detail: "request body exceeds"},
		{Name: "an empty body", Path: ship, Body: ``, Status: 400, Detail: "request body is not valid"},
		{Name: "null", Path: ship, Body: `null`, Status: 400},
		{Name: "an array", Path: ship, Body: `[]`, Status: 400, Detail: "must be an object"},
		{Name: "a key twice", Path: ship, Body: `{"carrier":"yamato","carrier":"sagawa","tracking_number":"T-1"}`, Status: 400, Detail: "carrier is given twice"},
		{Name: "a key in another case", Path: ship, Body: `{"Carrier":"yamato","tracking_number":"T-1"}`, Status: 400, Detail: `unknown field "Carrier"`},
		{Name: "an unknown field", Path: ship, Body: `{"carrier":"yamato","tracking_number":"T-1","note":"x"}`, Status: 400, Detail: `unknown field "note"`},
		{Name: "carrier a number", Path: ship, Body: `{"carrier":7,"tracking_number":"T-1"}`, Status: 400, Detail: "carrier must be a string, got a number"},
		{Name: "tracking number an object", Path: ship, Body: `{"carrier":"yamato","tracking_number":{}}`, Status: 400, Detail: "tracking_number must be a string, got an object"},
		{Name: "an escape sequence in the carrier", Path: ship, Body: `{"carrier":"yamato\u001b[2J","tracking_number":"T-1"}`, Status: 400, Detail: "invalid"},
		{Name: "a right-to-left override in the tracking number", Path: ship, Body: `{"carrier":"yamato","tracking_number":"T-1\u202e"}`, Status: 400, Detail: "invalid"},
		{Name: "invalid UTF-8 in the carrier", Path: ship, Body: "{\"carrier\":\"yamato\xff\",\"tracking_number\":\"T-1\"}", Status: 400, Detail: "not valid UTF-8"},
		{Name: "an unpaired surrogate", Path: ship, Body: `{"carrier":"\ud800","tracking_number":"T-1"}`, Status: 400, Detail: "surrogate"},
		{Name: "data after the object", Path: ship, Body: good + ` {"carrier":"sagawa"}`, Status: 400, Detail: "after the JSON"},
		{Name: "a tracking number too long", Path: ship, Body: `{"carrier":"yamato","tracking_number":"` + strings.Repeat("9", shipment.MaxDetailLen+1) + `"}`, Status: 400, Detail: "invalid"},
		{Name: "not a shipment id", Path: "/v1/shipments/o-held/ship", Body: good, Status: 404, Detail: "not found"},
		{Name: "an upper-case shipment id", Path: "/v1/shipments/" + strings.ToUpper(held) + "/ship", Body: good, Status: 404, Detail: "not found"},
		{Name: "a very long id", Path: "/v1/shipments/" + strings.Repeat("a", 4096) + "/ship", Body: good, Status: 404, Detail: "not found"},
		{Name: "an escaped path in the id", Path: "/v1/shipments/..%2F..%2Fv1%2Finventory/ship", Body: good, Status: 404, Detail: "not found"},
		{Name: "an unknown shipment", Path: "/v1/shipments/" + shipment.IDFor("o-unknown") + "/ship", Body: good, Status: 404, Detail: "not found"},
		{Name: "fail: malformed JSON", Path: fail, Body: `{"reason":`, Status: 400, Detail: "request body is not valid"},
		{Name: "fail: a reason not a string", Path: fail, Body: `{"reason":["lost"]}`, Status: 400, Detail: "reason must be a string, got an array"},
		{Name: "fail: no reason", Path: fail, Body: `{}`, Status: 400, Detail: "invalid"},
		{Name: "fail: a control character in the reason", Path: fail, Body: `{"reason":"lost\u0000"}`, Status: 400, Detail: "invalid"},
		{Name: "fail: a huge body", Path: fail, Body: `{"reason":"` + strings.Repeat("x", platform.DefaultMaxBodyBytes) + `"}`, Status: 413, Detail: "request body exceeds"},
		{Name: "fail: a body shorter than its Content-Length", Path: fail, Body: `{"reason":"carrier_rejected"}`, ShortBy: 10, Status: 400, Detail: "the request body could not be read"},
		{Name: "fail: an unknown shipment", Path: "/v1/shipments/" + shipment.IDFor("o-unknown") + "/fail", Body: `{"reason":"carrier_rejected"}`, Status: 404, Detail: "not found"},
	}
	for i := range cases {
		cases[i].Header = header
	}
	platformtest.RefuseAll(t, base, cases)
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
