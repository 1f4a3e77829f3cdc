package migrate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"cloud.google.com/go/spanner"
	database "cloud.google.com/go/spanner/admin/database/apiv1"
	"cloud.google.com/go/spanner/admin/database/apiv1/databasepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A Runner applies migrations to one database.
type Runner struct {
	Admin *database.DatabaseAdminClient
	// Client is a data client of the same database (used to read and write SchemaMigrations).
	Client *spanner.Client
	// Database is the full name: projects/P/instances/I/databases/D.
	Database string
	// Logf, if set, reports each migration as it is applied.
	Logf func(format string, args ...any)
}

type applied struct {
	checksum string
	name     string
	dirty    bool
}

// Apply applies every migration in migs that SchemaMigrations does not record, in order, and
// returns the ones it applied. Recorded migrations must match their files byte for byte.
func (r *Runner) Apply(ctx context.Context, migs []Migration) ([]Migration, error) {
	if err := r.ensureTable(ctx); err != nil {
		return nil, err
	}
	todo, err := r.plan(ctx, migs)
	if err != nil {
		return nil, err
	}
	for i, m := range todo {
		if err := r.applyOne(ctx, m); err != nil {
			return todo[:i], err
		}
	}
	return todo, nil
}

// Pending returns the migrations Apply would apply, changing nothing.
func (r *Runner) Pending(ctx context.Context, migs []Migration) ([]Migration, error) {
	exists, err := r.tableExists(ctx)
	if err != nil {
		return nil, err
	}
	if !exists {
		return migs, nil
	}
	return r.plan(ctx, migs)
}

// plan compares the files with SchemaMigrations and returns what is left to apply, or an error
// when the two disagree in a way only a person should resolve.
func (r *Runner) plan(ctx context.Context, migs []Migration) ([]Migration, error) {
	done, err := r.recorded(ctx)
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	var todo []Migration
	for _, m := range migs {
		key := streamVersion(m.Stream, m.Version)
		known[key] = true
		a, ok := done[key]
		switch {
		case !ok:
			todo = append(todo, m)
		case a.dirty:
			return nil, fmt.Errorf("database %s: %s: %w (run %s by hand and clear the row's Dirty flag)", r.Database, m, ErrDirty, m.Path)
		case a.checksum != m.Checksum:
			return nil, fmt.Errorf("database %s: %s was changed after it was applied (recorded checksum %.12s, file %.12s); add a new migration instead of editing an applied one", r.Database, m, a.checksum, m.Checksum)
		}
	}
	for key, a := range done {
		if !known[key] {
			if a.dirty {
				return nil, fmt.Errorf("database %s: %s (%s): %w", r.Database, key, a.name, ErrDirty)
			}
			return nil, fmt.Errorf("database %s records migration %s (%s), which this build does not have: is the build older than the database?", r.Database, key, a.name)
		}
	}
	// Applying out of order would give a database no file sequence describes.
	for _, m := range todo {
		for _, later := range migs {
			if later.Stream == m.Stream && later.Version > m.Version && done[streamVersion(later.Stream, later.Version)].checksum != "" {
				return nil, fmt.Errorf("database %s: %s is not applied but the later %s is; migrations must be added at the end of a stream", r.Database, m, later)
			}
		}
	}
	return todo, nil
}

func streamVersion(stream string, version int64) string {
	return fmt.Sprintf("%s/%04d", stream, version)
}

func (r *Runner) logf(format string, args ...any) {
	if r.Logf != nil {
		r.Logf(format, args...)
	}
}

func (r *Runner) ensureTable(ctx context.Context) error {
	exists, err := r.tableExists(ctx)
	if err != nil || exists {
		return err
	}
	op, err := r.Admin.UpdateDatabaseDdl(ctx, &databasepb.UpdateDatabaseDdlRequest{
		Database: r.Database, Statements: []string{tableDDL},
	})
	if err == nil {
		err = op.Wait(ctx)
	}
	if err != nil {
		// Another runner may have created it meanwhile.
		if exists, again := r.tableExists(ctx); again == nil && exists {
			return nil
		}
		return fmt.Errorf("database %s: create %s: %w", r.Database, Table, err)
	}
	return nil
}

func (r *Runner) tableExists(ctx context.Context) (bool, error) {
	ddl, err := r.Admin.GetDatabaseDdl(ctx, &databasepb.GetDatabaseDdlRequest{Database: r.Database})
	if err != nil {
		return false, fmt.Errorf("database %s: read schema: %w", r.Database, err)
	}
	for _, s := range ddl.Statements {
		if strings.HasPrefix(s, "CREATE TABLE "+Table+" ") {
			return true, nil
		}
	}
	return false, nil
}

