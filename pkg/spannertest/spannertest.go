// Package spannertest gives tests a Spanner to talk to through the official clients: an in-process
// spanneremu started once per test binary, or whatever endpoint SPANNER_EMULATOR_HOST names (the
// same tests then run against Google's emulator or a spanneremu process). Each test gets a fresh
// database with every migration of its schema applied through pkg/migrate.
//
// Typical use:
//
//	var env *spannertest.Env
//
//	func TestMain(m *testing.M) { os.Exit(spannertest.Main(m, &env)) }
//
//	func TestX(t *testing.T) {
//		client, name := env.NewDatabase(t, dbschema.Orders)
//		...
//	}
package spannertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log"
	"os"
	"strings"
	"testing"

	"cloud.google.com/go/spanner"
	database "cloud.google.com/go/spanner/admin/database/apiv1"
	"cloud.google.com/go/spanner/admin/database/apiv1/databasepb"
	instance "cloud.google.com/go/spanner/admin/instance/apiv1"
	"cloud.google.com/go/spanner/admin/instance/apiv1/instancepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spanmart/spanmart/emulator/spanneremu"
	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/migrate"
)

// Project and InstanceID name the instance tests use.
const (
	Project    = "spanmart-test"
	InstanceID = "test"
	Instance   = "projects/" + Project + "/instances/" + InstanceID
)

// Env is a Spanner endpoint with admin clients.
type Env struct {
	Admin         *database.DatabaseAdminClient
	InstanceAdmin *instance.InstanceAdminClient
	// Host is the endpoint (host:port) the clients talk to.
	Host string

	srv *spanneremu.Server
}

