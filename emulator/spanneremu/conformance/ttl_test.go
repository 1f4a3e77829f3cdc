package conformance

import (
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	database "cloud.google.com/go/spanner/admin/database/apiv1"
	"cloud.google.com/go/spanner/admin/database/apiv1/databasepb"
	instance "cloud.google.com/go/spanner/admin/instance/apiv1"
	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/emulator/spanneremu"
)

// TestRowDeletionPolicy checks that ROW DELETION POLICY rows are actually deleted. Cloud Spanner
// deletes expired rows in the background (typically within days); spanneremu does it with a
// sweeper whose period is configurable, so this test starts its own server with a short period.
//
// It must not run in parallel: it points SPANNER_EMULATOR_HOST at its own server while it
// creates its clients.
func TestRowDeletionPolicy(t *testing.T) {
	if external {
		t.Skip("SPANNER_EMULATOR_HOST is set: Google's emulator stores ROW DELETION POLICY but never deletes rows, " +
			"and Cloud Spanner takes up to days; this test needs an in-process spanneremu")
	}
	ctx := testCtx(t)
	srv, err := spanneremu.Start(ctx, spanneremu.Options{TTLSweepInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("start emulator: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	t.Setenv("SPANNER_EMULATOR_HOST", srv.Addr())

	ia, err := instance.NewInstanceAdminClient(ctx)
	if err != nil {
		t.Fatalf("instance admin client: %v", err)
	}
	t.Cleanup(func() { ia.Close() })
	da, err := database.NewDatabaseAdminClient(ctx)
	if err != nil {
		t.Fatalf("database admin client: %v", err)
	}
	t.Cleanup(func() { da.Close() })
	if err := createInstance(ctx, ia); err != nil {
		t.Fatal(err)
	}
	id := newDatabaseID()
	op, err := da.CreateDatabase(ctx, &databasepb.CreateDatabaseRequest{
		Parent:          instanceName,
		CreateStatement: "CREATE DATABASE `" + id + "`",
		ExtraStatements: []string{
			`CREATE TABLE Events (Id INT64 NOT NULL, Ts TIMESTAMP) PRIMARY KEY (Id), ROW DELETION POLICY (OLDER_THAN(Ts, INTERVAL 7 DAY))`,
			`CREATE TABLE EventNotes (Id INT64 NOT NULL, N INT64 NOT NULL) PRIMARY KEY (Id, N), INTERLEAVE IN PARENT Events ON DELETE CASCADE`,
			`CREATE TABLE Logs (Id INT64 NOT NULL, LoggedAt TIMESTAMP) PRIMARY KEY (Id)`,
		},
	})
	if err != nil {
		t.Fatalf("CreateDatabase: %v", err)
	}
	if _, err := op.Wait(ctx); err != nil {
		t.Fatalf("CreateDatabase wait: %v", err)
	}
	name := instanceName + "/databases/" + id
	client, err := spanner.NewClientWithConfig(ctx, name, spanner.ClientConfig{DisableNativeMetrics: true})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(client.Close)

	ddl, err := da.GetDatabaseDdl(ctx, &databasepb.GetDatabaseDdlRequest{Database: name})
	if err != nil {
		t.Fatalf("GetDatabaseDdl: %v", err)
	}
	wantDDL := "CREATE TABLE Events (\n  Id INT64 NOT NULL,\n  Ts TIMESTAMP,\n) PRIMARY KEY(Id), ROW DELETION POLICY (OLDER_THAN(Ts, INTERVAL 7 DAY))"
	if got := ddl.GetStatements(); len(got) == 0 || got[0] != wantDDL {
		t.Errorf("GetDatabaseDdl()[0] = %q, want %q", got, wantDDL)
	}

	now := time.Now()
	day := 24 * time.Hour
	cols := []string{"Id", "Ts"}
	if _, err := client.Apply(ctx, []*spanner.Mutation{
		spanner.Insert("Events", cols, []any{1, now.Add(-10 * day)}),
		spanner.Insert("Events", cols, []any{2, now.Add(-1 * day)}),
		spanner.Insert("Events", cols, []any{3, nil}),
		spanner.Insert("Events", cols, []any{4, now.Add(-8 * day)}),
		spanner.Insert("Events", cols, []any{5, now.Add(day)}),
		spanner.Insert("EventNotes", []string{"Id", "N"}, []any{1, 1}),
		spanner.Insert("EventNotes", []string{"Id", "N"}, []any{2, 1}),
		spanner.Insert("Logs", []string{"Id", "LoggedAt"}, []any{1, now.Add(-2 * day)}),
		spanner.Insert("Logs", []string{"Id", "LoggedAt"}, []any{2, now}),
	}); err != nil {
		t.Fatalf("Apply: %v", err)
	}

	readIDs := func(table string) ([]int64, error) {
		var ids []int64
		err := client.Single().Read(ctx, table, spanner.AllKeys(), []string{"Id"}).Do(func(r *spanner.Row) error {
			var id int64
			if err := r.Columns(&id); err != nil {
				return err
			}
			ids = append(ids, id)
			return nil
		})
		return ids, err
	}
	waitFor := func(table string, want []int64) {
		t.Helper()
		eventually(t, 30*time.Second, func() (bool, error) {
			got, err := readIDs(table)
			if err != nil {
				return false, err
			}
			return cmp.Equal(want, got), fmt.Errorf("%s ids = %v, want %v", table, got, want)
		})
	}

	// Expired rows go, and their interleaved children with them; recent, future and NULL
	// timestamps stay.
	waitFor("Events", []int64{2, 3, 5})
	waitFor("EventNotes", []int64{2})
	waitFor("Logs", []int64{1, 2}) // no policy: nothing is deleted

	// A policy added later applies to rows already there.
	uop, err := da.UpdateDatabaseDdl(ctx, &databasepb.UpdateDatabaseDdlRequest{
		Database:   name,
		Statements: []string{`ALTER TABLE Logs ADD ROW DELETION POLICY (OLDER_THAN(LoggedAt, INTERVAL 1 DAY))`},
	})
	if err != nil {
		t.Fatalf("UpdateDatabaseDdl: %v", err)
	}
	if err := uop.Wait(ctx); err != nil {
		t.Fatalf("UpdateDatabaseDdl wait: %v", err)
	}
	waitFor("Logs", []int64{2})

	// Dropping the policy stops deletion.
	uop, err = da.UpdateDatabaseDdl(ctx, &databasepb.UpdateDatabaseDdlRequest{
		Database:   name,
		Statements: []string{`ALTER TABLE Events DROP ROW DELETION POLICY`},
	})
	if err != nil {
		t.Fatalf("UpdateDatabaseDdl: %v", err)
	}
	if err := uop.Wait(ctx); err != nil {
		t.Fatalf("UpdateDatabaseDdl wait: %v", err)
	}
	if _, err := client.Apply(ctx, []*spanner.Mutation{spanner.Insert("Events", cols, []any{6, now.Add(-30 * day)})}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	// Wait for a sweep of Logs to have happened after the insert (a fresh expired Logs row
	// disappearing proves the sweeper ran), then Events must still hold the old row.
	if _, err := client.Apply(ctx, []*spanner.Mutation{spanner.Insert("Logs", []string{"Id", "LoggedAt"}, []any{3, now.Add(-5 * day)})}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	waitFor("Logs", []int64{2})
	got, err := readIDs("Events")
	if err != nil {
		t.Fatalf("read Events: %v", err)
	}
	if diff := cmp.Diff([]int64{2, 3, 5, 6}, got); diff != "" {
		t.Errorf("Events after dropping the policy (-want +got):\n%s", diff)
	}
}
