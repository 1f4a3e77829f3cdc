package platform

import (
	"container/list"
	"context"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Admission control: how much work a process takes on at once.
//
// Past its capacity a process that accepts every request does less work, not the same: each
// request holds a read-write transaction, the database's commit queue grows, every request waits
// in it, clients time out and retry, and the retries add to the queue (congestion collapse). So a
// server works on at most MaxInFlight requests at once, as Cloud Run's --concurrency bounds an
// instance (cloudbuild.yaml sets both from one number per service, docs/capacity.md). A request
// past the limit waits in line, first come first served, for a slot (one that brings new work in
// a line of its own, below); one that gets none in time is refused with 503 and Retry-After. How
// long it may wait depends on what it is:
//   - most requests wait up to AdmissionWait (10 s). A machine's request (a Cloud Tasks delivery,
//     a provider's webhook, a Cloud Scheduler job) comes at its sender's pace and is retried on
//     its schedule: it is paced in line rather than refused, since a refusal costs it a whole
//     retry back-off (a provider's can be minutes), and Cloud Tasks slows a whole queue for it.
//     A customer's request about work already accepted (reading an order, cancelling it) is
//     little work, and the customer needs it answered to go on;
//   - a request that brings new work (the routes a service marks with Server.ShedFirst: orders'
//     POST /v1/orders) waits up to AdmissionWaitCustomer (25 ms), then is refused: the customer
//     learns in milliseconds, not after a timeout, and sends it again with the same
//     Idempotency-Key after Retry-After. Past capacity, new orders are what is shed, while the
//     work already accepted is finished. Below it, a customer waits in a line of its own, ahead
//     of the machines' requests, which can wait seconds: deliveries come in bursts (the relay
//     publishes what a nudge announced at once, and Cloud Tasks dispatches it at once), and
//     behind a burst's line a customer would be refused by a process that keeps up. The
//     machines' requests also leave a slot free for customers (a process with such routes and a
//     limit above 1 lets them take a slot only while another stays free): with every core busy a
//     burst of deliveries can hold all the slots for tens of milliseconds, longer than a
//     customer may wait, where the one slot left lets the customer in at once. What tells
//     a burst from overload is whether the machines' line drains (CoDel's test, as routers tell
//     a burst of packets from a standing queue): a line whose requests have all waited longer
//     than a customer may (AdmissionWaitCustomer) for standingAfter (100 ms) stands, the work
//     already accepted is not keeping up, and a customer is refused at once. Nor does a
//     customer wait for a slot it cannot expect in time: with n requests ahead of it (coming
//     back, and customers) and slots held for h on average, its wait is about
//     (n+1)·h / MaxInFlight; when that is longer than its wait it is refused at once, so that
//     shedding costs the customer milliseconds, not the whole wait.
//
// A slot is held while a request works. One that waits on something outside the process (the
// gateway's call to a payment provider) gives it back meanwhile (Away), and one whose work is
// done before it ends gives it back for good (YieldSlot). A request coming back from outside goes
// before the line: the work already in flight is finished before new work starts.
//
// The operational endpoints (/healthz, /readyz, /metrics, /debug/pprof/) are never held back: a
// probe must see a busy process as alive.

// Defaults of admission control (ServerOptions; MAX_IN_FLIGHT, ADMISSION_WAIT and
// ADMISSION_WAIT_CUSTOMER).
const (
	// DefaultMaxInFlight is the local stacks' limit (cloudbuild.yaml sets production's from
	// _CONCURRENCY): a request's round trips to the emulators take a millisecond or two, so a few
	// in flight keep a process busy, and more only wait in the emulator's commit queue. Measured
	// at three times the stack's capacity (docs/capacity.md, "Overload"), 8 kept the accepted
	// orders' POST p99 near 120 ms and the backlog at a few seconds; 16 and 32 let it grow to
	// 0.3-0.6 s and minutes, 4 was too few to keep up.
	DefaultMaxInFlight = 8
	// DefaultAdmissionWait is how long a machine's request waits in line: well within Cloud
	// Tasks' dispatch deadline (10 minutes for HTTP targets) and a provider's webhook timeout, and
	// long enough that a queue dispatching more than the process takes at once is paced.
	DefaultAdmissionWait = 10 * time.Second
	// DefaultAdmissionWaitCustomer is how long a request that brings new work (ShedFirst) waits
	// in line.
	DefaultAdmissionWaitCustomer = 25 * time.Millisecond
	// AdmissionRetryAfter is the Retry-After of a refusal: about the time a backlog of one
	// limit's worth of requests takes to clear, and Cloud Tasks' unit (whole seconds).
	AdmissionRetryAfter = time.Second
	// shedLogEvery bounds the log lines about refusals: one per interval while they go on, with
	// how many there were, and one when they stop.
	shedLogEvery = 10 * time.Second
	// standingAfter is how long the machines' line must keep its requests waiting longer than a
	// customer may before it stands (see above): CoDel's interval. A burst of deliveries clears
	// in a few tens of milliseconds (twenty requests held about 10 ms each, on 8 slots, take
	// 25 ms); a process past its capacity keeps its line for seconds.
	standingAfter = 100 * time.Millisecond
)

// admission is a server's limit on requests in flight (see above). A nil *admission admits
// everything.
type admission struct {
	limit        int // MaxInFlight
	wait         time.Duration
	waitCustomer time.Duration
	// shedFirst are the route paths that bring new work (Server.ShedFirst), set before the
	// server serves.
	shedFirst map[string]bool
	log       *zap.Logger

	// The metrics, each with the service's name as its one label (service), so that an alert can
	// name the service that sheds (monitoring/alerts/overload-requests-refused-with-503.yaml).
	inFlight prometheus.Gauge
	waiting  prometheus.Gauge
	waited   prometheus.Observer
	refused  prometheus.Counter

	// hold is a moving average of how long admitted requests held their slot (nanoseconds): a
	// ShedFirst request's expected wait.
	hold atomic.Int64

	// The slots and the lines for them, under lineMu. A slot given back goes straight to the
	// first in back, else to the first customer, else to the first in line unless it is one of
	// the reserved, so busy < limit - reserved only while all three are empty, and busy < limit
	// only while back and cust are.
	lineMu sync.Mutex
	busy   int // slots held
	// reserved are the slots the machines' line leaves free for the customers': it takes a slot
	// only while as many others stay free (1 once a route brings new work, ShedFirst, and the
	// limit is above 1), so that a burst of deliveries holding their slots for a while does not
	// keep a customer out (see above).
	reserved int
	back     list.List // of *waiter: requests coming back to their work from outside the process (Away), served first
	cust     list.List // of *waiter: requests that bring new work (ShedFirst), while the line does not stand
	line     list.List // of *waiter: the other requests waiting to be admitted, first come first served
	// aboveSince is when a request admitted from line had waited longer than waitCustomer, with
	// none admitted since after a shorter wait and line not empty since (zero otherwise): the
	// line stands once that has lasted standingAfter (standingLocked).
	aboveSince time.Time
	now        func() time.Time // time.Now; tests set it

	// working are the requests admitted and not ended (holding their slot or away), for the
	// refusal log's account of what holds the slots (holders).
	workingMu sync.Mutex
	working   map[*slot]struct{}

	shedding     atomic.Bool // a refusal came in the last shedLogEvery
	mu           sync.Mutex
	refusedSince int64     // refusals since the last line logged about them
	lastLog      time.Time // of the last such line
	lastRefusal  time.Time
}

// waiter is a request's place in one of the lines.
type waiter struct {
	ready   chan struct{} // closed when a slot is handed to it
	granted bool          // under lineMu: it holds a slot (ready is closed)
	q       *list.List
	e       *list.Element
	since   time.Time // when it began to wait (admission.now)
}

func newAdmission(reg prometheus.Registerer, log *zap.Logger, service string, limit int, wait, waitCustomer time.Duration) *admission {
	if limit <= 0 {
		return nil
	}
	inFlight := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "spanmart_admission_in_flight",
		Help: "Requests being worked on (at most MAX_IN_FLIGHT)."}, []string{"service"})
	waiting := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "spanmart_admission_waiting",
		Help: "Requests waiting for a slot: to be admitted (each at most ADMISSION_WAIT, or ADMISSION_WAIT_CUSTOMER), or to go on with their work after waiting outside the process."}, []string{"service"})
	waited := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "spanmart_admission_wait_seconds",
		Help:    "How long admitted requests waited for a slot.",
		Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5}}, []string{"service"})
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "spanmart_admission_refused_total",
		Help: "Requests refused with 503: MAX_IN_FLIGHT were in flight for as long as they could wait."}, []string{"service"})
	reg.MustRegister(inFlight, waiting, waited, refused)
	return &admission{
		limit:        limit,
		wait:         wait,
		waitCustomer: waitCustomer,
		log:          log,
		inFlight:     inFlight.WithLabelValues(service),
		waiting:      waiting.WithLabelValues(service),
		waited:       waited.WithLabelValues(service),
		refused:      refused.WithLabelValues(service),
		now:          time.Now,
		working:      map[*slot]struct{}{},
	}
}

