// Package outboxlib is Spanmart's transactional outbox: the event envelope, Append (the outbox
// writer a service calls inside its read-write transaction), and the consumer side that turns a
// Cloud Tasks delivery into exactly one side effect (inbox de-duplication, per-aggregate versions,
// dead letters). The relay core lives in the relay subpackage.
//
// The contract, end to end (docs/architecture.md has the reasoning):
//
//  1. A service writes its state change and Append(ctx, txn, events...) in one read-write
//     transaction; the row gets the commit timestamp and a pending shard.
//  2. The relay creates one Cloud Tasks HTTP task per (event, subscriber), named after both, so a
//     retry of the relay is ALREADY_EXISTS, then marks the rows published.
//  3. The consumer inserts (EventId, Consumer) into ProcessedEvents with INSERT OR IGNORE in the
//     same transaction as its own change; a duplicate inserts nothing and is acknowledged.
package outboxlib

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/spanmart/spanmart/pkg/platform"
)

// Event is one fact: a row of OutboxEvents and, on the wire, a CloudEvents 1.0 HTTP request in
// binary mode (attributes in ce-* headers, the payload as the JSON body).
type Event struct {
	ID               string          // ce-id: UUIDv4, chosen once before the insert, never changes
	Type             string          // ce-type, e.g. "order.created"
	Source           string          // ce-source, "//spanmart/<service>"; set by the relay from its routing
	AggregateType    string          // ce-aggregatetype, e.g. "order"
	AggregateID      string          // ce-subject
	AggregateVersion int64           // ce-aggregateversion: 1, 2, ... per aggregate
	SchemaVersion    int64           // ce-schemaversion: version of the payload's contract
	OccurredAt       time.Time       // ce-time
	TraceParent      string          // ce-traceparent (W3C), also sent as the traceparent header
	Payload          json.RawMessage // the body: a published contract, not a dump of columns
	// CommittedAt is ce-committime: the commit timestamp of the event's outbox row, set by the
	// relay (zero before the commit). Latencies are measured from it, not from OccurredAt, which
	// is the producer's clock before its transaction committed.
	CommittedAt time.Time
}

// CloudEvents attribute headers (binary content mode) and the extension attributes Spanmart adds.
const (
	HeaderSpecVersion      = "Ce-Specversion"
	HeaderID               = "Ce-Id"
	HeaderSource           = "Ce-Source"
	HeaderType             = "Ce-Type"
	HeaderSubject          = "Ce-Subject"
	HeaderTime             = "Ce-Time"
	HeaderAggregateType    = "Ce-Aggregatetype"
	HeaderAggregateVersion = "Ce-Aggregateversion"
	HeaderSchemaVersion    = "Ce-Schemaversion"
	HeaderTraceParent      = "Ce-Traceparent"
	HeaderCommitTime       = "Ce-Committime"
	// HeaderPredecessorVersion is a delivery attribute, not part of the event: the relay sets it
	// per subscriber to the AggregateVersion of the latest earlier event of the aggregate routed
	// to that subscriber (0: none), so a consumer that sees only some of an aggregate's events
	// knows which one must be applied first.
	HeaderPredecessorVersion = "Ce-Predecessorversion"
)

// NewEvent returns an event with a fresh id, schema version 1, the current time and the trace of
// ctx (the request that caused it). payload is marshalled to JSON.
func NewEvent(ctx context.Context, typ, aggregateType, aggregateID string, version int64, payload any) (Event, error) {
	body, err := json.Marshal(payload)
	if err != nil {
		return Event{}, fmt.Errorf("event %s: marshal payload: %w", typ, err)
	}
	e := Event{
		ID: uuid.NewString(), Type: typ, AggregateType: aggregateType, AggregateID: aggregateID,
		AggregateVersion: version, SchemaVersion: 1, OccurredAt: time.Now().UTC(),
		TraceParent: platform.TraceFromContext(ctx).TraceParent(), Payload: body,
	}
	return e, e.validate(false)
}

