package tasksemu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/google/go-cmp/cmp"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// stateDump is everything the data dir keeps, in a form cmp can compare.
type stateDump struct {
	Queues    map[string]*cloudtaskspb.Queue
	Tasks     map[string]taskDump // by full name
	QueueTomb map[string]time.Time
	TaskTomb  map[string]time.Time
}

type taskDump struct {
	Task       *cloudtaskspb.Task
	Execs      int32
	PrevCode   int
	PrevReason string
}

func dumpState(s *Server) stateDump {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := stateDump{Queues: map[string]*cloudtaskspb.Queue{}, Tasks: map[string]taskDump{}, QueueTomb: map[string]time.Time{}, TaskTomb: map[string]time.Time{}}
	for name, q := range s.queues {
		d.Queues[name] = proto.Clone(q.pb).(*cloudtaskspb.Queue)
		for _, t := range q.tasks {
			d.Tasks[t.pb.Name] = taskDump{proto.Clone(t.pb).(*cloudtaskspb.Task), t.execs, t.prevCode, t.prevReason}
		}
	}
	for name, at := range s.queueTomb {
		d.QueueTomb[name] = at
	}
	for name, at := range s.taskTomb {
		d.TaskTomb[name] = at
	}
	return d
}

func diffState(want, got stateDump) string { return cmp.Diff(want, got, protocmp.Transform()) }

// recoverDir runs the data dir's recovery alone (no listeners, no dispatchers) and returns the
// state it rebuilt. Like Start, it may repair dir (drop a torn tail, finish a migration).
func recoverDir(dir string) (stateDump, error) {
	s := &Server{
		opts:      Options{NameReuseWindow: time.Hour, QueueReuseWindow: 72 * time.Hour, Logf: func(string, ...any) {}},
		queues:    map[string]*queue{},
		queueTomb: map[string]time.Time{},
		taskTomb:  map[string]time.Time{},
	}
	st, err := openStore(dir, s.opts.Logf, storeTuning{})
	if err != nil {
		return stateDump{}, err
	}
	err = st.load(s)
	if st.log != nil {
		st.log.Close()
	}
	if err != nil {
		return stateDump{}, err
	}
	return dumpState(s), nil
}

// copyDataDir copies the data dir's files (not the signing key) into a new directory, with
// the log replaced by logData when it is not nil.
func copyDataDir(t *testing.T, dir string, logData []byte) string {
	t.Helper()
	dst := t.TempDir()
	for _, name := range []string{snapshotFile, logFile, legacyFile} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if name == logFile && logData != nil {
			data = logData
		}
		if err := os.WriteFile(filepath.Join(dst, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// logFrames returns the log's data and its intact frames.
func logFrames(t *testing.T, dir string) ([]byte, []frame) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, logFile))
	if err != nil {
		t.Fatal(err)
	}
	frames, end, err := readFrames(logFile, data, true)
	if err != nil || end != int64(len(data)) {
		t.Fatalf("the log of a cleanly closed emulator: end %d of %d bytes, %v", end, len(data), err)
	}
	return data, frames
}

// frameKinds lists the mutation kinds of a frame.
func frameKinds(t *testing.T, f frame) []mutationKind {
	t.Helper()
	var kinds []mutationKind
	if err := decodeBatch(f.payload, func(m mutation) error { kinds = append(kinds, m.kind); return nil }); err != nil {
		t.Fatal(err)
	}
	return kinds
}

