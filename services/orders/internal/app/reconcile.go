package app

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spanmart/spanmart/services/orders/internal/order"
)

// Peers reads what the other services record about an order, through their HTTP APIs (never their
// databases). An error means the peer did not answer (unreachable, refused, a 5xx, an answer that
// does not decode); "the peer has nothing" is an answer, not an error.
type Peers interface {
	// Reservation returns fulfillment's reservation of the order (GET /v1/reservations/{id}).
	Reservation(ctx context.Context, orderID string) (PeerReservation, error)
	// Payments returns the gateway's payments of the order (GET /admin/payments?order_id=); none
	// is an empty slice.
	Payments(ctx context.Context, orderID string) ([]PeerPayment, error)
}

// Peer names, in reports and in the gauge orders_reconciliation_unchecked.
const (
	PeerFulfillment = "fulfillment"
	PeerGateway     = "gateway-abstraction"
)

// PeerReservation is fulfillment's reservation of an order. Found is false when it has none (it
// never decided on the order): Status is then "".
type PeerReservation struct {
	Found  bool
	Status string // HELD, REJECTED, RELEASED, SHIPPED
}

// PeerPayment is one of the gateway's payments of an order.
type PeerPayment struct {
	ID     string
	Status string // REQUESTED, PENDING, AUTHORIZED, ... (the gateway's payment.Status)
}

// Observed is what the peers said about one order. An error field is set when that peer did not
// answer for it; the other fields then mean nothing.
type Observed struct {
	Reservation      PeerReservation
	ReservationError string
	Payments         []PeerPayment
	PaymentsError    string

	// skipped: the peer was not asked (it had failed peerFailureLimit times in this run), so its
	// error says nothing of why; the report's Unreachable names a failure that happened.
	reservationSkipped, paymentsSkipped bool
}

// Checks, by the order status they apply to (the check label of orders_reconciliation_mismatches).
const (
	CheckConfirmed = "confirmed" // stock held, money authorized
	CheckShipped   = "shipped"   // stock shipped, capture requested or done
	CheckCompleted = "completed" // stock shipped, money captured
	CheckCancelled = "cancelled" // stock not held, no money held
)

// Checks returns every check name, for gauges that show zeros.
func Checks() []string { return []string{CheckConfirmed, CheckShipped, CheckCompleted, CheckCancelled} }

// check is what a settled order's status requires of the peers' records.
type check struct {
	name string
	// reservation lists the acceptable reservation statuses ("" = fulfillment has none).
	reservation []string
	// payment lists the acceptable statuses of the order's one payment; noMoney instead accepts no
	// payment or any number of payments that each hold no money.
	payment []string
	noMoney bool
}

// Payment statuses that hold no money: the payment never took any, or gave it back.
var noMoneyHeld = []string{"FAILED", "EXPIRED", "VOIDED", "REFUNDED"}

// PaymentRefundPending is the gateway's status of a refund its provider accepted and has not paid
// out: the money is still held, and on its way back.
const PaymentRefundPending = "REFUND_PENDING"

// checks by order status. A settled CONFIRMED order has its stock held and its payment authorized
// (or the capture already asked for); a SHIPPED one its stock shipped and the capture asked for or
// done; a COMPLETED one the money captured; a CANCELLED one neither stock nor money held: no
// reservation, or a released or rejected one, and no payment or only payments that hold nothing
// (PENDING is an open slip the customer could still pay, *_REQUESTED an operation in flight,
// REFUND_PENDING a refund the provider has not paid out: the order should still be CANCELLING).
var checks = map[order.Status]check{
	order.Confirmed: {name: CheckConfirmed, reservation: []string{"HELD"}, payment: []string{"AUTHORIZED", "CAPTURE_REQUESTED"}},
	order.Shipped:   {name: CheckShipped, reservation: []string{"SHIPPED"}, payment: []string{"CAPTURE_REQUESTED", "CAPTURED"}},
	order.Completed: {name: CheckCompleted, reservation: []string{"SHIPPED"}, payment: []string{"CAPTURED"}},
	order.Cancelled: {name: CheckCancelled, reservation: []string{"", "RELEASED", "REJECTED"}, noMoney: true},
}

