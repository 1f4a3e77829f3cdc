package conformance

import (
	"context"
	"strings"
	"testing"

	"cloud.google.com/go/spanner"
	"cloud.google.com/go/spanner/admin/database/apiv1/databasepb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
)

// updateDDL applies schema statements and waits for them.
func updateDDL(t *testing.T, name string, stmts ...string) error {
	t.Helper()
	ctx := testCtx(t)
	op, err := databaseAdmin.UpdateDatabaseDdl(ctx, &databasepb.UpdateDatabaseDdlRequest{Database: name, Statements: stmts})
	if err != nil {
		return err
	}
	return op.Wait(ctx)
}

// TestSchemaFeatures covers the DDL features services rely on beyond plain tables: generated
// columns, defaults, NULL_FILTERED indexes and schema changes on tables that hold data.
func TestSchemaFeatures(t *testing.T) {
	t.Parallel()

	t.Run("generated column", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, `CREATE TABLE Lines (
			Id INT64 NOT NULL, Qty INT64 NOT NULL, Price INT64 NOT NULL,
			Total INT64 AS (Qty * Price) STORED,
		) PRIMARY KEY (Id)`)
		mustApply(t, client, spanner.Insert("Lines", []string{"Id", "Qty", "Price"}, []any{1, 3, 5}))
		mustUpdate(t, client, `INSERT INTO Lines (Id, Qty, Price) VALUES (2, 2, 7)`, `UPDATE Lines SET Qty = 4 WHERE Id = 1`)
		want := rows(row(int64(1), int64(20)), row(int64(2), int64(14)))
		if diff := cmp.Diff(want, readAll(t, client, "Lines", "Id", "Total")); diff != "" {
			t.Errorf("Total (-want +got):\n%s", diff)
		}
		_, err := client.Apply(testCtx(t), []*spanner.Mutation{spanner.Insert("Lines", []string{"Id", "Qty", "Price", "Total"}, []any{3, 1, 1, 99})})
		checkErr(t, err, codes.FailedPrecondition, "Total")
	})

	t.Run("default values", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, `CREATE TABLE Orders (
			Id INT64 NOT NULL,
			Status STRING(MAX) NOT NULL DEFAULT ('new'),
			Attempts INT64 DEFAULT (0),
		) PRIMARY KEY (Id)`)
		mustApply(t, client, spanner.Insert("Orders", []string{"Id"}, []any{1}))
		mustUpdate(t, client, `INSERT INTO Orders (Id, Status) VALUES (2, 'paid')`, `INSERT INTO Orders (Id, Attempts) VALUES (3, DEFAULT)`)
		want := rows(row(int64(1), "new", int64(0)), row(int64(2), "paid", int64(0)), row(int64(3), "new", int64(0)))
		if diff := cmp.Diff(want, readAll(t, client, "Orders", "Id", "Status", "Attempts")); diff != "" {
			t.Errorf("Orders (-want +got):\n%s", diff)
		}
	})

	t.Run("null filtered index", func(t *testing.T) {
		t.Parallel()
		client := newDB(t,
			`CREATE TABLE Users (Id INT64 NOT NULL, Email STRING(MAX)) PRIMARY KEY (Id)`,
			`CREATE UNIQUE NULL_FILTERED INDEX UsersByEmail ON Users(Email)`,
		)
		// NULLs are not indexed, so several rows may have no email despite UNIQUE.
		mustApply(t, client,
			spanner.Insert("Users", []string{"Id", "Email"}, []any{1, "a@x"}),
			spanner.Insert("Users", []string{"Id", "Email"}, []any{2, nil}),
			spanner.Insert("Users", []string{"Id", "Email"}, []any{3, nil}),
		)
		res, err := collect(client.Single().ReadUsingIndex(testCtx(t), "Users", "UsersByEmail", spanner.AllKeys(), []string{"Id", "Email"}))
		if err != nil {
			t.Fatalf("ReadUsingIndex: %v", err)
		}
		if diff := cmp.Diff(rows(row(int64(1), "a@x")), res.Rows); diff != "" {
			t.Errorf("index content (-want +got):\n%s", diff)
		}
		_, err = client.Apply(testCtx(t), []*spanner.Mutation{spanner.Insert("Users", []string{"Id", "Email"}, []any{4, "a@x"})})
		checkErr(t, err, codes.AlreadyExists, "UsersByEmail")
	})

	t.Run("commit timestamp needs the column option", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, `CREATE TABLE T (Id INT64 NOT NULL, Ts TIMESTAMP) PRIMARY KEY (Id)`)
		_, err := client.Apply(testCtx(t), []*spanner.Mutation{spanner.Insert("T", []string{"Id", "Ts"}, []any{1, spanner.CommitTimestamp})})
		checkErr(t, err, codes.FailedPrecondition, "allow_commit_timestamp")
	})

	t.Run("schema changes with data", func(t *testing.T) {
		t.Parallel()
		name, client := newDBNamed(t,
			`CREATE TABLE T (Id INT64 NOT NULL, Name STRING(5), Old INT64) PRIMARY KEY (Id)`,
			`CREATE INDEX TByName ON T(Name)`,
			`CREATE TABLE Gone (Id INT64 NOT NULL) PRIMARY KEY (Id)`,
		)
		mustApply(t, client,
			spanner.Insert("T", []string{"Id", "Name", "Old"}, []any{1, "abc", 7}),
			spanner.Insert("T", []string{"Id", "Name", "Old"}, []any{2, "de", 8}),
		)
		steps := []struct {
			name string
			ddl  []string
			// check runs after the change succeeded.
			check func(t *testing.T)
		}{
			{"add column with default backfills", []string{`ALTER TABLE T ADD COLUMN Flag BOOL NOT NULL DEFAULT (TRUE)`}, func(t *testing.T) {
				want := rows(row(int64(1), true), row(int64(2), true))
				if diff := cmp.Diff(want, readAll(t, client, "T", "Id", "Flag")); diff != "" {
					t.Errorf("Flag (-want +got):\n%s", diff)
				}
			}},
			{"widen string column", []string{`ALTER TABLE T ALTER COLUMN Name STRING(20)`}, func(t *testing.T) {
				mustApply(t, client, spanner.Update("T", []string{"Id", "Name"}, []any{2, strings.Repeat("x", 20)}))
			}},
			{"drop index", []string{`DROP INDEX TByName`}, func(t *testing.T) {
				_, err := tryQuery(testCtx(t), client.Single(), spanner.NewStatement(`SELECT Id FROM T@{FORCE_INDEX=TByName}`))
				checkErr(t, err, codes.InvalidArgument, "TByName")
			}},
			{"drop column", []string{`ALTER TABLE T DROP COLUMN Old`}, func(t *testing.T) {
				_, err := tryQuery(testCtx(t), client.Single(), spanner.NewStatement(`SELECT Old FROM T`))
				checkErr(t, err, codes.InvalidArgument, "Unrecognized name: Old")
				res := query(t, client.Single(), spanner.NewStatement(`SELECT * FROM T ORDER BY Id`))
				if diff := cmp.Diff([]string{"INT64", "STRING", "BOOL"}, res.Types); diff != "" {
					t.Errorf("SELECT * types after drop (-want +got):\n%s", diff)
				}
			}},
			{"drop table", []string{`DROP TABLE Gone`}, func(t *testing.T) {
				_, err := tryQuery(testCtx(t), client.Single(), spanner.NewStatement(`SELECT * FROM Gone`))
				checkErr(t, err, codes.InvalidArgument, "Table not found: Gone")
			}},
		}
		for _, st := range steps {
			if err := updateDDL(t, name, st.ddl...); err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
			t.Run(st.name, st.check)
		}

		// Shrinking a column below the length of stored data is refused and changes nothing.
		err := updateDDL(t, name, `ALTER TABLE T ALTER COLUMN Name STRING(3)`)
		checkErr(t, err, codes.FailedPrecondition)
		// Dropping a table that still has an index is refused.
		if err := updateDDL(t, name, `CREATE INDEX TByFlag ON T(Flag)`); err != nil {
			t.Fatalf("create index: %v", err)
		}
		err = updateDDL(t, name, `DROP TABLE T`)
		checkErr(t, err, codes.FailedPrecondition)
	})

	t.Run("dml into interleaved child without parent", func(t *testing.T) {
		t.Parallel()
		client := newDB(t,
			`CREATE TABLE P (PId INT64 NOT NULL) PRIMARY KEY (PId)`,
			`CREATE TABLE C (PId INT64 NOT NULL, CId INT64 NOT NULL) PRIMARY KEY (PId, CId), INTERLEAVE IN PARENT P ON DELETE CASCADE`,
		)
		_, err := client.ReadWriteTransaction(testCtx(t), func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
			_, err := tx.Update(ctx, spanner.NewStatement(`INSERT INTO C (PId, CId) VALUES (1, 1)`))
			return err
		})
		checkErr(t, err, codes.NotFound)

		// A DML delete of a parent cascades to its children; the row count covers only the
		// rows the statement itself matched.
		mustUpdate(t, client, `INSERT INTO P (PId) VALUES (1), (2)`, `INSERT INTO C (PId, CId) VALUES (1, 1), (1, 2), (2, 1)`)
		var n int64
		_, err = client.ReadWriteTransaction(testCtx(t), func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
			var err error
			n, err = tx.Update(ctx, spanner.NewStatement(`DELETE FROM P WHERE PId = 1`))
			return err
		})
		if err != nil {
			t.Fatalf("delete: %v", err)
		}
		if n != 1 {
			t.Errorf("DELETE row count = %d, want 1", n)
		}
		if diff := cmp.Diff(rows(row(int64(2), int64(1))), readAll(t, client, "C", "PId", "CId")); diff != "" {
			t.Errorf("C after cascading delete (-want +got):\n%s", diff)
		}
	})

	t.Run("view", func(t *testing.T) {
		t.Parallel()
		client := newDB(t,
			`CREATE TABLE Singers (Id INT64 NOT NULL, First STRING(MAX), Last STRING(MAX)) PRIMARY KEY (Id)`,
			`CREATE VIEW SingerNames SQL SECURITY INVOKER AS SELECT Singers.Id AS Id, CONCAT(Singers.First, ' ', Singers.Last) AS Name FROM Singers`,
		)
		mustApply(t, client,
			spanner.Insert("Singers", []string{"Id", "First", "Last"}, []any{1, "Marc", "Richards"}),
			spanner.Insert("Singers", []string{"Id", "First", "Last"}, []any{2, "Lea", "Martin"}),
		)
		res := query(t, client.Single(), spanner.NewStatement(`SELECT Name FROM SingerNames WHERE Id > 0 ORDER BY Name`))
		if diff := cmp.Diff(rows(row("Lea Martin"), row("Marc Richards")), res.Rows); diff != "" {
			t.Errorf("view rows (-want +got):\n%s", diff)
		}
	})

	t.Run("foreign key on delete cascade", func(t *testing.T) {
		t.Parallel()
		client := newDB(t,
			`CREATE TABLE Customers (Id INT64 NOT NULL) PRIMARY KEY (Id)`,
			`CREATE TABLE Orders (Id INT64 NOT NULL, CustomerId INT64 NOT NULL,
				CONSTRAINT FK_OrdersCustomers FOREIGN KEY (CustomerId) REFERENCES Customers (Id) ON DELETE CASCADE,
			) PRIMARY KEY (Id)`,
		)
		mustApply(t, client,
			spanner.Insert("Customers", []string{"Id"}, []any{1}),
			spanner.Insert("Customers", []string{"Id"}, []any{2}),
			spanner.Insert("Orders", []string{"Id", "CustomerId"}, []any{10, 1}),
			spanner.Insert("Orders", []string{"Id", "CustomerId"}, []any{11, 1}),
			spanner.Insert("Orders", []string{"Id", "CustomerId"}, []any{12, 2}),
		)
		mustApply(t, client, spanner.Delete("Customers", spanner.Key{1}))
		if diff := cmp.Diff(rows(row(int64(12))), readAll(t, client, "Orders", "Id")); diff != "" {
			t.Errorf("Orders after deleting customer 1 (-want +got):\n%s", diff)
		}
	})

	t.Run("information schema details", func(t *testing.T) {
		t.Parallel()
		// Tools (code generators, migration checkers) read these columns; the values follow
		// Google's documentation of INFORMATION_SCHEMA and its emulator.
		client := newDB(t,
			`CREATE TABLE T (
				Id INT64 NOT NULL,
				Qty INT64 NOT NULL DEFAULT (1),
				Price INT64,
				Total INT64 AS (Qty * Price) STORED,
				Ts TIMESTAMP OPTIONS (allow_commit_timestamp = true),
				Name STRING(20),
			) PRIMARY KEY (Id DESC)`,
			`CREATE NULL_FILTERED INDEX TByName ON T(Name DESC) STORING (Price)`,
		)
		runQueryCases(t, client, []queryCase{
			{name: "tables", sql: `SELECT TABLE_NAME, TABLE_TYPE, PARENT_TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = ''`,
				want: rows(row("T", "BASE TABLE", nil))},
			{name: "columns", sql: `SELECT COLUMN_NAME, ORDINAL_POSITION, IS_NULLABLE, SPANNER_TYPE, IS_GENERATED, GENERATION_EXPRESSION, IS_STORED, COLUMN_DEFAULT
				FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_SCHEMA = '' AND TABLE_NAME = 'T' ORDER BY ORDINAL_POSITION`,
				want: rows(
					row("Id", int64(1), "NO", "INT64", "NEVER", nil, nil, nil),
					row("Qty", int64(2), "NO", "INT64", "NEVER", nil, nil, "1"),
					row("Price", int64(3), "YES", "INT64", "NEVER", nil, nil, nil),
					row("Total", int64(4), "YES", "INT64", "ALWAYS", "Qty * Price", "YES", nil),
					row("Ts", int64(5), "YES", "TIMESTAMP", "NEVER", nil, nil, nil),
					row("Name", int64(6), "YES", "STRING(20)", "NEVER", nil, nil, nil),
				)},
			{name: "column options", sql: `SELECT COLUMN_NAME, OPTION_NAME, OPTION_TYPE, OPTION_VALUE FROM INFORMATION_SCHEMA.COLUMN_OPTIONS WHERE TABLE_SCHEMA = '' AND TABLE_NAME = 'T'`,
				want: rows(row("Ts", "allow_commit_timestamp", "BOOL", "TRUE"))},
			{name: "indexes", sql: `SELECT INDEX_NAME, INDEX_TYPE, PARENT_TABLE_NAME, IS_UNIQUE, IS_NULL_FILTERED, INDEX_STATE FROM INFORMATION_SCHEMA.INDEXES
				WHERE TABLE_SCHEMA = '' AND TABLE_NAME = 'T' ORDER BY INDEX_NAME`,
				want: rows(row("PRIMARY_KEY", "PRIMARY_KEY", "", true, false, nil), row("TByName", "INDEX", "", false, true, "READ_WRITE"))},
			{name: "index columns", sql: `SELECT INDEX_NAME, COLUMN_NAME, ORDINAL_POSITION, COLUMN_ORDERING, IS_NULLABLE, SPANNER_TYPE FROM INFORMATION_SCHEMA.INDEX_COLUMNS
				WHERE TABLE_SCHEMA = '' AND TABLE_NAME = 'T' ORDER BY INDEX_NAME, COLUMN_NAME`,
				want: rows(
					row("PRIMARY_KEY", "Id", int64(1), "DESC", "NO", "INT64"),
					row("TByName", "Name", int64(1), "DESC", "NO", "STRING(20)"),
					row("TByName", "Price", nil, nil, "YES", "INT64"),
				)},
		})

		t.Run("not in read-write transactions", func(t *testing.T) {
			// Google documents INFORMATION_SCHEMA as readable in read-only transactions only.
			_, err := client.ReadWriteTransaction(testCtx(t), func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
				_, err := tryQuery(ctx, tx, spanner.NewStatement(`SELECT COUNT(*) FROM INFORMATION_SCHEMA.TABLES`))
				return err
			})
			if err == nil {
				t.Errorf("INFORMATION_SCHEMA query in a read-write transaction succeeded, want an error")
			}
		})
	})

	t.Run("key too large", func(t *testing.T) {
		t.Parallel()
		// Spanner limits a key to 8 KiB.
		client := newDB(t, `CREATE TABLE S (K STRING(MAX) NOT NULL) PRIMARY KEY (K)`)
		mustApply(t, client, spanner.Insert("S", []string{"K"}, []any{strings.Repeat("k", 4000)}))
		_, err := client.Apply(testCtx(t), []*spanner.Mutation{spanner.Insert("S", []string{"K"}, []any{strings.Repeat("k", 9000)})})
		checkErr(t, err, codes.InvalidArgument)
	})

	t.Run("unknown table in mutation", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, `CREATE TABLE T (Id INT64 NOT NULL) PRIMARY KEY (Id)`)
		_, err := client.Apply(testCtx(t), []*spanner.Mutation{spanner.Insert("Nope", []string{"Id"}, []any{1})})
		checkErr(t, err, codes.NotFound, "Nope")
		_, err = client.Apply(testCtx(t), []*spanner.Mutation{spanner.Insert("T", []string{"Id", "Nope"}, []any{1, 2})})
		checkErr(t, err, codes.NotFound, "Nope")
	})
}
