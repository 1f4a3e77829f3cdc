-- Replays get columns of their own (pkg/outboxlib/relay). Until now the relay kept an event's replay
-- generation as a prefix of LastError ("replay #g: reason"), carried over by every later failure,
-- because the row had no other place for it; and it set QuarantinedAt from its own clock, because
-- the column could not take the commit timestamp.

-- The replay generation of the event: 0 until an operator replays it after publication, then one
-- more per such replay. It is hashed into the event's Cloud Tasks names (the names of the earlier
-- generations stay taken for the name-reuse window). NOT NULL with a default, so existing rows and
-- inserts that leave it out get 0.
ALTER TABLE OutboxEvents ADD COLUMN ReplayGeneration INT64 NOT NULL DEFAULT (0);

-- The operator's reason of the last replay (NULL if never replayed), so that LastError is the last
-- delivery error again.
ALTER TABLE OutboxEvents ADD COLUMN ReplayReason STRING(MAX);

-- The relay quarantines an event in a read-write transaction: the commit timestamp is the time of
-- record, consistent with CreatedAt and PublishedAt, and never ahead of the commit as a relay's clock
-- can be.
ALTER TABLE OutboxEvents ALTER COLUMN QuarantinedAt SET OPTIONS (allow_commit_timestamp = true);
