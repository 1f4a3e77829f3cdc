// Package relay is the relay core of Spanmart's transactional outbox: it reads the unpublished
// rows of every source database's OutboxEvents through the sparse OutboxPending index, creates one
// Cloud Tasks HTTP task per (event, subscriber) and marks the rows published. The relay binary
// (relay/) wires it to configuration and HTTP; tests run it against the in-process emulators.
//
// Guarantees and how they are kept:
//
//   - At-least-once. A row is marked published (PendingShard = NULL, PublishedAt = commit
//     timestamp) only after every subscriber's task was created. A crash in between re-creates the
//     tasks, whose names are a hash of (EventId, subscriber): Cloud Tasks answers ALREADY_EXISTS,
//     which counts as success, so a subscriber gets one task per event however often the relay
//     retries (within Cloud Tasks' name-reuse window; consumers de-duplicate anyway).
//   - Horizontal scaling without a lock service. The pending shards 0..outboxlib.Shards-1 of each
//     source are leased through OutboxLeases (owner, epoch, expiry) in read-write transactions. An
//     instance works only shards it holds, takes at most ceil(Shards / live instances) so that
//     instances share fairly, renews every third of the lease and releases its leases on shutdown;
//     a dead instance's leases expire. Every instance also keeps a presence row in OutboxLeases
//     (Shard = MemberShardBase + hash(owner)), so that an instance holding no shard yet still counts
//     as live and the others hand shards over to it. The transaction that marks a batch checks that
//     the lease (owner and epoch) is still held: a relay that lost a shard writes nothing.
//   - Failures cost the event, not the relay. A failed enqueue backs off that event alone
//     (Attempts, NextAttemptAt with jitter, LastError); a permanent error (INVALID_ARGUMENT, e.g. a
//     bad URL) or MaxAttempts quarantines it (QuarantinedAt = commit timestamp; PendingShard is
//     kept, so the row is never deleted and stays visible to Status). UNAVAILABLE and DEADLINE_EXCEEDED from Cloud Tasks
//     mean the service is down: the whole relay backs off, one shard loop probes when the back-off
//     has passed, and no event is charged an attempt. NOT_FOUND (a queue not created yet) and
//     other codes are retried per event.
//   - Order. A shard is published in CreatedAt order, and one aggregate's events share a shard,
//     but an event backing off does not hold back the events behind it: consumers order by
//     AggregateVersion (the queue is the reorder buffer), as they must anyway with Cloud Tasks.
//   - Replay keeps the event id. Replay re-queues a quarantined or published event with an
//     operator's reason (OutboxEvents.ReplayReason; LastError is cleared and records only delivery
//     errors). A published event's tasks still exist or are tombstoned (ALREADY_EXISTS for the
//     name-reuse window), so a replay of a published event increments the row's ReplayGeneration
//     (migration 0003; 0 for a row never replayed after publication), which is part of its task
//     names: generation g > 0 hashes (EventId, subscriber, g). Failures leave the column alone, so
//     retries of a replayed event reuse its names. A quarantined event keeps its generation:
//     subscribers whose task was created before the failure get ALREADY_EXISTS, not a second
//     delivery. A replayed event's publish lag is not observed (its CreatedAt is the original
//     commit).
//
// Start-up refuses to run when a subscriber queue's redelivery window (max_retry_duration, read
// with GetQueue) plus the replay window reaches the 30-day ProcessedEvents retention
// (outboxlib.CheckRetention): a redelivery after the consumer forgot the event id would apply it
// twice.
package relay
