package relay

import (
	"runtime"
	"strings"
	"sync"
	"testing"
)

// The pool runs every job once, on goroutines other than the caller's; a worker back from a job
// takes the next one on its own goroutine (the stack it grew); at most max workers start, and a
// job that finds them all busy, or comes after close, runs anyway.
func TestWorkers(t *testing.T) {
	const max = 2
	w := newWorkers(max)

	done := make(chan string)
	job := func() { done <- goroutineID() }
	w.Go(job)
	first := <-done
	if first == goroutineID() {
		t.Fatal("a job ran on its caller's goroutine")
	}
	if n := w.count(); n != 1 {
		t.Fatalf("%d workers started for one job, want 1", n)
	}
	// Once the worker waits for work again, a job handed over runs on it.
	for !w.handOver(job) {
		runtime.Gosched()
	}
	if again := <-done; again != first {
		t.Errorf("the next job ran on goroutine %s, want the worker's %s", again, first)
	}

	// Every worker busy: one more job still runs, and no worker beyond max starts.
	release := make(chan struct{})
	var busy, held sync.WaitGroup
	for range max + 1 {
		busy.Add(1)
		held.Add(1)
		w.Go(func() {
			busy.Done()
			<-release
			held.Done()
		})
	}
	busy.Wait()
	if n := w.count(); n != max {
		t.Errorf("%d workers started, want %d", n, max)
	}
	close(release)
	held.Wait()

	w.close()
	w.close() // a second close is harmless
	w.Go(job)
	if id := <-done; id == goroutineID() {
		t.Error("a job after close ran on its caller's goroutine")
	}
}

func (w *workers) count() int {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.started
}

// goroutineID is the number of the calling goroutine, from its stack trace's first line.
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _, _ := strings.Cut(strings.TrimPrefix(string(buf), "goroutine "), " ")
	return id
}
