package relay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/spanner"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spanmart/spanmart/pkg/outboxlib"
)

// pendingRow is an unpublished outbox row as the relay reads it.
type pendingRow struct {
	event      outboxlib.Event
	shard      int64 // PendingShard
	createdAt  time.Time
	attempts   int64
	generation int64 // ReplayGeneration: hashed into the task names
	replayed   bool  // an operator replayed the row (ReplayReason is set)
	earlier    []*earlierEvent
}

// earlierEvent is an earlier event of a pending row's aggregate (pendingSQL's Earlier).
type earlierEvent struct {
	AggregateVersion int64
	EventType        string
}

// pendingSQL reads the due rows of some shards through the sparse index, oldest first: one query
// for every shard woken at one moment. Rows backing off (NextAttemptAt in the future) and
// quarantined rows are skipped in the query, so a head of failing rows can never hide the rows
// behind it from a bounded batch. Each row comes with the earlier events of its aggregate
// (Earlier, through OutboxByAggregate: few per aggregate), from which predecessors computes each
// task's ce-predecessorversion: one round trip per batch, not two. Earlier is computed in the
// outer query, for the rows the limit keeps only: rows of several shards are sorted, not read in
// the index's order, so in one query the subquery ran for every due row of those shards before
// the sort (a backlog's scan of 100 rows out of 900–4,900 took 2.2 ms in spanneremu, 1.4 ms so).
const pendingSQL = `SELECT e.EventId, e.PendingShard, e.AggregateType, e.AggregateId, e.AggregateVersion, e.EventType, e.SchemaVersion,
  e.Payload, e.TraceParent, e.OccurredAt, e.CreatedAt, e.Attempts, e.ReplayGeneration, e.Replayed,
  ARRAY(SELECT AS STRUCT a.AggregateVersion, a.EventType
    FROM OutboxEvents@{FORCE_INDEX=OutboxByAggregate} AS a
    WHERE a.AggregateId = e.AggregateId AND a.AggregateType = e.AggregateType AND a.AggregateVersion < e.AggregateVersion) AS Earlier
FROM (
  SELECT p.EventId, p.PendingShard, p.AggregateType, p.AggregateId, p.AggregateVersion, p.EventType, p.SchemaVersion,
    p.Payload, p.TraceParent, p.OccurredAt, p.CreatedAt, p.Attempts, p.ReplayGeneration, p.ReplayReason IS NOT NULL AS Replayed
  FROM OutboxEvents@{FORCE_INDEX=OutboxPending} AS p
  WHERE p.PendingShard IN UNNEST(@shards) AND p.QuarantinedAt IS NULL AND (p.NextAttemptAt IS NULL OR p.NextAttemptAt <= @now)
  ORDER BY p.CreatedAt
  LIMIT @limit) AS e
ORDER BY e.CreatedAt`

// shardSet is a set of a source's shards, one bit each.
type shardSet uint64

// A shardSet holds every shard.
var _ [64 - outboxlib.Shards]struct{}

func (m shardSet) has(shard int64) bool { return m&(1<<shard) != 0 }

