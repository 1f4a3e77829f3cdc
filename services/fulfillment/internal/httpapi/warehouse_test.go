package httpapi_test

import (
	"crypto/rand"
	"crypto/rsa"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/emulator/oidc"
	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/services/fulfillment/internal/app"
	"github.com/spanmart/spanmart/services/fulfillment/internal/httpapi"
	"github.com/spanmart/spanmart/services/fulfillment/internal/shipment"
	"github.com/spanmart/spanmart/services/fulfillment/internal/store"
)

// TestWarehouseIdentity: the warehouse's actions take a Google ID token, for the service's URL, of
// an allowed account (the warehouse's, or an operator's), signed by the issuer. Without one they
// are a 401 problem with WWW-Authenticate, before the body is even read; another account's is a
// 403 problem; neither changes anything. The allowed account that moves a shipment is recorded on
// it and answered as shipped_by or failed_by; a repeat, by the same account or the other, answers
// 200 and keeps the first.
func TestWarehouseIdentity(t *testing.T) {
	url, client, ids := shipments(t)
	ship := url + "/v1/shipments/" + ids["held"] + "/ship"
	fail := url + "/v1/shipments/" + ids["held"] + "/fail"
	const shipBody, failBody = `{"carrier":"yamato","tracking_number":"T-9"}`, `{"reason":"lost_before_handover"}`

	now := time.Now()
	mint := func(audience, account string, at time.Time) string {
		t.Helper()
		tok, err := idp.Mint(audience, account, at)
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + tok
	}
	// Another issuer at the same URL: the right claims, under a key the issuer never published.
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	forger, err := oidc.NewIssuer(idp.url, key)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := forger.Mint(audience, warehouse, now)
	if err != nil {
		t.Fatal(err)
	}
	before := readWarehouse(t, client)
	for _, tt := range []struct {
		name, url, auth, body string
		status                int
	}{
		{"no token", ship, "", shipBody, http.StatusUnauthorized},
		{"no token, and a malformed body", ship, "", `{"carrier":`, http.StatusUnauthorized},
		{"fail: no token", fail, "", failBody, http.StatusUnauthorized},
		{"an empty bearer token", ship, "Bearer ", shipBody, http.StatusUnauthorized},
		{"not a JWT", ship, "Bearer not.a.token", shipBody, http.StatusUnauthorized},
		{"basic credentials", ship, "Basic d2FyZWhvdXNlOnB3", shipBody, http.StatusUnauthorized},
		{"a token signed with another key", ship, "Bearer " + forged, shipBody, http.StatusUnauthorized},
		{"an expired token", ship, mint(audience, warehouse, now.Add(-2*time.Hour)), shipBody, http.StatusUnauthorized},
		{"a token for another audience", ship, mint("http://orders.test", warehouse, now), shipBody, http.StatusUnauthorized},
		{"fail: a token for another audience", fail, mint("http://orders.test", warehouse, now), failBody, http.StatusUnauthorized},
		{"another account's token", ship, mint(audience, "intruder@spanmart-test.iam.gserviceaccount.com", now), shipBody, http.StatusForbidden},
		{"the relay's token", ship, mint(audience, "relay@spanmart-test.iam.gserviceaccount.com", now), shipBody, http.StatusForbidden},
		{"fail: another account's token", fail, mint(audience, "intruder@spanmart-test.iam.gserviceaccount.com", now), failBody, http.StatusForbidden},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, header, p := doHeader(t, http.MethodPost, tt.url, tt.auth, tt.body)
			if status != tt.status || header.Get("Content-Type") != platform.ContentTypeProblem || p["status"] != float64(tt.status) {
				t.Fatalf("POST = %d %s %v, want a %d problem", status, header.Get("Content-Type"), p, tt.status)
			}
			wantChallenge := ""
			if tt.status == http.StatusUnauthorized {
				wantChallenge = `Bearer error="invalid_token"`
			}
			if got := header.Get("WWW-Authenticate"); got != wantChallenge {
				t.Errorf("WWW-Authenticate = %q, want %q", got, wantChallenge)
			}
		})
	}
	if diff := cmp.Diff(before, readWarehouse(t, client), cmp.AllowUnexported(warehouseRows{})); diff != "" {
		t.Fatalf("the refused requests changed the database (-before +after):\n%s", diff)
	}

	// The warehouse ships; a repeat by it or by the operator answers the same shipment, by the
	// warehouse.
	for _, by := range []string{warehouse, warehouse, operator} {
		status, _, got := do(t, http.MethodPost, ship, mint(audience, by, now), shipBody)
		if status != http.StatusOK || got["status"] != "SHIPPED" || got["version"] != float64(2) || got["shipped_by"] != warehouse || got["failed_by"] != nil {
			t.Errorf("ship by %s = %d %v, want 200, SHIPPED at version 2 by %s", by, status, got, warehouse)
		}
	}
	_, _, got := get(t, url+"/v1/shipments/"+ids["held"])
	if got["shipped_by"] != warehouse {
		t.Errorf("GET the shipped shipment = %v, want shipped_by %s", got, warehouse)
	}
	// A conflicting request is still a conflict, whoever sends it.
	if status, _, p := do(t, http.MethodPost, ship, mint(audience, operator, now), `{"carrier":"yamato","tracking_number":"T-10"}`); status != http.StatusConflict {
		t.Errorf("ship with another tracking number = %d %v, want 409", status, p)
	}

	// The fixture's failed shipment was failed by the operator: a repeat by either keeps the operator.
	failed := url + "/v1/shipments/" + ids["failed"] + "/fail"
	for _, by := range []string{warehouse, operator} {
		status, _, got := do(t, http.MethodPost, failed, mint(audience, by, now), `{"reason":"carrier_rejected"}`)
		if status != http.StatusOK || got["status"] != "FAILED" || got["version"] != float64(2) || got["failed_by"] != operator || got["shipped_by"] != nil {
			t.Errorf("fail again by %s = %d %v, want 200, FAILED at version 2 by %s", by, status, got, operator)
		}
	}
}

