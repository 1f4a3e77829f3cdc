// Package orderstest helps the orders service's tests: a seeded catalog and a snapshot of every
// table the service writes, so tests assert the final database state, not just status codes.
package orderstest

import (
	"context"
	"encoding/json"
	"sort"
	"testing"

	"cloud.google.com/go/spanner"

	"github.com/spanmart/spanmart/gen/dao/ordersdb"
	"github.com/spanmart/spanmart/gen/dao/outboxdb"
)

// Catalog is the seeded catalog: A1, B2 in JPY, C3 in USD, OLD inactive.
var Catalog = []ordersdb.Product{
	{Sku: "A1", Name: "Alpha", Description: spanner.NullString{StringVal: "the first", Valid: true}, PriceMinor: 150, Currency: "JPY", Active: true},
	{Sku: "B2", Name: "Beta", PriceMinor: 1000, Currency: "JPY", Active: true},
	{Sku: "C3", Name: "Gamma", PriceMinor: 999, Currency: "USD", Active: true},
	{Sku: "OLD", Name: "Retired", PriceMinor: 10, Currency: "JPY", Active: false},
}

// Seed inserts Catalog.
func Seed(t testing.TB, client *spanner.Client) {
	t.Helper()
	var ms []*spanner.Mutation
	for _, p := range Catalog {
		p.SetCommitTimestamps()
		ms = append(ms, p.Insert())
	}
	if _, err := client.Apply(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
}

// State is what the service has written.
type State struct {
	Orders    []*ordersdb.Order
	Items     []*ordersdb.OrderItem
	Timeline  []*ordersdb.OrderTimeline
	Keys      []*ordersdb.IdempotencyKey
	Outbox    []*outboxdb.OutboxEvent // by (AggregateId, AggregateVersion)
	Processed []*outboxdb.ProcessedEvent
}

// Read reads every row the service writes, at one timestamp.
func Read(t testing.TB, client *spanner.Client) State {
	t.Helper()
	ctx := context.Background()
	txn := client.ReadOnlyTransaction()
	defer txn.Close()
	var (
		s   State
		err error
	)
	check := func() {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	s.Orders, err = ordersdb.ReadOrderRows(ctx, txn, spanner.AllKeys())
	check()
	s.Items, err = ordersdb.ReadOrderItemRows(ctx, txn, spanner.AllKeys())
	check()
	s.Timeline, err = ordersdb.ReadOrderTimelineRows(ctx, txn, spanner.AllKeys())
	check()
	s.Keys, err = ordersdb.ReadIdempotencyKeyRows(ctx, txn, spanner.AllKeys())
	check()
	s.Outbox, err = outboxdb.ReadOutboxEventRows(ctx, txn, spanner.AllKeys())
	check()
	s.Processed, err = outboxdb.ReadProcessedEventRows(ctx, txn, spanner.AllKeys())
	check()
	sort.Slice(s.Outbox, func(i, j int) bool {
		a, b := s.Outbox[i], s.Outbox[j]
		if a.AggregateId != b.AggregateId {
			return a.AggregateId < b.AggregateId
		}
		return a.AggregateVersion < b.AggregateVersion
	})
	return s
}

// Payload decodes an outbox row's payload.
func Payload(t testing.TB, e *outboxdb.OutboxEvent) map[string]any {
	t.Helper()
	b, err := json.Marshal(e.Payload.Value)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
