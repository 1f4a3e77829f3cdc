package spanneremu

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
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

// A unary method of a service desc given to onStackWorkers runs on a worker from the start: its
// request is decoded there too, not on the goroutine gRPC started for the RPC. The desc given is
// left as it was.
func TestUnaryMethodsDecodeOnStackWorkers(t *testing.T) {
	w := newStackWorkers()
	defer w.close()
	var decodedOn, handledOn string
	original := func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		if err := dec(nil); err != nil {
			return nil, err
		}
		handledOn = goroutineID()
		return "answer", nil
	}
	desc := &grpc.ServiceDesc{ServiceName: "test.Service", Methods: []grpc.MethodDesc{{MethodName: "Method", Handler: original}}}
	got := w.onStackWorkers(desc)

	resp, err := got.Methods[0].Handler(nil, context.Background(), func(any) error { decodedOn = goroutineID(); return nil }, nil)
	if err != nil || resp != "answer" {
		t.Fatalf("handler returned %v, %v; want the method's answer", resp, err)
	}
	if caller := goroutineID(); decodedOn == caller || decodedOn != handledOn {
		t.Errorf("decoded on goroutine %s, handled on %s, called from %s: want both on one worker", decodedOn, handledOn, caller)
	}
	if _, err := desc.Methods[0].Handler(nil, context.Background(), func(any) error { decodedOn = goroutineID(); return nil }, nil); err != nil || decodedOn != goroutineID() {
		t.Error("the desc given was changed: its handler no longer runs on its caller's goroutine")
	}
}

// goroutineID is the number of the calling goroutine, from its stack trace's first line.
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _, _ := strings.Cut(strings.TrimPrefix(string(buf), "goroutine "), " ")
	return id
}
