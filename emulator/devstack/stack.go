package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spanmart/spanmart/internal/localcloud"
	"github.com/spanmart/spanmart/internal/localenv"
	"github.com/spanmart/spanmart/internal/localscheduler"
	"github.com/spanmart/spanmart/internal/topology"
	"github.com/spanmart/spanmart/pkg/dbschema"
)

// Names of the local Google Cloud resources.
const (
	project  = localcloud.Project
	instance = "projects/" + project + "/instances/dev"
	location = localcloud.Location
)

func databaseName(db string) string { return instance + "/databases/" + db }

// stack is one run of the dev stack.
type stack struct {
	cfg   config
	state stateLayout
	con   *console

	procs  []*proc // in start order
	exited chan *proc
	// force is closed by a second Ctrl-C: stop without waiting for graceful exits.
	force  chan struct{}
	unlock func()
}

func newStack(cfg config) (*stack, error) {
	st := &stack{
		cfg:    cfg,
		state:  stateLayout{root: cfg.stateDir},
		con:    newConsole(os.Stdout, procNames()...),
		exited: make(chan *proc, 16),
		force:  make(chan struct{}),
	}
	if err := st.state.prepare(); err != nil {
		return nil, err
	}
	unlock, err := lockState(st.state)
	if err != nil {
		return nil, err
	}
	st.unlock = unlock
	st.con.pretty = !cfg.rawLogs
	if err := st.con.register("devstack", st.state.log("devstack")); err != nil {
		unlock()
		return nil, err
	}
	return st, nil
}

// procNames are the names that can appear in the console's name column.
func procNames() []string {
	names := []string{"go build", "spanneremu", "tasksemu", "paysim", "authemu", "mailpit"}
	for _, s := range services {
		names = append(names, s.name)
	}
	return names
}

func (st *stack) close() {
	st.con.close()
	if st.unlock != nil {
		st.unlock()
	}
}

func (st *stack) port(p int) int { return p + st.cfg.portOffset }

func (st *stack) spannerAddr() string { return fmt.Sprintf("%s:%d", host, st.port(spannerPort)) }
func (st *stack) tasksAddr() string   { return fmt.Sprintf("%s:%d", host, st.port(tasksPort)) }
func (st *stack) tasksHTTP() string   { return fmt.Sprintf("http://%s:%d", host, st.port(tasksHTTPPort)) }
func (st *stack) paysimURL() string   { return fmt.Sprintf("http://%s:%d", host, st.port(paysimPort)) }
func (st *stack) authURL() string     { return fmt.Sprintf("http://%s:%d", host, st.port(authPort)) }
func (st *stack) smtpAddr() string    { return fmt.Sprintf("%s:%d", host, st.port(smtpPort)) }
func (st *stack) mailURL() string     { return fmt.Sprintf("http://%s:%d", host, st.port(mailWebPort)) }
func (st *stack) serviceURL(s service) string {
	return fmt.Sprintf("http://%s:%d", host, st.port(s.port))
}

// listeners are the ports this run needs.
func (st *stack) listeners() []listener {
	ls := []listener{
		{"Spanner emulator gRPC", st.port(spannerPort)},
		{"Cloud Tasks emulator gRPC", st.port(tasksPort)},
		{"Cloud Tasks emulator HTTP", st.port(tasksHTTPPort)},
		{"payment sandbox (paysim)", st.port(paysimPort)},
		{"customer identity provider (authemu)", st.port(authPort)},
		{"mail server (Mailpit) SMTP", st.port(smtpPort)},
		{"mail server (Mailpit) web inbox", st.port(mailWebPort)},
	}
	if !st.cfg.noServices {
		for _, s := range services {
			ls = append(ls, listener{s.name, st.port(s.port)})
		}
	}
	return ls
}

// up brings the whole stack up and returns once every process is ready.
func (st *stack) up(ctx context.Context) error {
	start := time.Now()
	// A second Ctrl-C while stopping means "now".
	go func() {
		<-ctx.Done()
		sig := make(chan os.Signal, 1)
		notifySignals(sig)
		<-sig
		close(st.force)
	}()

	for _, l := range st.listeners() {
		if l.port <= 0 || l.port > 65535 {
			return fmt.Errorf("-port-offset %d puts %s on port %d, outside 1-65535", st.cfg.portOffset, l.what, l.port)
		}
	}
	if err := checkPortsFree(st.listeners(), st.cfg.portOffset); err != nil {
		return err
	}
	if err := st.build(ctx); err != nil {
		return err
	}
	if err := st.startEmulators(ctx); err != nil {
		return err
	}
	if err := st.setup(ctx); err != nil {
		return err
	}
	if !st.cfg.noServices {
		if err := st.startServices(ctx); err != nil {
			return err
		}
	}
	st.con.say("everything is up after %s", time.Since(start).Round(100*time.Millisecond))
	st.con.raw(st.summary())
	// The one line scripts and tests wait for.
	st.con.raw("ready\n")
	return nil
}

