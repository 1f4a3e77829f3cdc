package e2e

import (
	"context"
	"github.com/spanmart/spanmart/internal/topology"
	"net/http"
	"testing"
	"time"

	"github.com/spanmart/spanmart/e2e/harness"
)

// TestStack checks the harness itself: every process is ready with the contract's environment, a
// killed process is restarted on its port, and the Tasks emulator comes back on the same ports
// with its queues.
func TestStack(t *testing.T) {
	s := harness.Start(t, harness.Options{})
	ctx := context.Background()
	t.Logf("start-up: %v", s.Timings)
	for _, name := range topology.Names() {
		r, err := s.Do(ctx, http.MethodGet, name, "/healthz", nil)
		if err != nil || r.Status != http.StatusOK {
			t.Errorf("%s /healthz: %v %v", name, r, err)
		}
	}
	s.Kill("fulfillment")
	if _, err := s.Do(ctx, http.MethodGet, "fulfillment", "/healthz", nil); err == nil {
		t.Error("fulfillment answered after SIGKILL")
	}
	if err := s.Start(ctx, "fulfillment"); err != nil {
		t.Fatal(err)
	}

	if err := s.StopTasks(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(s.TasksHTTP() + "/status"); err == nil {
		t.Error("the Tasks emulator answered after StopTasks")
	}
	if err := s.StartTasks(ctx); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, "the restarted Tasks emulator lists the 4 queues", func() bool {
		qs, err := queues(s)
		return err == nil && len(qs) == 4
	})
	code, err := s.WaitExit(ctx, "orders", 10*time.Millisecond)
	if err == nil {
		t.Errorf("WaitExit on a running process returned exit %d", code)
	}
}
