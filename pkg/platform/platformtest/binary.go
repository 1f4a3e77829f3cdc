package platformtest

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/zap"

	"github.com/spanmart/spanmart/pkg/spannertest"
)

// Binary describes a Spanmart binary for TestBinary: its name, how to build a valid environment
// for it, and its own loadConfig and run functions.
type Binary[C any] struct {
	Name string
	// Schemas are the pkg/dbschema names of the databases it connects to; each test gets fresh ones.
	Schemas []string
	// Env returns a complete, valid environment (PORT aside) for the given full database names,
	// in the order of Schemas.
	Env  func(databases []string) map[string]string
	Load func(getenv func(string) string) (C, error)
	Run  func(context.Context, C, *zap.Logger) error
}

// TestBinary checks what every binary must do, in process and as a real process started the way
// Cloud Run starts it: serve /, /healthz, /readyz and /metrics against real (emulated) databases,
// report not ready while a database is missing, exit 2 with one message on a bad environment, and
// drain and exit 0 on SIGTERM. The package's TestMain must run main when IsMainProcess is true.
func TestBinary[C any](t *testing.T, env *spannertest.Env, b Binary[C]) {
	databases := func(t *testing.T) []string {
		var names []string
		for _, s := range b.Schemas {
			_, name := env.NewDatabase(t, s)
			names = append(names, name)
		}
		return names
	}
	serve := func(t *testing.T, dbs []string) (url string, logs *Logs, stop func() error) {
		vars := b.Env(dbs)
		vars["PORT"] = "0"
		cfg, err := b.Load(Getenv(vars))
		if err != nil {
			t.Fatal(err)
		}
		log, logs := NewLogger(t, b.Name)
		r := Start(t, func(ctx context.Context) error { return b.Run(ctx, cfg, log) })
		return StartedURL(t, logs), logs, func() error { return r.Stop(t) }
	}

	t.Run("serves", func(t *testing.T) {
		dbs := databases(t)
		url, logs, stop := serve(t, dbs)
		started := logs.Find(t, "starting")
		line, _ := json.Marshal(started)
		for _, db := range dbs {
			if started["service"] != b.Name || !strings.Contains(string(line), db) {
				t.Errorf("starting line = %s, want service %s and database %s", line, b.Name, db)
			}
		}
		WaitStatus(t, url+"/healthz", 200)
		WaitStatus(t, url+"/readyz", 200)
		var info map[string]string
		if err := json.Unmarshal(WaitStatus(t, url+"/", 200), &info); err != nil || info["service"] != b.Name {
			t.Errorf("GET / = %v (%v), want service %s", info, err, b.Name)
		}
		if metrics := string(WaitStatus(t, url+"/metrics", 200)); !strings.Contains(metrics, `http_requests_total{method="GET",route="/readyz",status="200"}`) {
			t.Errorf("/metrics does not count the /readyz request:\n%s", metrics)
		}
		if err := stop(); err != nil {
			t.Errorf("run = %v, want nil after cancellation", err)
		}
	})

	t.Run("not ready without its databases", func(t *testing.T) {
		var dbs []string
		for i := range b.Schemas {
			dbs = append(dbs, fmt.Sprintf("%s/databases/nosuch-%d", spannertest.Instance, i))
		}
		url, _, stop := serve(t, dbs)
		WaitStatus(t, url+"/healthz", 200)
		WaitStatus(t, url+"/readyz", 503)
		if err := stop(); err != nil {
			t.Errorf("run = %v, want nil after cancellation", err)
		}
	})

	t.Run("process exits 2 on a bad environment", func(t *testing.T) {
		var vars []string
		for k := range b.Env(make([]string, len(b.Schemas))) {
			vars = append(vars, k+"=")
		}
		sort.Strings(vars)
		out, code := RunMain(t, append(vars, "PORT=x")...)
		if code != 2 {
			t.Errorf("exit code = %d, want 2", code)
		}
		if !strings.HasPrefix(out, b.Name+": configuration: ") || !strings.Contains(out, `invalid PORT "x"`) || strings.Count(out, "\n") != 1 {
			t.Errorf("output = %q, want one line %q naming every problem", out, b.Name+": configuration: ...")
		}
	})

	t.Run("process drains on SIGTERM", func(t *testing.T) {
		var vars []string
		for k, v := range b.Env(databases(t)) {
			vars = append(vars, k+"="+v)
		}
		p := StartMain(t, append(vars, "PORT=0")...)
		url := StartedURL(t, p.Logs)
		WaitStatus(t, url+"/readyz", 200)
		if code := p.Signal(t, syscall.SIGTERM); code != 0 {
			t.Errorf("exit code after SIGTERM = %d, want 0", code)
		}
		p.Logs.Find(t, "http server stopped")
	})
}

// Main is the TestMain of a binary's package: when TestBinary re-executes the test binary as the
// program it runs main, otherwise the tests, with a Spanner environment in *env.
//
//	func TestMain(m *testing.M) { os.Exit(platformtest.Main(m, &env, main)) }
func Main(m *testing.M, env **spannertest.Env, main func()) int {
	if IsMainProcess() {
		main()
		return 0
	}
	return spannertest.Main(m, env)
}
