package platform_test

import (
	"bufio"
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/pkg/platform/platformtest"
)

// metric reads the value of a metric of the test server's service from its /metrics.
func metric(t *testing.T, ts *testServer, name string) float64 {
	t.Helper()
	r := get(t, ts.url+platform.PathMetrics, nil)
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+`{service="test"} `); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return f
		}
	}
	t.Fatalf("no metric %s in %s", name, r.body)
	return 0
}

// blockingServer serves /work and /order (marked ShedFirst: new work), whose handler holds its slot
// until the test releases it, with at most limit requests in flight, waiting up to wait for a
// slot (/order: waitCustomer).
func blockingServer(t *testing.T, limit int, wait, waitCustomer time.Duration) (*testServer, chan struct{}, chan struct{}) {
	ts, entered, release, _ := awayServer(t, limit, wait, waitCustomer)
	return ts, entered, release
}

// awayServer is blockingServer with one more route, /away, which enters (entered), waits outside
// the process (platform.Away) until the test sends it an answer on the channel returned last,
// comes back, and then works like /work except that it tells it came back on that channel
// instead of on entered.
func awayServer(t *testing.T, limit int, wait, waitCustomer time.Duration) (*testServer, chan struct{}, chan struct{}, chan struct{}) {
	entered, release, answer := make(chan struct{}, 8), make(chan struct{}), make(chan struct{})
	ts := startServer(t, platform.ServerOptions{MaxInFlight: limit, AdmissionWait: wait, AdmissionWaitCustomer: waitCustomer}, func(e *echo.Echo) {
		work := func(c echo.Context) error {
			entered <- struct{}{}
			<-release
			return c.NoContent(http.StatusNoContent)
		}
		e.GET("/work", work)
		e.GET("/order", work)
		// /yield does its work, gives its slot back, then waits like /work (for others, say).
		e.GET("/yield", func(c echo.Context) error {
			platform.YieldSlot(c.Request().Context())
			platform.YieldSlot(c.Request().Context()) // a second yield gives nothing back
			return work(c)
		})
		e.GET("/away", func(c echo.Context) error {
			back := platform.Away(c.Request().Context())
			entered <- struct{}{}
			<-answer
			if err := back(); err != nil {
				return err
			}
			answer <- struct{}{}
			<-release
			return c.NoContent(http.StatusNoContent)
		})
	})
	ts.srv.ShedFirst("/order")
	return ts, entered, release, answer
}

// admitTheWaiter waits until a second request waits for the slot of the one in flight, lets the
// first end so that the second takes its slot, lets that end too, and checks both answered 204.
func admitTheWaiter(t *testing.T, ts *testServer, entered, release chan struct{}, results chan response) {
	t.Helper()
	platformtest.Eventually(t, "a request waits for a slot", func() bool {
		return metric(t, ts, "spanmart_admission_waiting") == 1
	})
	release <- struct{}{} // the first ends; the waiter takes its slot
	<-entered
	close(release)
	for range 2 {
		if r := <-results; r.status != http.StatusNoContent {
			t.Errorf("status %d, want 204 for the request in flight and the one that waited", r.status)
		}
	}
}

// inLine sends a machine's request (/work) that takes the one slot of a blockingServer, then n
// more, and waits until those n wait in line; each answer goes to results.
func inLine(t *testing.T, ts *testServer, entered chan struct{}, results chan response, n int) {
	t.Helper()
	go func() { results <- get(t, ts.url+"/work", nil) }()
	<-entered
	for range n {
		go func() { results <- get(t, ts.url+"/work", nil) }()
	}
	platformtest.Eventually(t, strconv.Itoa(n)+" requests to wait in line", func() bool {
		return metric(t, ts, "spanmart_admission_waiting") == float64(n)
	})
}

