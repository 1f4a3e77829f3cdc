package tasksemu

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/protobuf/proto"

	"github.com/spanmart/spanmart/internal/atomicfile"
)

// Persistence (Options.DataDir) is a write-ahead log of mutations (mutation.go) after a
// snapshot of the state, in the format of wal.go (README.md, "Data dir format").
//
// Every change appends its mutation to the next frame while Server.mu is held. A single
// flusher goroutine writes frames: one write and one fsync for everything appended since the
// previous one (a group commit), after which it answers the RPCs waiting for durability
// (Server.durableInterceptor). A mutating RPC therefore returns only once its change is on
// disk, so a kill -9 loses nothing a client was told about, and concurrent RPCs share the
// fsync instead of queueing for one each. A write costs what the changes cost, not what the
// state weighs: deep queues no longer slow CreateTask down (the snapshot rewritten per change
// they replace did, README.md "Benchmarks").
//
// When the log outgrows compactRatio times the last snapshot (and compactMinBytes), the
// flusher compacts: the whole state becomes the snapshot of the next generation (temporary
// file, fsync, rename, fsync of the directory) and an empty log of that generation replaces
// the old one the same way. Recovery replays the snapshot, then the log if it is of the same
// generation (an older one is what a compaction cut short left behind: the snapshot already
// holds it), dropping a torn last frame.

// flushDelay batches bursts of background changes (dispatch bookkeeping) into one write.
// Changes a client was told about are never left to it: an RPC waiting for durability makes
// the flusher write at once.
const flushDelay = 20 * time.Millisecond

const (
	// compactRatio: the log is compacted once it is this many times the size of the snapshot,
	compactRatio = 2
	// defaultCompactMinBytes: and at least this long (replaying that much takes well under a
	// second, and a nearly empty state is not rewritten every few changes).
	defaultCompactMinBytes = 4 << 20
	// snapshotFrameSize is the payload size from which a snapshot starts a new frame.
	snapshotFrameSize = 1 << 20
)

// storeTuning adjusts the store for this package's tests (Options.tuning).
type storeTuning struct {
	compactMinBytes int64  // 0: defaultCompactMinBytes
	beforeWrite     func() // called by the flusher before it writes a log frame
}

// store is the data dir of a Server.
type store struct {
	dir    string
	logf   func(format string, args ...any)
	tuning storeTuning

	// Used by one goroutine at a time: load, then the flusher, then close.
	log      *os.File
	gen      uint64 // generation of the snapshot and of the log
	logSize  int64  // bytes in the log: the offset of the next frame
	snapSize int64
	// broken is the error of a failed write: the log may lack changes that memory has, so
	// nothing is acknowledged until a snapshot of memory is in place (the next flush compacts).
	broken error

	dirty chan struct{} // a change is pending (buffered: one signal is enough)
	want  chan struct{} // an RPC waits for durability (buffered)
	stop  chan struct{}
	done  chan struct{} // closed when the flusher has returned; nil until it starts

	mu       sync.Mutex
	pending  []byte // the next frame: frameHeaderSize reserved bytes, then Batch.mutations
	npending int    // mutations in pending
	spare    []byte // a written frame's buffer, for reuse
	encErr   error  // a mutation that could not be encoded (so is not in pending)
	waiters  []chan error
	closed   bool
}

