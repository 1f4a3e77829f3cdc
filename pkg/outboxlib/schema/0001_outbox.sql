-- The outbox and inbox tables every Spanmart service database carries (ARCHITECTURE.md §3).
-- This stream is applied to every service database before the service's own migrations;
-- change it with a new numbered file here, never by editing an applied one.

-- One row per fact a service committed. Written in the same read-write transaction as the state
-- change it describes; append-only (the payload is never edited after commit).
CREATE TABLE OutboxEvents (
  EventId          STRING(36)  NOT NULL,  -- UUIDv4, generated once before insert, never changes
  AggregateType    STRING(64)  NOT NULL,  -- 'order', 'payment', ...
  AggregateId      STRING(64)  NOT NULL,
  AggregateVersion INT64       NOT NULL,  -- per-aggregate sequence: consumers detect gaps and stale events
  EventType        STRING(128) NOT NULL,  -- 'order.created'
  SchemaVersion    INT64       NOT NULL,
  Payload          JSON        NOT NULL,  -- a published contract, not a dump of internal columns
  TraceParent      STRING(64),            -- W3C trace context of the request that caused it
  OccurredAt       TIMESTAMP   NOT NULL,
  CreatedAt        TIMESTAMP   NOT NULL OPTIONS (allow_commit_timestamp = true),
  PendingShard     INT64,                 -- hash(AggregateId) % N while unpublished; NULL once published
  PublishedAt      TIMESTAMP   OPTIONS (allow_commit_timestamp = true),
  Attempts         INT64       NOT NULL,
  NextAttemptAt    TIMESTAMP,
  LastError        STRING(MAX),
  QuarantinedAt    TIMESTAMP,
  CONSTRAINT CK_OutboxEvents_Version CHECK (AggregateVersion > 0),
  CONSTRAINT CK_OutboxEvents_Attempts CHECK (Attempts >= 0),
  CONSTRAINT CK_OutboxEvents_Shard CHECK (PendingShard >= 0),
) PRIMARY KEY (EventId),
  -- Unpublished rows are never deleted: PublishedAt stays NULL until the relay has enqueued them.
  ROW DELETION POLICY (OLDER_THAN(PublishedAt, INTERVAL 7 DAY));

-- Sparse: a NULL_FILTERED index holds only unpublished rows, so the relay's scan stays small however
-- large the table grows, and the shard prefix avoids a hotspot on a timestamp-leading index.
CREATE NULL_FILTERED INDEX OutboxPending ON OutboxEvents (PendingShard, CreatedAt);

-- The inbox: a consumer inserts (EventId, Consumer) with INSERT OR IGNORE in the same transaction as
-- its state change, so a redelivered event is a literal no-op. Retention must exceed the longest
-- redelivery window (queue max_retry_duration plus the replay window).
CREATE TABLE ProcessedEvents (
  EventId     STRING(36) NOT NULL,
  Consumer    STRING(64) NOT NULL,
  ProcessedAt TIMESTAMP  NOT NULL OPTIONS (allow_commit_timestamp = true),
) PRIMARY KEY (EventId, Consumer),
  ROW DELETION POLICY (OLDER_THAN(ProcessedAt, INTERVAL 30 DAY));

-- Relay shard leases: relay instances scale out with no lock service. A lease is taken or renewed
-- in a read-write transaction; Epoch grows on every change of owner, so a relay that lost its lease
-- can tell (fencing) and a dead owner's lease simply expires.
CREATE TABLE OutboxLeases (
  Shard     INT64       NOT NULL,
  Owner     STRING(128),
  Epoch     INT64       NOT NULL,
  ExpiresAt TIMESTAMP,
  UpdatedAt TIMESTAMP   NOT NULL OPTIONS (allow_commit_timestamp = true),
  CONSTRAINT CK_OutboxLeases_Shard CHECK (Shard >= 0),
  CONSTRAINT CK_OutboxLeases_Epoch CHECK (Epoch >= 0),
) PRIMARY KEY (Shard);

-- Events a consumer gave up on after the configured number of attempts. The delivery is
-- acknowledged, the event keeps its identity (EventId, attributes, body exactly as received) and an
-- operator can replay it with a reason.
CREATE TABLE DeadLetters (
  EventId       STRING(36)  NOT NULL,
  Consumer      STRING(64)  NOT NULL,
  EventType     STRING(128) NOT NULL,
  Source        STRING(128) NOT NULL,  -- ce-source, e.g. //spanmart/orders
  Attributes    JSON        NOT NULL,  -- every ce-* attribute of the delivery
  Body          BYTES(MAX)  NOT NULL,  -- the request body exactly as received
  Attempts      INT64       NOT NULL,
  LastError     STRING(MAX) NOT NULL,
  DeadAt        TIMESTAMP   NOT NULL OPTIONS (allow_commit_timestamp = true),
  ReplayedAt    TIMESTAMP   OPTIONS (allow_commit_timestamp = true),
  ReplayReason  STRING(MAX),
  ReplayedBy    STRING(128),
  CONSTRAINT CK_DeadLetters_Attempts CHECK (Attempts >= 0),
) PRIMARY KEY (EventId, Consumer);