// refusedAtOnce sends a customer's request (/order), what, and checks that it is refused, 503 with
// Retry-After 1, without waiting: its wait on the server is an hour or more.
func refusedAtOnce(t *testing.T, ts *testServer, what string) {
	t.Helper()
	refused := make(chan response, 1)
	go func() { refused <- get(t, ts.url+"/order", nil) }()
	select {
	case r := <-refused:
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") != "1" {
			t.Errorf("%s: %d, Retry-After %q; want 503, Retry-After 1", what, r.status, r.header.Get("Retry-After"))
		}
	case <-time.After(platformtest.Timeout):
		t.Fatalf("%s: no answer in %s, want a refusal at once", what, platformtest.Timeout)
	}
}

// all204 takes n answers from results and checks that each is 204.
func all204(t *testing.T, results chan response, n int) {
	t.Helper()
	for range n {
		if r := <-results; r.status != http.StatusNoContent {
			t.Errorf("status %d, want 204", r.status)
		}
	}
}

// Past MaxInFlight a request is refused once AdmissionWait has passed without a slot: 503, a
// problem and Retry-After, logged once as shedding; the operational endpoints still answer; once a
// slot is free, requests are admitted again.
func TestAdmissionRefusesPastTheLimit(t *testing.T) {
	ts, entered, release := blockingServer(t, 1, 20*time.Millisecond, time.Millisecond)
	first := make(chan response, 1)
	go func() { first <- get(t, ts.url+"/work", nil) }()
	<-entered

	r := get(t, ts.url+"/work", nil)
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") != "1" ||
		r.header.Get("Content-Type") != platform.ContentTypeProblem || !strings.Contains(string(r.body), "retry after 1 s") {
		t.Errorf("request past the limit: %d, Retry-After %q, %s; want 503, Retry-After 1 and a problem", r.status, r.header.Get("Retry-After"), r.body)
	}
	if r := get(t, ts.url+platform.PathHealthz, nil); r.status != http.StatusOK {
		t.Errorf("/healthz while the server is full: %d, want 200", r.status)
	}
	if got := metric(t, ts, "spanmart_admission_refused_total"); got != 1 {
		t.Errorf("refused: %v, want 1", got)
	}
	if got := metric(t, ts, "spanmart_admission_in_flight"); got != 1 {
		t.Errorf("in flight: %v, want 1", got)
	}
	line := ts.logs.Find(t, "shedding load: requests refused with 503, the process working on its limit of requests at once")
	if line["severity"] != "WARNING" || line["max_in_flight"] != float64(1) {
		t.Errorf("shedding log line: %v", line)
	}
	if by, _ := line["slots_held_by"].(string); !strings.HasPrefix(by, "GET /work: 1, the longest ") {
		t.Errorf("shedding log line's slots_held_by: %q, want the one /work request in flight", by)
	}

	close(release)
	if r := <-first; r.status != http.StatusNoContent {
		t.Errorf("the request in flight: %d, want 204", r.status)
	}
	if r := get(t, ts.url+"/work", nil); r.status != http.StatusNoContent {
		t.Errorf("a request once the slot is free: %d, want 204", r.status)
	}
}

// A request past the limit waits in line for a slot, and is admitted when one frees within
// AdmissionWait.
func TestAdmissionWaitsForASlot(t *testing.T) {
	ts, entered, release := blockingServer(t, 1, time.Minute, time.Minute)
	results := make(chan response, 2)
	go func() { results <- get(t, ts.url+"/work", nil) }()
	<-entered
	go func() { results <- get(t, ts.url+"/work", nil) }()
	admitTheWaiter(t, ts, entered, release, results)
	if got := metric(t, ts, "spanmart_admission_refused_total"); got != 0 {
		t.Errorf("refused: %v, want 0", got)
	}
}