// track and untrack keep the set of requests working (holders).
func (a *admission) track(s *slot) {
	a.workingMu.Lock()
	a.working[s] = struct{}{}
	a.workingMu.Unlock()
}

func (a *admission) untrack(s *slot) {
	a.workingMu.Lock()
	delete(a.working, s)
	a.workingMu.Unlock()
}

// holders says what holds the slots now, by route, with how many and how long the longest has
// held its slot: "POST /events: 6, the longest 48ms; POST /v1/orders: 2, the longest 30ms". A
// refusal's log line carries it, so that it tells whether the slots were held by a burst of short
// requests or by a few that stalled, and which.
func (a *admission) holders() string {
	a.workingMu.Lock()
	slots := make([]*slot, 0, len(a.working))
	for s := range a.working {
		slots = append(slots, s)
	}
	a.workingMu.Unlock()
	type held struct {
		n       int
		longest time.Duration
	}
	byRoute := map[string]*held{}
	now := time.Now()
	for _, s := range slots {
		s.mu.Lock()
		if s.held {
			h := byRoute[s.route]
			if h == nil {
				h = &held{}
				byRoute[s.route] = h
			}
			h.n++
			h.longest = max(h.longest, now.Sub(s.since))
		}
		s.mu.Unlock()
	}
	routes := slices.Sorted(maps.Keys(byRoute))
	slices.SortStableFunc(routes, func(x, y string) int { return byRoute[y].n - byRoute[x].n })
	parts := make([]string, len(routes))
	for i, r := range routes {
		parts[i] = r + ": " + strconv.Itoa(byRoute[r].n) + ", the longest " + byRoute[r].longest.Round(time.Millisecond).String()
	}
	return strings.Join(parts, "; ")
}

