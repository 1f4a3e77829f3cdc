package catalog

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// projectDDL is the schema shapes the services use: an outbox, interleaved orders and an
// inventory guarded by a CHECK.
var projectDDL = []string{
	`CREATE TABLE OutboxEvents (
		EventId STRING(36) NOT NULL,
		AggregateId STRING(64) NOT NULL,
		Payload JSON NOT NULL,
		CreatedAt TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp = true),
		PendingShard INT64,
		PublishedAt TIMESTAMP OPTIONS (allow_commit_timestamp = true),
		Attempts INT64 NOT NULL DEFAULT (0)
	) PRIMARY KEY (EventId), ROW DELETION POLICY (OLDER_THAN(PublishedAt, INTERVAL 7 DAY))`,
	`CREATE NULL_FILTERED INDEX OutboxPending ON OutboxEvents (PendingShard, CreatedAt)`,
	`CREATE TABLE Orders (
		OrderId STRING(36) NOT NULL,
		CustomerId STRING(36) NOT NULL,
		Status STRING(16) NOT NULL,
		TotalCents INT64 NOT NULL,
	) PRIMARY KEY (OrderId)`,
	`CREATE TABLE OrderItems (
		OrderId STRING(36) NOT NULL,
		LineNo INT64 NOT NULL,
		Sku STRING(32) NOT NULL,
		Quantity INT64 NOT NULL,
	) PRIMARY KEY (OrderId, LineNo), INTERLEAVE IN PARENT Orders ON DELETE CASCADE`,
	`CREATE TABLE Inventory (
		Sku STRING(32) NOT NULL,
		OnHand INT64 NOT NULL,
		Reserved INT64 NOT NULL,
		CONSTRAINT StockNonNegative CHECK (OnHand >= 0 AND Reserved >= 0 AND Reserved <= OnHand),
	) PRIMARY KEY (Sku)`,
}

func TestProjectSchemaConstraints(t *testing.T) {
	d := newTestDB(t)
	d.mustDDL(projectDDL...)
	d.mustDDL(
		`CREATE TABLE Users (UserId INT64 NOT NULL, Email STRING(MAX), Nick STRING(MAX), Sku STRING(32),
			Doubled INT64 AS (UserId * 2) STORED,
			FOREIGN KEY (Sku) REFERENCES Inventory (Sku)) PRIMARY KEY (UserId)`,
		`CREATE UNIQUE INDEX UsersByEmail ON Users (Email)`,
		`CREATE UNIQUE NULL_FILTERED INDEX UsersByNick ON Users (Nick)`,
	)
	d.mustExec(`INSERT INTO "Orders" VALUES ('o1', 'c1', 'NEW', 100)`)
	d.mustExec(`INSERT INTO "OrderItems" VALUES ('o1', 1, 'sku1', 2), ('o1', 2, 'sku2', 1)`)
	d.mustExec(`INSERT INTO "Inventory" VALUES ('sku1', 10, 2)`)
	d.mustExec(`INSERT INTO "Users" ("UserId", "Email", "Nick") VALUES (1, NULL, NULL)`)

	tests := []struct {
		name, sql, wantErr string
	}{
		{"duplicate key", `INSERT INTO "Orders" VALUES ('o1', 'c2', 'NEW', 1)`, "UNIQUE constraint failed"},
		{"not null", `INSERT INTO "Orders" VALUES ('o2', NULL, 'NEW', 1)`, "NOT NULL constraint failed: Orders.CustomerId"},
		{"string length counts characters", `INSERT INTO "Orders" VALUES ('o2', 'c', 'ÄÄÄÄÄÄÄÄÄÄÄÄÄÄÄÄ', 1)`, ""},
		{"string too long", `INSERT INTO "Orders" VALUES ('o3', 'c', 'ÄÄÄÄÄÄÄÄÄÄÄÄÄÄÄÄÄ', 1)`, "CHECK constraint failed: spanner_len:Orders.Status"},
		{"check violated", `UPDATE "Inventory" SET "Reserved" = 11`, "CHECK constraint failed: spanner_check:Inventory.StockNonNegative"},
		{"check holds", `UPDATE "Inventory" SET "Reserved" = 10`, ""},
		{"child without parent", `INSERT INTO "OrderItems" VALUES ('nope', 1, 's', 1)`, "FOREIGN KEY constraint failed"},
		{"foreign key missing", `INSERT INTO "Users" ("UserId", "Email", "Sku") VALUES (2, '2@x', 'nope')`, "FOREIGN KEY constraint failed"},
		{"foreign key present", `INSERT INTO "Users" ("UserId", "Email", "Sku") VALUES (3, '3@x', 'sku1')`, ""},
		{"unique index treats NULLs as equal", `INSERT INTO "Users" ("UserId") VALUES (4)`, "UNIQUE constraint failed: index 'UsersByEmail'"},
		{"unique index", `INSERT INTO "Users" ("UserId", "Email", "Nick") VALUES (5, 'a@x', 'a'), (6, 'a@x', 'b')`, "UNIQUE constraint failed"},
		{"null-filtered unique index ignores NULLs", `INSERT INTO "Users" ("UserId", "Email") VALUES (7, 'b@x')`, ""},
		{"null-filtered unique index", `INSERT INTO "Users" ("UserId", "Email", "Nick") VALUES (8, 'c@x', 'n'), (9, 'd@x', 'n')`, "UNIQUE constraint failed: Users.Nick"},
		{"default", `INSERT INTO "OutboxEvents" ("EventId", "AggregateId", "Payload", "CreatedAt") VALUES ('e1', 'a', '{}', 't')`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := d.exec(tt.sql); !errContains(err, tt.wantErr) {
				t.Errorf("%s: got error %v, want %q", tt.sql, err, tt.wantErr)
			}
		})
	}

	if diff := cmp.Diff([][]string{{"0"}}, d.query(`SELECT "Attempts" FROM "OutboxEvents"`)); diff != "" {
		t.Errorf("default (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([][]string{{"6"}}, d.query(`SELECT "Doubled" FROM "Users" WHERE "UserId" = 3`)); diff != "" {
		t.Errorf("generated column (-want +got):\n%s", diff)
	}
	d.mustExec(`DELETE FROM "Orders" WHERE "OrderId" = 'o1'`)
	if diff := cmp.Diff([][]string{{"0"}}, d.query(`SELECT COUNT(*) FROM "OrderItems"`)); diff != "" {
		t.Errorf("interleave cascade (-want +got):\n%s", diff)
	}
}

