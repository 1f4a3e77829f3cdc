package app

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spanmart/spanmart/services/orders/internal/order"
)

// DatedOrder is an order with the time of its last change (Orders.UpdatedAt): for how long it has
// been in its status.
type DatedOrder struct {
	Order     *order.Order
	UpdatedAt time.Time
}

// StuckAfter is how long an order may stay in each non-terminal status before the detector reports
// it (STUCK_AFTER).
type StuckAfter map[order.Status]time.Duration

// DefaultStuckAfter returns the default thresholds: an inventory decision takes seconds, an
// authorization minutes (a slip waits for its own expiry, see StuckOrders), a shipment up to two
// days of warehouse work, a capture or a compensation minutes (a refund the provider pays out
// later waits AuditConfig.RefundPayout, see StuckOrders).
func DefaultStuckAfter() StuckAfter {
	return StuckAfter{
		order.Pending:         5 * time.Minute,
		order.AwaitingPayment: time.Hour,
		order.Confirmed:       48 * time.Hour,
		order.Shipped:         time.Hour,
		order.Cancelling:      30 * time.Minute,
	}
}

// ParseStuckAfter reads STUCK_AFTER, e.g. "PENDING=5m,CONFIRMED=72h": comma-separated
// STATUS=duration pairs over DefaultStuckAfter (a status left out keeps its default). Every
// problem is listed: a status that is unknown, terminal or given twice, a duration that does not
// parse or is not positive.
func ParseStuckAfter(spec string) (StuckAfter, error) {
	after := DefaultStuckAfter()
	seen := map[order.Status]bool{}
	var problems []string
	for _, pair := range strings.Split(spec, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		name, value, ok := strings.Cut(pair, "=")
		status := order.Status(strings.ToUpper(strings.TrimSpace(name)))
		if !ok {
			problems = append(problems, fmt.Sprintf("%q is not STATUS=duration", pair))
			continue
		}
		if _, watched := after[status]; !watched {
			problems = append(problems, fmt.Sprintf("%q is not a status an order can be stuck in (want one of %s)", strings.TrimSpace(name), strings.Join(statusNames(after), ", ")))
			continue
		}
		if seen[status] {
			problems = append(problems, fmt.Sprintf("%s is given twice", status))
			continue
		}
		seen[status] = true
		d, err := time.ParseDuration(strings.TrimSpace(value))
		if err != nil || d <= 0 {
			problems = append(problems, fmt.Sprintf("%s: %q is not a positive duration like 30m or 48h", status, strings.TrimSpace(value)))
			continue
		}
		after[status] = d
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return after, nil
}

// String is the thresholds in STUCK_AFTER's syntax, in lifecycle order.
func (a StuckAfter) String() string {
	var parts []string
	for _, s := range statusNames(a) {
		parts = append(parts, s+"="+a[order.Status(s)].String())
	}
	return strings.Join(parts, ",")
}

// statusNames returns the statuses of a in lifecycle order.
func statusNames(a StuckAfter) []string {
	var out []string
	for _, s := range order.Statuses() {
		if _, ok := a[s]; ok {
			out = append(out, string(s))
		}
	}
	return out
}

// What a stuck order waits for, by status (and, for a cancelling order, by pending compensation).
const (
	WaitingInventory = "inventory decision"
	WaitingPayment   = "payment authorization"
	WaitingShipment  = "shipment"
	WaitingCapture   = "capture"
	WaitingStock     = "stock release"
	WaitingMoney     = "payment void/refund"
	// WaitingPayout replaces WaitingMoney when the gateway says the refund is accepted and not
	// paid out (REFUND_PENDING): the provider pays it by bank transfer, days later.
	WaitingPayout = "refund payout by the payment provider"
)

// DefaultRefundPayout is how long a cancelling order may wait for a refund its provider accepted
// and has not paid out (the gateway's REFUND_PENDING) before the detector reports it: KOMOJU pays
// a konbini or bank transfer refund out by hand in a business day or two; five days cover a
// weekend and a holiday.
const DefaultRefundPayout = 5 * 24 * time.Hour

// StuckOrder is an order that has stayed in a non-terminal status longer than its threshold.
type StuckOrder struct {
	OrderID    string
	CustomerID string
	Status     order.Status
	Since      time.Time     // its last change
	For        time.Duration // now - Since
	// WaitingFor is the fact that would move it on: WaitingInventory, ... and, for a cancelling
	// order, its pending compensations joined with " and ".
	WaitingFor string
	// Pending lists a cancelling order's compensations still pending.
	Pending      []order.CompensationKind
	CancelReason string
	// SlipExpiresAt is the expiry of an awaiting order's konbini or bank transfer slip (zero
	// without one): such an order is stuck only once it is StuckAfter past the expiry.
	SlipExpiresAt time.Time
}

// StuckReport is what the detector found, at At.
type StuckReport struct {
	At         time.Time
	StuckAfter StuckAfter
	Orders     []StuckOrder         // by status in lifecycle order, then oldest change first
	Counts     map[order.Status]int // per watched status, zeros included (the gauge orders_stuck)
	// Truncated lists the statuses whose list stopped at the limit (more may be stuck), or whose
	// scan stopped at the scan limit before reaching the threshold's end.
	Truncated []order.Status
}

// StuckOrders lists the orders stuck at the audit's clock: per non-terminal status, those whose
// last change is older than the status's threshold, read through the OrdersByStatus index oldest
// first, at most AuditConfig.StuckLimit per status. An AWAITING_PAYMENT order with a slip
// legitimately waits days for the customer to pay at the konbini or bank: it is stuck only once the
// threshold has passed after the slip's expiry (the gateway should have sent payment.expired by
// then). Such orders are skipped while the index is paged on, up to a scan limit, so open slips do
// not hide stuck card orders. A slip without an expiry falls under the plain rule. Likewise a
// CANCELLING order whose money is all it waits for, and whose refund the gateway says its provider
// accepted and has not paid out (REFUND_PENDING, read through Peers), is stuck only once
// AuditConfig.RefundPayout has passed since its last change: the money is on its way back, which
// takes days, and the order is waiting, not lost. It changes nothing.
func (a *Audit) StuckOrders(ctx context.Context) (StuckReport, error) {
	now := a.now()
	rep := StuckReport{At: now, StuckAfter: a.stuckAfter, Counts: map[order.Status]int{}}
	for _, name := range statusNames(a.stuckAfter) {
		status := order.Status(name)
		stuck, truncated, err := a.stuckIn(ctx, status, now)
		if err != nil {
			return StuckReport{}, err
		}
		rep.Orders = append(rep.Orders, stuck...)
		rep.Counts[status] = len(stuck)
		if truncated {
			rep.Truncated = append(rep.Truncated, status)
		}
	}
	return rep, nil
}

// stuckIn pages through the orders in status that changed before now - threshold. A page asks
// for one more order than the limit, so that a status with exactly the limit is not reported
// truncated; the next page starts at the last order's change (inclusive: two orders can share one,
// so the ones already seen are skipped).
func (a *Audit) stuckIn(ctx context.Context, status order.Status, now time.Time) ([]StuckOrder, bool, error) {
	threshold := a.stuckAfter[status]
	before := now.Add(-threshold)
	page := a.stuckLimit + 1
	var (
		stuck   []StuckOrder
		from    time.Time
		scanned int
	)
	seen := map[string]bool{}
	for {
		orders, err := a.repo.OrdersByStatus(ctx, status, from, before, page)
		if err != nil {
			return nil, false, fmt.Errorf("stuck orders in %s: %w", status, err)
		}
		fresh := 0
		for _, d := range orders {
			if seen[d.Order.ID()] {
				continue
			}
			seen[d.Order.ID()] = true
			fresh++
			scanned++
			s, ok := isStuck(d, threshold, now)
			if ok {
				s, ok = a.awaitingPayout(ctx, s)
			}
			if ok {
				if len(stuck) == a.stuckLimit {
					return stuck, true, nil
				}
				stuck = append(stuck, s)
			}
		}
		switch {
		case len(orders) < page:
			return stuck, false, nil // the range is exhausted
		case fresh == 0, scanned >= a.stuckScanLimit:
			// A page of orders that all changed at one instant cannot be paged past; and the scan
			// is bounded: either way more may be stuck.
			return stuck, true, nil
		}
		from = orders[len(orders)-1].UpdatedAt
	}
}

// awaitingPayout refines s, a stuck cancelling order that waits for its money, by what the gateway
// says of its payment: a refund accepted and not paid out (REFUND_PENDING) waits for the
// provider's payout, and is stuck only after a.refundPayout, unless the order's stock is late too.
// Without peers, or when the gateway does not answer, the plain rule stands: better reported than
// hidden.
func (a *Audit) awaitingPayout(ctx context.Context, s StuckOrder) (StuckOrder, bool) {
	if a.peers == nil || !slices.Contains(s.Pending, order.CompensatePayment) {
		return s, true
	}
	payments, err := a.peers.Payments(ctx, s.OrderID)
	if err != nil || !slices.ContainsFunc(payments, func(p PeerPayment) bool { return p.Status == PaymentRefundPending }) {
		return s, true
	}
	s.WaitingFor = strings.Replace(s.WaitingFor, WaitingMoney, WaitingPayout, 1)
	return s, slices.Contains(s.Pending, order.CompensateStock) || s.For >= a.refundPayout
}

// isStuck decides whether d, which changed more than threshold before now, is stuck, and says
// what it waits for.
func isStuck(d DatedOrder, threshold time.Duration, now time.Time) (StuckOrder, bool) {
	o := d.Order
	s := StuckOrder{
		OrderID: o.ID(), CustomerID: o.CustomerID(), Status: o.Status(), Since: d.UpdatedAt,
		For: now.Sub(d.UpdatedAt), CancelReason: o.CancelReason(),
	}
	switch o.Status() {
	case order.Pending:
		s.WaitingFor = WaitingInventory
	case order.AwaitingPayment:
		s.WaitingFor = WaitingPayment
		if slip := o.PaymentInstructions(); slip != nil && !slip.ExpiresAt.IsZero() {
			s.SlipExpiresAt = slip.ExpiresAt
			if now.Before(slip.ExpiresAt.Add(threshold)) {
				return StuckOrder{}, false
			}
		}
	case order.Confirmed:
		s.WaitingFor = WaitingShipment
	case order.Shipped:
		s.WaitingFor = WaitingCapture
	case order.Cancelling:
		var waits []string
		for _, c := range o.Compensations() {
			if c.State != order.CompensationPending {
				continue
			}
			s.Pending = append(s.Pending, c.Kind)
			switch c.Kind {
			case order.CompensateStock:
				waits = append(waits, WaitingStock)
			case order.CompensatePayment:
				waits = append(waits, WaitingMoney)
			default:
				waits = append(waits, string(c.Kind))
			}
		}
		s.WaitingFor = strings.Join(waits, " and ")
	default:
		return StuckOrder{}, false // terminal: never stuck
	}
	return s, true
}
