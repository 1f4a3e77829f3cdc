package spanneremu

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"

	"google.golang.org/grpc"
)

// Deep stacks for the data RPCs.
//
// Serving a data RPC runs SQLite, which is C transpiled to Go with large frames: the stack of
// the goroutine gRPC starts for each RPC grows from a few KiB to about a hundred, copied at every
// doubling, and the copies (runtime.newstack) were 6 % of the emulator's CPU under the stack's
// load. The interceptors therefore run the handlers of the data API on goroutines that outlive
// one RPC, whose stacks stay grown: at most maxStackWorkers of them, started as needed. A
// handler that finds every worker busy (waiting for a lock, say) runs on the RPC's own goroutine,
// as before.
//
// A unary method starts on a worker before gRPC decodes its request (onStackWorkers): gRPC
// decodes it inside the method's handler, before any interceptor, and decoding a commit's
// mutations (messages in messages) grew the stack of the goroutine gRPC started for the RPC too
// (README, "Performance"). A streaming method decodes its request inside its handler, which the
// stream interceptor runs on a worker.
//
// gRPC's own worker option (grpc.NumStreamWorkers) is not this: it has as many workers as
// processors and starts a goroutine whenever they are busy, which with handlers waiting for a
// database's lock was nearly always, and measured worse than none (README, "Performance").

// maxStackWorkers bounds the goroutines kept with grown stacks (each keeps what its deepest
// RPC grew it to, until the collector shrinks an idle one).
const maxStackWorkers = 64

type stackWorkers struct {
	work chan func() // unbuffered: a send succeeds only when a worker is idle

	mu      sync.RWMutex // read-held to hand a job over, held to start a worker or close
	started int
	closed  bool
}

func newStackWorkers() *stackWorkers {
	return &stackWorkers{work: make(chan func())}
}

// run runs f on an idle worker, a new one while fewer than maxStackWorkers exist, or else on the
// caller's goroutine, and returns when f has returned. A panic in f is raised again in the
// caller, as a workerPanic that carries the worker's stack (the crash then shows where f
// panicked, not only where run raised it again).
func (w *stackWorkers) run(f func()) {
	var panicked *workerPanic
	done := make(chan struct{})
	job := func() {
		defer close(done)
		defer func() {
			if v := recover(); v != nil {
				panicked = &workerPanic{value: v, stack: debug.Stack()}
			}
		}()
		f()
	}
	if !w.handOver(job) && !w.start(job) {
		f()
		return
	}
	<-done
	if panicked != nil {
		panic(panicked)
	}
}

// workerPanic is a panic of a function run on a worker, raised again in run's caller.
type workerPanic struct {
	value any
	stack []byte
}

func (p *workerPanic) Error() string {
	return fmt.Sprintf("%v\n\n[on a stack worker]\n%s", p.value, p.stack)
}

// handOver gives job to an idle worker, if there is one.
func (w *stackWorkers) handOver(job func()) bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return false
	}
	select {
	case w.work <- job:
		return true
	default:
		return false
	}
}

// start starts a worker with job as its first job, unless there are enough of them.
func (w *stackWorkers) start(job func()) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.started >= maxStackWorkers {
		return false
	}
	w.started++
	go func() {
		job()
		for job := range w.work {
			job()
		}
	}()
	return true
}

// close ends the workers once they are idle; a later run runs on its caller's goroutine.
func (w *stackWorkers) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.closed = true
		close(w.work)
	}
}

// onStackWorkers returns a copy of desc whose unary methods run on a worker from the start,
// the decoding of their requests included (see above).
func (w *stackWorkers) onStackWorkers(desc *grpc.ServiceDesc) *grpc.ServiceDesc {
	d := *desc
	d.Methods = slices.Clone(desc.Methods)
	for i, m := range d.Methods {
		handler := m.Handler
		d.Methods[i].Handler = func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (resp any, err error) {
			w.run(func() { resp, err = handler(srv, ctx, dec, interceptor) })
			return resp, err
		}
	}
	return &d
}
