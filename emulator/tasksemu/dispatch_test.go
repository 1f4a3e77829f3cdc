package tasksemu

import (
	"context"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestDeliveredRequest(t *testing.T) {
	tg := newTarget(t, nil)
	q := createQueue(t, ct, nil).Name
	task := &cloudtaskspb.Task{
		Name: q + "/tasks/req-1",
		MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
			Url:        tg.URL + "/hook/path?a=1&b=two",
			HttpMethod: cloudtaskspb.HttpMethod_PUT,
			Headers:    map[string]string{"X-Custom": "Value With Spaces", "X-Other": "2"},
			Body:       []byte(`{"k":"v"}`),
		}},
	}
	created := createTask(t, ct, q, task)
	d := tg.waitDeliveries(t, 1, 5*time.Second)[0]
	if d.method != "PUT" || d.uri != "/hook/path?a=1&b=two" || d.body != `{"k":"v"}` {
		t.Errorf("got %s %s body %q", d.method, d.uri, d.body)
	}
	eta, err := strconv.ParseFloat(d.header.Get("X-CloudTasks-TaskETA"), 64)
	if err != nil || time.Duration(eta*1e9-float64(created.ScheduleTime.AsTime().UnixNano())).Abs() > time.Millisecond {
		t.Errorf("X-CloudTasks-TaskETA = %q, want %v", d.header.Get("X-CloudTasks-TaskETA"), created.ScheduleTime.AsTime())
	}
	got := map[string]string{}
	for k := range d.header {
		got[k] = d.header.Get(k)
	}
	delete(got, "X-Cloudtasks-Tasketa")
	delete(got, "Content-Length")
	want := map[string]string{
		"User-Agent":                      "Google-Cloud-Tasks",
		"X-Custom":                        "Value With Spaces",
		"X-Other":                         "2",
		"X-Cloudtasks-Queuename":          shortID(q),
		"X-Cloudtasks-Taskname":           "req-1",
		"X-Cloudtasks-Taskretrycount":     "0",
		"X-Cloudtasks-Taskexecutioncount": "0",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
	eventually(t, 5*time.Second, "the task to be deleted", func() bool {
		_, err := ct.GetTask(context.Background(), &cloudtaskspb.GetTaskRequest{Name: created.Name})
		return err != nil
	})
	_, err = ct.GetTask(context.Background(), &cloudtaskspb.GetTaskRequest{Name: created.Name})
	wantCode(t, err, codes.NotFound)
}

func TestNothingBeforeScheduleTime(t *testing.T) {
	tg := newTarget(t, nil)
	q := createQueue(t, ct, nil).Name
	at := time.Now().Add(300 * time.Millisecond)
	task := httpTask(tg.URL)
	task.ScheduleTime = timestamppb.New(at)
	createTask(t, ct, q, task)
	d := tg.waitDeliveries(t, 1, 5*time.Second)[0]
	if d.at.Before(at) {
		t.Errorf("delivered at %v, before schedule_time %v", d.at, at)
	}
}

func TestRunTask(t *testing.T) {
	ctx := context.Background()
	tg := newTarget(t, nil)
	q := createQueue(t, ct, nil).Name
	if _, err := ct.PauseQueue(ctx, &cloudtaskspb.PauseQueueRequest{Name: q}); err != nil {
		t.Fatal(err)
	}
	later := httpTask(tg.URL + "/later")
	later.ScheduleTime = timestamppb.New(time.Now().Add(time.Hour))
	created := createTask(t, ct, q, later)
	other := createTask(t, ct, q, httpTask(tg.URL+"/other")) // due, but the queue is paused
	if _, err := ct.RunTask(ctx, &cloudtaskspb.RunTaskRequest{Name: created.Name}); err != nil {
		t.Fatal(err)
	}
	tg.waitDeliveries(t, 1, 5*time.Second)
	eventually(t, 5*time.Second, "the run task to be deleted", func() bool {
		_, err := ct.GetTask(ctx, &cloudtaskspb.GetTaskRequest{Name: created.Name})
		return err != nil
	})
	_, err := ct.RunTask(ctx, &cloudtaskspb.RunTaskRequest{Name: created.Name})
	wantCode(t, err, codes.NotFound)
	// Resuming delivers the paused backlog, and the run task is not delivered again.
	if _, err := ct.ResumeQueue(ctx, &cloudtaskspb.ResumeQueueRequest{Name: q}); err != nil {
		t.Fatal(err)
	}
	tg.waitDeliveries(t, 2, 5*time.Second)
	eventually(t, 5*time.Second, "the backlog to drain", func() bool {
		_, err := ct.GetTask(ctx, &cloudtaskspb.GetTaskRequest{Name: other.Name})
		return err != nil
	})
	var uris []string
	for _, d := range tg.deliveries() {
		uris = append(uris, d.uri)
	}
	if diff := cmp.Diff([]string{"/later", "/other"}, uris); diff != "" {
		t.Errorf("deliveries (-want +got):\n%s", diff)
	}
}

