package tasksemu

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/protobuf/encoding/protojson"
)

// snapshotFile is the name, inside DataDir, of the state written by the store.
const snapshotFile = "tasks.json"

// flushDelay batches bursts of background changes (dispatch bookkeeping) into one write.
// Changes a client was told about are never left to it: every mutating RPC waits for a write
// that includes its change (see durable), so a crash (kill -9) loses nothing acknowledged.
const flushDelay = 20 * time.Millisecond

// groupCommitDelay is how long the flusher gathers RPCs waiting for durability into one write.
const groupCommitDelay = time.Millisecond

// store keeps the emulator's state in DataDir as one JSON snapshot, rewritten atomically
// (temporary file, fsync, rename) shortly after every change and on Close.
type store struct {
	path  string
	dirty chan struct{} // buffered: one pending signal is enough
	stop  chan struct{}
	done  chan struct{} // closed when the flusher has returned; nil until it starts

	mu      sync.Mutex
	waiters []chan error // RPCs waiting for the next write
	closed  bool
}

// durable returns a channel that receives the outcome of the next write, which includes every
// change made before the call.
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
	st.markDirty()
	return c
}

func (st *store) takeWaiters() []chan error {
	st.mu.Lock()
	defer st.mu.Unlock()
	w := st.waiters
	st.waiters = nil
	return w
}

func (st *store) hasWaiters() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.waiters) > 0
}

// flush writes the state and tells the waiters registered before it started.
func (st *store) flush(s *Server) error {
	w := st.takeWaiters()
	err := st.write(s)
	for _, c := range w {
		c <- err
	}
	return err
}

type snapshot struct {
	Version       int                  `json:"version"`
	Queues        []snapQueue          `json:"queues"`
	DeletedQueues map[string]time.Time `json:"deleted_queues,omitempty"`
	FinishedTasks map[string]time.Time `json:"finished_tasks,omitempty"`
}

type snapQueue struct {
	Queue json.RawMessage `json:"queue"` // cloudtaskspb.Queue in protojson
	Tasks []snapTask      `json:"tasks"`
}

type snapTask struct {
	Task       json.RawMessage `json:"task"` // cloudtaskspb.Task in protojson, FULL view
	Execs      int32           `json:"execs,omitempty"`
	PrevCode   int             `json:"prev_code,omitempty"`
	PrevReason string          `json:"prev_reason,omitempty"`
}

func openStore(dir string) (*store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &store{
		path:  filepath.Join(dir, snapshotFile),
		dirty: make(chan struct{}, 1),
		stop:  make(chan struct{}),
	}, nil
}

// load restores queues (not yet started), pending tasks and name tombstones into s.
func (st *store) load(s *Server) error {
	data, err := os.ReadFile(st.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var snap snapshot
	if err := json.Unmarshal(data, &snap); err != nil {
		return fmt.Errorf("%s: %w", st.path, err)
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sq := range snap.Queues {
		pb := &cloudtaskspb.Queue{}
		if err := protojson.Unmarshal(sq.Queue, pb); err != nil {
			return fmt.Errorf("%s: queue: %w", st.path, err)
		}
		q := newQueue(pb, now)
		for _, st2 := range sq.Tasks {
			tpb := &cloudtaskspb.Task{}
			if err := protojson.Unmarshal(st2.Task, tpb); err != nil {
				return fmt.Errorf("%s: task: %w", st.path, err)
			}
			t := &task{pb: tpb, execs: st2.Execs, prevCode: st2.PrevCode, prevReason: st2.PrevReason}
			q.addLocked(t)
		}
		s.queues[pb.Name] = q
	}
	for name, at := range snap.DeletedQueues {
		if now.Sub(at) < s.opts.QueueReuseWindow {
			s.queueTomb[name] = at
		}
	}
	for name, at := range snap.FinishedTasks {
		if now.Sub(at) < s.opts.NameReuseWindow {
			s.taskTomb[name] = at
		}
	}
	return nil
}

func (st *store) markDirty() {
	select {
	case st.dirty <- struct{}{}:
	default:
	}
}

func (st *store) startFlusher(s *Server) {
	st.done = make(chan struct{})
	go func() {
		defer close(st.done)
		for {
			select {
			case <-st.stop:
				return
			case <-st.dirty:
			}
			delay := flushDelay
			if st.hasWaiters() {
				delay = groupCommitDelay
			}
			select {
			case <-st.stop:
				return // close writes the final state
			case <-time.After(delay):
			}
			if err := st.flush(s); err != nil {
				s.opts.Logf("tasksemu: saving state: %v", err)
			}
		}
	}()
}

// close stops the flusher and writes the final state.
func (st *store) close(s *Server) error {
	close(st.stop)
	if st.done != nil {
		<-st.done
	}
	err := st.flush(s)
	st.mu.Lock()
	st.closed = true
	st.mu.Unlock()
	return err
}

func (st *store) write(s *Server) error {
	data, err := s.encodeSnapshot()
	if err != nil {
		return err
	}
	tmp := st.path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, st.path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if d, err := os.Open(filepath.Dir(st.path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

func (s *Server) encodeSnapshot() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := snapshot{Version: 1, DeletedQueues: maps.Clone(s.queueTomb), FinishedTasks: maps.Clone(s.taskTomb)}
	for _, q := range s.queues {
		var sq snapQueue
		var err error
		if sq.Queue, err = protojson.Marshal(q.pb); err != nil {
			return nil, err
		}
		for _, t := range q.tasks {
			stk := snapTask{Execs: t.execs, PrevCode: t.prevCode, PrevReason: t.prevReason}
			if stk.Task, err = protojson.Marshal(t.pb); err != nil {
				return nil, err
			}
			sq.Tasks = append(sq.Tasks, stk)
		}
		snap.Queues = append(snap.Queues, sq)
	}
	return json.Marshal(snap)
}
