package peers_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/services/orders/internal/app"
	"github.com/spanmart/spanmart/services/orders/internal/peers"
)

const orderID = "0b0c6f4e-3c1a-4c8e-9a55-6f7d2a1b9e01"

// answer serves one status and body, recording the request URL.
func answer(t *testing.T, status int, body string, gotURL *string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*gotURL = r.URL.String()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// The answers are written out as JSON, in the shapes of services/fulfillment/api.Reservation and
// services/gateway-abstraction/api.PaymentList, which the client decodes.
func TestReservation(t *testing.T) {
	for _, tt := range []struct {
		name   string
		status int
		body   string
		want   app.PeerReservation
		err    string
	}{
		{"held", 200, `{"order_id":"` + orderID + `","status":"HELD","version":1,"lines":[{"sku":"A1","quantity":2,"status":"HELD"}],` +
			`"created_at":"2026-03-01T10:00:00Z","updated_at":"2026-03-01T10:00:00Z"}`, app.PeerReservation{Found: true, Status: "HELD"}, ""},
		{"none", 404, `{"status":404}`, app.PeerReservation{}, ""},
		{"another order", 200, `{"order_id":"x","status":"HELD"}`, app.PeerReservation{}, `a reservation of order "x" with status "HELD"`},
		{"no status", 200, `{"order_id":"` + orderID + `"}`, app.PeerReservation{}, `with status ""`},
		{"server error", 503, `{"status":503,"detail":"spanner down"}`, app.PeerReservation{}, `status 503: {"status":503,"detail":"spanner down"}`},
		{"not JSON", 200, `<html>`, app.PeerReservation{}, "answer does not decode"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got string
			c := peers.New(peers.Config{FulfillmentURL: answer(t, tt.status, tt.body, &got) + "/"})
			r, err := c.Reservation(context.Background(), orderID)
			if got != "/v1/reservations/"+orderID {
				t.Errorf("requested %s", got)
			}
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.HasPrefix(err.Error(), "fulfillment: GET http") {
					t.Errorf("err = %v, want one naming fulfillment, the request and %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, r); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestPayments(t *testing.T) {
	for _, tt := range []struct {
		name   string
		status int
		body   string
		want   []app.PeerPayment
		err    string
	}{
		{"one", 200, `{"payments":[{"id":"p1","order_id":"` + orderID + `","customer_id":"c","method":"card","provider":"stripe",` +
			`"status":"AUTHORIZED","amount_minor":300,"currency":"JPY","version":2}]}`, []app.PeerPayment{{ID: "p1", Status: "AUTHORIZED"}}, ""},
		{"none", 200, `{"payments":[]}`, []app.PeerPayment{}, ""},
		{"not a list", 200, `{}`, nil, "no payment list"},
		{"not found", 404, `{"status":404}`, nil, "no payment list"},
		{"refused", 403, `{"status":403}`, nil, "status 403"},
		{"another order", 200, `{"payments":[{"id":"p1","order_id":"x","status":"AUTHORIZED"}]}`, nil, `a payment p1 of order "x"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got string
			c := peers.New(peers.Config{GatewayURL: answer(t, tt.status, tt.body, &got)})
			ps, err := c.Payments(context.Background(), orderID)
			if got != "/admin/payments?order_id="+orderID {
				t.Errorf("requested %s", got)
			}
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.HasPrefix(err.Error(), "gateway-abstraction: GET http") {
					t.Errorf("err = %v, want one naming the gateway, the request and %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, ps); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c := peers.New(peers.Config{FulfillmentURL: url, GatewayURL: url})
	if _, err := c.Reservation(context.Background(), orderID); err == nil || !strings.HasPrefix(err.Error(), "fulfillment: GET "+url) {
		t.Errorf("Reservation of a closed server: %v", err)
	}
	if _, err := c.Payments(context.Background(), orderID); err == nil || !strings.HasPrefix(err.Error(), "gateway-abstraction: GET "+url) {
		t.Errorf("Payments of a closed server: %v", err)
	}
}
