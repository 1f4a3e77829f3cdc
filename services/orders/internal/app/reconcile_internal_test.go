package app

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/spanmart/spanmart/services/orders/internal/order"
)

// refusingGateway answers fulfillment's reads and refuses every payments read; the first order's
// reservation read waits until three payments reads have failed, so that the first order's own
// payments read is skipped (the failure limit), whatever the scheduling.
type refusingGateway struct {
	first  string
	failed atomic.Int64
	third  chan struct{}
}

func (p *refusingGateway) Reservation(ctx context.Context, id string) (PeerReservation, error) {
	if id == p.first {
		<-p.third
	}
	return PeerReservation{Found: true, Status: "HELD"}, nil
}

func (p *refusingGateway) Payments(ctx context.Context, id string) ([]PeerPayment, error) {
	if p.failed.Add(1) == peerFailureLimit {
		close(p.third)
	}
	return nil, errors.New("gateway-abstraction: GET /admin/payments: status 403: refused")
}

// The report names a failure that happened for a peer, not the skip of the reads after the
// failure limit, even when the first order in the report's order is one whose read was skipped.
func TestUnreachableNamesARealFailure(t *testing.T) {
	var orders []DatedOrder
	for range 5 {
		o, err := order.Restore(order.Snapshot{ID: uuid.NewString(), CustomerID: "c", Status: order.Confirmed, Currency: "JPY", Version: 3})
		if err != nil {
			t.Fatal(err)
		}
		orders = append(orders, DatedOrder{Order: o})
	}
	peers := &refusingGateway{first: orders[0].Order.ID(), third: make(chan struct{})}
	a := &Audit{peers: peers}
	rep := &Reconciliation{}
	a.check(context.Background(), rep, orders)
	if !strings.Contains(rep.Unreachable[PeerGateway], "status 403") {
		t.Errorf("unreachable = %q, want the gateway's refusal", rep.Unreachable[PeerGateway])
	}
	if rep.Unchecked[PeerGateway] != 5 || rep.Checked != 0 {
		t.Errorf("unchecked %v, checked %d; want 5 for the gateway, 0", rep.Unchecked, rep.Checked)
	}
}
