// Package harness runs the whole Spanmart system for end-to-end tests and the demo: both emulators
// in-process (the Tasks emulator stoppable and restartable on the same ports and data dir), every
// service and the relay as its own process on free ports, with the environment each reads on Cloud
// Run (the same variables emulator/devstack sets), four migrated databases, the four subscriber
// queues and a seeded catalog; the payment sandbox, a mail server and the customers' identity
// provider (emulator/authemu: CustomerToken) in-process. Each Stack has its own emulators, ports and temporary state
// directory, so stacks never share data and a stack runs beside a dev stack.
//
// Tests use Start(t, opts), which stops everything when the test ends and prints the tail of every
// process log when it failed; programs use New and Close. Processes are controlled by name
// ("orders", "fulfillment", "gateway-abstraction", "notifications", "relay", or a second instance
// added with StartInstance): Kill (SIGKILL), Stop (SIGTERM), Start and Restart with extra
// environment (e.g. SPANMART_FAULTS, see pkg/faults), WaitExit for a process expected to die.
package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/spanner"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/spanmart/spanmart/emulator/authemu"
	"github.com/spanmart/spanmart/emulator/paysim"
	"github.com/spanmart/spanmart/emulator/spanneremu"
	"github.com/spanmart/spanmart/emulator/tasksemu"
	"github.com/spanmart/spanmart/internal/localcloud"
	"github.com/spanmart/spanmart/internal/localenv"
	"github.com/spanmart/spanmart/internal/localscheduler"
	"github.com/spanmart/spanmart/internal/mailtest"
	"github.com/spanmart/spanmart/internal/topology"
	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/spannertest"
)

// Names of the local Google Cloud resources, as in the dev stack.
const (
	Project        = localcloud.Project
	Instance       = "projects/" + Project + "/instances/e2e"
	Location       = localcloud.Location
	ServiceAccount = localcloud.ServiceAccount
	// Operator is the account allowed to use the services' operator endpoints (ADMIN_ALLOWED_EMAILS);
	// OperatorToken gets its ID token.
	Operator = localcloud.Operator
	// Warehouse is the account allowed to ship and fail shipments on fulfillment
	// (WAREHOUSE_ALLOWED_EMAILS); WarehouseToken gets its ID token.
	Warehouse = localcloud.Warehouse
)

// DatabaseName is the full name of a service database ("orders", "fulfillment", "payments",
// "notifications").
func DatabaseName(db string) string { return Instance + "/databases/" + db }

// QueueIDs are the subscriber queues, one per consumer (internal/topology).
var QueueIDs = topology.Queues()

// QueueName is the full name of a queue id.
func QueueName(id string) string { return localenv.Queue(id) }

// The processes of a stack, in start order, with the database each owns ("" for the relay): the
// roster's (internal/topology).
var processes = func() []struct{ name, database string } {
	var out []struct{ name, database string }
	for _, s := range topology.Services() {
		out = append(out, struct{ name, database string }{s.Name, s.Database})
	}
	return out
}()

// Product is a seeded product: a Products row (orders) and an Inventory row (fulfillment).
type Product struct {
	SKU        string
	Name       string
	PriceMinor int64
	Currency   string // default JPY
	OnHand     int64
}

// Options configure a stack. The zero value is a working stack with product A1 (stock 5).
type Options struct {
	// Seed is the catalog; nil means DefaultSeed.
	Seed []Product
	// Queue adjusts the settings of every queue before it is created (default: FastQueue).
	Queue func(*cloudtaskspb.Queue)
	// Env is extra environment per process name, e.g. {"fulfillment": {"LOG_LEVEL=debug"}}.
	Env map[string][]string
	// LogLevel of every process (default "info").
	LogLevel string
	// StateDir holds logs and the Tasks emulator's data; default a fresh temporary directory,
	// removed by Close unless KeepState.
	StateDir  string
	KeepState bool
	// Logf receives the harness's progress lines (default: none).
	Logf func(format string, args ...any)
	// ReadyTimeout bounds each wait for a process's /readyz (default 60 s).
	ReadyTimeout time.Duration
	// MaxDispatchRate lifts the Tasks emulator's cap on a queue's max_dispatches_per_second
	// (tasksemu.Options.MaxDispatchRate; default production's 500/s), for load tests.
	MaxDispatchRate float64
	// Paysim adjusts the payment sandbox's options before it starts (its webhook URLs, secrets
	// and the scaled-down redelivery back-off are set already).
	Paysim func(*paysim.Options)
	// TasksInMemory runs the Tasks emulator without a data dir: no log write and fsync per group
	// of mutating RPCs, for load tests; StopTasks then loses the queues and tasks.
	TasksInMemory bool
	// CountStatements has the Spanner emulator count its requests by statement too
	// (spanneremu.Options.CountStatements).
	CountStatements bool
	// SchedulerEvery is how often the local scheduler (internal/localscheduler) runs Cloud
	// Scheduler's jobs (the sweeps, orders' audit) as scheduler default 2 s, so that what waits
	// for a job (an e-mail's back-off, a lost webhook) waits seconds, not production's 5 minutes;
	// negative: no scheduler.
	SchedulerEvery time.Duration
}

