package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/uuid"

	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/outboxlib/relay"
)

// ---- drain and scale modes: the relay's own throughput on a pre-loaded outbox ----

// drainResult is one drain: -events order.created events appended to the orders outbox while
// every relay was stopped, then published by n relay instances started together.
type drainResult struct {
	relays     int
	n          int64 // events appended
	published  int64
	ready      time.Duration      // start → every instance ready
	firstPub   time.Duration      // start → first PublishedAt
	span       time.Duration      // first → last PublishedAt
	wall       time.Duration      // start → outbox empty
	pending    int64              // still unpublished at the deadline
	relayCPU   float64            // CPU seconds of the instances over the drain
	perRelay   map[string]float64 // events each instance published (its share of the tasks created)
	leases     []int              // shards held per live owner, at the end, largest first
	probe      []time.Duration
	depth      int // fulfillment-inbox depth when the outbox was empty
	lagMeanSec float64
}

// steady is events/s from every instance being ready to the outbox being empty: the headline.
// The first → last PublishedAt span understates the work (every shard enqueues a whole batch
// before its first mark commits).
func (r *drainResult) steady() float64 { return float64(r.published) / (r.wall - r.ready).Seconds() }

func (b *bench) drain(ctx context.Context) error {
	r, err := b.drainOnce(ctx, len(b.relays))
	if err != nil {
		return err
	}
	b.drainReport([]*drainResult{r})
	return nil
}

// scale drains the same backlog with each count of relay instances in -scale, on the same
// sources: whether more instances publish more, and how evenly their shard leases spread.
func (b *bench) scale(ctx context.Context) error {
	var rs []*drainResult
	for _, n := range b.o.scale {
		for i := len(b.relays) + 1; i <= n; i++ {
			name := fmt.Sprintf("relay-%d", i)
			if err := b.s.StartInstance(ctx, name, "relay"); err != nil {
				return err
			}
			b.relays = append(b.relays, name)
		}
		r, err := b.drainOnce(ctx, n)
		if err != nil {
			return err
		}
		rs = append(rs, r)
	}
	b.drainReport(rs)
	return nil
}

func (b *bench) drainOnce(ctx context.Context, relays int) (*drainResult, error) {
	n := b.o.events
	logf("drain with %d relay(s): stopping every relay, appending %d order.created events (%d per transaction)", relays, n, b.o.batch)
	for _, r := range b.relays {
		b.s.Stop(r)
	}
	db := b.s.DB("orders")
	eventIDs := make([]string, 0, n)
	t0 := time.Now()
	for done := 0; done < n; {
		k := min(b.o.batch, n-done)
		evs := make([]outboxlib.Event, 0, k)
		for i := 0; i < k; i++ {
			id := uuid.NewString()
			sku := b.skus[rand.IntN(len(b.skus))]
			e, err := outboxlib.NewEvent(ctx, "order.created", "order", id, 1, map[string]any{
				"order_id": id, "customer_id": "bench", "status": "PENDING", "currency": "JPY", "total_minor": 1000,
				"lines": []map[string]any{{"sku": sku, "quantity": 1, "unit_price_minor": 1000}},
			})
			if err != nil {
				return nil, err
			}
			evs = append(evs, e)
			eventIDs = append(eventIDs, e.ID)
		}
		if _, err := db.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
			return outboxlib.Append(ctx, txn, evs...)
		}); err != nil {
			return nil, err
		}
		done += k
	}
	used := b.relays[:relays]
	logf("  appended in %s; starting %s", time.Since(t0).Round(time.Millisecond), strings.Join(used, ", "))
	before, err := b.scrapeAll(ctx)
	if err != nil {
		return nil, err
	}
	probe, err := b.startProbe(ctx)
	if err != nil {
		return nil, err
	}
	res := &drainResult{relays: relays, n: int64(n), perRelay: map[string]float64{}}
	startAt := time.Now()
	for _, r := range used {
		if err := b.s.Start(ctx, r); err != nil {
			return nil, err
		}
	}
	res.ready = time.Since(startAt)
	deadline := time.Now().Add(b.o.settle + time.Duration(n/100)*time.Second)
	for {
		if res.pending, err = b.count(ctx, "orders", "SELECT COUNT(*) FROM OutboxEvents WHERE PublishedAt IS NULL"); err != nil {
			return nil, err
		}
		if res.pending == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	res.wall = time.Since(startAt)
	res.probe = probe()
	if res.leases, err = b.leaseSpread(ctx); err != nil {
		return nil, err
	}
	var first, last time.Time
	err = db.Single().Query(ctx, spanner.Statement{
		SQL:    `SELECT MIN(PublishedAt), MAX(PublishedAt), COUNT(PublishedAt) FROM OutboxEvents WHERE EventId IN UNNEST(@ids)`,
		Params: map[string]any{"ids": eventIDs}}).
		Do(func(r *spanner.Row) error { return r.Columns(&first, &last, &res.published) })
	if err != nil {
		return nil, err
	}
	res.firstPub, res.span = first.Sub(startAt), last.Sub(first)
	after, err := b.scrapeAll(ctx)
	if err != nil {
		return nil, err
	}
	for _, r := range used {
		res.relayCPU += delta(before, after, r, "process_cpu_seconds_total", "")
		res.perRelay[r] = delta(before, after, r, "outbox_published_events_total", `source="orders"`)
	}
	// The relay counts a published event once per task it created (per subscriber): each
	// instance's share of the tasks is its share of the events.
	tasks := 0.0
	for _, n := range res.perRelay {
		tasks += n
	}
	for r, n := range res.perRelay {
		if tasks > 0 {
			res.perRelay[r] = n / tasks * float64(res.published)
		}
	}
	res.depth, _ = b.tasksDepth(ctx, "fulfillment-inbox")
	res.lagMeanSec, _ = histMean(before, after, "relay", "outbox_publish_lag_seconds", `source="orders"`)
	// Let fulfillment work off this drain's tasks before the next one, so drains do not overlap.
	for res.depth > 0 && time.Now().Before(deadline.Add(b.o.settle)) {
		time.Sleep(200 * time.Millisecond)
		res.depth, _ = b.tasksDepth(ctx, "fulfillment-inbox")
	}
	logf("  %d published in %s (%.0f events/s ready → empty)", res.published, res.wall.Round(time.Millisecond), res.steady())
	return res, nil
}

