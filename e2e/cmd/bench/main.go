// Command bench measures Spanmart on a stack of its own (e2e/harness: the Spanner and Tasks
// emulators and the payment sandbox in-process, the services and the relay as processes), and
// prints Markdown tables. It prints numbers and asserts nothing; the targets of issues 5 and 11
// are printed beside them.
//
// Mode "rate" (default) places orders through POST /v1/orders at fixed rates, open loop (a ticker
// fires each request on its own goroutine, never waiting for the previous one), paid in turn by
// each of -methods, and follows them through the whole saga (reserve, authorize, confirm, ship by
// fulfillment's simulated carrier, capture) until they end. Per rate it reports orders placed and
// ended, commits and CPU seconds per order and the ceiling they imply, each order's milestones
// (order → AWAITING_PAYMENT, CONFIRMED, SHIPPED, COMPLETED) per method, and every hop of every
// event (producer commit → published, → applied by each subscriber), all from commit timestamps
// in the databases, so one clock. A run of several windows at one rate shows whether a hop grows
// over time. -profile DIR writes CPU profiles of every window.
//
// Mode "drain" stops the relay, appends -events order.created events for fake orders straight
// into the orders outbox (outboxlib.Append, in batches), starts the relay(s) and measures how fast
// they publish the backlog. Mode "scale" does that with each count of relay instances in -scale
// (default 1, 2, 4) on the same sources, and shows how the shard leases spread.
//
// Mode "overload" (issue 26) asks whether the stack degrades gracefully past its capacity: it
// finds the capacity (the highest rate, from -overload-from by -overload-step, whose issue-11 p99
// targets hold with every order accepted and ended; or -capacity), offers 3× that for three
// -overload-window windows back to back, then 0.5× until every order accepted has ended, and
// prints per window offered, accepted, shed and completed orders/s, the POST p99s of accepted
// and of shed orders, commits/s and aborts per commit, and the drain time; -chart draws it.
//
//	go run ./e2e/cmd/bench                                   # 25 and 50 orders/s, 30 s each
//	go run ./e2e/cmd/bench -rates 25,25,25,25 -duration 60s   # flat over time?
//	go run ./e2e/cmd/bench -methods card -rates 50
//	go run ./e2e/cmd/bench -mode drain -events 10000
//	go run ./e2e/cmd/bench -mode scale -scale 1,2,4
//	go run ./e2e/cmd/bench -rates 25,25 -ab HEAD~1          # this tree against its parent, ratios
//	go run ./e2e/cmd/bench -mode overload -chart docs/overload.png
//
// The queues are production's (relay.SubscriberQueue: 500/s, 100 concurrent) unless -queue-rate
// or -queue-concurrency say otherwise (a rate above 500/s lifts the emulator's cap); the Tasks
// emulator runs in memory unless -tasks-persist.
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/spanner"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spanmart/spanmart/e2e/harness"
	"github.com/spanmart/spanmart/emulator/paysim"
	"github.com/spanmart/spanmart/internal/emucmd"
	"github.com/spanmart/spanmart/internal/topology"
	"github.com/spanmart/spanmart/pkg/outboxlib/relay"
)

type options struct {
	mode       string
	rates      []float64
	duration   time.Duration
	relays     int
	skus       int
	events     int
	batch      int
	settle     time.Duration
	keep       bool
	statements bool
	persist    bool
	noNudge    bool
	noLedger   bool
	verbose    bool
	profile    string
	qrate      float64
	qconc      int32
	methods    []string
	perMethod  bool
	carrier    string
	scale      []int
	// mode overload
	capacity       float64
	overloadFrom   float64
	overloadStep   float64
	searchWindow   time.Duration
	overloadWindow time.Duration
	drainTimeout   time.Duration
	chart          string
}