// DefaultSeed is product A1 with 5 in stock, as in the dev stack's seed.
var DefaultSeed = []Product{{SKU: "A1", Name: "Anchor mug", PriceMinor: 1200, Currency: "JPY", OnHand: 5}}

// FastQueue scales the back-off down for tests: from 50 ms doubling to at most 1 s, so a consumer
// that was down or an early event is retried within a second (the emulator keeps sub-second values).
func FastQueue(q *cloudtaskspb.Queue) {
	q.RetryConfig.MinBackoff = durationpb.New(50 * time.Millisecond)
	q.RetryConfig.MaxBackoff = durationpb.New(time.Second)
	q.RetryConfig.MaxDoublings = 5
}

// Stack is one running system.
type Stack struct {
	opts  Options
	state string
	bin   string

	spanner *spanneremu.Server
	// Paysim is the payment sandbox (Stripe's and KOMOJU's APIs), in-process: tests drive its
	// clock, faults and slips through it.
	Paysim    *paysim.Server
	paysimLog *os.File
	// Mail is the SMTP server the notifications service sends the customers' e-mails to, a real
	// one in-process (internal/mailtest): tests read the mailbox and make addresses bounce.
	Mail *mailtest.Server
	// Customers is the customers' identity provider, in-process (emulator/authemu, Identity
	// Platform's stand-in): CustomerToken gets a customer's ID token from it; tests mint
	// expired, forged or foreign tokens with it.
	Customers *authemu.Server

	tasksMu   sync.Mutex
	tasks     *tasksemu.Server
	tasksPort int
	tasksHTTP int

	mu      sync.Mutex
	procs   map[string]*Proc
	ports   map[string]int
	kinds   map[string]string // process name → binary ("relay-2" → "relay")
	clients map[string]*spanner.Client
	tc      *cloudtasks.Client
	tokens  map[[2]string]cachedToken // ID tokens of the stack's accounts, by (account, process name)
	// customerTokens are the customers' ID tokens, by customer id
	customerTokens map[string]cachedToken
	// listeners bound for processes not started yet (or restarted), handed to the child and closed here
	listeners map[string]*net.TCPListener

	// HTTP is the client for the services' APIs (no keep-alive reuse across a killed process
	// matters: each request gets a fresh connection when the old one broke).
	HTTP *http.Client
	// Timings of start-up, for reports.
	Timings map[string]time.Duration
	// Scheduler runs Cloud Scheduler's jobs (nil with a negative Options.SchedulerEvery).
	Scheduler     *localscheduler.Scheduler
	stopScheduler func()
}

func (o *Options) defaults() {
	if o.Seed == nil {
		o.Seed = DefaultSeed
	}
	if o.Queue == nil {
		o.Queue = FastQueue
	}
	if o.LogLevel == "" {
		o.LogLevel = "info"
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 60 * time.Second
	}
	if o.SchedulerEvery == 0 {
		o.SchedulerEvery = 2 * time.Second
	}
}

