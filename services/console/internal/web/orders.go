package web

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/spanmart/spanmart/internal/adminclient"
	"github.com/spanmart/spanmart/internal/topology"
)

// searchView is GET /orders: the search form and, for a query that is no order id, the stuck
// orders of the customer it may name.
type searchView struct {
	Query    string
	NotFound bool                     // the query is no order orders knows
	Customer []adminclient.StuckOrder // the stuck orders of customer Query
	Gaps     []gap
}

// orders is GET /orders?q=: an order id goes to its trace. No API lists a customer's orders
// (orders answers GET /admin/orders/{id} only), so a customer id finds only that customer's stuck
// orders, which the stuck-order report names with their customer; the page says so.
func (s *Server) orders(c echo.Context) error {
	q := strings.TrimSpace(c.QueryParam("q"))
	v := searchView{Query: q}
	if q == "" {
		return s.render(c, http.StatusOK, "orders", v)
	}
	ctx, cancel := s.callContext(c)
	defer cancel()
	_, err := s.client.Order(ctx, q)
	switch {
	case err == nil:
		return c.Redirect(http.StatusSeeOther, PathOrders+"/"+url.PathEscape(q))
	case errors.Is(err, adminclient.ErrNotFound):
		v.NotFound = true
	default:
		v.Gaps = append(v.Gaps, gapOf(topology.Orders, "the order", err))
	}
	rep, err := s.client.StuckOrders(ctx)
	if err != nil {
		v.Gaps = append(v.Gaps, gapOf(topology.Orders, "its stuck orders (to find the customer's)", err))
	}
	for _, o := range rep.Orders {
		if o.CustomerID == q {
			v.Customer = append(v.Customer, o)
		}
	}
	return s.render(c, http.StatusOK, "orders", v)
}

// traceView is GET /orders/{id}.
type traceView struct {
	Trace         adminclient.Trace
	Events        []traceEvent
	Slowest       *slowest
	Notifications []adminclient.Notification
	Payments      []adminclient.Payment
	Gaps          []gap
}

// traceEvent is one event of the order's aggregates and its deliveries (a row per subscriber).
type traceEvent struct {
	adminclient.Hop // the event's own fields; Subscriber and the processed fields are the rows'
	Rows            []traceRow
	SlowPublish     bool // the slowest hop is this event's commit → publish
}

// traceRow is one delivery.
type traceRow struct {
	Subscriber       string
	ProcessedAt      *time.Time
	DeadLettered     bool
	ProcessedUnknown bool
	Delivery         *time.Duration
	EndToEnd         *time.Duration
	Slowest          bool // the slowest delivery of the trace (end to end)
	SlowDelivery     bool // and its published → processed is what made it slow
}

// slowest describes the highlighted hop.
type slowest struct {
	EventType  string
	EventID    string
	Subscriber string
	Segment    string // "committed → published (the relay)" or "published → processed (Cloud Tasks and the consumer)"
	Latency    time.Duration
	EndToEnd   time.Duration
}

// order is GET /orders/{id}: the trace (adminclient.Trace), with the order's e-mails and payments
// read alongside.
func (s *Server) order(c echo.Context) error {
	id := c.Param("id")
	ctx, cancel := s.callContext(c)
	defer cancel()
	var (
		wg       sync.WaitGroup
		v        traceView
		traceErr error
		mailErr  error
		payErr   error
	)
	wg.Go(func() { v.Trace, traceErr = s.client.Trace(ctx, id) })
	wg.Go(func() { v.Notifications, mailErr = s.client.Notifications(ctx, id) })
	wg.Go(func() { v.Payments, payErr = s.client.Payments(ctx, id) })
	wg.Wait()
	if errors.Is(traceErr, adminclient.ErrNotFound) {
		return s.renderError(c, http.StatusNotFound, "no order "+id+": orders does not know it and the relay has no event of it", PathOrders)
	}
	if traceErr != nil {
		return s.renderError(c, http.StatusBadRequest, traceErr.Error(), PathOrders)
	}
	for _, g := range v.Trace.Gaps {
		v.Gaps = append(v.Gaps, gap{Service: g.Service, What: g.What, Error: describe(g.Err)})
	}
	if mailErr != nil {
		v.Gaps = append(v.Gaps, gapOf(topology.Notifications, "the order's e-mails", mailErr))
	}
	if payErr != nil {
		v.Gaps = append(v.Gaps, gapOf(topology.Gateway, "the order's payments", payErr))
	}
	v.Events, v.Slowest = traceEvents(v.Trace)
	return s.render(c, http.StatusOK, "order", v)
}

// traceEvents groups the trace's hops by event (they come sorted by commit time, then event) and
// marks the slowest delivery end to end (Trace.Slowest) and, within it, the segment that took
// longer.
func traceEvents(t adminclient.Trace) ([]traceEvent, *slowest) {
	var out []traceEvent
	slow := t.Slowest()
	var sl *slowest
	for i, h := range t.Hops {
		if len(out) == 0 || out[len(out)-1].EventID != h.EventID {
			out = append(out, traceEvent{Hop: h})
		}
		ev := &out[len(out)-1]
		if h.Subscriber == "" {
			continue // routed to nobody: the event row alone
		}
		row := traceRow{
			Subscriber: h.Subscriber, ProcessedAt: h.ProcessedAt, DeadLettered: h.DeadLettered,
			ProcessedUnknown: h.ProcessedUnknown, Delivery: h.DeliveryLatency, EndToEnd: h.EndToEnd,
		}
		if i == slow {
			row.Slowest = true
			sl = &slowest{EventType: h.EventType, EventID: h.EventID, Subscriber: h.Subscriber, EndToEnd: *h.EndToEnd}
			if h.PublishLatency != nil && (h.DeliveryLatency == nil || *h.PublishLatency > *h.DeliveryLatency) {
				ev.SlowPublish = true
				sl.Segment, sl.Latency = "committed → published (the relay)", *h.PublishLatency
			} else if h.DeliveryLatency != nil {
				row.SlowDelivery = true
				sl.Segment, sl.Latency = "published → processed (Cloud Tasks and the consumer)", *h.DeliveryLatency
			}
		}
		ev.Rows = append(ev.Rows, row)
	}
	return out, sl
}

// Rowspan is how many table rows the event spans (at least its own).
func (e traceEvent) Rowspan() int { return max(len(e.Rows), 1) }
