package relay

import (
	"slices"
	"testing"

	"go.uber.org/zap"
)

// A flood of nudges for one shard costs one wake-up of that shard's loop, and wakes no other: a
// woken loop is not woken again until it has scanned. A nudge of several shards wakes each; one
// naming an unknown source or shard wakes none.
func TestNudgeFloodIsOneWakeUp(t *testing.T) {
	r := &Relay{log: zap.NewNop()}
	s := newSource(r, Source{Name: "orders"})
	r.sources = []*source{s}
	woken := func(want ...int) {
		t.Helper()
		var got []int
		for shard, ch := range s.wake {
			for range len(ch) {
				got = append(got, shard)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("wake-ups pending for shards %v, want %v", got, want)
		}
	}
	for range 200 {
		if !r.NudgeShards("orders", 3) {
			t.Fatal("NudgeShards refused a configured source and shard")
		}
	}
	woken(3)
	if r.NudgeShards("inventory", 3) || r.NudgeShards("orders", 16) || r.NudgeShards("orders", 5, 16) {
		t.Error("NudgeShards accepted an unknown source or shard")
	}
	woken(3)
	if !r.NudgeShards("orders", 9, 5, 9) {
		t.Fatal("NudgeShards refused configured shards")
	}
	woken(3, 5, 9)
}
