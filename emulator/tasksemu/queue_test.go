package tasksemu

import (
	"context"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/iam/apiv1/iampb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/spanmart/spanmart/emulator/tasksemu/retry"
)

func TestUnknownRPCIsUnimplemented(t *testing.T) {
	_, err := ct.GetIamPolicy(context.Background(), &iampb.GetIamPolicyRequest{Resource: uniqueQueue(t)})
	wantCode(t, err, codes.Unimplemented)
}

func TestCreateQueueDefaults(t *testing.T) {
	name := uniqueQueue(t)
	got := createQueue(t, ct, &cloudtaskspb.Queue{Name: name})
	want := &cloudtaskspb.Queue{
		Name:  name,
		State: cloudtaskspb.Queue_RUNNING,
		RateLimits: &cloudtaskspb.RateLimits{
			MaxDispatchesPerSecond:  500,
			MaxBurstSize:            int32(retry.DefaultBurst(500)),
			MaxConcurrentDispatches: 1000,
		},
		RetryConfig: &cloudtaskspb.RetryConfig{
			MaxAttempts:  100,
			MinBackoff:   durationpb.New(100 * time.Millisecond),
			MaxBackoff:   durationpb.New(3600 * time.Second),
			MaxDoublings: 16,
		},
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("CreateQueue (-want +got):\n%s", diff)
	}
	again, err := ct.GetQueue(context.Background(), &cloudtaskspb.GetQueueRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, again, protocmp.Transform()); diff != "" {
		t.Errorf("GetQueue (-want +got):\n%s", diff)
	}
}

func TestCreateQueueErrors(t *testing.T) {
	ctx := context.Background()
	existing := createQueue(t, ct, nil).Name
	deleted := createQueue(t, ct, nil).Name
	if err := ct.DeleteQueue(ctx, &cloudtaskspb.DeleteQueueRequest{Name: deleted}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		parent string
		queue  *cloudtaskspb.Queue
		want   codes.Code
	}{
		{"duplicate", loc, &cloudtaskspb.Queue{Name: existing}, codes.AlreadyExists},
		{"recently deleted", loc, &cloudtaskspb.Queue{Name: deleted}, codes.FailedPrecondition},
		{"bad id", loc, &cloudtaskspb.Queue{Name: loc + "/queues/bad_id"}, codes.InvalidArgument},
		{"id too long", loc, &cloudtaskspb.Queue{Name: fmt.Sprintf("%s/queues/%0101d", loc, 1)}, codes.InvalidArgument},
		{"no name", loc, &cloudtaskspb.Queue{}, codes.InvalidArgument},
		{"other parent", "projects/other/locations/l", &cloudtaskspb.Queue{Name: uniqueQueue(t)}, codes.InvalidArgument},
		{"bad parent", "projects/p", &cloudtaskspb.Queue{Name: uniqueQueue(t)}, codes.InvalidArgument},
		{"rate too high", loc, &cloudtaskspb.Queue{Name: uniqueQueue(t), RateLimits: &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: 501}}, codes.InvalidArgument},
		{"concurrency too high", loc, &cloudtaskspb.Queue{Name: uniqueQueue(t), RateLimits: &cloudtaskspb.RateLimits{MaxConcurrentDispatches: 5001}}, codes.InvalidArgument},
		{"max_attempts below -1", loc, &cloudtaskspb.Queue{Name: uniqueQueue(t), RetryConfig: &cloudtaskspb.RetryConfig{MaxAttempts: -2}}, codes.InvalidArgument},
		{"min_backoff above max", loc, &cloudtaskspb.Queue{Name: uniqueQueue(t), RetryConfig: &cloudtaskspb.RetryConfig{MinBackoff: durationpb.New(time.Hour), MaxBackoff: durationpb.New(time.Minute)}}, codes.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ct.CreateQueue(ctx, &cloudtaskspb.CreateQueueRequest{Parent: tt.parent, Queue: tt.queue})
			wantCode(t, err, tt.want)
		})
	}
}

