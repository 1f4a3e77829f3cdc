// Package soak is Spanmart's fault-injecting soak: mixed load through the whole order saga while
// a seeded schedule of faults breaks the system a few seconds at a time, then, once the system
// has drained, an invariant checker that reads every database, the payment sandbox and the mail
// server and says whether the promise held: every order ended, consistently across the four
// databases; no event lost; no side effect twice.
//
// It runs on a stack of its own (e2e/harness, started with StackOptions: the Tasks emulator with
// its data dir, so that stopping it keeps the tasks; fulfillment's simulated carrier, so that
// orders ship by themselves). Run drives it:
//
//   - the load (load.go): orders at a fixed rate, dealt from a seeded deck of customer kinds:
//     every payment method, declined cards, 3-D Secure, wallets with and without the money, konbini
//     and bank transfer slips paid at the store or left to expire (the sandbox's clock jumps),
//     cancels before payment, after confirmation and after shipping, out-of-stock orders, and
//     shipments the carrier refuses. Each order's customer knows how the order must end.
//   - the faults (faults.go): kill -9 and restart the relay and each consumer, stop and start the
//     Cloud Tasks emulator, pause and resume a queue (the official Cloud Tasks client), and make
//     the sandbox duplicate, reorder, delay or drop webhooks or answer 500s. Each fault lasts
//     seconds; some overlap. Every start and end is logged with its time.
//   - the drain (drain.go): the faults cleared, a bounded wait on conditions (every order
//     terminal, every outbox published, every queue empty, every e-mail sent, the delivery
//     ledger settled) that reports what did not drain.
//   - the checks (check.go): each invariant a named check with a count and, on failure, the first
//     offending ids.
//
// The command e2e/cmd/soak (make soak) runs it for 10 minutes and draws the chart (chart.go); the
// e2e package's TestSoak runs it for about a minute inside go test.
package soak

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/spanmart/spanmart/e2e/harness"
	"github.com/spanmart/spanmart/emulator/paysim"
	"github.com/spanmart/spanmart/internal/topology"
)

// Config is one soak run. The zero value of a field means its default.
type Config struct {
	// Duration is how long orders are placed (default 10 minutes). Faults start within it.
	Duration time.Duration
	// Rate is orders per second (default 5: on two cores every order runs the whole saga, about
	// a dozen commits and a dozen deliveries).
	Rate float64
	// Seed seeds the order mix and the fault schedule (default 1).
	Seed uint64
	// FaultGap bounds the time between two faults' starts (default 3 to 12 seconds). NoFaults
	// runs the load alone.
	FaultGap [2]time.Duration
	NoFaults bool
	// ClockEvery is how often the sandbox's clock jumps 3 days and an hour during the load, which
	// expires the konbini slips nobody paid (default a quarter of Duration, at least 20 s). An
	// authorization lapses after 7 days, so an order must stay unshipped across three jumps to
	// see one; after the load a last jump of 7 days expires the bank transfer slips too.
	ClockEvery time.Duration
	// ActWait bounds how long a customer waits for the order to get somewhere (default 3 minutes).
	ActWait time.Duration
	// DrainTimeout bounds the drain (default 5 minutes).
	DrainTimeout time.Duration
	// Logf receives the progress lines and the fault log (default: discarded).
	Logf func(format string, args ...any)
}

