package adminclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/spanmart/spanmart/internal/topology"
)

// OutboxStatus is the relay's GET /v1/outbox: the relay instance that answered and every source's
// outbox (pkg/outboxlib/relay.SourceStatus).
type OutboxStatus struct {
	Owner   string         `json:"owner"`
	Sources []SourceStatus `json:"sources"`
}

// SourceStatus is the state of one source's outbox.
type SourceStatus struct {
	Source   string `json:"source"` // the owning service, e.g. "orders"
	Database string `json:"database"`
	// Pending counts unpublished rows that are not quarantined (including rows backing off).
	Pending int64 `json:"pending"`
	// OldestPendingAgeSeconds is the age of the oldest unpublished row, quarantined ones
	// included (0 if none).
	OldestPendingAgeSeconds float64       `json:"oldest_pending_age_seconds"`
	Quarantined             int64         `json:"quarantined"`
	Shards                  []ShardStatus `json:"shards"`
	// PublishLag is commit → tasks created over the answering relay instance's recent
	// publications of the source.
	PublishLag LagSummary `json:"publish_lag_seconds"`
}

// OldestPendingAge is OldestPendingAgeSeconds as a duration.
func (s SourceStatus) OldestPendingAge() time.Duration {
	return time.Duration(s.OldestPendingAgeSeconds * float64(time.Second))
}

// LiveShards counts the shards held by an unexpired lease.
func (s SourceStatus) LiveShards() int {
	n := 0
	for _, sh := range s.Shards {
		if sh.Live {
			n++
		}
	}
	return n
}