func TestQueueReuseWindow(t *testing.T) {
	_, c := startServer(t, Options{QueueReuseWindow: 50 * time.Millisecond})
	ctx := context.Background()
	name := createQueue(t, c, nil).Name
	if err := c.DeleteQueue(ctx, &cloudtaskspb.DeleteQueueRequest{Name: name}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "re-creating the deleted queue", func() bool {
		_, err := c.CreateQueue(ctx, &cloudtaskspb.CreateQueueRequest{Parent: loc, Queue: &cloudtaskspb.Queue{Name: name}})
		return err == nil
	})
}

func TestMissingQueueIsNotFound(t *testing.T) {
	ctx := context.Background()
	q := uniqueQueue(t)
	task := q + "/tasks/t1"
	calls := map[string]func() error{
		"GetQueue":    func() error { _, err := ct.GetQueue(ctx, &cloudtaskspb.GetQueueRequest{Name: q}); return err },
		"DeleteQueue": func() error { return ct.DeleteQueue(ctx, &cloudtaskspb.DeleteQueueRequest{Name: q}) },
		"PurgeQueue":  func() error { _, err := ct.PurgeQueue(ctx, &cloudtaskspb.PurgeQueueRequest{Name: q}); return err },
		"PauseQueue":  func() error { _, err := ct.PauseQueue(ctx, &cloudtaskspb.PauseQueueRequest{Name: q}); return err },
		"ResumeQueue": func() error { _, err := ct.ResumeQueue(ctx, &cloudtaskspb.ResumeQueueRequest{Name: q}); return err },
		"CreateTask": func() error {
			_, err := ct.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: q, Task: httpTask("http://127.0.0.1:1/")})
			return err
		},
		"GetTask":    func() error { _, err := ct.GetTask(ctx, &cloudtaskspb.GetTaskRequest{Name: task}); return err },
		"DeleteTask": func() error { return ct.DeleteTask(ctx, &cloudtaskspb.DeleteTaskRequest{Name: task}) },
		"RunTask":    func() error { _, err := ct.RunTask(ctx, &cloudtaskspb.RunTaskRequest{Name: task}); return err },
		"ListTasks": func() error {
			_, err := ct.ListTasks(ctx, &cloudtaskspb.ListTasksRequest{Parent: q}).Next()
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) { wantCode(t, call(), codes.NotFound) })
	}
	// The server is still serving.
	createQueue(t, ct, nil)
}

func TestUpdateQueue(t *testing.T) {
	ctx := context.Background()
	q := createQueue(t, ct, nil)
	got, err := ct.UpdateQueue(ctx, &cloudtaskspb.UpdateQueueRequest{
		Queue: &cloudtaskspb.Queue{
			Name:        q.Name,
			RateLimits:  &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: 10, MaxConcurrentDispatches: 7},
			RetryConfig: &cloudtaskspb.RetryConfig{MaxAttempts: 5},
		},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"rate_limits.max_dispatches_per_second", "retry_config.max_attempts"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := q
	want.RateLimits.MaxDispatchesPerSecond = 10
	want.RateLimits.MaxBurstSize = int32(retry.DefaultBurst(10))
	want.RetryConfig.MaxAttempts = 5
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("UpdateQueue (-want +got):\n%s", diff)
	}

	t.Run("creates a missing queue", func(t *testing.T) {
		name := uniqueQueue(t)
		got, err := ct.UpdateQueue(ctx, &cloudtaskspb.UpdateQueueRequest{Queue: &cloudtaskspb.Queue{
			Name: name, RateLimits: &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: 20},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if got.Name != name || got.State != cloudtaskspb.Queue_RUNNING || got.RateLimits.MaxDispatchesPerSecond != 20 {
			t.Errorf("UpdateQueue created %v", got)
		}
		if _, err := ct.GetQueue(ctx, &cloudtaskspb.GetQueueRequest{Name: name}); err != nil {
			t.Error(err)
		}
	})
	t.Run("bad mask", func(t *testing.T) {
		_, err := ct.UpdateQueue(ctx, &cloudtaskspb.UpdateQueueRequest{
			Queue:      &cloudtaskspb.Queue{Name: q.Name},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"no_such_field"}},
		})
		wantCode(t, err, codes.InvalidArgument)
	})
	t.Run("bad value", func(t *testing.T) {
		_, err := ct.UpdateQueue(ctx, &cloudtaskspb.UpdateQueueRequest{
			Queue:      &cloudtaskspb.Queue{Name: q.Name, RateLimits: &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: 1000}},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"rate_limits"}},
		})
		wantCode(t, err, codes.InvalidArgument)
	})
}