// build compiles every binary into STATE/bin with one `go build`, which shares the build cache with
// everything else and relinks only binaries whose inputs changed (go build leaves an up-to-date
// binary alone), so a restart with nothing changed builds in about a second.
func (st *stack) build(ctx context.Context) error {
	pkgs := []string{"./emulator/spanneremu/cmd/spanneremu", "./emulator/tasksemu/cmd/tasksemu", "./emulator/paysim/cmd/paysim", "./emulator/authemu/cmd/authemu", mailpitPackage}
	if !st.cfg.noServices {
		pkgs = append(pkgs, localenv.Packages()...)
	}
	start := time.Now()
	st.con.say("building %d binaries into %s", len(pkgs), st.state.bin())
	w := &lineWriter{emit: func(line string) { st.con.line("go build", line) }}
	err := localenv.Build(ctx, st.cfg.repo, st.state.bin(), pkgs, w)
	w.flush()
	if err != nil {
		return fmt.Errorf("%w (the compiler's messages are above)", err)
	}
	st.con.say("built in %s", time.Since(start).Round(100*time.Millisecond))
	return nil
}

func (st *stack) bin(name string) string { return filepath.Join(st.state.bin(), name) }

func (st *stack) start(spec procSpec) (*proc, error) {
	p, err := startProc(st.con, spec, st.state.log(spec.name), st.exited)
	if err != nil {
		return nil, err
	}
	st.procs = append(st.procs, p)
	return p, nil
}

