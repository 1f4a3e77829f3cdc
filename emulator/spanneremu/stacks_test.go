package spanneremu

import (
	"strings"
	"sync"
	"testing"
)

// The data API's handlers run on long-lived workers: each run returns once its function has,
// with its effects visible; a panic reaches the caller; at most maxStackWorkers exist, and a
// run beyond them (or after close) runs on its caller's goroutine.
func TestStackWorkers(t *testing.T) {
	w := newStackWorkers()

	n := 0
	w.run(func() { n++ })
	w.run(func() { n++ })
	if n != 2 {
		t.Fatalf("after two runs n = %d, want 2", n)
	}

	func() {
		defer func() {
			p, ok := recover().(*workerPanic)
			if !ok || p.value != "boom" || !strings.Contains(string(p.stack), "TestStackWorkers") {
				t.Errorf("recovered %#v, want the handler's panic with the stack where it panicked", p)
			}
		}()
		w.run(func() { panic("boom") })
		t.Error("run returned after its function panicked")
	}()

	// Hold every worker busy, then one more run: it must not wait for a worker.
	release := make(chan struct{})
	var busy, held sync.WaitGroup
	for range maxStackWorkers + 1 {
		busy.Add(1)
		held.Add(1)
		go w.run(func() {
			busy.Done()
			<-release
			held.Done()
		})
	}
	busy.Wait() // maxStackWorkers on workers, one more on its own goroutine
	w.mu.RLock()
	started := w.started
	w.mu.RUnlock()
	if started != maxStackWorkers {
		t.Errorf("%d workers started, want %d", started, maxStackWorkers)
	}
	ran := false
	w.run(func() { ran = true })
	if !ran {
		t.Error("a run with every worker busy did not run")
	}
	close(release)
	held.Wait()

	w.close()
	ran = false
	w.run(func() { ran = true })
	if !ran {
		t.Error("a run after close did not run")
	}
}
