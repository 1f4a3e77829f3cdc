package tasksemu

import (
	"context"
	"encoding/base64"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// maxPageSize caps ListQueues and ListTasks pages.
const maxPageSize = 1000

// service implements google.cloud.tasks.v2.CloudTasks. RPCs it does not implement (App Engine
// and batch APIs, IAM, CMEK) answer UNIMPLEMENTED, which the client does not retry.
type service struct {
	cloudtaskspb.UnimplementedCloudTasksServer
	s *Server
}

// queueLocked returns the named queue or NOT_FOUND. s.mu is held.
func (s *Server) queueLocked(name string) (*queue, error) {
	if _, err := parseQueueName(name); err != nil {
		return nil, err
	}
	if s.closed {
		return nil, status.Error(codes.Unavailable, errClosed.Error())
	}
	q, ok := s.queues[name]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "queue %s does not exist", name)
	}
	return q, nil
}

func (sv *service) CreateQueue(ctx context.Context, req *cloudtaskspb.CreateQueueRequest) (*cloudtaskspb.Queue, error) {
	if err := parseLocation(req.GetParent()); err != nil {
		return nil, err
	}
	in := req.GetQueue()
	if in == nil {
		return nil, status.Error(codes.InvalidArgument, "queue is required")
	}
	parent, err := parseQueueName(in.GetName())
	if err != nil {
		return nil, err
	}
	if parent != req.GetParent() {
		return nil, status.Errorf(codes.InvalidArgument, "queue name %q is not under parent %q", in.GetName(), req.GetParent())
	}
	return sv.s.createQueue(in)
}

func (s *Server) createQueue(in *cloudtaskspb.Queue) (*cloudtaskspb.Queue, error) {
	pb := defaultQueue(in.GetName())
	if err := applyQueue(pb, in, allQueueFields); err != nil {
		return nil, err
	}
	if err := s.validateQueue(pb); err != nil {
		return nil, err
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, status.Error(codes.Unavailable, errClosed.Error())
	}
	if _, ok := s.queues[pb.Name]; ok {
		return nil, status.Errorf(codes.AlreadyExists, "queue %s already exists", pb.Name)
	}
	if at, ok := s.queueTomb[pb.Name]; ok {
		if now.Sub(at) < s.opts.QueueReuseWindow {
			return nil, status.Errorf(codes.FailedPrecondition, "the queue cannot be created because a queue with this name existed too recently")
		}
		delete(s.queueTomb, pb.Name)
	}
	q := newQueue(pb, now)
	s.queues[pb.Name] = q
	q.start(s)
	s.logLocked(putQueue(q))
	s.opts.Logf("tasksemu: created queue %s", pb.Name)
	return q.view(), nil
}

func (sv *service) GetQueue(ctx context.Context, req *cloudtaskspb.GetQueueRequest) (*cloudtaskspb.Queue, error) {
	s := sv.s
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queueLocked(req.GetName())
	if err != nil {
		return nil, err
	}
	return q.view(), nil
}

// pageToken encodes the last name returned; the next page starts after it.
// page returns, in key order, the items of the first n keys (all keys past the previous page)
// and the token of the next page ("" when these are the last).
func page[T any](keys []string, n int, item func(key string) T) ([]T, string) {
	sort.Strings(keys)
	var out []T
	for i, k := range keys {
		if i == n {
			return out, pageToken(keys[i-1])
		}
		out = append(out, item(k))
	}
	return out, ""
}

func pageToken(last string) string { return base64.RawURLEncoding.EncodeToString([]byte(last)) }

func parsePage(size int32, token string) (int, string, error) {
	if size < 0 {
		return 0, "", status.Errorf(codes.InvalidArgument, "page_size must not be negative")
	}
	n := int(size)
	if n == 0 || n > maxPageSize {
		n = maxPageSize
	}
	after, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return 0, "", status.Errorf(codes.InvalidArgument, "invalid page_token")
	}
	return n, string(after), nil
}

