// Package histcheck records transaction histories against a Cloud Spanner endpoint (spanneremu,
// or any emulator behind SPANNER_EMULATOR_HOST) with the official Go client and checks them for
// isolation and consistency anomalies, in the manner of Jepsen's Elle, Knossos and porcupine.
//
// # Why
//
// spanneremu runs read-write transactions optimistically: reads take no locks and are validated,
// and a transaction that read stale data is ABORTED and retried by the client. What commits must
// be serializable in commit-timestamp order, as on Cloud Spanner; but the application code of an
// attempt that is later aborted has already seen whatever its reads returned. On Cloud Spanner
// read-write transactions lock what they read, so every attempt, committed or not, sees one
// consistent state, and code may rely on that (an invariant check, a call to another service, a
// panic on an impossible state). The checkers therefore hold every attempt to that standard, not
// only the committed ones. (When reads were validated only at commit, two reads of one attempt
// could show two different states, read skew: row A before a concurrent transfer, row B after
// it. This package found that, and read-only reads that did not show the state of their read
// timestamp; see the emulator's README.)
//
// # What is recorded
//
// [Run] drives one workload with concurrent workers, each with its own client goroutine and a
// seeded random source. Every attempt of a transaction is an [Attempt]: every run of a
// Client.ReadWriteTransactionWithOptions closure (the client retries ABORTED attempts itself;
// an attempt that was retried did not commit), and every read-only, single-use and stale
// transaction. An attempt keeps its operations in order: reads with the rows they returned and
// every row they covered, and writes; and its outcome: committed with the commit timestamp of
// the CommitResponse, aborted, failed (rolled back), or unknown (the commit may have happened),
// or for read-only transactions the read timestamp (ReadOnlyTransaction.Timestamp). Operations
// are issued in random ways: ReadRow, Read with keys (also with LOCK_HINT_EXCLUSIVE), with every kind of KeyRange, or
// AllKeys, ReadUsingIndex on a secondary index, SQL queries filtering on the key (also with
// FOR UPDATE) and on non-key columns, DML (UPDATE by key, relative UPDATE, INSERT OR UPDATE) and buffered
// mutations (Update, InsertOrUpdate). Read-only transactions use strong, exact-staleness,
// read-timestamp (at, just before and just after a recent commit), max-staleness and
// min-read-timestamp bounds.
//
// # What is checked
//
//   - Bank ([CheckBank]): accounts with balances; transfers read two accounts, or all of them
//     one read at a time, and move money, never below zero. Every attempt that read every
//     account (committed, aborted or read-only) must see the opening total; no balance may be
//     negative, in any read or in the committed state; the committed transactions replayed in
//     commit-timestamp order must end at the total.
//   - List append ([CheckListAppend]), as Elle: lists of unique elements, appended blindly with
//     DML or read and rewritten; the version order of each list is given by its longest read
//     (every read must be a prefix of it). From it come ww, wr and rw dependencies between
//     committed transactions; strongly connected components (Tarjan) are searched for the
//     shortest cycle of the weakest class: G0, G1c, G-single, G2. Every attempt that did not
//     commit and every read-only transaction is a read-only node that must not close a cycle
//     either. Also G1a (aborted reads), G1b (intermediate reads), incompatible orders,
//     duplicates, lost appends and reads that miss the attempt's own DML.
//   - Commit-timestamp order ([CheckCommitOrder]), for every workload: Spanner's external
//     consistency. Commit timestamps are unique and respect real time; replaying the committed
//     transactions in timestamp order reproduces every value they read; every read-only,
//     single-use and stale read sees exactly the replayed state at its read timestamp (stale
//     reads refused with FAILED_PRECONDITION because they are older than the emulator's kept
//     history are counted, not reported).
//   - Registers ([CheckRegisters]): single-key registers read (strong single-use reads and
//     read-write transactions), written (mutations or DML) and compare-and-set, each operation
//     from the call of its ReadWriteTransaction to its return, retries included, checked for
//     linearizability with porcupine, key by key; a failure writes porcupine's HTML
//     visualization to a file that the report names.
//
// Each [Anomaly] names the attempts involved (id, worker, attempt number, commit or read
// timestamp), what they read and wrote, and for cycles each edge with its kind and key:
//
//	G-single: T12 (worker 3, read-write append-read, attempt 1, aborted: ...) -rw(list4)-> T40 (...) -wr(list2)-> T12; T12 read list2=[1 5 9] list4=[3]; T40 appended [7] to list4, [11] to list2
//
// The command spanneremu-check runs the workloads for longer, over several seeds.
package histcheck