func TestEmptyKey(t *testing.T) {
	d := newTestDB(t)
	d.mustDDL(`CREATE TABLE Singleton (Value INT64) PRIMARY KEY ()`)
	tab, _ := d.schema.Table("singleton")
	if tab.SyntheticKey != EmptyKeyColumn || len(tab.Columns) != 1 {
		t.Errorf("SyntheticKey = %q, columns %d; want %q and 1 column", tab.SyntheticKey, len(tab.Columns), EmptyKeyColumn)
	}
	d.mustExec(`INSERT INTO "Singleton" ("Value") VALUES (1)`)
	if err := d.exec(`INSERT INTO "Singleton" ("Value") VALUES (2)`); !errContains(err, "UNIQUE constraint failed") {
		t.Errorf("second row: %v", err)
	}
	d.mustDDL(`ALTER TABLE Singleton ADD COLUMN Other STRING(MAX)`)
	if diff := cmp.Diff([][]string{{"1", "NULL"}}, d.query(`SELECT "Value", "Other" FROM "Singleton"`)); diff != "" {
		t.Errorf("after ALTER (-want +got):\n%s", diff)
	}
}

func TestAlterTable(t *testing.T) {
	d := newTestDB(t)
	d.mustDDL(projectDDL...)
	d.mustExec(`INSERT INTO "Orders" VALUES ('o1', 'c1', 'NEW', 100), ('o2', 'c2', 'PAID', 50)`)
	d.mustExec(`INSERT INTO "OrderItems" VALUES ('o1', 1, 'sku1', 2)`)
	d.mustExec(`INSERT INTO "Inventory" VALUES ('sku1', 10, 2)`)

	steps := []struct {
		name    string
		ddl     string
		wantErr string // substring of the SQLite or status error; "" for success
		query   string // checked after the step when set
		want    [][]string
	}{
		{name: "add column keeps rows", ddl: `ALTER TABLE Orders ADD COLUMN Note STRING(10)`,
			query: `SELECT "OrderId", "Note" FROM "Orders" ORDER BY 1`, want: [][]string{{"o1", "NULL"}, {"o2", "NULL"}}},
		{name: "add column if not exists is a no-op", ddl: `ALTER TABLE Orders ADD COLUMN IF NOT EXISTS Note INT64`},
		{name: "added column is length checked", ddl: `ALTER TABLE Orders ADD COLUMN Tag STRING(2)`,
			query: `SELECT sql LIKE '%spanner_len:Orders.Tag%' FROM sqlite_schema WHERE name = 'Orders'`, want: [][]string{{"1"}}},
		{name: "added virtual generated column", ddl: `ALTER TABLE Orders ADD COLUMN Double INT64 AS (TotalCents * 2)`,
			query: `SELECT "Double" FROM "Orders" ORDER BY 1`, want: [][]string{{"100"}, {"200"}}},
		{name: "drop added columns", ddl: `ALTER TABLE Orders DROP COLUMN Tag`},
		{name: "drop added generated column", ddl: `ALTER TABLE Orders DROP COLUMN Double`},
		{name: "add not null column with default", ddl: `ALTER TABLE Orders ADD COLUMN Version INT64 NOT NULL DEFAULT (1)`,
			query: `SELECT "Version" FROM "Orders"`, want: [][]string{{"1"}, {"1"}}},
		{name: "add not null column without default", ddl: `ALTER TABLE Orders ADD COLUMN Bad INT64 NOT NULL`,
			wantErr: "Cannot add NOT NULL column Orders.Bad to existing table Orders."},
		{name: "shrinking a length below the data fails", ddl: `ALTER TABLE Orders ALTER COLUMN Status STRING(2) NOT NULL`,
			wantErr: "CHECK constraint failed: spanner_len:Orders.Status"},
		{name: "growing a length keeps data", ddl: `ALTER TABLE Orders ALTER COLUMN Status STRING(100) NOT NULL`,
			query: `SELECT "Status" FROM "Orders" ORDER BY 1`, want: [][]string{{"NEW"}, {"PAID"}}},
		{name: "string to bytes", ddl: `ALTER TABLE Orders ALTER COLUMN Note BYTES(10)`,
			query: `SELECT typeof("Note") FROM "Orders"`, want: [][]string{{"null"}, {"null"}}},
		{name: "set not null fails on NULLs", ddl: `ALTER TABLE Orders ALTER COLUMN Note BYTES(10) NOT NULL`,
			wantErr: "NOT NULL constraint failed"},
		{name: "set default", ddl: `ALTER TABLE Orders ALTER COLUMN TotalCents SET DEFAULT (7)`},
		{name: "drop column keeps others", ddl: `ALTER TABLE Orders DROP COLUMN Note`,
			query: `SELECT * FROM "Orders" ORDER BY 1`, want: [][]string{{"o1", "c1", "NEW", "100", "1"}, {"o2", "c2", "PAID", "50", "1"}}},
		{name: "children survive parent rebuild", query: `SELECT COUNT(*) FROM "OrderItems"`, want: [][]string{{"1"}}},
		{name: "check violated by data", ddl: `ALTER TABLE Orders ADD CONSTRAINT Big CHECK (TotalCents > 60)`,
			wantErr: "CHECK constraint failed: spanner_check:Orders.Big"},
		{name: "check holding", ddl: `ALTER TABLE Orders ADD CONSTRAINT Positive CHECK (TotalCents > 0)`},
		{name: "drop check", ddl: `ALTER TABLE Orders DROP CONSTRAINT Positive`},
		{name: "foreign key violated by data", ddl: `ALTER TABLE OrderItems ADD CONSTRAINT ItemSku FOREIGN KEY (Sku) REFERENCES Inventory (OnHand)`,
			wantErr: "The column types are different"},
		{name: "foreign key holding", ddl: `ALTER TABLE OrderItems ADD CONSTRAINT ItemSku FOREIGN KEY (Sku) REFERENCES Inventory (Sku)`},
		{name: "foreign key not holding", ddl: `ALTER TABLE Orders ADD CONSTRAINT OrderCustomer FOREIGN KEY (CustomerId) REFERENCES Inventory (Sku)`,
			wantErr: "foreign key violation"},
		{name: "set on delete no action", ddl: `ALTER TABLE OrderItems SET ON DELETE NO ACTION`},
		{name: "row deletion policy replace", ddl: `ALTER TABLE OutboxEvents REPLACE ROW DELETION POLICY (OLDER_THAN(CreatedAt, INTERVAL 1 DAY))`},
		{name: "row deletion policy drop", ddl: `ALTER TABLE OutboxEvents DROP ROW DELETION POLICY`},
		{name: "allow commit timestamp", ddl: `ALTER TABLE OutboxEvents ALTER COLUMN PublishedAt SET OPTIONS (allow_commit_timestamp = false)`},
	}
	for _, st := range steps {
		if st.ddl != "" {
			if err := d.ddl(st.ddl); !errContains(err, st.wantErr) {
				t.Fatalf("%s: got error %v, want %q", st.name, err, st.wantErr)
			}
		}
		if st.query != "" {
			if diff := cmp.Diff(st.want, d.query(st.query)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", st.name, diff)
			}
		}
	}

	d.mustExec(`INSERT INTO "Orders" ("OrderId", "CustomerId", "Status") VALUES ('o3', 'c', 'NEW')`)
	if diff := cmp.Diff([][]string{{"7"}}, d.query(`SELECT "TotalCents" FROM "Orders" WHERE "OrderId" = 'o3'`)); diff != "" {
		t.Errorf("SET DEFAULT (-want +got):\n%s", diff)
	}
	if err := d.exec(`DELETE FROM "Orders" WHERE "OrderId" = 'o1'`); !errContains(err, "FOREIGN KEY constraint failed") {
		t.Errorf("delete parent with ON DELETE NO ACTION: %v", err)
	}
	if err := d.exec(`INSERT INTO "OrderItems" VALUES ('o2', 1, 'nope', 1)`); !errContains(err, "FOREIGN KEY constraint failed") {
		t.Errorf("foreign key after ALTER: %v", err)
	}
	out, _ := d.schema.Table("OutboxEvents")
	if out.RowDeletionPolicy != nil {
		t.Errorf("RowDeletionPolicy = %+v, want nil", out.RowDeletionPolicy)
	}
	if c, _ := out.Column("PublishedAt"); c.AllowCommitTimestamp {
		t.Errorf("PublishedAt.AllowCommitTimestamp = true after SET OPTIONS false")
	}
}