// operational reports whether path is one of the endpoints admission never holds back.
func operational(path string) bool {
	return path == PathHealthz || path == PathReadyz || path == PathMetrics || strings.HasPrefix(path, PathPprof)
}

// middleware admits a request, or refuses it (503, Retry-After) when no slot frees within the
// wait.
func (a *admission) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	if a == nil {
		return next
	}
	return func(c echo.Context) error {
		if operational(c.Request().URL.Path) {
			return next(c)
		}
		start := time.Now()
		if a.shedFirst[c.Path()] {
			w, ahead, ok := a.enterCustomer()
			if !ok {
				return a.refuse(c, "the requests already accepted wait longer than a new one may")
			}
			if w != nil {
				if err := a.waitForSlot(c, w, ahead, a.waitCustomer); err != nil {
					return err
				}
			}
		} else if w, _ := a.enter(&a.line); w != nil {
			if err := a.waitForSlot(c, w, 0, a.wait); err != nil {
				return err
			}
		}
		admitted := time.Now()
		a.waited.Observe(admitted.Sub(start).Seconds())
		a.inFlight.Inc()
		s := &slot{a: a, held: true, since: admitted, route: c.Request().Method + " " + c.Path()}
		a.track(s)
		defer a.untrack(s)
		defer s.release(true)
		a.admitted()
		req := c.Request()
		c.SetRequest(req.WithContext(context.WithValue(req.Context(), slotKey{}, s)))
		return next(c)
	}
}

// slot is an admitted request's place among the MaxInFlight: held while it works, given back
// while it is away (Away) and for good when it ends or yields it (YieldSlot).
type slot struct {
	a      *admission
	route  string // "POST /events": what the refusal log says the slots are held by
	mu     sync.Mutex
	held   bool          // it holds a slot now
	done   bool          // given back for good
	since  time.Time     // when it took the slot it holds
	worked time.Duration // how long it held slots before since
}

type slotKey struct{}

// release gives the slot back if the request holds it, for good when final.
func (s *slot) release(final bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return
	}
	if s.held {
		s.held = false
		s.worked += time.Since(s.since)
		s.a.inFlight.Dec()
		s.a.free()
	}
	if final {
		s.done = true
		s.a.held(s.worked)
	}
}

