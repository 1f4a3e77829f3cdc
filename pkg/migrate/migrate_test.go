package migrate_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"cloud.google.com/go/spanner"
	"cloud.google.com/go/spanner/admin/database/apiv1/databasepb"
	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/migrate"
	"github.com/spanmart/spanmart/pkg/spannertest"
)

var env *spannertest.Env

func TestMain(m *testing.M) { os.Exit(spannertest.Main(m, &env)) }

func TestSplitStatements(t *testing.T) {
	got, err := migrate.SplitStatements("x.sql", `
-- leading comment
CREATE TABLE A (
  Id STRING(36) NOT NULL, -- trailing; with a semicolon
  Note STRING(MAX) DEFAULT ('a -- b; c'),
) PRIMARY KEY (Id);

# hash comment
CREATE INDEX AByNote ON A (Note);
`)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"CREATE TABLE A (\n  Id STRING(36) NOT NULL,\n  Note STRING(MAX) DEFAULT ('a -- b; c'),\n) PRIMARY KEY (Id)",
		"CREATE INDEX AByNote ON A (Note)",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("statements (-want +got):\n%s", diff)
	}
}

func TestLoadRejectsBadFiles(t *testing.T) {
	for name, files := range map[string]fstest.MapFS{
		"bad name":     {"init.sql": {Data: []byte("CREATE TABLE A (Id INT64) PRIMARY KEY (Id)")}},
		"duplicate":    {"0001_a.sql": {Data: []byte("CREATE TABLE A (Id INT64) PRIMARY KEY (Id)")}, "01_b.sql": {Data: []byte("CREATE TABLE B (Id INT64) PRIMARY KEY (Id)")}},
		"syntax error": {"0001_a.sql": {Data: []byte("CREATE TABLE A (Id INT64 PRIMARY KEY (Id)")}},
		"empty file":   {"0001_a.sql": {Data: []byte("-- nothing\n")}},
		"empty stream": {},
		"version zero": {"0000_a.sql": {Data: []byte("CREATE TABLE A (Id INT64) PRIMARY KEY (Id)")}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := (migrate.Stream{Name: "s", Dir: "s", FS: files}).Load(); err == nil {
				t.Error("Load succeeded, want an error")
			}
		})
	}
}

// TestEveryDatabaseMigrates applies every stream of every service database to a fresh database and
// checks the runner's record, that a second run is a no-op, and that the outbox tables exist in all.
func TestEveryDatabaseMigrates(t *testing.T) {
	for _, db := range dbschema.Databases() {
		t.Run(db.Name, func(t *testing.T) {
			ctx := context.Background()
			client, name := env.NewDatabase(t, db.Name)
			migs, err := db.Migrations()
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, m := range migs {
				want = append(want, m.Stream+"/"+m.Name)
			}
			var got []string
			err = client.Single().Query(ctx, spanner.NewStatement(
				"SELECT Stream, Name FROM SchemaMigrations WHERE NOT Dirty ORDER BY Stream = 'outbox' DESC, Stream, Version")).
				Do(func(r *spanner.Row) error {
					var s, n string
					if err := r.Columns(&s, &n); err != nil {
						return err
					}
					got = append(got, s+"/"+n)
					return nil
				})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("recorded migrations (-want +got):\n%s", diff)
			}
			r := &migrate.Runner{Admin: env.Admin, Client: client, Database: name}
			again, err := r.Apply(ctx, migs)
			if err != nil || len(again) != 0 {
				t.Errorf("second Apply = %v, %v; want nothing applied", again, err)
			}
			ddl, err := env.Admin.GetDatabaseDdl(ctx, &databasepb.GetDatabaseDdlRequest{Database: name})
			if err != nil {
				t.Fatal(err)
			}
			all := strings.Join(ddl.Statements, "\n")
			for _, table := range []string{"OutboxEvents", "ProcessedEvents", "OutboxLeases", "DeadLetters"} {
				if !strings.Contains(all, "CREATE TABLE "+table+" (") {
					t.Errorf("database %s has no table %s", db.Name, table)
				}
			}
			if !strings.Contains(all, "CREATE NULL_FILTERED INDEX OutboxPending ON OutboxEvents(PendingShard, CreatedAt)") {
				t.Errorf("database %s has no NULL_FILTERED OutboxPending index:\n%s", db.Name, all)
			}
		})
	}
}

func stream(files map[string]string) migrate.Stream {
	fsys := fstest.MapFS{}
	for n, s := range files {
		fsys[n] = &fstest.MapFile{Data: []byte(s)}
	}
	return migrate.Stream{Name: "t", Dir: "testdata", FS: fsys}
}

func TestRunnerRefusesEditedAndReleasesFailed(t *testing.T) {
	ctx := context.Background()
	v1 := stream(map[string]string{"0001_a.sql": "CREATE TABLE A (Id INT64 NOT NULL) PRIMARY KEY (Id)"})
	client, name := env.NewDatabaseWith(t, migrate.Database{Name: "mig", Streams: []migrate.Stream{v1}})
	r := &migrate.Runner{Admin: env.Admin, Client: client, Database: name}

	edited, err := stream(map[string]string{"0001_a.sql": "CREATE TABLE A (Id INT64 NOT NULL, X INT64) PRIMARY KEY (Id)"}).Load()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(ctx, edited); err == nil || !strings.Contains(err.Error(), "changed after it was applied") {
		t.Errorf("Apply(edited file) = %v, want a 'changed after it was applied' error", err)
	}

	// A migration whose only statement fails commits nothing: its claim is released, so the fixed
	// file applies on the next run.
	bad, err := stream(map[string]string{
		"0001_a.sql": "CREATE TABLE A (Id INT64 NOT NULL) PRIMARY KEY (Id)",
		"0002_b.sql": "CREATE INDEX AByMissing ON A (Missing)",
	}).Load()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(ctx, bad); err == nil || errors.Is(err, migrate.ErrDirty) {
		t.Fatalf("Apply(bad index) = %v, want a clean failure", err)
	}
	fixed, err := stream(map[string]string{
		"0001_a.sql": "CREATE TABLE A (Id INT64 NOT NULL) PRIMARY KEY (Id)",
		"0002_b.sql": "CREATE INDEX AById ON A (Id)",
	}).Load()
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Apply(ctx, fixed)
	if err != nil || len(got) != 1 || got[0].Name != "0002_b.sql" {
		t.Fatalf("Apply(fixed) = %v, %v; want 0002_b.sql applied", got, err)
	}

	// A runner that died between claiming a migration and recording it leaves the row dirty (its DDL
	// may be partly applied: Spanner runs a batch statement by statement), and the runner refuses
	// to go on until an operator has looked.
	next, err := stream(map[string]string{
		"0001_a.sql": "CREATE TABLE A (Id INT64 NOT NULL) PRIMARY KEY (Id)",
		"0002_b.sql": "CREATE INDEX AById ON A (Id)",
		"0003_c.sql": "CREATE TABLE C (Id INT64 NOT NULL) PRIMARY KEY (Id)",
	}).Load()
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.Apply(ctx, []*spanner.Mutation{spanner.Insert(migrate.Table,
		[]string{"Stream", "Version", "Name", "Checksum", "Dirty", "AppliedAt"},
		[]any{"t", int64(3), "0003_c.sql", next[2].Checksum, true, spanner.CommitTimestamp})})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(ctx, next); !errors.Is(err, migrate.ErrDirty) {
		t.Errorf("Apply after an interrupted migration = %v, want ErrDirty", err)
	}
}