func TestDropAndIndexes(t *testing.T) {
	d := newTestDB(t)
	d.mustDDL(projectDDL...)
	d.mustDDL(`CREATE INDEX IF NOT EXISTS OutboxPending ON OutboxEvents (AggregateId)`)
	d.mustDDL(`CREATE INDEX ItemsBySku ON OrderItems (OrderId, Sku) STORING (Quantity), INTERLEAVE IN Orders`)
	d.mustDDL(`ALTER INDEX ItemsBySku DROP STORED COLUMN Quantity`, `ALTER INDEX ItemsBySku ADD STORED COLUMN Quantity`)
	ix, _ := d.schema.Index("itemsbysku")
	if diff := cmp.Diff(&Index{Name: "ItemsBySku", SQLiteName: "ItemsBySku", Table: "OrderItems",
		Keys: []KeyPart{{Column: "OrderId"}, {Column: "Sku"}}, Storing: []string{"Quantity"}, Interleave: "Orders"}, ix); diff != "" {
		t.Errorf("index (-want +got):\n%s", diff)
	}
	if err := d.ddl(`DROP TABLE OrderItems`); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("DROP TABLE with index: %v", err)
	}
	d.mustDDL(`DROP INDEX ItemsBySku`, `DROP TABLE OrderItems`, `DROP TABLE IF EXISTS OrderItems`, `DROP INDEX IF EXISTS ItemsBySku`)
	d.mustDDL(`DROP TABLE Orders`)
	if got := d.query(`SELECT name FROM sqlite_schema WHERE name LIKE 'Order%'`); len(got) != 0 {
		t.Errorf("SQLite objects left after DROP TABLE: %v", got)
	}
	// A managed backing index comes and goes with its foreign key.
	d.mustDDL(`CREATE TABLE Products (ProductId INT64 NOT NULL, Code STRING(10)) PRIMARY KEY (ProductId)`,
		`CREATE TABLE Refs (Id INT64 NOT NULL, Code STRING(10), CONSTRAINT RefCode FOREIGN KEY (Code) REFERENCES Products (Code)) PRIMARY KEY (Id)`)
	managed := d.schema.TableIndexes("Products")
	if len(managed) != 1 || !managed[0].Managed || !managed[0].Unique {
		t.Fatalf("backing indexes = %+v, want one managed unique index", managed)
	}
	for _, st := range d.schema.Statements {
		if strings.Contains(st, managed[0].Name) {
			t.Errorf("managed index in Statements: %s", st)
		}
	}
	if err := d.ddl(`DROP INDEX ` + managed[0].Name); status.Code(err) != codes.FailedPrecondition ||
		!strings.Contains(err.Error(), "It is in use by foreign keys: RefCode.") {
		t.Errorf("DROP of a managed index: %v", err)
	}
	d.mustDDL(`ALTER TABLE Refs DROP CONSTRAINT RefCode`)
	if got := d.schema.TableIndexes("Products"); len(got) != 0 {
		t.Errorf("backing index left after DROP CONSTRAINT: %+v", got)
	}
	if got := d.query(`SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'Products' AND sql IS NOT NULL`); len(got) != 0 {
		t.Errorf("SQLite backing index left: %v", got)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name     string
		ddl      []string
		wantCode codes.Code
		wantMsg  string
	}{
		{"syntax", []string{`CREATE TABL T (A INT64) PRIMARY KEY (A)`}, codes.InvalidArgument, "Error parsing Spanner DDL statement: CREATE TABL T"},
		{"duplicate table", []string{`CREATE TABLE Orders (A INT64) PRIMARY KEY (A)`}, codes.FailedPrecondition, "Duplicate name in schema: Orders."},
		{"duplicate table case-insensitive", []string{`CREATE TABLE orders (A INT64) PRIMARY KEY (A)`}, codes.FailedPrecondition, "Duplicate name in schema: orders."},
		{"index named like a table", []string{`CREATE INDEX Orders ON Inventory (OnHand)`}, codes.FailedPrecondition, "Duplicate name in schema: Orders."},
		{"index named PRIMARY_KEY", []string{`CREATE INDEX PRIMARY_KEY ON Inventory (OnHand)`}, codes.InvalidArgument, "Cannot use reserved name PRIMARY_KEY for a secondary index"},
		{"unknown type", []string{`CREATE TABLE T (A INT32) PRIMARY KEY (A)`}, codes.InvalidArgument, ""},
		{"bad length", []string{`CREATE TABLE T (A STRING(0)) PRIMARY KEY (A)`}, codes.InvalidArgument, "Bad length for column A: 0 : Allowed length range: [1, 2621440]."},
		{"duplicate column", []string{`CREATE TABLE T (A INT64, a STRING(MAX)) PRIMARY KEY (A)`}, codes.FailedPrecondition, "Duplicate column name T.a."},
		{"missing key column", []string{`CREATE TABLE T (A INT64) PRIMARY KEY (B)`}, codes.FailedPrecondition, "Table T references nonexistent key column B."},
		{"key column twice", []string{`CREATE TABLE T (A INT64) PRIMARY KEY (A, a)`}, codes.InvalidArgument, "Table T references key column A more than once."},
		{"json key", []string{`CREATE TABLE T (A JSON) PRIMARY KEY (A)`}, codes.InvalidArgument, "Column A has type JSON, but is part of the primary key."},
		{"missing parent", []string{`CREATE TABLE T (A INT64) PRIMARY KEY (A), INTERLEAVE IN PARENT Nope`}, codes.NotFound, "Table not found: Nope"},
		{"parent key missing", []string{`CREATE TABLE T (A INT64) PRIMARY KEY (A), INTERLEAVE IN PARENT Orders`},
			codes.FailedPrecondition, "Table T does not reference parent key column OrderId."},
		{"parent key misplaced", []string{`CREATE TABLE T (A INT64, OrderId STRING(36) NOT NULL) PRIMARY KEY (A, OrderId), INTERLEAVE IN PARENT Orders`},
			codes.FailedPrecondition, "Table T references parent key column OrderId at incorrect position 2."},
		{"parent key order", []string{`CREATE TABLE T (OrderId STRING(36) NOT NULL, A INT64) PRIMARY KEY (OrderId DESC, A), INTERLEAVE IN PARENT Orders`},
			codes.FailedPrecondition, "Table T references parent key column OrderId with incorrect order DESC."},
		{"parent key length", []string{`CREATE TABLE T (OrderId STRING(10) NOT NULL, A INT64) PRIMARY KEY (OrderId, A), INTERLEAVE IN PARENT Orders`},
			codes.FailedPrecondition, "Table T references parent key column OrderId with incorrect length 10 (should be 36)."},
		{"parent key type", []string{`CREATE TABLE T (OrderId BYTES(36) NOT NULL, A INT64) PRIMARY KEY (OrderId, A), INTERLEAVE IN PARENT Orders`},
			codes.FailedPrecondition, "Table T references parent key column OrderId with incorrect type BYTES(36) (should be STRING(36))."},
		{"parent key nullability", []string{`CREATE TABLE T (OrderId STRING(36), A INT64) PRIMARY KEY (OrderId, A), INTERLEAVE IN PARENT Orders`},
			codes.FailedPrecondition, "Table T references parent key column OrderId that is NOT NULL, but child key is nullable."},
		{"child adding no columns", []string{`CREATE TABLE C (OrderId STRING(36) NOT NULL) PRIMARY KEY (OrderId), INTERLEAVE IN PARENT Orders`},
			codes.FailedPrecondition, "Table C adds no columns and is not a top level table."},
		{"too deep", []string{
			`CREATE TABLE L2 (OrderId STRING(36) NOT NULL, K2 INT64 NOT NULL) PRIMARY KEY (OrderId, K2), INTERLEAVE IN PARENT Orders`,
			`CREATE TABLE L3 (OrderId STRING(36) NOT NULL, K2 INT64 NOT NULL, K3 INT64 NOT NULL) PRIMARY KEY (OrderId, K2, K3), INTERLEAVE IN PARENT L2`,
			`CREATE TABLE L4 (OrderId STRING(36) NOT NULL, K2 INT64 NOT NULL, K3 INT64 NOT NULL, K4 INT64 NOT NULL) PRIMARY KEY (OrderId, K2, K3, K4), INTERLEAVE IN PARENT L3`,
			`CREATE TABLE L5 (OrderId STRING(36) NOT NULL, K2 INT64 NOT NULL, K3 INT64 NOT NULL, K4 INT64 NOT NULL, K5 INT64 NOT NULL) PRIMARY KEY (OrderId, K2, K3, K4, K5), INTERLEAVE IN PARENT L4`,
			`CREATE TABLE L6 (OrderId STRING(36) NOT NULL, K2 INT64 NOT NULL, K3 INT64 NOT NULL, K4 INT64 NOT NULL, K5 INT64 NOT NULL, K6 INT64 NOT NULL) PRIMARY KEY (OrderId, K2, K3, K4, K5, K6), INTERLEAVE IN PARENT L5`,
			`CREATE TABLE L7 (OrderId STRING(36) NOT NULL, K2 INT64 NOT NULL, K3 INT64 NOT NULL, K4 INT64 NOT NULL, K5 INT64 NOT NULL, K6 INT64 NOT NULL, K7 INT64 NOT NULL) PRIMARY KEY (OrderId, K2, K3, K4, K5, K6, K7), INTERLEAVE IN PARENT L6`,
			`CREATE TABLE L8 (OrderId STRING(36) NOT NULL, K2 INT64 NOT NULL, K3 INT64 NOT NULL, K4 INT64 NOT NULL, K5 INT64 NOT NULL, K6 INT64 NOT NULL, K7 INT64 NOT NULL, K8 INT64 NOT NULL) PRIMARY KEY (OrderId, K2, K3, K4, K5, K6, K7, K8), INTERLEAVE IN PARENT L7`,
		}, codes.FailedPrecondition, "Table L8 is too deeply nested; the limit is 7."},
		{"index on unknown table", []string{`CREATE INDEX I ON Nope (A)`}, codes.NotFound, "Table not found: Nope"},
		{"index on unknown column", []string{`CREATE INDEX I ON Orders (Nope)`}, codes.InvalidArgument, "Index I specifies key column Nope which does not exist in the index's base table."},
		{"index key twice", []string{`CREATE INDEX I ON Orders (Status, status)`}, codes.InvalidArgument, "Index I specifies key column Status twice."},
		{"storing a key column", []string{`CREATE INDEX I ON Orders (Status) STORING (OrderId)`}, codes.FailedPrecondition, "Index I specifies stored column OrderId which is a key of table Orders."},
		{"storing an index key", []string{`CREATE INDEX I ON Orders (Status) STORING (Status)`}, codes.InvalidArgument, "Index I specifies stored column Status already specified as primary key."},
		{"storing an unknown column", []string{`CREATE INDEX I ON Orders (Status) STORING (Nope)`}, codes.FailedPrecondition, "Index I specifies nonexistent stored column Nope."},
		{"index on json", []string{`CREATE INDEX I ON OutboxEvents (Payload)`}, codes.InvalidArgument, "Index I is defined on a column of unsupported type JSON."},
		{"index interleaved in a non-ancestor", []string{`CREATE INDEX I ON Orders (OrderId), INTERLEAVE IN Inventory`}, codes.FailedPrecondition,
			"Cannot interleave index I of table Orders within table Inventory because Inventory is not an ancestor of Orders."},
		{"index interleaved in a missing table", []string{`CREATE INDEX I ON OrderItems (OrderId), INTERLEAVE IN Nope`}, codes.FailedPrecondition,
			"Cannot interleave index I within nonexistent table Nope."},
		{"interleaved index key", []string{`CREATE INDEX I ON OrderItems (Sku), INTERLEAVE IN Orders`}, codes.FailedPrecondition,
			"Index I does not reference index parent key column OrderId."},
		{"drop unknown table", []string{`DROP TABLE Nope`}, codes.NotFound, "Table not found: Nope"},
		{"drop unknown index", []string{`DROP INDEX Nope`}, codes.NotFound, "Index not found: Nope"},
		{"drop unstored column", []string{`ALTER INDEX OutboxPending DROP STORED COLUMN Payload`}, codes.InvalidArgument, "Column Payload in index OutboxPending is not a stored column."},
		{"drop table with index", []string{`DROP TABLE OutboxEvents`}, codes.FailedPrecondition, "Cannot drop table OutboxEvents with indices: OutboxPending."},
		{"drop table with children", []string{`DROP TABLE Orders`}, codes.FailedPrecondition, "Cannot drop table Orders with interleaved tables: OrderItems."},
		{"drop referenced table", []string{`ALTER TABLE OrderItems ADD CONSTRAINT ItemSku FOREIGN KEY (Sku) REFERENCES Inventory (Sku)`, `DROP TABLE Inventory`},
			codes.FailedPrecondition, "Cannot drop table `Inventory`. It is referenced by one or more foreign keys: ItemSku."},
		{"drop key column", []string{`ALTER TABLE Orders DROP COLUMN OrderId`}, codes.InvalidArgument, "Cannot drop key column OrderId from table Orders."},
		{"drop indexed column", []string{`ALTER TABLE OutboxEvents DROP COLUMN PendingShard`}, codes.FailedPrecondition,
			"Cannot drop column PendingShard from table OutboxEvents because it is used by index OutboxPending."},
		{"drop checked column", []string{`ALTER TABLE Inventory DROP COLUMN OnHand`}, codes.InvalidArgument,
			"Cannot drop column `OnHand` from table `Inventory` because it is referenced by check constraint `StockNonNegative`."},
		{"drop foreign key column", []string{`ALTER TABLE OrderItems ADD CONSTRAINT ItemSku FOREIGN KEY (Sku) REFERENCES Inventory (Sku)`, `ALTER TABLE OrderItems DROP COLUMN Sku`},
			codes.FailedPrecondition, "Cannot drop column `Sku` from table `OrderItems`. It is used by one or more foreign keys: ItemSku."},
		{"drop generating column", []string{`ALTER TABLE Orders ADD COLUMN Twice INT64 AS (TotalCents * 2) STORED`, `ALTER TABLE Orders DROP COLUMN TotalCents`},
			codes.FailedPrecondition, "Cannot drop column `TotalCents` from table `Orders` because it is referenced by generated column `Twice`."},
		{"drop policy column", []string{`ALTER TABLE OutboxEvents DROP COLUMN PublishedAt`}, codes.InvalidArgument,
			"ROW DELETION POLICY will break if drop/alter column named PublishedAt in table OutboxEvents."},
		{"drop unknown column", []string{`ALTER TABLE Orders DROP COLUMN Nope`}, codes.NotFound, "Column not found in table Orders: Nope"},
		{"alter unknown table", []string{`ALTER TABLE Nope ADD COLUMN A INT64`}, codes.NotFound, "Table not found: Nope"},
		{"add duplicate column", []string{`ALTER TABLE Orders ADD COLUMN status INT64`}, codes.FailedPrecondition, "Duplicate column name Orders.status."},
		{"add not null column", []string{`ALTER TABLE Orders ADD COLUMN N INT64 NOT NULL`}, codes.Unimplemented, "Cannot add NOT NULL column Orders.N to existing table Orders."},
		{"bad type change", []string{`ALTER TABLE Orders ALTER COLUMN TotalCents STRING(MAX)`}, codes.InvalidArgument,
			"Cannot change type of column `TotalCents` from `INT64` to `STRING(MAX)`"},
		{"key column change", []string{`ALTER TABLE Inventory ALTER COLUMN Sku BYTES(32) NOT NULL`}, codes.InvalidArgument, "Cannot change key column Sku."},
		{"key column of a parent", []string{`ALTER TABLE Orders ALTER COLUMN OrderId STRING(40) NOT NULL`}, codes.InvalidArgument,
			"Requested change to key column OrderId could not be made."},
		{"parent key column of a child", []string{`ALTER TABLE OrderItems ALTER COLUMN OrderId STRING(40) NOT NULL`}, codes.InvalidArgument,
			"Cannot alter parent key column OrderId."},
		{"generated to regular", []string{`ALTER TABLE Orders ADD COLUMN Twice INT64 AS (TotalCents * 2) STORED`, `ALTER TABLE Orders ALTER COLUMN Twice INT64`},
			codes.InvalidArgument, "Cannot convert generated column `Orders.Twice` to a regular column."},
		{"regular to generated", []string{`ALTER TABLE Orders ALTER COLUMN TotalCents INT64 AS (1) STORED`},
			codes.InvalidArgument, "Cannot convert column `Orders.TotalCents` to a generated column."},
		{"type change under a check", []string{`ALTER TABLE Orders ADD CONSTRAINT C CHECK (Status != '')`, `ALTER TABLE Orders ALTER COLUMN Status BYTES(16) NOT NULL`},
			codes.InvalidArgument, "Cannot change the data type of column `Status`, which is used by check constraint `C`."},
		{"nullability change under a foreign key", []string{`ALTER TABLE OrderItems ADD CONSTRAINT ItemSku FOREIGN KEY (Sku) REFERENCES Inventory (Sku)`,
			`ALTER TABLE OrderItems ALTER COLUMN Sku STRING(32)`},
			codes.FailedPrecondition, "Cannot change the nullability for column `Sku` of table `OrderItems`. It is used by one or more foreign keys: ItemSku."},
		{"commit timestamp on non-timestamp", []string{`CREATE TABLE T (A INT64 OPTIONS (allow_commit_timestamp = true)) PRIMARY KEY (A)`},
			codes.FailedPrecondition, "Column A has invalid allow_commit_timestamp option.  Option only allowed on TIMESTAMP columns."},
		{"unknown column option", []string{`ALTER TABLE Orders ALTER COLUMN Status SET OPTIONS (foo = true)`}, codes.InvalidArgument, "Option: foo is unknown."},
		{"row deletion policy on non-timestamp", []string{`CREATE TABLE T (A INT64) PRIMARY KEY (A), ROW DELETION POLICY (OLDER_THAN(A, INTERVAL 1 DAY))`},
			codes.InvalidArgument, "Cannot create ROW DELETION POLICY because column A in table T is not of type TIMESTAMP."},
		{"row deletion policy on unknown column", []string{`ALTER TABLE Orders ADD ROW DELETION POLICY (OLDER_THAN(Nope, INTERVAL 1 DAY))`},
			codes.InvalidArgument, "Cannot create ROW DELETION POLICY because there is no column named Nope in table Orders."},
		{"second row deletion policy", []string{`ALTER TABLE OutboxEvents ADD ROW DELETION POLICY (OLDER_THAN(CreatedAt, INTERVAL 1 DAY))`},
			codes.InvalidArgument, "Cannot create ROW DELETION POLICY because there is already one on column named PublishedAt in table OutboxEvents."},
		{"missing row deletion policy", []string{`ALTER TABLE Orders DROP ROW DELETION POLICY`}, codes.InvalidArgument, "ROW DELETION POLICY does not exist on table Orders."},
		{"row deletion policy over a NO ACTION child", []string{`CREATE TABLE C (OrderId STRING(36) NOT NULL, X INT64) PRIMARY KEY (OrderId, X), INTERLEAVE IN PARENT Orders ON DELETE NO ACTION`,
			`ALTER TABLE Orders ADD COLUMN Seen TIMESTAMP`, `ALTER TABLE Orders ADD ROW DELETION POLICY (OLDER_THAN(Seen, INTERVAL 1 DAY))`},
			codes.InvalidArgument, "Cannot create row deletion policy on Orders because there is a descendant Table C with ON DELETE NO ACTION."},
		{"NO ACTION child under a row deletion policy", []string{`ALTER TABLE Orders ADD COLUMN Seen TIMESTAMP`,
			`ALTER TABLE Orders ADD ROW DELETION POLICY (OLDER_THAN(Seen, INTERVAL 1 DAY))`, `ALTER TABLE OrderItems SET ON DELETE NO ACTION`},
			codes.InvalidArgument, "Cannot create or alter table OrderItems with ON DELETE NO ACTION because there is a row deletion policy on ancestor table Orders."},
		{"row deletion policy on a referenced table", []string{`ALTER TABLE OrderItems ADD CONSTRAINT ItemSku FOREIGN KEY (Sku) REFERENCES Inventory (Sku)`,
			`ALTER TABLE Inventory ADD COLUMN Seen TIMESTAMP`, `ALTER TABLE Inventory ADD ROW DELETION POLICY (OLDER_THAN(Seen, INTERVAL 1 DAY))`},
			codes.InvalidArgument, "Cannot add a row deletion policy to table `Inventory`. It is referenced by one or more foreign keys: `ItemSku`."},
		{"set on delete of a top-level table", []string{`ALTER TABLE Orders SET ON DELETE CASCADE`}, codes.InvalidArgument,
			"Cannot SET ON DELETE on table Orders that does not have an INTERLEAVE clause."},
		{"default reading a column", []string{`ALTER TABLE Orders ADD COLUMN Copy INT64 DEFAULT (TotalCents)`}, codes.InvalidArgument,
			"Default value of column Orders.Copy cannot reference column TotalCents."},
		{"check without columns", []string{`CREATE TABLE T (A INT64, CONSTRAINT C CHECK (1 > 0)) PRIMARY KEY (A)`}, codes.InvalidArgument,
			"Check constraint `T`.`C` does not use any non generated column. Expression: '1 > 0'."},
		{"check not bool", []string{`CREATE TABLE T (A INT64, CHECK (A + 1)) PRIMARY KEY (A)`}, codes.InvalidArgument, "Expected type BOOL"},
		{"check unknown column", []string{`CREATE TABLE T (A INT64, CONSTRAINT C CHECK (B > 0)) PRIMARY KEY (A)`}, codes.InvalidArgument,
			"Error parsing expression 'B > 0' from check constraint 'C' in table 'T': Unrecognized name: B"},
		{"generated unknown column", []string{`CREATE TABLE T (A INT64, G INT64 AS (B + 1) STORED) PRIMARY KEY (A)`}, codes.InvalidArgument,
			"Error parsing the definition of generated column `T`.`G`: Unrecognized name: B"},
		{"check on a commit timestamp", []string{`ALTER TABLE OutboxEvents ADD CONSTRAINT C CHECK (CreatedAt > PublishedAt)`}, codes.InvalidArgument,
			"Column `CreatedAt` has option commit_timestamp, which is not supported in check constraint."},
		{"stored value of a commit timestamp", []string{`ALTER TABLE OutboxEvents ADD COLUMN Copy TIMESTAMP AS (CreatedAt) STORED`}, codes.FailedPrecondition,
			"Cannot use commit timestamp column `CreatedAt` as a dependency of a materialized generated column."},
		{"foreign key on a commit timestamp", []string{`CREATE TABLE T (A INT64, Ts TIMESTAMP OPTIONS (allow_commit_timestamp = true),
			CONSTRAINT F FOREIGN KEY (Ts) REFERENCES OutboxEvents (CreatedAt)) PRIMARY KEY (A)`}, codes.FailedPrecondition,
			"Commit timestamp column is not supported for column `Ts` of table `T` in foreign key `F`."},
		{"commit timestamp under a check", []string{`ALTER TABLE OutboxEvents ADD COLUMN Done TIMESTAMP`, `ALTER TABLE OutboxEvents ADD CONSTRAINT C CHECK (Done IS NULL OR Attempts > 0)`,
			`ALTER TABLE OutboxEvents ALTER COLUMN Done SET OPTIONS (allow_commit_timestamp = true)`}, codes.InvalidArgument,
			"Column `Done` has option commit_timestamp, which is not supported in check constraint."},
		{"duplicate constraint name", []string{`ALTER TABLE Orders ADD CONSTRAINT StockNonNegative CHECK (TotalCents > 0)`},
			codes.FailedPrecondition, "Duplicate name in schema: StockNonNegative."},
		{"foreign key to unknown table", []string{`CREATE TABLE T (A INT64, FOREIGN KEY (A) REFERENCES Nope (A)) PRIMARY KEY (A)`},
			codes.NotFound, "Table not found: Nope"},
		{"foreign key type mismatch", []string{`CREATE TABLE T (A INT64, FOREIGN KEY (A) REFERENCES Orders (OrderId)) PRIMARY KEY (A)`}, codes.FailedPrecondition,
			"The column types are different for column `A` of table `T` and column `OrderId` of table `Orders` in foreign key `FK_T_Orders`."},
		{"foreign key column count", []string{`CREATE TABLE T (A INT64, FOREIGN KEY (A) REFERENCES Orders (OrderId, Status)) PRIMARY KEY (A)`}, codes.FailedPrecondition,
			"The number of columns are different for table `T` and table `Orders` in foreign key `FK_T_Orders`."},
		{"foreign key unknown column", []string{`CREATE TABLE T (A INT64, CONSTRAINT F FOREIGN KEY (B) REFERENCES Orders (OrderId)) PRIMARY KEY (A)`}, codes.FailedPrecondition,
			"Column `B` not found for table `T` in foreign key `F`."},
		{"drop unknown constraint", []string{`ALTER TABLE Orders DROP CONSTRAINT Nope`}, codes.NotFound, "Nope is not a constraint in Orders"},
		{"view on a missing table", []string{`CREATE VIEW V SQL SECURITY INVOKER AS SELECT A FROM Nope`}, codes.InvalidArgument,
			"Error analyzing the definition of view `V`: Table not found: Nope"},
		{"unsupported statement", []string{`CREATE SEARCH INDEX S ON Orders (Status)`}, codes.Unimplemented, ""},
		{"later statement fails the batch", []string{`CREATE TABLE T1 (A INT64) PRIMARY KEY (A)`, `DROP TABLE Nope`}, codes.NotFound, ""},
	}
	base, _, err := Apply(Empty(), projectDDL, fakeCompiler{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, sqls, err := Apply(base, tt.ddl, fakeCompiler{})
			if status.Code(err) != tt.wantCode || !strings.Contains(status.Convert(err).Message(), tt.wantMsg) {
				t.Fatalf("got %v, want %v containing %q", err, tt.wantCode, tt.wantMsg)
			}
			if got != nil || sqls != nil {
				t.Errorf("failed Apply returned a schema or statements")
			}
		})
	}
	if _, ok := base.Table("T1"); ok {
		t.Errorf("Apply modified its input schema")
	}
}