func TestPausedQueueDispatchesNothing(t *testing.T) {
	ctx := context.Background()
	var hits atomic.Int32
	tg := newTarget(t, func(int, http.ResponseWriter, *http.Request) { hits.Add(1) })
	q := createQueue(t, ct, nil).Name
	if _, err := ct.PauseQueue(ctx, &cloudtaskspb.PauseQueueRequest{Name: q}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		createTask(t, ct, q, httpTask(tg.URL))
	}
	// A second, running queue with the same target proves the dispatcher had time to act.
	q2 := createQueue(t, ct, nil).Name
	createTask(t, ct, q2, httpTask(tg.URL))
	tg.waitDeliveries(t, 1, 5*time.Second)
	if n := hits.Load(); n != 1 {
		t.Fatalf("paused queue dispatched: %d deliveries", n)
	}
	if _, err := ct.ResumeQueue(ctx, &cloudtaskspb.ResumeQueueRequest{Name: q}); err != nil {
		t.Fatal(err)
	}
	tg.waitDeliveries(t, 4, 5*time.Second)
}

func TestRetriesWithBackoff(t *testing.T) {
	ctx := context.Background()
	tg := newTarget(t, func(n int, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 0:
			w.WriteHeader(http.StatusInternalServerError)
		case 1:
			w.WriteHeader(http.StatusNotFound)
		}
	})
	rc := fastRetry(10)
	rc.MinBackoff = durationpb.New(40 * time.Millisecond)
	rc.MaxBackoff = durationpb.New(time.Second)
	q := createQueue(t, ct, &cloudtaskspb.Queue{RetryConfig: rc}).Name
	created := createTask(t, ct, q, httpTask(tg.URL))
	ds := tg.waitDeliveries(t, 3, 10*time.Second)
	type hdrs struct{ Retry, Exec, Prev, Reason string }
	var got []hdrs
	for _, d := range ds {
		got = append(got, hdrs{d.header.Get("X-CloudTasks-TaskRetryCount"), d.header.Get("X-CloudTasks-TaskExecutionCount"),
			d.header.Get("X-CloudTasks-TaskPreviousResponse"), d.header.Get("X-CloudTasks-TaskRetryReason")})
	}
	want := []hdrs{
		{"0", "0", "", ""},
		{"1", "0", "500", "HTTP_500"},
		{"2", "1", "404", "HTTP_404"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("retry headers (-want +got):\n%s", diff)
	}
	// Gaps: min_backoff before retry 1, twice that before retry 2.
	if gap := ds[1].at.Sub(ds[0].at); gap < 40*time.Millisecond {
		t.Errorf("gap before retry 1 = %v, want >= 40ms", gap)
	}
	if gap := ds[2].at.Sub(ds[1].at); gap < 80*time.Millisecond {
		t.Errorf("gap before retry 2 = %v, want >= 80ms", gap)
	}
	eventually(t, 5*time.Second, "the task to be deleted", func() bool {
		_, err := ct.GetTask(ctx, &cloudtaskspb.GetTaskRequest{Name: created.Name})
		return err != nil
	})
}

