package histcheck

import (
	"context"
	"log"
	"os"
	"testing"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmart/spanmart/emulator/spanneremu"
)

// emulator is where the tests' databases are made: an admin on one instance, and the address the
// clients connect to.
type emulator struct {
	admin *Admin
	host  string
	srv   *spanneremu.Server // nil for one behind SPANNER_EMULATOR_HOST
}

// kept is the emulator the workloads run on with version history, as the emulator runs by
// default: one in-process emulator for the package, or SPANNER_EMULATOR_HOST when set. grouped
// is an in-process one without history (spanneremu.Options.NoHistory, as the project's stacks
// run it), whose commits queued for a database's lock are committed in groups.
var kept, grouped emulator

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := func(e *emulator, opts spanneremu.Options) bool {
		srv, err := spanneremu.Start(ctx, opts)
		if err != nil {
			log.Printf("histcheck: start emulator: %v", err)
			return false
		}
		e.srv, e.host = srv, srv.Addr()
		return true
	}
	kept.host = os.Getenv("SPANNER_EMULATOR_HOST")
	if kept.host == "" {
		if !start(&kept, spanneremu.Options{}) {
			return 1
		}
		defer kept.srv.Close()
	}
	if !start(&grouped, spanneremu.Options{NoHistory: true}) {
		return 1
	}
	defer grouped.srv.Close()
	for _, e := range []*emulator{&kept, &grouped} {
		// The clients follow SPANNER_EMULATOR_HOST when they are made.
		os.Setenv("SPANNER_EMULATOR_HOST", e.host)
		var err error
		if e.admin, err = NewAdmin(ctx, "histcheck", "test"); err != nil {
			log.Printf("histcheck: %v", err)
			return 1
		}
		defer e.admin.Close()
	}
	return m.Run()
}

// newDatabase creates a database with Schema on e for the test and returns a client on it; both
// go away when the test ends.
func newDatabase(t *testing.T, e emulator) *spanner.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name, err := e.admin.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := e.admin.DropDatabase(ctx, name); err != nil {
			t.Logf("drop %s: %v", name, err)
		}
	})
	t.Setenv("SPANNER_EMULATOR_HOST", e.host)
	client, err := NewClient(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return client
}
