package main

import (
	"os"
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
	// TestBinary re-runs this test binary as the service itself.
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

	got, err := loadConfig(platformtest.Getenv(map[string]string{"SPANNER_DATABASE": "projects/shop-prod/instances/main/databases/orders"}))
	if err != nil {
		t.Fatal(err)
	}
	wantCfg := config{
		Config:   platform.Config{Service: "orders", Port: 8080, LogLevel: "info", Project: "shop-prod", MaxBodyBytes: 1 << 20},
		Database: platform.DatabaseName{Project: "shop-prod", Instance: "main", Database: "orders"},
	}
	if diff := cmp.Diff(wantCfg, got, cmpopts.IgnoreFields(platform.Config{}, "Version")); diff != "" {
		t.Errorf("loadConfig mismatch (-want +got):\n%s", diff)
	}
}

func TestBinary(t *testing.T) {
	platformtest.TestBinary(t, env, platformtest.Binary[config]{
		Name:    serviceName,
		Schemas: []string{dbschema.Orders},
		Env:     func(dbs []string) map[string]string { return map[string]string{"SPANNER_DATABASE": dbs[0]} },
		Load:    loadConfig,
		Run:     run,
	})
}
