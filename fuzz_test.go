package spanmart_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/spanmart/spanmart/internal/fuzzall"
)

// defaultFuzzTime is how long the README's test command fuzzes each target. The time counts from
// the start of the fuzzer, the seeds' coverage gathering included (up to a tenth of a second per
// seed for the targets that link the Spanner client or SQLite): with 2 s the SQL, delivery and
// order targets stopped before their first mutation on a busy two-core machine; 5 s leaves each a
// few seconds of mutation, for about two minutes in all, most of it building and linking the
// instrumented test binaries.
const defaultFuzzTime = "5s"

// TestFuzzTargets fuzzes every fuzz target of the repository for a short while (SPANMART_FUZZTIME,
// default 5s each; make fuzz runs them longer with tools/fuzzall). The targets are found in the
// test files (internal/fuzzall), so a new one is fuzzed here without being listed. A crasher fails
// the test with the fuzzer's output; its input stays in the target's testdata/fuzz directory.
func TestFuzzTargets(t *testing.T) {
	if testing.Short() {
		t.Skip("fuzzing is not short: run without -short")
	}
	targets, err := fuzzall.Find(".")
	if err != nil {
		t.Fatal(err)
	}
	// The discovery itself: targets known to exist are found (one per area of the code).
	for _, want := range []fuzzall.Target{
		{Dir: "pkg/platform", Name: "FuzzDecodeJSONStrict"},
		{Dir: "pkg/outboxlib", Name: "FuzzParseDelivery"},
		{Dir: "services/orders/internal/httpapi", Name: "FuzzDecodeOrder"},
		{Dir: "services/gateway-abstraction/internal/provider/stripe", Name: "FuzzParseWebhook"},
		{Dir: "services/gateway-abstraction/internal/provider/komoju", Name: "FuzzParseWebhook"},
		{Dir: "emulator/spanneremu/internal/engine", Name: "FuzzExecuteSQL"},
	} {
		if !slices.Contains(targets, want) {
			t.Errorf("fuzzall.Find did not find %s among %v", want, targets)
		}
	}
	fuzztime := os.Getenv("SPANMART_FUZZTIME")
	if fuzztime == "" {
		fuzztime = defaultFuzzTime
	}
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			t.Fatal("no go command: ", err)
		}
	}
	// Stopped a little before the test binary's own timeout, so that a run that is too slow fails
	// with its output rather than a panic of the whole package.
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-30*time.Second))
		defer cancel()
	}
	for _, target := range targets {
		t.Run(target.String(), func(t *testing.T) {
			// One fuzzing worker: the rest of go test ./... runs beside it on CI's two cores, and
			// each worker starts the package's TestMain (emulators) once more.
			out, err := fuzzall.Run(ctx, goBin, ".", target, fuzztime, "-parallel", "1")
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
}
