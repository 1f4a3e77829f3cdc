package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/spanner"
	database "cloud.google.com/go/spanner/admin/database/apiv1"
	"cloud.google.com/go/spanner/admin/database/apiv1/databasepb"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"

	"github.com/spanmart/spanmart/e2e/harness"
)

// ceilingResult is what the machine can do before any order is placed: the Spanner emulator's
// commits per second when nothing else runs, and the commits the idle stack makes by itself
// (relay lease renewals, sweeps), which every window's per-order figures leave out.
type ceilingResult struct {
	commitsPerSec float64            // the emulator alone, saturated
	idlePerSec    float64            // the stack at rest
	idleByDB      map[string]float64 // the stack at rest, commits/s by database
	workers       int
	took          time.Duration
}

// ceiling measures the emulator's commit capacity with the stack at rest: probeWorkers clients
// each commit one-row read-write transactions (a point read and an insert, the shape of a
// consumer's inbox transaction) into a scratch database of its own for probeFor. On this machine
// the services share the cores with the emulator, so the orders/s it implies is an upper bound.
func (b *bench) ceiling(ctx context.Context) (ceilingResult, error) {
	const probeWorkers, probeFor, idleFor = 16, 5 * time.Second, 5 * time.Second
	logf("ceiling: the stack at rest for %s, then the Spanner emulator alone for %s (%d clients)", idleFor, probeFor, probeWorkers)
	sp0 := b.s.SpannerStats()
	select {
	case <-ctx.Done():
		return ceilingResult{}, ctx.Err()
	case <-time.After(idleFor):
	}
	idle := statsSince(sp0, b.s.SpannerStats())
	res := ceilingResult{workers: probeWorkers, idlePerSec: float64(idle.Commits) / idleFor.Seconds(), idleByDB: map[string]float64{}}
	for db, st := range idle.ByDatabase {
		res.idleByDB[db] = float64(st.Commits) / idleFor.Seconds()
	}

	da, err := database.NewDatabaseAdminClient(ctx)
	if err != nil {
		return res, err
	}
	defer da.Close()
	op, err := da.CreateDatabase(ctx, &databasepb.CreateDatabaseRequest{
		Parent: harness.Instance, CreateStatement: "CREATE DATABASE benchprobe",
		ExtraStatements: []string{`CREATE TABLE Probe (Id STRING(36) NOT NULL, CommittedAt TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp = true)) PRIMARY KEY (Id)`},
	})
	if err != nil {
		return res, fmt.Errorf("create the probe database: %w", err)
	}
	if _, err := op.Wait(ctx); err != nil {
		return res, fmt.Errorf("create the probe database: %w", err)
	}
	c, err := spanner.NewClientWithConfig(ctx, harness.DatabaseName("benchprobe"), spanner.ClientConfig{DisableNativeMetrics: true})
	if err != nil {
		return res, err
	}
	defer c.Close()
	var commits atomic.Int64
	pctx, cancel := context.WithTimeout(ctx, probeFor)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for range probeWorkers {
		wg.Go(func() {
			for pctx.Err() == nil {
				id := uuid.NewString()
				_, err := c.ReadWriteTransaction(pctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
					if _, err := txn.ReadRow(ctx, "Probe", spanner.Key{id}, []string{"Id"}); spanner.ErrCode(err) != codes.NotFound {
						return err
					}
					return txn.BufferWrite([]*spanner.Mutation{spanner.Insert("Probe", []string{"Id", "CommittedAt"}, []any{id, spanner.CommitTimestamp})})
				})
				if err == nil {
					commits.Add(1)
				}
			}
		})
	}
	wg.Wait()
	res.took = time.Since(start)
	res.commitsPerSec = float64(commits.Load()) / res.took.Seconds()
	logf("  %.0f commits/s alone; %.1f commits/s at rest", res.commitsPerSec, res.idlePerSec)
	return res, nil
}
