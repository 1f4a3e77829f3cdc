package catalog

import (
	"testing"

	"github.com/cloudspannerecosystem/memefish/ast"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestStatements(t *testing.T) {
	s, _, err := Apply(Empty(), projectDDL, fakeCompiler{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"CREATE TABLE OutboxEvents (\n" +
			"  EventId STRING(36) NOT NULL,\n" +
			"  AggregateId STRING(64) NOT NULL,\n" +
			"  Payload JSON NOT NULL,\n" +
			"  CreatedAt TIMESTAMP NOT NULL OPTIONS (\n    allow_commit_timestamp = true\n  ),\n" +
			"  PendingShard INT64,\n" +
			"  PublishedAt TIMESTAMP OPTIONS (\n    allow_commit_timestamp = true\n  ),\n" +
			"  Attempts INT64 NOT NULL DEFAULT (0),\n" +
			") PRIMARY KEY(EventId), ROW DELETION POLICY (OLDER_THAN(PublishedAt, INTERVAL 7 DAY))",
		"CREATE NULL_FILTERED INDEX OutboxPending ON OutboxEvents(PendingShard, CreatedAt)",
		"CREATE TABLE Orders (\n" +
			"  OrderId STRING(36) NOT NULL,\n" +
			"  CustomerId STRING(36) NOT NULL,\n" +
			"  Status STRING(16) NOT NULL,\n" +
			"  TotalCents INT64 NOT NULL,\n" +
			") PRIMARY KEY(OrderId)",
		"CREATE TABLE OrderItems (\n" +
			"  OrderId STRING(36) NOT NULL,\n" +
			"  LineNo INT64 NOT NULL,\n" +
			"  Sku STRING(32) NOT NULL,\n" +
			"  Quantity INT64 NOT NULL,\n" +
			") PRIMARY KEY(OrderId, LineNo),\n" +
			"  INTERLEAVE IN PARENT Orders ON DELETE CASCADE",
		"CREATE TABLE Inventory (\n" +
			"  Sku STRING(32) NOT NULL,\n" +
			"  OnHand INT64 NOT NULL,\n" +
			"  Reserved INT64 NOT NULL,\n" +
			"  CONSTRAINT StockNonNegative CHECK(OnHand >= 0 AND Reserved >= 0 AND Reserved <= OnHand),\n" +
			") PRIMARY KEY(Sku)",
	}
	if diff := cmp.Diff(want, s.Statements); diff != "" {
		t.Errorf("Statements (-want +got):\n%s", diff)
	}
}

// TestStatementsRoundTrip checks that applying Statements to an empty schema rebuilds the
// same schema, after ALTERs too.
func TestStatementsRoundTrip(t *testing.T) {
	ddl := append(append([]string{}, projectDDL...),
		`CREATE TABLE Customers (CustomerId STRING(36) NOT NULL, Email STRING(MAX), `+"`Order`"+` INT64,
			FullName STRING(MAX) AS (Email || 'x') STORED, Score INT64 AS (`+"`Order`"+` * 2),
			CHECK (`+"`Order`"+` > 0)) PRIMARY KEY (CustomerId DESC)`,
		`ALTER TABLE Orders ADD CONSTRAINT OrderCustomer FOREIGN KEY (CustomerId) REFERENCES Customers (CustomerId) ON DELETE CASCADE`,
		`ALTER TABLE Orders ADD COLUMN Note STRING(MAX) NOT NULL DEFAULT ('none')`,
		`ALTER TABLE Orders ALTER COLUMN Status STRING(32) NOT NULL`,
		`ALTER TABLE Orders ADD FOREIGN KEY (Note) REFERENCES Customers (Email)`,
		`CREATE UNIQUE INDEX CustomersByEmail ON Customers (Email DESC) STORING (FullName)`,
		`CREATE INDEX ItemsBySku ON OrderItems (OrderId, Sku), INTERLEAVE IN Orders`,
		`CREATE VIEW ActiveOrders SQL SECURITY INVOKER AS SELECT OrderId FROM Orders WHERE Status = 'NEW'`,
		`CREATE TABLE Singleton (V INT64) PRIMARY KEY ()`,
		`CREATE SEQUENCE Seq OPTIONS (sequence_kind = 'bit_reversed_positive')`,
		`CREATE SEQUENCE Seq2 OPTIONS (sequence_kind = 'bit_reversed_positive', start_with_counter = 10)`,
		`ALTER SEQUENCE Seq2 SET OPTIONS (skip_range_min = 1, skip_range_max = 9)`,
		`ALTER SEQUENCE Seq2 NO SKIP RANGE`,
		`CREATE CHANGE STREAM Everything FOR ALL`,
		`CREATE ROLE Reader`,
		`GRANT SELECT ON TABLE Orders TO ROLE Reader`,
		`ALTER DATABASE db SET OPTIONS (version_retention_period = '2d')`,
		`ALTER TABLE OutboxEvents DROP ROW DELETION POLICY`,
		`ALTER TABLE Inventory DROP CONSTRAINT StockNonNegative`,
		`ALTER TABLE Inventory ADD CONSTRAINT Positive CHECK (OnHand >= 0)`,
	)
	s, _, err := Apply(Empty(), ddl, fakeCompiler{})
	if err != nil {
		t.Fatal(err)
	}
	again, _, err := Apply(Empty(), s.Statements, fakeCompiler{})
	if err != nil {
		t.Fatalf("re-applying Statements: %v\n%s", err, s.Statements)
	}
	if diff := cmp.Diff(s.Statements, again.Statements); diff != "" {
		t.Errorf("Statements after a round trip (-want +got):\n%s", diff)
	}
	opts := cmp.Options{
		cmp.AllowUnexported(Table{}),
		cmpopts.IgnoreUnexported(Schema{}),
		// Expressions are compared through their text.
		cmpopts.IgnoreInterfaces(struct{ ast.Expr }{}),
		cmpopts.IgnoreInterfaces(struct{ ast.QueryExpr }{}),
	}
	if diff := cmp.Diff(s.Tables, again.Tables, opts); diff != "" {
		t.Errorf("Tables after a round trip (-want +got):\n%s", diff)
	}
	// Statements list indexes by table, so their creation order may change.
	byName := cmpopts.SortSlices(func(a, b *Index) bool { return a.Name < b.Name })
	if diff := cmp.Diff(s.Indexes, again.Indexes, opts, byName); diff != "" {
		t.Errorf("Indexes after a round trip (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(s.Sequences, again.Sequences); diff != "" {
		t.Errorf("Sequences after a round trip (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(s.Views, again.Views, opts); diff != "" {
		t.Errorf("Views after a round trip (-want +got):\n%s", diff)
	}
}

func TestUnmodelledStatements(t *testing.T) {
	s, _, err := Apply(Empty(), []string{
		`ALTER DATABASE db SET OPTIONS (version_retention_period = '2d', optimizer_version = 5)`,
		`ALTER DATABASE db SET OPTIONS (version_retention_period = '3d')`,
		`ALTER DATABASE db SET OPTIONS (optimizer_version = NULL)`,
		`CREATE TABLE T (A INT64) PRIMARY KEY (A)`,
		`CREATE CHANGE STREAM Everything FOR ALL`,
		`CREATE ROLE Reader`,
		`GRANT SELECT ON TABLE T TO ROLE Reader`,
		`CREATE VIEW V SQL SECURITY INVOKER AS SELECT A FROM T`,
		`ANALYZE`,
		`CREATE CHANGE STREAM Partial FOR T OPTIONS (retention_period = '1d')`,
		`ALTER CHANGE STREAM Partial SET OPTIONS (value_capture_type = 'NEW_ROW')`,
		`ALTER CHANGE STREAM Partial DROP FOR ALL`,
	}, fakeCompiler{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`ALTER DATABASE db SET OPTIONS (version_retention_period = '3d')`,
		"CREATE TABLE T (\n  A INT64,\n) PRIMARY KEY(A)",
		`CREATE CHANGE STREAM Everything FOR ALL`,
		`CREATE CHANGE STREAM Partial OPTIONS ( retention_period = '1d', value_capture_type = 'NEW_ROW' )`,
		`CREATE VIEW V SQL SECURITY INVOKER AS SELECT A FROM T`,
		`CREATE ROLE Reader`,
		`GRANT SELECT ON TABLE T TO ROLE Reader`,
	}
	if diff := cmp.Diff(want, s.Statements); diff != "" {
		t.Errorf("Statements (-want +got):\n%s", diff)
	}
	again, _, err := Apply(Empty(), s.Statements, fakeCompiler{})
	if err != nil {
		t.Fatalf("re-applying Statements: %v", err)
	}
	if diff := cmp.Diff(s.Statements, again.Statements); diff != "" {
		t.Errorf("Statements after a round trip (-want +got):\n%s", diff)
	}
	if _, _, err := Apply(s, []string{`CREATE TABLE Everything (A INT64) PRIMARY KEY (A)`}, fakeCompiler{}); err == nil {
		t.Errorf("a table named like a change stream was created")
	}
	s, _, err = Apply(s, []string{`DROP CHANGE STREAM Everything`, `DROP CHANGE STREAM Partial`, `DROP ROLE Reader`}, fakeCompiler{})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Statements) != 4 {
		t.Errorf("Statements after DROPs = %q", s.Statements)
	}
}
