package histcheck

import (
	"context"
	"testing"
	"time"

	"github.com/spanmart/spanmart/emulator/spanneremu"
)

// TestWorkloads runs every workload against the emulator for a few seconds with 8 workers
// and a fixed seed, on few keys so that transactions conflict often, and reports every anomaly
// the checkers find (at most 20 of each kind in full, then a count). A register history that is
// not linearizable leaves porcupine's visualization in the temporary directory, named in the report.
//
// Each runs twice: on an emulator keeping version history, with reads at exact timestamps, and
// on one keeping none (as the project's stacks run it), where the commits queued for the lock are
// committed in groups, with strong reads instead of exact ones.
func TestWorkloads(t *testing.T) {
	var groupedCommits int64
	for _, tc := range []struct {
		workload string
		duration time.Duration
		keys     int
	}{
		{Bank, 5 * time.Second, 6},
		{ListAppend, 4 * time.Second, 6},
		{Register, 3 * time.Second, 4},
	} {
		for _, mode := range []struct {
			name    string
			e       *emulator
			noExact bool
		}{{"history", &kept, false}, {"grouped", &grouped, true}} {
			t.Run(tc.workload+"/"+mode.name, func(t *testing.T) {
				client := newDatabase(t, *mode.e)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				var before spanneremu.Stats
				if mode.e.srv != nil {
					before = mode.e.srv.Stats()
				}
				opts := Options{Workers: 8, Duration: tc.duration, Keys: tc.keys, Seed: 1, NoExactReads: mode.noExact}
				res, _, err := Run(ctx, client, tc.workload, opts)
				if err != nil {
					t.Fatal(err)
				}
				t.Log(res.Header())
				if res.Committed == 0 {
					t.Errorf("no transaction committed")
				}
				for _, line := range res.Reports() {
					t.Errorf("%s", line)
				}
				if mode.noExact {
					n := mode.e.srv.Stats().GroupedCommits - before.GroupedCommits
					t.Logf("%d commits made in a lock holder's group", n)
					groupedCommits += n
				}
			})
		}
	}
	if groupedCommits == 0 {
		t.Errorf("no commit was made in a lock holder's group: the runs without history did not exercise group commit")
	}
}
