package adminclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spanmart/spanmart/internal/topology"
)

// The aggregates of an order's trace.
const (
	AggregateOrder       = "order"       // id: the order id (orders)
	AggregateReservation = "reservation" // id: the order id (fulfillment)
	AggregateShipment    = "shipment"    // id: a shipment id (fulfillment)
	AggregatePayment     = "payment"     // id: a payment id (the gateway)
)

// AggregateRef names an aggregate.
type AggregateRef struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// Trace is an order's path through the services: every event of its aggregates, each delivery of
// each event to each subscriber, with the latencies, and what the audit says about the order.
type Trace struct {
	OrderID string `json:"order_id"`
	// Status is the order's current status ("" when orders did not answer); Order is the whole
	// order, timeline included.
	Status string `json:"status,omitempty"`
	Order  *Order `json:"order,omitempty"`
	// Aggregates are the aggregates whose events were asked for: the order, its reservation, its
	// shipments and its payments (those the services named).
	Aggregates []AggregateRef `json:"aggregates"`
	// Hops are the deliveries, one per (event, subscriber), and one with no Subscriber for an
	// event routed to nobody; sorted by the event's commit time, then event id, then subscriber
	// in roster order.
	Hops []Hop `json:"hops"`
	// Stuck, Mismatch and Flagged are the order's entries in the stuck-order detector and the
	// reconciliation, when they list it.
	Stuck    *StuckOrder `json:"stuck,omitempty"`
	Mismatch *Mismatch   `json:"mismatch,omitempty"`
	Flagged  *Flagged    `json:"flagged,omitempty"`
	// Problems: the order stuck, mismatched or needing attention, each quarantined event and each
	// dead-lettered delivery.
	Problems []Problem `json:"problems"`
	// Gaps are the pieces a service did not give (the trace is then incomplete).
	Gaps []Gap `json:"gaps,omitempty"`
}

// Hop is one event's delivery to one subscriber. The times are commit timestamps: CommittedAt of
// the source's transaction that wrote the event, PublishedAt of the relay marking it published
// (its tasks created), ProcessedAt of the subscriber's transaction that applied it (or
// dead-lettered it). A latency is nil while one of its ends is unknown; DeliveryLatency is negative
// when the event was published again (replayed) after the subscriber processed it.
type Hop struct {
	EventID          string     `json:"event_id"`
	EventType        string     `json:"event_type"`
	Source           string     `json:"source"`
	AggregateType    string     `json:"aggregate_type"`
	AggregateID      string     `json:"aggregate_id"`
	AggregateVersion int64      `json:"aggregate_version"`
	CommittedAt      time.Time  `json:"committed_at"`
	PublishedAt      *time.Time `json:"published_at"`
	Quarantined      bool       `json:"quarantined,omitempty"`
	Subscriber       string     `json:"subscriber,omitempty"` // "" for an event routed to nobody
	ProcessedAt      *time.Time `json:"processed_at"`
	// DeadLettered: the subscriber holds an unreplayed dead letter of the event.
	DeadLettered bool `json:"dead_lettered,omitempty"`
	// ProcessedUnknown: the subscriber did not say whether it processed the event (a gap).
	ProcessedUnknown bool `json:"processed_unknown,omitempty"`

	PublishLatency  *time.Duration `json:"-"` // committed → published: the relay
	DeliveryLatency *time.Duration `json:"-"` // published → processed: Cloud Tasks and the consumer
	EndToEnd        *time.Duration `json:"-"` // committed → processed
}

// hopJSON is Hop with its latencies in seconds.
type hopJSON struct {
	hopFields
	PublishSeconds  *float64 `json:"committed_to_published_seconds"`
	DeliverySeconds *float64 `json:"published_to_processed_seconds"`
	EndToEndSeconds *float64 `json:"committed_to_processed_seconds"`
}

type hopFields Hop