func openStore(dir string, logf func(string, ...any), tuning storeTuning) (*store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if tuning.compactMinBytes <= 0 {
		tuning.compactMinBytes = defaultCompactMinBytes
	}
	// Leftovers of an atomic write cut short; the files they were to replace are intact.
	for _, name := range []string{snapshotFile, logFile} {
		if err := os.Remove(filepath.Join(dir, name+atomicfile.TempSuffix)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	return &store{
		dir:     dir,
		logf:    logf,
		tuning:  tuning,
		dirty:   make(chan struct{}, 1),
		want:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		pending: newFrame(nil),
	}, nil
}

func (st *store) path(name string) string { return filepath.Join(st.dir, name) }

// newFrame returns buf emptied, with the frame header's bytes reserved.
func newFrame(buf []byte) []byte {
	if cap(buf) < frameHeaderSize {
		buf = make([]byte, 0, 64<<10)
	}
	return buf[:frameHeaderSize]
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// append records m, made while Server.mu is held, in the next group commit.
func (st *store) append(m mutation) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return
	}
	b, err := appendMutation(st.pending, m)
	if err != nil {
		st.encErr = err
	} else {
		st.pending = b
		st.npending++
	}
	signal(st.dirty)
}

// durable returns a channel that receives the outcome of the next group commit, which
// includes every mutation appended before the call.
func (st *store) durable() <-chan error {
	c := make(chan error, 1)
	st.mu.Lock()
	if st.closed {
		st.mu.Unlock()
		c <- errors.New("the emulator is shutting down")
		return c
	}
	st.waiters = append(st.waiters, c)
	st.mu.Unlock()
	signal(st.want)
	return c
}

// take hands the pending frame and the RPCs waiting for it to the caller and starts a new one.
func (st *store) take() (frame []byte, n int, waiters []chan error, encErr error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	frame, n, waiters, encErr = st.pending, st.npending, st.waiters, st.encErr
	st.pending, st.npending, st.waiters, st.encErr = newFrame(st.spare), 0, nil, nil
	st.spare = nil
	return frame, n, waiters, encErr
}

// recycle keeps a written frame's buffer for a later frame, unless a huge task made it huge.
func (st *store) recycle(frame []byte) {
	if cap(frame) > 4<<20 {
		return
	}
	st.mu.Lock()
	st.spare = frame
	st.mu.Unlock()
}

func answer(waiters []chan error, err error) {
	for _, c := range waiters {
		c <- err
	}
}

func (st *store) startFlusher(s *Server) {
	st.done = make(chan struct{})
	go st.run(s)
}

func (st *store) run(s *Server) {
	defer close(st.done)
	delay := time.NewTimer(flushDelay)
	delay.Stop()
	for {
		select {
		case <-st.stop:
			return // close writes what is left
		case <-st.want:
		case <-st.dirty:
			// Background changes only, so far: let a burst of them share one write, unless an
			// RPC starts waiting meanwhile.
			delay.Reset(flushDelay)
			select {
			case <-st.stop:
				delay.Stop()
				return
			case <-st.want:
				delay.Stop()
			case <-delay.C:
			}
		}
		if err := st.flush(s); err != nil {
			st.logf("tasksemu: saving state to %s: %v", st.dir, err)
			continue
		}
		if st.logSize >= max(st.tuning.compactMinBytes, compactRatio*st.snapSize) {
			if err := st.compact(s, nil); err != nil {
				st.logf("tasksemu: compacting %s: %v", st.dir, err)
			}
		}
	}
}

// flush makes every mutation appended so far durable and answers the RPCs that wait for it.
func (st *store) flush(s *Server) error {
	if st.broken != nil {
		return st.compact(s, nil)
	}
	frame, n, waiters, err := st.take()
	if err == nil && n > 0 {
		err = st.writeFrame(frame)
	}
	st.recycle(frame)
	if err == nil {
		answer(waiters, nil)
		return nil
	}
	// The log now lacks changes that memory has; only a snapshot of memory covers them, and
	// its outcome is these RPCs' outcome.
	st.broken = err
	return st.compact(s, waiters)
}

// writeFrame appends one frame to the log and fsyncs it.
func (st *store) writeFrame(frame []byte) error {
	if st.tuning.beforeWrite != nil {
		st.tuning.beforeWrite()
	}
	sealFrame(frame)
	_, err := st.log.WriteAt(frame, st.logSize)
	if err == nil {
		err = st.log.Sync()
	}
	if err != nil {
		// Best effort: the next write is a compaction, which starts a new log anyway.
		st.log.Truncate(st.logSize)
		return fmt.Errorf("append to %s: %w", st.path(logFile), err)
	}
	st.logSize += int64(len(frame))
	return nil
}

// compact makes the whole state the snapshot of the next generation and starts its empty log;
// waiters and the RPCs waiting for the mutations the snapshot absorbs get its outcome.
func (st *store) compact(s *Server, waiters []chan error) error {
	s.mu.Lock()
	ms := s.snapshotLocked()
	// Everything appended so far is in the snapshot (appends happen under s.mu).
	frame, _, more, _ := st.take()
	s.mu.Unlock()
	st.recycle(frame)
	gen := st.gen + 1
	data, err := encodeSnapshot(gen, ms)
	if err == nil {
		err = st.install(gen, data)
	}
	st.broken = err
	answer(append(waiters, more...), err)
	return err
}

// install puts a snapshot of generation gen in place, then an empty log of that generation.
// A crash between the two leaves the new snapshot with the old log, which recovery ignores.
func (st *store) install(gen uint64, snapshot []byte) error {
	if err := atomicfile.Write(st.path(snapshotFile), snapshot); err != nil {
		return fmt.Errorf("write %s: %w", st.path(snapshotFile), err)
	}
	if err := atomicfile.Write(st.path(logFile), appendFileHeader(nil, logMagic, gen)); err != nil {
		return fmt.Errorf("start %s: %w", st.path(logFile), err)
	}
	log, err := os.OpenFile(st.path(logFile), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if st.log != nil {
		st.log.Close()
	}
	st.log, st.gen, st.logSize, st.snapSize = log, gen, fileHeaderSize, int64(len(snapshot))
	return nil
}

// close stops the flusher, writes what is left and closes the log.
func (st *store) close(s *Server) error {
	close(st.stop)
	if st.done != nil {
		<-st.done
	}
	err := st.flush(s)
	st.mu.Lock()
	st.closed = true
	st.mu.Unlock()
	if st.log != nil {
		if cerr := st.log.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// snapshotLocked returns the mutations that rebuild the whole state from nothing, detached
// from the live state so that they can be encoded without s.mu (compact releases it before
// encoding: marshalling 10,000 tasks under it stalled every RPC for tens of milliseconds).
// s.mu is held.
func (s *Server) snapshotLocked() []mutation {
	ms := make([]mutation, 0, len(s.queueTomb)+len(s.taskTomb)+len(s.queues))
	// Tombstones first: a queue or task created later takes its name back, in replay as live.
	for name, at := range s.queueTomb {
		ms = append(ms, mutation{kind: queueDeleted, name: name, at: at})
	}
	for name, at := range s.taskTomb {
		ms = append(ms, mutation{kind: taskDeleted, name: name, at: at})
	}
	for _, q := range s.queues {
		ms = append(ms, mutation{kind: queuePut, queue: proto.Clone(q.pb).(*cloudtaskspb.Queue)})
		for _, t := range q.tasks {
			m := createdTask(t)
			m.task = frozenTask(t.pb)
			ms = append(ms, m)
		}
	}
	return ms
}

// frozenTask returns a copy of pb that shares its sub-messages and copies its own fields. The
// copy stays as it is while the task goes on: nothing changes a task's sub-messages once they
// are set (run replaces schedule_time and the attempts with new ones), only its counters.
func frozenTask(pb *cloudtaskspb.Task) *cloudtaskspb.Task {
	return &cloudtaskspb.Task{
		Name:             pb.Name,
		MessageType:      pb.MessageType,
		ScheduleTime:     pb.ScheduleTime,
		CreateTime:       pb.CreateTime,
		DispatchDeadline: pb.DispatchDeadline,
		DispatchCount:    pb.DispatchCount,
		ResponseCount:    pb.ResponseCount,
		FirstAttempt:     pb.FirstAttempt,
		LastAttempt:      pb.LastAttempt,
		View:             pb.View,
		RetryConfig:      pb.RetryConfig,
	}
}

// encodeSnapshot returns a snapshot file of generation gen holding ms, then snapshotEnd.
func encodeSnapshot(gen uint64, ms []mutation) ([]byte, error) {
	b := appendFileHeader(make([]byte, 0, 64<<10), snapshotMagic, gen)
	start := len(b)
	b = append(b, make([]byte, frameHeaderSize)...)
	for _, m := range ms {
		var err error
		if b, err = appendMutation(b, m); err != nil {
			return nil, err
		}
		if len(b)-start-frameHeaderSize >= snapshotFrameSize {
			sealFrame(b[start:])
			start = len(b)
			b = append(b, make([]byte, frameHeaderSize)...)
		}
	}
	b, err := appendMutation(b, mutation{kind: snapshotEnd, count: int64(len(ms))})
	if err != nil {
		return nil, err
	}
	sealFrame(b[start:])
	return b, nil
}

// readIfExists returns the file's content, or nil when it does not exist.
func readIfExists(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return data, err
}

// load recovers the state into s (queues not yet started) and opens the log for appending.
func (st *store) load(s *Server) (err error) {
	defer func() {
		if err != nil && st.log != nil {
			st.log.Close() // Start fails: nothing else will
			st.log = nil
		}
	}()
	snapPath, logPath, legacyPath := st.path(snapshotFile), st.path(logFile), st.path(legacyFile)
	snapData, err := readIfExists(snapPath)
	if err != nil {
		return err
	}
	logData, err := readIfExists(logPath)
	if err != nil {
		return err
	}
	legacyData, err := readIfExists(legacyPath)
	if err != nil {
		return err
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case snapData == nil && logData != nil:
		return fmt.Errorf("%s exists without %s, the snapshot it follows: refusing to start with part of the state", logPath, snapPath)
	case snapData == nil && legacyData != nil:
		return st.migrateLocked(s, legacyData, now)
	case snapData == nil:
		// A new data dir: an empty snapshot and log of generation 1.
		data, err := encodeSnapshot(1, nil)
		if err != nil {
			return err
		}
		return st.install(1, data)
	}

	gen, err := parseFileHeader(snapPath, snapData, snapshotMagic)
	if err != nil {
		return err
	}
	if err := st.replaySnapshotLocked(s, snapPath, snapData, now); err != nil {
		return err
	}
	st.gen, st.snapSize = gen, int64(len(snapData))

	if logData != nil {
		logGen, err := parseFileHeader(logPath, logData, logMagic)
		if err != nil {
			return err
		}
		switch {
		case logGen > gen:
			return fmt.Errorf("%s is of generation %d but %s of generation %d: the snapshot the log follows is missing", logPath, logGen, snapPath, gen)
		case logGen < gen:
			st.logf("tasksemu: %s: ignoring a log of generation %d, older than the snapshot (%d): a compaction was interrupted after its snapshot was in place", st.dir, logGen, gen)
			logData = nil
		}
	}
	if logData == nil {
		if err := atomicfile.Write(logPath, appendFileHeader(nil, logMagic, gen)); err != nil {
			return err
		}
		logData = appendFileHeader(nil, logMagic, gen)
	}
	frames, end, err := readFrames(logPath, logData, true)
	if err != nil {
		return err
	}
	for _, f := range frames {
		if err := decodeBatch(f.payload, func(m mutation) error { return s.applyLocked(m, now) }); err != nil {
			return &corruptError{logPath, f.offset, err.Error()}
		}
	}
	st.log, err = os.OpenFile(logPath, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if end < int64(len(logData)) {
		// The last write was cut short by a crash: its fsync never returned, so none of its
		// changes was acknowledged. Appending after it would bury it mid-log.
		st.logf("tasksemu: %s: dropping a torn last record (%d bytes at offset %d)", logPath, int64(len(logData))-end, end)
		if err := st.log.Truncate(end); err != nil {
			return err
		}
		if err := st.log.Sync(); err != nil {
			return err
		}
	}
	st.logSize = end
	if legacyData != nil {
		// A migration stopped after the new snapshot was in place (migrateLocked): the old file
		// is already in it.
		if err := removeDurably(legacyPath); err != nil {
			return err
		}
	}
	s.finishRecoveryLocked(now)
	return nil
}

func (st *store) replaySnapshotLocked(s *Server, path string, data []byte, now time.Time) error {
	frames, _, err := readFrames(path, data, false)
	if err != nil {
		return err
	}
	count, ended := int64(0), false
	for _, f := range frames {
		err := decodeBatch(f.payload, func(m mutation) error {
			switch {
			case ended:
				return errors.New("records after snapshot_end")
			case m.kind == snapshotEnd:
				if m.count != count {
					return fmt.Errorf("snapshot_end counts %d records, the snapshot holds %d", m.count, count)
				}
				ended = true
				return nil
			}
			count++
			return s.applyLocked(m, now)
		})
		if err != nil {
			return &corruptError{path, f.offset, err.Error()}
		}
	}
	if !ended {
		return &corruptError{path, int64(len(data)), "the snapshot ends before its snapshot_end record"}
	}
	return nil
}

// migrateLocked reads a data dir of the format before the log (legacyFile) once, writes its
// state as a snapshot and an empty log of generation 1, and only then removes the old file: a
// crash at any point leaves either the old file alone (migrated again at the next start) or
// the new snapshot (which load prefers, removing the old file). s.mu is held.
func (st *store) migrateLocked(s *Server, legacyData []byte, now time.Time) error {
	legacyPath := st.path(legacyFile)
	ms, err := legacyMutations(legacyPath, legacyData)
	if err != nil {
		return err
	}
	for _, m := range ms {
		if err := s.applyLocked(m, now); err != nil {
			return fmt.Errorf("%s: %w", legacyPath, err)
		}
	}
	s.finishRecoveryLocked(now)
	data, err := encodeSnapshot(1, s.snapshotLocked())
	if err != nil {
		return err
	}
	if err := st.install(1, data); err != nil {
		return err
	}
	if err := removeDurably(legacyPath); err != nil {
		return err
	}
	st.logf("tasksemu: migrated %s to %s and %s (%d queues)", legacyPath, snapshotFile, logFile, len(s.queues))
	return nil
}

func removeDurably(path string) error {
	if err := os.Remove(path); err != nil {
		return err
	}
	return atomicfile.SyncDir(filepath.Dir(path))
}
