package localscheduler

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/spanmart/spanmart/emulator/tasksemu"
	"github.com/spanmart/spanmart/internal/localcloud"
	"github.com/spanmart/spanmart/internal/topology"
	"github.com/spanmart/spanmart/pkg/outboxlib"
)

// TestJobsCallTheirServicesAsTheScheduler: each job is a POST of its path to its service, with an
// ID token of scheduler@ for the service's URL that the services' own verifier accepts (signed by
// the Tasks emulator, the local issuer); a service that answers an error counts as a failed run.
func TestJobsCallTheirServicesAsTheScheduler(t *testing.T) {
	ctx := context.Background()
	emu, err := tasksemu.Start(ctx, tasksemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emu.Close() })
	issuer := "http://" + emu.HTTPAddr()

	var mu sync.Mutex
	calls := map[string][]string{} // service → "METHOD path email"
	urls := map[string]string{}
	for _, svc := range []string{topology.Orders, topology.Gateway, topology.Notifications} {
		srv := httptest.NewUnstartedServer(nil)
		srv.Start()
		t.Cleanup(srv.Close)
		urls[svc] = srv.URL
		v, err := outboxlib.NewVerifier(outboxlib.VerifierConfig{Issuer: issuer, Audiences: []string{srv.URL},
			AllowedEmails: []string{localcloud.Account(topology.Scheduler)}})
		if err != nil {
			t.Fatal(err)
		}
		srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			who, err := v.Verify(r.Context(), r.Header.Get("Authorization"))
			mu.Lock()
			calls[svc] = append(calls[svc], r.Method+" "+r.URL.Path+" "+who)
			mu.Unlock()
			switch {
			case err != nil:
				http.Error(w, err.Error(), http.StatusUnauthorized)
			case svc == topology.Orders:
				http.Error(w, "audit unavailable", http.StatusServiceUnavailable)
			}
		})
	}
	s := New(Config{Metadata: issuer, URL: func(svc string) string { return urls[svc] }})
	for _, j := range topology.Jobs() {
		err := s.RunJob(ctx, j)
		if (err != nil) != (j.Service == topology.Orders) {
			t.Errorf("job %s: %v", j.Name, err)
		}
	}
	want := localcloud.Account(topology.Scheduler)
	for _, j := range topology.Jobs() {
		if got := calls[j.Service]; len(got) != 1 || got[0] != "POST "+j.Path+" "+want {
			t.Errorf("%s was called %q, want once: POST %s %s", j.Service, got, j.Path, want)
		}
	}
	runs := s.Runs()
	for _, j := range topology.Jobs() {
		r := runs[j.Name]
		if j.Service == topology.Orders {
			if r.Failed != 1 || r.OK != 0 || !strings.Contains(r.LastError, "503") {
				t.Errorf("runs of %s: %+v, want one failed (503)", j.Name, r)
			}
		} else if r.OK != 1 || r.Failed != 0 {
			t.Errorf("runs of %s: %+v, want one ok", j.Name, r)
		}
	}
}