// fillDataDir makes a data dir whose log holds one frame per change (each RPC waits for its
// own): a paused queue, tasks created, one deleted, one attempted (dispatch bookkeeping), and,
// last, the task named "last".
func fillDataDir(t *testing.T) (dir string, lastTask string) {
	t.Helper()
	ctx := context.Background()
	dir = t.TempDir()
	tg := newTarget(t, func(n int, w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	s, c := startServer(t, Options{DataDir: dir})
	q := createQueue(t, c, &cloudtaskspb.Queue{RetryConfig: fastRetry(100)}).Name
	failing := createTask(t, c, q, httpTask(tg.URL+"/failing"))
	eventually(t, 10*time.Second, "a failed attempt", func() bool {
		got, err := c.GetTask(ctx, &cloudtaskspb.GetTaskRequest{Name: failing.Name})
		return err == nil && got.DispatchCount >= 1
	})
	if _, err := c.PauseQueue(ctx, &cloudtaskspb.PauseQueueRequest{Name: q}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		task := httpTask(fmt.Sprintf("http://example.com/%d", i))
		task.Name = fmt.Sprintf("%s/tasks/t%d", q, i)
		task.GetHttpRequest().Body = bytes.Repeat([]byte{byte('a' + i)}, 100)
		createTask(t, c, q, task)
	}
	if err := c.DeleteTask(ctx, &cloudtaskspb.DeleteTaskRequest{Name: q + "/tasks/t2"}); err != nil {
		t.Fatal(err)
	}
	last := httpTask("http://example.com/last")
	last.Name = q + "/tasks/last"
	createTask(t, c, q, last)
	c.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, last.Name
}

// TestLogTornTailIsDropped cuts the log at every byte offset inside its last record, as a crash
// in the middle of appending it would: recovery keeps every earlier record and drops the torn
// one (whose fsync never returned, so no client was told about it).
func TestLogTornTailIsDropped(t *testing.T) {
	dir, last := fillDataDir(t)
	data, frames := logFrames(t, dir)
	full, err := recoverDir(copyDataDir(t, dir, nil))
	if err != nil {
		t.Fatal(err)
	}
	lastFrame := frames[len(frames)-1]
	if kinds := frameKinds(t, lastFrame); !cmp.Equal(kinds, []mutationKind{taskCreated}) {
		t.Fatalf("last frame holds %v, want the creation of %s alone", kinds, last)
	}
	if _, ok := full.Tasks[last]; !ok {
		t.Fatalf("the full log does not restore %s", last)
	}
	before, err := recoverDir(copyDataDir(t, dir, data[:lastFrame.offset]))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := before.Tasks[last]; ok {
		t.Fatalf("the log without its last record still restores %s", last)
	}

	for cut := lastFrame.offset + 1; cut < int64(len(data)); cut++ {
		crashed := copyDataDir(t, dir, data[:cut])
		got, err := recoverDir(crashed)
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		if diff := diffState(before, got); diff != "" {
			t.Fatalf("cut at %d of %d: state (-want +got):\n%s", cut, len(data), diff)
		}
		// Recovery truncated the torn record away, so that appends do not bury it mid-log.
		if fi, err := os.Stat(filepath.Join(crashed, logFile)); err != nil || fi.Size() != lastFrame.offset {
			t.Fatalf("cut at %d: log is %v bytes after recovery (%v), want %d", cut, fi.Size(), err, lastFrame.offset)
		}
	}

	// A torn write may also leave the last record at its full length with garbage in it, or
	// zeros past it (blocks allocated but never written).
	garbled := bytes.Clone(data)
	garbled[len(garbled)-3] ^= 0xff
	for name, log := range map[string][]byte{
		"garbled last record": garbled,
		"zeros after the end": append(bytes.Clone(data), make([]byte, 4096)...),
	} {
		got, err := recoverDir(copyDataDir(t, dir, log))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := before
		if strings.HasPrefix(name, "zeros") {
			want = full
		}
		if diff := diffState(want, got); diff != "" {
			t.Errorf("%s: state (-want +got):\n%s", name, diff)
		}
	}
}

// TestLogDamageIsAnError: damage that is not a torn tail (an intact record follows it, or it is
// in the snapshot, written whole) stops Start with an error naming the file and the offset,
// rather than starting with part of the state.
func TestLogDamageIsAnError(t *testing.T) {
	dir, _ := fillDataDir(t)
	data, frames := logFrames(t, dir)
	if len(frames) < 4 {
		t.Fatalf("%d frames, want at least 4", len(frames))
	}
	mid := frames[2]
	payloadByte := bytes.Clone(data)
	payloadByte[mid.offset+frameHeaderSize+2] ^= 0x01
	lengthByte := bytes.Clone(data)
	lengthByte[mid.offset] ^= 0x40
	for name, log := range map[string][]byte{"payload": payloadByte, "length": lengthByte} {
		_, err := recoverDir(copyDataDir(t, dir, log))
		var ce *corruptError
		if !errors.As(err, &ce) || ce.offset != mid.offset || filepath.Base(ce.path) != logFile {
			t.Errorf("%s byte of the record at %d damaged: err = %v, want a corruptError at that offset of %s", name, mid.offset, err, logFile)
		}
		if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("offset %d", mid.offset)) {
			t.Errorf("error %q does not name the offset", err)
		}
		// Start reports it too, and leaves the file as it was.
		crashed := copyDataDir(t, dir, log)
		if _, err := Start(context.Background(), Options{DataDir: crashed}); err == nil || !strings.Contains(err.Error(), logFile) {
			t.Errorf("%s: Start = %v, want an error naming %s", name, err, logFile)
		}
		if got, _ := os.ReadFile(filepath.Join(crashed, logFile)); !bytes.Equal(got, log) {
			t.Errorf("%s: the damaged log was changed", name)
		}
	}

	// The snapshot is replaced whole by a rename, so any damage to it is corruption.
	snap, err := os.ReadFile(filepath.Join(dir, snapshotFile))
	if err != nil {
		t.Fatal(err)
	}
	for name, damaged := range map[string][]byte{
		"cut short":      snap[:len(snap)-1],
		"flipped byte":   append(append(bytes.Clone(snap[:fileHeaderSize+frameHeaderSize]), snap[fileHeaderSize+frameHeaderSize]^1), snap[fileHeaderSize+frameHeaderSize+1:]...),
		"no records":     snap[:fileHeaderSize],
		"damaged header": append([]byte("TASKSNAX"), snap[8:]...),
	} {
		bad := copyDataDir(t, dir, nil)
		if err := os.WriteFile(filepath.Join(bad, snapshotFile), damaged, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := recoverDir(bad)
		var ce *corruptError
		if !errors.As(err, &ce) || filepath.Base(ce.path) != snapshotFile {
			t.Errorf("snapshot %s: err = %v, want a corruptError of %s", name, err, snapshotFile)
		}
	}

	// A log without the snapshot it follows.
	alone := copyDataDir(t, dir, nil)
	os.Remove(filepath.Join(alone, snapshotFile))
	if _, err := recoverDir(alone); err == nil || !strings.Contains(err.Error(), snapshotFile) {
		t.Errorf("log without snapshot: err = %v, want one naming %s", err, snapshotFile)
	}
}

// TestCompaction: once the log outgrows the state, the flusher replaces it with a snapshot of
// the next generation and an empty log; the state read back is the state that was written.
func TestCompaction(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const minBytes = 16 << 10
	s, err := Start(ctx, Options{DataDir: dir, tuning: storeTuning{compactMinBytes: minBytes}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := newClient(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	q := createQueue(t, c, nil).Name
	if _, err := c.PauseQueue(ctx, &cloudtaskspb.PauseQueueRequest{Name: q}); err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("x"), 200)
	var written int // bytes of task bodies alone that went through the log
	for i := range 400 {
		task := httpTask("http://example.com/")
		task.Name = fmt.Sprintf("%s/tasks/t%d", q, i)
		task.GetHttpRequest().Body = body
		createTask(t, c, q, task)
		written += len(body)
		if i%8 != 0 {
			if err := c.DeleteTask(ctx, &cloudtaskspb.DeleteTaskRequest{Name: task.Name}); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := dumpState(s)
	c.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if len(want.Tasks) != 50 {
		t.Fatalf("%d tasks, want 50", len(want.Tasks))
	}

	snap, err := os.ReadFile(filepath.Join(dir, snapshotFile))
	if err != nil {
		t.Fatal(err)
	}
	gen, err := parseFileHeader(snapshotFile, snap, snapshotMagic)
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(filepath.Join(dir, logFile))
	if err != nil {
		t.Fatal(err)
	}
	logGen, err := parseFileHeader(logFile, log, logMagic)
	if err != nil {
		t.Fatal(err)
	}
	// written is 80 KB: five times the threshold, so the log was compacted several times and
	// is now below the threshold (the flusher checks after each write).
	if gen < 3 || logGen != gen {
		t.Errorf("snapshot generation %d, log generation %d: want the same, at least 3", gen, logGen)
	}
	if limit := max(minBytes, compactRatio*len(snap)); len(log) >= limit || len(log) >= written {
		t.Errorf("log is %d bytes (%d bytes of bodies written, snapshot %d bytes): want under %d", len(log), written, len(snap), limit)
	}
	got, err := recoverDir(copyDataDir(t, dir, nil))
	if err != nil {
		t.Fatal(err)
	}
	if diff := diffState(want, got); diff != "" {
		t.Errorf("state after reopening (-want +got):\n%s", diff)
	}

	// A compaction interrupted after its snapshot was in place but before the new log was:
	// the old log (of the previous generation) is ignored, as the snapshot holds its changes.
	before := t.TempDir()
	s2, c2 := startServer(t, Options{DataDir: before})
	q2 := createQueue(t, c2, nil).Name
	createTask(t, c2, q2, httpTask("http://example.com/a"))
	wantBefore := dumpState(s2)
	snap, err = os.ReadFile(filepath.Join(before, snapshotFile))
	if err != nil {
		t.Fatal(err)
	}
	gen, err = parseFileHeader(snapshotFile, snap, snapshotMagic)
	if err != nil {
		t.Fatal(err)
	}
	s2.mu.Lock()
	ms := s2.snapshotLocked()
	s2.mu.Unlock()
	next, err := encodeSnapshot(gen+1, ms)
	if err != nil {
		t.Fatal(err)
	}
	interrupted := copyDataDir(t, before, nil)
	if err := os.WriteFile(filepath.Join(interrupted, snapshotFile), next, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err = recoverDir(interrupted)
	if err != nil {
		t.Fatal(err)
	}
	if diff := diffState(wantBefore, got); diff != "" {
		t.Errorf("state after an interrupted compaction (-want +got):\n%s", diff)
	}
	log, _ = os.ReadFile(filepath.Join(interrupted, logFile))
	if g, err := parseFileHeader(logFile, log, logMagic); err != nil || g != gen+1 || len(log) != fileHeaderSize {
		t.Errorf("log after an interrupted compaction: generation %d (%v), %d bytes; want an empty log of generation %d", g, err, len(log), gen+1)
	}
}

// TestGroupCommit: RPCs that arrive while a write is in progress share the next write, and
// every one of them is on disk when it returns (read back while the emulator still runs, as a
// kill -9 would leave it).
func TestGroupCommit(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var armed atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	s, c := startServer(t, Options{DataDir: dir, tuning: storeTuning{beforeWrite: func() {
		if armed.CompareAndSwap(true, false) {
			close(entered)
			<-release
		}
	}}})
	q := createQueue(t, c, nil).Name
	if _, err := c.PauseQueue(ctx, &cloudtaskspb.PauseQueueRequest{Name: q}); err != nil {
		t.Fatal(err)
	}

	armed.Store(true)
	firstDone := make(chan error, 1)
	go func() {
		_, err := c.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: q, Task: &cloudtaskspb.Task{Name: q + "/tasks/first", MessageType: httpTask("http://example.com/").MessageType}})
		firstDone <- err
	}()
	<-entered // the flusher is about to write the first task's frame, and waits
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			task := httpTask("http://example.com/")
			task.Name = fmt.Sprintf("%s/tasks/g%d", q, i)
			_, err := c.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: q, Task: task})
			errs <- err
		}()
	}
	eventually(t, 10*time.Second, "the concurrent CreateTasks to be appended", func() bool {
		s.store.mu.Lock()
		defer s.store.mu.Unlock()
		return s.store.npending == n
	})
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}

	// Every task acknowledged is on disk, without Close.
	got, err := recoverDir(copyDataDir(t, dir, nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Tasks) != n+1 {
		t.Errorf("%d tasks read back, want %d", len(got.Tasks), n+1)
	}
	// And the twenty shared one frame (one write, one fsync).
	_, frames := logFrames(t, dir)
	var sizes []int
	for _, f := range frames {
		if kinds := frameKinds(t, f); kinds[0] == taskCreated {
			sizes = append(sizes, len(kinds))
		}
	}
	if !cmp.Equal(sizes, []int{1, n}) {
		t.Errorf("frames of created tasks hold %v mutations, want [1 %d]", sizes, n)
	}
}

// TestLegacyDataDirIsMigrated starts on a data dir written by the emulator before the log
// (testdata/legacy-v1/tasks.json, made by that version: a paused queue with a task attempted
// once, one with a body and headers, one with an OIDC token, a deleted task and a deleted
// queue). Start reads it once, writes the new format, removes it, and goes on from there.
func TestLegacyDataDirIsMigrated(t *testing.T) {
	ctx := context.Background()
	const q = loc + "/queues/legacy"
	legacy, err := os.ReadFile("testdata/legacy-v1/tasks.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, legacyFile), legacy, 0o644); err != nil {
		t.Fatal(err)
	}
	// The fixture's tombstones are from the day it was made: keep them taken.
	const forever = 100 * 365 * 24 * time.Hour
	opts := Options{DataDir: dir, NameReuseWindow: forever, QueueReuseWindow: forever}
	for _, start := range []string{"migrating", "restarted"} {
		s, c := startServer(t, opts)
		if _, err := os.Stat(filepath.Join(dir, legacyFile)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: %s still there (%v)", start, legacyFile, err)
		}
		got, err := c.GetQueue(ctx, &cloudtaskspb.GetQueueRequest{Name: q})
		if err != nil {
			t.Fatal(err)
		}
		if got.State != cloudtaskspb.Queue_PAUSED || got.RateLimits.MaxDispatchesPerSecond != 42 || got.RetryConfig.MaxAttempts != 7 {
			t.Errorf("%s: queue %v", start, got)
		}
		retried, err := c.GetTask(ctx, &cloudtaskspb.GetTaskRequest{Name: q + "/tasks/retried"})
		if err != nil {
			t.Fatal(err)
		}
		if retried.DispatchCount != 1 || retried.ResponseCount != 1 || retried.LastAttempt.GetResponseStatus().GetCode() != int32(codes.Unavailable) {
			t.Errorf("%s: attempted task %v", start, retried)
		}
		s.mu.Lock()
		rt := s.queues[q].tasks["retried"]
		prevCode, prevReason := rt.prevCode, rt.prevReason
		s.mu.Unlock()
		if prevCode != 503 || prevReason != "HTTP_503" {
			t.Errorf("%s: previous response %d %q, want 503 HTTP_503", start, prevCode, prevReason)
		}
		body, err := c.GetTask(ctx, &cloudtaskspb.GetTaskRequest{Name: q + "/tasks/body", ResponseView: cloudtaskspb.Task_FULL})
		if err != nil {
			t.Fatal(err)
		}
		if hr := body.GetHttpRequest(); string(hr.Body) != "kept" || hr.Headers["X-Kept"] != "yes" {
			t.Errorf("%s: task with a body %v", start, body)
		}
		oidcTask, err := c.GetTask(ctx, &cloudtaskspb.GetTaskRequest{Name: q + "/tasks/oidc"})
		if err != nil {
			t.Fatal(err)
		}
		if oidcTask.GetHttpRequest().GetOidcToken().GetServiceAccountEmail() != "a@b.iam.gserviceaccount.com" {
			t.Errorf("%s: OIDC task %v", start, oidcTask)
		}
		_, err = c.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: q, Task: &cloudtaskspb.Task{Name: q + "/tasks/gone", MessageType: httpTask("http://example.com/").MessageType}})
		wantCode(t, err, codes.AlreadyExists)
		_, err = c.CreateQueue(ctx, &cloudtaskspb.CreateQueueRequest{Parent: loc, Queue: &cloudtaskspb.Queue{Name: loc + "/queues/legacy-deleted"}})
		wantCode(t, err, codes.FailedPrecondition)
		c.Close()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// A migration interrupted after the new snapshot was in place: the new files win and the
	// old file goes.
	interrupted := copyDataDir(t, dir, nil)
	if err := os.WriteFile(filepath.Join(interrupted, legacyFile), []byte("{not even json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := recoverDir(interrupted); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(interrupted, legacyFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the old file survived an interrupted migration's recovery (%v)", err)
	}

	// An old file of a version this emulator does not know is refused, and left alone.
	future := t.TempDir()
	if err := os.WriteFile(filepath.Join(future, legacyFile), []byte(`{"version":2,"queues":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Start(ctx, Options{DataDir: future}); err == nil || !strings.Contains(err.Error(), "version 2") {
		t.Errorf("Start on a version 2 snapshot: %v, want an error naming the version", err)
	}
	if _, err := os.Stat(filepath.Join(future, legacyFile)); err != nil {
		t.Errorf("the refused file was touched: %v", err)
	}
}

// TestFrozenTaskCopiesEveryField guards frozenTask (the snapshot's copy of a task) against a
// Task message that gains a field it would not copy.
func TestFrozenTaskCopiesEveryField(t *testing.T) {
	var names []string
	fields := (&cloudtaskspb.Task{}).ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		names = append(names, string(fields.Get(i).Name()))
	}
	want := []string{"name", "app_engine_http_request", "http_request", "schedule_time", "create_time",
		"dispatch_deadline", "dispatch_count", "response_count", "first_attempt", "last_attempt", "view", "retry_config"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Fatalf("cloudtaskspb.Task's fields changed (-known +now); update frozenTask:\n%s", diff)
	}
	now := timestamppb.Now()
	attempt := &cloudtaskspb.Attempt{ScheduleTime: now, DispatchTime: now, ResponseTime: now, ResponseStatus: &spb.Status{Code: 14, Message: "x"}}
	pb := &cloudtaskspb.Task{
		Name: loc + "/queues/q/tasks/t",
		MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
			Url: "http://example.com/", HttpMethod: cloudtaskspb.HttpMethod_PUT, Headers: map[string]string{"A": "b"}, Body: []byte("x"),
			AuthorizationHeader: &cloudtaskspb.HttpRequest_OidcToken{OidcToken: &cloudtaskspb.OidcToken{ServiceAccountEmail: "a@b", Audience: "c"}},
		}},
		ScheduleTime: now, CreateTime: now, DispatchDeadline: durationpb.New(time.Minute),
		DispatchCount: 3, ResponseCount: 2, FirstAttempt: attempt, LastAttempt: attempt, View: cloudtaskspb.Task_FULL,
		RetryConfig: fastRetry(3),
	}
	if got := frozenTask(pb); !proto.Equal(pb, got) {
		t.Errorf("frozenTask(%v) = %v", pb, got)
	}
}
