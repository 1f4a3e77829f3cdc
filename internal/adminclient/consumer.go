package adminclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// ConsumerStatus is a consumer's GET /admin/status. The counts of Events are since the process
// that answered started (Since); DeadLetters and Failing come from the consumer's database.
type ConsumerStatus struct {
	Consumer string `json:"consumer"`
	// DeadLetters counts the dead letters not replayed yet.
	DeadLetters int64 `json:"dead_letters"`
	// Failing counts the events with failed answers not applied yet (the queue retries them).
	Failing int64       `json:"failing"`
	Since   time.Time   `json:"since"`
	Events  EventCounts `json:"events"`
	// Lag is commit → applied over the last 1000 events applied.
	Lag LagSummary `json:"lag_seconds"`
}

// EventCounts counts the deliveries by outcome (pkg/outboxlib's Outcome* values).
type EventCounts struct {
	Applied      int64 `json:"applied"`
	Duplicate    int64 `json:"duplicate"`
	Early        int64 `json:"early"` // deferrals: the predecessor was not applied yet
	Transient    int64 `json:"transient"`
	DeadLettered int64 `json:"dead_lettered"`
	Stale        int64 `json:"stale"`
	Rejected     int64 `json:"rejected"`
}

// LagSummary is the distribution of commit → applied, in seconds.
type LagSummary struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50"`
	P99   float64 `json:"p99"`
}

// DeadLetter is a parked event as the consumer shows it (pkg/outboxlib.DeadLetter).
type DeadLetter struct {
	EventID    string            `json:"event_id"`
	EventType  string            `json:"event_type"`
	Source     string            `json:"source"`     // ce-source, e.g. "//spanmart/orders"
	Attributes map[string]string `json:"attributes"` // every ce-* header of the delivery
	// Body is the request body when it is JSON; BodyBytes holds it otherwise.
	Body         json.RawMessage `json:"body,omitempty"`
	BodyBytes    []byte          `json:"body_bytes,omitempty"`
	Attempts     int64           `json:"attempts"`
	LastError    string          `json:"last_error"`
	DeadAt       time.Time       `json:"dead_at"`
	ReplayedAt   *time.Time      `json:"replayed_at,omitempty"`
	ReplayReason string          `json:"replay_reason,omitempty"`
	ReplayedBy   string          `json:"replayed_by,omitempty"`
}

// Replayed reports whether the dead letter was replayed.
func (d DeadLetter) Replayed() bool { return d.ReplayedAt != nil }

// DeadLetterQuery selects dead letters.
type DeadLetterQuery struct {
	All   bool // the replayed ones too
	Limit int  // at most this many, newest first; 0 is the consumer's default and cap, 1000
}

// DeadLetterReplay is the result of a dead letter's replay: Outcome is pkg/outboxlib's
// ("applied", "duplicate", or "stale" when a later version of the aggregate was applied
// meanwhile). Consumer and EventID are the request's.
type DeadLetterReplay struct {
	Consumer string `json:"consumer"`
	EventID  string `json:"event_id"`
	Outcome  string `json:"outcome"`
}

// MaxProcessedPerRequest is the most event ids GET /admin/processed takes; Processed splits
// longer lists.
const MaxProcessedPerRequest = 100

// ConsumerStatus reads GET {consumer}/admin/status.
func (c *Client) ConsumerStatus(ctx context.Context, consumer string) (ConsumerStatus, error) {
	if err := consumerName(consumer); err != nil {
		return ConsumerStatus{}, err
	}
	var out ConsumerStatus
	err := c.do(ctx, request{service: consumer, method: http.MethodGet, path: "/admin/status"}, &out)
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
	var out struct {
		DeadLetters []DeadLetter `json:"dead_letters"`
	}
	err := c.do(ctx, request{service: consumer, method: http.MethodGet, path: "/admin/deadletters", query: query}, &out)
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
	out := DeadLetterReplay{Consumer: consumer, EventID: eventID}
	err := c.do(ctx, request{service: consumer, method: http.MethodPost,
		path: "/admin/deadletters/" + url.PathEscape(eventID) + "/replay", body: reasonBody{reason}}, &out)
	out.Consumer, out.EventID = consumer, eventID
	return out, err
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
		var page struct {
			Processed []struct {
				EventID     string    `json:"event_id"`
				ProcessedAt time.Time `json:"processed_at"`
			} `json:"processed"`
		}
		err := c.do(ctx, request{service: consumer, method: http.MethodGet, path: "/admin/processed",
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