func TestApplyKeepsInput(t *testing.T) {
	base, _, err := Apply(Empty(), append(append([]string{}, projectDDL...),
		`CREATE SEQUENCE Seq OPTIONS (sequence_kind = 'bit_reversed_positive')`,
		`CREATE VIEW V SQL SECURITY INVOKER AS SELECT 1 AS One`), fakeCompiler{})
	if err != nil {
		t.Fatal(err)
	}
	before := base.Statements
	if _, _, err := Apply(base, []string{
		`ALTER TABLE Orders ADD COLUMN Extra INT64`,
		`ALTER TABLE Orders ALTER COLUMN Status STRING(20) NOT NULL`,
		`CREATE INDEX OrdersByStatus ON Orders (Status)`,
		`DROP INDEX OutboxPending`,
		`ALTER SEQUENCE Seq SET OPTIONS (start_with_counter = 5)`,
		`CREATE OR REPLACE VIEW V SQL SECURITY INVOKER AS SELECT 2 AS Two`,
		`ALTER INDEX OrdersByStatus ADD STORED COLUMN TotalCents`,
		`ALTER TABLE Inventory DROP CONSTRAINT StockNonNegative`,
	}, fakeCompiler{}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, base.Statements); diff != "" {
		t.Errorf("Statements of the input changed (-want +got):\n%s", diff)
	}
	orders, _ := base.Table("Orders")
	if _, ok := orders.Column("Extra"); ok || len(orders.Columns) != 4 {
		t.Errorf("input table changed: %d columns", len(orders.Columns))
	}
	if c, _ := orders.Column("Status"); c.Type.Length != 16 {
		t.Errorf("input column changed: length %d", c.Type.Length)
	}
	if _, ok := base.Index("OutboxPending"); !ok {
		t.Errorf("input index dropped")
	}
	if len(base.Sequences[0].Options) != 1 {
		t.Errorf("input sequence changed: %+v", base.Sequences[0])
	}
	if v, _ := base.View("V"); v.SQL != "SELECT 1 AS One" {
		t.Errorf("input view replaced: %+v", v)
	}
	if inv, _ := base.Table("Inventory"); len(inv.Checks) != 1 {
		t.Errorf("input check dropped")
	}
}

