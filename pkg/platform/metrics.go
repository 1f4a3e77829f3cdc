package platform

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// newHTTPMetrics registers the request metrics and the Go and process collectors on reg. Each
// server has its own registry, so tests and several servers in one process do not collide.
func newHTTPMetrics(reg *prometheus.Registry, service, version string) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "http_requests_total",
			Help: "HTTP requests by route pattern, method and status code.",
		}, []string{"route", "method", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "http_request_duration_seconds",
			Help:    "HTTP request latency by route pattern and method.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route", "method"}),
	}
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "spanmart_build_info",
		Help:        "Always 1; its labels name the running service and version.",
		ConstLabels: prometheus.Labels{"service": service, "version": version},
	})
	info.Set(1)
	reg.MustRegister(m.requests, m.duration, info,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *httpMetrics) observe(route, method string, status int, latency time.Duration) {
	m.requests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(route, method).Observe(latency.Seconds())
}
