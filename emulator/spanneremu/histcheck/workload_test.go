package histcheck

import (
	"context"
	"testing"
	"time"
)

// TestWorkloads runs every workload against the emulator for a few seconds with 8 workers
// and a fixed seed, on few keys so that transactions conflict often, and reports every anomaly
// the checkers find (at most 20 of each kind in full, then a count). A register history that is
// not linearizable leaves porcupine's visualization in the temporary directory, named in the report.
func TestWorkloads(t *testing.T) {
	for _, tc := range []struct {
		workload string
		duration time.Duration
		keys     int
	}{
		{Bank, 5 * time.Second, 6},
		{ListAppend, 4 * time.Second, 6},
		{Register, 3 * time.Second, 4},
	} {
		t.Run(tc.workload, func(t *testing.T) {
			client := newDatabase(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, _, err := Run(ctx, client, tc.workload, Options{Workers: 8, Duration: tc.duration, Keys: tc.keys, Seed: 1})
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
		})
	}
}
