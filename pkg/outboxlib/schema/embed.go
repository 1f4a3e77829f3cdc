// Package schema holds the ordered Spanner DDL migrations of the outbox tables shared by every service database.
// Files are named NNNN_name.sql and are never edited once applied; pkg/dbschema lists which
// migration streams make up each database, pkg/migrate applies them and tools/daogen reads them.
package schema

import "embed"

// Migrations holds the *.sql files of this directory.
//
//go:embed *.sql
var Migrations embed.FS
