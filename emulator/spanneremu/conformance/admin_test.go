package conformance

import (
	"context"
	"testing"

	"cloud.google.com/go/spanner"
	"cloud.google.com/go/spanner/admin/database/apiv1/databasepb"
	"cloud.google.com/go/spanner/admin/instance/apiv1/instancepb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
)

func TestAdmin(t *testing.T) {
	t.Parallel()

	t.Run("GetDatabaseDdlRoundTrip", func(t *testing.T) {
		t.Parallel()
		// GetDatabaseDdl returns Spanner's canonical rendering of the schema: two-space
		// indented columns with trailing commas, PRIMARY KEY and INTERLEAVE on the closing line.
		// Code generators read this output, so its exact shape matters. Each table is followed
		// by its indexes (sorted by name), as Google's emulator prints it.
		name, _ := newDBNamed(t,
			`CREATE TABLE Singers (SingerId INT64 NOT NULL, Name STRING(100)) PRIMARY KEY (SingerId)`,
			`CREATE TABLE Albums (SingerId INT64 NOT NULL, AlbumId INT64 NOT NULL, Title STRING(MAX)) PRIMARY KEY (SingerId, AlbumId), INTERLEAVE IN PARENT Singers ON DELETE CASCADE`,
			`CREATE INDEX AlbumsByTitle ON Albums(Title)`,
		)
		got := getDDL(t, name)
		want := []string{
			"CREATE TABLE Singers (\n  SingerId INT64 NOT NULL,\n  Name STRING(100),\n) PRIMARY KEY(SingerId)",
			"CREATE TABLE Albums (\n  SingerId INT64 NOT NULL,\n  AlbumId INT64 NOT NULL,\n  Title STRING(MAX),\n) PRIMARY KEY(SingerId, AlbumId),\n  INTERLEAVE IN PARENT Singers ON DELETE CASCADE",
			"CREATE INDEX AlbumsByTitle ON Albums(Title)",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("GetDatabaseDdl mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("GetDatabaseDdlColumnFeatures", func(t *testing.T) {
		t.Parallel()
		// Column options, defaults, generated columns, foreign keys and checks, in the order
		// and layout Google's emulator prints them (expressions as written).
		name, _ := newDBNamed(t,
			`CREATE TABLE P (Id INT64 NOT NULL) PRIMARY KEY (Id)`,
			`CREATE TABLE T (
				Id INT64 NOT NULL,
				PId INT64,
				Qty INT64 NOT NULL DEFAULT (1),
				Price INT64,
				Total INT64 AS (Qty * Price) STORED,
				Ts TIMESTAMP OPTIONS (allow_commit_timestamp = true),
				Tags ARRAY<STRING(10)>,
				CONSTRAINT FK_TP FOREIGN KEY (PId) REFERENCES P (Id),
				CONSTRAINT QtyPositive CHECK (Qty > 0),
			) PRIMARY KEY (Id DESC)`,
		)
		want := []string{
			"CREATE TABLE P (\n  Id INT64 NOT NULL,\n) PRIMARY KEY(Id)",
			"CREATE TABLE T (\n" +
				"  Id INT64 NOT NULL,\n" +
				"  PId INT64,\n" +
				"  Qty INT64 NOT NULL DEFAULT (1),\n" +
				"  Price INT64,\n" +
				"  Total INT64 AS (Qty * Price) STORED,\n" +
				"  Ts TIMESTAMP OPTIONS (\n    allow_commit_timestamp = true\n  ),\n" +
				"  Tags ARRAY<STRING(10)>,\n" +
				"  CONSTRAINT FK_TP FOREIGN KEY(PId) REFERENCES P(Id),\n" +
				"  CONSTRAINT QtyPositive CHECK(Qty > 0),\n" +
				") PRIMARY KEY(Id DESC)",
		}
		if diff := cmp.Diff(want, getDDL(t, name)); diff != "" {
			t.Errorf("GetDatabaseDdl mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("UpdateDatabaseDdl", func(t *testing.T) {
		t.Parallel()
		name, client := newDBNamed(t, `CREATE TABLE T (Id INT64 NOT NULL, A STRING(MAX)) PRIMARY KEY (Id)`)
		ctx := testCtx(t)
		op, err := databaseAdmin.UpdateDatabaseDdl(ctx, &databasepb.UpdateDatabaseDdlRequest{
			Database: name,
			Statements: []string{
				`ALTER TABLE T ADD COLUMN B INT64`,
				`CREATE TABLE U (Id INT64 NOT NULL, V BOOL) PRIMARY KEY (Id)`,
				`CREATE UNIQUE NULL_FILTERED INDEX TByB ON T(B DESC) STORING (A)`,
			},
		})
		if err != nil {
			t.Fatalf("UpdateDatabaseDdl: %v", err)
		}
		if err := op.Wait(ctx); err != nil {
			t.Fatalf("UpdateDatabaseDdl wait: %v", err)
		}
		got := getDDL(t, name)
		want := []string{
			"CREATE TABLE T (\n  Id INT64 NOT NULL,\n  A STRING(MAX),\n  B INT64,\n) PRIMARY KEY(Id)",
			"CREATE UNIQUE NULL_FILTERED INDEX TByB ON T(B DESC) STORING (A)",
			"CREATE TABLE U (\n  Id INT64 NOT NULL,\n  V BOOL,\n) PRIMARY KEY(Id)",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("GetDatabaseDdl mismatch (-want +got):\n%s", diff)
		}
		// The new column, table and index are usable right away.
		mustApply(t, client,
			spanner.Insert("T", []string{"Id", "A", "B"}, []any{1, "x", 7}),
			spanner.Insert("U", []string{"Id", "V"}, []any{1, true}),
		)
		res := query(t, client.Single(), spanner.NewStatement(`SELECT A, B FROM T@{FORCE_INDEX=TByB} WHERE B = 7`))
		if diff := cmp.Diff(rows(row("x", int64(7))), res.Rows); diff != "" {
			t.Errorf("query via new index (-want +got):\n%s", diff)
		}
	})

	t.Run("BadDDL", func(t *testing.T) {
		t.Parallel()
		name, _ := newDBNamed(t, `CREATE TABLE T (Id INT64 NOT NULL) PRIMARY KEY (Id)`)
		tests := []struct {
			name string
			ddl  string
		}{
			{"syntax", `CREATE TABLE (`},
			{"unknown type", `CREATE TABLE V (Id INT65 NOT NULL) PRIMARY KEY (Id)`},
			{"duplicate table", `CREATE TABLE T (Id INT64 NOT NULL) PRIMARY KEY (Id)`},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				ctx := testCtx(t)
				op, err := databaseAdmin.UpdateDatabaseDdl(ctx, &databasepb.UpdateDatabaseDdlRequest{
					Database: name, Statements: []string{tt.ddl},
				})
				// Spanner may reject a statement when the RPC is made or when the operation
				// completes; either way the caller sees the error.
				if err == nil {
					err = op.Wait(ctx)
				}
				want := codes.InvalidArgument
				if tt.name == "duplicate table" {
					// A name clash is a schema-state problem, not a malformed request.
					want = codes.FailedPrecondition
				}
				checkErr(t, err, want)
			})
		}
		// A failed update leaves the schema as it was.
		if diff := cmp.Diff([]string{"CREATE TABLE T (\n  Id INT64 NOT NULL,\n) PRIMARY KEY(Id)"}, getDDL(t, name)); diff != "" {
			t.Errorf("schema changed after failed DDL (-want +got):\n%s", diff)
		}
	})

	t.Run("CreateDatabaseBadDDL", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		id := newDatabaseID()
		op, err := databaseAdmin.CreateDatabase(ctx, &databasepb.CreateDatabaseRequest{
			Parent:          instanceName,
			CreateStatement: "CREATE DATABASE `" + id + "`",
			ExtraStatements: []string{`CREATE TABLE T (Id INT64 NOT NULL PRIMARY KEY (Id)`},
		})
		if err == nil {
			_, err = op.Wait(ctx)
		}
		checkErr(t, err, codes.InvalidArgument)
	})

	t.Run("CreateDatabaseBadName", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		op, err := databaseAdmin.CreateDatabase(ctx, &databasepb.CreateDatabaseRequest{
			Parent:          instanceName,
			CreateStatement: "CREATE DATABASE `1bad`",
		})
		if err == nil {
			_, err = op.Wait(ctx)
		}
		checkErr(t, err, codes.InvalidArgument)
	})

	t.Run("CreateDatabaseDuplicate", func(t *testing.T) {
		t.Parallel()
		name, _ := newDBNamed(t)
		ctx := testCtx(t)
		op, err := databaseAdmin.CreateDatabase(ctx, &databasepb.CreateDatabaseRequest{
			Parent:          instanceName,
			CreateStatement: "CREATE DATABASE `" + name[len(instanceName+"/databases/"):] + "`",
		})
		if err == nil {
			_, err = op.Wait(ctx)
		}
		checkErr(t, err, codes.AlreadyExists)
	})

	t.Run("Instances", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		inst, err := instanceAdmin.GetInstance(ctx, &instancepb.GetInstanceRequest{Name: instanceName})
		if err != nil {
			t.Fatalf("GetInstance: %v", err)
		}
		if inst.GetState() != instancepb.Instance_READY {
			t.Errorf("instance state = %v, want READY", inst.GetState())
		}
		found := false
		it := instanceAdmin.ListInstances(ctx, &instancepb.ListInstancesRequest{Parent: "projects/" + projectID})
		for {
			i, err := it.Next()
			if err == iterator.Done {
				break
			}
			if err != nil {
				t.Fatalf("ListInstances: %v", err)
			}
			found = found || i.GetName() == instanceName
		}
		if !found {
			t.Errorf("ListInstances does not include %s", instanceName)
		}
		_, err = instanceAdmin.GetInstance(ctx, &instancepb.GetInstanceRequest{Name: "projects/" + projectID + "/instances/nope"})
		checkErr(t, err, codes.NotFound)
		_, err = databaseAdmin.GetDatabase(ctx, &databasepb.GetDatabaseRequest{Name: instanceName + "/databases/nope"})
		checkErr(t, err, codes.NotFound)
	})

	t.Run("ListAndDropDatabases", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		name1, _ := newDBNamed(t)
		name2, _ := newDBNamed(t)
		listed := listDatabases(t)
		for _, n := range []string{name1, name2} {
			if !listed[n] {
				t.Errorf("ListDatabases does not include %s", n)
			}
		}

		if err := databaseAdmin.DropDatabase(ctx, &databasepb.DropDatabaseRequest{Database: name1}); err != nil {
			t.Fatalf("DropDatabase: %v", err)
		}
		listed = listDatabases(t)
		if listed[name1] {
			t.Errorf("ListDatabases still includes dropped %s", name1)
		}
		if !listed[name2] {
			t.Errorf("ListDatabases lost %s", name2)
		}
		_, err := databaseAdmin.GetDatabase(ctx, &databasepb.GetDatabaseRequest{Name: name1})
		checkErr(t, err, codes.NotFound)
		db, err := databaseAdmin.GetDatabase(ctx, &databasepb.GetDatabaseRequest{Name: name2})
		if err != nil {
			t.Fatalf("GetDatabase: %v", err)
		}
		if db.GetState() != databasepb.Database_READY {
			t.Errorf("database state = %v, want READY", db.GetState())
		}
		if db.GetDatabaseDialect() != databasepb.DatabaseDialect_GOOGLE_STANDARD_SQL {
			t.Errorf("database dialect = %v, want GOOGLE_STANDARD_SQL", db.GetDatabaseDialect())
		}
	})

	t.Run("ListDatabasesPaging", func(t *testing.T) {
		t.Parallel()
		// A separate instance, so that other tests creating and dropping databases in
		// parallel cannot change the listing while it is paged.
		ctx := testCtx(t)
		const pagingInstance = "projects/" + projectID + "/instances/paging"
		cfg, err := instanceAdmin.ListInstanceConfigs(ctx, &instancepb.ListInstanceConfigsRequest{Parent: "projects/" + projectID}).Next()
		if err != nil {
			t.Fatalf("ListInstanceConfigs: %v", err)
		}
		op, err := instanceAdmin.CreateInstance(ctx, &instancepb.CreateInstanceRequest{
			Parent:     "projects/" + projectID,
			InstanceId: "paging",
			Instance:   &instancepb.Instance{Config: cfg.GetName(), DisplayName: "paging", NodeCount: 1},
		})
		if err == nil {
			_, err = op.Wait(ctx)
		}
		if err != nil && spanner.ErrCode(err) != codes.AlreadyExists {
			t.Fatalf("CreateInstance: %v", err)
		}
		t.Cleanup(func() {
			instanceAdmin.DeleteInstance(context.Background(), &instancepb.DeleteInstanceRequest{Name: pagingInstance})
		})
		want := map[string]int{}
		for i := 0; i < 3; i++ {
			id := newDatabaseID()
			op, err := databaseAdmin.CreateDatabase(ctx, &databasepb.CreateDatabaseRequest{Parent: pagingInstance, CreateStatement: "CREATE DATABASE `" + id + "`"})
			if err == nil {
				_, err = op.Wait(ctx)
			}
			if err != nil {
				t.Fatalf("CreateDatabase: %v", err)
			}
			want[pagingInstance+"/databases/"+id] = 1
		}
		got := map[string]int{}
		it := databaseAdmin.ListDatabases(ctx, &databasepb.ListDatabasesRequest{Parent: pagingInstance, PageSize: 1})
		for {
			d, err := it.Next()
			if err == iterator.Done {
				break
			}
			if err != nil {
				t.Fatalf("ListDatabases: %v", err)
			}
			got[d.GetName()]++
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("databases listed one per page (-want +got):\n%s", diff)
		}
	})
}

func getDDL(t *testing.T, name string) []string {
	t.Helper()
	resp, err := databaseAdmin.GetDatabaseDdl(testCtx(t), &databasepb.GetDatabaseDdlRequest{Database: name})
	if err != nil {
		t.Fatalf("GetDatabaseDdl: %v", err)
	}
	return resp.GetStatements()
}

func listDatabases(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	it := databaseAdmin.ListDatabases(testCtx(t), &databasepb.ListDatabasesRequest{Parent: instanceName})
	for {
		db, err := it.Next()
		if err == iterator.Done {
			break
		}
		if err != nil {
			t.Fatalf("ListDatabases: %v", err)
		}
		out[db.GetName()] = true
	}
	return out
}