// A request that yields its slot (platform.YieldSlot) while it waits lets the next one in: with one
// slot, a second request is admitted while the first still waits, and the first's end gives back
// nothing more.
func TestAdmissionYieldedSlotAdmitsTheNext(t *testing.T) {
	ts, entered, release := blockingServer(t, 1, time.Minute, time.Minute)
	results := make(chan response, 3)
	go func() { results <- get(t, ts.url+"/yield", nil) }()
	<-entered
	if got := metric(t, ts, "spanmart_admission_in_flight"); got != 0 {
		t.Errorf("in flight after the yield: %v, want 0", got)
	}
	go func() { results <- get(t, ts.url+"/work", nil) }()
	<-entered // admitted while the first still waits
	go func() { results <- get(t, ts.url+"/work", nil) }()
	platformtest.Eventually(t, "a third request waits for the one slot", func() bool {
		return metric(t, ts, "spanmart_admission_waiting") == 1
	})
	release <- struct{}{}
	release <- struct{}{}
	<-entered
	close(release)
	all204(t, results, 3)
	if got := metric(t, ts, "spanmart_admission_in_flight"); got != 0 {
		t.Errorf("in flight at the end: %v, want 0", got)
	}
}

// A request away from its work (platform.Away) holds no slot, and coming back it goes before the
// requests waiting to be admitted: with one slot, a request is admitted while the first is away, a
// third waits in line, and when the second ends the slot goes to the first, back with its answer,
// while the third still waits.
func TestAdmissionAwayComesBackBeforeTheLine(t *testing.T) {
	ts, entered, release, answer := awayServer(t, 1, time.Minute, time.Minute)
	results := make(chan response, 3)
	go func() { results <- get(t, ts.url+"/away", nil) }()
	<-entered // away: its slot is free
	if got := metric(t, ts, "spanmart_admission_in_flight"); got != 0 {
		t.Errorf("in flight while the only request is away: %v, want 0", got)
	}
	go func() { results <- get(t, ts.url+"/work", nil) }()
	<-entered // admitted in the slot the first gave back
	go func() { results <- get(t, ts.url+"/work", nil) }()
	platformtest.Eventually(t, "a third request waits in line", func() bool {
		return metric(t, ts, "spanmart_admission_waiting") == 1
	})
	answer <- struct{}{} // the first comes back, and waits for the slot too
	platformtest.Eventually(t, "the first waits to come back", func() bool {
		return metric(t, ts, "spanmart_admission_waiting") == 2
	})
	release <- struct{}{} // the second ends
	select {
	case <-answer: // the first came back
	case <-entered:
		t.Fatal("the freed slot went to the request waiting to be admitted, not to the one coming back")
	case <-time.After(platformtest.Timeout):
		t.Fatalf("no request took the freed slot in %s", platformtest.Timeout)
	}
	if got := metric(t, ts, "spanmart_admission_waiting"); got != 1 {
		t.Errorf("waiting once the slot was handed on: %v, want 1 (the third)", got)
	}
	release <- struct{}{} // the first ends; the third takes its slot
	<-entered
	close(release)
	all204(t, results, 3)
	if got := metric(t, ts, "spanmart_admission_in_flight"); got != 0 {
		t.Errorf("in flight at the end: %v, want 0", got)
	}
}

// MaxInFlight -1 bounds nothing.
func TestAdmissionUnbounded(t *testing.T) {
	ts, entered, release := blockingServer(t, -1, time.Millisecond, time.Millisecond)
	results := make(chan response, 3)
	for range 3 {
		go func() { results <- get(t, ts.url+"/work", nil) }()
	}
	for range 3 {
		<-entered // all three in flight at once
	}
	close(release)
	all204(t, results, 3)
}

