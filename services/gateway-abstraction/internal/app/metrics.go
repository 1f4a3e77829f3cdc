package app

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the gateway's Prometheus collectors, labelled by provider.
type Metrics struct {
	calls           *prometheus.HistogramVec
	errors          *prometheus.CounterVec
	circuit         *prometheus.GaugeVec
	webhooks        *prometheus.CounterVec
	webhookRejected *prometheus.CounterVec
	transitions     *prometheus.CounterVec
	late            *prometheus.CounterVec
	conflicts       *prometheus.CounterVec
	reconciled      *prometheus.CounterVec
	intentsFailed   *prometheus.CounterVec
}

// NewMetrics returns the collectors, registered with reg unless it is nil (once per registry).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		calls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gateway_provider_call_seconds",
			Help:    "Latency of one try of a provider call, by operation and result (ok, error).",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}, []string{"provider", "op", "result"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_provider_errors_total",
			Help: "Provider calls that failed, by normalized reason (provider_unavailable, invalid_request, not_found, circuit_open).",
		}, []string{"provider", "op", "reason"}),
		circuit: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gateway_provider_circuit_state",
			Help: "The provider's circuit breaker: 0 closed, 1 open, 2 half-open.",
		}, []string{"provider"}),
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_webhooks_total",
			Help: "Verified provider webhooks, by result (applied, duplicate: absorbed by ProviderEvents, ignored).",
		}, []string{"provider", "result"}),
		webhookRejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_webhook_verification_failures_total",
			Help: "Webhooks refused before anything was stored, by why (signature, malformed).",
		}, []string{"provider", "why"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_payments_total",
			Help: "Payments reaching a state, by provider and state.",
		}, []string{"provider", "status"}),
		late: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_provider_late_total",
			Help: "Provider answers, webhooks or lookups for a stage the payment had passed (ignored), by source.",
		}, []string{"provider", "via"}),
		conflicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_provider_conflicts_total",
			Help: "Provider states that the payment's state machine cannot take (not applied: look at the payment), by source.",
		}, []string{"provider", "via"}),
		reconciled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_reconciled_total",
			Help: "Payments the reconciliation sweep moved (their webhook was missed).",
		}, []string{"provider"}),
		intentsFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_intents_failed_total",
			Help: "Provider calls given up (invalid request, or unreachable for every attempt), by operation.",
		}, []string{"provider", "op"}),
	}
	if reg != nil {
		reg.MustRegister(m.calls, m.errors, m.circuit, m.webhooks, m.webhookRejected, m.transitions, m.late, m.conflicts, m.reconciled, m.intentsFailed)
	}
	return m
}
