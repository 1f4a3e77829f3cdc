package tasksemu

import (
	"fmt"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/spanmart/spanmart/emulator/tasksemu/retry"
)

// A mutation is one change to the emulator's state, as the log records it. Each RPC or
// dispatch outcome that changes the state appends one while it holds Server.mu, so the log's
// order is the order in which the changes were made, and replaying it on the snapshot it
// follows rebuilds the state exactly. Every mutation sets values (never "add one"), which
// keeps replay simple to reason about.
//
// On disk a frame's payload is a protobuf message Batch{repeated Mutation mutations = 1},
// written with protowire against the schema in README.md ("Data dir format"), so that the
// Cloud Tasks messages inside are the official ones in their binary encoding.
type mutation struct {
	kind       mutationKind
	queue      *cloudtaskspb.Queue // queuePut
	task       *cloudtaskspb.Task  // taskCreated (whole task), taskAttempted (name and attempt fields only)
	name       string              // queueDeleted, queuePurged, taskDeleted
	at         time.Time           // queueDeleted, queuePurged, taskDeleted
	execs      int32               // taskCreated, taskAttempted
	prevCode   int32               // taskCreated, taskAttempted
	prevReason string              // taskCreated, taskAttempted
	count      int64               // snapshotEnd: how many mutations the snapshot holds before it
}

type mutationKind int32

const (
	// queuePut: a queue was created, updated, paused or resumed; it is now exactly queue.
	queuePut mutationKind = 1
	// queuePurged: tasks created at or before at were deleted; at is the queue's purge_time.
	queuePurged mutationKind = 2
	// queueDeleted: the queue and its tasks are gone; its name is taken until at + QueueReuseWindow.
	// In a snapshot it records a queue name tombstone.
	queueDeleted mutationKind = 3
	// taskCreated: a task is pending, exactly as task (FULL view) with its attempt counters.
	taskCreated mutationKind = 4
	// taskAttempted: an attempt finished and the task will be retried: its schedule_time,
	// dispatch and response counts, first and last attempt, and the counters behind the
	// X-CloudTasks-* headers of the next attempt.
	taskAttempted mutationKind = 5
	// taskDeleted: the task was deleted, completed (2xx) or given up; its name is taken until
	// at + NameReuseWindow. In a snapshot it records a task name tombstone.
	taskDeleted mutationKind = 6
	// snapshotEnd: the last mutation of a snapshot, so that a snapshot cut short is detected.
	snapshotEnd mutationKind = 7
)

func (k mutationKind) String() string {
	switch k {
	case queuePut:
		return "queue_put"
	case queuePurged:
		return "queue_purged"
	case queueDeleted:
		return "queue_deleted"
	case taskCreated:
		return "task_created"
	case taskAttempted:
		return "task_attempted"
	case taskDeleted:
		return "task_deleted"
	case snapshotEnd:
		return "snapshot_end"
	}
	return fmt.Sprintf("kind(%d)", int32(k))
}

// Field numbers of Mutation (README.md, "Data dir format").
const (
	fieldKind             = 1
	fieldQueue            = 2
	fieldTask             = 3
	fieldName             = 4
	fieldTimeUnixNanos    = 5
	fieldExecutionCount   = 6
	fieldPreviousResponse = 7
	fieldRetryReason      = 8
	fieldCount            = 9

	fieldBatchMutations = 1
)