func TestAttemptBookkeeping(t *testing.T) {
	ctx := context.Background()
	tg := newTarget(t, func(n int, w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadRequest) })
	rc := fastRetry(-1)
	rc.MinBackoff = durationpb.New(time.Hour)
	rc.MaxBackoff = durationpb.New(time.Hour)
	q := createQueue(t, ct, &cloudtaskspb.Queue{RetryConfig: rc}).Name
	created := createTask(t, ct, q, httpTask(tg.URL))
	tg.waitDeliveries(t, 1, 5*time.Second)
	var got *cloudtaskspb.Task
	eventually(t, 5*time.Second, "the attempt to be recorded", func() bool {
		var err error
		got, err = ct.GetTask(ctx, &cloudtaskspb.GetTaskRequest{Name: created.Name})
		return err == nil && got.DispatchCount == 1
	})
	if got.ResponseCount != 1 || got.FirstAttempt.GetDispatchTime() == nil || got.LastAttempt.GetResponseTime() == nil {
		t.Errorf("after one attempt: %v", got)
	}
	if c := codes.Code(got.LastAttempt.GetResponseStatus().GetCode()); c != codes.InvalidArgument {
		t.Errorf("last_attempt.response_status = %v, want InvalidArgument (HTTP 400)", c)
	}
	if next := got.ScheduleTime.AsTime(); time.Until(next) < 50*time.Minute {
		t.Errorf("next schedule_time %v, want about an hour ahead", next)
	}
	// RunTask ignores the back-off.
	if _, err := ct.RunTask(ctx, &cloudtaskspb.RunTaskRequest{Name: created.Name}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the second attempt to be recorded", func() bool {
		var err error
		got, err = ct.GetTask(ctx, &cloudtaskspb.GetTaskRequest{Name: created.Name})
		return err == nil && got.DispatchCount == 2
	})
	if got.ResponseCount != 2 || !got.LastAttempt.DispatchTime.AsTime().After(got.FirstAttempt.DispatchTime.AsTime()) {
		t.Errorf("after two attempts: %v", got)
	}
}

func TestGivesUpAfterMaxAttempts(t *testing.T) {
	ctx := context.Background()
	tg := newTarget(t, func(n int, w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	q := createQueue(t, ct, &cloudtaskspb.Queue{RetryConfig: fastRetry(3)}).Name
	created := createTask(t, ct, q, httpTask(tg.URL))
	tg.waitDeliveries(t, 3, 5*time.Second)
	eventually(t, 5*time.Second, "the task to be deleted", func() bool {
		_, err := ct.GetTask(ctx, &cloudtaskspb.GetTaskRequest{Name: created.Name})
		return codeOf(err) == codes.NotFound
	})
	// Another queue's task proves the dispatcher would have had time for a 4th attempt.
	rc := fastRetry(1)
	q2 := createQueue(t, ct, &cloudtaskspb.Queue{RetryConfig: rc}).Name
	tg2 := newTarget(t, nil)
	createTask(t, ct, q2, httpTask(tg2.URL))
	tg2.waitDeliveries(t, 1, 5*time.Second)
	if n := len(tg.deliveries()); n != 3 {
		t.Errorf("%d attempts, want 3", n)
	}
}

func TestConnectionErrorIsRetried(t *testing.T) {
	tg := newTarget(t, nil)
	url := tg.URL
	tg.Close() // nothing listens there now
	q := createQueue(t, ct, &cloudtaskspb.Queue{RetryConfig: fastRetry(2)}).Name
	created := createTask(t, ct, q, httpTask(url))
	eventually(t, 5*time.Second, "two failed attempts", func() bool {
		_, err := ct.GetTask(context.Background(), &cloudtaskspb.GetTaskRequest{Name: created.Name})
		return codeOf(err) == codes.NotFound
	})
}

func TestRetryAfterIsHonoured(t *testing.T) {
	tg := newTarget(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	})
	q := createQueue(t, ct, &cloudtaskspb.Queue{RetryConfig: fastRetry(5)}).Name
	createTask(t, ct, q, httpTask(tg.URL))
	ds := tg.waitDeliveries(t, 2, 10*time.Second)
	if gap := ds[1].at.Sub(ds[0].at); gap < time.Second {
		t.Errorf("retry after %v, want >= 1s (Retry-After)", gap)
	}
	if got := ds[1].header.Get("X-CloudTasks-TaskPreviousResponse"); got != "429" {
		t.Errorf("X-CloudTasks-TaskPreviousResponse = %q, want 429", got)
	}
}

func TestDispatchDeadline(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the minimum dispatch deadline of 15s")
	}
	t.Parallel()
	release := make(chan struct{})
	defer close(release)
	tg := newTarget(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	})
	q := createQueue(t, ct, &cloudtaskspb.Queue{RetryConfig: fastRetry(5)}).Name
	task := httpTask(tg.URL)
	task.DispatchDeadline = durationpb.New(15 * time.Second)
	createTask(t, ct, q, task)
	ds := tg.waitDeliveries(t, 2, 30*time.Second)
	if got := ds[1].header.Get("X-CloudTasks-TaskPreviousResponse"); got != "504" {
		t.Errorf("X-CloudTasks-TaskPreviousResponse = %q, want 504", got)
	}
	if gap := ds[1].at.Sub(ds[0].at); gap < 15*time.Second {
		t.Errorf("retried after %v, before the 15s deadline", gap)
	}
}

