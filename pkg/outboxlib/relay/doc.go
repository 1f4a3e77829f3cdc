// Package relay is the relay core of Spanmart's transactional outbox: it reads the unpublished
// rows of every source database's OutboxEvents through the sparse OutboxPending index, creates one
// Cloud Tasks HTTP task per (event, subscriber) and marks the rows published. The relay binary
// (relay/) wires it to configuration and HTTP; tests run it against the in-process emulators.
//
// Guarantees and how they are kept:
//
//   - At-least-once. A row is marked published (PendingShard = NULL, PublishedAt = commit
//     timestamp, PublishedTo = the subscribers) only after every subscriber's task was created.
//     A crash in between re-creates the tasks, whose names are a hash of (EventId, subscriber):
//     Cloud Tasks answers ALREADY_EXISTS, which counts as success, so a relay retry within Cloud
//     Tasks' name-reuse window (about an hour after the task ran or was deleted) creates no second
//     task. The window is all the name gives: after it, the same name is a new task and a second
//     delivery, which the consumer's inbox absorbs.
//   - Horizontal scaling without a lock service. The pending shards 0..outboxlib.Shards-1 of each
//     source are leased through OutboxLeases (owner, epoch, expiry) in read-write transactions. An
//     instance works only shards it holds, takes at most ceil(Shards / live instances) so that
//     instances share fairly, renews every third of the lease and releases its leases on shutdown;
//     a dead instance's leases expire. Every instance also keeps a presence row in OutboxLeases
//     (Shard = MemberShardBase + hash(owner)), so that an instance holding no shard yet still counts
//     as live and the others hand shards over to it. Marks are deferred: every MarkEvery a source
//     marks all the batches it enqueued since in one transaction (delivery does not wait; scans
//     skip rows waiting for their mark, and a crash before it only re-creates existing tasks).
//     That transaction re-reads, in one query, each row's state and replay generation and the
//     leases this instance holds (owner and epoch): a batch whose shard was lost since its scan
//     writes nothing, and a row replayed after the scan waits for its new tasks.
//   - Failures cost the event, not the relay. A failed enqueue backs off that event alone
//     (Attempts, NextAttemptAt with jitter, LastError); a permanent error (INVALID_ARGUMENT, e.g. a
//     bad URL) or MaxAttempts quarantines it (QuarantinedAt = commit timestamp; PendingShard is
//     kept, so the row is never deleted, stays visible to Status and keeps
//     outbox_oldest_pending_age_seconds rising until it is replayed). UNAVAILABLE and
//     DEADLINE_EXCEEDED from Cloud Tasks mean the service is down: the whole relay backs off, one
//     batch probes when the back-off has passed, one call at a time, and no event is charged an
//     attempt.
//     NOT_FOUND (a queue not created yet) and other codes are retried per event. The longest an
//     event backs off before quarantine (Config.QuarantineHorizon, ~70 min by default) must stay
//     below the consumers' patience with its successors (outboxlib.DefaultEarlyPatience, 2 h):
//     New refuses a configuration that reaches it.
//   - Order. A shard is published in CreatedAt order, and one aggregate's events share a shard,
//     but an event backing off does not hold back the events behind it: consumers order by
//     AggregateVersion (the queue is the reorder buffer). Each task carries
//     ce-predecessorversion, the latest earlier version of its aggregate whose type is routed to
//     that subscriber (read through OutboxByAggregate in the scan's query), so a consumer that is sent only some of an
//     aggregate's events knows which one it must have applied first.
//   - Replay keeps the event id. Replay re-queues a quarantined or published event with an
//     operator's reason (OutboxEvents.ReplayReason; LastError is cleared and records only delivery
//     errors). A published event's tasks still exist or are tombstoned (ALREADY_EXISTS for the
//     name-reuse window), so a replay of a published event increments the row's ReplayGeneration
//     (migration 0003; 0 for a row never replayed after publication), which is part of its task
//     names: generation g > 0 hashes (EventId, subscriber, g). Failures leave the column alone, so
//     retries of a replayed event reuse its names. A quarantined event keeps its generation:
//     subscribers whose task was created before the failure get ALREADY_EXISTS only while that
//     task's name is still taken. Quarantine takes about an hour of back-off, so by the time an
//     operator replays, those names are usually free again and those subscribers get a second
//     delivery, a duplicate for their inbox. A replayed event's publish lag is not observed (its
//     CreatedAt is the original commit).
//   - Every delivery is accounted for. The delivery ledger (ledger.go) audits each published
//     (event, subscriber) pair against the subscriber's own record and reports the ones Cloud
//     Tasks dropped (MissingDeliveries, outbox_ledger_missing_deliveries), replayable with
//     ReplayMissing.
//
// Start-up refuses to run when a subscriber queue's redelivery window (max_retry_duration, read
// with GetQueue) plus the replay window reaches the 30-day ProcessedEvents retention
// (outboxlib.CheckRetention): a redelivery after the consumer forgot the event id would apply it
// twice. With the ledger on, it also refuses a queue whose retry horizon would let a lost delivery
// be found less than a day before the outbox TTL deletes its row.
package relay
