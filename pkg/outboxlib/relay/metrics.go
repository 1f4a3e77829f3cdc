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
	scans         *prometheus.CounterVec

	ledgerMissing     *prometheus.GaugeVec
	ledgerUnconfirmed *prometheus.GaugeVec
	ledgerOldest      *prometheus.GaugeVec
	ledgerErrors      *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "outbox_pending_events", Help: "Unpublished, not quarantined outbox events.",
		}, []string{"source"}),
		oldestAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "outbox_oldest_pending_age_seconds", Help: "Age of the oldest unpublished outbox event, quarantined ones included (commit time to now); alert on it.",
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
		scans: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "outbox_relay_scans_total", Help: "Queries for due outbox rows: one per batch, which covers every shard due at that moment.",
		}, []string{"source"}),
		ledgerMissing: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "outbox_ledger_missing_deliveries", Help: "Deliveries the subscriber never applied or dead-lettered although its queue's retry horizon has passed, not replayed yet; alert on any.",
		}, []string{"source", "subscriber"}),
		ledgerUnconfirmed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "outbox_ledger_unconfirmed_deliveries", Help: "Published deliveries older than the ledger's minimum age that the subscriber has not confirmed yet (among the rows of the last audit pass).",
		}, []string{"source", "subscriber"}),
		ledgerOldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "outbox_ledger_oldest_unconfirmed_age_seconds", Help: "Publication to now of the oldest delivery the subscriber has not confirmed (last audit pass); alert when it passes minutes.",
		}, []string{"source", "subscriber"}),
		ledgerErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "outbox_ledger_errors_total", Help: "Audit passes in which a subscriber's ledger endpoint could not be asked.",
		}, []string{"source", "subscriber"}),
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.pending, m.oldestAge, m.quarantined, m.publishLag, m.enqueueErrors, m.published, m.scans,
		m.ledgerMissing, m.ledgerUnconfirmed, m.ledgerOldest, m.ledgerErrors} {
		errs = append(errs, reg.Register(c))
	}
	return m, errors.Join(errs...)
}