// A request that brings new work (a ShedFirst route) is refused once its short wait has passed,
// while a machine's request (a delivery, a webhook) waits in line for the slot.
func TestAdmissionShedsCustomersFastAndPacesMachines(t *testing.T) {
	ts, entered, release := blockingServer(t, 1, time.Minute, time.Millisecond)
	results := make(chan response, 2)
	go func() { results <- get(t, ts.url+"/work", nil) }()
	<-entered
	if r := get(t, ts.url+"/order", nil); r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") != "1" {
		t.Errorf("a customer's request past the limit: %d, Retry-After %q; want 503 at once, Retry-After 1", r.status, r.header.Get("Retry-After"))
	}
	go func() { results <- get(t, ts.url+"/work", nil) }()
	admitTheWaiter(t, ts, entered, release, results)
	if got := metric(t, ts, "spanmart_admission_refused_total"); got != 1 {
		t.Errorf("refused: %v, want 1 (the customer's request)", got)
	}
}

// A customer's request that cannot expect a slot within its wait is refused at once rather than
// after it: here the wait is an hour and requests hold their slot two hours on average, so the
// answer comes while the request in flight still holds the only slot. One that can expect a slot
// in time (requests held theirs a millisecond) waits for it.
func TestAdmissionRefusesACustomerWhoseWaitWouldRunOut(t *testing.T) {
	ts, entered, release := blockingServer(t, 1, time.Hour, time.Hour)
	results := make(chan response, 2)
	go func() { results <- get(t, ts.url+"/work", nil) }()
	<-entered
	platform.SetAdmissionHold(ts.srv, 2*time.Hour)
	refusedAtOnce(t, ts, "a customer's request that cannot get a slot within its wait")
	platform.SetAdmissionHold(ts.srv, time.Millisecond)
	go func() { results <- get(t, ts.url+"/order", nil) }()
	admitTheWaiter(t, ts, entered, release, results)
	if got := metric(t, ts, "spanmart_admission_refused_total"); got != 1 {
		t.Errorf("refused: %v, want 1 (the first customer's request)", got)
	}
}

// Deliveries come in bursts, and behind each a process that keeps up has a short line: a
// customer's request (a ShedFirst route) waits in a line of its own, ahead of the machines'
// requests, and takes the first slot that frees.
func TestAdmissionCustomersGoBeforeABurst(t *testing.T) {
	ts, entered, release := blockingServer(t, 1, time.Minute, time.Minute)
	results, order := make(chan response, 4), make(chan response, 1)
	inLine(t, ts, entered, results, 3)
	go func() { order <- get(t, ts.url+"/order", nil) }()
	platformtest.Eventually(t, "the customer waits too", func() bool {
		return metric(t, ts, "spanmart_admission_waiting") == 4
	})
	release <- struct{}{} // the first ends, and its slot goes to the customer
	<-entered
	release <- struct{}{} // taken by the one request in flight
	select {
	case r := <-order:
		if r.status != http.StatusNoContent {
			t.Errorf("the customer's request: %d, want 204", r.status)
		}
	case <-time.After(platformtest.Timeout):
		t.Fatalf("the customer's request did not end in %s: the freed slot went to a machine's request", platformtest.Timeout)
	}
	close(release)
	all204(t, results, 4)
	if got := metric(t, ts, "spanmart_admission_refused_total"); got != 0 {
		t.Errorf("refused: %v, want 0", got)
	}
}

