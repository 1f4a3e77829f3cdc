package relay

import (
	"testing"

	"go.uber.org/zap"
)

// A flood of nudges for one shard costs one wake-up of that shard's loop, and wakes no other: a
// woken loop is not woken again until it has scanned.
func TestNudgeFloodIsOneWakeUp(t *testing.T) {
	r := &Relay{log: zap.NewNop()}
	s := newSource(r, Source{Name: "orders"})
	r.sources = []*source{s}
	for range 200 {
		if !r.NudgeShard("orders", 3) {
			t.Fatal("NudgeShard refused a configured source and shard")
		}
	}
	for shard, ch := range s.wake {
		want := 0
		if shard == 3 {
			want = 1
		}
		if len(ch) != want {
			t.Errorf("shard %d has %d wake-ups pending, want %d", shard, len(ch), want)
		}
	}
	if r.NudgeShard("inventory", 3) || r.NudgeShard("orders", 16) {
		t.Error("NudgeShard accepted an unknown source or shard")
	}
}
