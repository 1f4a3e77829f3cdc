package web

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/spanmart/spanmart/internal/adminclient"
	"github.com/spanmart/spanmart/internal/topology"
	"github.com/spanmart/spanmart/pkg/outboxlib"
)

// Kinds of failed message, as a replay target names them.
const (
	kindOutbox     = "outbox"     // a quarantined outbox event, replayed by the relay
	kindDeadLetter = "deadletter" // a consumer's dead letter, replayed by the consumer
)

// failure is one failed message: a quarantined outbox event or a dead letter.
type failure struct {
	Kind      string // kindOutbox or kindDeadLetter
	Where     string // the source (outbox) or the consumer (dead letter)
	EventID   string
	Type      string
	Aggregate string // "order 0b0c...", when known
	Attempts  int64
	LastError string
	Committed time.Time // the event's commit time (zero when unknown)
	FailedAt  time.Time // when it was dead-lettered (zero for an outbox event, which has no such time)
	Payload   string    // pretty JSON, or the raw body
}

// Target is what the replay form sends for the failure: kind/where/event id.
func (f failure) Target() string { return f.Kind + "/" + f.Where + "/" + f.EventID }

// group is the failures whose last errors normalize alike.
type group struct {
	Key      string
	Failures []failure
}

// failedView is the failed messages page.
type failedView struct {
	Groups []group
	Total  int
	Gaps   []gap
}

// failures reads the relay's quarantined events and every consumer's dead letters, at once.
func (s *Server) failures(c echo.Context) ([]failure, []gap) {
	ctx, cancel := s.callContext(c)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		all  []failure
		gaps []gap
	)
	add := func(fs []failure, g *gap) {
		mu.Lock()
		defer mu.Unlock()
		all = append(all, fs...)
		if g != nil {
			gaps = append(gaps, *g)
		}
	}
	wg.Go(func() {
		evs, err := s.client.Quarantined(ctx)
		if err != nil {
			g := gapOf(topology.Relay, "its quarantined events", err)
			add(nil, &g)
			return
		}
		fs := make([]failure, 0, len(evs))
		for _, e := range evs {
			fs = append(fs, failure{
				Kind: kindOutbox, Where: e.Source, EventID: e.EventID, Type: e.Type,
				Aggregate: e.AggregateType + " " + e.AggregateID + fmt.Sprintf(" v%d", e.AggregateVersion),
				Attempts:  e.Attempts, LastError: e.LastError, Committed: e.CommittedAt, Payload: prettyJSON(e.Payload),
			})
		}
		add(fs, nil)
	})
	for _, svc := range topology.Consumers() {
		wg.Go(func() {
			dls, err := s.client.DeadLetters(ctx, svc.Name, adminclient.DeadLetterQuery{})
			if err != nil {
				g := gapOf(svc.Name, "its dead letters", err)
				add(nil, &g)
				return
			}
			fs := make([]failure, 0, len(dls))
			for _, d := range dls {
				fs = append(fs, deadLetterFailure(svc.Name, d))
			}
			add(fs, nil)
		})
	}
	wg.Wait()
	sort.Slice(gaps, func(i, j int) bool { return gaps[i].Service < gaps[j].Service })
	return all, gaps
}

func deadLetterFailure(consumer string, d adminclient.DeadLetter) failure {
	f := failure{
		Kind: kindDeadLetter, Where: consumer, EventID: d.EventID, Type: d.EventType,
		Attempts: d.Attempts, LastError: d.LastError, FailedAt: d.DeadAt, Payload: prettyJSON(d.Body),
	}
	if len(d.Body) == 0 && len(d.BodyBytes) > 0 {
		f.Payload = string(d.BodyBytes)
	}
	attr := func(name string) string {
		for k, v := range d.Attributes {
			if strings.EqualFold(k, name) {
				return v
			}
		}
		return ""
	}
	if id := attr(outboxlib.HeaderSubject); id != "" {
		f.Aggregate = strings.TrimSpace(attr(outboxlib.HeaderAggregateType) + " " + id)
		if v := attr(outboxlib.HeaderAggregateVersion); v != "" {
			f.Aggregate += " v" + v
		}
	}
	if t, err := time.Parse(time.RFC3339Nano, attr(outboxlib.HeaderCommitTime)); err == nil {
		f.Committed = t
	}
	return f
}

