package spanneremu

import (
	"slices"
	"strings"
	"testing"

	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	databasepb "cloud.google.com/go/spanner/admin/database/apiv1/databasepb"
	instancepb "cloud.google.com/go/spanner/admin/instance/apiv1/instancepb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

func TestInstanceConfigs(t *testing.T) {
	ctx := testContext(t)
	ia := newInstanceAdmin(t, testServer.Addr())

	var got []*instancepb.InstanceConfig
	it := ia.ListInstanceConfigs(ctx, &instancepb.ListInstanceConfigsRequest{Parent: "projects/p1"})
	for {
		cfg, err := it.Next()
		if err == iterator.Done {
			break
		}
		if err != nil {
			t.Fatalf("ListInstanceConfigs: %v", err)
		}
		got = append(got, cfg)
	}
	want := []*instancepb.InstanceConfig{{
		Name:        "projects/p1/instanceConfigs/emulator-config",
		DisplayName: "Emulator Instance Config",
		ConfigType:  instancepb.InstanceConfig_GOOGLE_MANAGED,
		State:       instancepb.InstanceConfig_READY,
	}}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("ListInstanceConfigs (-want +got):\n%s", diff)
	}

	cfg, err := ia.GetInstanceConfig(ctx, &instancepb.GetInstanceConfigRequest{Name: "projects/p1/instanceConfigs/emulator-config"})
	if err != nil {
		t.Fatalf("GetInstanceConfig: %v", err)
	}
	if diff := cmp.Diff(want[0], cfg, protocmp.Transform()); diff != "" {
		t.Errorf("GetInstanceConfig (-want +got):\n%s", diff)
	}
	_, err = ia.GetInstanceConfig(ctx, &instancepb.GetInstanceConfigRequest{Name: "projects/p1/instanceConfigs/regional-us-central1"})
	if got, want := status.Code(err), codes.NotFound; got != want {
		t.Errorf("GetInstanceConfig(other config) code = %v, want %v (err %v)", got, want, err)
	}
}

func TestInstanceLifecycle(t *testing.T) {
	ctx := testContext(t)
	ia := newInstanceAdmin(t, testServer.Addr())
	project := uniqueID("proj")
	parent := "projects/" + project
	name := parent + "/instances/shop"

	op, err := ia.CreateInstance(ctx, &instancepb.CreateInstanceRequest{
		Parent:     parent,
		InstanceId: "shop",
		Instance:   &instancepb.Instance{Config: instanceConfigName(project), DisplayName: "Shop", Labels: map[string]string{"env": "test"}},
	})
	if err != nil {
		t.Fatalf("CreateInstance: %v", err)
	}
	created, err := op.Wait(ctx)
	if err != nil {
		t.Fatalf("CreateInstance op.Wait: %v", err)
	}
	want := &instancepb.Instance{
		Name:            name,
		Config:          instanceConfigName(project),
		DisplayName:     "Shop",
		NodeCount:       1,
		ProcessingUnits: 1000,
		State:           instancepb.Instance_READY,
		Labels:          map[string]string{"env": "test"},
	}
	ignoreTimes := protocmp.IgnoreFields(&instancepb.Instance{}, "create_time", "update_time")
	if diff := cmp.Diff(want, created, protocmp.Transform(), ignoreTimes); diff != "" {
		t.Errorf("created instance (-want +got):\n%s", diff)
	}
	if created.CreateTime == nil {
		t.Error("created instance has no create_time")
	}

	got, err := ia.GetInstance(ctx, &instancepb.GetInstanceRequest{Name: name})
	if err != nil {
		t.Fatalf("GetInstance: %v", err)
	}
	if diff := cmp.Diff(created, got, protocmp.Transform()); diff != "" {
		t.Errorf("GetInstance (-want +got):\n%s", diff)
	}

	_, err = ia.CreateInstance(ctx, &instancepb.CreateInstanceRequest{
		Parent: parent, InstanceId: "shop", Instance: &instancepb.Instance{Config: instanceConfigName(project)},
	})
	if got, want := status.Code(err), codes.AlreadyExists; got != want {
		t.Errorf("duplicate CreateInstance code = %v, want %v (err %v)", got, want, err)
	}

	uop, err := ia.UpdateInstance(ctx, &instancepb.UpdateInstanceRequest{
		Instance:  &instancepb.Instance{Name: name, DisplayName: "Shop 2", NodeCount: 3},
		FieldMask: &fieldmaskpb.FieldMask{Paths: []string{"display_name", "node_count"}},
	})
	if err != nil {
		t.Fatalf("UpdateInstance: %v", err)
	}
	updated, err := uop.Wait(ctx)
	if err != nil {
		t.Fatalf("UpdateInstance op.Wait: %v", err)
	}
	if updated.DisplayName != "Shop 2" || updated.NodeCount != 3 || updated.ProcessingUnits != 3000 {
		t.Errorf("updated instance = %v, want display name Shop 2, 3 nodes, 3000 processing units", updated)
	}

	var names []string
	it := ia.ListInstances(ctx, &instancepb.ListInstancesRequest{Parent: parent})
	for {
		in, err := it.Next()
		if err == iterator.Done {
			break
		}
		if err != nil {
			t.Fatalf("ListInstances: %v", err)
		}
		names = append(names, in.Name)
	}
	if diff := cmp.Diff([]string{name}, names); diff != "" {
		t.Errorf("ListInstances (-want +got):\n%s", diff)
	}

	if err := ia.DeleteInstance(ctx, &instancepb.DeleteInstanceRequest{Name: name}); err != nil {
		t.Fatalf("DeleteInstance: %v", err)
	}
	_, err = ia.GetInstance(ctx, &instancepb.GetInstanceRequest{Name: name})
	if got, want := status.Code(err), codes.NotFound; got != want {
		t.Errorf("GetInstance after delete code = %v, want %v (err %v)", got, want, err)
	}
}

