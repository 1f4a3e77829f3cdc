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

// admin creates the tests' databases: one in-process emulator for the package (or
// SPANNER_EMULATOR_HOST when set), one instance, a fresh database per test.
var admin *Admin

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if os.Getenv("SPANNER_EMULATOR_HOST") == "" {
		srv, err := spanneremu.Start(ctx, spanneremu.Options{})
		if err != nil {
			log.Printf("histcheck: start emulator: %v", err)
			return 1
		}
		defer srv.Close()
		os.Setenv("SPANNER_EMULATOR_HOST", srv.Addr())
	}
	var err error
	admin, err = NewAdmin(ctx, "histcheck", "test")
	if err != nil {
		log.Printf("histcheck: %v", err)
		return 1
	}
	defer admin.Close()
	return m.Run()
}

// newDatabase creates a database with Schema for the test and returns a client on it; both
// go away when the test ends.
func newDatabase(t *testing.T) *spanner.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name, err := admin.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := admin.DropDatabase(ctx, name); err != nil {
			t.Logf("drop %s: %v", name, err)
		}
	})
	client, err := NewClient(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return client
}