// MarshalJSON writes the latencies as committed_to_published_seconds,
// published_to_processed_seconds and committed_to_processed_seconds (null when unknown).
func (h Hop) MarshalJSON() ([]byte, error) {
	return json.Marshal(hopJSON{hopFields(h), seconds(h.PublishLatency), seconds(h.DeliveryLatency), seconds(h.EndToEnd)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (h *Hop) UnmarshalJSON(data []byte) error {
	var v hopJSON
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*h = Hop(v.hopFields)
	h.PublishLatency, h.DeliveryLatency, h.EndToEnd = duration(v.PublishSeconds), duration(v.DeliverySeconds), duration(v.EndToEndSeconds)
	return nil
}

func seconds(d *time.Duration) *float64 {
	if d == nil {
		return nil
	}
	s := d.Seconds()
	return &s
}

func duration(s *float64) *time.Duration {
	if s == nil {
		return nil
	}
	d := time.Duration(*s * float64(time.Second))
	return &d
}

// Slowest returns the index in Hops of the applied hop (processed, not dead-lettered) with the
// longest EndToEnd, the first of equals; -1 when no hop was applied.
func (t Trace) Slowest() int {
	best := -1
	for i, h := range t.Hops {
		if h.EndToEnd != nil && !h.DeadLettered && (best < 0 || *h.EndToEnd > *t.Hops[best].EndToEnd) {
			best = i
		}
	}
	return best
}

// Trace assembles an order's trace, as the admin contract describes: the aggregates (the order,
// its reservation, its shipments named by orders or fulfillment, its payments named by the
// gateway), the relay's events of each, and for each event each subscriber's processed time;
// along with the order itself and its entries in the stuck-order detector and the reconciliation
// (which reads the peers for every settled order of its window: a trace costs one reconciliation).
// The calls run concurrently. A service that does not answer is a Gap and the trace goes on
// without its piece. The error is ErrNotFound only when orders answered 404 and the relay knows no
// event of the order; the trace is returned with it.
func (c *Client) Trace(ctx context.Context, orderID string) (Trace, error) {
	t := Trace{OrderID: orderID, Aggregates: []AggregateRef{}, Hops: []Hop{}, Problems: []Problem{}}
	if orderID == "" {
		return t, errors.New("adminclient: trace: empty order id")
	}
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		events   = map[AggregateRef][]OutboxEvent{}
		orderErr error
	)
	gap := func(service, what string, err error) {
		mu.Lock()
		t.Gaps = append(t.Gaps, gapOf(service, what, err))
		mu.Unlock()
	}
	eventsOf := func(ref AggregateRef) {
		wg.Go(func() {
			evs, err := c.AggregateEvents(ctx, ref.Type, ref.ID)
			if err != nil {
				gap(topology.Relay, "events of "+ref.Type+" "+ref.ID, err)
				return
			}
			mu.Lock()
			events[ref] = evs
			mu.Unlock()
		})
	}

	// The order and its reservation are known by the order's id; the shipments and payments are
	// named by the services, read at the same time as the audit's reports.
	refs := []AggregateRef{{AggregateOrder, orderID}, {AggregateReservation, orderID}}
	for _, ref := range refs {
		eventsOf(ref)
	}
	var shipmentIDs, paymentIDs []string
	wg.Go(func() {
		o, err := c.Order(ctx, orderID)
		if err != nil {
			mu.Lock()
			orderErr = err
			mu.Unlock()
			gap(topology.Orders, "order", err)
			return
		}
		mu.Lock()
		t.Order, t.Status = &o, o.Status
		if o.Shipment != nil && o.Shipment.ShipmentID != "" {
			shipmentIDs = append(shipmentIDs, o.Shipment.ShipmentID)
		}
		mu.Unlock()
	})
	wg.Go(func() {
		ss, err := c.Shipments(ctx, orderID)
		if err != nil {
			gap(topology.Fulfillment, "shipments", err)
			return
		}
		mu.Lock()
		for _, s := range ss {
			shipmentIDs = append(shipmentIDs, s.ShipmentID)
		}
		mu.Unlock()
	})
	wg.Go(func() {
		ps, err := c.Payments(ctx, orderID)
		if err != nil {
			gap(topology.Gateway, "payments", err)
			return
		}
		mu.Lock()
		for _, p := range ps {
			paymentIDs = append(paymentIDs, p.ID)
		}
		mu.Unlock()
	})
	var audit sync.WaitGroup // the audit's reports need not hold up the events
	audit.Go(func() {
		rep, err := c.StuckOrders(ctx)
		if err != nil {
			gap(topology.Orders, "stuck orders", err)
			return
		}
		for _, s := range rep.Orders {
			if s.OrderID == orderID {
				mu.Lock()
				t.Stuck = &s
				mu.Unlock()
			}
		}
	})
	audit.Go(func() {
		rec, err := c.OrderReconciliation(ctx, orderID)
		if err != nil {
			gap(topology.Orders, "reconciliation", err)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, m := range rec.Mismatches {
			if m.OrderID == orderID {
				t.Mismatch = &m
			}
		}
		for _, f := range rec.Flagged {
			if f.OrderID == orderID {
				t.Flagged = &f
			}
		}
	})
	wg.Wait()

	for _, id := range dedupe(shipmentIDs) {
		refs = append(refs, AggregateRef{AggregateShipment, id})
		eventsOf(refs[len(refs)-1])
	}
	for _, id := range dedupe(paymentIDs) {
		refs = append(refs, AggregateRef{AggregatePayment, id})
		eventsOf(refs[len(refs)-1])
	}
	wg.Wait()
	t.Aggregates = refs

	// Every event once (an event has one aggregate), by commit time.
	var all []OutboxEvent
	seen := map[string]bool{}
	for _, ref := range refs {
		for _, ev := range events[ref] {
			if !seen[ev.EventID] {
				seen[ev.EventID] = true
				all = append(all, ev)
			}
		}
	}
	sort.SliceStable(all, func(i, j int) bool {
		if !all[i].CommittedAt.Equal(all[j].CommittedAt) {
			return all[i].CommittedAt.Before(all[j].CommittedAt)
		}
		return all[i].EventID < all[j].EventID
	})

	// Each subscriber once: when it processed which event, and which it dead-lettered.
	bySubscriber := map[string][]string{}
	for _, ev := range all {
		for _, sub := range ev.Subscribers {
			bySubscriber[sub] = append(bySubscriber[sub], ev.EventID)
		}
	}
	type answer struct {
		processed map[string]time.Time
		dead      map[string]bool
		unknown   bool
	}
	answers := map[string]*answer{}
	for sub, ids := range bySubscriber {
		a := &answer{dead: map[string]bool{}}
		answers[sub] = a
		wg.Go(func() {
			p, err := c.Processed(ctx, sub, ids)
			if err != nil {
				gap(sub, "processed events", err)
				a.unknown = true
				return
			}
			a.processed = p
		})
		wg.Go(func() {
			dls, err := c.DeadLetters(ctx, sub, DeadLetterQuery{})
			if err != nil {
				gap(sub, "dead letters", err)
				return
			}
			for _, d := range dls {
				a.dead[d.EventID] = true
			}
		})
	}
	wg.Wait()
	audit.Wait()

	for _, ev := range all {
		base := Hop{
			EventID: ev.EventID, EventType: ev.Type, Source: ev.Source, AggregateType: ev.AggregateType,
			AggregateID: ev.AggregateID, AggregateVersion: ev.AggregateVersion, CommittedAt: ev.CommittedAt,
			PublishedAt: ev.PublishedAt, Quarantined: ev.Quarantined,
		}
		if ev.PublishedAt != nil {
			base.PublishLatency = between(ev.CommittedAt, *ev.PublishedAt)
		}
		if ev.Quarantined {
			t.Problems = append(t.Problems, Problem{Service: ev.Source, Kind: ProblemQuarantined, Subject: ev.EventID,
				Detail: fmt.Sprintf("event %s (%s) is quarantined in the outbox", ev.EventID, ev.Type)})
		}
		subs := slices.Clone(ev.Subscribers)
		sort.SliceStable(subs, func(i, j int) bool { return rosterIndex(subs[i]) < rosterIndex(subs[j]) })
		if len(subs) == 0 {
			t.Hops = append(t.Hops, base)
			continue
		}
		for _, sub := range subs {
			h := base
			h.Subscriber = sub
			a := answers[sub]
			h.ProcessedUnknown = a.unknown
			if at, ok := a.processed[ev.EventID]; ok {
				h.ProcessedAt = &at
				h.EndToEnd = between(ev.CommittedAt, at)
				if ev.PublishedAt != nil {
					h.DeliveryLatency = between(*ev.PublishedAt, at)
				}
			}
			if a.dead[ev.EventID] {
				h.DeadLettered = true
				t.Problems = append(t.Problems, Problem{Service: sub, Kind: ProblemDeadLetters, Subject: ev.EventID,
					Detail: fmt.Sprintf("dead-lettered event %s (%s)", ev.EventID, ev.Type)})
			}
			t.Hops = append(t.Hops, h)
		}
	}

	var audited []Problem
	if s := t.Stuck; s != nil {
		audited = append(audited, Problem{Service: topology.Orders, Kind: ProblemStuck, Subject: orderID,
			Detail: fmt.Sprintf("stuck in %s for %s, waiting for %s", s.Status, s.For, s.WaitingFor)})
	}
	if m := t.Mismatch; m != nil {
		audited = append(audited, Problem{Service: topology.Orders, Kind: ProblemMismatch, Subject: orderID,
			Detail: fmt.Sprintf("reconciliation mismatch (%s): %s", m.Check, strings.Join(m.Problems, "; "))})
	}
	if f := t.Flagged; f != nil {
		audited = append(audited, Problem{Service: topology.Orders, Kind: ProblemNeedsAttention, Subject: orderID,
			Detail: "needs attention: " + f.AttentionReason})
	}
	t.Problems = append(audited, t.Problems...)
	sortGaps(t.Gaps)

	if errors.Is(orderErr, ErrNotFound) && len(all) == 0 {
		return t, fmt.Errorf("order %s: %w: orders does not know it and the relay has no event of it", orderID, ErrNotFound)
	}
	return t, nil
}

func between(from, to time.Time) *time.Duration {
	d := to.Sub(from)
	return &d
}