// problems returns what is wrong with the peers' records of an order that c applies to; a side
// whose peer did not answer is not judged.
func (c check) problems(obs Observed) []string {
	var out []string
	if obs.ReservationError == "" {
		got := "" // no reservation
		if obs.Reservation.Found {
			got = obs.Reservation.Status
		}
		if !slices.Contains(c.reservation, got) {
			out = append(out, fmt.Sprintf("fulfillment: %s, want %s", describeReservation(obs.Reservation), describeStatuses(c.reservation, "no reservation")))
		}
	}
	if obs.PaymentsError == "" {
		ps := obs.Payments
		switch {
		case c.noMoney:
			for _, p := range ps {
				why := "money may be held"
				if p.Status == PaymentRefundPending {
					why = "its refund is not paid out yet, the money is held"
				}
				if !slices.Contains(noMoneyHeld, p.Status) {
					out = append(out, fmt.Sprintf("gateway: payment %s is %s: %s, want none or %s", p.ID, p.Status, why, strings.Join(noMoneyHeld, ", ")))
				}
			}
		case len(ps) == 0:
			out = append(out, fmt.Sprintf("gateway: no payment, want one %s", strings.Join(c.payment, " or ")))
		case len(ps) > 1:
			out = append(out, fmt.Sprintf("gateway: %d payments (%s), want one %s", len(ps), describePayments(ps), strings.Join(c.payment, " or ")))
		case !slices.Contains(c.payment, ps[0].Status):
			out = append(out, fmt.Sprintf("gateway: payment %s is %s, want %s", ps[0].ID, ps[0].Status, strings.Join(c.payment, " or ")))
		}
	}
	return out
}

func describeReservation(r PeerReservation) string {
	if !r.Found {
		return "no reservation"
	}
	return "reservation " + r.Status
}

func describeStatuses(statuses []string, none string) string {
	out := make([]string, len(statuses))
	for i, s := range statuses {
		out[i] = s
		if s == "" {
			out[i] = none
		}
	}
	return strings.Join(out, " or ")
}

func describePayments(ps []PeerPayment) string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.ID + " " + p.Status
	}
	return strings.Join(out, ", ")
}

// Mismatch is a settled order whose status the peers' records contradict.
type Mismatch struct {
	OrderID  string
	Status   order.Status
	Since    time.Time
	Check    string
	Problems []string
	Observed Observed
}

// Flagged is an order NEEDS_ATTENTION: the saga gave it to an operator. Listed, with what the
// peers say, but not a mismatch.
type Flagged struct {
	OrderID  string
	Since    time.Time
	Reason   string // order.AttentionReason
	Observed Observed
}

// Reconciliation is what comparing the settled orders with the peers' records found.
type Reconciliation struct {
	// Configured is false when no peers are configured (FULFILLMENT_URL, GATEWAY_URL): nothing
	// else is set.
	Configured bool
	At         time.Time
	// From and To bound the orders looked at: their last change is in [From, To) (RECONCILE_WINDOW
	// and RECONCILE_SETTLE before At).
	From, To   time.Time
	Checked    int // orders both peers answered for
	Mismatches []Mismatch
	Flagged    []Flagged
	// Unchecked counts the orders, by peer, that the peer did not answer for; Unreachable gives the
	// first error of each such peer. Either makes the reconciliation partial.
	Unchecked   map[string]int
	Unreachable map[string]string
	// Truncated lists the statuses that had more settled orders in the window than the batch.
	Truncated []order.Status
}

// Partial reports whether a peer did not answer for some order.
func (r Reconciliation) Partial() bool { return len(r.Unreachable) > 0 }

// reconciled are the statuses the reconciliation reads, in lifecycle order.
var reconciled = []order.Status{order.Confirmed, order.Shipped, order.Completed, order.Cancelled, order.NeedsAttention}

// Reconcile compares the orders that settled in the window (last change between RECONCILE_WINDOW
// and RECONCILE_SETTLE ago, so the events of their last transition have had time to be applied;
// at most AuditConfig.ReconcileBatch per status, oldest first) with fulfillment's reservation and the
// gateway's payments of each, and reports the contradictions. A peer that does not answer makes
// the report partial; after peerFailureLimit failures in one run it is not asked again. It changes
// nothing.
func (a *Audit) Reconcile(ctx context.Context) (Reconciliation, error) {
	if a.peers == nil {
		return Reconciliation{}, nil
	}
	now := a.now()
	rep := Reconciliation{Configured: true, At: now, From: now.Add(-a.window), To: now.Add(-a.settle)}
	var settled []DatedOrder
	for _, status := range reconciled {
		orders, err := a.repo.OrdersByStatus(ctx, status, rep.From, rep.To, a.reconcileBatch+1)
		if err != nil {
			return Reconciliation{}, fmt.Errorf("reconcile %s orders: %w", status, err)
		}
		if len(orders) > a.reconcileBatch {
			orders = orders[:a.reconcileBatch]
			rep.Truncated = append(rep.Truncated, status)
		}
		settled = append(settled, orders...)
	}
	a.check(ctx, &rep, settled)
	return rep, nil
}

