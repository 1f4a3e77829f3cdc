// Command migrate brings Spanmart's service databases up to date: it creates missing databases
// (with -create) and applies every migration stream of pkg/dbschema through UpdateDatabaseDdl,
// recording what ran in each database's SchemaMigrations table (see pkg/migrate).
//
//	go run ./tools/migrate -instance projects/P/instances/I                 # all four databases
//	go run ./tools/migrate -instance projects/P/instances/I -databases orders -status
//
// It talks to Cloud Spanner with Application Default Credentials, or to an emulator when
// SPANNER_EMULATOR_HOST is set. Cloud Build runs it before deploying (cloudbuild.yaml).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"

	database "cloud.google.com/go/spanner/admin/database/apiv1"
	"cloud.google.com/go/spanner/admin/database/apiv1/databasepb"

	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/migrate"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		log.SetFlags(0)
		log.Fatalf("migrate: %v", err)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	instance := fs.String("instance", os.Getenv("SPANNER_INSTANCE"), "instance: projects/P/instances/I (default $SPANNER_INSTANCE)")
	only := fs.String("databases", "", "comma-separated databases to migrate (default: all of "+names()+")")
	create := fs.Bool("create", false, "create databases that do not exist")
	statusOnly := fs.Bool("status", false, "print applied and pending migrations, change nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *instance == "" || len(strings.Split(*instance, "/")) != 4 || !strings.HasPrefix(*instance, "projects/") {
		return fmt.Errorf("-instance must be projects/P/instances/I, got %q", *instance)
	}
	dbs := dbschema.Databases()
	if *only != "" {
		dbs = nil
		for _, n := range strings.Split(*only, ",") {
			d, err := dbschema.Lookup(strings.TrimSpace(n))
			if err != nil {
				return err
			}
			dbs = append(dbs, d)
		}
	}
	admin, err := database.NewDatabaseAdminClient(ctx)
	if err != nil {
		return err
	}
	defer admin.Close()
	var errs []error
	for _, d := range dbs {
		if err := migrateOne(ctx, admin, *instance, d, *create, *statusOnly, out); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func names() string {
	var n []string
	for _, d := range dbschema.Databases() {
		n = append(n, d.Name)
	}
	return strings.Join(n, ", ")
}

func migrateOne(ctx context.Context, admin *database.DatabaseAdminClient, instance string, d migrate.Database, create, statusOnly bool, out io.Writer) error {
	migs, err := d.Migrations()
	if err != nil {
		return err
	}
	logf := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	name := instance + "/databases/" + d.Name
	if !statusOnly {
		if !create {
			// Without -create a missing database is an error, not something to make.
			if _, err := admin.GetDatabase(ctx, &databasepb.GetDatabaseRequest{Name: name}); err != nil {
				return fmt.Errorf("%s: %w (use -create to create it)", name, err)
			}
		}
		done, total, err := migrate.Up(ctx, admin, instance, d, logf)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: up to date (%d applied now, %d in total)\n", name, len(done), total)
		return nil
	}
	client, err := migrate.NewClient(ctx, name)
	if err != nil {
		return err
	}
	defer client.Close()
	r := &migrate.Runner{Admin: admin, Client: client, Database: name, Logf: logf}
	pending, err := r.Pending(ctx, migs)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: %d migrations, %d pending\n", name, len(migs), len(pending))
	for _, m := range pending {
		fmt.Fprintf(out, "  pending %s\n", m.Path)
	}
	return nil
}