// Start starts an in-process emulator unless SPANNER_EMULATOR_HOST is set, points the official
// clients at it and creates the test instance.
func Start(ctx context.Context) (*Env, error) {
	e := &Env{Host: os.Getenv("SPANNER_EMULATOR_HOST")}
	if e.Host == "" {
		srv, err := spanneremu.Start(ctx, spanneremu.Options{})
		if err != nil {
			return nil, fmt.Errorf("start spanneremu: %w", err)
		}
		e.srv, e.Host = srv, srv.Addr()
		// The official clients read this at construction: plaintext gRPC, no credentials.
		os.Setenv("SPANNER_EMULATOR_HOST", e.Host)
	}
	var err error
	if e.Admin, err = database.NewDatabaseAdminClient(ctx); err != nil {
		e.Close()
		return nil, err
	}
	if e.InstanceAdmin, err = instance.NewInstanceAdminClient(ctx); err != nil {
		e.Close()
		return nil, err
	}
	if err := EnsureInstance(ctx, e.InstanceAdmin, Instance); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// Main is the body of a TestMain: it starts the environment into *env, runs the tests and stops it.
func Main(m *testing.M, env **Env) int {
	e, err := Start(context.Background())
	if err != nil {
		log.Printf("spannertest: %v", err)
		return 1
	}
	defer e.Close()
	*env = e
	return m.Run()
}

// InProcess reports whether the tests run on the in-process spanneremu (not on an endpoint
// SPANNER_EMULATOR_HOST named), for assertions about spanneremu's own behaviour.
func (e *Env) InProcess() bool { return e.srv != nil }

// DatabaseStats returns the in-process spanneremu's counters of the database named name (as
// NewDatabase returns it); ok is false on an endpoint SPANNER_EMULATOR_HOST named.
func (e *Env) DatabaseStats(name string) (st spanneremu.DatabaseStats, ok bool) {
	if e.srv == nil {
		return st, false
	}
	return e.srv.Stats().ByDatabase[name[strings.LastIndex(name, "/")+1:]], true
}

// Close releases the clients and stops the in-process emulator, if any.
func (e *Env) Close() {
	if e.Admin != nil {
		e.Admin.Close()
	}
	if e.InstanceAdmin != nil {
		e.InstanceAdmin.Close()
	}
	if e.srv != nil {
		e.srv.Close()
	}
}

// EnsureInstance creates the instance unless it exists (emulators only; real instances are
// provisioned outside the application).
func EnsureInstance(ctx context.Context, admin *instance.InstanceAdminClient, name string) error {
	project, id, ok := cutInstance(name)
	if !ok {
		return fmt.Errorf("instance name %q is not projects/P/instances/I", name)
	}
	op, err := admin.CreateInstance(ctx, &instancepb.CreateInstanceRequest{
		Parent:     "projects/" + project,
		InstanceId: id,
		Instance: &instancepb.Instance{
			Config:      "projects/" + project + "/instanceConfigs/emulator-config",
			DisplayName: id,
			NodeCount:   1,
		},
	})
	if err == nil {
		_, err = op.Wait(ctx)
	}
	if err != nil && status.Code(err) != codes.AlreadyExists {
		return fmt.Errorf("create instance %s: %w", name, err)
	}
	return nil
}

func cutInstance(name string) (project, id string, ok bool) {
	parts := strings.Split(name, "/")
	if len(parts) != 4 || parts[0] != "projects" || parts[2] != "instances" || parts[1] == "" || parts[3] == "" {
		return "", "", false
	}
	return parts[1], parts[3], true
}

// NewDatabase creates a fresh database with every migration of the named schema (see pkg/dbschema)
// applied, returns a data client for it and its full name, and drops it when the test ends.
func (e *Env) NewDatabase(t testing.TB, schema string) (*spanner.Client, string) {
	t.Helper()
	db, err := dbschema.Lookup(schema)
	if err != nil {
		t.Fatal(err)
	}
	return e.NewDatabaseWith(t, db)
}

// NewDatabaseWith is NewDatabase for a schema given as streams (generator tests use it).
func (e *Env) NewDatabaseWith(t testing.TB, db migrate.Database) (*spanner.Client, string) {
	t.Helper()
	ctx := context.Background()
	var b [4]byte
	rand.Read(b[:])
	id := db.Name + "-" + hex.EncodeToString(b[:])
	if len(id) > 30 {
		id = id[len(id)-30:]
		id = "d" + id[1:]
	}
	if err := migrate.CreateDatabase(ctx, e.Admin, Instance, id); err != nil {
		t.Fatal(err)
	}
	name := Instance + "/databases/" + id
	client, err := spanner.NewClientWithConfig(ctx, name, spanner.ClientConfig{DisableNativeMetrics: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		client.Close()
		if err := e.Admin.DropDatabase(context.Background(), &databasepb.DropDatabaseRequest{Database: name}); err != nil {
			t.Logf("drop %s: %v", name, err)
		}
	})
	migs, err := db.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	r := &migrate.Runner{Admin: e.Admin, Client: client, Database: name}
	if _, err := r.Apply(ctx, migs); err != nil {
		t.Fatalf("migrate %s: %v", name, err)
	}
	return client, name
}

// SetUp makes an emulator ready for the whole system: the instance, and every service database of
// pkg/dbschema created and migrated (migrate.Up). logf, if set, reports each migration and database.
// The dev stack and the e2e harness start from it.
func SetUp(ctx context.Context, instanceName string, logf func(string, ...any)) error {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	ia, err := instance.NewInstanceAdminClient(ctx)
	if err != nil {
		return fmt.Errorf("spanner instance admin client: %w", err)
	}
	defer ia.Close()
	if err := EnsureInstance(ctx, ia, instanceName); err != nil {
		return err
	}
	admin, err := database.NewDatabaseAdminClient(ctx)
	if err != nil {
		return fmt.Errorf("spanner database admin client: %w", err)
	}
	defer admin.Close()
	for _, db := range dbschema.Databases() {
		applied, total, err := migrate.Up(ctx, admin, instanceName, db, logf)
		if err != nil {
			return err
		}
		logf("database %s: %d migrations, %d applied now", db.Name, total, len(applied))
	}
	return nil
}
