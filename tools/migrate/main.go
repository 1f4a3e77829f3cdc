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

	"cloud.google.com/go/spanner"
	database "cloud.google.com/go/spanner/admin/database/apiv1"

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
	if create && !statusOnly {
		if err := migrate.CreateDatabase(ctx, admin, instance, d.Name); err != nil {
			return err
		}
	}
	name := instance + "/databases/" + d.Name
	client, err := spanner.NewClientWithConfig(ctx, name, spanner.ClientConfig{
		DisableNativeMetrics: os.Getenv("SPANNER_EMULATOR_HOST") != "",
	})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer client.Close()
	r := &migrate.Runner{Admin: admin, Client: client, Database: name,
		Logf: func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }}
	if statusOnly {
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
	done, err := r.Apply(ctx, migs)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: up to date (%d applied now, %d in total)\n", name, len(done), len(migs))
	return nil
}