func (c *Config) defaults() {
	if c.Duration <= 0 {
		c.Duration = 10 * time.Minute
	}
	if c.Rate <= 0 {
		c.Rate = 5
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.FaultGap[0] <= 0 {
		c.FaultGap = [2]time.Duration{3 * time.Second, 12 * time.Second}
	}
	if c.FaultGap[1] < c.FaultGap[0] {
		c.FaultGap[1] = c.FaultGap[0]
	}
	if c.ClockEvery <= 0 {
		c.ClockEvery = max(c.Duration/4, 20*time.Second)
	}
	if c.ActWait <= 0 {
		c.ActWait = 3 * time.Minute
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 5 * time.Minute
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
}

// The sandbox's clock jumps: during the load just past a konbini slip's 3 days, at the end past a
// bank transfer slip's 7.
const (
	clockJump      = 3*24*time.Hour + time.Hour
	finalClockJump = 7*24*time.Hour + time.Hour
)

// StackOptions are the harness options a soak needs. The Tasks emulator keeps its data dir (a
// stopped emulator comes back with its queues and tasks, as Cloud Tasks would); the carrier ships
// confirmed orders after 4 s by itself and refuses VASE; the timings that production sets in
// minutes are scaled down like the queues' back-off (harness.FastQueue), so a fault of seconds is
// what a fault of minutes is in production: the gateway resumes an unfinished provider call after
// 2 s and asks the provider about a payment whose webhook has not come after 5 s, its circuit
// breaker cools down in 1 s, notifications resumes a send after 2 s, orders reconciles an order a
// second after it settles, and the relay's delivery ledger audits every 5 s what was published 5 s
// before.
func StackOptions() harness.Options {
	return harness.Options{
		Seed:          catalog,
		TasksInMemory: false,
		// Cloud Scheduler's jobs (the sweeps, orders' audit), scaled down like the rest.
		SchedulerEvery: 3 * time.Second,
		Env: map[string][]string{
			topology.Fulfillment:   {"CARRIER_SIMULATE_AFTER=4s", "CARRIER_SIMULATE_FAIL_SKUS=VASE"},
			topology.Gateway:       {"PAYMENTS_RESUME_AFTER=2s", "PAYMENTS_RECONCILE_AFTER=5s", "PROVIDER_BREAKER_COOLDOWN=1s"},
			topology.Notifications: {"NOTIFICATIONS_RESUME_AFTER=2s"},
			topology.Orders:        {"RECONCILE_SETTLE=1s"},
			topology.Relay:         {"RELAY_LEDGER_INTERVAL=5s", "RELAY_LEDGER_MIN_AGE=5s"},
		},
		Paysim: func(o *paysim.Options) {
			o.WalletBalances = map[string]int64{richWallet: richBalance, poorWallet: poorBalance}
			// KOMOJU pays a paid slip's refund out a day or two later; scaled down like the rest,
			// so that a cancelled paid slip waits for its money seconds (REFUND_PENDING, the order
			// CANCELLING) and drains without a clock jump.
			o.KomojuRefundPayout = 5 * time.Second
		},
	}
}

// Result is what a soak did and found.
type Result struct {
	Config Config
	// Start is when the load began; LoadEnd when it stopped; Cleared when every fault was over;
	// Drained when the drain ended; End when the checks had run.
	Start, LoadEnd, Cleared, Drained, End time.Time
	Orders                                []*Order
	Faults                                []*Fault
	Samples                               []Sample
	ClockJumps                            []time.Time
	Drain                                 DrainReport
	DeadLetters                           []DeadLetter
	Counts                                Counts
	Checks                                []*Check
	// Err is a failure of the soak itself (the stack could not be read); the checks then did not
	// all run.
	Err error
}

// Counts are the summary's totals.
type Counts struct {
	Published   int64 // outbox rows published
	Deliveries  int64 // (event, subscriber) pairs the relay created tasks for
	Applied     int64 // ProcessedEvents rows
	Answers     map[string]float64
	LostCounts  int   // consumer runs whose counters could not be read before they were killed
	Failures    int64 // failed answers the consumers recorded (DeliveryFailures)
	Deferrals   int64 // early answers (409) the consumers recorded
	Sweeps      int64 // runs of Cloud Scheduler's jobs (the local scheduler's)
	SweepErrors int64 // of them, runs that failed (the service was down: a fault)
	Resends     int   // e-mails sent again with the same Message-ID (a crash between send and mark)
}

// Redeliveries are the deliveries answered beyond the first of each pair: duplicates, early
// answers, transient failures.
func (c Counts) Redeliveries() int64 {
	var n float64
	for outcome, v := range c.Answers {
		if outcome != "applied" && outcome != "dead_lettered" {
			n += v
		}
	}
	return int64(n)
}

// Passed reports whether every invariant held.
func (r *Result) Passed() bool {
	if r.Err != nil || len(r.Checks) == 0 {
		return false
	}
	for _, c := range r.Checks {
		if !c.Passed() {
			return false
		}
	}
	return true
}

// Run runs a soak on s (started with StackOptions) and checks it. The error is the soak's own
// failure to run; the invariants are in the Result (Passed).
func Run(ctx context.Context, s *harness.Stack, cfg Config) *Result {
	cfg.defaults()
	res := &Result{Config: cfg}
	logf := cfg.Logf
	// Operator tokens come from the Tasks emulator's metadata endpoint: get them while it is up,
	// so that the drain and the checks can read the services even after a tasks-down fault.
	for _, p := range killable { // the relay and every consumer
		if _, err := s.OperatorToken(ctx, p); err != nil {
			res.Err = fmt.Errorf("operator token for %s: %w", p, err)
			return res
		}
	}

	res.Start = time.Now()
	l := newLoad(s, cfg, res.Start, logf)
	counts := newConsumerCounts()
	in := &injector{s: s, start: res.Start, logf: logf, metrics: counts}
	sm := &sampler{s: s, start: res.Start, placed: &l.placed}

	background, stopBackground := context.WithCancel(ctx)
	var bg sync.WaitGroup
	for _, f := range []func(context.Context){sm.run} {
		bg.Add(1)
		go func() { defer bg.Done(); f(background) }()
	}
	defer func() { stopBackground(); bg.Wait() }()

	loadCtx, stopLoad := context.WithTimeout(ctx, cfg.Duration)
	defer stopLoad()
	plan := []*Fault(nil)
	if !cfg.NoFaults {
		plan = planFaults(cfg.Seed, cfg.Duration, cfg.FaultGap[0], cfg.FaultGap[1])
	}
	logf("[%s] soak: %s of load at %.1f orders/s, %d faults planned (seed %d); the sandbox's clock jumps %s every %s",
		stamp(0), cfg.Duration, cfg.Rate, len(plan), cfg.Seed, clockJump, cfg.ClockEvery)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); l.run(loadCtx, ctx) }()
	go func() { defer wg.Done(); in.run(loadCtx, plan) }()
	go func() { defer wg.Done(); l.clock(loadCtx) }()
	wg.Wait()
	res.LoadEnd = time.Now()
	logf("[%s] soak: load over, %d orders placed, %d shed; waiting for the faults under way", in.stamp(res.LoadEnd), l.placed.Load(), l.shed.Load())
	in.wait()
	if err := clearAll(ctx, s); err != nil {
		logf("[%s] soak: %v", in.stamp(time.Now()), err)
	}
	res.Cleared = time.Now()
	logf("[%s] soak: every fault cleared; waiting for the customers' journeys", in.stamp(res.Cleared))
	journeysDone := make(chan struct{})
	go func() { l.journeys.Wait(); close(journeysDone) }()
	select {
	case <-journeysDone:
	case <-time.After(cfg.ActWait + time.Minute):
		logf("[%s] soak: some journeys are still waiting; draining anyway", in.stamp(time.Now()))
	case <-ctx.Done():
	}

	res.Drain, res.DeadLetters = drain(ctx, s, l, in, cfg, logf)
	res.Drained = time.Now()
	res.ClockJumps = l.jumps()
	res.Faults = in.Faults()
	res.Orders = l.Orders()
	stopBackground()
	bg.Wait()
	res.Samples = sm.Samples()
	for _, r := range s.Scheduler.Runs() {
		res.Counts.Sweeps += r.OK + r.Failed
		res.Counts.SweepErrors += r.Failed
	}
	res.Counts.Answers, res.Counts.LostCounts = counts.total(ctx, s)

	logf("[%s] soak: checking the invariants", in.stamp(time.Now()))
	w, err := readWorld(ctx, s)
	if err != nil {
		res.Err = err
		return res
	}
	res.Checks = check(ctx, s, w, res)
	res.End = time.Now()
	return res
}

