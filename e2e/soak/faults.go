package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"

	"github.com/spanmart/spanmart/e2e/harness"
	"github.com/spanmart/spanmart/emulator/paysim"
	"github.com/spanmart/spanmart/internal/topology"
)

// Fault kinds.
const (
	KindKill      = "kill"         // SIGKILL a process, start it again after the fault's length
	KindTasksDown = "tasks-down"   // stop the Cloud Tasks emulator, start it again (same data dir)
	KindPause     = "pause-queue"  // PauseQueue a subscriber queue, then ResumeQueue
	KindWebhooks  = "webhooks"     // the sandbox duplicates, reorders, delays or drops webhooks
	KindProvider  = "provider-500" // the sandbox answers API calls with 500s (not executed)
)

// Fault is one thing the schedule breaks for a while.
type Fault struct {
	Kind string
	// Target is the process (kill), the queue id (pause-queue), the webhook mode (webhooks), or
	// "" (tasks-down).
	Target string
	// Dialect is the sandbox dialect a webhook or provider fault applies to ("" = both).
	Dialect string
	// Delay is the delay of a "delay" webhook fault.
	Delay time.Duration
	// At and For are the planned start (from the start of the load) and length.
	At, For time.Duration
	// Started and Ended are when the fault began and when it was over (a killed process ready
	// again, a queue resumed); Err says what went wrong injecting or clearing it.
	Started, Ended time.Time
	Err            string
}

// Name is the fault's kind as the summary counts it and the chart draws it: "kill relay",
// "tasks down", "webhooks drop", ...
func (f *Fault) Name() string {
	switch f.Kind {
	case KindKill:
		return "kill " + f.Target
	case KindTasksDown:
		return "tasks down"
	case KindPause:
		return "queue paused"
	case KindWebhooks:
		return "webhooks " + f.Target
	case KindProvider:
		return "provider 500s"
	}
	return f.Kind
}

// String describes the fault in full, for the fault log.
func (f *Fault) String() string {
	switch f.Kind {
	case KindKill:
		return "kill -9 " + f.Target
	case KindTasksDown:
		return "Cloud Tasks emulator down"
	case KindPause:
		return "pause queue " + f.Target
	case KindWebhooks:
		s := "webhooks " + f.Target
		if f.Delay > 0 {
			s += fmt.Sprintf(" by %s", f.Delay)
		}
		return s + " (" + dialectName(f.Dialect) + ")"
	case KindProvider:
		return "provider answers 500 (" + dialectName(f.Dialect) + ")"
	}
	return f.Kind
}

func dialectName(d string) string {
	if d == "" {
		return "stripe and komoju"
	}
	return d
}

// key is what two faults must not break at the same time (a process killed twice, two settings of
// the sandbox's webhook fault).
func (f *Fault) key() string {
	switch f.Kind {
	case KindKill, KindPause:
		return f.Kind + ":" + f.Target
	case KindProvider:
		return "api"
	}
	return f.Kind
}

// killable are the processes the schedule kills: the relay and each consumer.
var killable = []string{topology.Relay, topology.Orders, topology.Fulfillment, topology.Gateway, topology.Notifications}

var webhookModes = []string{"duplicate", "reorder", "delay", "drop"}

// FaultNames are the names (Fault.Name) of every kind of fault the schedule injects, in the order
// the summary lists them.
func FaultNames() []string {
	var out []string
	for _, p := range killable {
		out = append(out, "kill "+p)
	}
	out = append(out, "tasks down", "queue paused")
	for _, m := range webhookModes {
		out = append(out, "webhooks "+m)
	}
	return append(out, "provider 500s")
}

// planFaults is the seeded schedule: within window, a fault every gap (uniform in
// [gapMin, gapMax]), its kind dealt from a shuffled deck of every kind (so every kind comes up
// once per deck, and a deck of 12 fits a short soak), each lasting a few seconds. A fault longer
// than the gap to the next overlaps it; a fault whose target is still broken starts once it is
// repaired.
func planFaults(seed uint64, window, gapMin, gapMax time.Duration) []*Fault {
	rnd := rand.New(rand.NewPCG(seed, 0xfa17))
	between := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(rnd.Int64N(int64(hi-lo)+1))
	}
	var deck []string
	busy := map[string]time.Duration{}
	var out []*Fault
	for at := gapMin; ; at += between(gapMin, gapMax) {
		if len(deck) == 0 {
			deck = FaultNames()
			rnd.Shuffle(len(deck), func(i, j int) { deck[i], deck[j] = deck[j], deck[i] })
		}
		name := deck[0]
		deck = deck[1:]
		f := &Fault{}
		dialects := []string{"", "stripe", "komoju"}
		switch {
		case name == "tasks down":
			f.Kind, f.For = KindTasksDown, between(2*time.Second, 6*time.Second)
		case name == "queue paused":
			f.Kind, f.Target, f.For = KindPause, topology.Queues()[rnd.IntN(len(topology.Queues()))], between(2*time.Second, 8*time.Second)
		case name == "provider 500s":
			f.Kind, f.Dialect, f.For = KindProvider, dialects[rnd.IntN(3)], between(time.Second, 4*time.Second)
		case len(name) > 9 && name[:9] == "webhooks ":
			f.Kind, f.Target, f.Dialect, f.For = KindWebhooks, name[9:], dialects[rnd.IntN(3)], between(3*time.Second, 10*time.Second)
			if f.Target == "delay" {
				f.Delay = between(time.Second, 3*time.Second)
			}
		default:
			f.Kind, f.Target, f.For = KindKill, name[5:], between(time.Second, 5*time.Second)
		}
		f.At = max(at, busy[f.key()]+500*time.Millisecond)
		if f.At+f.For > window {
			if at >= window {
				break
			}
			continue
		}
		busy[f.key()] = f.At + f.For
		out = append(out, f)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out
}

