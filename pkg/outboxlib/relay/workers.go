package relay

import "sync"

// workers runs a source's batches and their CreateTask calls on goroutines that outlive one job.
// A goroutine started for a job grows its stack, copy by copy, to the depth of a Spanner query or
// a Cloud Tasks call (the clients' gRPC and protobuf frames); with a goroutine per batch and per
// call that growth was 4–7 % of the relay's CPU. A worker keeps the stack it grew. At most max
// workers exist; a job that finds them all busy runs on a goroutine of its own, as before, and
// so does every job once the pool is closed. spanneremu's stack workers are the same idea, kept
// apart: the emulators import no code of the system they run (docs/architecture.md, "Layers").
type workers struct {
	work chan func() // unbuffered: a send succeeds only when a worker is idle

	mu      sync.RWMutex // read-held to hand a job over, held to start a worker or close
	started int
	max     int
	closed  bool
}

func newWorkers(max int) *workers {
	return &workers{work: make(chan func()), max: max}
}

// Go runs f on an idle worker, on a new one while fewer than max exist, or else on a goroutine
// of its own; it does not wait for f.
func (w *workers) Go(f func()) {
	if !w.handOver(f) && !w.start(f) {
		go f()
	}
}

// handOver gives f to an idle worker, if there is one.
func (w *workers) handOver(f func()) bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return false
	}
	select {
	case w.work <- f:
		return true
	default:
		return false
	}
}

// start starts a worker with f as its first job, unless there are max of them.
func (w *workers) start(f func()) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.started >= w.max {
		return false
	}
	w.started++
	go func() {
		f()
		for f := range w.work {
			f()
		}
	}()
	return true
}

// close ends the workers once they are idle.
func (w *workers) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.closed = true
		close(w.work)
	}
}