// startEmulators starts both emulators and waits for their ready lines.
func (st *stack) startEmulators(ctx context.Context) error {
	var verbose []string
	if st.cfg.verbose {
		verbose = []string{"-v"}
	}
	spanner, err := st.start(procSpec{
		name: "spanneremu",
		bin:  st.bin("spanneremu"),
		args: append([]string{"-host", host, "-port", strconv.Itoa(st.port(spannerPort)),
			"-data-dir", st.state.spanner()}, verbose...),
		readyText: "spanneremu: ready on",
	})
	if err != nil {
		return err
	}
	tasks, err := st.start(procSpec{
		name: "tasksemu",
		bin:  st.bin("tasksemu"),
		args: append([]string{"-host", host, "-port", strconv.Itoa(st.port(tasksPort)),
			"-http-port", strconv.Itoa(st.port(tasksHTTPPort)), "-data-dir", st.state.tasks(),
			// The metadata server's "default" account of the relay, whose ID tokens it presents to
			// the consumers' ledger endpoints (GCE_METADATA_HOST below).
			"-service-account", relayServiceAccount}, verbose...),
		readyText: "tasksemu: ready on",
	})
	if err != nil {
		return err
	}
	// The payment sandbox delivers its webhooks to the gateway's endpoints (signed with the
	// secrets the gateway is given, internal/localenv).
	stripeHook, komojuHook := st.local().WebhookURLs()
	pay, err := st.start(procSpec{
		name: "paysim",
		bin:  st.bin("paysim"),
		args: append([]string{"-host", host, "-port", strconv.Itoa(st.port(paysimPort)),
			"-api-key", localenv.StripeAPIKey, "-webhook-url", stripeHook, "-webhook-secret", localenv.StripeWebhookSecret,
			"-webhook-events", localenv.StripeWebhookEvents,
			"-komoju-secret-key", localenv.KomojuSecretKey, "-komoju-webhook-url", komojuHook,
			"-komoju-webhook-secret", localenv.KomojuWebhookSecret, "-data-dir", st.state.paysim()}, verbose...),
		readyText: "paysim: ready on",
	})
	if err != nil {
		return err
	}
	// The customers' identity provider, Identity Platform's stand-in: orders verifies the tokens
	// it signs (CUSTOMER_ISSUER); its key is kept in the state directory, so a customer's token
	// outlives a restart as it would in production.
	auth, err := st.start(procSpec{
		name: "authemu",
		bin:  st.bin("authemu"),
		args: append([]string{"-host", host, "-port", strconv.Itoa(st.port(authPort)),
			"-audience", localcloud.CustomerAudience, "-data-dir", st.state.auth()}, verbose...),
		readyText: "authemu: ready on",
	})
	if err != nil {
		return err
	}
	// The mail server the notifications service sends to, with its web inbox; its messages are
	// kept in the state directory like the emulators' data.
	mail, err := st.start(procSpec{
		name: "mailpit",
		bin:  st.bin("mailpit"),
		args: []string{"--smtp", st.smtpAddr(), "--listen", fmt.Sprintf("%s:%d", host, st.port(mailWebPort)),
			"--database", filepath.Join(st.state.mail(), "mailpit.db")},
		readyText: "[http] accessible via",
	})
	if err != nil {
		return err
	}
	for _, p := range []*proc{spanner, tasks, pay, auth, mail} {
		if err := st.waitReady(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// waitReady waits for an emulator's ready line.
func (st *stack) waitReady(ctx context.Context, p *proc) error {
	t := time.NewTimer(st.cfg.readyTimeout)
	defer t.Stop()
	select {
	case <-p.ready:
		return nil
	case <-p.Done():
		return p.exitError()
	case <-t.C:
		return fmt.Errorf("%s did not print its ready line within %s (-ready-timeout); see %s", p.name, st.cfg.readyTimeout, st.state.log(p.name))
	case <-ctx.Done():
		return ctx.Err()
	}
}

// serviceEnv is the environment of a service: the same variables it reads on Cloud Run, pointed at
// the emulators and the payment sandbox (internal/localenv, shared with the e2e harness).
func (st *stack) serviceEnv(s service) []string {
	svc, _ := topology.Lookup(s.name)
	return st.local().Env(s.name, svc)
}

// local describes this stack to internal/localenv.
func (st *stack) local() localenv.Stack {
	return localenv.Stack{
		Instance: instance, SpannerAddr: st.spannerAddr(), TasksAddr: st.tasksAddr(), TasksHTTP: st.tasksHTTP(),
		PaysimURL: st.paysimURL(), SMTPAddr: st.smtpAddr(), AuthURL: st.authURL(), LogLevel: st.cfg.logLevel,
		// Orders ship on their own, so that they complete: the carrier "collects" a shipment
		// this long after the order is confirmed.
		CarrierAfter: carrierAfter,
		URL:          func(name string) string { return st.serviceURL(serviceNamed(name)) },
		Port:         func(name string) int { return st.port(serviceNamed(name).port) },
	}
}

// operatorAccount may use the services' operator endpoints; the README shows how to get its ID token
// from the Tasks emulator.
const operatorAccount = localcloud.Operator

// relayServiceAccount is the identity the relay asks Cloud Tasks to sign task tokens as.
const relayServiceAccount = localcloud.ServiceAccount

// serviceNamed returns the service called name; the list is fixed, so a miss is a programming error.
func serviceNamed(name string) service {
	for _, s := range services {
		if s.name == name {
			return s
		}
	}
	panic("devstack: no service " + name)
}

// startServices starts the five services and waits until every /readyz answers 200.
func (st *stack) startServices(ctx context.Context) error {
	var started []*proc
	for _, s := range services {
		p, err := st.start(procSpec{name: s.name, bin: st.bin(s.name), env: st.serviceEnv(s)})
		if err != nil {
			return err
		}
		started = append(started, p)
	}
	return st.waitHealthy(ctx, started)
}

// waitHealthy polls every service's /readyz until each has answered 200 once, failing fast when a
// process exits and after -ready-timeout otherwise.
func (st *stack) waitHealthy(ctx context.Context, procs []*proc) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(st.cfg.readyTimeout)
	start := time.Now()
	pending := map[string]service{}
	for _, s := range services {
		pending[s.name] = s
	}
	last := map[string]string{} // the latest answer of each pending service, for the timeout message
	interval := 50 * time.Millisecond
	for {
		// An emulator dying makes the services unready too: report the cause, not the symptom.
		for _, p := range st.procs {
			if p.Exited() {
				return p.exitError()
			}
		}
		for name, s := range pending {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, st.serviceURL(s)+"/readyz", nil)
			resp, err := client.Do(req)
			if err != nil {
				last[name] = err.Error()
				continue
			}
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				st.con.say("%s is ready (%s/readyz answered 200 after %s)", name, st.serviceURL(s), time.Since(start).Round(10*time.Millisecond))
				delete(pending, name)
				continue
			}
			last[name] = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
		}
		if len(pending) == 0 {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			fmt.Fprintf(&b, "not ready within %s (-ready-timeout):", st.cfg.readyTimeout)
			for _, p := range procs {
				if _, ok := pending[p.name]; !ok {
					continue
				}
				fmt.Fprintf(&b, "\n  %s: last /readyz answer: %s; its last lines:", p.name, last[p.name])
				for _, l := range p.tail.get() {
					fmt.Fprintf(&b, "\n    %s", l)
				}
			}
			return errors.New(b.String())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
		interval = min(interval*2, 250*time.Millisecond)
	}
}

// serve waits until Ctrl-C (ctx) or until a process exits on its own, which stops the whole stack:
// a half-running system would only produce confusing errors elsewhere. Meanwhile the local scheduler
// calls Cloud Scheduler's jobs every -jobs-every (internal/localscheduler), as production does.
func (st *stack) serve(ctx context.Context) error {
	if !st.cfg.noServices && st.cfg.jobsEvery > 0 {
		jobs, stop := context.WithCancel(ctx)
		defer stop()
		s := localscheduler.New(localscheduler.Config{Metadata: st.tasksHTTP(), URL: func(name string) string { return st.serviceURL(serviceNamed(name)) },
			Every: st.cfg.jobsEvery, Logf: st.con.say})
		go s.Run(jobs)
		st.con.say("Cloud Scheduler's jobs run every %s as scheduler@ (-jobs-every)", st.cfg.jobsEvery)
	}
	select {
	case <-ctx.Done():
		st.con.say("stopping (press Ctrl-C again to kill at once)")
		return ctx.Err()
	case p := <-st.exited:
		return fmt.Errorf("%w; stopping everything", p.exitError())
	}
}

// down stops every process, services before the emulators they depend on (reverse start order).
func (st *stack) down() {
	for i := len(st.procs) - 1; i >= 0; i-- {
		p := st.procs[i]
		if !p.Exited() {
			st.con.say("stopping %s (pid %d)", p.name, p.Pid())
		}
		p.stop(st.cfg.stopTimeout, st.force, st.con)
	}
	st.procs = nil
}

// summary is the table printed once everything is ready.
func (st *stack) summary() string {
	var b strings.Builder
	row := func(cols ...string) { fmt.Fprintf(&b, "  %-22s %-26s %s\n", cols[0], cols[1], cols[2]) }
	b.WriteString("\n")
	row("WHAT", "WHERE", "NOTES")
	if !st.cfg.noServices {
		for _, s := range services {
			what := "/healthz /readyz /metrics; "
			switch {
			case s.database != "":
				what += "database " + s.database
			case s.name == topology.Console:
				what = "the operators' console: sign in at /login?token= (README, Operating it)"
			default:
				what += "reads every outbox"
			}
			row(s.name, st.serviceURL(s), what)
		}
	}
	row("Spanner emulator", st.spannerAddr(), "gRPC; instance "+instance)
	row("Cloud Tasks emulator", st.tasksAddr(), "gRPC; queues "+location+"/queues/*-inbox")
	row("Cloud Tasks status", st.tasksHTTP()+"/", "queues and depths; /status (JSON), /metrics, /jwks")
	row("payment sandbox", st.paysimURL(), "Stripe /v1/*, KOMOJU /api/v1/*; /_sandbox/ pays slips, moves the clock")
	row("customer sign-in", st.authURL(), "a customer's ID token: curl -s -X POST "+strings.TrimPrefix(st.authURL(), "http://")+`/token -d '{"sub":"ali"}'`)
	row("mail inbox (Mailpit)", st.mailURL()+"/", "every e-mail sent to customers; SMTP on "+st.smtpAddr()+"; API /api/v1/messages")
	row("logs", st.state.logs(), "one NAME.log per process")
	b.WriteString("\n  Point tools and your own processes at the emulators with:\n")
	fmt.Fprintf(&b, "    export SPANNER_EMULATOR_HOST=%s CLOUD_TASKS_EMULATOR_HOST=%s GOOGLE_CLOUD_PROJECT=%s\n", st.spannerAddr(), st.tasksAddr(), project)
	var dbs []string
	for _, db := range dbschema.Databases() {
		dbs = append(dbs, db.Name)
	}
	fmt.Fprintf(&b, "  Databases: %s/databases/{%s}\n", instance, strings.Join(dbs, ","))
	if st.cfg.noServices {
		b.WriteString("  Services were not started (-no-services); each one reads PORT, SPANNER_DATABASE, LOG_LEVEL and the variables above.\n")
	}
	if !st.cfg.smoke {
		b.WriteString("  Press Ctrl-C to stop everything.\n")
	}
	b.WriteString("\n")
	return b.String()
}

func notifySignals(c chan<- os.Signal) { signal.Notify(c, stopSignals...) }