// New builds the binaries (once per process), starts both emulators, creates the databases,
// queues and catalog, starts every process and waits until each is ready. Close stops it all.
func New(ctx context.Context, opts Options) (_ *Stack, err error) {
	opts.defaults()
	s := &Stack{
		opts: opts, procs: map[string]*Proc{}, ports: map[string]int{}, kinds: map[string]string{},
		clients: map[string]*spanner.Client{}, Timings: map[string]time.Duration{}, tokens: map[[2]string]cachedToken{}, listeners: map[string]*net.TCPListener{},
		customerTokens: map[string]cachedToken{},
		HTTP:           &http.Client{Timeout: 30 * time.Second},
	}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	s.state = opts.StateDir
	if s.state == "" {
		if s.state, err = os.MkdirTemp("", "spanmart-e2e-"); err != nil {
			return nil, err
		}
	}
	for _, d := range []string{"logs", "tasks"} {
		if err := os.MkdirAll(filepath.Join(s.state, d), 0o755); err != nil {
			return nil, err
		}
	}

	start := time.Now()
	var took time.Duration
	if s.bin, took, err = Build(); err != nil {
		return nil, err
	}
	s.Timings["build"] = took
	s.opts.Logf("binaries in %s (go build took %s once per process)", s.bin, took.Round(time.Millisecond))

	t0 := time.Now()
	// No version history: Spanmart never reads at a past timestamp, and under the benchmark's
	// load the kept versions would cost a tenth of the emulator's CPU (emulator/spanneremu).
	if s.spanner, err = spanneremu.Start(ctx, spanneremu.Options{NoHistory: true, CountStatements: s.opts.CountStatements}); err != nil {
		return nil, fmt.Errorf("start spanneremu: %w", err)
	}
	// The official clients read this when they are created (here and in every child).
	os.Setenv("SPANNER_EMULATOR_HOST", s.spanner.Addr())
	// Every port at once: each listener stays open until all are chosen, so the kernel cannot hand
	// the same port out twice (the Tasks emulator's two).
	ports, err := FreePorts(2)
	if err != nil {
		return nil, err
	}
	s.tasksPort, s.tasksHTTP = ports[0], ports[1]
	if err := s.StartTasks(ctx); err != nil {
		return nil, err
	}
	if err := s.setupSpanner(ctx); err != nil {
		return nil, err
	}
	if err := s.setupQueues(ctx); err != nil {
		return nil, err
	}
	s.Timings["setup"] = time.Since(t0)
	s.opts.Logf("emulators, %d databases, queues and catalog ready in %s", len(topology.Databases()), s.Timings["setup"].Round(time.Millisecond))

	t0 = time.Now()
	// The processes' listeners are bound here and handed to each child (SPANMART_LISTEN_FD):
	// a port only picked could be taken by any other process on the machine (another test
	// binary's outgoing connection) before the child listens on it.
	for _, p := range processes {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		s.listeners[p.name] = ln.(*net.TCPListener)
		s.ports[p.name], s.kinds[p.name] = ln.Addr().(*net.TCPAddr).Port, p.name
	}
	if err := s.startPaysim(ctx); err != nil {
		return nil, err
	}
	if s.Mail, err = mailtest.Start(); err != nil {
		return nil, fmt.Errorf("start the mail server: %w", err)
	}
	if s.Customers, err = authemu.Start(ctx, authemu.Options{Audience: localcloud.CustomerAudience}); err != nil {
		return nil, fmt.Errorf("start the customers' identity provider: %w", err)
	}
	for _, p := range processes {
		if err := s.launch(p.name); err != nil {
			return nil, err
		}
	}
	for _, p := range processes {
		if err := s.WaitReady(ctx, p.name); err != nil {
			return nil, err
		}
	}
	if s.opts.SchedulerEvery > 0 {
		s.startScheduler()
	}
	s.Timings["services"] = time.Since(t0)
	s.Timings["total"] = time.Since(start)
	s.opts.Logf("%d processes ready in %s", len(processes), s.Timings["services"].Round(time.Millisecond))
	return s, nil
}

