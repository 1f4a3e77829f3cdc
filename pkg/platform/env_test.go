package platform_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/pkg/platform/platformtest"
)

func TestEnvReportsEveryProblemAtOnce(t *testing.T) {
	env := platform.NewEnv(platformtest.Getenv(map[string]string{
		"PORT":           "x",
		"LOG_LEVEL":      "loud",
		"MAX_BODY_BYTES": "0",
		"PPROF_ENABLED":  "yes",
		"RELAY_SOURCES":  "projects/p/instances/inst/databases/db,nonsense",
	}))
	env.Database("SPANNER_DATABASE")
	env.Required("OTHER")
	env.Databases("RELAY_SOURCES")
	platform.LoadConfig(env, "svc", "")
	err := env.Err()
	if err == nil {
		t.Fatal("Err() = nil, want an error")
	}
	want := `missing SPANNER_DATABASE, OTHER; ` +
		`invalid RELAY_SOURCES "projects/p/instances/inst/databases/db,nonsense": nonsense: want projects/PROJECT/instances/INSTANCE/databases/DATABASE; ` +
		`invalid PORT "x": not an integer; ` +
		`invalid LOG_LEVEL "loud": want one of debug, info, warn, error; ` +
		`invalid MAX_BODY_BYTES "0": want 1..1099511627776; ` +
		`invalid PPROF_ENABLED "yes": want one of true, false`
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("Err() mismatch (-want +got):\n%s", diff)
	}
}

func TestLoadConfigDefaults(t *testing.T) {
	env := platform.NewEnv(platformtest.Getenv(nil))
	got := platform.LoadConfig(env, "orders", "proj")
	if err := env.Err(); err != nil {
		t.Fatal(err)
	}
	want := platform.Config{Service: "orders", Port: 8080, LogLevel: "info", Project: "proj", MaxBodyBytes: 1 << 20,
		MaxInFlight: platform.DefaultMaxInFlight, AdmissionWait: platform.DefaultAdmissionWait, AdmissionWaitCustomer: platform.DefaultAdmissionWaitCustomer}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(platform.Config{}, "Version")); diff != "" {
		t.Errorf("LoadConfig mismatch (-want +got):\n%s", diff)
	}
	if got.Version == "" {
		t.Error("Version is empty")
	}
	if got.ServerOptions(nil).TrustForwardedFor {
		t.Error("ServerOptions.TrustForwardedFor = true off Cloud Run, want false")
	}
}

func TestLoadConfigFromEnv(t *testing.T) {
	env := platform.NewEnv(platformtest.Getenv(map[string]string{
		"K_SERVICE":               "orders-canary",
		"K_REVISION":              "orders-00042-abc",
		"PORT":                    "0",
		"LOG_LEVEL":               "WARN",
		"GOOGLE_CLOUD_PROJECT":    "prod",
		"MAX_BODY_BYTES":          "2048",
		"PPROF_ENABLED":           "TRUE",
		"MAX_IN_FLIGHT":           "0",
		"ADMISSION_WAIT":          "100ms",
		"ADMISSION_WAIT_CUSTOMER": "50ms",
	}))
	got := platform.LoadConfig(env, "orders", "proj")
	if err := env.Err(); err != nil {
		t.Fatal(err)
	}
	want := platform.Config{Service: "orders-canary", Version: "orders-00042-abc", Port: 0, LogLevel: "warn", Project: "prod", MaxBodyBytes: 2048, Profiling: true, CloudRun: true,
		MaxInFlight: 0, AdmissionWait: 100 * time.Millisecond, AdmissionWaitCustomer: 50 * time.Millisecond}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("LoadConfig mismatch (-want +got):\n%s", diff)
	}
	// On Cloud Run (K_REVISION set) the front end's X-Forwarded-For entry is trusted.
	if o := got.ServerOptions(nil); !o.TrustForwardedFor {
		t.Error("ServerOptions.TrustForwardedFor = false on Cloud Run, want true")
	}
	// MAX_IN_FLIGHT=0 bounds nothing: ServerOptions' -1 (its 0 is the default).
	if o := got.ServerOptions(nil); o.MaxInFlight != -1 || o.AdmissionWait != 100*time.Millisecond {
		t.Errorf("ServerOptions: MaxInFlight %d, AdmissionWait %v; want -1 and 100ms", o.MaxInFlight, o.AdmissionWait)
	}
}

