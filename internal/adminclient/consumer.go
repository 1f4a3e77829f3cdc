package adminclient

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/spanmart/spanmart/pkg/outboxlib/outboxapi"
)

// The consumers' answers are the outbox pipeline's own wire types (pkg/outboxlib/outboxapi), the
// same in every consumer: these names are aliases of them.

// ConsumerStatus is a consumer's GET /admin/status. The counts of Events are since the process
// that answered started (Since); DeadLetters and Failing come from the consumer's database.
type ConsumerStatus = outboxapi.ConsumerStatus

// EventCounts counts the deliveries by outcome (pkg/outboxlib's Outcome* values).
type EventCounts = outboxapi.EventCounts

// LagSummary is the distribution of a latency (commit → applied, commit → published), in seconds.
type LagSummary = outboxapi.LagSummary

// DeadLetter is a parked event as the consumer shows it.
type DeadLetter = outboxapi.DeadLetter

// DeadLetterQuery selects dead letters.
type DeadLetterQuery struct {
	All   bool // the replayed ones too
	Limit int  // at most this many, newest first; 0 is the consumer's default and cap, outboxapi.MaxDeadLettersListed
}

// DeadLetterReplay is the result of a dead letter's replay: Outcome is the consumer's answer
// (outboxapi.ReplayOutcome: "applied", "duplicate", or "stale" when a later version of the
// aggregate was applied meanwhile); Consumer and EventID are the request's, which the answer does
// not repeat. (The client's own type, not a wire type: spanmartctl prints it.)
type DeadLetterReplay struct {
	Consumer string `json:"consumer"`
	EventID  string `json:"event_id"`
	Outcome  string `json:"outcome"`
}

// MaxProcessedPerRequest is the most event ids GET /admin/processed takes; Processed splits
// longer lists.
const MaxProcessedPerRequest = outboxapi.MaxProcessedIDs

// ConsumerStatus reads GET {consumer}/admin/status.
func (c *Client) ConsumerStatus(ctx context.Context, consumer string) (ConsumerStatus, error) {
	if err := consumerName(consumer); err != nil {
		return ConsumerStatus{}, err
	}
	var out ConsumerStatus
	err := c.do(ctx, request{service: consumer, method: http.MethodGet, path: outboxapi.PathStatus}, &out)
	return out, err
}

// DeadLetters lists the consumer's dead letters, newest first:
// GET {consumer}/admin/deadletters[?all=true&limit=N].
func (c *Client) DeadLetters(ctx context.Context, consumer string, q DeadLetterQuery) ([]DeadLetter, error) {
	if err := consumerName(consumer); err != nil {
		return nil, err
	}
	query := url.Values{}
	if q.All {
		query.Set("all", "true")
	}
	if q.Limit > 0 {
		query.Set("limit", strconv.Itoa(q.Limit))
	}
	var out outboxapi.DeadLetterList
	err := c.do(ctx, request{service: consumer, method: http.MethodGet, path: outboxapi.PathDeadLetters, query: query}, &out)
	return out.DeadLetters, err
}

// DeadLetter returns the consumer's dead letter of eventID, replayed or not. The consumers have no
// route for one dead letter, so it is looked up among the newest 1000 (the list's cap); not found
// is ErrNotFound.
func (c *Client) DeadLetter(ctx context.Context, consumer, eventID string) (DeadLetter, error) {
	list, err := c.DeadLetters(ctx, consumer, DeadLetterQuery{All: true})
	if err != nil {
		return DeadLetter{}, err
	}
	for _, d := range list {
		if d.EventID == eventID {
			return d, nil
		}
	}
	return DeadLetter{}, fmt.Errorf("%s: %w: no dead letter of event %s among its newest %d", consumer, ErrNotFound, eventID, len(list))
}

// ReplayDeadLetter runs the consumer's handler on a dead-lettered event again, recording reason
// and the operator (from the token, and X-Spanmart-On-Behalf-Of for a delegate):
// POST {consumer}/admin/deadletters/{id}/replay. reason is required. The consumer answers 404
// for an unknown dead letter, 409 for one already replayed, one whose predecessor is not applied
// yet or of a type it has no handler for, 422 when the handler refuses it for good.
func (c *Client) ReplayDeadLetter(ctx context.Context, consumer, eventID, reason string) (DeadLetterReplay, error) {
	if err := consumerName(consumer); err != nil {
		return DeadLetterReplay{}, err
	}
	if err := checkReason(reason); err != nil {
		return DeadLetterReplay{}, err
	}
	var out outboxapi.ReplayOutcome
	err := c.do(ctx, request{service: consumer, method: http.MethodPost,
		path: outboxapi.PathDeadLetters + "/" + url.PathEscape(eventID) + "/replay", body: outboxapi.ReplayRequest{Reason: reason}}, &out)
	return DeadLetterReplay{Consumer: consumer, EventID: eventID, Outcome: out.Outcome}, err
}

// Processed returns when the consumer processed each of eventIDs (its ProcessedEvents row: an
// event applied, or dead-lettered, which also records it); an id it has not processed is absent.
// GET {consumer}/admin/processed?event_id=A&event_id=B, MaxProcessedPerRequest ids at a time.
func (c *Client) Processed(ctx context.Context, consumer string, eventIDs []string) (map[string]time.Time, error) {
	if err := consumerName(consumer); err != nil {
		return nil, err
	}
	out := map[string]time.Time{}
	ids := dedupe(eventIDs)
	for len(ids) > 0 {
		n := min(len(ids), MaxProcessedPerRequest)
		var page outboxapi.ProcessedList
		err := c.do(ctx, request{service: consumer, method: http.MethodGet, path: outboxapi.PathProcessed,
			query: url.Values{"event_id": ids[:n]}}, &page)
		if err != nil {
			return nil, err
		}
		for _, p := range page.Processed {
			out[p.EventID] = p.ProcessedAt
		}
		ids = ids[n:]
	}
	return out, nil
}

func dedupe(ids []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, id := range ids {
		if id != "" && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}
