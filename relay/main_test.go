package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/pkg/platform/platformtest"
	"github.com/spanmart/spanmart/pkg/spannertest"
)

var env *spannertest.Env

func TestMain(m *testing.M) { os.Exit(platformtest.Main(m, &env, main)) }

func TestLoadConfig(t *testing.T) {
	_, err := loadConfig(platformtest.Getenv(map[string]string{"MAX_BODY_BYTES": "lots"}))
	want := `missing RELAY_SOURCES; invalid MAX_BODY_BYTES "lots": not an integer`
	if err == nil || err.Error() != want {
		t.Errorf("loadConfig error = %v, want %s", err, want)
	}

	got, err := loadConfig(platformtest.Getenv(map[string]string{
		"RELAY_SOURCES": "projects/shop-prod/instances/main/databases/orders, projects/shop-prod/instances/main/databases/payments",
		"PORT":          "9000",
	}))
	if err != nil {
		t.Fatal(err)
	}
	wantCfg := config{
		Config: platform.Config{Service: "relay", Port: 9000, LogLevel: "info", Project: "shop-prod", MaxBodyBytes: 1 << 20},
		Sources: []platform.DatabaseName{
			{Project: "shop-prod", Instance: "main", Database: "orders"},
			{Project: "shop-prod", Instance: "main", Database: "payments"},
		},
	}
	if diff := cmp.Diff(wantCfg, got, cmpopts.IgnoreFields(platform.Config{}, "Version")); diff != "" {
		t.Errorf("loadConfig mismatch (-want +got):\n%s", diff)
	}
}

func TestMainExits(t *testing.T) {
	out, code := platformtest.RunMain(t, "RELAY_SOURCES=orders")
	if code != 2 {
		t.Errorf("exit code = %d, want 2", code)
	}
	want := "relay: configuration: invalid RELAY_SOURCES \"orders\": orders: want projects/PROJECT/instances/INSTANCE/databases/DATABASE\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("output mismatch (-want +got):\n%s", diff)
	}
}

func TestBinary(t *testing.T) {
	platformtest.TestBinary(t, env, platformtest.Binary[config]{
		Name:    serviceName,
		Schemas: []string{dbschema.Orders, dbschema.Payments},
		Env: func(dbs []string) map[string]string {
			return map[string]string{"RELAY_SOURCES": strings.Join(dbs, ",")}
		},
		Load: loadConfig,
		Run:  run,
	})
}

func TestRun(t *testing.T) {
	_, orders := env.NewDatabase(t, dbschema.Orders)
	_, payments := env.NewDatabase(t, dbschema.Payments)
	cfg, err := loadConfig(platformtest.Getenv(map[string]string{"RELAY_SOURCES": orders + "," + payments, "PORT": "0"}))
	if err != nil {
		t.Fatal(err)
	}
	log, logs := platformtest.NewLogger(t, serviceName)
	r := platformtest.Start(t, func(ctx context.Context) error { return run(ctx, cfg, log) })
	url := platformtest.StartedURL(t, logs)

	started := logs.Find(t, "starting")
	if diff := cmp.Diff([]any{orders, payments}, started["sources"]); started["service"] != "relay" || diff != "" {
		t.Errorf("starting line = %v, want service relay and both sources", started)
	}
	platformtest.WaitStatus(t, url+"/healthz", 200)
	var ready struct{ Checks map[string]string }
	if err := json.Unmarshal(platformtest.WaitStatus(t, url+"/readyz", 200), &ready); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"spanner " + orders: "ok", "spanner " + payments: "ok"}
	if diff := cmp.Diff(want, ready.Checks); diff != "" {
		t.Errorf("/readyz checks mismatch (-want +got):\n%s", diff)
	}
	if err := r.Stop(t); err != nil {
		t.Errorf("run = %v, want nil after cancellation", err)
	}
}

func TestRunOneSourceMissing(t *testing.T) {
	_, orders := env.NewDatabase(t, dbschema.Orders)
	missing := spannertest.Instance + "/databases/nosuch"
	cfg, err := loadConfig(platformtest.Getenv(map[string]string{"RELAY_SOURCES": orders + "," + missing, "PORT": "0"}))
	if err != nil {
		t.Fatal(err)
	}
	log, logs := platformtest.NewLogger(t, serviceName)
	r := platformtest.Start(t, func(ctx context.Context) error { return run(ctx, cfg, log) })
	url := platformtest.StartedURL(t, logs)
	var problem map[string]any
	if err := json.Unmarshal(platformtest.WaitStatus(t, url+"/readyz", 503), &problem); err != nil {
		t.Fatal(err)
	}
	if got, want := problem["detail"], "not ready: spanner "+missing; got != want {
		t.Errorf("detail = %v, want %s", got, want)
	}
	// The count is recorded just after the response is written, so poll.
	platformtest.Eventually(t, "/metrics to count the failed readiness probe", func() bool {
		return strings.Contains(string(platformtest.WaitStatus(t, url+"/metrics", 200)), `route="/readyz",status="503"`)
	})
	if err := r.Stop(t); err != nil {
		t.Errorf("run = %v, want nil after cancellation", err)
	}
}
