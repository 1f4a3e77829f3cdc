// Package outboxapi is the wire format of the outbox pipeline's operator endpoints: those
// pkg/outboxlib serves in every consumer (/admin/status, /admin/deadletters, /admin/processed) and
// those the relay serves (relay/: /v1/outbox..., /v1/ledger..., /nudge). It holds their request and
// response bodies and the paths its clients call, and is the one definition of them: outboxlib and
// its relay render into these types, and the operators' client (internal/adminclient, on which the
// console and spanmartctl are built) decodes them, so a client cannot lack a field a server writes.
//
// It is to the pipeline what services/<svc>/api is to a service. It holds data only and imports
// nothing of the repository: a client takes the types without the relay's machinery or Spanner.
//
// The relay's question to a consumer in the delivery ledger (POST /admin/ledger) is not here: it is
// the pipeline's own traffic, not an operator's (pkg/outboxlib.LedgerRequest).
package outboxapi

import (
	"encoding/json"
	"time"
)

// Paths its clients call as they are; a route with a path parameter is its path followed by "/"
// and the parameter. Every route takes a Google ID token for the server's URL: of an operator
// (ADMIN_ALLOWED_EMAILS, or a delegate acting for one), except the relay's PathNudge, which takes
// the services' own accounts' (NUDGE_ALLOWED_EMAILS).
const (
	// Every consumer's (pkg/outboxlib.Consumer.Register).
	PathStatus      = "/admin/status"      // GET: ConsumerStatus
	PathDeadLetters = "/admin/deadletters" // GET [?all=true&limit=N]: DeadLetterList; POST /{id}/replay, ReplayRequest: ReplayOutcome
	PathProcessed   = "/admin/processed"   // GET ?event_id=A&event_id=B...: ProcessedList

	// The relay's (relay/).
	PathNudge        = "/nudge"                 // POST [?source=S&shard=N[&shard=M...]]: 204
	PathOutbox       = "/v1/outbox"             // GET: OutboxStatus; POST /{source}/events/{id}/replay, ReplayRequest: Replay (202)
	PathQuarantined  = "/v1/outbox/quarantined" // GET: EventList, with payloads
	PathOutboxEvents = "/v1/outbox/events"      // GET ?aggregate_type=T&aggregate_id=ID: EventList
	PathLedger       = "/v1/ledger"             // GET [?all=true]: LedgerList; POST /{source}/events/{id}/replay, ReplayRequest: Replay (202)
	PathLedgerAudit  = "/v1/ledger/audit"       // POST: AuditList
)

// MaxProcessedIDs is the most event ids one GET /admin/processed takes.
const MaxProcessedIDs = 100

// MaxDeadLettersListed is the default and the cap of GET /admin/deadletters' limit.
const MaxDeadLettersListed = 1000

// LagSummary is the latency of recent events, in seconds: how many, their median and 99th
// percentile (a consumer's commit → applied, the relay's commit → published).
type LagSummary struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50"`
	P99   float64 `json:"p99"`
}

// ReplayRequest is the body of every replay: a consumer's dead letter, the relay's outbox event or
// missing delivery. Who replays is the operator whose token the request carries, never a field.
type ReplayRequest struct {
	Reason string `json:"reason"`
}

// ConsumerStatus is a consumer's GET /admin/status: its backlog of trouble in the database and what
// it did since its process started (Since).
type ConsumerStatus struct {
	Consumer string `json:"consumer"`
	// DeadLetters counts the dead letters not replayed yet.
	DeadLetters int64 `json:"dead_letters"`
	// Failing counts the events with failed or early answers not applied yet (the queue retries
	// them).
	Failing int64       `json:"failing"`
	Since   time.Time   `json:"since"`
	Events  EventCounts `json:"events"`
	// Lag is commit → applied over the last 1000 events applied.
	Lag LagSummary `json:"lag_seconds"`
}

// EventCounts counts a consumer's answers by outcome (pkg/outboxlib's Outcome* values). The
// members are in alphabetical order, the order of the answer since it was written from a map.
type EventCounts struct {
	Applied      int64 `json:"applied"`
	DeadLettered int64 `json:"dead_lettered"`
	Duplicate    int64 `json:"duplicate"`
	Early        int64 `json:"early"` // deferrals: the predecessor was not applied yet
	Rejected     int64 `json:"rejected"`
	Stale        int64 `json:"stale"`
	Transient    int64 `json:"transient"`
}