// ReconcileOrder checks one order (whenever it last changed: an operator asking about it, as an
// order's trace does), without the cost of a whole run. An unknown order is order.ErrNotFound;
// one in a status no check covers (PENDING, AWAITING_PAYMENT, ...) is reported checked and clean.
func (a *Audit) ReconcileOrder(ctx context.Context, id string) (Reconciliation, error) {
	if a.peers == nil {
		return Reconciliation{}, nil
	}
	d, err := a.repo.DatedOrder(ctx, id)
	if err != nil {
		return Reconciliation{}, err
	}
	now := a.now()
	rep := Reconciliation{Configured: true, At: now, From: d.UpdatedAt, To: now}
	if _, ok := checks[d.Order.Status()]; !ok && d.Order.Status() != order.NeedsAttention {
		return rep, nil
	}
	a.check(ctx, &rep, []DatedOrder{d})
	return rep, nil
}

// check asks the peers about orders and adds what they say to rep.
func (a *Audit) check(ctx context.Context, rep *Reconciliation, settled []DatedOrder) {
	observed := a.observe(ctx, settled)
	rep.Unchecked, rep.Unreachable = map[string]int{}, map[string]string{}
	// Unreachable names, per peer, an error a read returned; only if every read of the peer was
	// skipped (which the failure limit makes impossible) would a skip stand for it. Which orders
	// the concurrent reads skipped depends on timing, so this must not follow the orders' order.
	skippedOnly := map[string]bool{}
	for i, d := range settled {
		obs, o := observed[i], d.Order
		unchecked := false
		for _, r := range []struct {
			peer, msg string
			skipped   bool
		}{{PeerFulfillment, obs.ReservationError, obs.reservationSkipped}, {PeerGateway, obs.PaymentsError, obs.paymentsSkipped}} {
			if r.msg == "" {
				continue
			}
			unchecked = true
			rep.Unchecked[r.peer]++
			if _, ok := rep.Unreachable[r.peer]; !ok || skippedOnly[r.peer] && !r.skipped {
				rep.Unreachable[r.peer], skippedOnly[r.peer] = r.msg, r.skipped
			}
		}
		if !unchecked {
			rep.Checked++
		}
		if o.Status() == order.NeedsAttention {
			rep.Flagged = append(rep.Flagged, Flagged{OrderID: o.ID(), Since: d.UpdatedAt, Reason: o.AttentionReason(), Observed: obs})
			continue
		}
		c := checks[o.Status()]
		if problems := c.problems(obs); len(problems) > 0 {
			rep.Mismatches = append(rep.Mismatches, Mismatch{OrderID: o.ID(), Status: o.Status(), Since: d.UpdatedAt, Check: c.name, Problems: problems, Observed: obs})
		}
	}
}

// peerWorkers bounds the concurrent reads of the peers; peerFailureLimit is how many failed reads
// of one peer a run tolerates before it stops asking that peer (a peer that is down would otherwise
// cost a timeout per order).
const (
	peerWorkers      = 8
	peerFailureLimit = 3
)

// observe asks both peers about every order, peerWorkers orders at a time.
func (a *Audit) observe(ctx context.Context, orders []DatedOrder) []Observed {
	out := make([]Observed, len(orders))
	var fulfillmentFailures, gatewayFailures atomic.Int64
	ask := func(failures *atomic.Int64, peer string, skipped *bool, read func() error) string {
		if n := failures.Load(); n >= peerFailureLimit {
			*skipped = true
			return fmt.Sprintf("%s not asked: it failed %d times in this run", peer, n)
		}
		if err := read(); err != nil {
			failures.Add(1)
			return err.Error()
		}
		return ""
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(peerWorkers, len(orders)) {
		wg.Go(func() {
			for i := range next {
				id, obs := orders[i].Order.ID(), &out[i]
				obs.ReservationError = ask(&fulfillmentFailures, PeerFulfillment, &obs.reservationSkipped, func() (err error) {
					obs.Reservation, err = a.peers.Reservation(ctx, id)
					return err
				})
				obs.PaymentsError = ask(&gatewayFailures, PeerGateway, &obs.paymentsSkipped, func() (err error) {
					obs.Payments, err = a.peers.Payments(ctx, id)
					return err
				})
			}
		})
	}
	for i := range orders {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}
