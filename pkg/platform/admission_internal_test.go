package platform

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// A request whose context ends while it waits to come back from Away gets ctx's error and no
// slot, and leaves the count of slots as it was: the one slot, held by another, goes on to the
// next once that one ends, and the request's own end gives nothing back.
func TestAwayEndedWhileComingBack(t *testing.T) {
	a := newAdmission(prometheus.NewRegistry(), zap.NewNop(), "test", 1, time.Minute, time.Minute)
	if w, _ := a.enter(&a.line); w != nil {
		t.Fatal("the first request was not admitted at once")
	}
	s := &slot{a: a, held: true, since: time.Now()}
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), slotKey{}, s))
	back := Away(ctx)
	if w, _ := a.enter(&a.line); w != nil {
		t.Fatal("a second request was not admitted in the slot the first gave back")
	}
	cancel()
	if err := back(); !errors.Is(err, context.Canceled) {
		t.Fatalf("back() once ctx ended = %v, want context.Canceled", err)
	}
	s.release(true) // the first ends, holding nothing
	a.free()        // the second ends
	if w, _ := a.enter(&a.line); w != nil {
		t.Fatal("the slot the second gave back is not free")
	}
	a.lineMu.Lock()
	defer a.lineMu.Unlock()
	if a.busy != 1 || a.back.Len() != 0 || a.line.Len() != 0 {
		t.Errorf("busy %d, coming back %d, in line %d; want 1, 0, 0", a.busy, a.back.Len(), a.line.Len())
	}
}

// Away and YieldSlot do nothing without a slot in ctx (a background job's context).
func TestAwayWithoutASlot(t *testing.T) {
	ctx := context.Background()
	YieldSlot(ctx)
	if err := Away(ctx)(); err != nil {
		t.Errorf("Away without a slot: back() = %v, want nil", err)
	}
}

// Under many requests at once, some away for a while and some ending while away or coming back,
// no more than the limit work at once, and at the end every slot is free and nobody waits.
func TestAdmissionHoldsTheLimitUnderChurn(t *testing.T) {
	const limit, requests = 3, 200
	a := newAdmission(prometheus.NewRegistry(), zap.NewNop(), "test", limit, time.Minute, time.Minute)
	var working, most atomic.Int64
	work := func() {
		n := working.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		runtime.Gosched()
		working.Add(-1)
	}
	var wg sync.WaitGroup
	for i := range requests {
		wg.Go(func() {
			if w, _ := a.enter(&a.line); w != nil {
				<-w.ready
			}
			s := &slot{a: a, held: true, since: time.Now()}
			ctx, cancel := context.WithCancel(context.WithValue(context.Background(), slotKey{}, s))
			defer cancel()
			work()
			back := Away(ctx)
			runtime.Gosched()
			if i%7 == 0 {
				cancel() // the request ends while away
			}
			if err := back(); err == nil {
				work()
			}
			s.release(true)
		})
	}
	wg.Wait()
	if m := most.Load(); m > limit {
		t.Errorf("%d worked at once, want at most %d", m, limit)
	}
	a.lineMu.Lock()
	defer a.lineMu.Unlock()
	if a.busy != 0 || a.back.Len() != 0 || a.line.Len() != 0 {
		t.Errorf("at the end: busy %d, coming back %d, in line %d; want 0, 0, 0", a.busy, a.back.Len(), a.line.Len())
	}
}