// appendMutation appends m to b as one element of Batch.mutations. It runs under Server.mu
// for every change, so it sizes the message first and encodes straight into b.
func appendMutation(b []byte, m mutation) ([]byte, error) {
	// proto.Size computes the sizes afresh (the live messages change in place) and caches them
	// in the messages, which MarshalAppend then reuses: nothing changes between the two, as
	// s.mu is held.
	mo := proto.MarshalOptions{UseCachedSize: true}
	var at uint64
	if !m.at.IsZero() {
		at = uint64(m.at.UnixNano())
	}
	queueSize, taskSize := -1, -1
	n := varintFieldSize(fieldKind, uint64(m.kind)) + varintFieldSize(fieldTimeUnixNanos, at) +
		varintFieldSize(fieldExecutionCount, uint64(m.execs)) + varintFieldSize(fieldPreviousResponse, uint64(m.prevCode)) +
		varintFieldSize(fieldCount, uint64(m.count)) +
		stringFieldSize(fieldName, m.name) + stringFieldSize(fieldRetryReason, m.prevReason)
	if m.queue != nil {
		queueSize = proto.Size(m.queue)
		n += protowire.SizeTag(fieldQueue) + protowire.SizeBytes(queueSize)
	}
	if m.task != nil {
		taskSize = proto.Size(m.task)
		n += protowire.SizeTag(fieldTask) + protowire.SizeBytes(taskSize)
	}
	orig := b
	b = protowire.AppendTag(b, fieldBatchMutations, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(n))
	b = appendVarintField(b, fieldKind, uint64(m.kind))
	var err error
	if queueSize >= 0 {
		b = protowire.AppendTag(b, fieldQueue, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(queueSize))
		if b, err = mo.MarshalAppend(b, m.queue); err != nil {
			return orig, fmt.Errorf("encode %v: %w", m.kind, err)
		}
	}
	if taskSize >= 0 {
		b = protowire.AppendTag(b, fieldTask, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(taskSize))
		if b, err = mo.MarshalAppend(b, m.task); err != nil {
			return orig, fmt.Errorf("encode %v: %w", m.kind, err)
		}
	}
	b = appendStringField(b, fieldName, m.name)
	b = appendVarintField(b, fieldTimeUnixNanos, at)
	b = appendVarintField(b, fieldExecutionCount, uint64(m.execs))
	b = appendVarintField(b, fieldPreviousResponse, uint64(m.prevCode))
	b = appendStringField(b, fieldRetryReason, m.prevReason)
	b = appendVarintField(b, fieldCount, uint64(m.count))
	return b, nil
}

// Fields with their zero value are left out, as protobuf does.

func varintFieldSize(num protowire.Number, v uint64) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeVarint(v)
}

func stringFieldSize(num protowire.Number, v string) int {
	if v == "" {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(len(v))
}

func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

func appendStringField(b []byte, num protowire.Number, v string) []byte {
	if v == "" {
		return b
	}
	return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), v)
}

// decodeBatch calls fn with each mutation of a frame's payload, in order.
func decodeBatch(payload []byte, fn func(m mutation) error) error {
	for len(payload) > 0 {
		num, typ, n := protowire.ConsumeTag(payload)
		if n < 0 {
			return protowire.ParseError(n)
		}
		payload = payload[n:]
		if num != fieldBatchMutations || typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, payload)
			if n < 0 {
				return protowire.ParseError(n)
			}
			payload = payload[n:]
			continue
		}
		enc, n := protowire.ConsumeBytes(payload)
		if n < 0 {
			return protowire.ParseError(n)
		}
		payload = payload[n:]
		m, err := decodeMutation(enc)
		if err != nil {
			return err
		}
		if err := fn(m); err != nil {
			return err
		}
	}
	return nil
}

func decodeMutation(b []byte) (mutation, error) {
	var m mutation
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return m, protowire.ParseError(n)
		}
		b = b[n:]
		var v uint64
		var raw []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			raw, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return m, protowire.ParseError(n)
		}
		b = b[n:]
		var err error
		switch {
		case num == fieldKind && typ == protowire.VarintType:
			m.kind = mutationKind(v)
		case num == fieldQueue && typ == protowire.BytesType:
			m.queue = &cloudtaskspb.Queue{}
			err = proto.Unmarshal(raw, m.queue)
		case num == fieldTask && typ == protowire.BytesType:
			m.task = &cloudtaskspb.Task{}
			err = proto.Unmarshal(raw, m.task)
		case num == fieldName && typ == protowire.BytesType:
			m.name = string(raw)
		case num == fieldTimeUnixNanos && typ == protowire.VarintType:
			m.at = time.Unix(0, int64(v))
		case num == fieldExecutionCount && typ == protowire.VarintType:
			m.execs = int32(v)
		case num == fieldPreviousResponse && typ == protowire.VarintType:
			m.prevCode = int32(v)
		case num == fieldRetryReason && typ == protowire.BytesType:
			m.prevReason = string(raw)
		case num == fieldCount && typ == protowire.VarintType:
			m.count = int64(v)
		}
		if err != nil {
			return m, err
		}
	}
	return m, nil
}

// The constructors below are what the RPCs and the dispatcher log. They point into the live
// objects, which keep changing once s.mu is released: store.append encodes them at once.

func putQueue(q *queue) mutation { return mutation{kind: queuePut, queue: q.pb} }

func createdTask(t *task) mutation {
	return mutation{kind: taskCreated, task: t.pb, execs: t.execs, prevCode: int32(t.prevCode), prevReason: t.prevReason}
}