func TestConcurrencyCap(t *testing.T) {
	var inflight, peak atomic.Int32
	release := make(chan struct{})
	tg := newTarget(t, func(n int, w http.ResponseWriter, r *http.Request) {
		cur := inflight.Add(1)
		defer inflight.Add(-1)
		for {
			p := peak.Load()
			if cur <= p || peak.CompareAndSwap(p, cur) {
				break
			}
		}
		<-release
	})
	q := createQueue(t, ct, &cloudtaskspb.Queue{RateLimits: &cloudtaskspb.RateLimits{MaxConcurrentDispatches: 2}}).Name
	for range 6 {
		createTask(t, ct, q, httpTask(tg.URL))
	}
	tg.waitDeliveries(t, 2, 5*time.Second)
	// Check the cap while the first two are held.
	if emu.snapshotStatus()[q].InFlight != 2 {
		t.Errorf("in flight = %d, want 2", emu.snapshotStatus()[q].InFlight)
	}
	close(release)
	tg.waitDeliveries(t, 6, 5*time.Second)
	if p := peak.Load(); p > 2 {
		t.Errorf("peak concurrency %d, want <= 2", p)
	}
}

func TestRateLimit(t *testing.T) {
	tg := newTarget(t, nil)
	// 10/s with a burst of 1 (the default for a low rate): 6 tasks take at least 0.5s.
	q := createQueue(t, ct, &cloudtaskspb.Queue{RateLimits: &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: 10}})
	for range 6 {
		createTask(t, ct, q.Name, httpTask(tg.URL))
	}
	ds := tg.waitDeliveries(t, 6, 10*time.Second)
	burst := int(q.RateLimits.MaxBurstSize)
	if burst >= 6 {
		t.Skipf("burst %d too large for this test", burst)
	}
	minSpan := time.Duration(6-burst) * 100 * time.Millisecond
	if span := ds[5].at.Sub(ds[0].at); span < minSpan-20*time.Millisecond {
		t.Errorf("6 dispatches took %v, want >= %v at 10/s with burst %d", span, minSpan, burst)
	}
}

func TestDeleteQueueStopsGoroutines(t *testing.T) {
	s, c := startServer(t, Options{})
	tg := newTarget(t, nil)
	// Warm up the client's connection so that its goroutines are in the baseline.
	c.GetQueue(context.Background(), &cloudtaskspb.GetQueueRequest{Name: uniqueQueue(t)})
	before := runtime.NumGoroutine()
	q := createQueue(t, c, &cloudtaskspb.Queue{RateLimits: &cloudtaskspb.RateLimits{MaxConcurrentDispatches: 50}}).Name
	const n = 200
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			task := httpTask(tg.URL)
			if i%2 == 0 {
				task.ScheduleTime = timestamppb.New(time.Now().Add(time.Hour)) // still pending at deletion
			}
			if _, err := c.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: q, Task: task}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	tg.waitDeliveries(t, n/2, 10*time.Second)
	if err := c.DeleteQueue(context.Background(), &cloudtaskspb.DeleteQueueRequest{Name: q}); err != nil {
		t.Fatal(err)
	}
	tg.CloseClientConnections()
	_ = s
	waitGoroutines(t, before)
}

// waitGoroutines polls until no more than want goroutines run, and dumps them if that never happens.
func waitGoroutines(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > want {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines, want <= %d:\n%s", runtime.NumGoroutine(), want, buf)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestMaxRetryDuration(t *testing.T) {
	tg := newTarget(t, func(n int, w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) })
	rc := fastRetry(2)
	rc.MaxBackoff = durationpb.New(20 * time.Millisecond)
	rc.MaxRetryDuration = durationpb.New(300 * time.Millisecond)
	q := createQueue(t, ct, &cloudtaskspb.Queue{RetryConfig: rc}).Name
	created := createTask(t, ct, q, httpTask(tg.URL))
	eventually(t, 10*time.Second, "the task to be given up", func() bool {
		_, err := ct.GetTask(context.Background(), &cloudtaskspb.GetTaskRequest{Name: created.Name})
		return codeOf(err) == codes.NotFound
	})
	// Both limits must be reached: more than max_attempts attempts, spread over max_retry_duration.
	ds := tg.deliveries()
	if len(ds) <= 2 {
		t.Errorf("%d attempts, want more than max_attempts=2 while max_retry_duration runs", len(ds))
	}
	if span := ds[len(ds)-1].at.Sub(ds[0].at); span < 250*time.Millisecond {
		t.Errorf("attempts spanned %v, want about max_retry_duration (300ms)", span)
	}
}