// clock makes the sandbox's clock jump every ClockEvery until ctx is done: the konbini slips
// nobody paid expire (an unpaid bank transfer slip lasts 7 days: the drain's last jump).
func (l *load) clock(ctx context.Context) {
	t := time.NewTicker(l.cfg.ClockEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		l.jump(clockJump)
	}
}

func (l *load) jump(d time.Duration) {
	l.clockMu.Lock()
	defer l.clockMu.Unlock()
	now, err := l.s.Paysim.AdvanceClock(d)
	at := time.Now()
	if err != nil {
		l.logf("[%s] clock: the sandbox's clock did not jump: %v", stamp(at.Sub(l.start)), err)
		return
	}
	l.advances = append(l.advances, at)
	l.logf("[%s] clock: the sandbox's clock jumps %s to %s", stamp(at.Sub(l.start)), d, now.UTC().Format(time.DateTime))
}

func (l *load) jumps() []time.Time {
	l.clockMu.RLock()
	defer l.clockMu.RUnlock()
	return append([]time.Time(nil), l.advances...)
}

// faultsByName counts the injected faults by Fault.Name.
func faultsByName(faults []*Fault) map[string]int {
	out := map[string]int{}
	for _, f := range faults {
		out[f.Name()]++
	}
	return out
}

// WriteSummary prints the run's summary: orders by scenario and final state, faults by kind, the
// delivery counts, the drain, dead letters and every check.
func (r *Result) WriteSummary(w io.Writer) {
	fmt.Fprintf(w, "\n== soak summary (seed %d, %s of load at %.1f orders/s)\n", r.Config.Seed, r.Config.Duration, r.Config.Rate)
	if !r.Start.IsZero() && !r.End.IsZero() {
		fmt.Fprintf(w, "took %s: load %s, the last faults cleared %s later, drained in %s\n",
			r.End.Sub(r.Start).Round(time.Second), r.LoadEnd.Sub(r.Start).Round(time.Second),
			r.Cleared.Sub(r.LoadEnd).Round(time.Second), r.Drain.Took.Round(time.Second))
	}

	byScenario := map[string]map[string]int{}
	var states []string
	seen := map[string]bool{}
	for _, o := range r.Orders {
		st := o.Final
		if o.ID == "" {
			st = "not placed"
		}
		if byScenario[o.Scenario] == nil {
			byScenario[o.Scenario] = map[string]int{}
		}
		byScenario[o.Scenario][st]++
		if !seen[st] {
			seen[st] = true
			states = append(states, st)
		}
	}
	sort.Strings(states)
	placed := 0
	for _, o := range r.Orders {
		if o.ID != "" {
			placed++
		}
	}
	fmt.Fprintf(w, "\norders: %d, %d placed (by kind of customer: how they ended)\n", len(r.Orders), placed)
	for _, sc := range scenarios {
		m := byScenario[sc.name]
		if m == nil {
			continue
		}
		total := 0
		line := ""
		for _, st := range states {
			if m[st] > 0 {
				line += fmt.Sprintf(", %d %s", m[st], st)
				total += m[st]
			}
		}
		fmt.Fprintf(w, "  %-26s %4d: %s\n", sc.name, total, line[2:])
	}

	by := faultsByName(r.Faults)
	fmt.Fprintf(w, "\nfaults: %d injected\n", len(r.Faults))
	for _, name := range FaultNames() {
		fmt.Fprintf(w, "  %-26s %4d\n", name, by[name])
	}
	for _, f := range r.Faults {
		if f.Err != "" {
			fmt.Fprintf(w, "  NOT REPAIRED at %s: %s: %s\n", stamp(f.Started.Sub(r.Start)), f, f.Err)
		}
	}
	fmt.Fprintf(w, "  the sandbox's clock jumped %d times\n", len(r.ClockJumps))

	c := r.Counts
	fmt.Fprintf(w, "\nevents: %d published, %d deliveries (event × subscriber), %d applied\n", c.Published, c.Deliveries, c.Applied)
	var answered float64
	var outcomes []string
	for k, v := range c.Answers {
		answered += v
		outcomes = append(outcomes, fmt.Sprintf("%s %.0f", k, v))
	}
	sort.Strings(outcomes)
	fmt.Fprintf(w, "deliveries answered: %.0f (%v); redeliveries %d", answered, outcomes, c.Redeliveries())
	if c.LostCounts > 0 {
		fmt.Fprintf(w, " (at least: the counters of %d killed runs could not be read)", c.LostCounts)
	}
	fmt.Fprintf(w, "\nfailed answers recorded: %d, early answers: %d; scheduled jobs run: %d (%d failed while the service was down); e-mails resent after a crash: %d\n",
		c.Failures, c.Deferrals, c.Sweeps, c.SweepErrors, c.Resends)

	fmt.Fprintf(w, "\ndrain: ")
	if r.Drain.Drained {
		fmt.Fprintf(w, "drained in %s\n", r.Drain.Took.Round(100*time.Millisecond))
	} else {
		fmt.Fprintf(w, "NOT drained within %s:\n", r.Config.DrainTimeout)
	}
	for _, n := range r.Drain.NotDrained {
		fmt.Fprintf(w, "  %s\n", n)
	}
	fmt.Fprintf(w, "dead letters: %d\n", len(r.DeadLetters))
	for _, d := range r.DeadLetters {
		fmt.Fprintf(w, "  %s\n", d)
	}

	fmt.Fprintf(w, "\ninvariants:\n")
	for _, ch := range r.Checks {
		fmt.Fprintf(w, "  %s\n", ch)
	}
	if r.Err != nil {
		fmt.Fprintf(w, "  soak error: %v\n", r.Err)
	}
	verdict := "PASS"
	if !r.Passed() {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "\nsoak %s\n", verdict)
}

// DeadLetter is a dead letter a consumer listed (GET /admin/deadletters) during the drain, and why.
type DeadLetter struct {
	Consumer, EventID, EventType, LastError string
	Attempts                                int64
	DeadAt                                  time.Time
	// Explanation names the fault that explains it ("" = unexplained: a failure); an explained one
	// is replayed, as an operator would.
	Explanation string
	Replayed    string
}

func (d DeadLetter) String() string {
	s := fmt.Sprintf("%s %s %s after %d attempts (%s)", d.Consumer, d.EventType, d.EventID, d.Attempts, d.LastError)
	if d.Explanation == "" {
		return s + ": UNEXPLAINED"
	}
	return s + ": explained by " + d.Explanation + "; " + d.Replayed
}

// adminGet GETs an operator endpoint and decodes a 200 answer.
func adminGet(ctx context.Context, s *harness.Stack, process, path string, v any) error {
	r, err := s.AdminDo(ctx, http.MethodGet, process, path, nil)
	if err != nil {
		return err
	}
	if r.Status != http.StatusOK {
		return fmt.Errorf("GET %s%s: %s", process, path, r)
	}
	return r.JSON(v)
}