func main() {
	// The emulators run in this process: their collector is set as their own commands set it.
	emucmd.TuneGC()
	var o options
	var rates string
	flag.StringVar(&o.mode, "mode", "rate", `"rate": orders through the saga at fixed rates; "drain": relay throughput on a pre-loaded outbox; "scale": drain with each count of relays in -scale; "overload": 3× the capacity, then the drain (issue 26)`)
	flag.StringVar(&rates, "rates", "25,50", "orders per second, one window per rate (mode rate)")
	flag.DurationVar(&o.duration, "duration", 30*time.Second, "length of each rate's window")
	methods := flag.String("methods", "card,wallet,konbini,bank_transfer", "payment methods, used in turn (mode rate)")
	flag.BoolVar(&o.perMethod, "per-method", false, "one window per payment method at each rate, rather than the methods in turn (per-method figures for docs/capacity.md)")
	flag.StringVar(&o.carrier, "carrier-after", "1s", "fulfillment's simulated carrier ships a shipment this long after it was created (CARRIER_SIMULATE_AFTER)")
	scale := flag.String("scale", "1,2,4", "relay instance counts, one drain each (mode scale)")
	flag.IntVar(&o.relays, "relays", 1, "relay instances")
	flag.IntVar(&o.skus, "skus", 64, "products seeded (1e9 in stock each); each order takes 1 of a random one")
	flag.IntVar(&o.events, "events", 5000, "events pre-loaded into the orders outbox (mode drain)")
	flag.IntVar(&o.batch, "batch", 500, "events per pre-load transaction (mode drain)")
	flag.DurationVar(&o.settle, "settle", 60*time.Second, "how long to wait after a window for its orders to end")
	prod := relay.SubscriberQueue("").GetRateLimits()
	flag.Float64Var(&o.qrate, "queue-rate", prod.GetMaxDispatchesPerSecond(), "max_dispatches_per_second of every queue (default production's, relay.SubscriberQueue; above 500 lifts the emulator's cap)")
	qconc := flag.Int("queue-concurrency", int(prod.GetMaxConcurrentDispatches()), "max_concurrent_dispatches of every queue (default production's)")
	flag.BoolVar(&o.persist, "tasks-persist", false, "run the Tasks emulator with its data dir (an fsync of its log per group of mutations); default in memory")
	flag.BoolVar(&o.noNudge, "no-nudge", false, "orders does not nudge the relay after a commit (RELAY_URL unset): delivery waits for the relay's poll")
	flag.BoolVar(&o.noLedger, "no-ledger", false, "the relay runs without the delivery ledger (RELAY_LEDGER=false), to measure what it costs")
	flag.BoolVar(&o.keep, "keep", false, "keep the state directory (process logs)")
	flag.BoolVar(&o.statements, "statements", false, "mode rate: also print an order's Spanner requests by statement (which queries, batches, commits and reads), per window and database, with the Spanner emulator's CPU for each (from a CPU profile of the bench process)")
	flag.BoolVar(&o.verbose, "v", false, "print the harness's progress lines")
	flag.StringVar(&o.profile, "profile", "", "write CPU profiles of every window to this directory: bench-wN.pprof (load generator and both emulators) and one per service and relay (orders-wN.pprof, ...)")
	flag.Float64Var(&o.capacity, "capacity", 0, "mode overload: the capacity in orders/s; 0 searches for it (the highest rate whose issue-11 p99 targets hold)")
	flag.Float64Var(&o.overloadFrom, "overload-from", 10, "mode overload: the capacity search's first rate, orders/s")
	flag.Float64Var(&o.overloadStep, "overload-step", 5, "mode overload: the capacity search rises by this many orders/s per window")
	flag.DurationVar(&o.searchWindow, "search-window", 20*time.Second, "mode overload: length of each capacity search window (each then waits up to -settle for its orders)")
	flag.DurationVar(&o.overloadWindow, "overload-window", 60*time.Second, "mode overload: length of each of the three windows at 3× the capacity")
	flag.DurationVar(&o.drainTimeout, "drain-timeout", 5*time.Minute, "mode overload: the longest the bench waits, after the last overload window, for every order accepted to end (offering 0.5× the capacity meanwhile)")
	flag.StringVar(&o.chart, "chart", "", "mode overload: write a PNG chart of offered, accepted and completed orders/s and the POST p99s to this `path` (docs/overload.png)")
	abRev := flag.String("ab", "", "A/B: run the same bench against this tree and against git revision `REV`, run by run alternating, and print the ratios this / REV of its figures (mode rate: orders accepted, CPU per order, aborts per commit, the card orders' p99s; mode overload: accepted and completed orders/s, the POST p99s, aborts per commit, the drain's time)")
	abRuns := flag.Int("ab-runs", 2, "A/B: runs of each build")
	flag.Parse()
	o.qconc = int32(*qconc)
	for _, f := range strings.Split(rates, ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || r <= 0 {
			fmt.Fprintf(os.Stderr, "bench: bad rate %q\n", f)
			os.Exit(2)
		}
		o.rates = append(o.rates, r)
	}
	for _, m := range strings.Split(*methods, ",") {
		switch m = strings.TrimSpace(m); m {
		case "card", "wallet", "konbini", "bank_transfer":
			o.methods = append(o.methods, m)
		default:
			fmt.Fprintf(os.Stderr, "bench: unknown payment method %q (card, wallet, konbini, bank_transfer)\n", m)
			os.Exit(2)
		}
	}
	for _, f := range strings.Split(*scale, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "bench: bad relay count %q\n", f)
			os.Exit(2)
		}
		o.scale = append(o.scale, n)
	}
	if o.relays < 1 || !slices.Contains([]string{"rate", "drain", "scale", "overload"}, o.mode) || o.overloadFrom <= 0 || o.overloadStep <= 0 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *abRev != "" {
		mode, ok := abModes[o.mode]
		if !ok || *abRuns < 1 {
			fmt.Fprintln(os.Stderr, "bench: -ab compares mode rate or mode overload runs, at least one of each build (-ab-runs)")
			os.Exit(2)
		}
		if err := runAB(ctx, mode, *abRev, *abRuns, withoutABFlags(os.Args[1:])); err != nil {
			fmt.Fprintf(os.Stderr, "\nbench FAILED: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if err := run(ctx, o); err != nil {
		fmt.Fprintf(os.Stderr, "\nbench FAILED: %v\n", err)
		os.Exit(1)
	}
}

type bench struct {
	o      options
	s      *harness.Stack
	http   *http.Client
	relays []string
	skus   []string
	// windows counts the windows run so far (names the -profile files).
	windows int
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%s] "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func run(ctx context.Context, o options) (err error) {
	seed := make([]harness.Product, o.skus)
	skus := make([]string, o.skus)
	for i := range seed {
		skus[i] = fmt.Sprintf("B%03d", i)
		seed[i] = harness.Product{SKU: skus[i], Name: "Bench item " + skus[i], PriceMinor: 1000, OnHand: 1_000_000_000}
	}
	opts := harness.Options{
		Seed: seed, KeepState: o.keep, MaxDispatchRate: math.Max(o.qrate, 500), TasksInMemory: !o.persist,
		CountStatements: o.statements,
		// Cloud Scheduler's jobs on production's schedule, not the tests' 2 s: the sweeps and orders'
		// audit would otherwise add their reads to every window's cost per order.
		SchedulerEvery: topology.JobEvery,
		Queue: func(q *cloudtaskspb.Queue) {
			harness.FastQueue(q)
			q.RateLimits.MaxDispatchesPerSecond = o.qrate
			q.RateLimits.MaxConcurrentDispatches = o.qconc
		},
	}
	opts.Env = map[string][]string{"fulfillment": {"CARRIER_SIMULATE_AFTER=" + o.carrier}}
	opts.Paysim = func(po *paysim.Options) { po.WalletBalances = map[string]int64{benchCustomer: math.MaxInt64 / 2} }
	if o.noNudge {
		opts.Env["orders"] = []string{"RELAY_URL="}
	}
	if o.noLedger {
		opts.Env["relay"] = []string{"RELAY_LEDGER=false"}
	}
	if o.profile != "" {
		for _, n := range topology.Names() {
			opts.Env[n] = append(opts.Env[n], "PPROF_ENABLED=true")
		}
	}
	if o.verbose {
		opts.Logf = logf
	}
	logf("starting the stack (%d SKUs, queues %v/s and %d concurrent, %d relay(s), Tasks emulator persisted: %v)", o.skus, o.qrate, o.qconc, o.relays, o.persist)
	s, err := harness.New(ctx, opts)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			fmt.Fprintf(os.Stderr, "logs in %s/logs\n", s.StateDir())
			s.DumpLogs(func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }, 10)
		}
		if o.keep {
			logf("state kept in %s", s.StateDir())
		}
		s.Close()
	}()
	logf("stack up in %s (build %s)", s.Timings["total"].Round(100*time.Millisecond), s.Timings["build"].Round(100*time.Millisecond))
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 1024, 1024
	b := &bench{o: o, s: s, http: &http.Client{Transport: tr, Timeout: 30 * time.Second}, relays: []string{"relay"}, skus: skus}
	for i := 2; i <= o.relays; i++ {
		name := fmt.Sprintf("relay-%d", i)
		if err := s.StartInstance(ctx, name, "relay"); err != nil {
			return err
		}
		b.relays = append(b.relays, name)
	}
	machine()
	if o.profile != "" {
		if err := os.MkdirAll(o.profile, 0o755); err != nil {
			return err
		}
	}
	switch o.mode {
	case "drain":
		return b.drain(ctx)
	case "scale":
		return b.scale(ctx)
	case "overload":
		return b.overload(ctx)
	}
	return b.rates(ctx)
}

