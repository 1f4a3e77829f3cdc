package tasksemu

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// pausedQueue is a queue whose tasks are never dispatched, for tests of the task API alone.
func pausedQueue(t *testing.T) string {
	t.Helper()
	q := createQueue(t, ct, nil).Name
	if _, err := ct.PauseQueue(context.Background(), &cloudtaskspb.PauseQueueRequest{Name: q}); err != nil {
		t.Fatal(err)
	}
	return q
}

func TestCreateTaskDefaults(t *testing.T) {
	q := pausedQueue(t)
	before := time.Now()
	got := createTask(t, ct, q, httpTask("http://example.com/x"))
	if !strings.HasPrefix(got.Name, q+"/tasks/") || len(got.Name) == len(q+"/tasks/") {
		t.Errorf("generated name %q, want %s/tasks/<id>", got.Name, q)
	}
	if m := got.GetHttpRequest().GetHttpMethod(); m != cloudtaskspb.HttpMethod_POST {
		t.Errorf("method = %v, want POST", m)
	}
	if d := got.DispatchDeadline.AsDuration(); d != 10*time.Minute {
		t.Errorf("dispatch_deadline = %v, want 10m", d)
	}
	if st := got.ScheduleTime.AsTime(); st.Before(before.Add(-time.Second)) || st.After(time.Now()) {
		t.Errorf("schedule_time = %v, want about now", st)
	}
	if got.View != cloudtaskspb.Task_BASIC || got.CreateTime == nil {
		t.Errorf("view = %v, create_time = %v; want BASIC and set", got.View, got.CreateTime)
	}
}

func TestCreateTaskValidation(t *testing.T) {
	q := pausedQueue(t)
	withReq := func(f func(*cloudtaskspb.HttpRequest)) *cloudtaskspb.Task {
		task := httpTask("http://example.com/")
		f(task.GetHttpRequest())
		return task
	}
	tests := []struct {
		name string
		task *cloudtaskspb.Task
	}{
		{"bad id", &cloudtaskspb.Task{Name: q + "/tasks/a.b", MessageType: httpTask("http://x/").MessageType}},
		{"id too long", &cloudtaskspb.Task{Name: q + "/tasks/" + strings.Repeat("a", 501), MessageType: httpTask("http://x/").MessageType}},
		{"other queue", &cloudtaskspb.Task{Name: loc + "/queues/other/tasks/a", MessageType: httpTask("http://x/").MessageType}},
		{"no target", &cloudtaskspb.Task{}},
		{"no url", httpTask("")},
		{"relative url", httpTask("/path")},
		{"ftp url", httpTask("ftp://example.com/")},
		{"body with GET", withReq(func(r *cloudtaskspb.HttpRequest) { r.HttpMethod = cloudtaskspb.HttpMethod_GET; r.Body = []byte("x") })},
		{"body with DELETE", withReq(func(r *cloudtaskspb.HttpRequest) { r.HttpMethod = cloudtaskspb.HttpMethod_DELETE; r.Body = []byte("x") })},
		{"bad header name", withReq(func(r *cloudtaskspb.HttpRequest) { r.Headers = map[string]string{"Bad Name": "x"} })},
		{"bad header value", withReq(func(r *cloudtaskspb.HttpRequest) { r.Headers = map[string]string{"X-A": "a\r\nX-B: b"} })},
		{"too large", withReq(func(r *cloudtaskspb.HttpRequest) { r.Body = make([]byte, 1<<20+1) })},
		{"deadline too short", &cloudtaskspb.Task{DispatchDeadline: durationpb.New(14 * time.Second), MessageType: httpTask("http://x/").MessageType}},
		{"deadline too long", &cloudtaskspb.Task{DispatchDeadline: durationpb.New(31 * time.Minute), MessageType: httpTask("http://x/").MessageType}},
		{"scheduled too far ahead", &cloudtaskspb.Task{ScheduleTime: timestamppb.New(time.Now().Add(31 * 24 * time.Hour)), MessageType: httpTask("http://x/").MessageType}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ct.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: q, Task: tt.task})
			wantCode(t, err, codes.InvalidArgument)
		})
	}
	t.Run("allowed limits", func(t *testing.T) {
		for _, task := range []*cloudtaskspb.Task{
			{Name: q + "/tasks/" + strings.Repeat("a", 500), MessageType: httpTask("http://x/").MessageType},
			{DispatchDeadline: durationpb.New(15 * time.Second), MessageType: httpTask("http://x/").MessageType},
			{DispatchDeadline: durationpb.New(30 * time.Minute), MessageType: httpTask("http://x/").MessageType},
			{ScheduleTime: timestamppb.New(time.Now().Add(29 * 24 * time.Hour)), MessageType: httpTask("http://x/").MessageType},
			withReq(func(r *cloudtaskspb.HttpRequest) { r.HttpMethod = cloudtaskspb.HttpMethod_PATCH; r.Body = []byte("x") }),
		} {
			createTask(t, ct, q, task)
		}
	})
}

