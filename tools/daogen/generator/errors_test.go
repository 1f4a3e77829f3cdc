package generator

import (
	"strings"
	"testing"
)

func TestLoadSchemaErrors(t *testing.T) {
	const base = `CREATE TABLE T (Id STRING(36) NOT NULL, V INT64) PRIMARY KEY (Id)`
	tests := []struct {
		name string
		ddl  []string
		want string
	}{
		{"syntax", []string{"CREATE TABLE ("}, "syntax error"},
		{"unsupported statement", []string{base, "CREATE VIEW V SQL SECURITY INVOKER AS SELECT Id FROM T"}, "unsupported DDL statement *ast.CreateView"},
		{"unsupported alteration", []string{base, "ALTER TABLE T RENAME TO U"}, "unsupported alteration *ast.RenameTo"},
		{"unknown type", []string{"CREATE TABLE T (Id STRING(36) NOT NULL, P my.Proto) PRIMARY KEY (Id)"}, "column P: unsupported type"},
		{"tokenlist type", []string{"CREATE TABLE T (Id STRING(36) NOT NULL, P TOKENLIST AS (TOKENIZE_FULLTEXT(Id)) HIDDEN) PRIMARY KEY (Id)"}, "column P: unsupported type TOKENLIST"},
		{"duplicate table", []string{base, base}, "table T already exists"},
		{"missing key column", []string{"CREATE TABLE T (Id STRING(36) NOT NULL) PRIMARY KEY (Nope)"}, "primary key column Nope does not exist"},
		{"unknown parent", []string{"CREATE TABLE C (Id STRING(36) NOT NULL) PRIMARY KEY (Id), INTERLEAVE IN PARENT P"}, "interleaved in unknown table P"},
		{"child key", []string{base, "CREATE TABLE C (X STRING(36) NOT NULL, Y INT64 NOT NULL) PRIMARY KEY (X, Y), INTERLEAVE IN PARENT T"}, "must start with the key of its parent T"},
		{"index on unknown table", []string{"CREATE INDEX I ON Nope (A)"}, "no table Nope"},
		{"index on unknown column", []string{base, "CREATE INDEX I ON T (Nope)"}, "table T has no column Nope"},
		{"drop unknown table", []string{"DROP TABLE Nope"}, "no table Nope"},
		{"drop table with index", []string{base, "CREATE INDEX I ON T (V)", "DROP TABLE T"}, "drop its indexes first"},
		{"drop key column", []string{base, "ALTER TABLE T DROP COLUMN Id"}, "cannot drop key column Id"},
		{"drop indexed column", []string{base, "CREATE INDEX I ON T (V)", "ALTER TABLE T DROP COLUMN V"}, "used by index I"},
		{"add existing column", []string{base, "ALTER TABLE T ADD COLUMN V INT64"}, "column V already exists"},
		{"commit timestamp on a string", []string{"CREATE TABLE T (Id STRING(36) NOT NULL OPTIONS (allow_commit_timestamp = true)) PRIMARY KEY (Id)"}, "allow_commit_timestamp on a STRING column"},
		{"drop unknown index", []string{base, "DROP INDEX Nope"}, "no index Nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stmts []Statement
			for _, s := range tt.ddl {
				stmts = append(stmts, Statement{File: "0001_test.sql", SQL: s})
			}
			_, err := LoadSchema(stmts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("LoadSchema = %v, want an error containing %q", err, tt.want)
			}
			if !strings.Contains(err.Error(), "0001_test.sql") {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

func TestGenerateErrors(t *testing.T) {
	tests := []struct {
		name string
		ddl  []string
		want string
	}{
		{"field named like a method", []string{"CREATE TABLE T (Id STRING(36) NOT NULL, Insert INT64) PRIMARY KEY (Id)"}, "field name Insert is a method"},
		{"two tables with one singular", []string{
			"CREATE TABLE Item (Id STRING(36) NOT NULL) PRIMARY KEY (Id)",
			"CREATE TABLE Items (Id STRING(36) NOT NULL) PRIMARY KEY (Id)",
		}, "collides"},
		{"table named like a declaration of db.go", []string{"CREATE TABLE Databases (Id STRING(36) NOT NULL) PRIMARY KEY (Id)"}, "collides with db.go"},
		{"key parameters collide", []string{"CREATE TABLE T (Type STRING(36) NOT NULL, type_ INT64 NOT NULL) PRIMARY KEY (Type, type_)"}, "both become parameter type_"},
		{"outbox without its columns", []string{"CREATE TABLE OutboxEvents (EventId STRING(36) NOT NULL) PRIMARY KEY (EventId)"}, "OutboxEvents needs a nullable column PendingShard"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stmts []Statement
			for _, s := range tt.ddl {
				stmts = append(stmts, Statement{File: "0001_test.sql", SQL: s})
			}
			_, err := Generate(Database{Name: "x", Sources: []string{"x"}, Statements: stmts})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Generate = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestNaming(t *testing.T) {
	for in, want := range map[string]string{
		"Products": "Product", "OrderItems": "OrderItem", "Inventory": "Inventory", "IdempotencyKeys": "IdempotencyKey",
		"Categories": "Category", "Addresses": "Address", "Boxes": "Box", "Status": "Status", "Batches": "Batch",
		"OutboxLeases": "OutboxLease", "Analysis": "Analysis", "Class": "Class",
	} {
		if got := singular(in); got != want {
			t.Errorf("singular(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"OrderId": "orderId", "SKU": "sku", "URLPath": "urlPath", "type": "type_", "Ctx": "ctx_", "x": "x"} {
		if got := param(in); got != want {
			t.Errorf("param(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"OrderItems": "order_items", "Inventory": "inventory", "HTTPLogs": "http_logs", "DeadLetters": "dead_letters"} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
}
