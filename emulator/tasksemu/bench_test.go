package tasksemu

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/spanmart/spanmart/emulator/tasksemu/retry"
)

// The benchmarks go through the official client (ct, from TestMain) against the shared emulator
// and a target that only answers 200. They report throughput with b.ReportMetric and never
// compare it with a threshold: the figures and the targets they are compared with are in
// README.md ("Benchmarks").
//
//	go test ./emulator/tasksemu -run '^$' -bench . -benchtime 3s

// createCallers is how many goroutines call CreateTask at once in BenchmarkCreateTask.
const createCallers = 16

// BenchmarkCreateTask measures CreateTask calls per second with named tasks (each name unique)
// from createCallers concurrent callers. The queue is paused so that no dispatch competes for
// the emulator's lock or the CPU.
func BenchmarkCreateTask(b *testing.B) {
	ctx := context.Background()
	q := benchQueue(b, "create")
	pauseQueue(b, q)
	const url = "http://127.0.0.1:1/never-dispatched"

	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, createCallers)
	b.ResetTimer()
	for range createCallers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				task := httpTask(url)
				task.Name = fmt.Sprintf("%s/tasks/t%d", q, i)
				if _, err := ct.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: q, Task: task}); err != nil {
					errs <- fmt.Errorf("CreateTask %s: %w", task.Name, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
	deleteQueue(b, q)
}

// BenchmarkDispatch measures dispatched tasks per second against a trivial target at an
// aggregate rate limit R. b.N tasks are created on paused queues (not timed), the queues are
// resumed, and the benchmark waits until the target has answered all b.N requests.
//
// Cloud Tasks caps max_dispatches_per_second at 500 and the emulator enforces that cap (Start
// and UpdateQueue answer INVALID_ARGUMENT above it), so R > 500 is reached with R/500 queues at
// 500/s each, the tasks spread evenly over them. max_burst_size is output only in the API and
// follows retry.DefaultBurst (500 at 500/s), so on resume each queue's bucket holds a full
// second's worth of tokens. dispatches/s is therefore measured in the steady state: from the
// moment the target has received as many requests as the buckets held at resume to the moment it
// has received all b.N (with fewer tasks than that, over the whole run).
//
// After the queues are deleted it reports how many goroutines above the count before they
// existed are still running once that count stops falling (goroutines_left; 0 is expected).
func BenchmarkDispatch(b *testing.B) {
	for _, rate := range []int{500, 2000, 5000} {
		b.Run(fmt.Sprintf("rate=%d", rate), func(b *testing.B) { benchDispatch(b, rate, maxRate) })
	}
}

// BenchmarkDispatchOneQueue is BenchmarkDispatch with production's 500/s cap lifted
// (Options.MaxDispatchRate), so that one queue is configured with the whole rate.
func BenchmarkDispatchOneQueue(b *testing.B) {
	shared, sharedClient := emu, ct
	defer func() { emu, ct = shared, sharedClient }()
	srv, err := Start(context.Background(), Options{MaxDispatchRate: 5000})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	client, err := newClient(context.Background(), srv)
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	// The helpers below use the package's shared emulator and client; benchmarks run one at a
	// time, so pointing them at this server is safe.
	emu, ct = srv, client
	for _, rate := range []int{500, 2000} {
		b.Run(fmt.Sprintf("rate=%d", rate), func(b *testing.B) { benchDispatch(b, rate, rate) })
	}
}

// benchDispatch dispatches at an aggregate rate over as few queues as a per-queue cap allows.
func benchDispatch(b *testing.B, rate, perQueueCap int) {
	ctx := context.Background()
	nq := (rate + perQueueCap - 1) / perQueueCap
	perQueue := float64(rate) / float64(nq)
	burst := int64(nq * retry.DefaultBurst(perQueue))
	n := int64(b.N)

	var got, steadyFrom, doneAt atomic.Int64
	tg := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		k := got.Add(1)
		if k == burst {
			steadyFrom.Store(time.Now().UnixNano())
		}
		if k == n {
			doneAt.Store(time.Now().UnixNano())
		}
	}))
	defer tg.Close()

	// The client connection exists already (TestMain); the count is taken before any queue.
	goroutinesBefore := settledGoroutines(0)
	queues := make([]string, nq)
	for i := range queues {
		queues[i] = benchQueue(b, fmt.Sprintf("dispatch%d", rate))
		setRate(b, queues[i], perQueue, 1000)
		pauseQueue(b, queues[i])
	}
	createTasks(b, queues, tg.URL, b.N)

	b.ResetTimer()
	idle0, total0 := cpuSeconds()
	start := time.Now()
	for _, q := range queues {
		if _, err := ct.ResumeQueue(ctx, &cloudtaskspb.ResumeQueueRequest{Name: q}); err != nil {
			b.Fatal(err)
		}
	}
	// Generous: ten times the time the rate limit needs, plus 30 s.
	deadline := start.Add(30*time.Second + 10*time.Duration(n)*time.Second/time.Duration(rate))
	for got.Load() < n {
		if time.Now().After(deadline) {
			b.Fatalf("the target got %d of %d requests by the deadline", got.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	idle1, total1 := cpuSeconds()
	if n > burst {
		b.ReportMetric(float64(n-burst)/(float64(doneAt.Load()-steadyFrom.Load())/1e9), "dispatches/s")
	} else {
		b.ReportMetric(float64(n)/(float64(doneAt.Load()-start.UnixNano())/1e9), "dispatches/s")
	}

	// Busy cores while dispatching: tells a CPU-bound run from one that waits on something else.
	if total1 > total0 {
		b.ReportMetric(float64(runtime.GOMAXPROCS(0))*(1-(idle1-idle0)/(total1-total0)), "busy_cores")
	}

	for _, q := range queues {
		deleteQueue(b, q)
	}
	// Keep-alive connections the target still holds open each have a server goroutine; they
	// belong to the target, not to the emulator.
	tg.CloseClientConnections()
	left := settledGoroutines(goroutinesBefore) - goroutinesBefore
	b.ReportMetric(float64(max(left, 0)), "goroutines_left")
}

// cpuSeconds returns the CPU time the Go runtime's processors spent idle and in total so far.
// GC work done only because a processor was idle counts as idle.
func cpuSeconds() (idle, total float64) {
	m := []metrics.Sample{
		{Name: "/cpu/classes/idle:cpu-seconds"},
		{Name: "/cpu/classes/gc/mark/idle:cpu-seconds"},
		{Name: "/cpu/classes/total:cpu-seconds"},
	}
	metrics.Read(m)
	return m[0].Value.Float64() + m[1].Value.Float64(), m[2].Value.Float64()
}

// settledGoroutines polls runtime.NumGoroutine until it is at most want or has not fallen for a
// while (at most 10 s in all), and returns the last count.
func settledGoroutines(want int) int {
	deadline := time.Now().Add(10 * time.Second)
	n, lowest, since := runtime.NumGoroutine(), runtime.NumGoroutine(), time.Now()
	for n > want && time.Now().Before(deadline) && time.Since(since) < 2*time.Second {
		time.Sleep(10 * time.Millisecond)
		n = runtime.NumGoroutine()
		if n < lowest {
			lowest, since = n, time.Now()
		}
	}
	return n
}

var benchSeq atomic.Int64

// benchQueue creates a queue with a name no other queue of this process has.
func benchQueue(b *testing.B, prefix string) string {
	b.Helper()
	name := fmt.Sprintf("%s/queues/bench-%s-%d-%d", loc, prefix, time.Now().UnixNano()%1e9, benchSeq.Add(1))
	_, err := ct.CreateQueue(context.Background(), &cloudtaskspb.CreateQueueRequest{
		Parent: loc, Queue: &cloudtaskspb.Queue{Name: name},
	})
	if err != nil {
		b.Fatalf("CreateQueue: %v", err)
	}
	return name
}

func setRate(b *testing.B, q string, perSecond float64, concurrent int) {
	b.Helper()
	_, err := ct.UpdateQueue(context.Background(), &cloudtaskspb.UpdateQueueRequest{
		Queue: &cloudtaskspb.Queue{Name: q, RateLimits: &cloudtaskspb.RateLimits{
			MaxDispatchesPerSecond:  perSecond,
			MaxConcurrentDispatches: int32(concurrent),
		}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"rate_limits"}},
	})
	if err != nil {
		b.Fatalf("UpdateQueue %s: %v", q, err)
	}
}

func pauseQueue(b *testing.B, q string) {
	b.Helper()
	if _, err := ct.PauseQueue(context.Background(), &cloudtaskspb.PauseQueueRequest{Name: q}); err != nil {
		b.Fatalf("PauseQueue %s: %v", q, err)
	}
}

func deleteQueue(b *testing.B, q string) {
	b.Helper()
	if err := ct.DeleteQueue(context.Background(), &cloudtaskspb.DeleteQueueRequest{Name: q}); err != nil {
		b.Fatalf("DeleteQueue %s: %v", q, err)
	}
}

// createTasks creates n unnamed tasks for url, spread round-robin over queues, from
// createCallers concurrent callers.
func createTasks(b *testing.B, queues []string, url string, n int) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, createCallers)
	for range createCallers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				q := queues[int(i)%len(queues)]
				if _, err := ct.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: q, Task: httpTask(url)}); err != nil {
					errs <- fmt.Errorf("CreateTask: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// deepQueueTasks is how many tasks wait in another queue of the emulator during
// BenchmarkCreateTaskDataDir/depth=10000.
const deepQueueTasks = 10_000

// BenchmarkCreateTaskDataDir is BenchmarkCreateTask against an emulator with a data dir, first
// with nothing else stored, then with deepQueueTasks tasks waiting in another (paused) queue:
// every CreateTask returns only once its change is on disk (fsynced), so this measures what
// the data dir costs and whether that cost grows with the state. Each round creates b.N tasks
// on a fresh paused queue and deletes it afterwards (not timed), so every round starts at the
// same depth.
func BenchmarkCreateTaskDataDir(b *testing.B) {
	shared, sharedClient := emu, ct
	defer func() { emu, ct = shared, sharedClient }()
	srv, err := Start(context.Background(), Options{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	client, err := newClient(context.Background(), srv)
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	emu, ct = srv, client // as in BenchmarkDispatchOneQueue: benchmarks run one at a time

	round := func(b *testing.B) {
		q := benchQueue(b, "create-datadir")
		pauseQueue(b, q)
		b.ResetTimer()
		createTasks(b, []string{q}, "http://127.0.0.1:1/never-dispatched", b.N)
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
		deleteQueue(b, q)
	}
	b.Run("depth=0", round)
	deep := benchQueue(b, "deep")
	pauseQueue(b, deep)
	createTasks(b, []string{deep}, "http://127.0.0.1:1/never-dispatched", deepQueueTasks)
	b.Run(fmt.Sprintf("depth=%d", deepQueueTasks), round)
}