func TestUniqueIndexViolated(t *testing.T) {
	d := newTestDB(t)
	d.mustDDL(`CREATE TABLE Users (UserId INT64 NOT NULL, Email STRING(MAX), Nick STRING(MAX) NOT NULL, Rank INT64 NOT NULL, Team INT64) PRIMARY KEY (UserId)`,
		`CREATE UNIQUE INDEX UsersByEmail ON Users (Email)`,
		`CREATE UNIQUE INDEX UsersByNick ON Users (Nick, Rank DESC)`,
		`CREATE UNIQUE NULL_FILTERED INDEX UsersByTeam ON Users (Team)`)
	d.mustExec(`INSERT INTO "Users" VALUES (1, 'a', 'n', 1, 1)`)
	users, _ := d.schema.Table("Users")
	tests := []struct {
		name, sql, wantIndex string
	}{
		{"expression index", `INSERT INTO "Users" VALUES (2, 'a', 'm', 2, 2)`, "UsersByEmail"},
		{"column index", `INSERT INTO "Users" VALUES (2, 'b', 'n', 1, 2)`, "UsersByNick"},
		{"null-filtered index", `INSERT INTO "Users" VALUES (2, 'b', 'm', 2, 1)`, "UsersByTeam"},
		{"primary key", `INSERT INTO "Users" VALUES (1, 'c', 'o', 3, 3)`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := d.exec(tt.sql)
			if err == nil {
				t.Fatal("no error")
			}
			ix, ok := d.schema.UniqueIndexViolated(users, err.Error())
			got := ""
			if ok {
				got = ix.Name
			}
			if got != tt.wantIndex {
				t.Errorf("UniqueIndexViolated(%q) = %q, want %q", err, got, tt.wantIndex)
			}
		})
	}
}