// ShardStatus is the lease of one pending shard.
type ShardStatus struct {
	Shard     int64      `json:"shard"`
	Owner     string     `json:"owner,omitempty"` // "" when free
	Epoch     int64      `json:"epoch"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	Live      bool       `json:"live"`
}

// OutboxEvent is an outbox row as the relay shows it (pkg/outboxlib/relay.EventInfo): the events
// of an aggregate (GET /v1/outbox/events) and the quarantined events (GET /v1/outbox/quarantined).
type OutboxEvent struct {
	Source           string     `json:"source"` // the service whose outbox holds it
	EventID          string     `json:"event_id"`
	Type             string     `json:"type"`
	AggregateType    string     `json:"aggregate_type"`
	AggregateID      string     `json:"aggregate_id"`
	AggregateVersion int64      `json:"aggregate_version"`
	CommittedAt      time.Time  `json:"committed_at"`
	PublishedAt      *time.Time `json:"published_at"` // nil while pending
	Quarantined      bool       `json:"quarantined"`
	Attempts         int64      `json:"attempts"`
	LastError        string     `json:"last_error,omitempty"`
	// Subscribers are the consumers its type is routed to (roster names); none for a type without
	// a route.
	Subscribers []string `json:"subscribers"`
	// Payload is the event's payload, for the quarantined events only.
	Payload json.RawMessage `json:"payload,omitempty"`
}

// QuarantinedEvent is an outbox event the relay stopped retrying, waiting for an operator's
// ReplayOutboxEvent once its cause is fixed: Quarantined is true, Attempts, LastError and Payload
// are set.
type QuarantinedEvent = OutboxEvent

// OutboxReplay is the relay's answer to a replay (202).
type OutboxReplay struct {
	Source  string `json:"source"`
	EventID string `json:"event_id"`
	Status  string `json:"status"` // "replayed"
}

// LedgerSource is one source's missing deliveries (GET /v1/ledger).
type LedgerSource struct {
	Source  string            `json:"source"`
	Missing []MissingDelivery `json:"missing"`
}

// MissingDelivery is an (event, subscriber) pair Cloud Tasks gave up on, found by the relay's
// delivery ledger.
type MissingDelivery struct {
	Source           string     `json:"source"`
	EventID          string     `json:"event_id"`
	Subscriber       string     `json:"subscriber"`
	EventType        string     `json:"event_type"`
	AggregateID      string     `json:"aggregate_id"`
	ReplayGeneration int64      `json:"replay_generation"`
	PublishedAt      time.Time  `json:"published_at"`
	DetectedAt       time.Time  `json:"detected_at"`
	ReplayedAt       *time.Time `json:"replayed_at,omitempty"`
	ReplayReason     string     `json:"replay_reason,omitempty"`
}

// LedgerAudit is what one audit pass of a source found (POST /v1/ledger/audit).
type LedgerAudit struct {
	Source      string                 `json:"source"`
	Rows        int                    `json:"rows"`
	Confirmed   int                    `json:"confirmed"`
	Missing     int                    `json:"missing"`
	Unconfirmed map[string]Unconfirmed `json:"unconfirmed"`
	Errors      map[string]string      `json:"errors,omitempty"`
}

// Unconfirmed counts a subscriber's deliveries the ledger could not confirm yet.
type Unconfirmed struct {
	Count            int     `json:"count"`
	OldestAgeSeconds float64 `json:"oldest_age_seconds"`
}

// OutboxStatus reads every source's outbox: GET {relay}/v1/outbox.
func (c *Client) OutboxStatus(ctx context.Context) (OutboxStatus, error) {
	var out OutboxStatus
	err := c.do(ctx, request{service: topology.Relay, method: http.MethodGet, path: "/v1/outbox"}, &out)
	return out, err
}

// Quarantined lists the quarantined events of every source: GET {relay}/v1/outbox/quarantined.
func (c *Client) Quarantined(ctx context.Context) ([]QuarantinedEvent, error) {
	var out struct {
		Events []QuarantinedEvent `json:"events"`
	}
	err := c.do(ctx, request{service: topology.Relay, method: http.MethodGet, path: "/v1/outbox/quarantined"}, &out)
	return out.Events, err
}

// AggregateEvents lists the events of one aggregate across every source, by commit time:
// GET {relay}/v1/outbox/events?aggregate_type=T&aggregate_id=ID. Published rows live seven days
// in the outbox, so older events are absent.
func (c *Client) AggregateEvents(ctx context.Context, aggregateType, aggregateID string) ([]OutboxEvent, error) {
	var out struct {
		Events []OutboxEvent `json:"events"`
	}
	err := c.do(ctx, request{service: topology.Relay, method: http.MethodGet, path: "/v1/outbox/events",
		query: url.Values{"aggregate_type": {aggregateType}, "aggregate_id": {aggregateID}}}, &out)
	return out.Events, err
}

// ReplayOutboxEvent re-queues an event of source (quarantined, published within the retention, or
// backing off): POST {relay}/v1/outbox/{source}/events/{id}/replay. reason is required.
func (c *Client) ReplayOutboxEvent(ctx context.Context, source, eventID, reason string) (OutboxReplay, error) {
	return c.relayReplay(ctx, "/v1/outbox/", source, eventID, reason)
}

// Ledger lists every source's missing deliveries, the replayed ones too when all:
// GET {relay}/v1/ledger[?all=true].
func (c *Client) Ledger(ctx context.Context, all bool) ([]LedgerSource, error) {
	var q url.Values
	if all {
		q = url.Values{"all": {"true"}}
	}
	var out struct {
		Sources []LedgerSource `json:"sources"`
	}
	err := c.do(ctx, request{service: topology.Relay, method: http.MethodGet, path: "/v1/ledger", query: q}, &out)
	return out.Sources, err
}

// AuditLedger runs an audit pass of every source now: POST {relay}/v1/ledger/audit.
func (c *Client) AuditLedger(ctx context.Context) ([]LedgerAudit, error) {
	var out struct {
		Audits []LedgerAudit `json:"audits"`
	}
	err := c.do(ctx, request{service: topology.Relay, method: http.MethodPost, path: "/v1/ledger/audit"}, &out)
	return out.Audits, err
}

// ReplayMissingDelivery replays an event whose delivery the ledger found missing:
// POST {relay}/v1/ledger/{source}/events/{id}/replay. reason is required.
func (c *Client) ReplayMissingDelivery(ctx context.Context, source, eventID, reason string) (OutboxReplay, error) {
	return c.relayReplay(ctx, "/v1/ledger/", source, eventID, reason)
}

func (c *Client) relayReplay(ctx context.Context, prefix, source, eventID, reason string) (OutboxReplay, error) {
	if err := checkReason(reason); err != nil {
		return OutboxReplay{}, err
	}
	var out OutboxReplay
	err := c.do(ctx, request{service: topology.Relay, method: http.MethodPost,
		path: prefix + url.PathEscape(source) + "/events/" + url.PathEscape(eventID) + "/replay",
		body: reasonBody{reason}}, &out)
	return out, err
}