func machine() {
	cpu := "?"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	fmt.Printf("\nMachine: %d cores (%s), GOMAXPROCS %d, %s/%s, %s. Everything shares these cores: the bench\n"+
		"process (load generator, Spanner and Tasks emulators in-process) and the five service processes.\n",
		runtime.NumCPU(), cpu, runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// profile starts CPU profiles over the window, into the -profile directory: the bench process's
// own (load generator and both emulators) and one of every service and relay, all named after
// the window's number (bench-w1.pprof, orders-w1.pprof, ...), so that a late window can be
// compared with an early one (go tool pprof -diff_base). With -statements the bench process is
// profiled even without -profile. The returned function waits for the profiles and returns the
// bench process's (nil when none was taken).
func (b *bench) profile(ctx context.Context, d time.Duration) (func() []byte, error) {
	if b.o.profile == "" && !b.o.statements {
		return func() []byte { return nil }, nil
	}
	own := new(bytes.Buffer)
	if err := pprof.StartCPUProfile(own); err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	if b.o.profile != "" {
		b.profileServices(ctx, d, fmt.Sprintf("-w%d.pprof", b.windows), &wg)
	}
	return func() []byte {
		wg.Wait()
		pprof.StopCPUProfile()
		if b.o.profile != "" {
			name := filepath.Join(b.o.profile, fmt.Sprintf("bench-w%d.pprof", b.windows))
			if err := os.WriteFile(name, own.Bytes(), 0o644); err != nil {
				logf("profile bench: %v", err)
			}
		}
		return own.Bytes()
	}, nil
}

// profileServices fetches a CPU profile of d from every service and relay into the -profile
// directory, named after them and suffix, on wg.
func (b *bench) profileServices(ctx context.Context, d time.Duration, suffix string, wg *sync.WaitGroup) {
	secs := int(d.Seconds())
	var names []string
	for _, c := range topology.Consumers() {
		names = append(names, c.Name)
	}
	for _, name := range append(names, b.relays...) {
		wg.Go(func() {
			url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", b.s.URL(name), secs)
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return
			}
			resp, err := (&http.Client{Timeout: d + 30*time.Second}).Do(req)
			if err != nil {
				logf("profile %s: %v", name, err)
				return
			}
			defer resp.Body.Close()
			f, err := os.Create(filepath.Join(b.o.profile, name+suffix))
			if err == nil {
				_, err = io.Copy(f, resp.Body)
				f.Close()
			}
			if err != nil || resp.StatusCode != http.StatusOK {
				logf("profile %s: status %d, %v", name, resp.StatusCode, err)
			}
		})
	}
}

// startProbe creates a paused queue and times one CreateTask into it every 100 ms until the
// returned function is called, which returns the sorted latencies.
func (b *bench) startProbe(ctx context.Context) (func() []time.Duration, error) {
	tc, err := b.s.TasksClient(ctx)
	if err != nil {
		return nil, err
	}
	q := relay.SubscriberQueue(harness.QueueName("bench-probe"))
	// One probe queue per stack: a later drain (mode scale) reuses it.
	if _, err := tc.CreateQueue(ctx, &cloudtaskspb.CreateQueueRequest{Parent: harness.Location, Queue: q}); err != nil && status.Code(err) != codes.AlreadyExists {
		return nil, fmt.Errorf("create the probe queue: %w", err)
	}
	if _, err := tc.PauseQueue(ctx, &cloudtaskspb.PauseQueueRequest{Name: q.Name}); err != nil {
		return nil, fmt.Errorf("pause the probe queue: %w", err)
	}
	pctx, cancel := context.WithCancel(ctx)
	var lat []time.Duration
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-pctx.Done():
				return
			case <-t.C:
			}
			t0 := time.Now()
			_, err := tc.CreateTask(pctx, &cloudtaskspb.CreateTaskRequest{Parent: q.Name, Task: &cloudtaskspb.Task{
				MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{Url: "http://127.0.0.1:9/probe"}},
			}})
			if err == nil {
				lat = append(lat, time.Since(t0))
			}
		}
	}()
	return func() []time.Duration {
		cancel()
		<-done
		sortDur(lat)
		return lat
	}, nil
}