func TestForeignKeyCascadeAndViews(t *testing.T) {
	d := newTestDB(t)
	d.mustDDL(`CREATE TABLE Customers (CustomerId INT64 NOT NULL, Email STRING(MAX)) PRIMARY KEY (CustomerId)`,
		`CREATE TABLE Carts (CartId INT64 NOT NULL, CustomerId INT64,
			CONSTRAINT CartCustomer FOREIGN KEY (CustomerId) REFERENCES Customers (CustomerId) ON DELETE CASCADE) PRIMARY KEY (CartId)`,
		`CREATE VIEW CartView SQL SECURITY INVOKER AS SELECT CartId FROM Carts`)
	d.mustExec(`INSERT INTO "Customers" VALUES (1, 'a'), (2, 'b')`)
	d.mustExec(`INSERT INTO "Carts" VALUES (10, 1), (11, 2), (12, NULL)`)
	d.mustExec(`DELETE FROM "Customers" WHERE "CustomerId" = 1`)
	if diff := cmp.Diff([][]string{{"11"}, {"12"}}, d.query(`SELECT "CartId" FROM "Carts" ORDER BY 1`)); diff != "" {
		t.Errorf("ON DELETE CASCADE (-want +got):\n%s", diff)
	}
	if err := d.ddl(`DROP TABLE Customers`); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("DROP of a referenced table: %v", err)
	}
	if err := d.ddl(`DROP TABLE Carts`); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("DROP of a table a view reads: %v", err)
	}
	d.mustDDL(`CREATE OR REPLACE VIEW CartView SQL SECURITY INVOKER AS SELECT 1 AS One`)
	v, _ := d.schema.View("cartview")
	if v.SQL != "SELECT 1 AS One" || v.Name != "CartView" {
		t.Errorf("replaced view = %+v", v)
	}
	if err := d.ddl(`CREATE VIEW Carts SQL SECURITY INVOKER AS SELECT 1 AS One`); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("view named like a table: %v", err)
	}
	d.mustDDL(`CREATE VIEW FromCTE SQL SECURITY INVOKER AS WITH X AS (SELECT 1 AS A) SELECT A FROM X`,
		`CREATE VIEW OnView SQL SECURITY INVOKER AS SELECT One FROM CartView`)
	if err := d.ddl(`DROP VIEW CartView`); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("DROP of a view another view reads: %v", err)
	}
	d.mustDDL(`DROP VIEW OnView`, `DROP TABLE Carts`, `DROP TABLE Customers`, `DROP VIEW CartView`)
}

