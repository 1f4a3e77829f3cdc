package breaker_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/breaker"
)

// The breaker's whole life on a fake clock: closed through failures below the threshold, open at
// the threshold, refusing until the cooldown passes, one half-open trial at a time, reopened by a
// failed trial and closed by a good one.
func TestBreakerOpensRefusesAndRecovers(t *testing.T) {
	now := time.Unix(1000, 0)
	var changes []string
	b := breaker.New(breaker.Config{
		Threshold: 3, Cooldown: 10 * time.Second, Now: func() time.Time { return now },
		OnChange: func(from, to breaker.State) { changes = append(changes, from.String()+"→"+to.String()) },
	})
	call := func(ok bool) error {
		if err := b.Allow(); err != nil {
			return err
		}
		b.Done(ok)
		return nil
	}
	for i := 0; i < 2; i++ {
		if err := call(false); err != nil {
			t.Fatalf("failure %d refused: %v", i+1, err)
		}
	}
	if err := call(true); err != nil || b.State() != breaker.Closed {
		t.Fatalf("a success below the threshold: %v, state %v", err, b.State())
	}
	for i := 0; i < 3; i++ {
		if err := call(false); err != nil {
			t.Fatal(err)
		}
	}
	if b.State() != breaker.Open {
		t.Fatalf("after 3 consecutive failures: %v, want open", b.State())
	}
	if err := b.Allow(); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("open breaker allowed a call: %v", err)
	}
	now = now.Add(10 * time.Second)
	if err := b.Allow(); err != nil {
		t.Fatalf("after the cooldown the trial is refused: %v", err)
	}
	if err := b.Allow(); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("a second call during the trial: %v, want ErrOpen", err)
	}
	b.Done(false)
	if b.State() != breaker.Open {
		t.Fatalf("failed trial: %v, want open", b.State())
	}
	now = now.Add(10 * time.Second)
	if err := call(true); err != nil || b.State() != breaker.Closed {
		t.Fatalf("good trial: %v, state %v, want closed", err, b.State())
	}
	want := []string{"closed→open", "open→half-open", "half-open→open", "open→half-open", "half-open→closed"}
	if diff := cmp.Diff(want, changes); diff != "" {
		t.Errorf("state changes (-want +got):\n%s", diff)
	}
}