func TestLoadServiceConfig(t *testing.T) {
	env := platform.NewEnv(platformtest.Getenv(map[string]string{"PORT": "x", "LOG_LEVEL": "verbose"}))
	platform.LoadServiceConfig(env, "orders")
	want := `missing SPANNER_DATABASE; invalid PORT "x": not an integer; invalid LOG_LEVEL "verbose": want one of debug, info, warn, error`
	if err := env.Err(); err == nil || err.Error() != want {
		t.Errorf("Err() = %v, want %s", err, want)
	}

	env = platform.NewEnv(platformtest.Getenv(map[string]string{"SPANNER_DATABASE": "projects/shop-prod/instances/main/databases/orders"}))
	got := platform.LoadServiceConfig(env, "orders")
	if err := env.Err(); err != nil {
		t.Fatal(err)
	}
	want2 := platform.ServiceConfig{
		Config: platform.Config{Service: "orders", Port: 8080, LogLevel: "info", Project: "shop-prod", MaxBodyBytes: 1 << 20,
			MaxInFlight: platform.DefaultMaxInFlight, AdmissionWait: platform.DefaultAdmissionWait, AdmissionWaitCustomer: platform.DefaultAdmissionWaitCustomer},
		Database: platform.DatabaseName{Project: "shop-prod", Instance: "main", Database: "orders"},
	}
	if diff := cmp.Diff(want2, got, cmpopts.IgnoreFields(platform.Config{}, "Version")); diff != "" {
		t.Errorf("LoadServiceConfig mismatch (-want +got):\n%s", diff)
	}
}

func TestEnvDatabases(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		want        []platform.DatabaseName
		wantErr     string
	}{
		{
			name:  "two",
			value: " projects/p/instances/inst/databases/orders , projects/p/instances/inst/databases/payments",
			want: []platform.DatabaseName{
				{Project: "p", Instance: "inst", Database: "orders"},
				{Project: "p", Instance: "inst", Database: "payments"},
			},
		},
		{name: "duplicate", value: "projects/p/instances/inst/databases/orders,projects/p/instances/inst/databases/orders",
			wantErr: `invalid RELAY_SOURCES "projects/p/instances/inst/databases/orders,projects/p/instances/inst/databases/orders": projects/p/instances/inst/databases/orders is listed twice`},
		{name: "only commas", value: ",,", wantErr: `invalid RELAY_SOURCES ",,": no database names`},
		{name: "unset", value: "", wantErr: "missing RELAY_SOURCES"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := platform.NewEnv(platformtest.Getenv(map[string]string{"RELAY_SOURCES": tc.value}))
			got := env.Databases("RELAY_SOURCES")
			var gotErr string
			if err := env.Err(); err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, gotErr); diff != "" {
				t.Errorf("error mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Databases mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseDatabaseName(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    platform.DatabaseName
		wantErr bool
	}{
		{in: "projects/spanmart-local/instances/dev/databases/orders", want: platform.DatabaseName{Project: "spanmart-local", Instance: "dev", Database: "orders"}},
		{in: "projects/example.com:shop/instances/main-1/databases/pay_ments", want: platform.DatabaseName{Project: "example.com:shop", Instance: "main-1", Database: "pay_ments"}},
		{in: "orders", wantErr: true},
		{in: "projects/p/instances/inst/databases/", wantErr: true},
		{in: "projects/p/instances/i/databases/d", wantErr: true},
		{in: "projects/p/instances/inst/databases/d/extra", wantErr: true},
		{in: "projects/P/instances/inst/databases/d", wantErr: true},
		{in: "projects/p/instances/1i/databases/d", wantErr: true},
		{in: "projects/p/instances/inst/databases/this-name-is-much-too-long-for-spanner", wantErr: true},
		{in: "projects/p/instances/inst/databases/Orders", wantErr: true},
		{in: "projects/p/instance/i/databases/d", wantErr: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := platform.ParseDatabaseName(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseDatabaseName(%q) error = %v, want error %v", tc.in, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			if err == nil && got.String() != tc.in {
				t.Errorf("String() = %q, want %q", got.String(), tc.in)
			}
		})
	}
}
