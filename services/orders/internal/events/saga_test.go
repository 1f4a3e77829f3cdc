package events_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/services/orders/internal/events"
	"github.com/spanmart/spanmart/services/orders/internal/order"
	"github.com/spanmart/spanmart/services/orders/internal/orderstest"
)

// confirmed places an order, reserves it and authorizes its payment.
func (f *fixture) confirmed(t *testing.T) string {
	t.Helper()
	id := f.awaitingPayment(t, card, "ali@example.com")
	f.mustHandle(t, payment(t, events.PaymentAuthorized, id, "card", 1, nil))
	return id
}

func (f *fixture) mustHandle(t *testing.T, ds ...outboxlib.Delivery) {
	t.Helper()
	for _, d := range ds {
		if err := f.handle(t, d); err != nil {
			t.Fatalf("%s: %v", d.Type, err)
		}
	}
}

func shipment(t *testing.T, typ, orderID string, extra map[string]any) outboxlib.Delivery {
	t.Helper()
	id := uuid.NewSHA1(uuid.NameSpaceURL, []byte(orderID)).String()
	p := map[string]any{"shipment_id": id, "order_id": orderID}
	for k, v := range extra {
		p[k] = v
	}
	return delivery(t, typ, "//spanmart/fulfillment", "shipment", id, 1, p)
}

// emitted returns the types of the order's outbox events after the first n.
func emitted(t *testing.T, s orderstest.State, id string, n int) []string {
	t.Helper()
	var out []string
	for _, e := range s.Outbox {
		if e.AggregateId == id {
			out = append(out, e.EventType)
		}
	}
	return out[n:]
}