// tasksDepth is a queue's depth from the Tasks emulator's status page.
func (b *bench) tasksDepth(ctx context.Context, queue string) (int, error) {
	qs, err := b.s.Queues(ctx)
	if err != nil {
		return 0, err
	}
	q, ok := qs[queue]
	if !ok {
		return 0, fmt.Errorf("no queue %s", queue)
	}
	return q.Depth, nil
}

// ---- helpers ----

// consumerNames are the service processes besides the relays, in the roster's order.
func consumerNames() []string {
	var out []string
	for _, s := range topology.Consumers() {
		out = append(out, s.Name)
	}
	return out
}

type scrape map[string]map[string]float64 // process → "name{labels}" → value

func (b *bench) scrapeAll(ctx context.Context) (scrape, error) {
	out := scrape{}
	procs := append(consumerNames(), b.relays...)
	for _, p := range procs {
		m, err := b.scrape(ctx, b.s.URL(p)+"/metrics")
		if err != nil {
			m = map[string]float64{} // a stopped relay (drain mode): its counters start from 0
		}
		out[p] = m
	}
	m, err := b.scrape(ctx, b.s.TasksHTTP()+"/metrics")
	if err != nil {
		return nil, fmt.Errorf("metrics of the Tasks emulator: %w", err)
	}
	out["tasks"] = m
	// "relays" is every relay instance's counters summed.
	all := map[string]float64{}
	for _, r := range b.relays {
		for k, v := range out[r] {
			all[k] += v
		}
	}
	out["relays"] = all
	return out, nil
}