func TestRunTaskInFlightIsNotDuplicated(t *testing.T) {
	ctx := context.Background()
	release := make(chan struct{})
	tg := newTarget(t, func(n int, w http.ResponseWriter, r *http.Request) { <-release })
	q := createQueue(t, ct, nil).Name
	created := createTask(t, ct, q, httpTask(tg.URL))
	tg.waitDeliveries(t, 1, 5*time.Second)
	for range 3 {
		if _, err := ct.RunTask(ctx, &cloudtaskspb.RunTaskRequest{Name: created.Name}); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	eventually(t, 5*time.Second, "the task to complete", func() bool {
		_, err := ct.GetTask(ctx, &cloudtaskspb.GetTaskRequest{Name: created.Name})
		return codeOf(err) == codes.NotFound
	})
	if n := len(tg.deliveries()); n != 1 {
		t.Errorf("%d deliveries, want 1", n)
	}
}

func TestCloseStopsGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	release := make(chan struct{})
	defer close(release)
	tg := newTarget(t, func(n int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	ctx := context.Background()
	s, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := newClient(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		q := createQueue(t, c, nil).Name
		for range 5 {
			createTask(t, c, q, httpTask(tg.URL))
		}
	}
	tg.waitDeliveries(t, 15, 5*time.Second) // all in flight, held by the target
	c.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	tg.CloseClientConnections()
	// The target's own listener goroutine is the only addition.
	waitGoroutines(t, before+1)
}

func TestRetryAfterIgnoredOnOtherStatuses(t *testing.T) {
	tg := newTarget(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusConflict)
		}
	})
	q := createQueue(t, ct, &cloudtaskspb.Queue{RetryConfig: fastRetry(5)}).Name
	createTask(t, ct, q, httpTask(tg.URL))
	// A 409's Retry-After is not considered: the retry follows min_backoff (10ms), not 30s.
	tg.waitDeliveries(t, 2, 10*time.Second)
}

// TestSystemThrottling: a 503 (or a 429) pauses the whole queue for the queue's back-off, so a
// task created after it waits too; a 500 backs off only its own task.
func TestSystemThrottling(t *testing.T) {
	for _, c := range []struct {
		code      int
		throttles bool
	}{{http.StatusServiceUnavailable, true}, {http.StatusTooManyRequests, true}, {http.StatusInternalServerError, false}} {
		t.Run(strconv.Itoa(c.code), func(t *testing.T) {
			tg := newTarget(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/failing" {
					w.WriteHeader(c.code)
				}
			})
			const backoff = 2 * time.Second
			q := createQueue(t, ct, &cloudtaskspb.Queue{RetryConfig: &cloudtaskspb.RetryConfig{
				MaxAttempts: 3, MinBackoff: durationpb.New(backoff), MaxBackoff: durationpb.New(4 * backoff), MaxDoublings: 2,
			}}).Name
			failing := createTask(t, ct, q, httpTask(tg.URL+"/failing"))
			failed := tg.waitDeliveries(t, 1, 10*time.Second)[0]
			// The target has answered; the other task comes once the queue has the answer too (a
			// task created before that is dispatched before any pause).
			eventually(t, 10*time.Second, "the failed attempt to be recorded", func() bool {
				got, err := ct.GetTask(context.Background(), &cloudtaskspb.GetTaskRequest{Name: failing.Name})
				return err == nil && got.ResponseCount == 1
			})
			createTask(t, ct, q, httpTask(tg.URL+"/other"))
			var other delivery
			eventually(t, 20*time.Second, "the other task's delivery", func() bool {
				for _, d := range tg.deliveries() {
					if d.uri == "/other" {
						other = d
						return true
					}
				}
				return false
			})
			gap := other.at.Sub(failed.at)
			if c.throttles && gap < backoff {
				t.Errorf("the other task was dispatched %v after the %d, within the queue's pause of %v", gap, c.code, backoff)
			}
			if !c.throttles && gap >= backoff {
				t.Errorf("the other task waited %v after a %d, which backs off only its own task", gap, c.code)
			}
			st, ok := emu.snapshotStatus()[q]
			if !ok {
				t.Fatalf("no status of %s", q)
			}
			if (st.Throttles > 0) != c.throttles {
				t.Errorf("%d throttling pauses after a %d", st.Throttles, c.code)
			}
		})
	}
}