// Past capacity the machines' line stands: every request admitted from it for 100 ms had waited
// longer than a customer may. A customer's request is then refused at once, however long it
// could wait, so that the work already accepted is finished first; once the line has drained,
// customers wait for a slot again.
func TestAdmissionShedsCustomersWhileTheLineStands(t *testing.T) {
	ts, entered, release := blockingServer(t, 1, time.Minute, time.Hour)
	advance := fakeClock(ts)
	results, order := make(chan response, 3), make(chan response, 1)
	inLine(t, ts, entered, results, 2)
	advance(2 * time.Hour) // longer than a customer may wait (an hour)
	release <- struct{}{}  // the first ends; the second, admitted, waited too long
	<-entered
	advance(99 * time.Millisecond)
	go func() { order <- get(t, ts.url+"/order", nil) }()
	platformtest.Eventually(t, "a customer waits while the line has not stood for 100 ms", func() bool {
		return metric(t, ts, "spanmart_admission_waiting") == 2
	})
	advance(time.Millisecond)
	refusedAtOnce(t, ts, "a customer's request while the line stands")
	line := ts.logs.Find(t, "shedding load: requests refused with 503, the process working on its limit of requests at once")
	if line["why"] != "the requests already accepted wait longer than a new one may" {
		t.Errorf("shedding log line: %v, want why the requests already accepted wait longer", line)
	}
	// The customer who came before the line stood goes first, then the machine's request; with
	// the line empty, a new customer waits for a slot again.
	release <- struct{}{}
	<-entered
	release <- struct{}{}
	if r := <-order; r.status != http.StatusNoContent {
		t.Errorf("the customer's request that came before the line stood: %d, want 204", r.status)
	}
	<-entered // the machine's request, the last in line
	go func() { order <- get(t, ts.url+"/order", nil) }()
	platformtest.Eventually(t, "a customer waits once the line is empty", func() bool {
		return metric(t, ts, "spanmart_admission_waiting") == 1
	})
	close(release)
	if r := <-order; r.status != http.StatusNoContent {
		t.Errorf("a customer's request once the line drained: %d, want 204", r.status)
	}
	all204(t, results, 3)
	if got := metric(t, ts, "spanmart_admission_refused_total"); got != 1 {
		t.Errorf("refused: %v, want 1", got)
	}
}

// With a route that brings new work, the machines' line leaves one slot free for customers: a
// machine's request waits while taking the last free slot would leave none, a customer's takes it
// at once, and a slot a request gives back stays free for the next customer while the machines
// would hold all but none.
func TestAdmissionKeepsASlotForCustomers(t *testing.T) {
	ts, entered, release := blockingServer(t, 2, time.Minute, time.Minute)
	results := make(chan response, 4)
	inLine(t, ts, entered, results, 1) // one machine's request in flight, one waits: a slot is free
	go func() { results <- get(t, ts.url+"/order", nil) }()
	<-entered // the customer's, at once
	release <- struct{}{}
	if r := <-results; r.status != http.StatusNoContent {
		t.Fatalf("the request that ended: %d, want 204", r.status)
	}
	if got := metric(t, ts, "spanmart_admission_waiting"); got != 1 {
		t.Errorf("waiting after a request gave its slot back: %v, want 1 (the slot stays free for a customer)", got)
	}
	go func() { results <- get(t, ts.url+"/order", nil) }()
	<-entered // the next customer's, at once
	close(release)
	all204(t, results, 3) // the other two in flight, then the machine's request that waited
	if got := metric(t, ts, "spanmart_admission_refused_total"); got != 0 {
		t.Errorf("refused: %v, want 0", got)
	}
}

// The slot kept for customers is no way past the machines' line once it stands: past capacity a
// customer's request is refused at once although that slot is free.
func TestAdmissionShedsCustomersWhileTheLineStandsDespiteTheFreeSlot(t *testing.T) {
	ts, entered, release := blockingServer(t, 2, time.Minute, time.Hour)
	advance := fakeClock(ts)
	results := make(chan response, 3)
	inLine(t, ts, entered, results, 2)
	advance(2 * time.Hour) // longer than a customer may wait (an hour)
	release <- struct{}{}  // the first ends; the second, admitted, waited too long
	<-entered
	advance(100 * time.Millisecond)
	refusedAtOnce(t, ts, "a customer's request while the line stands, the customers' slot free")
	close(release)
	all204(t, results, 3)
}

// fakeClock sets ts's admission clock to one that stands still until the test moves it on with
// the function returned.
func fakeClock(ts *testServer) (advance func(time.Duration)) {
	var mu sync.Mutex
	now := time.Now()
	platform.SetAdmissionClock(ts.srv, func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	})
	return func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(d)
	}
}
