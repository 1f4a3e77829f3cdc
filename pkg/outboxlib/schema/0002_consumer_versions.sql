-- Per-aggregate version tracking for consumers: the highest AggregateVersion of each aggregate a
-- consumer has applied, written in the same transaction as the handler's state change and the
-- ProcessedEvents row. It lets a consumer tell a stale event (version at or below the recorded
-- one: a replay or a late duplicate with a new id) from a current one; whether an event is early
-- is the handler's call, because a consumer subscribes to only some of an aggregate's events.
-- Keyed by aggregate id first (UUIDs) so the rows spread across splits.
CREATE TABLE ConsumerVersions (
  AggregateId   STRING(64) NOT NULL,
  AggregateType STRING(64) NOT NULL,
  Consumer      STRING(64) NOT NULL,
  Version       INT64      NOT NULL,
  EventId       STRING(36) NOT NULL,  -- the event that set Version
  UpdatedAt     TIMESTAMP  NOT NULL OPTIONS (allow_commit_timestamp = true),
  CONSTRAINT CK_ConsumerVersions_Version CHECK (Version > 0),
) PRIMARY KEY (AggregateId, AggregateType, Consumer);
