package relay

import (
	"slices"
	"testing"

	"go.uber.org/zap"

	"github.com/spanmart/spanmart/pkg/outboxlib"
)

// A flood of nudges for one shard costs one wake-up of the source's scan loop, and makes no other
// shard due: a woken loop is not woken again until it has looked. A nudge of several shards makes
// each due; one naming an unknown source or shard, none.
func TestNudgeFloodIsOneWakeUp(t *testing.T) {
	r := &Relay{log: zap.NewNop()}
	s := newSource(r, Source{Name: "orders"})
	r.sources = []*source{s}
	woken := func(want ...int) {
		t.Helper()
		var got []int
		for shard := range outboxlib.Shards {
			if s.due.has(int64(shard)) {
				got = append(got, shard)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("shards due %v, want %v", got, want)
		}
		if len(s.kick) != 1 {
			t.Errorf("%d wake-ups of the scan loop pending, want 1", len(s.kick))
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
