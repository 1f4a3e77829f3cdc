package spanneremu

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	database "cloud.google.com/go/spanner/admin/database/apiv1"
	databasepb "cloud.google.com/go/spanner/admin/database/apiv1/databasepb"
	instance "cloud.google.com/go/spanner/admin/instance/apiv1"
	instancepb "cloud.google.com/go/spanner/admin/instance/apiv1/instancepb"
	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// testServer is the emulator shared by the tests of this package; each test makes its own
// instance or database.
var testServer *Server

const testProject = "test-project"

func TestMain(m *testing.M) {
	srv, err := Start(context.Background(), Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start emulator:", err)
		os.Exit(1)
	}
	testServer = srv
	// The data client changes some behaviour (metrics, endpoints) when it knows it talks to
	// an emulator; the tests use it the way applications do.
	os.Setenv("SPANNER_EMULATOR_HOST", srv.Addr())
	code := m.Run()
	srv.Close()
	os.Exit(code)
}

// clientOptions point an official client at addr the way SPANNER_EMULATOR_HOST does.
func clientOptions(addr string) []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint("passthrough:///" + addr),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
		option.WithoutAuthentication(),
	}
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func newInstanceAdmin(t *testing.T, addr string) *instance.InstanceAdminClient {
	t.Helper()
	c, err := instance.NewInstanceAdminClient(testContext(t), clientOptions(addr)...)
	if err != nil {
		t.Fatalf("NewInstanceAdminClient: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func newDatabaseAdmin(t *testing.T, addr string) *database.DatabaseAdminClient {
	t.Helper()
	c, err := database.NewDatabaseAdminClient(testContext(t), clientOptions(addr)...)
	if err != nil {
		t.Fatalf("NewDatabaseAdminClient: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func newRawSpanner(t *testing.T, addr string) sppb.SpannerClient {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return sppb.NewSpannerClient(conn)
}

var nameSeq atomic.Int64

// uniqueID returns a fresh resource id with the given prefix.
func uniqueID(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, nameSeq.Add(1))
}

// createInstance creates an instance on addr and returns its name.
func createInstance(t *testing.T, addr string) string {
	t.Helper()
	ctx := testContext(t)
	ia := newInstanceAdmin(t, addr)
	id := uniqueID("inst")
	op, err := ia.CreateInstance(ctx, &instancepb.CreateInstanceRequest{
		Parent:     "projects/" + testProject,
		InstanceId: id,
		Instance:   &instancepb.Instance{Config: instanceConfigName(testProject), DisplayName: "Test " + id},
	})
	if err != nil {
		t.Fatalf("CreateInstance: %v", err)
	}
	in, err := op.Wait(ctx)
	if err != nil {
		t.Fatalf("CreateInstance op.Wait: %v", err)
	}
	return in.Name
}

// createDatabase creates a database with the given DDL in a fresh instance on the shared
// server and returns its name.
func createDatabase(t *testing.T, ddl ...string) string {
	t.Helper()
	return createDatabaseIn(t, createInstance(t, testServer.Addr()), "db", ddl...)
}

// createDatabaseIn creates database id with the given DDL in an instance of the shared server
// and returns its name.
func createDatabaseIn(t *testing.T, inst, id string, ddl ...string) string {
	t.Helper()
	ctx := testContext(t)
	da := newDatabaseAdmin(t, testServer.Addr())
	op, err := da.CreateDatabase(ctx, &databasepb.CreateDatabaseRequest{
		Parent:          inst,
		CreateStatement: "CREATE DATABASE `" + id + "`",
		ExtraStatements: ddl,
	})
	if err != nil {
		t.Fatalf("CreateDatabase: %v", err)
	}
	db, err := op.Wait(ctx)
	if err != nil {
		t.Fatalf("CreateDatabase op.Wait: %v", err)
	}
	return db.Name
}

// newDataClient opens the official data client on a database of the shared server, found
// through SPANNER_EMULATOR_HOST.
func newDataClient(t *testing.T, db string) *spanner.Client {
	t.Helper()
	c, err := spanner.NewClient(testContext(t), db)
	if err != nil {
		t.Fatalf("spanner.NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}