// YieldSlot gives the admission slot of the request ctx belongs to back before the request ends,
// for a request whose work is done and that now only waits for others': a delivery whose outcome
// is recorded in a group with others' (the group's first waits for them, and with its slot held
// the others could not come in to join it). The limit bounds the requests being worked on, not
// those waiting. Without a slot in ctx (a request admission does not hold back, a background
// job) it does nothing.
func YieldSlot(ctx context.Context) {
	if s, ok := ctx.Value(slotKey{}).(*slot); ok {
		s.release(true)
	}
}

// Away gives the admission slot of the request ctx belongs to back while the request waits on
// something outside the process (a payment provider's answer, say), and back takes one again
// for the work that follows: the limit bounds the requests being worked on, and one waiting on
// the network takes no CPU here. A request coming back goes before every request waiting to be
// admitted: it holds an answer that only its own work can record, and had it waited behind the
// new requests its freed slot let in, the work in flight would take longer the more came in
// (past capacity, by as much as the line is long). Its wait is bounded by ctx only; back returns
// ctx's error, without a slot, when ctx ends first. Call back once, before the request's next
// work. Without a slot in ctx (a request admission does not hold back, a background job, one
// that yielded its slot) both do nothing.
func Away(ctx context.Context) (back func() error) {
	s, ok := ctx.Value(slotKey{}).(*slot)
	if !ok {
		return func() error { return nil }
	}
	s.mu.Lock()
	away := s.held && !s.done
	s.mu.Unlock()
	if !away {
		return func() error { return nil }
	}
	s.release(false)
	return func() error {
		a := s.a
		if w, _ := a.enter(&a.back); w != nil {
			select {
			case <-w.ready:
			case <-ctx.Done():
				if a.leave(w) {
					a.free() // handed over as ctx ended: on to the next
				}
				return ctx.Err()
			}
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.done { // the request ended while away
			a.free()
			return nil
		}
		s.held, s.since = true, time.Now()
		a.inFlight.Inc()
		return nil
	}
}

// enter takes a free slot (nil), or else puts the request at the end of q and returns its place
// and how many are served before it: those coming back, and for a customer the customers before
// it (a request in line is not refused for its place, so its count is of no use).
func (a *admission) enter(q *list.List) (*waiter, int) {
	a.lineMu.Lock()
	defer a.lineMu.Unlock()
	return a.enterLocked(q)
}

func (a *admission) enterLocked(q *list.List) (*waiter, int) {
	limit := a.limit
	if q == &a.line {
		limit -= a.reserved
	}
	if a.busy < limit {
		a.busy++
		return nil, 0
	}
	ahead := a.back.Len()
	if q == &a.cust {
		ahead += a.cust.Len()
	}
	w := &waiter{ready: make(chan struct{}), q: q, since: a.now()}
	w.e = q.PushBack(w)
	a.waiting.Inc()
	return w, ahead
}

// enterCustomer is enter for a request that brings new work: into the customers' line, ahead of
// the machines', unless no slot is free and the machines' line stands: then ok is false and the
// request is to be refused at once.
func (a *admission) enterCustomer() (w *waiter, ahead int, ok bool) {
	a.lineMu.Lock()
	defer a.lineMu.Unlock()
	if a.standingLocked() { // then no slot is free but the reserved
		return nil, 0, false
	}
	w, ahead = a.enterLocked(&a.cust)
	return w, ahead, true
}

// standingLocked reports whether the machines' line stands: for standingAfter, every request
// admitted from it had waited longer than a customer may, and it was never empty. The caller
// holds lineMu.
func (a *admission) standingLocked() bool {
	return a.line.Len() > 0 && !a.aboveSince.IsZero() && a.now().Sub(a.aboveSince) >= standingAfter
}

// leave takes w out of its line, unless a slot was handed to it meanwhile: then it reports true,
// and w holds the slot.
func (a *admission) leave(w *waiter) bool {
	a.lineMu.Lock()
	defer a.lineMu.Unlock()
	if w.granted {
		return true
	}
	w.q.Remove(w.e)
	a.waiting.Dec()
	if a.line.Len() == 0 {
		a.aboveSince = time.Time{}
	}
	return false
}

// free gives a slot back: to the first request coming back, else to the first customer, else to
// the first in line unless the slot is one of the reserved, else to whoever comes next.
func (a *admission) free() {
	a.lineMu.Lock()
	defer a.lineMu.Unlock()
	for _, q := range []*list.List{&a.back, &a.cust, &a.line} {
		if q == &a.line && a.busy-1 >= a.limit-a.reserved {
			break // it stays free for a customer
		}
		if e := q.Front(); e != nil {
			w := q.Remove(e).(*waiter)
			w.granted = true
			close(w.ready)
			a.waiting.Dec()
			if q == &a.line {
				a.admittedFromLineLocked(w)
			}
			return
		}
	}
	a.busy--
}

// admittedFromLineLocked folds the wait of w, just admitted from the machines' line, into
// whether that line stands (standingLocked). The caller holds lineMu.
func (a *admission) admittedFromLineLocked(w *waiter) {
	switch now := a.now(); {
	case a.line.Len() == 0 || now.Sub(w.since) <= a.waitCustomer:
		a.aboveSince = time.Time{}
	case a.aboveSince.IsZero():
		a.aboveSince = now
	}
}

// waitForSlot waits up to wait for the slot w waits in line for: nil when it has one, else the
// refusal. A customer (wait is waitCustomer) with ahead before it is refused at once when it
// cannot expect a slot in time.
func (a *admission) waitForSlot(c echo.Context, w *waiter, ahead int, wait time.Duration) error {
	if w.q == &a.cust && a.expectedWait(ahead) > wait {
		if a.leave(w) {
			return nil
		}
		return a.refuse(c, "the requests ahead of it cannot be through in the time a new one may wait")
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-w.ready:
		return nil
	case <-timer.C:
		if a.leave(w) {
			return nil
		}
		return a.refuse(c, "no slot came free in the time it may wait")
	case <-c.Request().Context().Done():
		if a.leave(w) {
			a.free()
		}
		return c.Request().Context().Err()
	}
}

// expectedWait is about how long a request with ahead requests before it in line waits for a
// slot: slots free every hold / MaxInFlight on average, and the line is first come first served.
func (a *admission) expectedWait(ahead int) time.Duration {
	return time.Duration(a.hold.Load()) / time.Duration(a.limit) * time.Duration(ahead+1)
}

// held folds how long an admitted request held its slot into the moving average (weight 1/8).
func (a *admission) held(d time.Duration) {
	for {
		old := a.hold.Load()
		if a.hold.CompareAndSwap(old, old+(int64(d)-old)/8) {
			return
		}
	}
}

// refuse answers a request that found no slot, for the reason why (logged).
func (a *admission) refuse(c echo.Context, why string) error {
	a.refused.Inc()
	now := time.Now()
	a.mu.Lock()
	a.refusedSince++
	a.lastRefusal = now
	if !a.shedding.Load() || now.Sub(a.lastLog) >= shedLogEvery {
		a.log.Warn("shedding load: requests refused with 503, the process working on its limit of requests at once",
			zap.Int("max_in_flight", a.limit), zap.Duration("admission_wait", a.wait), zap.Duration("admission_wait_customer", a.waitCustomer),
			zap.Int64("refused", a.refusedSince), zap.String("path", c.Path()), zap.String("why", why),
			zap.String("slots_held_by", a.holders()))
		a.refusedSince, a.lastLog = 0, now
		a.shedding.Store(true)
	}
	a.mu.Unlock()
	c.Response().Header().Set("Retry-After", strconv.Itoa(int(AdmissionRetryAfter/time.Second)))
	return NewProblem(http.StatusServiceUnavailable, "the service is working on as many requests as it can; retry after "+
		strconv.Itoa(int(AdmissionRetryAfter/time.Second))+" s")
}

// admitted notes an admitted request: one that comes shedLogEvery after the last refusal ends a
// run of them, logged with how many there were since the last line.
func (a *admission) admitted() {
	if !a.shedding.Load() {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.shedding.Load() || time.Since(a.lastRefusal) < shedLogEvery {
		return
	}
	a.log.Info("stopped shedding load", zap.Int64("refused", a.refusedSince))
	a.refusedSince = 0
	a.shedding.Store(false)
}

// ShedFirst marks the routes (echo paths, as registered) that bring new work, such as orders'
// POST /v1/orders: past the limit they wait AdmissionWaitCustomer at most, not AdmissionWait, so
// that past capacity new work is what is refused while the work already accepted, and the
// customers' requests about it, are finished (see above). Call it before the server serves.
func (s *Server) ShedFirst(paths ...string) {
	if s.admission == nil {
		return
	}
	if s.admission.shedFirst == nil {
		s.admission.shedFirst = map[string]bool{}
	}
	for _, p := range paths {
		s.admission.shedFirst[p] = true
	}
	if s.admission.limit > 1 {
		s.admission.reserved = 1
	}
}