// TestWarehouseFail: the warehouse fails a pending shipment, and is recorded as who failed it; the
// operator's repeat keeps it.
func TestWarehouseFail(t *testing.T) {
	url, _, ids := shipments(t)
	fail := url + "/v1/shipments/" + ids["held"] + "/fail"
	for _, by := range []string{warehouse, operator} {
		status, _, got := do(t, http.MethodPost, fail, "Bearer "+token(t, audience, by), `{"reason":"lost_before_handover"}`)
		if status != http.StatusOK || got["status"] != "FAILED" || got["version"] != float64(2) || got["failed_by"] != warehouse {
			t.Errorf("fail by %s = %d %v, want 200, FAILED at version 2 by %s", by, status, got, warehouse)
		}
	}
}

// TestWarehouseKeysUnavailable: while the issuer's keys cannot be fetched, a warehouse's action is
// a 503 problem (the token may be fine: Cloud Run's caller tries again), never a 401 or a 500.
func TestWarehouseKeysUnavailable(t *testing.T) {
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	v, err := outboxlib.NewVerifier(outboxlib.VerifierConfig{Issuer: gone.URL, Audiences: []string{audience}, AllowedEmails: []string{warehouse}})
	if err != nil {
		t.Fatal(err)
	}
	_, client, _ := serve(t)
	srv := platform.NewServer(platform.ServerOptions{Service: "fulfillment", Version: "test", ErrorMapper: httpapi.ErrorMapper})
	httpapi.Register(srv.Echo, app.New(store.New(client), nil, nil), v)
	hs := httptest.NewServer(srv.Echo)
	defer hs.Close()
	before := readWarehouse(t, client)
	status, ct, p := do(t, http.MethodPost, hs.URL+"/v1/shipments/"+shipment.IDFor("o-held")+"/ship",
		"Bearer "+token(t, audience, warehouse), `{"carrier":"yamato","tracking_number":"T-1"}`)
	if status != http.StatusServiceUnavailable || ct != platform.ContentTypeProblem {
		t.Errorf("POST = %d %s %v, want a 503 problem", status, ct, p)
	}
	if diff := cmp.Diff(before, readWarehouse(t, client), cmp.AllowUnexported(warehouseRows{})); diff != "" {
		t.Errorf("the refused request changed the database (-before +after):\n%s", diff)
	}
}
