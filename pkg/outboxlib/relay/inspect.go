package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"cloud.google.com/go/spanner"

	"github.com/spanmart/spanmart/pkg/outboxlib/outboxapi"
)

// MaxQuarantinedListed bounds Quarantined per source.
const MaxQuarantinedListed = 200

const eventColumns = `EventId, EventType, AggregateType, AggregateId, AggregateVersion, CreatedAt, PublishedAt,
QuarantinedAt IS NOT NULL, Attempts, IFNULL(LastError, '')`

// EventsOf returns the outbox rows of one aggregate in every source (through OutboxByAggregate),
// oldest commit first: the events of an order's trace.
func (r *Relay) EventsOf(ctx context.Context, aggregateType, aggregateID string) ([]outboxapi.Event, error) {
	var out []outboxapi.Event
	for _, s := range r.sources {
		evs, err := s.query(ctx, spanner.Statement{
			SQL: "SELECT " + eventColumns + ` FROM OutboxEvents@{FORCE_INDEX=OutboxByAggregate}
WHERE AggregateId = @id AND AggregateType = @type`,
			Params: map[string]any{"id": aggregateID, "type": aggregateType},
		}, false)
		if err != nil {
			return nil, err
		}
		out = append(out, evs...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CommittedAt.Before(out[j].CommittedAt) })
	return out, nil
}

// Quarantined returns every source's quarantined rows (at most MaxQuarantinedListed each, oldest
// first) with their payloads and last errors: what an operator replays once the cause is fixed.
func (r *Relay) Quarantined(ctx context.Context) ([]outboxapi.Event, error) {
	var out []outboxapi.Event
	for _, s := range r.sources {
		evs, err := s.query(ctx, spanner.Statement{
			SQL: "SELECT " + eventColumns + `, Payload FROM OutboxEvents@{FORCE_INDEX=OutboxPending}
WHERE PendingShard IS NOT NULL AND QuarantinedAt IS NOT NULL ORDER BY CreatedAt LIMIT @limit`,
			Params: map[string]any{"limit": int64(MaxQuarantinedListed)},
		}, true)
		if err != nil {
			return nil, err
		}
		out = append(out, evs...)
	}
	return out, nil
}

// query reads outbox rows of s selected by stmt (eventColumns, then Payload when withPayload).
func (s *source) query(ctx context.Context, stmt spanner.Statement, withPayload bool) ([]outboxapi.Event, error) {
	var out []outboxapi.Event
	err := s.src.Client.Single().Query(ctx, stmt).Do(func(row *spanner.Row) error {
		e := outboxapi.Event{Source: s.src.Name}
		var published spanner.NullTime
		cols := []any{&e.EventID, &e.Type, &e.AggregateType, &e.AggregateID, &e.AggregateVersion, &e.CommittedAt,
			&published, &e.Quarantined, &e.Attempts, &e.LastError}
		var payload spanner.NullJSON
		if withPayload {
			cols = append(cols, &payload)
		}
		if err := row.Columns(cols...); err != nil {
			return err
		}
		if published.Valid {
			t := published.Time.UTC()
			e.PublishedAt = &t
		}
		e.CommittedAt = e.CommittedAt.UTC()
		if payload.Valid {
			b, err := json.Marshal(payload.Value)
			if err != nil {
				return err
			}
			e.Payload = b
		}
		e.Subscribers = []string{}
		for _, sub := range s.r.cfg.Routes[e.Type] {
			e.Subscribers = append(e.Subscribers, sub.Name)
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("relay: read the outbox of %s: %w", s.src.Name, err)
	}
	return out, nil
}
