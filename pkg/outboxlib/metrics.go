package outboxlib

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// consumerMetrics are a consumer's Prometheus collectors. Several consumers may share a registry
// (the consumer label tells them apart): the second one reuses the collectors of the first.
type consumerMetrics struct {
	events      *prometheus.CounterVec
	lag         *prometheus.HistogramVec
	deadLetters *prometheus.CounterVec
	replays     *prometheus.CounterVec
	effects     *prometheus.CounterVec
}

func newConsumerMetrics(reg prometheus.Registerer) (*consumerMetrics, error) {
	m := &consumerMetrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "outbox_consumer_events_total",
			Help: "Event deliveries by outcome (applied, duplicate, stale, early, transient, dead_lettered, rejected).",
		}, []string{"consumer", "type", "outcome"}),
		lag: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "outbox_consumer_lag_seconds",
			Help:    "Time from an event's commit (ce-committime; ce-time when a delivery lacks it) to the commit that applied it.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600},
		}, []string{"consumer", "type"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "outbox_consumer_dead_letters_total",
			Help: "Events written to DeadLetters, by reason (permanent, max_attempts, patience, unknown_type, out_of_order).",
		}, []string{"consumer", "reason"}),
		replays: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "outbox_consumer_replays_total",
			Help: "Dead letters replayed by an operator, by outcome (applied, stale).",
		}, []string{"consumer", "type", "outcome"}),
		effects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "outbox_consumer_effects_total",
			Help: "Side effects run after an applied event (After), by result (done, failed).",
		}, []string{"consumer", "type", "result"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	m.events, err = register(reg, m.events)
	if err != nil {
		return nil, err
	}
	m.lag, err = register(reg, m.lag)
	if err != nil {
		return nil, err
	}
	m.deadLetters, err = register(reg, m.deadLetters)
	if err != nil {
		return nil, err
	}
	m.replays, err = register(reg, m.replays)
	if err != nil {
		return nil, err
	}
	m.effects, err = register(reg, m.effects)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c, or returns the identical collector already registered.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, err
}
