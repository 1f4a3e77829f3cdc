package app

import (
	"context"
	"sync"
	"time"
)

// outcomes records the outcomes of attempts in groups: the first outcome of a group waits
// window for others (less once the group has max), then one transaction records them all
// (Repository.Update), where each would have taken a read and a commit of its own. Each caller waits for its group's commit,
// so what it returns is what was recorded, as with a transaction of its own. A delivery with no
// work left waits without its admission slot (Service.send): with the slots held by deliveries
// waiting for others that could not get in, every group waited its whole window.
type outcomes struct {
	repo    Repository
	window  time.Duration
	max     int           // outcomes in one group at most
	timeout time.Duration // bounds a group's transaction

	mu      sync.Mutex
	pending []*pendingOutcome // the group that is gathering; nil when none is
	full    chan struct{}     // closed once the gathering group has max outcomes
}

type pendingOutcome struct {
	change Change
	done   chan struct{} // closed once err is set
	err    error
}

// record has c recorded with the group that is gathering, or starts one, and returns c's error
// once the group's transaction has ended: c.Apply runs on another caller's goroutine, perhaps,
// and never after record returns. The transaction is not cancelled with ctx, since the outcomes
// of others depend on it; it is bounded by the timeout.
func (o *outcomes) record(ctx context.Context, c Change) error {
	p := &pendingOutcome{change: c, done: make(chan struct{})}
	o.mu.Lock()
	o.pending = append(o.pending, p)
	first := len(o.pending) == 1
	if first {
		o.full = make(chan struct{})
	}
	if len(o.pending) == o.max {
		close(o.full)
	}
	full := o.full
	o.mu.Unlock()
	if first {
		o.gatherAndRecord(ctx, full)
	}
	<-p.done
	return p.err
}

// gatherAndRecord waits the window (less if the group is full or ctx ends first), then records
// the group.
func (o *outcomes) gatherAndRecord(ctx context.Context, full <-chan struct{}) {
	if o.window > 0 {
		t := time.NewTimer(o.window)
		select {
		case <-t.C:
		case <-full:
		case <-ctx.Done():
		}
		t.Stop()
	}
	o.mu.Lock()
	group := o.pending
	o.pending, o.full = nil, nil
	o.mu.Unlock()
	changes := make([]Change, len(group))
	for i, p := range group {
		changes[i] = p.change
	}
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.timeout)
	defer cancel()
	for i, err := range o.repo.Update(tctx, changes...) {
		group[i].err = err
		close(group[i].done)
	}
}