func TestTaskNameReuse(t *testing.T) {
	ctx := context.Background()
	q := pausedQueue(t)
	name := q + "/tasks/dup"
	task := &cloudtaskspb.Task{Name: name, MessageType: httpTask("http://example.com/").MessageType}
	createTask(t, ct, q, task)
	_, err := ct.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: q, Task: task})
	wantCode(t, err, codes.AlreadyExists)
	if err := ct.DeleteTask(ctx, &cloudtaskspb.DeleteTaskRequest{Name: name}); err != nil {
		t.Fatal(err)
	}
	_, err = ct.GetTask(ctx, &cloudtaskspb.GetTaskRequest{Name: name})
	wantCode(t, err, codes.NotFound)
	_, err = ct.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: q, Task: task})
	wantCode(t, err, codes.AlreadyExists)
	err = ct.DeleteTask(ctx, &cloudtaskspb.DeleteTaskRequest{Name: name})
	wantCode(t, err, codes.NotFound)

	t.Run("after the window", func(t *testing.T) {
		_, c := startServer(t, Options{NameReuseWindow: 100 * time.Millisecond})
		tg := newTarget(t, nil)
		q := createQueue(t, c, nil).Name
		task := &cloudtaskspb.Task{Name: q + "/tasks/done", MessageType: httpTask(tg.URL).MessageType}
		createTask(t, c, q, task)
		tg.waitDeliveries(t, 1, 5*time.Second)
		// Executed: the name stays taken for the window, then is free again.
		_, err := c.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: q, Task: task})
		wantCode(t, err, codes.AlreadyExists)
		eventually(t, 5*time.Second, "the name to become reusable", func() bool {
			_, err := c.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: q, Task: task})
			return err == nil
		})
	})
}

func TestTaskViews(t *testing.T) {
	ctx := context.Background()
	q := pausedQueue(t)
	task := httpTask("http://example.com/")
	task.GetHttpRequest().Body = []byte("payload")
	task.GetHttpRequest().Headers = map[string]string{"X-A": "1"}
	created, err := ct.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: q, Task: task, ResponseView: cloudtaskspb.Task_FULL})
	if err != nil {
		t.Fatal(err)
	}
	if string(created.GetHttpRequest().Body) != "payload" || created.View != cloudtaskspb.Task_FULL {
		t.Errorf("CreateTask FULL: body %q view %v", created.GetHttpRequest().Body, created.View)
	}
	for _, tt := range []struct {
		view     cloudtaskspb.Task_View
		wantBody string
		wantView cloudtaskspb.Task_View
	}{
		{cloudtaskspb.Task_VIEW_UNSPECIFIED, "", cloudtaskspb.Task_BASIC},
		{cloudtaskspb.Task_BASIC, "", cloudtaskspb.Task_BASIC},
		{cloudtaskspb.Task_FULL, "payload", cloudtaskspb.Task_FULL},
	} {
		t.Run(tt.view.String(), func(t *testing.T) {
			got, err := ct.GetTask(ctx, &cloudtaskspb.GetTaskRequest{Name: created.Name, ResponseView: tt.view})
			if err != nil {
				t.Fatal(err)
			}
			if string(got.GetHttpRequest().Body) != tt.wantBody || got.View != tt.wantView || got.GetHttpRequest().Headers["X-A"] != "1" {
				t.Errorf("GetTask: body %q view %v headers %v; want body %q view %v", got.GetHttpRequest().Body, got.View, got.GetHttpRequest().Headers, tt.wantBody, tt.wantView)
			}
			listed, err := ct.ListTasks(ctx, &cloudtaskspb.ListTasksRequest{Parent: q, ResponseView: tt.view}).Next()
			if err != nil {
				t.Fatal(err)
			}
			if string(listed.GetHttpRequest().Body) != tt.wantBody || listed.View != tt.wantView {
				t.Errorf("ListTasks: body %q view %v", listed.GetHttpRequest().Body, listed.View)
			}
		})
	}
}

func TestListTasksPaginates(t *testing.T) {
	ctx := context.Background()
	q := pausedQueue(t)
	var want []string
	for i := range 7 {
		name := fmt.Sprintf("%s/tasks/t%d", q, i)
		createTask(t, ct, q, &cloudtaskspb.Task{Name: name, MessageType: httpTask("http://example.com/").MessageType})
		want = append(want, name)
	}
	pager := iterator.NewPager(ct.ListTasks(ctx, &cloudtaskspb.ListTasksRequest{Parent: q}), 3, "")
	var pages [][]string
	for {
		var page []*cloudtaskspb.Task
		token, err := pager.NextPage(&page)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, task := range page {
			names = append(names, task.Name)
		}
		pages = append(pages, names)
		if token == "" {
			break
		}
	}
	if diff := cmp.Diff([][]string{want[:3], want[3:6], want[6:]}, pages); diff != "" {
		t.Errorf("pages (-want +got):\n%s", diff)
	}
	_, err := ct.ListTasks(ctx, &cloudtaskspb.ListTasksRequest{Parent: q, PageSize: -1}).Next()
	wantCode(t, err, codes.InvalidArgument)
}

func TestPurgeQueue(t *testing.T) {
	ctx := context.Background()
	q := pausedQueue(t)
	for range 3 {
		createTask(t, ct, q, httpTask("http://example.com/"))
	}
	got, err := ct.PurgeQueue(ctx, &cloudtaskspb.PurgeQueueRequest{Name: q})
	if err != nil {
		t.Fatal(err)
	}
	if got.PurgeTime == nil {
		t.Error("purge_time not set")
	}
	after := createTask(t, ct, q, httpTask("http://example.com/"))
	var names []string
	it := ct.ListTasks(ctx, &cloudtaskspb.ListTasksRequest{Parent: q})
	for {
		task, err := it.Next()
		if err == iterator.Done {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, task.Name)
	}
	if diff := cmp.Diff([]string{after.Name}, names); diff != "" {
		t.Errorf("tasks after purge (-want +got):\n%s", diff)
	}
}