func (r *Runner) recorded(ctx context.Context) (map[string]applied, error) {
	out := map[string]applied{}
	it := r.Client.Single().Read(ctx, Table, spanner.AllKeys(), []string{"Stream", "Version", "Name", "Checksum", "Dirty"})
	err := it.Do(func(row *spanner.Row) error {
		var stream, name, sum string
		var version int64
		var dirty bool
		if err := row.Columns(&stream, &version, &name, &sum, &dirty); err != nil {
			return err
		}
		out[streamVersion(stream, version)] = applied{checksum: sum, name: name, dirty: dirty}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("database %s: read %s: %w", r.Database, Table, err)
	}
	return out, nil
}

func (r *Runner) applyOne(ctx context.Context, m Migration) error {
	key := spanner.Key{m.Stream, m.Version}
	cols := []string{"Stream", "Version", "Name", "Checksum", "Dirty", "AppliedAt"}
	// Claim: a plain Insert fails with AlreadyExists if another runner got here first.
	_, err := r.Client.Apply(ctx, []*spanner.Mutation{spanner.Insert(Table, cols,
		[]any{m.Stream, m.Version, m.Name, m.Checksum, true, spanner.CommitTimestamp})})
	if spanner.ErrCode(err) == codes.AlreadyExists {
		return fmt.Errorf("database %s: %s is being applied by another runner", r.Database, m)
	}
	if err != nil {
		return fmt.Errorf("database %s: claim %s: %w", r.Database, m, err)
	}
	r.logf("migrate %s: applying %s (%d statements)", r.Database, m.Path, len(m.Statements))
	op, err := r.Admin.UpdateDatabaseDdl(ctx, &databasepb.UpdateDatabaseDdlRequest{
		Database: r.Database, Statements: m.Statements,
	})
	if err == nil {
		err = op.Wait(ctx)
	}
	if err != nil {
		// Nothing of the batch committed: release the claim so a fixed file can be applied.
		if op == nil || committedStatements(ctx, op) == 0 {
			if _, derr := r.Client.Apply(ctx, []*spanner.Mutation{spanner.Delete(Table, key)}); derr != nil {
				return errors.Join(fmt.Errorf("database %s: %s: %w", r.Database, m.Path, err), fmt.Errorf("release claim: %w", derr))
			}
			return fmt.Errorf("database %s: %s: %w", r.Database, m.Path, err)
		}
		return fmt.Errorf("database %s: %s: %w (%d of %d statements were applied): %w", r.Database, m.Path, ErrDirty, committedStatements(ctx, op), len(m.Statements), err)
	}
	_, err = r.Client.Apply(ctx, []*spanner.Mutation{spanner.Update(Table, cols,
		[]any{m.Stream, m.Version, m.Name, m.Checksum, false, spanner.CommitTimestamp})})
	if err != nil {
		return fmt.Errorf("database %s: record %s: %w", r.Database, m, err)
	}
	return nil
}

func committedStatements(ctx context.Context, op *database.UpdateDatabaseDdlOperation) int {
	md, err := op.Metadata()
	if err != nil || md == nil {
		return -1 // unknown: assume the worst
	}
	return len(md.GetCommitTimestamps())
}

// CreateDatabase creates the database (with no schema) unless it exists.
func CreateDatabase(ctx context.Context, admin *database.DatabaseAdminClient, instance, name string) error {
	op, err := admin.CreateDatabase(ctx, &databasepb.CreateDatabaseRequest{
		Parent: instance, CreateStatement: "CREATE DATABASE `" + name + "`",
	})
	if status.Code(err) == codes.AlreadyExists {
		return nil
	}
	if err == nil {
		_, err = op.Wait(ctx)
	}
	if err != nil && status.Code(err) != codes.AlreadyExists {
		return fmt.Errorf("create database %s/databases/%s: %w", instance, name, err)
	}
	return nil
}

// Up creates the database db under instance unless it exists and applies every migration of it
// that SchemaMigrations does not record, through a short-lived data client of its own. It returns
// the migrations it applied and how many the database has. The dev stack, the e2e harness and
// tools/migrate all bring databases up this way.
func Up(ctx context.Context, admin *database.DatabaseAdminClient, instance string, db Database, logf func(string, ...any)) (applied []Migration, total int, err error) {
	migs, err := db.Migrations()
	if err != nil {
		return nil, 0, err
	}
	if err := CreateDatabase(ctx, admin, instance, db.Name); err != nil {
		return nil, 0, err
	}
	name := instance + "/databases/" + db.Name
	client, err := NewClient(ctx, name)
	if err != nil {
		return nil, 0, err
	}
	defer client.Close()
	r := &Runner{Admin: admin, Client: client, Database: name, Logf: logf}
	applied, err = r.Apply(ctx, migs)
	if err != nil {
		return applied, len(migs), fmt.Errorf("migrate %s: %w", name, err)
	}
	return applied, len(migs), nil
}

// NewClient returns a data client for a migration job: a handful of sessions, and no metrics
// export when SPANNER_EMULATOR_HOST points at an emulator.
func NewClient(ctx context.Context, database string) (*spanner.Client, error) {
	client, err := spanner.NewClientWithConfig(ctx, database, spanner.ClientConfig{
		DisableNativeMetrics: os.Getenv("SPANNER_EMULATOR_HOST") != "",
		SessionPoolConfig:    spanner.SessionPoolConfig{MinOpened: 1},
	})
	if err != nil {
		return nil, fmt.Errorf("spanner client for %s: %w", database, err)
	}
	return client, nil
}