func TestDefaultsAreCoerced(t *testing.T) {
	d := newTestDB(t)
	d.mustDDL(`CREATE TABLE T (Id INT64 NOT NULL,
		Stamp TIMESTAMP DEFAULT ('2020-01-02T03:04:05Z'),
		Day DATE DEFAULT ('2020-1-2'),
		Ratio FLOAT64 DEFAULT (1),
		Doc JSON DEFAULT ('{"b": 1, "a": 2}')) PRIMARY KEY (Id)`)
	d.mustExec(`INSERT INTO "T" ("Id") VALUES (1)`)
	want := [][]string{{"2020-01-02T03:04:05.000000000Z", "2020-01-02", "real", `{"a":2,"b":1}`}}
	if diff := cmp.Diff(want, d.query(`SELECT "Stamp", "Day", typeof("Ratio"), "Doc" FROM "T"`)); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	for _, ddl := range []string{
		`ALTER TABLE T ADD COLUMN Bad INT64 DEFAULT ('x')`,
		`ALTER TABLE T ADD COLUMN Bad DATE DEFAULT ('not a date')`,
		`ALTER TABLE T ADD COLUMN Bad INT64 AS (Stamp) STORED`,
	} {
		if err := d.ddl(ddl); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: got %v, want INVALID_ARGUMENT", ddl, err)
		}
	}
}

