package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/breaker"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/payment"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/provider"
)

// CallPolicy bounds the provider calls made on the request path. Zero fields take the defaults.
type CallPolicy struct {
	Attempts   int           // tries per call, with the same idempotency key; default 3
	MinBackoff time.Duration // wait after the first failed try, doubling; default 200ms
	Timeout    time.Duration // per try; default 10s
	// BreakerThreshold consecutive failures open the provider's circuit for BreakerCooldown;
	// defaults 5 and 10s.
	BreakerThreshold int
	BreakerCooldown  time.Duration
}

func (c CallPolicy) withDefaults() CallPolicy {
	if c.Attempts <= 0 {
		c.Attempts = 3
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = 200 * time.Millisecond
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	if c.BreakerThreshold <= 0 {
		c.BreakerThreshold = 5
	}
	if c.BreakerCooldown <= 0 {
		c.BreakerCooldown = 10 * time.Second
	}
	return c
}

// guarded is a provider behind its circuit breaker, with bounded retries and metrics.
type guarded struct {
	provider.Provider
	policy  CallPolicy
	breaker *breaker.Breaker
	metrics *Metrics
}

func newGuarded(p provider.Provider, policy CallPolicy, m *Metrics, now func() time.Time) *guarded {
	g := &guarded{Provider: p, policy: policy, metrics: m}
	m.circuit.WithLabelValues(p.Name()).Set(0)
	g.breaker = breaker.New(breaker.Config{
		Threshold: policy.BreakerThreshold, Cooldown: policy.BreakerCooldown, Now: now,
		OnChange: func(_, to breaker.State) { m.circuit.WithLabelValues(p.Name()).Set(float64(to)) },
	})
	return g
}

// do makes the provider call an intent records.
func (g *guarded) do(ctx context.Context, in Intent) (provider.Outcome, error) {
	switch in.Op {
	case OpAuthorize:
		var r provider.AuthorizeRequest
		if err := json.Unmarshal(in.Request, &r); err != nil {
			return provider.Outcome{}, g.invalid("authorize", fmt.Errorf("intent %s: request: %w", in.Key, err))
		}
		return g.call(ctx, "authorize", func(ctx context.Context) (provider.Outcome, error) { return g.Authorize(ctx, r) })
	case OpCapture, OpVoid, OpRefund:
		var r provider.Operation
		if err := json.Unmarshal(in.Request, &r); err != nil {
			return provider.Outcome{}, g.invalid(string(in.Op), fmt.Errorf("intent %s: request: %w", in.Key, err))
		}
		switch in.Op {
		case OpCapture:
			return g.call(ctx, "capture", func(ctx context.Context) (provider.Outcome, error) { return g.Capture(ctx, r) })
		case OpVoid:
			return g.call(ctx, "void", func(ctx context.Context) (provider.Outcome, error) { return g.Void(ctx, r) })
		}
		return g.call(ctx, "refund", func(ctx context.Context) (provider.Outcome, error) { return g.Refund(ctx, r) })
	}
	return provider.Outcome{}, g.invalid(string(in.Op), fmt.Errorf("intent %s: unknown operation", in.Key))
}

// lookup asks the provider about a payment, guarded like the other calls.
func (g *guarded) lookup(ctx context.Context, providerPaymentID string) (provider.Outcome, error) {
	return g.call(ctx, "lookup", func(ctx context.Context) (provider.Outcome, error) { return g.Lookup(ctx, providerPaymentID) })
}

func (g *guarded) invalid(op string, err error) error {
	return &provider.Error{Provider: g.Name(), Op: op, Reason: payment.ReasonInvalidRequest, Err: err}
}

// call tries f up to Attempts times while it fails temporarily and the circuit lets it, waiting
// MinBackoff, then twice that, between tries. An open circuit is a temporary
// provider_unavailable error without a call. Meanwhile the request gives its admission slot to
// others, as it waits on the provider, not on this process, and comes back to record the answer
// before any new request starts (platform.Away).
func (g *guarded) call(ctx context.Context, op string, f func(context.Context) (provider.Outcome, error)) (provider.Outcome, error) {
	back := platform.Away(ctx)
	o, err := g.tries(ctx, op, f)
	if berr := back(); berr != nil {
		return provider.Outcome{}, errors.Join(err, berr)
	}
	return o, err
}

// tries is call's tries.
func (g *guarded) tries(ctx context.Context, op string, f func(context.Context) (provider.Outcome, error)) (provider.Outcome, error) {
	backoff := g.policy.MinBackoff
	var err error
	for try := 1; ; try++ {
		if berr := g.breaker.Allow(); berr != nil {
			g.metrics.errors.WithLabelValues(g.Name(), op, "circuit_open").Inc()
			return provider.Outcome{}, &provider.Error{Provider: g.Name(), Op: op, Reason: payment.ReasonProviderUnavailable, Temporary: true, Err: berr}
		}
		var o provider.Outcome
		o, err = g.try(ctx, op, f)
		g.breaker.Done(err == nil || !provider.Temporary(err))
		if err == nil {
			return o, nil
		}
		if !provider.Temporary(err) || try >= g.policy.Attempts {
			return provider.Outcome{}, err
		}
		select {
		case <-ctx.Done():
			return provider.Outcome{}, errors.Join(err, ctx.Err())
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

// try is one call with its timeout, measured.
func (g *guarded) try(ctx context.Context, op string, f func(context.Context) (provider.Outcome, error)) (provider.Outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, g.policy.Timeout)
	defer cancel()
	start := time.Now()
	o, err := f(ctx)
	result := "ok"
	if err != nil {
		result = "error"
		reason := string(payment.ReasonProviderUnavailable)
		var pe *provider.Error
		if errors.As(err, &pe) && pe.Reason != "" {
			reason = string(pe.Reason)
		} else if errors.Is(err, provider.ErrNotFound) {
			reason = "not_found"
		}
		g.metrics.errors.WithLabelValues(g.Name(), op, reason).Inc()
	}
	g.metrics.calls.WithLabelValues(g.Name(), op, result).Observe(time.Since(start).Seconds())
	return o, err
}
