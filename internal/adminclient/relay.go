package adminclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/spanmart/spanmart/internal/topology"
	"github.com/spanmart/spanmart/pkg/outboxlib/outboxapi"
)

// The relay's answers are the outbox pipeline's own wire types (pkg/outboxlib/outboxapi): these
// names are aliases of them.

// OutboxStatus is the relay's GET /v1/outbox: the relay instance that answered and every source's
// outbox.
type OutboxStatus = outboxapi.OutboxStatus

// SourceStatus is the state of one source's outbox.
type SourceStatus = outboxapi.SourceStatus

// ShardStatus is the lease of one pending shard.
type ShardStatus = outboxapi.ShardStatus

// OutboxEvent is an outbox row as the relay shows it: the events of an aggregate
// (GET /v1/outbox/events) and the quarantined events (GET /v1/outbox/quarantined).
type OutboxEvent = outboxapi.Event

// QuarantinedEvent is an outbox event the relay stopped retrying, waiting for an operator's
// ReplayOutboxEvent once its cause is fixed: Quarantined is true, Attempts, LastError and Payload
// are set.
type QuarantinedEvent = outboxapi.Event

// OutboxReplay is the relay's answer to a replay (202).
type OutboxReplay = outboxapi.Replay

// LedgerSource is one source's missing deliveries (GET /v1/ledger).
type LedgerSource = outboxapi.LedgerSource

// MissingDelivery is an (event, subscriber) pair Cloud Tasks gave up on, found by the relay's
// delivery ledger.
type MissingDelivery = outboxapi.MissingDelivery

// LedgerAudit is what one audit pass of a source found (POST /v1/ledger/audit).
type LedgerAudit = outboxapi.LedgerAudit

// Unconfirmed counts a subscriber's deliveries the ledger could not confirm yet.
type Unconfirmed = outboxapi.Unconfirmed

// OutboxStatus reads every source's outbox: GET {relay}/v1/outbox.
func (c *Client) OutboxStatus(ctx context.Context) (OutboxStatus, error) {
	var out OutboxStatus
	err := c.do(ctx, request{service: topology.Relay, method: http.MethodGet, path: outboxapi.PathOutbox}, &out)
	return out, err
}

// Quarantined lists the quarantined events of every source: GET {relay}/v1/outbox/quarantined.
func (c *Client) Quarantined(ctx context.Context) ([]QuarantinedEvent, error) {
	var out outboxapi.EventList
	err := c.do(ctx, request{service: topology.Relay, method: http.MethodGet, path: outboxapi.PathQuarantined}, &out)
	return out.Events, err
}

// AggregateEvents lists the events of one aggregate across every source, by commit time:
// GET {relay}/v1/outbox/events?aggregate_type=T&aggregate_id=ID. Published rows live seven days
// in the outbox, so older events are absent.
func (c *Client) AggregateEvents(ctx context.Context, aggregateType, aggregateID string) ([]OutboxEvent, error) {
	var out outboxapi.EventList
	err := c.do(ctx, request{service: topology.Relay, method: http.MethodGet, path: outboxapi.PathOutboxEvents,
		query: url.Values{"aggregate_type": {aggregateType}, "aggregate_id": {aggregateID}}}, &out)
	return out.Events, err
}

// ReplayOutboxEvent re-queues an event of source (quarantined, published within the retention, or
// backing off): POST {relay}/v1/outbox/{source}/events/{id}/replay. reason is required.
func (c *Client) ReplayOutboxEvent(ctx context.Context, source, eventID, reason string) (OutboxReplay, error) {
	return c.relayReplay(ctx, outboxapi.PathOutbox, source, eventID, reason)
}

// Ledger lists every source's missing deliveries, the replayed ones too when all:
// GET {relay}/v1/ledger[?all=true].
func (c *Client) Ledger(ctx context.Context, all bool) ([]LedgerSource, error) {
	var q url.Values
	if all {
		q = url.Values{"all": {"true"}}
	}
	var out outboxapi.LedgerList
	err := c.do(ctx, request{service: topology.Relay, method: http.MethodGet, path: outboxapi.PathLedger, query: q}, &out)
	return out.Sources, err
}

// AuditLedger runs an audit pass of every source now: POST {relay}/v1/ledger/audit.
func (c *Client) AuditLedger(ctx context.Context) ([]LedgerAudit, error) {
	var out outboxapi.AuditList
	err := c.do(ctx, request{service: topology.Relay, method: http.MethodPost, path: outboxapi.PathLedgerAudit}, &out)
	return out.Audits, err
}

// ReplayMissingDelivery replays an event whose delivery the ledger found missing:
// POST {relay}/v1/ledger/{source}/events/{id}/replay. reason is required.
func (c *Client) ReplayMissingDelivery(ctx context.Context, source, eventID, reason string) (OutboxReplay, error) {
	return c.relayReplay(ctx, outboxapi.PathLedger, source, eventID, reason)
}

// relayReplay is POST {relay}{path}/{source}/events/{id}/replay.
func (c *Client) relayReplay(ctx context.Context, path, source, eventID, reason string) (OutboxReplay, error) {
	if err := checkReason(reason); err != nil {
		return OutboxReplay{}, err
	}
	var out OutboxReplay
	err := c.do(ctx, request{service: topology.Relay, method: http.MethodPost,
		path: path + "/" + url.PathEscape(source) + "/events/" + url.PathEscape(eventID) + "/replay",
		body: outboxapi.ReplayRequest{Reason: reason}}, &out)
	return out, err
}
