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

// drainResult is one drain: n relay instances started together on the same sources and left to
// spread their shard leases, then -events order.created events appended to the orders outbox in
// transactions of -batch, published by them as they commit.
type drainResult struct {
	relays     int
	n          int64 // events appended
	published  int64
	ready      time.Duration      // start → every instance ready
	even       time.Duration      // start → every instance holding its fair share of the shards
	unevenAt   []int              // the spread when the wait gave up (nil when it became even)
	loaded     time.Duration      // first → last append commit
	firstPub   time.Duration      // first append commit → first PublishedAt
	span       time.Duration      // first append commit → last PublishedAt
	pending    int64              // still unpublished at the deadline
	relayCPU   float64            // CPU seconds per second of the instances over the drain
	perRelay   map[string]float64 // events each instance published (its share of the tasks created)
	leases     []int              // shards held per live owner, at the end, largest first
	probe      []time.Duration
	depth      int // fulfillment-inbox depth when the outbox was empty
	lagMeanSec float64
}

// steady is events/s from the first append's commit to the last PublishedAt: the headline.
func (r *drainResult) steady() float64 { return float64(r.published) / r.span.Seconds() }

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
	used := b.relays[:relays]
	logf("drain with %d relay(s): restarting %s, waiting for the shard leases to spread", relays, strings.Join(used, ", "))
	for _, r := range b.relays {
		b.s.Stop(r)
	}
	res := &drainResult{relays: relays, n: int64(n), perRelay: map[string]float64{}}
	startAt := time.Now()
	for _, r := range used {
		if err := b.s.Start(ctx, r); err != nil {
			return nil, err
		}
	}
	res.ready = time.Since(startAt)
	// An instance takes free shards up to its fair share and gives back any above it at each
	// renewal (a third of the lease): instances started one after the other spread within two
	// renewals.
	share := (outboxlib.Shards + relays - 1) / relays
	for {
		spread, err := b.leaseSpread(ctx)
		if err != nil {
			return nil, err
		}
		total := 0
		for _, k := range spread {
			total += k
		}
		if len(spread) == relays && total == outboxlib.Shards && spread[0] <= share {
			res.even = time.Since(startAt)
			break
		}
		if time.Since(startAt) > time.Minute {
			res.even, res.unevenAt = time.Since(startAt), spread
			break
		}
		time.Sleep(50 * time.Millisecond)
	}

	scrapedAt := time.Now()
	before, err := b.scrapeAll(ctx)
	if err != nil {
		return nil, err
	}
	probe, err := b.startProbe(ctx)
	if err != nil {
		return nil, err
	}
	db := b.s.DB("orders")
	eventIDs := make([]string, 0, n)
	var firstCommit, lastCommit time.Time
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
		ts, err := db.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
			return outboxlib.Append(ctx, txn, evs...)
		})
		if err != nil {
			return nil, err
		}
		if firstCommit.IsZero() {
			firstCommit = ts
		}
		lastCommit = ts
		done += k
	}
	res.loaded = lastCommit.Sub(firstCommit)
	logf("  leases even after %s; %d events appended in %s", ms(res.even), n, ms(res.loaded))
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
	res.firstPub, res.span = first.Sub(firstCommit), last.Sub(firstCommit)
	after, err := b.scrapeAll(ctx)
	if err != nil {
		return nil, err
	}
	for _, r := range used {
		res.relayCPU += delta(before, after, r, "process_cpu_seconds_total", "") / time.Since(scrapedAt).Seconds()
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
	logf("  %d published in %s from the first append's commit (%.0f events/s)", res.published, ms(res.span), res.steady())
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
	fmt.Printf("\nRelay throughput: the relay instance(s) started together on the same sources and left to spread their shard leases "+
		"(%d shards per source, each instance taking at most its fair share), then %d order.created events appended to the orders "+
		"outbox in transactions of %d (fake orders, routed to fulfillment), published as they commit; fulfillment consumes "+
		"concurrently (queues %v/s, %d concurrent). Events/s is the events over first append commit → last PublishedAt.\n\n",
		outboxlib.Shards, b.o.events, b.o.batch, b.o.qrate, b.o.qconc)
	fmt.Println("| relays | published | start → ready | start → leases at fair share | appended in | first commit → first PublishedAt | first commit → last PublishedAt | events/s (per relay) | events published per instance | shard leases per instance at the end | relay CPU s/s |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rs {
		span := ms(r.span)
		if r.pending > 0 {
			span = fmt.Sprintf("**%d still pending** after %s", r.pending, ms(r.span))
		}
		even := ms(r.even)
		if r.unevenAt != nil {
			even = fmt.Sprintf("**not within %s** (%v)", ms(r.even), r.unevenAt)
		}
		var per []string
		for _, name := range b.relays[:r.relays] {
			per = append(per, fmt.Sprintf("%.0f", r.perRelay[name]))
		}
		leases := make([]string, len(r.leases))
		for i, n := range r.leases {
			leases[i] = fmt.Sprint(n)
		}
		fmt.Printf("| %d | %d | %s | %s | %s | %s | %s | %.0f (%.0f) | %s | %s | %.2f |\n", r.relays, r.published, ms(r.ready), even,
			ms(r.loaded), ms(r.firstPub), span, r.steady(), r.steady()/float64(r.relays), strings.Join(per, " / "),
			strings.Join(leases, " / "), r.relayCPU)
	}
	last := rs[len(rs)-1]
	fmt.Printf("\nCloud Tasks emulator CreateTask latency during the last drain (a probe task every 100 ms into a paused queue of its own, "+
		"from this process): p50 %s, p99 %s, max %s (n %d).\n", ms(pct(last.probe, 50)), ms(pct(last.probe, 99)), ms(pct(last.probe, 100)), len(last.probe))
	fmt.Printf("Mean publish lag of the first relay (commit → tasks created): %s\n", ms(sec(last.lagMeanSec)))
	fmt.Println("\nTarget of issue 5 (printed, not asserted):")
	fmt.Printf("- ≥ 500 events/s through one relay: %.0f events/s per relay with %d relay(s)\n", rs[0].steady()/float64(rs[0].relays), rs[0].relays)
}