func TestPauseResumeState(t *testing.T) {
	ctx := context.Background()
	q := createQueue(t, ct, nil)
	got, err := ct.PauseQueue(ctx, &cloudtaskspb.PauseQueueRequest{Name: q.Name})
	if err != nil || got.State != cloudtaskspb.Queue_PAUSED {
		t.Fatalf("PauseQueue = %v, %v; want PAUSED", got, err)
	}
	got, err = ct.ResumeQueue(ctx, &cloudtaskspb.ResumeQueueRequest{Name: q.Name})
	if err != nil || got.State != cloudtaskspb.Queue_RUNNING {
		t.Fatalf("ResumeQueue = %v, %v; want RUNNING", got, err)
	}
}

func TestListQueuesPaginates(t *testing.T) {
	_, c := startServer(t, Options{})
	ctx := context.Background()
	var want []string
	for i := range 5 {
		name := fmt.Sprintf("%s/queues/q%d", loc, i)
		createQueue(t, c, &cloudtaskspb.Queue{Name: name})
		want = append(want, name)
	}
	elsewhere := "projects/test-project/locations/elsewhere"
	if _, err := c.CreateQueue(ctx, &cloudtaskspb.CreateQueueRequest{Parent: elsewhere, Queue: &cloudtaskspb.Queue{Name: elsewhere + "/queues/x"}}); err != nil {
		t.Fatal(err) // not listed under loc
	}
	var pages [][]string
	it := c.ListQueues(ctx, &cloudtaskspb.ListQueuesRequest{Parent: loc, PageSize: 2})
	pager := iterator.NewPager(it, 2, "")
	for {
		var page []*cloudtaskspb.Queue
		token, err := pager.NextPage(&page)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, q := range page {
			names = append(names, q.Name)
		}
		pages = append(pages, names)
		if token == "" {
			break
		}
	}
	wantPages := [][]string{want[:2], want[2:4], want[4:]}
	if diff := cmp.Diff(wantPages, pages); diff != "" {
		t.Errorf("pages (-want +got):\n%s", diff)
	}

	if _, err := c.PauseQueue(ctx, &cloudtaskspb.PauseQueueRequest{Name: want[3]}); err != nil {
		t.Fatal(err)
	}
	q, err := c.ListQueues(ctx, &cloudtaskspb.ListQueuesRequest{Parent: loc, Filter: "state: PAUSED"}).Next()
	if err != nil || q.Name != want[3] {
		t.Errorf("filtered ListQueues = %v, %v; want %s", q, err, want[3])
	}
}

// MaxDispatchRate lifts production's 500/s cap for load tests; the default server keeps it.
func TestMaxDispatchRateOption(t *testing.T) {
	_, c := startServer(t, Options{MaxDispatchRate: 5000})
	q := &cloudtaskspb.Queue{Name: uniqueQueue(t), RateLimits: &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: 2000}}
	got, err := c.CreateQueue(context.Background(), &cloudtaskspb.CreateQueueRequest{Parent: loc, Queue: q})
	if err != nil {
		t.Fatalf("CreateQueue at 2000/s with the cap lifted: %v", err)
	}
	if r := got.GetRateLimits().GetMaxDispatchesPerSecond(); r != 2000 {
		t.Errorf("max_dispatches_per_second = %v, want 2000", r)
	}
	q.RateLimits.MaxDispatchesPerSecond = 5001
	_, err = c.UpdateQueue(context.Background(), &cloudtaskspb.UpdateQueueRequest{Queue: q})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("UpdateQueue above the lifted cap: got %v, want INVALID_ARGUMENT", err)
	}
}
