package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spanmart/spanmart/e2e/harness"
	"github.com/spanmart/spanmart/e2e/soak"
)

// TestSoak is the short soak: the code of `make soak` (package e2e/soak) for about 40 seconds of
// load at 2 orders/s, with a fault of every kind (a deck of every kind is dealt before any kind
// comes up twice), the sandbox's clock jumping once during the load and once after it. Every
// invariant must hold once the system has drained.
func TestSoak(t *testing.T) {
	s := harness.Start(t, soak.StackOptions())
	cfg := soak.Config{
		Duration: 40 * time.Second, Rate: 2, Seed: 14,
		FaultGap:   [2]time.Duration{2 * time.Second, 3500 * time.Millisecond},
		ClockEvery: 20 * time.Second, ActWait: 90 * time.Second, DrainTimeout: 2 * time.Minute,
		Logf: t.Logf,
	}
	res := soak.Run(context.Background(), s, cfg)
	var summary strings.Builder
	res.WriteSummary(&summary)
	t.Log(summary.String())
	if res.Err != nil {
		t.Fatalf("the soak did not run: %v", res.Err)
	}
	for _, c := range res.Checks {
		if !c.Passed() {
			t.Errorf("invariant failed: %s", c)
		}
	}
	injected := map[string]int{}
	for _, f := range res.Faults {
		injected[f.Name()]++
	}
	for _, name := range soak.FaultNames() {
		if injected[name] == 0 {
			t.Errorf("no %s fault was injected", name)
		}
	}
	if len(res.ClockJumps) < 2 {
		t.Errorf("the sandbox's clock jumped %d times, want once during the load and once after", len(res.ClockJumps))
	}
}