// injector carries out a fault schedule on a stack.
type injector struct {
	s       *harness.Stack
	start   time.Time
	logf    func(format string, args ...any)
	metrics *consumerCounts

	mu     sync.Mutex
	faults []*Fault
	wg     sync.WaitGroup
}

// run starts each planned fault at its time until ctx is done (no fault starts after that; the
// ones under way run their length and are cleared). wait waits for them.
func (in *injector) run(ctx context.Context, plan []*Fault) {
	for _, f := range plan {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(in.start.Add(f.At))):
		}
		in.mu.Lock()
		in.faults = append(in.faults, f)
		in.mu.Unlock()
		in.wg.Add(1)
		go func() {
			defer in.wg.Done()
			in.inject(context.WithoutCancel(ctx), f)
		}()
	}
}

func (in *injector) wait() { in.wg.Wait() }

// Faults are the faults injected so far.
func (in *injector) Faults() []*Fault {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]*Fault(nil), in.faults...)
}

func (in *injector) stamp(t time.Time) string { return stamp(t.Sub(in.start)) }

func stamp(d time.Duration) string {
	d = d.Round(100 * time.Millisecond)
	return fmt.Sprintf("+%dm%04.1fs", int(d.Minutes()), (d % time.Minute).Seconds())
}

// inject breaks what f names, waits f.For and repairs it, logging both ends.
func (in *injector) inject(ctx context.Context, f *Fault) {
	f.Started = time.Now()
	in.logf("[%s] fault: %s for %s", in.stamp(f.Started), f, f.For.Round(100*time.Millisecond))
	var err error
	switch f.Kind {
	case KindKill:
		in.metrics.collect(ctx, in.s, f.Target) // its counters die with it
		in.s.Kill(f.Target)
		time.Sleep(f.For)
		err = retry(ctx, 3*time.Minute, func() error { return in.s.Start(ctx, f.Target) })
	case KindTasksDown:
		if err = in.s.StopTasks(); err == nil {
			time.Sleep(f.For)
			err = retry(ctx, time.Minute, func() error { return in.s.StartTasks(ctx) })
		}
	case KindPause:
		if err = retry(ctx, time.Minute, func() error { return setQueue(ctx, in.s, f.Target, true) }); err == nil {
			time.Sleep(f.For)
			err = retry(ctx, 3*time.Minute, func() error { return setQueue(ctx, in.s, f.Target, false) })
		}
	case KindWebhooks:
		if err = in.s.Paysim.SetWebhookFault(paysim.WebhookFault{Mode: f.Target, Dialect: f.Dialect, Delay: f.Delay}); err == nil {
			time.Sleep(f.For)
			err = in.s.Paysim.SetWebhookFault(paysim.WebhookFault{Mode: "none"})
		}
	case KindProvider:
		if err = in.s.Paysim.SetAPIFault(paysim.APIFault{Mode: paysim.FaultError, Dialect: f.Dialect}); err == nil {
			time.Sleep(f.For)
			err = in.s.Paysim.SetAPIFault(paysim.APIFault{Mode: paysim.FaultNone})
		}
	}
	f.Ended = time.Now()
	if err != nil {
		f.Err = err.Error()
		in.logf("[%s] fault %s: NOT REPAIRED: %v", in.stamp(f.Ended), f.Name(), err)
		return
	}
	in.logf("[%s] fault over: %s (%s after it began)", in.stamp(f.Ended), f.Name(), f.Ended.Sub(f.Started).Round(100*time.Millisecond))
}

// setQueue pauses or resumes a subscriber queue with the official client.
func setQueue(ctx context.Context, s *harness.Stack, queueID string, pause bool) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	tc, err := s.TasksClient(ctx)
	if err != nil {
		return err
	}
	name := harness.QueueName(queueID)
	if pause {
		_, err = tc.PauseQueue(ctx, &cloudtaskspb.PauseQueueRequest{Name: name})
	} else {
		_, err = tc.ResumeQueue(ctx, &cloudtaskspb.ResumeQueueRequest{Name: name})
	}
	return err
}

// retry calls f until it succeeds, once a second, for at most wait.
func retry(ctx context.Context, wait time.Duration, f func() error) error {
	deadline := time.Now().Add(wait)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// clearAll repairs whatever a fault could have left broken, whatever the schedule did: every
// process running, the Tasks emulator up, every queue running, the sandbox's faults off. It is the
// precondition of the drain.
func clearAll(ctx context.Context, s *harness.Stack) error {
	var errs []error
	if _, err := s.Queues(ctx); err != nil { // its status page does not answer: it is down
		if err := retry(ctx, time.Minute, func() error { return s.StartTasks(ctx) }); err != nil {
			errs = append(errs, fmt.Errorf("start the Tasks emulator: %w", err))
		}
	}
	for _, p := range killable {
		if !s.Running(p) {
			if err := retry(ctx, time.Minute, func() error { return s.Start(ctx, p) }); err != nil {
				errs = append(errs, fmt.Errorf("start %s: %w", p, err))
			}
		}
	}
	for _, q := range topology.Queues() {
		if err := retry(ctx, time.Minute, func() error { return setQueue(ctx, s, q, false) }); err != nil {
			errs = append(errs, fmt.Errorf("resume %s: %w", q, err))
		}
	}
	if err := s.Paysim.SetWebhookFault(paysim.WebhookFault{Mode: "none"}); err != nil {
		errs = append(errs, err)
	}
	if err := s.Paysim.SetAPIFault(paysim.APIFault{Mode: paysim.FaultNone}); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("clear the faults: %v", errs)
	}
	return nil
}
