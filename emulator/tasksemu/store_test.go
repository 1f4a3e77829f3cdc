package tasksemu

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestDataDirSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	tg := newTarget(t, nil)

	s1, err := Start(ctx, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	c1, err := newClient(ctx, s1)
	if err != nil {
		t.Fatal(err)
	}
	q := createQueue(t, c1, &cloudtaskspb.Queue{RateLimits: &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: 42}}).Name
	if _, err := c1.PauseQueue(ctx, &cloudtaskspb.PauseQueueRequest{Name: q}); err != nil {
		t.Fatal(err)
	}
	pending := &cloudtaskspb.Task{Name: q + "/tasks/pending", MessageType: httpTask(tg.URL + "/pending").MessageType}
	pending.GetHttpRequest().Body = []byte("kept")
	createTask(t, c1, q, pending)
	gone := createTask(t, c1, q, &cloudtaskspb.Task{Name: q + "/tasks/gone", MessageType: httpTask(tg.URL + "/gone").MessageType})
	if err := c1.DeleteTask(ctx, &cloudtaskspb.DeleteTaskRequest{Name: gone.Name}); err != nil {
		t.Fatal(err)
	}
	// An OIDC task, to check that the signing key survives too.
	oidcTask := &cloudtaskspb.Task{Name: q + "/tasks/oidc", MessageType: httpTask(tg.URL + "/oidc").MessageType}
	oidcTask.GetHttpRequest().AuthorizationHeader = &cloudtaskspb.HttpRequest_OidcToken{OidcToken: &cloudtaskspb.OidcToken{ServiceAccountEmail: "a@b.iam.gserviceaccount.com"}}
	createTask(t, c1, q, oidcTask)
	kid1 := s1.issuer.KeyID()
	c1.Close()
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(tg.deliveries()); n != 0 {
		t.Fatalf("%d deliveries from a paused queue", n)
	}

	s2, c2 := startServer(t, Options{DataDir: dir})
	if s2.issuer.KeyID() != kid1 {
		t.Errorf("signing key changed across restart")
	}
	got, err := c2.GetQueue(ctx, &cloudtaskspb.GetQueueRequest{Name: q})
	if err != nil {
		t.Fatal(err)
	}
	if got.State != cloudtaskspb.Queue_PAUSED || got.RateLimits.MaxDispatchesPerSecond != 42 {
		t.Errorf("restored queue %v", got)
	}
	task, err := c2.GetTask(ctx, &cloudtaskspb.GetTaskRequest{Name: pending.Name, ResponseView: cloudtaskspb.Task_FULL})
	if err != nil {
		t.Fatal(err)
	}
	if string(task.GetHttpRequest().Body) != "kept" {
		t.Errorf("restored body %q", task.GetHttpRequest().Body)
	}
	_, err = c2.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: q, Task: &cloudtaskspb.Task{Name: gone.Name, MessageType: httpTask(tg.URL).MessageType}})
	wantCode(t, err, codes.AlreadyExists)

	if _, err := c2.ResumeQueue(ctx, &cloudtaskspb.ResumeQueueRequest{Name: q}); err != nil {
		t.Fatal(err)
	}
	ds := tg.waitDeliveries(t, 2, 5*time.Second)
	for _, d := range ds {
		if d.uri == "/oidc" {
			tok, _ := strings.CutPrefix(d.header.Get("Authorization"), "Bearer ")
			if _, err := s2.issuer.Verify(tok, tg.URL+"/oidc", time.Now()); err != nil {
				t.Errorf("token after restart: %v", err)
			}
		}
	}
}

func TestCrashedDispatchesAfterRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	release := make(chan struct{})
	tg := newTarget(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			select { // the first attempt hangs until the emulator goes away
			case <-release:
			case <-r.Context().Done():
			}
		}
	})
	defer close(release)
	s1, err := Start(ctx, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	c1, err := newClient(ctx, s1)
	if err != nil {
		t.Fatal(err)
	}
	q := createQueue(t, c1, nil).Name
	inFlight := createTask(t, c1, q, httpTask(tg.URL+"/in-flight"))
	later := httpTask(tg.URL + "/later")
	later.ScheduleTime = timestamppb.New(time.Now().Add(500 * time.Millisecond))
	later = createTask(t, c1, q, later)
	tg.waitDeliveries(t, 1, 5*time.Second)
	c1.Close()
	s1.Close() // without draining: the in-flight attempt is cancelled

	_, c2 := startServer(t, Options{DataDir: dir})
	ds := tg.waitDeliveries(t, 3, 10*time.Second)
	seen := map[string]int{}
	for _, d := range ds {
		seen[d.uri]++
	}
	if seen["/in-flight"] != 2 || seen["/later"] != 1 {
		t.Errorf("deliveries %v, want /in-flight twice and /later once", seen)
	}
	for _, name := range []string{inFlight.Name, later.Name} {
		eventually(t, 5*time.Second, "the task to be deleted", func() bool {
			_, err := c2.GetTask(ctx, &cloudtaskspb.GetTaskRequest{Name: name})
			return codeOf(err) == codes.NotFound
		})
	}
}

func TestStateIsWrittenWithoutClose(t *testing.T) {
	dir := t.TempDir()
	_, c := startServer(t, Options{DataDir: dir})
	q := createQueue(t, c, nil).Name
	if _, err := c.PauseQueue(context.Background(), &cloudtaskspb.PauseQueueRequest{Name: q}); err != nil {
		t.Fatal(err)
	}
	task := createTask(t, c, q, httpTask("http://example.com/"))
	// CreateTask returns only once the data dir holds the task: a crash (no Close) right
	// after the acknowledgement loses nothing.
	data, err := os.ReadFile(filepath.Join(dir, logFile))
	if err != nil {
		t.Fatalf("read log: %v", err)
	}
	if !strings.Contains(string(data), task.Name) {
		t.Errorf("the log written before CreateTask returned does not contain %s", task.Name)
	}
}