func TestCreateInstanceErrors(t *testing.T) {
	ctx := testContext(t)
	ia := newInstanceAdmin(t, testServer.Addr())
	tests := []struct {
		name string
		id   string
		cfg  string
		want codes.Code
	}{
		{"id starts with digit", "1shop", instanceConfigName(testProject), codes.InvalidArgument},
		{"id too short", "a", instanceConfigName(testProject), codes.InvalidArgument},
		{"id ends with dash", "shop-", instanceConfigName(testProject), codes.InvalidArgument},
		{"id upper case", "Shop", instanceConfigName(testProject), codes.InvalidArgument},
		{"id too long", strings.Repeat("a", 65), instanceConfigName(testProject), codes.InvalidArgument},
		{"unknown config", "shop-x", "projects/" + testProject + "/instanceConfigs/nam3", codes.NotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ia.CreateInstance(ctx, &instancepb.CreateInstanceRequest{
				Parent:     "projects/" + testProject,
				InstanceId: tc.id,
				Instance:   &instancepb.Instance{Config: tc.cfg},
			})
			if got := status.Code(err); got != tc.want {
				t.Errorf("CreateInstance code = %v, want %v (err %v)", got, tc.want, err)
			}
		})
	}
}

func TestDatabaseLifecycle(t *testing.T) {
	ctx := testContext(t)
	inst := createInstance(t, testServer.Addr())
	da := newDatabaseAdmin(t, testServer.Addr())
	name := inst + "/databases/orders"

	op, err := da.CreateDatabase(ctx, &databasepb.CreateDatabaseRequest{
		Parent:          inst,
		CreateStatement: "CREATE DATABASE orders",
		ExtraStatements: []string{"CREATE TABLE Orders (Id STRING(36) NOT NULL, Total INT64) PRIMARY KEY (Id)"},
	})
	if err != nil {
		t.Fatalf("CreateDatabase: %v", err)
	}
	md, err := op.Metadata()
	if err != nil || md.GetDatabase() != name {
		t.Errorf("CreateDatabase metadata = %v, %v; want database %s", md, err, name)
	}
	db, err := op.Wait(ctx)
	if err != nil {
		t.Fatalf("CreateDatabase op.Wait: %v", err)
	}
	if db.Name != name || db.State != databasepb.Database_READY || db.DatabaseDialect != databasepb.DatabaseDialect_GOOGLE_STANDARD_SQL || db.CreateTime == nil {
		t.Errorf("created database = %v, want %s, READY, GoogleSQL, with a create time", db, name)
	}

	got, err := da.GetDatabase(ctx, &databasepb.GetDatabaseRequest{Name: name})
	if err != nil {
		t.Fatalf("GetDatabase: %v", err)
	}
	if diff := cmp.Diff(db, got, protocmp.Transform(), protocmp.IgnoreFields(&databasepb.Database{}, "earliest_version_time")); diff != "" {
		t.Errorf("GetDatabase (-want +got):\n%s", diff)
	}

	ddl := func() []string {
		t.Helper()
		resp, err := da.GetDatabaseDdl(ctx, &databasepb.GetDatabaseDdlRequest{Database: name})
		if err != nil {
			t.Fatalf("GetDatabaseDdl: %v", err)
		}
		return resp.Statements
	}
	if stmts := ddl(); len(stmts) != 1 || !strings.Contains(stmts[0], "Orders") {
		t.Errorf("GetDatabaseDdl = %q, want the CREATE TABLE Orders statement", stmts)
	}

	uop, err := da.UpdateDatabaseDdl(ctx, &databasepb.UpdateDatabaseDdlRequest{
		Database:    name,
		Statements:  []string{"CREATE INDEX OrdersByTotal ON Orders(Total)"},
		OperationId: "add_index",
	})
	if err != nil {
		t.Fatalf("UpdateDatabaseDdl: %v", err)
	}
	if err := uop.Wait(ctx); err != nil {
		t.Fatalf("UpdateDatabaseDdl op.Wait: %v", err)
	}
	if got, want := uop.Name(), name+"/operations/add_index"; got != want {
		t.Errorf("UpdateDatabaseDdl operation name = %q, want %q", got, want)
	}
	umd, err := uop.Metadata()
	if err != nil {
		t.Fatalf("UpdateDatabaseDdl metadata: %v", err)
	}
	if len(umd.CommitTimestamps) != 1 || umd.Database != name {
		t.Errorf("UpdateDatabaseDdl metadata = %v, want one commit timestamp for %s", umd, name)
	}
	if stmts := ddl(); len(stmts) != 2 {
		t.Errorf("GetDatabaseDdl after adding an index = %q, want 2 statements", stmts)
	}

	// A DDL error does not fail the RPC: the operation fails, as with Spanner.
	bad, err := da.UpdateDatabaseDdl(ctx, &databasepb.UpdateDatabaseDdlRequest{
		Database:   name,
		Statements: []string{"CREATE TABLE Broken (Id INT64 NOT NULL"},
	})
	if err != nil {
		t.Fatalf("UpdateDatabaseDdl(bad DDL) RPC error = %v, want the operation to fail instead", err)
	}
	if err := bad.Wait(ctx); status.Code(err) == codes.OK {
		t.Errorf("UpdateDatabaseDdl(bad DDL) op.Wait = nil, want an error")
	}
	if stmts := ddl(); len(stmts) != 2 {
		t.Errorf("GetDatabaseDdl after failed DDL = %q, want the 2 earlier statements", stmts)
	}

	var names []string
	it := da.ListDatabases(ctx, &databasepb.ListDatabasesRequest{Parent: inst})
	for {
		d, err := it.Next()
		if err == iterator.Done {
			break
		}
		if err != nil {
			t.Fatalf("ListDatabases: %v", err)
		}
		names = append(names, d.Name)
	}
	if diff := cmp.Diff([]string{name}, names); diff != "" {
		t.Errorf("ListDatabases (-want +got):\n%s", diff)
	}

	if err := da.DropDatabase(ctx, &databasepb.DropDatabaseRequest{Database: name}); err != nil {
		t.Fatalf("DropDatabase: %v", err)
	}
	_, err = da.GetDatabase(ctx, &databasepb.GetDatabaseRequest{Name: name})
	if got, want := status.Code(err), codes.NotFound; got != want {
		t.Errorf("GetDatabase after drop code = %v, want %v (err %v)", got, want, err)
	}
}

