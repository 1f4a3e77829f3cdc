-- What it takes to account for every delivery (docs/architecture.md, "Delivery guarantees"):
-- a consumer counts the failed answers it gave itself, the relay tells each subscriber which
-- earlier event of the aggregate it must apply first, and an audit (the delivery ledger) confirms
-- every (event, subscriber) pair the relay published.

-- The failed answers a consumer gave to one event, so that it dead-letters by what it answered
-- itself: X-CloudTasks-TaskRetryCount also counts attempts made while the consumer was down (and a
-- caller can set it). Written in a transaction of its own after a failed attempt; the row that
-- dead-letters the event is deleted with it. The TTL outlives the subscriber queues' 72-hour
-- retry horizon, so a row cannot expire while its event is still being retried.
CREATE TABLE DeliveryFailures (
  EventId         STRING(36) NOT NULL,
  Consumer        STRING(64) NOT NULL,
  Failures        INT64      NOT NULL,  -- 503 and 400 answers: transient faults, malformed requests
  Deferrals       INT64      NOT NULL,  -- 409 answers: the event came before its predecessor
  FirstDeferredAt TIMESTAMP,            -- the first 409: the consumer's patience counts from here
  LastError       STRING(MAX) NOT NULL,
  UpdatedAt       TIMESTAMP  NOT NULL OPTIONS (allow_commit_timestamp = true),
  CONSTRAINT CK_DeliveryFailures_Counts CHECK (Failures >= 0 AND Deferrals >= 0),
) PRIMARY KEY (EventId, Consumer),
  ROW DELETION POLICY (OLDER_THAN(UpdatedAt, INTERVAL 7 DAY));

-- The subscribers whose tasks the relay created when it marked the row published (NULL while
-- pending, and for a row published before this migration): what the delivery ledger audits.
ALTER TABLE OutboxEvents ADD COLUMN PublishedTo ARRAY<STRING(64)>;

-- The pending shard again, from the mark that publishes the row to tasks until the ledger has
-- confirmed every subscriber in PublishedTo (applied, dead-lettered, or recorded missing); NULL
-- otherwise. OutboxUnaudited mirrors OutboxPending: sparse, shard-prefixed.
ALTER TABLE OutboxEvents ADD COLUMN AuditShard INT64;
CREATE NULL_FILTERED INDEX OutboxUnaudited ON OutboxEvents (AuditShard, PublishedAt);

-- One aggregate's events in version order: the relay reads them to tell each subscriber the
-- latest earlier version it must have applied (the ce-predecessorversion of its tasks).
CREATE INDEX OutboxByAggregate ON OutboxEvents (AggregateId, AggregateType, AggregateVersion) STORING (EventType);

-- Deliveries the ledger found neither applied nor dead-lettered by their subscriber after the
-- subscriber queue's retry horizon had passed: Cloud Tasks dropped the task. An operator replays
-- the event (the relay's replay of the outbox row; the other subscribers' inboxes absorb their
-- copy) with a reason, which is recorded here.
CREATE TABLE MissingDeliveries (
  EventId          STRING(36)  NOT NULL,
  Subscriber       STRING(64)  NOT NULL,
  EventType        STRING(128) NOT NULL,
  AggregateId      STRING(64)  NOT NULL,
  ReplayGeneration INT64       NOT NULL,  -- the generation whose task went missing
  PublishedAt      TIMESTAMP   NOT NULL,
  DetectedAt       TIMESTAMP   NOT NULL OPTIONS (allow_commit_timestamp = true),
  ReplayedAt       TIMESTAMP   OPTIONS (allow_commit_timestamp = true),
  ReplayReason     STRING(MAX),
) PRIMARY KEY (EventId, Subscriber),
  ROW DELETION POLICY (OLDER_THAN(DetectedAt, INTERVAL 30 DAY));