func (b *bench) scrape(ctx context.Context, url string) (map[string]float64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := b.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		m[line[:i]] = v
	}
	return m, sc.Err()
}

// sum adds the series of a metric (name, or name{...}) whose labels contain every filter.
func sum(m map[string]float64, name string, filters ...string) float64 {
	total := 0.0
	for k, v := range m {
		base, _, _ := strings.Cut(k, "{")
		if base != name {
			continue
		}
		ok := true
		for _, f := range filters {
			ok = ok && (f == "" || strings.Contains(k, f))
		}
		if ok {
			total += v
		}
	}
	return total
}

func proc(sc scrape, p string) map[string]float64 { return sc[p] }

func delta(before, after scrape, p, name string, filters ...string) float64 {
	return sum(proc(after, p), name, filters...) - sum(proc(before, p), name, filters...)
}

// histMean is the mean and count of a histogram's observations between two scrapes.
func histMean(before, after scrape, p, name string, filters ...string) (mean, count float64) {
	count = delta(before, after, p, name+"_count", filters...)
	if count == 0 {
		return 0, 0
	}
	return delta(before, after, p, name+"_sum", filters...) / count, count
}

func (b *bench) count(ctx context.Context, db, sql string) (int64, error) {
	return b.countP(ctx, db, sql, nil)
}

func (b *bench) countP(ctx context.Context, db, sql string, ids []string) (int64, error) {
	var n int64
	st := spanner.Statement{SQL: sql}
	if ids != nil {
		st.Params = map[string]any{"ids": ids}
	}
	err := b.s.DB(db).Single().Query(ctx, st).Do(func(r *spanner.Row) error { return r.Column(0, &n) })
	return n, err
}

// selfCPU is the CPU time of this process (load generator and both emulators) in seconds.
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func sortDur(d []time.Duration) { sort.Slice(d, func(i, j int) bool { return d[i] < d[j] }) }

// pct is the p-th percentile (nearest rank) of sorted durations.
func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(d)))) - 1
	return d[max(0, min(i, len(d)-1))]
}

func sec(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func ms(d time.Duration) string {
	if d >= 10*time.Second {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
}