func TestCreateDatabaseErrors(t *testing.T) {
	ctx := testContext(t)
	inst := createInstance(t, testServer.Addr())
	da := newDatabaseAdmin(t, testServer.Addr())
	createDatabaseIn(t, inst, "existing")

	// Request errors fail the RPC itself.
	rpcErrors := []struct {
		name string
		req  *databasepb.CreateDatabaseRequest
		want codes.Code
	}{
		{"missing instance", &databasepb.CreateDatabaseRequest{Parent: "projects/" + testProject + "/instances/nope", CreateStatement: "CREATE DATABASE d1"}, codes.NotFound},
		{"already exists", &databasepb.CreateDatabaseRequest{Parent: inst, CreateStatement: "CREATE DATABASE `existing`"}, codes.AlreadyExists},
		{"bad statement", &databasepb.CreateDatabaseRequest{Parent: inst, CreateStatement: "CREATE TABLE d1"}, codes.InvalidArgument},
		{"bad name", &databasepb.CreateDatabaseRequest{Parent: inst, CreateStatement: "CREATE DATABASE `9lives`"}, codes.InvalidArgument},
		{"postgresql", &databasepb.CreateDatabaseRequest{Parent: inst, CreateStatement: `CREATE DATABASE "d1"`, DatabaseDialect: databasepb.DatabaseDialect_POSTGRESQL}, codes.Unimplemented},
	}
	for _, tc := range rpcErrors {
		t.Run(tc.name, func(t *testing.T) {
			op, err := da.CreateDatabase(ctx, tc.req)
			if err == nil {
				_, err = op.Wait(ctx)
			}
			if got := status.Code(err); got != tc.want {
				t.Errorf("CreateDatabase code = %v, want %v (err %v)", got, tc.want, err)
			}
		})
	}

	t.Run("bad extra statement", func(t *testing.T) {
		op, err := da.CreateDatabase(ctx, &databasepb.CreateDatabaseRequest{
			Parent:          inst,
			CreateStatement: "CREATE DATABASE broken",
			ExtraStatements: []string{"CREATE TABLE T (Id INT64 NOT NULL) PRIMARY KEY (Id)", "CREATE TABLE"},
		})
		if err != nil {
			t.Fatalf("CreateDatabase RPC error = %v, want the operation to fail instead", err)
		}
		if _, err := op.Wait(ctx); status.Code(err) == codes.OK {
			t.Fatalf("CreateDatabase op.Wait = nil, want an error")
		}
		_, err = da.GetDatabase(ctx, &databasepb.GetDatabaseRequest{Name: inst + "/databases/broken"})
		if got, want := status.Code(err), codes.NotFound; got != want {
			t.Errorf("GetDatabase after failed create code = %v, want %v (err %v)", got, want, err)
		}
	})
}