// scanLoop scans the source's due shards that this instance holds, in batches: one query for
// every shard due at that moment, while the batches of other shards may still be enqueuing. A
// shard is in one batch at a time. It is due again at once after a full batch; otherwise when
// woken (wakeShard): by a nudge (a producer that committed to it: Nudge, NudgeShards), by the
// source's probe, which finds every shard with due rows in one query each MaxIdle (probeLoop), by
// the lease that makes it this instance's, or by a mark that its scan waited for. So a nudge that
// names five shards costs one scan, not five, and a shard that published what a nudge announced
// does not scan again and again to find nothing. A failed batch backs the source off, doubling
// from PollInterval to MaxIdle, and its shards are due when the back-off has passed.
func (s *source) scanLoop(ctx context.Context) {
	// A worker for each shard's batch and for one batch's calls at once; busier moments get
	// goroutines of their own.
	s.workers = newWorkers(outboxlib.Shards + s.r.cfg.Parallelism)
	defer s.workers.close()
	var batches sync.WaitGroup
	defer batches.Wait()
	for ctx.Err() == nil {
		nudge := s.r.nudged()
		wait := s.startBatch(ctx, &batches) // 0: until woken
		var timer *time.Timer
		var expired <-chan time.Time // nil: no timer, wait until woken
		if wait > 0 {
			timer = time.NewTimer(wait)
			expired = timer.C
		}
		select {
		case <-ctx.Done():
		case <-nudge:
			s.wakeAll()
		case <-s.kick:
		case <-expired:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// startBatch starts a batch of the due shards that this instance holds and no batch has, unless
// the source or Cloud Tasks is backing off: it then returns how long to wait (0: until woken).
// A due shard not held is dropped: taking its lease wakes it.
func (s *source) startBatch(ctx context.Context, batches *sync.WaitGroup) time.Duration {
	s.schedMu.Lock()
	defer s.schedMu.Unlock()
	if d := time.Until(s.retryAt); d > 0 {
		return d
	}
	var shards []int64
	epochs := map[int64]int64{}
	var set shardSet
	for shard := range int64(outboxlib.Shards) {
		if !(s.due &^ s.busy).has(shard) {
			continue
		}
		epoch, ok := s.holds(shard)
		if !ok {
			s.due &^= 1 << shard
			continue
		}
		shards = append(shards, shard)
		epochs[shard] = epoch
		set |= 1 << shard
	}
	if len(shards) == 0 {
		return 0
	}
	wait, probe, ok := s.r.tasksGate()
	if !ok {
		return wait
	}
	s.due &^= set
	s.busy |= set
	batches.Add(1)
	s.workers.Go(func() {
		defer batches.Done()
		s.runBatch(ctx, shards, epochs, set, probe)
	})
	return 0
}

// runBatch scans and delivers one batch of shards (set), then says which are due again.
func (s *source) runBatch(ctx context.Context, shards []int64, epochs map[int64]int64, set shardSet, probe bool) {
	cfg := s.r.cfg
	_, full, err := s.processBatch(ctx, shards, epochs, probe)
	if probe {
		s.r.probeDone()
	}
	if err != nil && ctx.Err() == nil && !errors.Is(err, errLeaseLost) {
		s.log.Warn("relay batch failed", zap.Int64s("shards", shards), zap.Error(err))
	}
	s.schedMu.Lock()
	s.busy &^= set
	switch {
	case ctx.Err() != nil:
	case err != nil:
		s.failing = min(max(2*s.failing, cfg.PollInterval), cfg.MaxIdle)
		s.retryAt = time.Now().Add(s.failing)
		s.due |= set
	case full:
		s.failing = 0
		s.due |= set
	default:
		s.failing = 0
	}
	s.schedMu.Unlock()
	s.kickLoop()
}

// wakeShard makes shard of s due for a scan.
func (s *source) wakeShard(shard int64) {
	s.schedMu.Lock()
	s.due |= 1 << shard
	s.schedMu.Unlock()
	s.kickLoop()
}

// wakeAll makes every shard of s due for a scan.
func (s *source) wakeAll() {
	s.schedMu.Lock()
	s.due = 1<<outboxlib.Shards - 1
	s.schedMu.Unlock()
}

// kickLoop wakes the scan loop; a loop already woken is not woken again until it has looked.
func (s *source) kickLoop() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// probeSQL finds the shards with due rows (what pendingSQL would return rows of), through the
// sparse index: one small scan for all of a source's shards.
const probeSQL = `SELECT DISTINCT PendingShard
FROM OutboxEvents@{FORCE_INDEX=OutboxPending}
WHERE PendingShard IS NOT NULL AND QuarantinedAt IS NULL AND (NextAttemptAt IS NULL OR NextAttemptAt <= @now)`

// probeLoop wakes, each MaxIdle, the loops of the shards this instance holds that have due rows:
// rows committed without a nudge (a producer that does not nudge, a nudge lost or sent to another
// instance), rows whose back-off has run out, and a shard just taken over.
func (s *source) probeLoop(ctx context.Context) {
	tick := time.NewTicker(s.r.cfg.MaxIdle)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if s.heldCount() == 0 {
			continue
		}
		shards, err := s.dueShards(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("relay probe failed", zap.Error(err))
			}
			continue
		}
		for _, shard := range shards {
			if _, ok := s.holds(shard); ok {
				s.wakeShard(shard)
			}
		}
	}
}

// dueShards returns the shards of the source that have due rows.
func (s *source) dueShards(ctx context.Context) ([]int64, error) {
	var out []int64
	stmt := spanner.Statement{SQL: probeSQL, Params: map[string]any{"now": time.Now()}}
	err := s.src.Client.Single().Query(ctx, stmt).Do(func(r *spanner.Row) error {
		var shard int64
		if err := r.Column(0, &shard); err != nil {
			return err
		}
		if shard >= 0 && shard < outboxlib.Shards {
			out = append(out, shard)
		}
		return nil
	})
	return out, err
}

// outcome is what happened to one row's tasks.
type outcome struct {
	row       *pendingRow
	err       error // the first failure; nil when every task was created (or existed)
	permanent bool
	down      bool // Cloud Tasks unavailable: the row is not charged an attempt
	created   []string
}

// predecessors maps (event id, subscriber) to the ce-predecessorversion of that task.
type predecessors map[[2]string]int64

// processBatch scans one batch of shards, scanned under epochs, and delivers it. n is the number of
// rows handled, full whether the batch was full (more may be waiting). A probe of Cloud Tasks
// (tasksGate) enqueues one task at a time.
func (s *source) processBatch(ctx context.Context, shards []int64, epochs map[int64]int64, probe bool) (n int, full bool, err error) {
	cfg := s.r.cfg
	rows, err := s.readPending(ctx, shards, cfg.BatchSize)
	if err != nil {
		return 0, false, err
	}
	full = len(rows) == cfg.BatchSize
	// Rows enqueued but not marked yet are the mark loop's (mark.go); when a full scan held some,
	// their mark wakes the shards, so a scan that found only those is not full.
	if rows = s.skipUnmarked(shards, rows, full); len(rows) == 0 {
		return 0, false, nil
	}
	outs := s.enqueue(ctx, rows, s.predecessors(rows), probe)
	if ctx.Err() != nil {
		return 0, false, ctx.Err()
	}
	var down error
	marks := map[int64]*markRequest{}
	ids := map[int64][]string{}
	for _, o := range outs {
		shard := o.row.shard
		b := marks[shard]
		if b == nil {
			b = &markRequest{shard: shard, epoch: epochs[shard]}
			marks[shard] = b
		}
		switch {
		case o.err == nil:
			b.done = append(b.done, o)
			ids[shard] = append(ids[shard], o.row.event.ID)
		case o.down:
			down = o.err
		default:
			b.failed = append(b.failed, o)
		}
	}
	for _, shard := range shards {
		if cfg.BeforeMark != nil && marks[shard] != nil {
			if err := cfg.BeforeMark(ctx, s.src.Name, shard, ids[shard]); err != nil {
				return 0, false, fmt.Errorf("before mark: %w", err)
			}
		}
	}
	for _, shard := range shards {
		if b := marks[shard]; b != nil && len(b.done)+len(b.failed) > 0 {
			s.deferMark(b)
			n += len(b.done) + len(b.failed)
		}
	}
	if down != nil {
		s.r.tasksDown(down)
		return n, false, nil
	}
	return n, full, nil
}

// readPending reads up to limit due rows of shards.
func (s *source) readPending(ctx context.Context, shards []int64, limit int) ([]*pendingRow, error) {
	s.r.metrics.scans.WithLabelValues(s.src.Name).Inc()
	stmt := spanner.Statement{SQL: pendingSQL, Params: map[string]any{"shards": shards, "now": time.Now(), "limit": int64(limit)}}
	iter := s.src.Client.Single().Query(ctx, stmt)
	var rows []*pendingRow
	err := iter.Do(func(r *spanner.Row) error {
		var (
			p                   pendingRow
			payload             spanner.GenericColumnValue
			trace               spanner.NullString
			aggVersion, schemaV int64
			id, aggType, aggID  string
			typ                 string
			occurred, createdAt time.Time
		)
		if err := r.Columns(&id, &p.shard, &aggType, &aggID, &aggVersion, &typ, &schemaV, &payload, &trace, &occurred, &createdAt, &p.attempts, &p.generation, &p.replayed, &p.earlier); err != nil {
			return err
		}
		// The payload's exact text: decoding JSON into a Go value would turn large integers into
		// floats and reorder keys.
		p.event = outboxlib.Event{
			ID: id, Type: typ, Source: "//spanmart/" + s.src.Name, AggregateType: aggType, AggregateID: aggID,
			AggregateVersion: aggVersion, SchemaVersion: schemaV, OccurredAt: occurred,
			TraceParent: trace.StringVal, Payload: []byte(payload.Value.GetStringValue()), CommittedAt: createdAt,
		}
		p.createdAt = createdAt
		rows = append(rows, &p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read pending shards %v: %w", shards, err)
	}
	return rows, nil
}

// predecessors computes, for each row and each of its subscribers, the latest earlier version of
// the row's aggregate whose event type is routed to that subscriber: the version the subscriber
// must have applied before this one (outboxlib.HeaderPredecessorVersion). A consumer sees only
// the events routed to it, so "version - 1" would wait for ever for a version it is never sent.
// The routes are today's: an event published before its type was routed to a subscriber counts
// as if it had been (the subscriber then defers, and after its patience dead-letters, the
// successor; docs/architecture.md). Predecessors deleted by the outbox TTL (published more than 7
// days ago) no longer count.
func (s *source) predecessors(rows []*pendingRow) predecessors {
	preds := predecessors{}
	routes := s.r.cfg.Routes
	for _, row := range rows {
		for _, v := range row.earlier {
			for _, sub := range routes[v.EventType] {
				k := [2]string{row.event.ID, sub.Name}
				if v.AggregateVersion > preds[k] {
					preds[k] = v.AggregateVersion
				}
			}
		}
	}
	return preds
}

// enqueue creates the tasks of rows, at most Parallelism at a time (one, for a probe). Once Cloud
// Tasks has answered that it is down, the calls not made yet are not made: their rows are down too.
func (s *source) enqueue(ctx context.Context, rows []*pendingRow, preds predecessors, probe bool) []*outcome {
	cfg := s.r.cfg
	outs := make([]*outcome, len(rows))
	sem := make(chan struct{}, cfg.Parallelism)
	if probe {
		sem = make(chan struct{}, 1)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var down error // the first answer that Cloud Tasks is down
	tasks := 0
	for _, row := range rows {
		tasks += len(cfg.Routes[row.event.Type])
	}
	onWorker := func(f func()) {
		wg.Add(1)
		s.workers.Go(func() {
			defer wg.Done()
			f()
		})
	}
	inline := func(f func()) { f() }
	for i, row := range rows {
		o := &outcome{row: row}
		outs[i] = o
		for _, sub := range cfg.Routes[row.event.Type] {
			sem <- struct{}{}
			tasks--
			run := onWorker
			if tasks == 0 {
				// The last one runs on this goroutine, the batch's: most batches are one event
				// for one subscriber.
				run = inline
			}
			run(func() {
				defer func() { <-sem }()
				mu.Lock()
				if down != nil {
					o.err, o.down = down, true
					mu.Unlock()
					return
				}
				mu.Unlock()
				err := s.createTask(ctx, row, sub, preds[[2]string{row.event.ID, sub.Name}])
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					o.created = append(o.created, sub.Name)
					return
				}
				code := status.Code(err)
				if ctx.Err() == nil { // a shutdown cancels calls; that is no error of Cloud Tasks
					s.r.metrics.enqueueErrors.WithLabelValues(s.src.Name, code.String()).Inc()
				}
				err = fmt.Errorf("enqueue %s to %s: %w", row.event.ID, sub.Name, err)
				isDown := code == codes.Unavailable || code == codes.DeadlineExceeded
				if o.err == nil || isDown {
					o.err = err
				}
				o.down = o.down || isDown
				if isDown && down == nil {
					down = err
				}
				o.permanent = o.permanent || code == codes.InvalidArgument
			})
		}
	}
	wg.Wait()
	for _, o := range outs {
		// A replayed row's CreatedAt is its original commit: its lag would say nothing about the relay.
		if o.err == nil && !o.row.replayed {
			lag := time.Since(o.row.createdAt)
			s.r.metrics.publishLag.WithLabelValues(s.src.Name).Observe(lag.Seconds())
			s.publishLag.Observe(lag)
		}
		if o.down {
			o.permanent = false
		}
	}
	return outs
}

// createTask creates the task of (row, sub), carrying sub's predecessor version;
// ALREADY_EXISTS (an earlier run created it) is success.
func (s *source) createTask(ctx context.Context, row *pendingRow, sub Subscriber, pred int64) error {
	cfg := s.r.cfg
	headers := row.event.Headers()
	headers[outboxlib.HeaderPredecessorVersion] = strconv.FormatInt(pred, 10)
	queue := sub.QueueFor(row.event.AggregateID)
	req := &cloudtaskspb.CreateTaskRequest{
		Parent: queue,
		Task: &cloudtaskspb.Task{
			Name: TaskName(queue, row.event.ID, sub.Name, row.generation),
			MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
				Url:        sub.URL,
				HttpMethod: cloudtaskspb.HttpMethod_POST,
				Headers:    headers,
				Body:       row.event.Payload,
				AuthorizationHeader: &cloudtaskspb.HttpRequest_OidcToken{OidcToken: &cloudtaskspb.OidcToken{
					ServiceAccountEmail: cfg.ServiceAccount, Audience: sub.Audience,
				}},
			}},
		},
	}
	cctx, cancel := context.WithTimeout(ctx, cfg.CallTimeout)
	defer cancel()
	_, err := cfg.Tasks.CreateTask(cctx, req)
	if err == nil || status.Code(err) == codes.AlreadyExists {
		s.r.tasksUp()
		return nil
	}
	if ctx.Err() == nil && status.Code(err) != codes.Unavailable && status.Code(err) != codes.DeadlineExceeded {
		s.r.tasksUp()
	}
	return err
}

// TaskName is the name of the task of (event, subscriber) in queue: a hash of both, so a retry of
// the relay is ALREADY_EXISTS. A replay of a published event moves the row to the next replay
// generation (OutboxEvents.ReplayGeneration), and a generation g > 0 is hashed too: the names of
// the earlier generations stay taken for Cloud Tasks' name-reuse window.
func TaskName(queue, eventID, subscriber string, generation int64) string {
	key := eventID + "\x00" + subscriber
	if generation > 0 {
		key += "\x00replay-" + strconv.FormatInt(generation, 10)
	}
	sum := sha256.Sum256([]byte(key))
	return queue + "/tasks/" + hex.EncodeToString(sum[:])
}

// backoff is the wait after the n-th failed attempt: BaseBackoff doubling up to MaxBackoff, with
// ±20 % jitter so that events failing together do not retry together.
func (s *source) backoff(n int64) time.Duration {
	cfg := s.r.cfg
	d := cfg.MaxBackoff
	if n-1 < 32 {
		d = min(cfg.BaseBackoff<<(n-1), cfg.MaxBackoff)
	}
	jitter := time.Duration((rand.Float64()*0.4 - 0.2) * float64(d))
	return d + jitter
}
