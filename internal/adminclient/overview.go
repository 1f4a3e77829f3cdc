package adminclient

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/spanmart/spanmart/internal/topology"
)

// Gap is a piece of an assembled answer (Overview, Trace) a service did not give: it was down,
// refused the token, or has no URL configured. Err keeps the error for errors.Is (ErrForbidden,
// ErrNoURL, ...); Error is its text, for JSON.
type Gap struct {
	Service string `json:"service"`
	What    string `json:"what"` // what was asked, e.g. "status", "events of order 0b0c..."
	Error   string `json:"error"`
	Err     error  `json:"-"`
}

func gapOf(service, what string, err error) Gap {
	return Gap{Service: service, What: what, Error: err.Error(), Err: err}
}

func sortGaps(gs []Gap) {
	sort.SliceStable(gs, func(i, j int) bool {
		if gs[i].Service != gs[j].Service {
			return rosterIndex(gs[i].Service) < rosterIndex(gs[j].Service)
		}
		return gs[i].What < gs[j].What
	})
}

// Problem kinds.
const (
	ProblemQuarantined    = "quarantined"     // a source has quarantined events (Overview); an event of the order is quarantined (Trace)
	ProblemPendingAge     = "pending_age"     // a source's oldest pending event is older than MaxPendingAge
	ProblemDeadLetters    = "dead_letters"    // a consumer has unreplayed dead letters (Overview); a hop was dead-lettered (Trace)
	ProblemFailing        = "failing"         // a consumer has events with failed answers not applied yet
	ProblemStuck          = "stuck"           // the order is stuck (Trace)
	ProblemMismatch       = "mismatch"        // the reconciliation found the services disagree about the order (Trace)
	ProblemNeedsAttention = "needs_attention" // the order is NEEDS_ATTENTION (Trace)
)

// Problem is something an operator should look at, found in an assembled answer.
type Problem struct {
	Service string `json:"service"`           // the source, consumer or service concerned
	Kind    string `json:"kind"`              // Problem*
	Subject string `json:"subject,omitempty"` // an event or order id, when it is about one
	Detail  string `json:"detail"`            // one line, for people
}

func (p Problem) String() string { return p.Service + ": " + p.Detail }

// DefaultMaxPendingAge is OverviewOptions.MaxPendingAge's default: the relay publishes within a
// second or so, with retries for minutes when a queue refuses.
const DefaultMaxPendingAge = 5 * time.Minute

// OverviewOptions configures Overview.
type OverviewOptions struct {
	// MaxPendingAge is the age of a source's oldest pending event above which it is a problem;
	// 0 means DefaultMaxPendingAge.
	MaxPendingAge time.Duration
}

// Overview is the state of the pipeline: every outbox (the relay's status) and every consumer's
// status, and the problems they show. A service that did not answer is a Gap.
type Overview struct {
	CheckedAt time.Time        `json:"checked_at"`
	Relay     *OutboxStatus    `json:"relay"`     // nil when the relay did not answer
	Consumers []ConsumerStatus `json:"consumers"` // roster order; those that answered
	// Problems are, in this order: each source with quarantined events, each source whose oldest
	// pending event is older than MaxPendingAge, each consumer with unreplayed dead letters, each
	// consumer with failing events.
	Problems []Problem `json:"problems"`
	Gaps     []Gap     `json:"gaps,omitempty"`
}

// Overview reads the relay's status and every consumer's (each roster consumer; one without a
// configured URL is a gap) at once.
func (c *Client) Overview(ctx context.Context, opts OverviewOptions) Overview {
	if opts.MaxPendingAge <= 0 {
		opts.MaxPendingAge = DefaultMaxPendingAge
	}
	consumers := topology.Consumers()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		relay    *OutboxStatus
		statuses = make([]*ConsumerStatus, len(consumers))
		gaps     []Gap
	)
	addGap := func(g Gap) {
		mu.Lock()
		gaps = append(gaps, g)
		mu.Unlock()
	}
	wg.Go(func() {
		st, err := c.OutboxStatus(ctx)
		if err != nil {
			addGap(gapOf(topology.Relay, "outbox status", err))
			return
		}
		relay = &st
	})
	for i, s := range consumers {
		wg.Go(func() {
			st, err := c.ConsumerStatus(ctx, s.Name)
			if err != nil {
				addGap(gapOf(s.Name, "consumer status", err))
				return
			}
			statuses[i] = &st
		})
	}
	wg.Wait()

	out := Overview{CheckedAt: time.Now().UTC(), Relay: relay, Consumers: []ConsumerStatus{}, Problems: []Problem{}, Gaps: gaps}
	for _, st := range statuses {
		if st != nil {
			out.Consumers = append(out.Consumers, *st)
		}
	}
	if relay != nil {
		for _, s := range relay.Sources {
			if s.Quarantined > 0 {
				out.Problems = append(out.Problems, Problem{Service: s.Source, Kind: ProblemQuarantined,
					Detail: fmt.Sprintf("%d quarantined event(s) in the outbox, waiting for a replay", s.Quarantined)})
			}
		}
		for _, s := range relay.Sources {
			if s.Pending > 0 && s.OldestPendingAge() > opts.MaxPendingAge {
				out.Problems = append(out.Problems, Problem{Service: s.Source, Kind: ProblemPendingAge,
					Detail: fmt.Sprintf("%d pending event(s), the oldest unpublished for %s (over %s)", s.Pending, s.OldestPendingAge().Round(time.Second), opts.MaxPendingAge)})
			}
		}
	}
	for _, st := range out.Consumers {
		if st.DeadLetters > 0 {
			out.Problems = append(out.Problems, Problem{Service: st.Consumer, Kind: ProblemDeadLetters,
				Detail: fmt.Sprintf("%d dead letter(s) not replayed", st.DeadLetters)})
		}
	}
	for _, st := range out.Consumers {
		if st.Failing > 0 {
			out.Problems = append(out.Problems, Problem{Service: st.Consumer, Kind: ProblemFailing,
				Detail: fmt.Sprintf("%d event(s) failing (answered with an error, not applied yet)", st.Failing)})
		}
	}
	sortGaps(out.Gaps)
	return out
}

// Refused reports whether a gap is a 401 or 403: the token or the account is wrong, which asking
// again will not fix.
func (g Gap) Refused() bool {
	return errors.Is(g.Err, ErrUnauthenticated) || errors.Is(g.Err, ErrForbidden)
}

// rosterIndex orders services as the roster does (unknown names last).
func rosterIndex(name string) int {
	for i, n := range topology.Names() {
		if n == name {
			return i
		}
	}
	return len(topology.Names())
}
