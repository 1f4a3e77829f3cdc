package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/pkg/platform/platformtest"
	"github.com/spanmart/spanmart/pkg/spannertest"
)

var env *spannertest.Env

func TestMain(m *testing.M) {
	// TestMainExits re-runs this test binary as the service itself.
	if platformtest.IsMainProcess() {
		main()
		os.Exit(0)
	}
	os.Exit(spannertest.Main(m, &env))
}

func TestLoadConfig(t *testing.T) {
	_, err := loadConfig(platformtest.Getenv(map[string]string{"PORT": "x", "LOG_LEVEL": "verbose"}))
	want := `missing SPANNER_DATABASE; invalid PORT "x": not an integer; invalid LOG_LEVEL "verbose": want one of debug, info, warn, error`
	if err == nil || err.Error() != want {
		t.Errorf("loadConfig error = %v, want %s", err, want)
	}

	got, err := loadConfig(platformtest.Getenv(map[string]string{"SPANNER_DATABASE": "projects/shop-prod/instances/main/databases/notifications"}))
	if err != nil {
		t.Fatal(err)
	}
	wantCfg := config{
		Config:   platform.Config{Service: "notifications", Port: 8080, LogLevel: "info", Project: "shop-prod", MaxBodyBytes: 1 << 20},
		Database: platform.DatabaseName{Project: "shop-prod", Instance: "main", Database: "notifications"},
	}
	if diff := cmp.Diff(wantCfg, got, cmpopts.IgnoreFields(platform.Config{}, "Version")); diff != "" {
		t.Errorf("loadConfig mismatch (-want +got):\n%s", diff)
	}
}

func TestMainExits(t *testing.T) {
	out, code := platformtest.RunMain(t, "SPANNER_DATABASE=", "PORT=x")
	if code != 2 {
		t.Errorf("exit code = %d, want 2", code)
	}
	want := "notifications: configuration: missing SPANNER_DATABASE; invalid PORT \"x\": not an integer\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("output mismatch (-want +got):\n%s", diff)
	}
}

// TestMainSIGTERM runs the service as its own process, as Cloud Run does, and stops it the way
// Cloud Run does: it must drain and exit 0.
func TestMainSIGTERM(t *testing.T) {
	_, db := env.NewDatabase(t, dbschema.Notifications)
	p := platformtest.StartMain(t, "SPANNER_DATABASE="+db, "PORT=0", "LOG_LEVEL=debug")
	url := platformtest.StartedURL(t, p.Logs)
	platformtest.WaitStatus(t, url+"/readyz", 200)
	if code := p.Signal(t, syscall.SIGTERM); code != 0 {
		t.Errorf("exit code after SIGTERM = %d, want 0", code)
	}
	p.Logs.Find(t, "http server stopped")
}

func TestRun(t *testing.T) {
	_, db := env.NewDatabase(t, dbschema.Notifications)
	cfg, err := loadConfig(platformtest.Getenv(map[string]string{"SPANNER_DATABASE": db, "PORT": "0"}))
	if err != nil {
		t.Fatal(err)
	}
	log, logs := platformtest.NewLogger(t, serviceName)
	r := platformtest.Start(t, func(ctx context.Context) error { return run(ctx, cfg, log) })
	url := platformtest.StartedURL(t, logs)

	if started := logs.Find(t, "starting"); started["service"] != "notifications" || started["database"] != db {
		t.Errorf("starting line = %v, want service notifications and database %s", started, db)
	}
	platformtest.WaitStatus(t, url+"/healthz", 200)
	platformtest.WaitStatus(t, url+"/readyz", 200)
	var info map[string]string
	if err := json.Unmarshal(platformtest.WaitStatus(t, url+"/", 200), &info); err != nil {
		t.Fatal(err)
	}
	if info["service"] != "notifications" {
		t.Errorf("GET / = %v, want service notifications", info)
	}
	if metrics := string(platformtest.WaitStatus(t, url+"/metrics", 200)); !strings.Contains(metrics, "http_requests_total") {
		t.Error("/metrics lacks http_requests_total")
	}
	if err := r.Stop(t); err != nil {
		t.Errorf("run = %v, want nil after cancellation", err)
	}
}

func TestRunDatabaseMissing(t *testing.T) {
	cfg, err := loadConfig(platformtest.Getenv(map[string]string{"SPANNER_DATABASE": spannertest.Instance + "/databases/nosuch", "PORT": "0"}))
	if err != nil {
		t.Fatal(err)
	}
	log, logs := platformtest.NewLogger(t, serviceName)
	r := platformtest.Start(t, func(ctx context.Context) error { return run(ctx, cfg, log) })
	url := platformtest.StartedURL(t, logs)
	platformtest.WaitStatus(t, url+"/healthz", 200)
	platformtest.WaitStatus(t, url+"/readyz", 503)
	if err := r.Stop(t); err != nil {
		t.Errorf("run = %v, want nil after cancellation", err)
	}
}
