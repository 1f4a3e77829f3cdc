package app

import "github.com/prometheus/client_golang/prometheus"

// Metrics are fulfillment's Prometheus collectors.
type Metrics struct {
	shipments *prometheus.CounterVec
}

// NewMetrics returns the collectors, registered with reg unless it is nil (once per registry).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		shipments: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fulfillment_shipments_total",
			Help: "Shipments reaching a status (PENDING: created, SHIPPED, FAILED, CANCELLED), counted once committed.",
		}, []string{"status"}),
	}
	if reg != nil {
		reg.MustRegister(m.shipments)
	}
	return m
}