func (f *fixture) get(t *testing.T, id string) *order.Order {
	t.Helper()
	o, _, err := f.svc.Order(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestShippedAndCaptured: shipment.shipped → SHIPPED (order.shipped carries the shipment and the
// contact), payment.captured → COMPLETED (order.completed).
func TestShippedAndCaptured(t *testing.T) {
	f := newFixture(t)
	id := f.confirmed(t)
	f.mustHandle(t, shipment(t, events.ShipmentShipped, id, map[string]any{"carrier": "yamato", "tracking_number": "1234-5678"}))
	o := f.get(t, id)
	if o.Status() != order.Shipped || o.Shipment() == nil || o.Shipment().TrackingNumber != "1234-5678" {
		t.Fatalf("after shipment.shipped: %s %+v", o.Status(), o.Shipment())
	}
	s := orderstest.Read(t, f.client)
	last := s.Outbox[len(s.Outbox)-1]
	p := orderstest.Payload(t, last)
	if last.EventType != order.EventShipped || p["email"] != "ali@example.com" || p["language"] != "ja" {
		t.Errorf("last event %s payload %v", last.EventType, p)
	}
	if diff := cmp.Diff(map[string]any{"shipment_id": o.Shipment().ID, "carrier": "yamato", "tracking_number": "1234-5678"}, p["shipment"]); diff != "" {
		t.Errorf("order.shipped's shipment (-want +got):\n%s", diff)
	}
	f.mustHandle(t, payment(t, events.PaymentCaptured, id, "card", 2, map[string]any{"status": "CAPTURED"}))
	if o := f.get(t, id); o.Status() != order.Completed {
		t.Errorf("after payment.captured: %s", o.Status())
	}
	if diff := cmp.Diff([]string{order.EventConfirmed, order.EventShipped, order.EventCompleted}, emitted(t, orderstest.Read(t, f.client), id, 2)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestCaptureFailed(t *testing.T) {
	f := newFixture(t)
	id := f.confirmed(t)
	f.mustHandle(t,
		shipment(t, events.ShipmentShipped, id, map[string]any{"carrier": "yamato", "tracking_number": "1"}),
		payment(t, events.PaymentCaptureFailed, id, "card", 2, map[string]any{"status": "CAPTURE_FAILED", "reason": "expired"}))
	o := f.get(t, id)
	if o.Status() != order.NeedsAttention || o.AttentionReason() != "capture_failed_expired" {
		t.Errorf("after payment.capture_failed: %s %q", o.Status(), o.AttentionReason())
	}
	s := orderstest.Read(t, f.client)
	if p := orderstest.Payload(t, s.Outbox[len(s.Outbox)-1]); p["attention_reason"] != "capture_failed_expired" {
		t.Errorf("order.needs_attention payload = %v", p)
	}
}

// TestCustomerCancelOfAConfirmedOrder: the order waits for the stock and the money, in either
// order, and a duplicate fact changes nothing.
func TestCustomerCancelOfAConfirmedOrder(t *testing.T) {
	f := newFixture(t)
	id := f.confirmed(t)
	resp, err := f.svc.CancelOrder(context.Background(), "cust-1", "k1", id, func(o *order.Order) (int, []byte, error) {
		return http.StatusAccepted, []byte(`{}`), nil
	})
	if err != nil || resp.Replayed {
		t.Fatalf("CancelOrder = %+v, %v", resp, err)
	}
	o := f.get(t, id)
	want := []order.Compensation{{Kind: order.CompensateStock, State: order.CompensationPending}, {Kind: order.CompensatePayment, State: order.CompensationPending}}
	if o.Status() != order.Cancelling || o.CancelReason() != order.ReasonCustomerRequest || !cmp.Equal(want, o.Compensations()) {
		t.Fatalf("after cancel: %s %q %+v", o.Status(), o.CancelReason(), o.Compensations())
	}
	f.mustHandle(t, payment(t, events.PaymentAuthorized, id, "card", 2, nil)) // a late authorization: ignored
	f.mustHandle(t, payment(t, events.PaymentVoided, id, "card", 3, map[string]any{"status": "VOIDED"}))
	if o := f.get(t, id); o.Status() != order.Cancelling {
		t.Fatalf("after the void only: %s", o.Status())
	}
	f.mustHandle(t, reservation(t, events.InventoryReleased, id, 2, map[string]any{"order_id": id}))
	o = f.get(t, id)
	want = []order.Compensation{{Kind: order.CompensateStock, State: order.CompensationDone, Outcome: order.StockReleased}, {Kind: order.CompensatePayment, State: order.CompensationDone, Outcome: order.PaymentVoided}}
	if o.Status() != order.Cancelled || !cmp.Equal(want, o.Compensations()) {
		t.Errorf("after both: %s %+v", o.Status(), o.Compensations())
	}
	if diff := cmp.Diff([]string{order.EventConfirmed, order.EventCancelled, order.EventCancelCompleted}, emitted(t, orderstest.Read(t, f.client), id, 2)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestShipmentFailedRefundsAndReleases(t *testing.T) {
	f := newFixture(t)
	id := f.confirmed(t)
	f.mustHandle(t,
		shipment(t, events.ShipmentFailed, id, map[string]any{"reason": "carrier_rejected"}),
		payment(t, events.PaymentRefunded, id, "card", 2, map[string]any{"status": "REFUNDED"}),
		reservation(t, events.InventoryReleased, id, 2, map[string]any{"order_id": id}))
	o := f.get(t, id)
	if o.Status() != order.Cancelled || o.CancelReason() != order.ReasonShipmentFailed || o.Compensations()[1].Outcome != order.PaymentRefunded {
		t.Errorf("after shipment.failed, refund, release: %s %q %+v", o.Status(), o.CancelReason(), o.Compensations())
	}
}

func TestCompensationFailed(t *testing.T) {
	for _, tt := range []struct {
		name      string
		fact      func(t *testing.T, id string) outboxlib.Delivery
		attention string
	}{
		{"stock shipped", func(t *testing.T, id string) outboxlib.Delivery {
			return reservation(t, events.InventoryReleaseFailed, id, 2, map[string]any{"order_id": id, "reason": "already_shipped"})
		}, "stock_release_failed_already_shipped"},
		{"void refused", func(t *testing.T, id string) outboxlib.Delivery {
			return payment(t, events.PaymentVoidFailed, id, "card", 2, map[string]any{"status": "VOID_FAILED", "reason": "invalid_request"})
		}, "payment_release_failed_invalid_request"},
		{"refund refused", func(t *testing.T, id string) outboxlib.Delivery {
			return payment(t, events.PaymentRefundFailed, id, "card", 2, map[string]any{"status": "REFUND_FAILED", "reason": "provider_unavailable"})
		}, "payment_release_failed_provider_unavailable"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			id := f.confirmed(t)
			if _, err := f.svc.CancelOrder(context.Background(), "cust-1", "k", id, func(o *order.Order) (int, []byte, error) { return 202, []byte(`{}`), nil }); err != nil {
				t.Fatal(err)
			}
			f.mustHandle(t, tt.fact(t, id))
			if o := f.get(t, id); o.Status() != order.NeedsAttention || o.AttentionReason() != tt.attention {
				t.Errorf("status %s attention %q, want NEEDS_ATTENTION %q", o.Status(), o.AttentionReason(), tt.attention)
			}
		})
	}
}
