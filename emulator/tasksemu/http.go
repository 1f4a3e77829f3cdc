package tasksemu

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// httpHandler serves the OIDC discovery document and JWKS (so receivers can verify the tokens
// the dispatcher mints), the metadata server's identity endpoints (so services get tokens from
// the same issuer for their own calls), and a read-only status page.
func (s *Server) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /.well-known/openid-configuration", s.issuer.Handler())
	mux.Handle("GET /jwks", s.issuer.Handler())
	mux.HandleFunc("GET /computeMetadata/v1/instance/service-accounts/{account}/identity", s.serveIdentity)
	mux.HandleFunc("GET /computeMetadata/v1/instance/service-accounts/{account}/email", s.serveEmail)
	mux.HandleFunc("GET /status", s.serveStatusJSON)
	mux.HandleFunc("GET /metrics", s.serveMetrics)
	mux.HandleFunc("GET /{$}", s.serveStatusHTML)
	return mux
}

// QueueStatus is one queue's line on the status page.
type QueueStatus struct {
	Name                 string  `json:"name"`
	State                string  `json:"state"`
	Depth                int     `json:"depth"`                   // pending tasks, including those in flight
	OldestTaskAgeSeconds float64 `json:"oldest_task_age_seconds"` // since the oldest pending task was created; 0 when empty
	InFlight             int     `json:"in_flight"`               // dispatches waiting for a response
	Throttles            int64   `json:"throttles"`               // system throttling pauses since the queue was created (429 and 503 answers)
}

// snapshotStatus returns every queue's status by name.
func (s *Server) snapshotStatus() map[string]QueueStatus {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]QueueStatus, len(s.queues))
	for name, q := range s.queues {
		st := QueueStatus{Name: name, State: q.pb.State.String(), Depth: len(q.tasks), InFlight: q.inflight, Throttles: q.throttles}
		for _, t := range q.tasks {
			st.OldestTaskAgeSeconds = max(st.OldestTaskAgeSeconds, now.Sub(t.pb.CreateTime.AsTime()).Seconds())
		}
		out[name] = st
	}
	return out
}

func (s *Server) sortedStatus() []QueueStatus {
	m := s.snapshotStatus()
	list := make([]QueueStatus, 0, len(m))
	for _, st := range m {
		list = append(list, st)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	return list
}

func (s *Server) serveStatusJSON(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(struct {
		Queues []QueueStatus `json:"queues"`
	}{s.sortedStatus()})
}

var statusPage = template.Must(template.New("status").Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>tasksemu</title>
<style>body{font-family:sans-serif}td,th{padding:2px 10px;text-align:left}td.n{text-align:right}</style></head>
<body><h1>Cloud Tasks emulator</h1>
<p>gRPC on {{.Addr}} &middot; OIDC issuer {{.Issuer}} &middot; <a href="/status">JSON</a></p>
<table><tr><th>Queue</th><th>State</th><th>Depth</th><th>Oldest task age (s)</th><th>In flight</th></tr>
{{range .Queues}}<tr><td>{{.Name}}</td><td>{{.State}}</td><td class="n">{{.Depth}}</td><td class="n">{{printf "%.1f" .OldestTaskAgeSeconds}}</td><td class="n">{{.InFlight}}</td></tr>
{{else}}<tr><td colspan="5">no queues</td></tr>{{end}}</table></body></html>
`))

func (s *Server) serveStatusHTML(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	statusPage.Execute(w, struct {
		Addr, Issuer string
		Queues       []QueueStatus
	}{s.Addr(), s.Issuer(), s.sortedStatus()})
}

// serveMetrics exposes queue gauges and attempt counters in the Prometheus text format.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	type attempts struct {
		queue, class string
		n            int64
	}
	var counts []attempts
	s.mu.Lock()
	for name, q := range s.queues {
		for class, n := range q.attempts {
			counts = append(counts, attempts{name, class, n})
		}
	}
	s.mu.Unlock()
	sort.Slice(counts, func(i, j int) bool {
		if counts[i].queue != counts[j].queue {
			return counts[i].queue < counts[j].queue
		}
		return counts[i].class < counts[j].class
	})
	queues := s.sortedStatus()
	var b strings.Builder
	gauge := func(name, help string, value func(QueueStatus) string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name)
		for _, q := range queues {
			fmt.Fprintf(&b, "%s{queue=%q} %s\n", name, q.Name, value(q))
		}
	}
	gauge("tasksemu_queue_depth", "Pending tasks, including those in flight.", func(q QueueStatus) string { return strconv.Itoa(q.Depth) })
	gauge("tasksemu_queue_oldest_task_age_seconds", "Age of the oldest pending task.", func(q QueueStatus) string {
		return strconv.FormatFloat(q.OldestTaskAgeSeconds, 'f', 3, 64)
	})
	gauge("tasksemu_queue_in_flight", "Dispatches waiting for a response.", func(q QueueStatus) string { return strconv.Itoa(q.InFlight) })
	gauge("tasksemu_queue_paused", "1 when the queue is paused.", func(q QueueStatus) string {
		if q.State == "PAUSED" {
			return "1"
		}
		return "0"
	})
	fmt.Fprintf(&b, "# HELP tasksemu_queue_throttles_total System throttling pauses of the queue (its target answered 429 or 503).\n# TYPE tasksemu_queue_throttles_total counter\n")
	for _, q := range queues {
		fmt.Fprintf(&b, "tasksemu_queue_throttles_total{queue=%q} %d\n", q.Name, q.Throttles)
	}
	b.WriteString("# HELP tasksemu_attempts_total Finished dispatch attempts by outcome (2xx, 4xx, 5xx, timeout, error).\n# TYPE tasksemu_attempts_total counter\n")
	for _, c := range counts {
		fmt.Fprintf(&b, "tasksemu_attempts_total{queue=%q,outcome=%q} %d\n", c.queue, c.class, c.n)
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	io.WriteString(w, b.String())
}
