package main

import (
	"context"
	"sort"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmart/spanmart/internal/topology"
)

// hop is one event type's way from its producer's commit to one subscriber's commit, over the
// events committed in a window: commit → PublishedAt (the relay's mark, after the task was
// created) and commit → ProcessedAt (the consumer's transaction). All three are commit
// timestamps of the one Spanner emulator, so no hop mixes two clocks (the producer's wall
// clock, which the relay's outbox_publish_lag_seconds starts from, is not used).
type hop struct {
	eventType, subscriber string
	first                 time.Duration   // median offset of the type's commits from the window's start: orders the rows by saga step
	published, applied    []time.Duration // sorted
	unapplied             int             // events of the type the subscriber has not applied
}

// sourceDatabases are the databases whose outboxes the relay reads.
func sourceDatabases() []string {
	var out []string
	for _, s := range topology.Consumers() {
		out = append(out, s.Database)
	}
	return out
}

// hops joins every outbox row committed in [from, to) with the ProcessedEvents rows of every
// consumer by event id.
func (b *bench) hops(ctx context.Context, from, to time.Time) ([]hop, error) {
	type ev struct {
		typ                string
		created, published spanner.NullTime
	}
	evs := map[string]*ev{}
	for _, db := range sourceDatabases() {
		err := b.s.DB(db).Single().Query(ctx, spanner.Statement{
			SQL:    `SELECT EventId, EventType, CreatedAt, PublishedAt FROM OutboxEvents WHERE CreatedAt >= @from AND CreatedAt < @to`,
			Params: map[string]any{"from": from, "to": to},
		}).Do(func(r *spanner.Row) error {
			var id string
			e := &ev{}
			if err := r.Columns(&id, &e.typ, &e.created, &e.published); err != nil {
				return err
			}
			evs[id] = e
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	byKey := map[[2]string]*hop{}
	offsets := map[string][]time.Duration{}
	get := func(typ, sub string) *hop {
		k := [2]string{typ, sub}
		if byKey[k] == nil {
			byKey[k] = &hop{eventType: typ, subscriber: sub}
		}
		return byKey[k]
	}
	for _, e := range evs {
		offsets[e.typ] = append(offsets[e.typ], e.created.Time.Sub(from))
		if e.published.Valid {
			h := get(e.typ, "")
			h.published = append(h.published, e.published.Time.Sub(e.created.Time))
		}
	}
	applied := map[[2]string]int{}
	for _, c := range topology.Consumers() {
		err := b.s.DB(c.Database).Single().Query(ctx, spanner.Statement{
			SQL:    `SELECT EventId, ProcessedAt FROM ProcessedEvents WHERE Consumer = @consumer AND ProcessedAt >= @from`,
			Params: map[string]any{"consumer": c.Name, "from": from},
		}).Do(func(r *spanner.Row) error {
			var id string
			var at time.Time
			if err := r.Columns(&id, &at); err != nil {
				return err
			}
			if e := evs[id]; e != nil {
				h := get(e.typ, c.Name)
				h.applied = append(h.applied, at.Sub(e.created.Time))
				applied[[2]string{e.typ, c.Name}]++
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	var out []hop
	for k, h := range byKey {
		if pub := byKey[[2]string{k[0], ""}]; k[1] != "" && pub != nil {
			h.unapplied = len(pub.published) - applied[k]
		}
		sortDur(h.published)
		sortDur(h.applied)
		o := offsets[k[0]]
		sortDur(o)
		h.first = pct(o, 50)
		out = append(out, *h)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].eventType != out[j].eventType {
			return out[i].first < out[j].first
		}
		return out[i].subscriber < out[j].subscriber
	})
	return out, nil
}