func (sv *service) ListQueues(ctx context.Context, req *cloudtaskspb.ListQueuesRequest) (*cloudtaskspb.ListQueuesResponse, error) {
	if err := parseLocation(req.GetParent()); err != nil {
		return nil, err
	}
	n, after, err := parsePage(req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	var wantState cloudtaskspb.Queue_State
	if f := strings.TrimSpace(req.GetFilter()); f != "" {
		k, v, ok := strings.Cut(f, ":")
		st, known := cloudtaskspb.Queue_State_value[strings.TrimSpace(v)]
		if !ok || strings.TrimSpace(k) != "state" || !known {
			return nil, status.Errorf(codes.InvalidArgument, "unsupported filter %q (the emulator supports \"state: PAUSED\" style filters)", f)
		}
		wantState = cloudtaskspb.Queue_State(st)
	}
	s := sv.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	prefix := req.GetParent() + "/queues/"
	for name, q := range s.queues {
		if strings.HasPrefix(name, prefix) && name > after && (wantState == 0 || q.pb.State == wantState) {
			names = append(names, name)
		}
	}
	resp := &cloudtaskspb.ListQueuesResponse{}
	resp.Queues, resp.NextPageToken = page(names, n, func(name string) *cloudtaskspb.Queue { return s.queues[name].view() })
	return resp, nil
}

func (sv *service) UpdateQueue(ctx context.Context, req *cloudtaskspb.UpdateQueueRequest) (*cloudtaskspb.Queue, error) {
	in := req.GetQueue()
	if in == nil {
		return nil, status.Error(codes.InvalidArgument, "queue is required")
	}
	if _, err := parseQueueName(in.GetName()); err != nil {
		return nil, err
	}
	paths := req.GetUpdateMask().GetPaths()
	if len(paths) == 0 {
		paths = allQueueFields
	}
	s := sv.s
	s.mu.Lock()
	q, ok := s.queues[in.GetName()]
	if !ok {
		s.mu.Unlock()
		return s.createQueue(in)
	}
	defer s.mu.Unlock()
	if s.closed {
		return nil, status.Error(codes.Unavailable, errClosed.Error())
	}
	pb := proto.Clone(q.pb).(*cloudtaskspb.Queue)
	if err := applyQueue(pb, in, paths); err != nil {
		return nil, err
	}
	if err := sv.s.validateQueue(pb); err != nil {
		return nil, err
	}
	q.pb = pb
	q.bucket.SetRate(pb.RateLimits.MaxDispatchesPerSecond, int(pb.RateLimits.MaxBurstSize), time.Now())
	q.poke()
	s.logLocked(putQueue(q))
	return q.view(), nil
}

func (sv *service) DeleteQueue(ctx context.Context, req *cloudtaskspb.DeleteQueueRequest) (*emptypb.Empty, error) {
	s := sv.s
	s.mu.Lock()
	q, err := s.queueLocked(req.GetName())
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	now := time.Now()
	delete(s.queues, q.name())
	s.queueTomb[q.name()] = now
	s.logLocked(mutation{kind: queueDeleted, name: q.name(), at: now})
	s.mu.Unlock()
	// Outside the lock: finishing dispatches take s.mu.
	q.stopAndWait()
	s.opts.Logf("tasksemu: deleted queue %s", q.name())
	return &emptypb.Empty{}, nil
}

func (sv *service) PurgeQueue(ctx context.Context, req *cloudtaskspb.PurgeQueueRequest) (*cloudtaskspb.Queue, error) {
	s := sv.s
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queueLocked(req.GetName())
	if err != nil {
		return nil, err
	}
	now := time.Now()
	for id, t := range q.tasks {
		if !t.pb.CreateTime.AsTime().After(now) {
			delete(q.tasks, id)
		}
	}
	q.pb.PurgeTime = timestamppb.New(now)
	s.logLocked(mutation{kind: queuePurged, name: q.name(), at: now})
	return q.view(), nil
}

func (sv *service) setState(name string, st cloudtaskspb.Queue_State) (*cloudtaskspb.Queue, error) {
	s := sv.s
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queueLocked(name)
	if err != nil {
		return nil, err
	}
	q.pb.State = st
	q.poke()
	s.logLocked(putQueue(q))
	return q.view(), nil
}

func (sv *service) PauseQueue(ctx context.Context, req *cloudtaskspb.PauseQueueRequest) (*cloudtaskspb.Queue, error) {
	return sv.setState(req.GetName(), cloudtaskspb.Queue_PAUSED)
}

func (sv *service) ResumeQueue(ctx context.Context, req *cloudtaskspb.ResumeQueueRequest) (*cloudtaskspb.Queue, error) {
	return sv.setState(req.GetName(), cloudtaskspb.Queue_RUNNING)
}

func (sv *service) CreateTask(ctx context.Context, req *cloudtaskspb.CreateTaskRequest) (*cloudtaskspb.Task, error) {
	if _, err := parseQueueName(req.GetParent()); err != nil {
		return nil, err
	}
	now := time.Now()
	pb, err := prepareTask(req.GetParent(), req.GetTask(), now)
	if err != nil {
		return nil, err
	}
	s := sv.s
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queueLocked(req.GetParent())
	if err != nil {
		return nil, err
	}
	t := &task{pb: pb}
	if _, ok := q.tasks[t.id()]; ok {
		return nil, status.Errorf(codes.AlreadyExists, "task %s already exists", pb.Name)
	}
	if at, ok := s.taskTomb[pb.Name]; ok {
		if now.Sub(at) < s.opts.NameReuseWindow {
			return nil, status.Errorf(codes.AlreadyExists, "task %s was deleted or executed recently; its name cannot be reused yet", pb.Name)
		}
		delete(s.taskTomb, pb.Name)
	}
	q.addLocked(t)
	q.poke()
	s.logLocked(createdTask(t))
	return t.view(req.GetResponseView()), nil
}

// taskLocked returns the named task and its queue, or NOT_FOUND. s.mu is held.
func (s *Server) taskLocked(name string) (*queue, *task, error) {
	qname, id, err := parseTaskName(name)
	if err != nil {
		return nil, nil, err
	}
	q, err := s.queueLocked(qname)
	if err != nil {
		return nil, nil, err
	}
	t, ok := q.tasks[id]
	if !ok {
		return nil, nil, status.Errorf(codes.NotFound, "task %s does not exist", name)
	}
	return q, t, nil
}

func (sv *service) GetTask(ctx context.Context, req *cloudtaskspb.GetTaskRequest) (*cloudtaskspb.Task, error) {
	s := sv.s
	s.mu.Lock()
	defer s.mu.Unlock()
	_, t, err := s.taskLocked(req.GetName())
	if err != nil {
		return nil, err
	}
	return t.view(req.GetResponseView()), nil
}

func (sv *service) ListTasks(ctx context.Context, req *cloudtaskspb.ListTasksRequest) (*cloudtaskspb.ListTasksResponse, error) {
	n, after, err := parsePage(req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	s := sv.s
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queueLocked(req.GetParent())
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(q.tasks))
	for id := range q.tasks {
		if id > after {
			ids = append(ids, id)
		}
	}
	resp := &cloudtaskspb.ListTasksResponse{}
	resp.Tasks, resp.NextPageToken = page(ids, n, func(id string) *cloudtaskspb.Task { return q.tasks[id].view(req.GetResponseView()) })
	return resp, nil
}

func (sv *service) DeleteTask(ctx context.Context, req *cloudtaskspb.DeleteTaskRequest) (*emptypb.Empty, error) {
	s := sv.s
	s.mu.Lock()
	defer s.mu.Unlock()
	q, t, err := s.taskLocked(req.GetName())
	if err != nil {
		return nil, err
	}
	now := time.Now()
	delete(q.tasks, t.id())
	s.tombstoneTaskLocked(t.pb.Name, now)
	s.logLocked(mutation{kind: taskDeleted, name: t.pb.Name, at: now})
	return &emptypb.Empty{}, nil
}

// RunTask dispatches the task now, whatever its schedule_time, the queue's state or its rate
// limits. A task already being attempted is not attempted a second time.
func (sv *service) RunTask(ctx context.Context, req *cloudtaskspb.RunTaskRequest) (*cloudtaskspb.Task, error) {
	s := sv.s
	s.mu.Lock()
	defer s.mu.Unlock()
	q, t, err := s.taskLocked(req.GetName())
	if err != nil {
		return nil, err
	}
	if !t.running {
		q.startLocked(s, t, time.Now())
	}
	return t.view(req.GetResponseView()), nil
}
