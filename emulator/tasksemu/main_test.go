package tasksemu

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// emu is the emulator shared by tests that do not need their own; each test uses fresh queues.
var (
	emu *Server
	ct  *cloudtasks.Client
)

const loc = "projects/test-project/locations/us-central1"

func TestMain(m *testing.M) {
	ctx := context.Background()
	var err error
	emu, err = Start(ctx, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ct, err = newClient(ctx, emu)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	ct.Close()
	emu.Close()
	os.Exit(code)
}

func newClient(ctx context.Context, s *Server) (*cloudtasks.Client, error) {
	return cloudtasks.NewClient(ctx, s.ClientOptions()...)
}

func startServer(t *testing.T, opts Options) (*Server, *cloudtasks.Client) {
	t.Helper()
	ctx := context.Background()
	s, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	c, err := newClient(ctx, s)
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		s.Close()
	})
	return s, c
}

var queueSeq atomic.Int64

// uniqueQueue returns a queue name no other test uses.
func uniqueQueue(t *testing.T) string {
	return fmt.Sprintf("%s/queues/q%d-%d", loc, time.Now().UnixNano()%1e6, queueSeq.Add(1))
}

// fastRetry is a retry_config scaled down so that tests finish quickly.
func fastRetry(maxAttempts int32) *cloudtaskspb.RetryConfig {
	return &cloudtaskspb.RetryConfig{
		MaxAttempts: maxAttempts,
		MinBackoff:  durationpb.New(10 * time.Millisecond),
		MaxBackoff:  durationpb.New(100 * time.Millisecond),
	}
}

// createQueue creates a fresh queue (with q's settings, if given) on c.
func createQueue(t *testing.T, c *cloudtasks.Client, q *cloudtaskspb.Queue) *cloudtaskspb.Queue {
	t.Helper()
	if q == nil {
		q = &cloudtaskspb.Queue{}
	}
	if q.Name == "" {
		q.Name = uniqueQueue(t)
	}
	got, err := c.CreateQueue(context.Background(), &cloudtaskspb.CreateQueueRequest{Parent: loc, Queue: q})
	if err != nil {
		t.Fatalf("CreateQueue: %v", err)
	}
	return got
}

func createTask(t *testing.T, c *cloudtasks.Client, queue string, task *cloudtaskspb.Task) *cloudtaskspb.Task {
	t.Helper()
	got, err := c.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: queue, Task: task})
	if err != nil {
		t.Fatalf("CreateTask: %v", err)
	}
	return got
}

func httpTask(url string) *cloudtaskspb.Task {
	return &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{Url: url}}}
}

// delivery is one request a target received.
type delivery struct {
	at     time.Time
	method string
	uri    string
	header http.Header
	body   string
}

// target is an httptest server that records requests and answers with respond.
type target struct {
	*httptest.Server
	mu      sync.Mutex
	got     []delivery
	respond func(n int, w http.ResponseWriter, r *http.Request) // n counts from 0
}

func newTarget(t *testing.T, respond func(n int, w http.ResponseWriter, r *http.Request)) *target {
	tg := &target{respond: respond}
	tg.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		tg.mu.Lock()
		n := len(tg.got)
		tg.got = append(tg.got, delivery{at: time.Now(), method: r.Method, uri: r.RequestURI, header: r.Header.Clone(), body: string(body)})
		tg.mu.Unlock()
		if tg.respond != nil {
			tg.respond(n, w, r)
		}
	}))
	t.Cleanup(tg.Close)
	return tg
}

func (tg *target) deliveries() []delivery {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return append([]delivery(nil), tg.got...)
}

// waitDeliveries polls until the target has at least n requests.
func (tg *target) waitDeliveries(t *testing.T, n int, timeout time.Duration) []delivery {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		d := tg.deliveries()
		if len(d) >= n {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("got %d deliveries after %v, want %d", len(d), timeout, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func wantCode(t *testing.T, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Errorf("got code %v (%v), want %v", got, err, want)
	}
}

// codeOf is the gRPC code of err.
func codeOf(err error) codes.Code { return status.Code(err) }
