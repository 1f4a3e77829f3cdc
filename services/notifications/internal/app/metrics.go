package app

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spanmart/spanmart/services/notifications/internal/mailer"
)

// Metrics are the service's Prometheus collectors.
type Metrics struct {
	sent     *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics returns the collectors, registered with reg unless it is nil (once per registry).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "notifications_sent_total",
			Help: "Attempts to send an e-mail, by template and result: sent, bounced (the address is refused: final), " +
				"failed (the last allowed attempt failed: final), retry (a temporary failure: tried again later).",
		}, []string{"template", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "notifications_smtp_send_seconds",
			Help:    "Duration of one SMTP session (connection to the server's answer), by result: accepted, bounced, error.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"result"}),
	}
	if reg != nil {
		reg.MustRegister(m.sent, m.duration)
	}
	return m
}

func (m *Metrics) observeSend(d time.Duration, err error) {
	result := "accepted"
	switch {
	case mailer.IsBounce(err):
		result = "bounced"
	case err != nil:
		result = "error"
	}
	m.duration.WithLabelValues(result).Observe(d.Seconds())
}
