// Package peers reads what fulfillment and the gateway record about an order, through their HTTP
// APIs, for the audit's reconciliation (app.Peers): fulfillment's GET /v1/reservations/{order_id}
// and the gateway's operator read GET /admin/payments?order_id=, decoded into the peers' own wire
// types (services/fulfillment/api, services/gateway-abstraction/api). It never reads their
// databases.
// The HTTP clients carry the authentication (a Google ID token of the orders service's account
// for each peer's URL, from platform.IDTokenSource); each read is bounded by Timeout.
package peers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	fulfillmentapi "github.com/spanmart/spanmart/services/fulfillment/api"
	gatewayapi "github.com/spanmart/spanmart/services/gateway-abstraction/api"
	"github.com/spanmart/spanmart/services/orders/internal/app"
)

// Timeout bounds one read of a peer.
const Timeout = 10 * time.Second

// maxBody bounds a peer's answer (one order's reservation or payments).
const maxBody = 1 << 20

// Config says where the peers are and how to reach them.
type Config struct {
	FulfillmentURL string       // e.g. https://fulfillment-123.asia-northeast1.run.app
	Fulfillment    *http.Client // nil: http.DefaultClient
	GatewayURL     string
	Gateway        *http.Client // nil: http.DefaultClient
}

// Client reads the peers. It implements app.Peers.
type Client struct {
	cfg Config
}

var _ app.Peers = (*Client)(nil)

// New returns a client for the peers of cfg.
func New(cfg Config) *Client {
	cfg.FulfillmentURL = strings.TrimSuffix(cfg.FulfillmentURL, "/")
	cfg.GatewayURL = strings.TrimSuffix(cfg.GatewayURL, "/")
	if cfg.Fulfillment == nil {
		cfg.Fulfillment = http.DefaultClient
	}
	if cfg.Gateway == nil {
		cfg.Gateway = http.DefaultClient
	}
	return &Client{cfg: cfg}
}

// Reservation implements app.Peers: 404 is "no reservation" (fulfillment has not decided on the
// order, or never heard of it).
func (c *Client) Reservation(ctx context.Context, orderID string) (app.PeerReservation, error) {
	u := c.cfg.FulfillmentURL + fulfillmentapi.PathReservations + "/" + url.PathEscape(orderID)
	var r fulfillmentapi.Reservation
	found, err := get(ctx, c.cfg.Fulfillment, app.PeerFulfillment, u, &r)
	switch {
	case err != nil:
		return app.PeerReservation{}, err
	case !found:
		return app.PeerReservation{}, nil
	case r.Status == "" || r.OrderID != orderID:
		return app.PeerReservation{}, fmt.Errorf("%s: GET %s: a reservation of order %q with status %q", app.PeerFulfillment, u, r.OrderID, r.Status)
	}
	return app.PeerReservation{Found: true, Status: r.Status}, nil
}

// Payments implements app.Peers.
func (c *Client) Payments(ctx context.Context, orderID string) ([]app.PeerPayment, error) {
	u := c.cfg.GatewayURL + gatewayapi.PathPayments + "?order_id=" + url.QueryEscape(orderID)
	var l gatewayapi.PaymentList
	found, err := get(ctx, c.cfg.Gateway, app.PeerGateway, u, &l)
	if err != nil {
		return nil, err
	}
	if !found || l.Payments == nil {
		// The list route answers 200 with a list, even an empty one: 404 or no list is another
		// route or another service behind GATEWAY_URL, not "no payment".
		return nil, fmt.Errorf("%s: GET %s: no payment list in the answer", app.PeerGateway, u)
	}
	out := make([]app.PeerPayment, 0, len(l.Payments))
	for _, p := range l.Payments {
		if p.OrderID != orderID || p.Status == "" {
			return nil, fmt.Errorf("%s: GET %s: a payment %s of order %q with status %q", app.PeerGateway, u, p.ID, p.OrderID, p.Status)
		}
		out = append(out, app.PeerPayment{ID: p.ID, Status: p.Status})
	}
	return out, nil
}

// get reads url into v: found is false for a 404; any other status than 200, or a body that does
// not decode, is an error naming the peer and the request.
func get(ctx context.Context, hc *http.Client, peer, u string, v any) (found bool, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("%s: GET %s: %w", peer, u, err)
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return false, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return false, nil
	default:
		return false, fmt.Errorf("status %d: %s", resp.StatusCode, snippet(body))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return false, fmt.Errorf("answer does not decode: %w", err)
	}
	return true, nil
}

// snippet is the start of a body, for an error message.
func snippet(b []byte) string {
	const n = 200
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}
