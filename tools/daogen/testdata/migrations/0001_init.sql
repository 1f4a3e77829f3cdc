-- The shared outbox tables (abridged to what the roles need) and a table changed by 0002.
CREATE TABLE OutboxEvents (
  EventId          STRING(36)  NOT NULL,
  AggregateId      STRING(64)  NOT NULL,
  Payload          JSON        NOT NULL,
  CreatedAt        TIMESTAMP   NOT NULL OPTIONS (allow_commit_timestamp = true),
  PendingShard     INT64,
  PublishedAt      TIMESTAMP   OPTIONS (allow_commit_timestamp = true),
  Attempts         INT64       NOT NULL,
  NextAttemptAt    TIMESTAMP,
  LastError        STRING(MAX),
  QuarantinedAt    TIMESTAMP,
) PRIMARY KEY (EventId);

CREATE NULL_FILTERED INDEX OutboxPending ON OutboxEvents (PendingShard, CreatedAt);

CREATE TABLE ProcessedEvents (
  EventId     STRING(36) NOT NULL,
  Consumer    STRING(64) NOT NULL,
  ProcessedAt TIMESTAMP  NOT NULL OPTIONS (allow_commit_timestamp = true),
) PRIMARY KEY (EventId, Consumer);

CREATE TABLE Widgets (
  WidgetId STRING(36) NOT NULL,
  Name     STRING(64) NOT NULL,
  Legacy   STRING(64),
  Size     INT64,
) PRIMARY KEY (WidgetId);

CREATE INDEX WidgetsByLegacy ON Widgets (Legacy);

CREATE TABLE Gadgets (
  GadgetId STRING(36) NOT NULL,
) PRIMARY KEY (GadgetId);
