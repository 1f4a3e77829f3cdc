package tasksemu

import (
	"encoding/json"
	"html/template"
	"net/http"
	"sort"
	"time"
)

// httpHandler serves the OIDC discovery document and JWKS (so receivers can verify the tokens
// the dispatcher mints) and a read-only status page.
func (s *Server) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /.well-known/openid-configuration", s.issuer.Handler())
	mux.Handle("GET /jwks", s.issuer.Handler())
	mux.HandleFunc("GET /status", s.serveStatusJSON)
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
}

// snapshotStatus returns every queue's status by name.
func (s *Server) snapshotStatus() map[string]QueueStatus {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]QueueStatus, len(s.queues))
	for name, q := range s.queues {
		st := QueueStatus{Name: name, State: q.pb.State.String(), Depth: len(q.tasks), InFlight: q.inflight}
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