// validate checks what every event must have; withSource also requires Source (on the wire).
func (e Event) validate(withSource bool) error {
	var problems []string
	if _, err := uuid.Parse(e.ID); err != nil || len(e.ID) != 36 {
		problems = append(problems, fmt.Sprintf("id %q is not a UUID", e.ID))
	}
	if e.Type == "" || len(e.Type) > 128 {
		problems = append(problems, "type must be 1 to 128 characters")
	}
	if withSource && e.Source == "" {
		problems = append(problems, "source is missing")
	}
	if e.AggregateType == "" || len(e.AggregateType) > 64 {
		problems = append(problems, "aggregate type must be 1 to 64 characters")
	}
	if e.AggregateID == "" || len(e.AggregateID) > 64 {
		problems = append(problems, "aggregate id (subject) must be 1 to 64 characters")
	}
	if e.AggregateVersion <= 0 {
		problems = append(problems, "aggregate version must be positive")
	}
	if e.SchemaVersion <= 0 {
		problems = append(problems, "schema version must be positive")
	}
	if e.OccurredAt.IsZero() {
		problems = append(problems, "time is missing")
	}
	if !json.Valid(e.Payload) {
		problems = append(problems, "payload is not valid JSON")
	}
	if len(problems) > 0 {
		return fmt.Errorf("invalid event %s: %s", e.ID, strings.Join(problems, "; "))
	}
	return nil
}

// Headers returns the HTTP headers that carry e in CloudEvents binary mode.
func (e Event) Headers() map[string]string {
	h := map[string]string{
		HeaderSpecVersion:      "1.0",
		HeaderID:               e.ID,
		HeaderSource:           e.Source,
		HeaderType:             e.Type,
		HeaderSubject:          e.AggregateID,
		HeaderTime:             e.OccurredAt.UTC().Format(time.RFC3339Nano),
		HeaderAggregateType:    e.AggregateType,
		HeaderAggregateVersion: strconv.FormatInt(e.AggregateVersion, 10),
		HeaderSchemaVersion:    strconv.FormatInt(e.SchemaVersion, 10),
		"Content-Type":         "application/json",
	}
	if !e.CommittedAt.IsZero() {
		h[HeaderCommitTime] = e.CommittedAt.UTC().Format(time.RFC3339Nano)
	}
	if e.TraceParent != "" {
		h[HeaderTraceParent] = e.TraceParent
		h["Traceparent"] = e.TraceParent
	}
	return h
}

// ErrMalformed is wrapped by ParseRequest when a request is not a valid Spanmart event (a client
// error: 400, never retried into a different answer).
var ErrMalformed = errors.New("malformed event")

// ParseRequest reads an event from a CloudEvents binary-mode request whose body has been read.
func ParseRequest(h http.Header, body []byte) (Event, error) {
	var problems []string
	if v := h.Get(HeaderSpecVersion); v != "1.0" {
		problems = append(problems, fmt.Sprintf("ce-specversion %q, want 1.0", v))
	}
	if ct := h.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		problems = append(problems, fmt.Sprintf("content type %q, want application/json", ct))
	}
	parseInt := func(name string) int64 {
		n, err := strconv.ParseInt(h.Get(name), 10, 64)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s %q is not an integer", strings.ToLower(name), h.Get(name)))
		}
		return n
	}
	e := Event{
		ID: h.Get(HeaderID), Source: h.Get(HeaderSource), Type: h.Get(HeaderType),
		AggregateID: h.Get(HeaderSubject), AggregateType: h.Get(HeaderAggregateType),
		AggregateVersion: parseInt(HeaderAggregateVersion), SchemaVersion: parseInt(HeaderSchemaVersion),
		TraceParent: h.Get(HeaderTraceParent), Payload: body,
	}
	t, err := time.Parse(time.RFC3339Nano, h.Get(HeaderTime))
	if err != nil {
		problems = append(problems, fmt.Sprintf("ce-time %q is not RFC 3339", h.Get(HeaderTime)))
	}
	e.OccurredAt = t
	if v := h.Get(HeaderCommitTime); v != "" {
		if e.CommittedAt, err = time.Parse(time.RFC3339Nano, v); err != nil {
			problems = append(problems, fmt.Sprintf("ce-committime %q is not RFC 3339", v))
		}
	}
	if err := e.validate(true); err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		return Event{}, fmt.Errorf("%w: %s", ErrMalformed, strings.Join(problems, "; "))
	}
	return e, nil
}
