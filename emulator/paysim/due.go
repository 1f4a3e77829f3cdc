package paysim

import (
	"container/heap"
	"time"
)

// The due queue orders what the virtual clock will make due: a card authorization lapsing, a
// KOMOJU slip or PayPay authorization expiring, a KOMOJU refund request being paid out, an
// idempotency key being forgotten. tickLocked runs on every API call under the server's lock;
// scanning every object the sandbox ever held there made each call slower as a long run piled
// up payments (the benchmark's latency rose window by window), so it pops only what is due. An
// entry is a reminder, not the truth: when it is popped, the object is checked again, and an
// entry whose object has moved on is dropped.

type dueKind uint8

const (
	dueIntent dueKind = iota // a PaymentIntent in requires_capture lapses
	dueKomoju                // a KOMOJU payment in authorized expires
	dueIdem                  // an idempotency record is forgotten
	dueRefund                // a KOMOJU refund request is paid out
)

type dueItem struct {
	at   time.Time
	seq  uint64 // insertion order, so that equal times pop in the order they were created
	kind dueKind
	id   string  // an intent's or KOMOJU payment's id (dueRefund: the payment of the request)
	idem idemKey // dueIdem's record
}

type dueQueue struct {
	items []dueItem
	seq   uint64
}

func (q *dueQueue) Len() int { return len(q.items) }
func (q *dueQueue) Less(i, j int) bool {
	a, b := q.items[i], q.items[j]
	if !a.at.Equal(b.at) {
		return a.at.Before(b.at)
	}
	return a.seq < b.seq
}
func (q *dueQueue) Swap(i, j int) { q.items[i], q.items[j] = q.items[j], q.items[i] }
func (q *dueQueue) Push(x any)    { q.items = append(q.items, x.(dueItem)) }
func (q *dueQueue) Pop() any {
	it := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	return it
}

func (q *dueQueue) add(it dueItem) {
	q.seq++
	it.seq = q.seq
	heap.Push(q, it)
}

// next pops the earliest entry due at now, if any.
func (q *dueQueue) next(now time.Time) (dueItem, bool) {
	if len(q.items) == 0 || now.Before(q.items[0].at) {
		return dueItem{}, false
	}
	return heap.Pop(q).(dueItem), true
}

// watchIntentLocked reminds the clock of pi's lapse if it holds an authorization.
func (s *Server) watchIntentLocked(pi *paymentIntent) {
	if pi.status == statusRequiresCapture {
		s.due.add(dueItem{at: pi.authorizedAt.Add(authorizationValidity), kind: dueIntent, id: pi.id})
	}
}

// watchKomojuLocked reminds the clock of p's expiry if it is authorized (a slip awaiting the
// customer's money, or a PayPay authorization awaiting capture).
func (s *Server) watchKomojuLocked(p *komojuPayment) {
	if p.status == komojuAuthorized {
		s.due.add(dueItem{at: p.expiresAt(), kind: dueKomoju, id: p.id})
	}
}

// watchRefundLocked reminds the clock to pay out p's pending refund request, if it has one.
func (s *Server) watchRefundLocked(p *komojuPayment) {
	if r := p.openRefundRequest(); r != nil {
		s.due.add(dueItem{at: r.payoutAt, kind: dueRefund, id: p.id})
	}
}

// watchIdemLocked reminds the clock to forget the record of k.
func (s *Server) watchIdemLocked(k idemKey, rec *idemRecord) {
	s.due.add(dueItem{at: rec.created.Add(idempotencyKeyLifetime), kind: dueIdem, idem: k})
}

// tickLocked applies everything the virtual clock has made due, in the order it fell due.
func (s *Server) tickLocked() {
	now := s.nowLocked()
	for {
		it, ok := s.due.next(now)
		if !ok {
			return
		}
		switch it.kind {
		case dueIntent:
			pi := s.intents[it.id]
			if pi != nil && pi.status == statusRequiresCapture && !now.Before(pi.authorizedAt.Add(authorizationValidity)) {
				pi.expire(pi.authorizedAt.Add(authorizationValidity))
				s.emitLocked("payment_intent.canceled", pi.json())
			}
		case dueKomoju:
			p := s.komoju.payments[it.id]
			if p != nil && p.status == komojuAuthorized && !now.Before(p.expiresAt()) {
				p.expire(s.komoju.walletOf(p))
				s.emitKomojuLocked("payment.expired", p, "")
			}
		case dueRefund:
			p := s.komoju.payments[it.id]
			if p == nil {
				continue
			}
			if r := p.openRefundRequest(); r != nil && !now.Before(r.payoutAt) {
				s.payOutLocked(p, r)
			}
		case dueIdem:
			if rec := s.idem[it.idem]; rec != nil && now.Sub(rec.created) >= idempotencyKeyLifetime {
				delete(s.idem, it.idem)
				s.dirty = true
			}
		}
	}
}
