package relay

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the relay's Prometheus metrics (names carry their units).
type metrics struct {
	pending       *prometheus.GaugeVec
	oldestAge     *prometheus.GaugeVec
	quarantined   *prometheus.GaugeVec
	publishLag    *prometheus.HistogramVec
	enqueueErrors *prometheus.CounterVec
	published     *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "outbox_pending_events", Help: "Unpublished, not quarantined outbox events.",
		}, []string{"source"}),
		oldestAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "outbox_oldest_pending_age_seconds", Help: "Age of the oldest unpublished, not quarantined outbox event (commit time to now); alert on it.",
		}, []string{"source"}),
		quarantined: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "outbox_quarantined_events", Help: "Outbox events the relay gave up on; they wait for an operator's replay.",
		}, []string{"source"}),
		publishLag: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "outbox_publish_lag_seconds", Help: "Time from an event's commit to the creation of its tasks.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600},
		}, []string{"source"}),
		enqueueErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "outbox_enqueue_errors_total", Help: "Failed CreateTask calls by gRPC code.",
		}, []string{"source", "code"}),
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "outbox_published_events_total", Help: "Events enqueued and marked published, per subscriber.",
		}, []string{"source", "subscriber"}),
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.pending, m.oldestAge, m.quarantined, m.publishLag, m.enqueueErrors, m.published} {
		errs = append(errs, reg.Register(c))
	}
	return m, errors.Join(errs...)
}
