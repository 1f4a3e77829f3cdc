package main

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"
)

// outcome is how one POST /v1/orders ended for the client.
type outcome int

const (
	outAccepted outcome = iota // 201: the order exists
	outShed                    // 503 with Retry-After: refused by admission control, the client may resend it
	outFailed                  // any other status, or a transport error
	outTimeout                 // no answer within the client's timeout
)

// attempt is one POST /v1/orders: when it was sent, how long its answer took and how it ended.
type attempt struct {
	sent    time.Time
	took    time.Duration
	outcome outcome
}

// placement is what one open-loop run of POST /v1/orders sent, and how each request went. Its
// requests may still be in flight when placeOpenLoop returns: wait for them before reading it.
type placement struct {
	payer     *slipPayer
	start     time.Time     // first request sent
	issued    time.Duration // first request → last request sent
	wg        sync.WaitGroup
	mu        sync.Mutex
	attempts  []attempt
	methods   map[string]string // accepted order id → payment method
	errSample string
}

func newPlacement(payer *slipPayer) *placement {
	return &placement{payer: payer, methods: map[string]string{}}
}

// placeOpenLoop sends POST /v1/orders at rate, open loop (a ticker fires each request on its own
// goroutine, never waiting for the previous one), paid in turn by each of methods, until n are
// sent (n > 0) or stop is closed. It returns once the last request is sent; pl.wait waits for the
// answers.
func (b *bench) placeOpenLoop(ctx context.Context, pl *placement, rate float64, n int, methods []string, stop <-chan struct{}) error {
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	pl.start = time.Now()
	defer func() { pl.issued = time.Since(pl.start) }()
	for i := 0; n <= 0 || i < n; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-stop:
				return nil
			case <-tick.C:
			}
		}
		method := methods[i%len(methods)]
		pl.wg.Go(func() {
			t0 := time.Now()
			id, err := b.place(ctx, method)
			a := attempt{sent: t0, took: time.Since(t0)}
			var ne net.Error
			switch {
			case err == nil:
				a.outcome = outAccepted
			case errors.Is(err, errShed):
				a.outcome = outShed
			case errors.As(err, &ne) && ne.Timeout():
				a.outcome = outTimeout
			default:
				a.outcome = outFailed
			}
			pl.mu.Lock()
			defer pl.mu.Unlock()
			pl.attempts = append(pl.attempts, a)
			switch a.outcome {
			case outAccepted:
				pl.methods[id] = method
				if method == "konbini" || method == "bank_transfer" {
					pl.payer.watch(id)
				}
			case outFailed, outTimeout:
				if pl.errSample == "" {
					pl.errSample = err.Error()
				}
			}
		})
	}
	return nil
}

// wait waits for the answer to every request sent.
func (pl *placement) wait() { pl.wg.Wait() }

// took is how long the answers with one of the outcomes took, sorted.
func (pl *placement) took(outcomes ...outcome) []time.Duration {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	var out []time.Duration
	for _, a := range pl.attempts {
		for _, o := range outcomes {
			if a.outcome == o {
				out = append(out, a.took)
			}
		}
	}
	sortDur(out)
	return out
}

// ids are the orders accepted so far.
func (pl *placement) ids() []string {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	out := make([]string, 0, len(pl.methods))
	for id := range pl.methods {
		out = append(out, id)
	}
	return out
}
