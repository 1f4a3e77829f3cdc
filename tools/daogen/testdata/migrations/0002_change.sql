-- A later migration: columns added, dropped and altered, indexes and a table dropped.
ALTER TABLE OutboxEvents ADD COLUMN TraceParent STRING(64);
ALTER TABLE OutboxEvents ADD COLUMN ReplayGeneration INT64 NOT NULL DEFAULT (0);
ALTER TABLE OutboxEvents ADD COLUMN ReplayReason STRING(MAX);
ALTER TABLE OutboxEvents ADD COLUMN PublishedTo ARRAY<STRING(64)>;
ALTER TABLE OutboxEvents ADD COLUMN AuditShard INT64;
DROP INDEX WidgetsByLegacy;
ALTER TABLE Widgets DROP COLUMN Legacy;
ALTER TABLE Widgets ADD COLUMN Color STRING(16);
ALTER TABLE Widgets ALTER COLUMN Size INT64 NOT NULL;
ALTER TABLE Widgets ADD COLUMN UpdatedAt TIMESTAMP;
ALTER TABLE Widgets ALTER COLUMN UpdatedAt SET OPTIONS (allow_commit_timestamp = true);
ALTER TABLE Widgets ADD CONSTRAINT CK_Widgets_Size CHECK (Size > 0);
CREATE INDEX WidgetsByColor ON Widgets (Color) STORING (Name);
DROP TABLE Gadgets;
