// Package breaker is a circuit breaker for calls to one dependency (a payment provider): after
// Threshold consecutive failures it opens and refuses calls at once for Cooldown, so that a
// provider in trouble is not hammered by every retry and every queued event; then it lets one
// trial call through (half-open): a success closes it, a failure opens it again.
package breaker

import (
	"errors"
	"sync"
	"time"
)

// ErrOpen is returned by Allow while the breaker is open.
var ErrOpen = errors.New("circuit open")

// State of a breaker.
type State int

const (
	Closed State = iota
	Open
	HalfOpen
)

func (s State) String() string {
	switch s {
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return "closed"
}

// Config of a breaker; zero fields take the defaults.
type Config struct {
	Threshold int              // consecutive failures that open it; default 5
	Cooldown  time.Duration    // how long it stays open; default 10s
	Now       func() time.Time // default time.Now
	// OnChange, if set, is told every state change (for a metric and a log line).
	OnChange func(from, to State)
}

// Breaker is safe for concurrent use.
type Breaker struct {
	cfg Config

	mu       sync.Mutex
	state    State
	failures int
	openedAt time.Time
	trial    bool // a half-open trial call is in flight
}

// New returns a closed breaker.
func New(cfg Config) *Breaker {
	if cfg.Threshold <= 0 {
		cfg.Threshold = 5
	}
	if cfg.Cooldown <= 0 {
		cfg.Cooldown = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Breaker{cfg: cfg}
}

// Allow asks to make a call: nil, and the caller must report the result with Done; or ErrOpen.
func (b *Breaker) Allow() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case Open:
		if b.cfg.Now().Sub(b.openedAt) < b.cfg.Cooldown {
			return ErrOpen
		}
		b.set(HalfOpen)
		b.trial = true
		return nil
	case HalfOpen:
		if b.trial {
			return ErrOpen // one trial at a time
		}
		b.trial = true
	}
	return nil
}

// Done reports the result of an allowed call: ok is false for a failure of the dependency (not for
// an answer it gave, such as a declined card).
func (b *Breaker) Done(ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.trial = false
	if ok {
		b.failures = 0
		b.set(Closed)
		return
	}
	b.failures++
	if b.state == HalfOpen || b.failures >= b.cfg.Threshold {
		b.openedAt = b.cfg.Now()
		b.set(Open)
	}
}

// State returns the current state (Open turns HalfOpen only on the next Allow).
func (b *Breaker) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

func (b *Breaker) set(s State) {
	if s == b.state {
		return
	}
	from := b.state
	b.state = s
	if b.cfg.OnChange != nil {
		b.cfg.OnChange(from, s)
	}
}