// FreePort returns a TCP port that was free a moment ago on 127.0.0.1.
func FreePort() (int, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// FreePorts returns n distinct TCP ports that were free a moment ago on 127.0.0.1. It holds each
// listener open until all are chosen: ports picked one at a time, each closed before the next,
// can come back twice.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// StateDir is the stack's directory: logs/NAME.log and tasks/ (the Tasks emulator's data).
func (s *Stack) StateDir() string { return s.state }

// LogPath is the log file of a process (every start appends to it).
func (s *Stack) LogPath(name string) string { return filepath.Join(s.state, "logs", name+".log") }

// URL is the base URL of a process, e.g. http://127.0.0.1:41234.
func (s *Stack) URL(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	port, ok := s.ports[name]
	if !ok {
		panic("harness: no process " + name)
	}
	return "http://127.0.0.1:" + strconv.Itoa(port)
}

// SpannerAddr is the Spanner emulator's gRPC endpoint.
func (s *Stack) SpannerAddr() string { return s.spanner.Addr() }

// SpannerStats are the Spanner emulator's transaction counters (commits, aborts by cause).
func (s *Stack) SpannerStats() spanneremu.Stats { return s.spanner.Stats() }

// TasksAddr is the Tasks emulator's gRPC endpoint (the same across StopTasks/StartTasks).
func (s *Stack) TasksAddr() string { return "127.0.0.1:" + strconv.Itoa(s.tasksPort) }

// TasksHTTP is the Tasks emulator's HTTP base URL: its OIDC issuer, JWKS and status page.
func (s *Stack) TasksHTTP() string { return "http://127.0.0.1:" + strconv.Itoa(s.tasksHTTP) }

// StartTasks starts the Tasks emulator on the stack's ports with its data dir (queues, pending
// tasks, name tombstones and signing key survive a StopTasks).
func (s *Stack) StartTasks(ctx context.Context) error {
	s.tasksMu.Lock()
	defer s.tasksMu.Unlock()
	if s.tasks != nil {
		return errors.New("harness: the Tasks emulator is already running")
	}
	var err error
	// The ports were just released by StopTasks (or never used); a port in TIME_WAIT is still
	// bindable, but give a lingering listener a moment.
	for i := 0; i < 50; i++ {
		dataDir := filepath.Join(s.state, "tasks")
		if s.opts.TasksInMemory {
			dataDir = ""
		}
		s.tasks, err = tasksemu.Start(ctx, tasksemu.Options{
			Port: s.tasksPort, HTTPPort: s.tasksHTTP, DataDir: dataDir,
			MaxDispatchRate: s.opts.MaxDispatchRate,
			ServiceAccount:  ServiceAccount, // the metadata server's default account: the relay's

		})
		if err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("start tasksemu: %w", err)
}

// StopTasks stops the Tasks emulator (in-flight dispatches are cancelled and retried after a
// StartTasks, as in production).
func (s *Stack) StopTasks() error {
	s.tasksMu.Lock()
	defer s.tasksMu.Unlock()
	if s.tasks == nil {
		return nil
	}
	err := s.tasks.Close()
	s.tasks = nil
	return err
}

func (s *Stack) setupSpanner(ctx context.Context) error {
	if err := spannertest.SetUp(ctx, Instance, nil); err != nil {
		return err
	}
	return s.seed(ctx)
}

func (s *Stack) seed(ctx context.Context) error {
	orders, err := s.client(ctx, dbschema.Orders)
	if err != nil {
		return err
	}
	fulfillment, err := s.client(ctx, dbschema.Fulfillment)
	if err != nil {
		return err
	}
	products := make([]localenv.Product, 0, len(s.opts.Seed))
	for _, p := range s.opts.Seed {
		lp := localenv.Product{SKU: p.SKU, Name: p.Name, PriceMinor: p.PriceMinor, Currency: p.Currency, Active: true, OnHand: p.OnHand}
		if lp.Currency == "" {
			lp.Currency = "JPY"
		}
		if lp.Name == "" {
			lp.Name = "Product " + p.SKU
		}
		products = append(products, lp)
	}
	if len(products) == 0 {
		return nil
	}
	if err := localenv.SeedProducts(ctx, orders, products); err != nil {
		return err
	}
	return localenv.SeedInventory(ctx, fulfillment, products)
}

func (s *Stack) setupQueues(ctx context.Context) error {
	tc, err := s.TasksClient(ctx)
	if err != nil {
		return err
	}
	_, err = localenv.CreateQueues(ctx, tc, s.opts.Queue)
	return err
}

// client returns the stack's data client for a database, created on first use.
func (s *Stack) client(ctx context.Context, db string) (*spanner.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.clients[db]; ok {
		return c, nil
	}
	c, err := spanner.NewClientWithConfig(ctx, DatabaseName(db), spanner.ClientConfig{
		DisableNativeMetrics: true,
		SessionPoolConfig:    spanner.SessionPoolConfig{MinOpened: 1},
	})
	if err != nil {
		return nil, fmt.Errorf("spanner client for %s: %w", db, err)
	}
	s.clients[db] = c
	return c, nil
}

// DB is a data client for one of the stack's databases ("orders", "fulfillment", "payments",
// "notifications"); it panics on an unknown name (a programming error in a test).
func (s *Stack) DB(db string) *spanner.Client {
	c, err := s.client(context.Background(), db)
	if err != nil {
		panic(err)
	}
	return c
}

// TasksClient is the official Cloud Tasks client pointed at the stack's emulator (it reconnects by
// itself after StopTasks/StartTasks).
func (s *Stack) TasksClient(ctx context.Context) (*cloudtasks.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tc != nil {
		return s.tc, nil
	}
	tc, err := cloudtasks.NewClient(ctx,
		option.WithEndpoint(s.TasksAddr()),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		return nil, fmt.Errorf("cloud tasks client: %w", err)
	}
	s.tc = tc
	return tc, nil
}

// env is the environment of a process: the variables it reads on Cloud Run, pointed at the
// emulators and the payment sandbox (internal/localenv, shared with emulator/devstack).
func (s *Stack) env(name string) []string {
	svc, _ := topology.Lookup(s.kinds[name])
	return s.local().Env(name, svc)
}

// startPaysim starts the payment sandbox, delivering webhooks to the gateway (whose port is known).
func (s *Stack) startPaysim(ctx context.Context) error {
	stripeURL, komojuURL := s.local().WebhookURLs()
	opts := paysim.Options{
		APIKey: localenv.StripeAPIKey, WebhookURL: stripeURL, WebhookSecret: localenv.StripeWebhookSecret,
		WebhookEvents:   strings.Split(localenv.StripeWebhookEvents, ","),
		KomojuSecretKey: localenv.KomojuSecretKey, KomojuWebhookURL: komojuURL, KomojuWebhookSecret: localenv.KomojuWebhookSecret,
		// Scaled down like the queues: a webhook the gateway refused is retried within a second.
		WebhookRetry: paysim.RetryPolicy{MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second},
	}
	// Its request and webhook lines go to logs/paysim.log, beside the processes' logs.
	f, err := os.Create(s.LogPath("paysim"))
	if err != nil {
		return err
	}
	s.paysimLog = f
	var logMu sync.Mutex
	opts.Logf = func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		fmt.Fprintf(f, time.Now().UTC().Format(time.RFC3339Nano)+" "+format+"\n", args...)
	}
	if s.opts.Paysim != nil {
		s.opts.Paysim(&opts)
	}
	if s.Paysim, err = paysim.Start(ctx, opts); err != nil {
		return fmt.Errorf("start paysim: %w", err)
	}
	return nil
}

func (s *Stack) paysimURL() string {
	if s.Paysim == nil {
		return ""
	}
	return s.Paysim.URL()
}

func (s *Stack) mailAddr() string {
	if s.Mail == nil {
		return ""
	}
	return s.Mail.Addr()
}

func (s *Stack) authURL() string {
	if s.Customers == nil {
		return ""
	}
	return s.Customers.URL()
}

// local describes this stack to internal/localenv.
func (s *Stack) local() localenv.Stack {
	return localenv.Stack{
		Instance: Instance, SpannerAddr: s.spanner.Addr(), TasksAddr: s.TasksAddr(), TasksHTTP: s.TasksHTTP(),
		PaysimURL: s.paysimURL(), SMTPAddr: s.mailAddr(), AuthURL: s.authURL(), LogLevel: s.opts.LogLevel,
		URL:  func(name string) string { return "http://127.0.0.1:" + strconv.Itoa(s.ports[name]) },
		Port: func(name string) int { return s.ports[name] },
	}
}

// Close stops every process (SIGTERM, then SIGKILL after 5 s), closes the clients and the
// emulators, and removes a temporary state directory.
func (s *Stack) Close() {
	if s.stopScheduler != nil {
		s.stopScheduler()
	}
	s.mu.Lock()
	procs := make([]*Proc, 0, len(s.procs))
	for _, p := range s.procs {
		procs = append(procs, p)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop(5 * time.Second) }()
	}
	wg.Wait()
	s.mu.Lock()
	for _, c := range s.clients {
		c.Close()
	}
	s.clients = map[string]*spanner.Client{}
	if s.tc != nil {
		s.tc.Close()
		s.tc = nil
	}
	s.mu.Unlock()
	s.StopTasks()
	if s.Paysim != nil {
		s.Paysim.Close()
		s.paysimLog.Close()
	}
	if s.Mail != nil {
		s.Mail.Close()
	}
	if s.Customers != nil {
		s.Customers.Close()
	}
	if s.spanner != nil {
		s.spanner.Close()
	}
	if s.opts.StateDir == "" && !s.opts.KeepState && s.state != "" {
		os.RemoveAll(s.state)
	}
}