// leaseSpread counts the orders source's shard leases held by each live owner, largest first.
func (b *bench) leaseSpread(ctx context.Context) ([]int, error) {
	var out []int
	err := b.s.DB("orders").Single().Query(ctx, spanner.Statement{
		SQL: `SELECT Owner, COUNT(*) FROM OutboxLeases
			WHERE Shard < @members AND Owner IS NOT NULL AND ExpiresAt > CURRENT_TIMESTAMP() GROUP BY Owner`,
		Params: map[string]any{"members": relay.MemberShardBase},
	}).Do(func(r *spanner.Row) error {
		var owner string
		var n int64
		if err := r.Columns(&owner, &n); err != nil {
			return err
		}
		out = append(out, int(n))
		return nil
	})
	sort.Sort(sort.Reverse(sort.IntSlice(out)))
	return out, err
}

func (b *bench) drainReport(rs []*drainResult) {
	fmt.Printf("\nRelay throughput: %d order.created events pre-loaded in the orders outbox (fake orders, routed to fulfillment) while "+
		"every relay was stopped, then the relay instance(s) started together on the same sources; fulfillment consumes concurrently "+
		"(queues %v/s, %d concurrent). %d shards per source.\n\n", b.o.events, b.o.qrate, b.o.qconc, outboxlib.Shards)
	fmt.Println("| relays | published | start → ready | start → first PublishedAt | first → last PublishedAt | start → outbox empty | events/s ready → empty (per relay) | events published per instance | shard leases per instance at the end | relay CPU s/s |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rs {
		wall := ms(r.wall)
		if r.pending > 0 {
			wall = fmt.Sprintf("**%d still pending** after %s", r.pending, ms(r.wall))
		}
		var per []string
		for _, name := range b.relays[:r.relays] {
			per = append(per, fmt.Sprintf("%.0f", r.perRelay[name]))
		}
		leases := make([]string, len(r.leases))
		for i, n := range r.leases {
			leases[i] = fmt.Sprint(n)
		}
		fmt.Printf("| %d | %d | %s | %s | %s | %s | %.0f (%.0f) | %s | %s | %.2f |\n", r.relays, r.published, ms(r.ready),
			ms(r.firstPub), ms(r.span), wall, r.steady(), r.steady()/float64(r.relays), strings.Join(per, " / "),
			strings.Join(leases, " / "), r.relayCPU/r.wall.Seconds())
	}
	last := rs[len(rs)-1]
	fmt.Printf("\nCloud Tasks emulator CreateTask latency during the last drain (a probe task every 100 ms into a paused queue of its own, "+
		"from this process): p50 %s, p99 %s, max %s (n %d).\n", ms(pct(last.probe, 50)), ms(pct(last.probe, 99)), ms(pct(last.probe, 100)), len(last.probe))
	fmt.Printf("Mean publish lag of the first relay (commit → tasks created, includes the time the relays were stopped): %s\n", ms(sec(last.lagMeanSec)))
	fmt.Println("\nTarget of issue 5 (printed, not asserted):")
	fmt.Printf("- ≥ 500 events/s through one relay: %.0f events/s per relay with %d relay(s)\n", rs[0].steady()/float64(rs[0].relays), rs[0].relays)
}
