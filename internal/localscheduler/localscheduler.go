// Package localscheduler stands in for Cloud Scheduler on the local stacks (the dev stack, the e2e
// harness and the soak): it calls every job of topology.Jobs (the payment sweep, the e-mail sweep,
// orders' audit) as production does, with POST and an ID token of the scheduler's own account
// (scheduler@..., topology.Scheduler) for the service's URL, minted by the local metadata server
// (the Tasks emulator's, which signs the tokens every local service verifies). Without it, work
// that production leaves to a job (an e-mail waiting out a back-off, a payment whose webhook was
// lost) would never be done locally.
//
// A job that fails (the service is down, or answers an error) is logged and counted, and tried
// again at its next run, as Cloud Scheduler does without a retry config.
package localscheduler

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/spanmart/spanmart/internal/localcloud"
	"github.com/spanmart/spanmart/internal/topology"
)

// Config configures a Scheduler.
type Config struct {
	// Metadata is the base URL of the metadata server that mints the scheduler's ID tokens: the
	// Tasks emulator's HTTP address.
	Metadata string
	// URL is the base URL of a service (its token's audience, as in production).
	URL func(service string) string
	// Every is how often each job runs; 0: topology.JobEvery, production's schedule. Tests and the
	// soak run the jobs more often, so that what waits for a job does not wait five minutes.
	Every time.Duration
	// Account is the account the jobs run as; "": the local scheduler@ account.
	Account string
	HTTP    *http.Client                     // nil: http.DefaultClient
	Logf    func(format string, args ...any) // each failed run; nil: none
}

// Scheduler runs the jobs until its context ends.
type Scheduler struct {
	cfg  Config
	mu   sync.Mutex
	runs map[string]Runs
}

// Runs counts the runs of one job.
type Runs struct {
	OK, Failed int64
	LastError  string // of the last failed run
}

// Timeout bounds one run of a job (Cloud Scheduler's attempt deadline for HTTP targets defaults to
// three minutes; a sweep answers well within one).
const Timeout = time.Minute

// New returns a scheduler; Run starts it.
func New(cfg Config) *Scheduler {
	if cfg.Every <= 0 {
		cfg.Every = topology.JobEvery
	}
	if cfg.Account == "" {
		cfg.Account = localcloud.Account(topology.Scheduler)
	}
	if cfg.HTTP == nil {
		cfg.HTTP = http.DefaultClient
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	return &Scheduler{cfg: cfg, runs: map[string]Runs{}}
}

// Run calls every job once each Every, the first time Every after it starts, until ctx ends. The
// jobs run independently: a slow one delays only its own next run.
func (s *Scheduler) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, j := range topology.Jobs() {
		wg.Go(func() {
			t := time.NewTicker(s.cfg.Every)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				s.RunJob(ctx, j)
			}
		})
	}
	wg.Wait()
}

// RunJob runs job j once, now, and returns its error (also counted and logged).
func (s *Scheduler) RunJob(ctx context.Context, j topology.Job) error {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	err := s.call(ctx, j)
	s.mu.Lock()
	r := s.runs[j.Name]
	if err == nil {
		r.OK++
	} else {
		r.Failed++
		r.LastError = err.Error()
	}
	s.runs[j.Name] = r
	s.mu.Unlock()
	if err != nil && ctx.Err() == nil {
		s.cfg.Logf("localscheduler: job %s: %v (tried again in %s)", j.Name, err, s.cfg.Every)
	}
	return err
}

// Runs returns the runs of every job so far, by job name.
func (s *Scheduler) Runs() map[string]Runs {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]Runs, len(s.runs))
	for k, v := range s.runs {
		out[k] = v
	}
	return out
}

func (s *Scheduler) call(ctx context.Context, j topology.Job) error {
	base := s.cfg.URL(j.Service)
	token, err := s.token(ctx, base)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+j.Path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("User-Agent", "Google-Cloud-Scheduler")
	resp, err := s.cfg.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s%s: %s: %s", j.Service, j.Path, resp.Status, body)
	}
	return nil
}

// token mints an ID token of the scheduler's account for audience, as Cloud Scheduler's OIDC
// token for an HTTP target.
func (s *Scheduler) token(ctx context.Context, audience string) (string, error) {
	u := s.cfg.Metadata + "/computeMetadata/v1/instance/service-accounts/" + s.cfg.Account + "/identity?audience=" + url.QueryEscape(audience)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Metadata-Flavor", "Google")
	resp, err := s.cfg.HTTP.Do(req)
	if err != nil {
		return "", fmt.Errorf("scheduler token: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("scheduler token: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("scheduler token: %s %s", resp.Status, b)
	}
	return string(b), nil
}
