package faults

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// childEnv makes the test binary act as a program that hits the failpoint named in it.
const childEnv = "FAULTS_TEST_HIT"

func TestMain(m *testing.M) {
	if name, ok := os.LookupEnv(childEnv); ok {
		defer os.Stdout.WriteString("deferred cleanup ran\n") // must not run when the fault fires
		Hit(name)
		os.Stdout.WriteString("survived\n")
		return
	}
	os.Exit(m.Run())
}

// runChild re-executes the test binary as a program that calls Hit(hit) with SPANMART_FAULTS=faults.
func runChild(t *testing.T, faults, hit string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+hit, EnvVar+"="+faults)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	default:
		t.Fatalf("run child: %v", err)
	}
	return out.String(), errOut.String(), code
}

func TestHit(t *testing.T) {
	for _, tc := range []struct {
		name, faults, hit string
		fires             bool
	}{
		{name: "listed alone", faults: "orders.before_commit", hit: OrdersBeforeCommit, fires: true},
		{name: "listed among others", faults: "relay.after_enqueue, orders.after_commit", hit: OrdersAfterCommit, fires: true},
		{name: "not listed", faults: "orders.after_commit", hit: OrdersBeforeCommit},
		{name: "prefix is not a match", faults: "orders.before", hit: OrdersBeforeCommit},
		{name: "unset", faults: "", hit: RelayAfterEnqueue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runChild(t, tc.faults, tc.hit)
			if !tc.fires {
				if code != 0 || stdout != "survived\ndeferred cleanup ran\n" {
					t.Fatalf("exit %d, stdout %q, stderr %q; want exit 0 and the program to go on", code, stdout, stderr)
				}
				return
			}
			if code != ExitCode {
				t.Errorf("exit code %d, want %d", code, ExitCode)
			}
			if stdout != "" {
				t.Errorf("stdout %q: the program went on or ran its deferred functions after the fault", stdout)
			}
			if want := "fault " + tc.hit + ": exiting\n"; stderr != want {
				t.Errorf("stderr %q, want %q", stderr, want)
			}
		})
	}
}

func TestEnabledReadsTheEnvironmentOnce(t *testing.T) {
	// This process was started without SPANMART_FAULTS (the children get it), so nothing fires here
	// and setting the variable afterwards changes nothing.
	if os.Getenv(EnvVar) != "" {
		t.Skipf("%s is set in the test's environment", EnvVar)
	}
	Hit(OrdersBeforeCommit) // loads the (empty) configuration
	t.Setenv(EnvVar, OrdersBeforeCommit)
	if Enabled(OrdersBeforeCommit) {
		t.Fatal("Enabled changed after the environment was read")
	}
}

func BenchmarkHitDisabled(b *testing.B) {
	for b.Loop() {
		Hit(OrdersBeforeCommit)
	}
}