func TestDeleteInstanceDropsDatabases(t *testing.T) {
	ctx := testContext(t)
	db := createDatabase(t, "CREATE TABLE T (Id INT64 NOT NULL) PRIMARY KEY (Id)")
	inst := db[:strings.Index(db, "/databases/")]
	ia := newInstanceAdmin(t, testServer.Addr())
	da := newDatabaseAdmin(t, testServer.Addr())
	if err := ia.DeleteInstance(ctx, &instancepb.DeleteInstanceRequest{Name: inst}); err != nil {
		t.Fatalf("DeleteInstance: %v", err)
	}
	_, err := da.GetDatabase(ctx, &databasepb.GetDatabaseRequest{Name: db})
	if got, want := status.Code(err), codes.NotFound; got != want {
		t.Errorf("GetDatabase after DeleteInstance code = %v, want %v (err %v)", got, want, err)
	}
}

func TestOperationsService(t *testing.T) {
	ctx := testContext(t)
	db := createDatabase(t, "CREATE TABLE T (Id INT64 NOT NULL) PRIMARY KEY (Id)")
	da := newDatabaseAdmin(t, testServer.Addr())
	op, err := da.UpdateDatabaseDdl(ctx, &databasepb.UpdateDatabaseDdlRequest{
		Database:   db,
		Statements: []string{"ALTER TABLE T ADD COLUMN Name STRING(MAX)"},
	})
	if err != nil {
		t.Fatalf("UpdateDatabaseDdl: %v", err)
	}

	conn, err := grpc.NewClient("passthrough:///"+testServer.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	defer conn.Close()
	ops := longrunningpb.NewOperationsClient(conn)

	got, err := ops.GetOperation(ctx, &longrunningpb.GetOperationRequest{Name: op.Name()})
	if err != nil {
		t.Fatalf("GetOperation: %v", err)
	}
	if !got.Done || got.GetError() != nil {
		t.Errorf("GetOperation = %v, want a successful done operation", got)
	}
	list, err := ops.ListOperations(ctx, &longrunningpb.ListOperationsRequest{Name: db + "/operations"})
	if err != nil {
		t.Fatalf("ListOperations: %v", err)
	}
	var names []string
	for _, o := range list.Operations {
		names = append(names, o.Name)
	}
	if !slices.Contains(names, op.Name()) {
		t.Errorf("ListOperations = %q, want it to include %q", names, op.Name())
	}
	if _, err := ops.CancelOperation(ctx, &longrunningpb.CancelOperationRequest{Name: op.Name()}); err != nil {
		t.Errorf("CancelOperation of a done operation: %v", err)
	}
	if _, err := ops.DeleteOperation(ctx, &longrunningpb.DeleteOperationRequest{Name: op.Name()}); err != nil {
		t.Fatalf("DeleteOperation: %v", err)
	}
	_, err = ops.GetOperation(ctx, &longrunningpb.GetOperationRequest{Name: op.Name()})
	if got, want := status.Code(err), codes.NotFound; got != want {
		t.Errorf("GetOperation after delete code = %v, want %v (err %v)", got, want, err)
	}
}

func TestDropProtection(t *testing.T) {
	ctx := testContext(t)
	db := createDatabase(t)
	da := newDatabaseAdmin(t, testServer.Addr())
	protect := func(on bool) {
		t.Helper()
		op, err := da.UpdateDatabase(ctx, &databasepb.UpdateDatabaseRequest{
			Database:   &databasepb.Database{Name: db, EnableDropProtection: on},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"enable_drop_protection"}},
		})
		if err != nil {
			t.Fatalf("UpdateDatabase: %v", err)
		}
		got, err := op.Wait(ctx)
		if err != nil {
			t.Fatalf("UpdateDatabase op.Wait: %v", err)
		}
		if got.EnableDropProtection != on {
			t.Errorf("UpdateDatabase result drop protection = %v, want %v", got.EnableDropProtection, on)
		}
	}
	protect(true)
	err := da.DropDatabase(ctx, &databasepb.DropDatabaseRequest{Database: db})
	if got, want := status.Code(err), codes.FailedPrecondition; got != want {
		t.Errorf("DropDatabase of a protected database code = %v, want %v (err %v)", got, want, err)
	}
	protect(false)
	if err := da.DropDatabase(ctx, &databasepb.DropDatabaseRequest{Database: db}); err != nil {
		t.Errorf("DropDatabase after removing protection: %v", err)
	}
}

func TestListDatabasesPages(t *testing.T) {
	ctx := testContext(t)
	inst := createInstance(t, testServer.Addr())
	var want []string
	for _, id := range []string{"d1", "d2", "d3"} {
		want = append(want, createDatabaseIn(t, inst, id))
	}
	da := newDatabaseAdmin(t, testServer.Addr())
	pager := iterator.NewPager(da.ListDatabases(ctx, &databasepb.ListDatabasesRequest{Parent: inst}), 2, "")
	var pages [][]string
	for {
		var dbs []*databasepb.Database
		next, err := pager.NextPage(&dbs)
		if err != nil {
			t.Fatalf("ListDatabases page: %v", err)
		}
		var names []string
		for _, d := range dbs {
			names = append(names, d.Name)
		}
		pages = append(pages, names)
		if next == "" {
			break
		}
	}
	if diff := cmp.Diff([][]string{want[:2], want[2:]}, pages); diff != "" {
		t.Errorf("ListDatabases pages (-want +got):\n%s", diff)
	}
}
