package relay

import (
	"context"
	"maps"
	"slices"

	"github.com/spanmart/spanmart/pkg/outboxlib"
)

// ErrLeaseLost is errLeaseLost, for the tests' errors.Is.
var ErrLeaseLost = errLeaseLost

// MarkTogether marks, as one group of source's mark loop, one batch per shard of batches: the
// events of batches[shard] enqueued to subscriber, scanned under epoch. It returns each batch's
// outcome by shard.
func MarkTogether(ctx context.Context, r *Relay, sourceName, subscriber string, epoch int64, batches map[int64][]string) map[int64]error {
	var s *source
	for _, src := range r.sources {
		if src.src.Name == sourceName {
			s = src
		}
	}
	var group []*markRequest
	for _, shard := range slices.Sorted(maps.Keys(batches)) {
		b := &markRequest{shard: shard, epoch: epoch}
		for _, id := range batches[shard] {
			b.done = append(b.done, &outcome{row: &pendingRow{event: outboxlib.Event{ID: id}}, created: []string{subscriber}})
		}
		group = append(group, b)
	}
	errs := s.markGroup(ctx, group)
	out := map[int64]error{}
	for i, b := range group {
		out[b.shard] = errs[i]
	}
	return out
}
