package outboxlib_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"

	"github.com/spanmart/spanmart/emulator/tasksemu"
	"github.com/spanmart/spanmart/pkg/spannertest"
)

// Shared by every test of the package: one Spanner (a fresh database per test) and one Cloud Tasks
// emulator (a fresh queue per test), both in-process.
var (
	env   *spannertest.Env
	tasks *tasksemu.Server
	ct    *cloudtasks.Client
)

func TestMain(m *testing.M) {
	ctx := context.Background()
	var err error
	tasks, err = tasksemu.Start(ctx, tasksemu.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ct, err = cloudtasks.NewClient(ctx, tasks.ClientOptions()...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := spannertest.Main(m, &env)
	ct.Close()
	tasks.Close()
	os.Exit(code)
}

// waitFor polls cond until it holds or the deadline passes; cond describes what it saw.
func waitFor(t *testing.T, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, saw := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s; last saw: %s", timeout, saw)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