// DeadLetter is a parked event as a consumer shows it.
type DeadLetter struct {
	EventID    string            `json:"event_id"`
	EventType  string            `json:"event_type"`
	Source     string            `json:"source"`     // ce-source, e.g. "//spanmart/orders"
	Attributes map[string]string `json:"attributes"` // every ce-* header of the delivery
	// Body is the request body when it is JSON; BodyBytes holds it otherwise (base64 in JSON).
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

// DeadLetterList is a consumer's GET /admin/deadletters, newest first.
type DeadLetterList struct {
	DeadLetters []DeadLetter `json:"dead_letters"`
}

// ReplayOutcome is a consumer's answer to a dead letter's replay (200): "applied", "duplicate", or
// "stale" when a later version of the aggregate was applied meanwhile.
type ReplayOutcome struct {
	Outcome string `json:"outcome"`
}

// Processed is when a consumer applied an event (its ProcessedEvents row: an event applied, or
// dead-lettered, which also records it).
type Processed struct {
	EventID     string    `json:"event_id"`
	ProcessedAt time.Time `json:"processed_at"`
}

// ProcessedList is a consumer's GET /admin/processed: the asked events it processed (an id it has
// not is absent).
type ProcessedList struct {
	Consumer  string      `json:"consumer"`
	Processed []Processed `json:"processed"`
}

// OutboxStatus is the relay's GET /v1/outbox: the relay instance that answered and every source's
// outbox.
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
	// OldestPendingAgeSeconds is now minus the commit time of the oldest unpublished row,
	// quarantined rows included (0 if none): a quarantined event keeps the alert on it firing
	// until it is replayed and published.
	OldestPendingAgeSeconds float64       `json:"oldest_pending_age_seconds"`
	Quarantined             int64         `json:"quarantined"`
	Shards                  []ShardStatus `json:"shards"`
	// PublishLag is commit → tasks created over the answering relay instance's recent
	// publications of the source (replays excluded).
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
	Live      bool       `json:"live"` // held by an unexpired lease
}

// Event is an outbox row as the relay shows it: where it is in its journey (committed, when the
// relay published it to which subscribers, or quarantined with its last error).
type Event struct {
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

// EventList is the relay's GET /v1/outbox/quarantined (every source's quarantined rows, oldest
// first per source) and GET /v1/outbox/events (one aggregate's rows in every source, by commit
// time). Events is never null.
type EventList struct {
	Events []Event `json:"events"`
}

// StatusReplayed is Replay's Status.
const StatusReplayed = "replayed"

// Replay is the relay's answer to a replay of an outbox event or of a missing delivery (202). The
// members are in alphabetical order, the order of the answer since it was written from a map.
type Replay struct {
	EventID string `json:"event_id"`
	Source  string `json:"source"`
	Status  string `json:"status"` // StatusReplayed
}

// LedgerList is the relay's GET /v1/ledger: every source's missing deliveries.
type LedgerList struct {
	Sources []LedgerSource `json:"sources"`
}

// LedgerSource is one source's missing deliveries. The members are in alphabetical order, the
// order of the answer since it was written from a map.
type LedgerSource struct {
	Missing []MissingDelivery `json:"missing"`
	Source  string            `json:"source"`
}

// MissingDelivery is an (event, subscriber) pair Cloud Tasks gave up on, found by the relay's
// delivery ledger (a row of MissingDeliveries).
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

// AuditList is the relay's POST /v1/ledger/audit: what an audit pass of each source found.
type AuditList struct {
	Audits []LedgerAudit `json:"audits"`
}

// LedgerAudit is what one audit pass of a source found.
type LedgerAudit struct {
	Source    string `json:"source"`
	Rows      int    `json:"rows"`      // published rows examined
	Confirmed int    `json:"confirmed"` // pairs applied or dead-lettered
	Missing   int    `json:"missing"`   // pairs newly recorded missing
	// Unconfirmed are the pairs still waiting, per subscriber (among the rows examined).
	Unconfirmed map[string]Unconfirmed `json:"unconfirmed"`
	Errors      map[string]string      `json:"errors,omitempty"` // subscribers that could not be asked
}

// Unconfirmed counts a subscriber's deliveries the ledger could not confirm yet.
type Unconfirmed struct {
	Count            int     `json:"count"`
	OldestAgeSeconds float64 `json:"oldest_age_seconds"` // since publication
}