// LogTail returns the last n lines of a process's log.
func (s *Stack) LogTail(name string, n int) []string {
	data, err := os.ReadFile(s.LogPath(name))
	if err != nil {
		return []string{err.Error()}
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// Names are the processes started so far, in no particular order.
func (s *Stack) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for n := range s.procs {
		names = append(names, n)
	}
	return names
}

// WaitReady polls a process's /readyz until it answers 200, failing fast if it exits.
func (s *Stack) WaitReady(ctx context.Context, name string) error {
	p := s.proc(name)
	if p == nil {
		return fmt.Errorf("harness: %s was never started", name)
	}
	url := s.URL(name) + "/readyz"
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(s.opts.ReadyTimeout)
	last := "no answer yet"
	for {
		if p.Exited() {
			return fmt.Errorf("%s exited before it was ready (%v); its last lines:\n  %s", name, p.Err(), strings.Join(s.LogTail(name, 15), "\n  "))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %s: last /readyz answer: %s; its last lines:\n  %s", name, s.opts.ReadyTimeout, last, strings.Join(s.LogTail(name, 15), "\n  "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// OperatorToken returns an ID token of the Operator account for a process's URL, from the Tasks
// emulator's metadata endpoint (in production: the operator's own Google identity). Tokens are
// kept for 50 minutes (they last an hour), as an operator's gcloud does, so a drill that stops the
// Tasks emulator can still read the relay.
func (s *Stack) OperatorToken(ctx context.Context, name string) (string, error) {
	return s.accountToken(ctx, Operator, name)
}

// WarehouseToken returns an ID token of the Warehouse account for fulfillment's URL, as
// OperatorToken does (in production: the warehouse's service account's, from its own metadata
// server or gcloud).
func (s *Stack) WarehouseToken(ctx context.Context) (string, error) {
	return s.accountToken(ctx, Warehouse, topology.Fulfillment)
}

// accountToken returns an ID token of account for the URL of process name, kept for 50 minutes.
func (s *Stack) accountToken(ctx context.Context, account, name string) (string, error) {
	key := [2]string{account, name}
	s.mu.Lock()
	c, ok := s.tokens[key]
	s.mu.Unlock()
	if ok && time.Since(c.at) < 50*time.Minute {
		return c.token, nil
	}
	token, err := s.mintToken(ctx, account, name)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	s.tokens[key] = cachedToken{token: token, at: time.Now()}
	s.mu.Unlock()
	return token, nil
}

type cachedToken struct {
	token string
	at    time.Time
}

// CustomerToken returns an ID token of customer customerID (its sub, which orders takes as the
// customer of its requests), from the stack's identity provider, as a customer's app gets one from
// Identity Platform after signing in. Tokens are kept for 50 minutes (they last an hour), as the
// client SDKs keep theirs, so a load test mints one per customer, not one per request.
func (s *Stack) CustomerToken(ctx context.Context, customerID string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	s.mu.Lock()
	c, ok := s.customerTokens[customerID]
	s.mu.Unlock()
	if ok && time.Since(c.at) < 50*time.Minute {
		return c.token, nil
	}
	token, err := s.Customers.Token(customerID, "")
	if err != nil {
		return "", fmt.Errorf("customer token of %q: %w", customerID, err)
	}
	s.mu.Lock()
	s.customerTokens[customerID] = cachedToken{token: token, at: time.Now()}
	s.mu.Unlock()
	return token, nil
}

func (s *Stack) mintToken(ctx context.Context, account, name string) (string, error) {
	u := s.TasksHTTP() + "/computeMetadata/v1/instance/service-accounts/" + account + "/identity?audience=" + url.QueryEscape(s.URL(name))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Metadata-Flavor", "Google")
	resp, err := s.HTTP.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("ID token of %s for %s: %s %s", account, name, resp.Status, b)
	}
	return string(b), nil
}

// startScheduler runs Cloud Scheduler's jobs every Options.SchedulerEvery until Close.
func (s *Stack) startScheduler() {
	s.Scheduler = localscheduler.New(localscheduler.Config{
		Metadata: s.TasksHTTP(), URL: s.URL, Every: s.opts.SchedulerEvery, HTTP: s.HTTP, Logf: s.opts.Logf,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Scheduler.Run(ctx) }()
	s.stopScheduler = func() { cancel(); <-done }
}