// groupFailures groups by normalized last error: the biggest group first, then by key; within a
// group, the newest first.
func groupFailures(fs []failure) []group {
	by := map[string][]failure{}
	for _, f := range fs {
		k := normalizeError(f.LastError)
		by[k] = append(by[k], f)
	}
	out := make([]group, 0, len(by))
	for k, members := range by {
		sort.SliceStable(members, func(i, j int) bool {
			ti, tj := members[i].FailedAt, members[j].FailedAt
			if ti.IsZero() {
				ti = members[i].Committed
			}
			if tj.IsZero() {
				tj = members[j].Committed
			}
			if !ti.Equal(tj) {
				return ti.After(tj)
			}
			return members[i].Target() < members[j].Target()
		})
		out = append(out, group{Key: k, Failures: members})
	}
	sort.Slice(out, func(i, j int) bool {
		if len(out[i].Failures) != len(out[j].Failures) {
			return len(out[i].Failures) > len(out[j].Failures)
		}
		return out[i].Key < out[j].Key
	})
	return out
}

// failed is GET /failed.
func (s *Server) failed(c echo.Context) error {
	fs, gaps := s.failures(c)
	return s.render(c, http.StatusOK, "failed", failedView{Groups: groupFailures(fs), Total: len(fs), Gaps: gaps})
}

// maxReplayTargets bounds one replay request: a group replay is one request per member, in turn.
const maxReplayTargets = 1000

// replayResult is the outcome of one replay.
type replayResult struct {
	Kind    string
	Where   string
	EventID string
	OK      bool
	Outcome string // what the service answered: "applied", "replayed", ...; or why it refused
}

// replayedView is the page a replay answers with.
type replayedView struct {
	Reason   string
	Results  []replayResult
	Replayed int
	Failed   int
}

// replay is POST /failed/replay: form fields target (one or more, kind/where/event id: what the
// page showed, so a group replay replays exactly the messages the operator saw), reason and the
// CSRF token (checked by the guard). A blank reason, or a target that is not one, is refused
// before anything is sent. The replays run one after the other, each on behalf of the operator;
// each one's result is shown.
func (s *Server) replay(c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return s.renderError(c, http.StatusBadRequest, "the form could not be read", PathFailed)
	}
	reason := strings.TrimSpace(form.Get("reason"))
	if reason == "" {
		return s.renderError(c, http.StatusBadRequest, "A reason is required: say why this is replayed (it is recorded with the replay). Nothing was replayed.", PathFailed)
	}
	targets := form["target"]
	switch {
	case len(targets) == 0:
		return s.renderError(c, http.StatusBadRequest, "nothing to replay: the form names no message", PathFailed)
	case len(targets) > maxReplayTargets:
		return s.renderError(c, http.StatusBadRequest, fmt.Sprintf("at most %d messages at once; nothing was replayed", maxReplayTargets), PathFailed)
	}
	parsed := make([]replayResult, len(targets))
	for i, t := range targets {
		r, err := parseTarget(t)
		if err != nil {
			return s.renderError(c, http.StatusBadRequest, err.Error()+"; nothing was replayed", PathFailed)
		}
		parsed[i] = r
	}
	ctx, cancel := s.callContext(c)
	defer cancel()
	v := replayedView{Reason: reason}
	for _, r := range parsed {
		switch r.Kind {
		case kindOutbox:
			res, err := s.client.ReplayOutboxEvent(ctx, r.Where, r.EventID, reason)
			r.OK, r.Outcome = err == nil, res.Status
			if err != nil {
				r.Outcome = describe(err)
			}
		case kindDeadLetter:
			res, err := s.client.ReplayDeadLetter(ctx, r.Where, r.EventID, reason)
			r.OK, r.Outcome = err == nil, res.Outcome
			if err != nil {
				r.Outcome = describe(err)
			}
		}
		if r.OK {
			v.Replayed++
		} else {
			v.Failed++
		}
		v.Results = append(v.Results, r)
	}
	return s.render(c, http.StatusOK, "replayed", v)
}

var errBadTarget = errors.New("not a message to replay")

// parseTarget reads kind/where/event id.
func parseTarget(t string) (replayResult, error) {
	parts := strings.SplitN(t, "/", 3)
	if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
		return replayResult{}, fmt.Errorf("%w: %q", errBadTarget, t)
	}
	r := replayResult{Kind: parts[0], Where: parts[1], EventID: parts[2]}
	switch r.Kind {
	case kindOutbox:
		// The relay names a source after the service that owns the database.
		if s, ok := topology.Lookup(r.Where); !ok || s.Database == "" {
			return replayResult{}, fmt.Errorf("%w: %q names no source", errBadTarget, t)
		}
	case kindDeadLetter:
		if s, ok := topology.Lookup(r.Where); !ok || !s.Consumer() {
			return replayResult{}, fmt.Errorf("%w: %q names no consumer", errBadTarget, t)
		}
	default:
		return replayResult{}, fmt.Errorf("%w: %q", errBadTarget, t)
	}
	return r, nil
}
