package catalog

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestInformationSchema(t *testing.T) {
	d := newTestDB(t)
	if got := d.query(`SELECT COUNT(*) FROM "information_schema.tables" WHERE TABLE_SCHEMA = ''`); got[0][0] != "0" {
		t.Errorf("empty database lists %s user tables", got[0][0])
	}
	d.mustDDL(projectDDL...)
	d.mustDDL(
		`CREATE TABLE Refs (Id INT64 NOT NULL, Sku STRING(32), Total INT64 AS (Id + 1) STORED,
			CONSTRAINT RefSku FOREIGN KEY (Sku) REFERENCES Inventory (Sku)) PRIMARY KEY (Id DESC)`,
		`CREATE UNIQUE INDEX ItemsBySku ON OrderItems (Sku DESC) STORING (Quantity)`,
		`CREATE VIEW V SQL SECURITY INVOKER AS SELECT Sku FROM Inventory`,
		`CREATE SEQUENCE Seq OPTIONS (sequence_kind = 'bit_reversed_positive', start_with_counter = 3)`,
		`ALTER SEQUENCE Seq SKIP RANGE 1, 1000`,
		`ALTER SEQUENCE Seq RESTART COUNTER WITH 7`,
	)

	tests := []struct {
		name, query string
		want        [][]string
	}{
		{"schemata", `SELECT CATALOG_NAME, SCHEMA_NAME FROM "information_schema.schemata" ORDER BY 2`,
			[][]string{{"", ""}, {"", "INFORMATION_SCHEMA"}}},
		{"tables", `SELECT TABLE_NAME, TABLE_TYPE, PARENT_TABLE_NAME, ON_DELETE_ACTION, SPANNER_STATE, INTERLEAVE_TYPE, ROW_DELETION_POLICY_EXPRESSION
			FROM "information_schema.tables" WHERE TABLE_SCHEMA = '' ORDER BY 1`,
			[][]string{
				{"Inventory", "BASE TABLE", "NULL", "NULL", "COMMITTED", "NULL", "NULL"},
				{"OrderItems", "BASE TABLE", "Orders", "CASCADE", "COMMITTED", "IN PARENT", "NULL"},
				{"Orders", "BASE TABLE", "NULL", "NULL", "COMMITTED", "NULL", "NULL"},
				{"OutboxEvents", "BASE TABLE", "NULL", "NULL", "COMMITTED", "NULL", "OLDER_THAN(PublishedAt, INTERVAL 7 DAY)"},
				{"Refs", "BASE TABLE", "NULL", "NULL", "COMMITTED", "NULL", "NULL"},
				{"V", "VIEW", "NULL", "NULL", "NULL", "NULL", "NULL"},
			}},
		{"information schema lists itself", `SELECT TABLE_TYPE FROM "information_schema.tables" WHERE TABLE_SCHEMA = 'INFORMATION_SCHEMA' AND TABLE_NAME = 'COLUMNS'`,
			[][]string{{"VIEW"}}},
		{"columns", `SELECT COLUMN_NAME, ORDINAL_POSITION, COLUMN_DEFAULT, IS_NULLABLE, SPANNER_TYPE, IS_GENERATED, GENERATION_EXPRESSION, IS_STORED, SPANNER_STATE
			FROM "information_schema.columns" WHERE TABLE_NAME IN ('OutboxEvents', 'Refs') ORDER BY TABLE_NAME, ORDINAL_POSITION`,
			[][]string{
				{"EventId", "1", "NULL", "NO", "STRING(36)", "NEVER", "NULL", "NULL", "COMMITTED"},
				{"AggregateId", "2", "NULL", "NO", "STRING(64)", "NEVER", "NULL", "NULL", "COMMITTED"},
				{"Payload", "3", "NULL", "NO", "JSON", "NEVER", "NULL", "NULL", "COMMITTED"},
				{"CreatedAt", "4", "NULL", "NO", "TIMESTAMP", "NEVER", "NULL", "NULL", "COMMITTED"},
				{"PendingShard", "5", "NULL", "YES", "INT64", "NEVER", "NULL", "NULL", "COMMITTED"},
				{"PublishedAt", "6", "NULL", "YES", "TIMESTAMP", "NEVER", "NULL", "NULL", "COMMITTED"},
				{"Attempts", "7", "0", "NO", "INT64", "NEVER", "NULL", "NULL", "COMMITTED"},
				{"Id", "1", "NULL", "NO", "INT64", "NEVER", "NULL", "NULL", "COMMITTED"},
				{"Sku", "2", "NULL", "YES", "STRING(32)", "NEVER", "NULL", "NULL", "COMMITTED"},
				{"Total", "3", "NULL", "YES", "INT64", "ALWAYS", "Id + 1", "YES", "COMMITTED"},
			}},
		{"indexes", `SELECT TABLE_NAME, INDEX_NAME, INDEX_TYPE, PARENT_TABLE_NAME, IS_UNIQUE, IS_NULL_FILTERED, INDEX_STATE, SPANNER_IS_MANAGED
			FROM "information_schema.indexes" WHERE TABLE_NAME IN ('OrderItems', 'OutboxEvents') ORDER BY 1, 2`,
			[][]string{
				{"OrderItems", "ItemsBySku", "INDEX", "", "1", "0", "READ_WRITE", "0"},
				{"OrderItems", "PRIMARY_KEY", "PRIMARY_KEY", "", "1", "0", "NULL", "0"},
				{"OutboxEvents", "OutboxPending", "INDEX", "", "0", "1", "READ_WRITE", "0"},
				{"OutboxEvents", "PRIMARY_KEY", "PRIMARY_KEY", "", "1", "0", "NULL", "0"},
			}},
		{"index columns", `SELECT INDEX_NAME, INDEX_TYPE, COLUMN_NAME, ORDINAL_POSITION, COLUMN_ORDERING, IS_NULLABLE, SPANNER_TYPE
			FROM "information_schema.index_columns" WHERE TABLE_NAME IN ('OrderItems', 'Refs') ORDER BY TABLE_NAME, INDEX_NAME, COLUMN_NAME`,
			[][]string{
				{"ItemsBySku", "INDEX", "Quantity", "NULL", "NULL", "NO", "INT64"},
				{"ItemsBySku", "INDEX", "Sku", "1", "DESC", "NO", "STRING(32)"},
				{"PRIMARY_KEY", "PRIMARY_KEY", "LineNo", "2", "ASC", "NO", "INT64"},
				{"PRIMARY_KEY", "PRIMARY_KEY", "OrderId", "1", "ASC", "NO", "STRING(36)"},
				{"PRIMARY_KEY", "PRIMARY_KEY", "Id", "1", "DESC", "NO", "INT64"},
			}},
		{"column options", `SELECT TABLE_NAME, COLUMN_NAME, OPTION_NAME, OPTION_TYPE, OPTION_VALUE FROM "information_schema.column_options" ORDER BY 2`,
			[][]string{
				{"OutboxEvents", "CreatedAt", "allow_commit_timestamp", "BOOL", "TRUE"},
				{"OutboxEvents", "PublishedAt", "allow_commit_timestamp", "BOOL", "TRUE"},
			}},
		{"table constraints", `SELECT CONSTRAINT_NAME, TABLE_NAME, CONSTRAINT_TYPE FROM "information_schema.table_constraints"
			WHERE TABLE_NAME IN ('Inventory', 'Refs') ORDER BY 2, 1`,
			[][]string{
				{"CK_IS_NOT_NULL_Inventory_OnHand", "Inventory", "CHECK"},
				{"CK_IS_NOT_NULL_Inventory_Reserved", "Inventory", "CHECK"},
				{"CK_IS_NOT_NULL_Inventory_Sku", "Inventory", "CHECK"},
				{"PK_Inventory", "Inventory", "PRIMARY KEY"},
				{"StockNonNegative", "Inventory", "CHECK"},
				{"CK_IS_NOT_NULL_Refs_Id", "Refs", "CHECK"},
				{"PK_Refs", "Refs", "PRIMARY KEY"},
				{"RefSku", "Refs", "FOREIGN KEY"},
			}},
		{"check constraints", `SELECT CONSTRAINT_NAME, CHECK_CLAUSE, SPANNER_STATE FROM "information_schema.check_constraints" WHERE CONSTRAINT_NAME LIKE 'Stock%'`,
			[][]string{{"StockNonNegative", "OnHand >= 0 AND Reserved >= 0 AND Reserved <= OnHand", "COMMITTED"}}},
		{"referential constraints", `SELECT CONSTRAINT_NAME, UNIQUE_CONSTRAINT_NAME, MATCH_OPTION, UPDATE_RULE, DELETE_RULE FROM "information_schema.referential_constraints"`,
			[][]string{{"RefSku", "PK_Inventory", "SIMPLE", "NO ACTION", "NO ACTION"}}},
		{"key column usage", `SELECT CONSTRAINT_NAME, TABLE_NAME, COLUMN_NAME, ORDINAL_POSITION, POSITION_IN_UNIQUE_CONSTRAINT FROM "information_schema.key_column_usage"
			WHERE TABLE_NAME = 'Refs' ORDER BY 1`,
			[][]string{{"PK_Refs", "Refs", "Id", "1", "NULL"}, {"RefSku", "Refs", "Sku", "1", "1"}}},
		{"constraint column usage", `SELECT TABLE_NAME, COLUMN_NAME, CONSTRAINT_NAME FROM "information_schema.constraint_column_usage"
			WHERE CONSTRAINT_NAME IN ('RefSku', 'StockNonNegative') ORDER BY 3, 2`,
			[][]string{{"Inventory", "Sku", "RefSku"}, {"Inventory", "OnHand", "StockNonNegative"}, {"Inventory", "Reserved", "StockNonNegative"}}},
		{"views", `SELECT TABLE_NAME, VIEW_DEFINITION, SECURITY_TYPE FROM "information_schema.views"`,
			[][]string{{"V", "SELECT Sku FROM Inventory", "INVOKER"}}},
		{"constraint table usage", `SELECT TABLE_NAME, CONSTRAINT_NAME FROM "information_schema.constraint_table_usage" WHERE CONSTRAINT_NAME IN ('RefSku', 'PK_Refs')`,
			[][]string{{"Refs", "PK_Refs"}, {"Inventory", "RefSku"}}},
		{"column column usage", `SELECT TABLE_NAME, COLUMN_NAME, DEPENDENT_COLUMN FROM "information_schema.column_column_usage"`,
			[][]string{{"Refs", "Id", "Total"}}},
		{"database options", `SELECT OPTION_NAME, OPTION_VALUE FROM "information_schema.database_options"`,
			[][]string{{"database_dialect", "GOOGLE_STANDARD_SQL"}}},
		{"sequences", `SELECT NAME, DATA_TYPE FROM "information_schema.sequences"`, [][]string{{"Seq", "INT64"}}},
		{"sequence options", `SELECT OPTION_NAME, OPTION_TYPE, OPTION_VALUE FROM "information_schema.sequence_options" ORDER BY 1`,
			[][]string{{"sequence_kind", "STRING", "bit_reversed_positive"}, {"skip_range_max", "INT64", "1000"},
				{"skip_range_min", "INT64", "1"}, {"start_with_counter", "INT64", "7"}}},
		{"information schema columns", `SELECT COLUMN_NAME, IS_NULLABLE, SPANNER_TYPE, SPANNER_STATE FROM "information_schema.columns"
			WHERE TABLE_SCHEMA = 'INFORMATION_SCHEMA' AND TABLE_NAME = 'TABLES' ORDER BY ORDINAL_POSITION LIMIT 6`,
			[][]string{{"TABLE_CATALOG", "NO", "STRING(MAX)", "NULL"}, {"TABLE_SCHEMA", "NO", "STRING(MAX)", "NULL"},
				{"TABLE_NAME", "NO", "STRING(MAX)", "NULL"}, {"PARENT_TABLE_NAME", "YES", "STRING(MAX)", "NULL"},
				{"ON_DELETE_ACTION", "YES", "STRING(MAX)", "NULL"}, {"TABLE_TYPE", "NO", "STRING(32)", "NULL"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, d.query(tt.query)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}

	// Rows follow later DDL.
	d.mustDDL(`DROP VIEW V`, `DROP INDEX ItemsBySku`)
	if diff := cmp.Diff([][]string{{"0"}}, d.query(`SELECT COUNT(*) FROM "information_schema.indexes" WHERE INDEX_NAME = 'ItemsBySku'`)); diff != "" {
		t.Errorf("dropped index still listed (-want +got):\n%s", diff)
	}
}

func TestInfoSchemaModel(t *testing.T) {
	s := Empty()
	tab, ok := s.Table("information_schema.Tables")
	if !ok || !tab.InfoSchema || tab.Name != "INFORMATION_SCHEMA.TABLES" || tab.SQLiteName != "information_schema.tables" {
		t.Fatalf("INFORMATION_SCHEMA.TABLES = %+v, %v", tab, ok)
	}
	if c, ok := tab.Column("table_name"); !ok || c.Type.String() != "STRING" {
		t.Errorf("TABLE_NAME column = %+v, %v", c, ok)
	}
	if _, _, err := Apply(s, []string{`DROP TABLE INFORMATION_SCHEMA.TABLES`}, fakeCompiler{}); err == nil {
		t.Errorf("dropping an INFORMATION_SCHEMA table succeeded")
	}
}