func TestSelfReferencingForeignKey(t *testing.T) {
	d := newTestDB(t)
	d.mustDDL(`CREATE TABLE Emp (Id INT64 NOT NULL, Code STRING(8), Boss STRING(8),
		CONSTRAINT EmpBoss FOREIGN KEY (Boss) REFERENCES Emp (Code)) PRIMARY KEY (Id)`)
	d.mustExec(`INSERT INTO "Emp" VALUES (1, 'a', NULL)`)
	d.mustExec(`INSERT INTO "Emp" VALUES (2, 'b', 'a')`)
	if err := d.exec(`INSERT INTO "Emp" VALUES (3, 'c', 'zz')`); !errContains(err, "FOREIGN KEY constraint failed") {
		t.Errorf("dangling self reference: %v", err)
	}
	// A rebuild of the table keeps the foreign key working.
	d.mustDDL(`ALTER TABLE Emp ADD COLUMN Name STRING(MAX)`)
	if err := d.exec(`INSERT INTO "Emp" ("Id", "Code", "Boss") VALUES (3, 'c', 'zz')`); !errContains(err, "FOREIGN KEY constraint failed") {
		t.Errorf("dangling self reference after ALTER: %v", err)
	}
	again, _, err := Apply(Empty(), d.schema.Statements, fakeCompiler{})
	if err != nil {
		t.Fatalf("re-applying %q: %v", d.schema.Statements, err)
	}
	if diff := cmp.Diff(d.schema.Statements, again.Statements); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}