func attemptedTask(t *task) mutation {
	pb := t.pb
	return mutation{kind: taskAttempted, task: &cloudtaskspb.Task{
		Name:          pb.Name,
		ScheduleTime:  pb.ScheduleTime,
		DispatchCount: pb.DispatchCount,
		ResponseCount: pb.ResponseCount,
		FirstAttempt:  pb.FirstAttempt,
		LastAttempt:   pb.LastAttempt,
	}, execs: t.execs, prevCode: int32(t.prevCode), prevReason: t.prevReason}
}

// applyLocked replays m on the state being recovered (queues not started). s.mu is held.
// A mutation that names a queue or task the state lacks means the log does not follow its
// snapshot: an error, never a change skipped silently. Deletions are the exception, as they
// also carry name tombstones, which outlive their queue.
func (s *Server) applyLocked(m mutation, now time.Time) error {
	switch m.kind {
	case queuePut:
		if m.queue == nil {
			return fmt.Errorf("%v without a queue", m.kind)
		}
		name := m.queue.GetName()
		if q, ok := s.queues[name]; ok {
			rl := m.queue.GetRateLimits()
			q.pb = m.queue
			q.bucket = retry.NewBucket(rl.GetMaxDispatchesPerSecond(), int(rl.GetMaxBurstSize()), now)
		} else {
			s.queues[name] = newQueue(m.queue, now)
		}
		delete(s.queueTomb, name)
	case queuePurged:
		q, ok := s.queues[m.name]
		if !ok {
			return fmt.Errorf("%v of queue %s, which does not exist", m.kind, m.name)
		}
		for id, t := range q.tasks {
			if !t.pb.GetCreateTime().AsTime().After(m.at) {
				delete(q.tasks, id)
			}
		}
		q.pb.PurgeTime = timestamppb.New(m.at)
	case queueDeleted:
		delete(s.queues, m.name)
		s.queueTomb[m.name] = m.at
	case taskCreated:
		if m.task == nil {
			return fmt.Errorf("%v without a task", m.kind)
		}
		qname, id, err := parseTaskName(m.task.GetName())
		if err != nil {
			return fmt.Errorf("%v: %w", m.kind, err)
		}
		q, ok := s.queues[qname]
		if !ok {
			return fmt.Errorf("%v %s in queue %s, which does not exist", m.kind, m.task.GetName(), qname)
		}
		q.tasks[id] = &task{pb: m.task, execs: m.execs, prevCode: int(m.prevCode), prevReason: m.prevReason}
		delete(s.taskTomb, m.task.GetName())
	case taskAttempted:
		t, err := s.recoveredTaskLocked(m)
		if err != nil {
			return err
		}
		pb := t.pb
		pb.ScheduleTime, pb.DispatchCount, pb.ResponseCount = m.task.ScheduleTime, m.task.DispatchCount, m.task.ResponseCount
		pb.FirstAttempt, pb.LastAttempt = m.task.FirstAttempt, m.task.LastAttempt
		t.execs, t.prevCode, t.prevReason = m.execs, int(m.prevCode), m.prevReason
	case taskDeleted:
		if qname, id, err := parseTaskName(m.name); err == nil {
			if q, ok := s.queues[qname]; ok {
				delete(q.tasks, id)
			}
		}
		s.taskTomb[m.name] = m.at
	default:
		return fmt.Errorf("unknown mutation %v", m.kind)
	}
	return nil
}

func (s *Server) recoveredTaskLocked(m mutation) (*task, error) {
	if m.task == nil {
		return nil, fmt.Errorf("%v without a task", m.kind)
	}
	qname, id, err := parseTaskName(m.task.GetName())
	if err != nil {
		return nil, fmt.Errorf("%v: %w", m.kind, err)
	}
	if q, ok := s.queues[qname]; ok {
		if t, ok := q.tasks[id]; ok {
			return t, nil
		}
	}
	return nil, fmt.Errorf("%v of task %s, which does not exist", m.kind, m.task.GetName())
}

// finishRecoveryLocked drops name tombstones that expired while the emulator was down and
// fills the queues' due heaps (replay only filled their task maps). s.mu is held.
func (s *Server) finishRecoveryLocked(now time.Time) {
	for name, at := range s.queueTomb {
		if now.Sub(at) >= s.opts.QueueReuseWindow {
			delete(s.queueTomb, name)
		}
	}
	for name, at := range s.taskTomb {
		if now.Sub(at) >= s.opts.NameReuseWindow {
			delete(s.taskTomb, name)
		}
	}
	for _, q := range s.queues {
		q.due = nil
		for _, t := range q.tasks {
			q.scheduleLocked(t)
		}
	}
}
