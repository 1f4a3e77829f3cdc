package tasksemu

import (
	"crypto/rand"
	"math/big"
	"net/url"
	"strings"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Limits Cloud Tasks enforces on tasks.
const (
	defaultDispatchDeadline = 10 * time.Minute
	minDispatchDeadline     = 15 * time.Second
	maxDispatchDeadline     = 30 * time.Minute
	maxScheduleAhead        = 30 * 24 * time.Hour
	maxTaskSize             = 1 << 20
	maxURLLength            = 2083
)

// headerChars are the characters of an HTTP header name (an RFC 9110 token).
var headerChars = nameChars("0123456789!#$%&'*+-.^_`|~")

// task is a pending task. Guarded by Server.mu.
type task struct {
	// pb is the full view; ScheduleTime is when the next attempt is due. Once the task is
	// pending only pb's own fields change: its sub-messages (the request, schedule_time, the
	// attempts) are replaced, never changed, so that a snapshot can share them (frozenTask).
	pb *cloudtaskspb.Task

	execs      int32     // attempts answered with a non-5xx response (X-CloudTasks-TaskExecutionCount)
	prevCode   int       // previous attempt's status code (X-CloudTasks-TaskPreviousResponse), 0 = none
	prevReason string    // why the previous attempt is retried (X-CloudTasks-TaskRetryReason)
	running    bool      // an attempt is in flight
	dueAt      time.Time // schedule_time when the task last entered the queue's due heap
}

func (t *task) id() string { return shortID(t.pb.GetName()) }

// view returns the task as the API shows it: BASIC (the default) omits the body.
func (t *task) view(v cloudtaskspb.Task_View) *cloudtaskspb.Task {
	c := proto.Clone(t.pb).(*cloudtaskspb.Task)
	if v != cloudtaskspb.Task_FULL {
		v = cloudtaskspb.Task_BASIC
		if hr := c.GetHttpRequest(); hr != nil {
			hr.Body = nil
		}
	}
	c.View = v
	return c
}

// newTaskID is a random decimal id like the ones Cloud Tasks generates.
func newTaskID() string {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		panic(err)
	}
	return n.String()
}

func bodyAllowed(m cloudtaskspb.HttpMethod) bool {
	return m == cloudtaskspb.HttpMethod_POST || m == cloudtaskspb.HttpMethod_PUT || m == cloudtaskspb.HttpMethod_PATCH
}

// prepareTask validates a CreateTask request and fills in defaults. queueName is the parent.
func prepareTask(queueName string, in *cloudtaskspb.Task, now time.Time) (*cloudtaskspb.Task, error) {
	bad := func(format string, args ...any) error {
		return status.Errorf(codes.InvalidArgument, format, args...)
	}
	if in == nil {
		return nil, bad("task is required")
	}
	t := proto.Clone(in).(*cloudtaskspb.Task)
	if t.Name == "" {
		t.Name = queueName + "/tasks/" + newTaskID()
	} else {
		q, _, err := parseTaskName(t.Name)
		if err != nil {
			return nil, err
		}
		if q != queueName {
			return nil, bad("task name %q is not in queue %q", t.Name, queueName)
		}
	}
	if t.GetAppEngineHttpRequest() != nil {
		return nil, status.Error(codes.Unimplemented, "App Engine tasks are not supported by the emulator; use http_request")
	}
	hr := t.GetHttpRequest()
	if hr == nil {
		return nil, bad("task.http_request is required")
	}
	if hr.Url == "" {
		return nil, bad("http_request.url is required")
	}
	if len(hr.Url) > maxURLLength {
		return nil, bad("http_request.url is longer than %d characters", maxURLLength)
	}
	u, err := url.Parse(hr.Url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, bad("http_request.url %q must be an absolute http or https URL", hr.Url)
	}
	if hr.HttpMethod == cloudtaskspb.HttpMethod_HTTP_METHOD_UNSPECIFIED {
		hr.HttpMethod = cloudtaskspb.HttpMethod_POST
	}
	if len(hr.Body) > 0 && !bodyAllowed(hr.HttpMethod) {
		return nil, bad("a body is only allowed with POST, PUT or PATCH, not %v", hr.HttpMethod)
	}
	for k, v := range hr.Headers {
		if !headerChars.matches(k, 0) || strings.ContainsAny(v, "\r\n\x00") {
			return nil, bad("http_request.headers: invalid header %q", k)
		}
	}
	if tok := hr.GetOidcToken(); tok != nil && tok.ServiceAccountEmail == "" {
		return nil, bad("http_request.oidc_token.service_account_email is required")
	}
	if tok := hr.GetOauthToken(); tok != nil && tok.ServiceAccountEmail == "" {
		return nil, bad("http_request.oauth_token.service_account_email is required")
	}
	if t.DispatchDeadline == nil {
		t.DispatchDeadline = durationpb.New(defaultDispatchDeadline)
	} else if d := t.DispatchDeadline.AsDuration(); d < minDispatchDeadline || d > maxDispatchDeadline {
		return nil, bad("dispatch_deadline must be between %v and %v, got %v", minDispatchDeadline, maxDispatchDeadline, d)
	}
	if t.ScheduleTime == nil || t.ScheduleTime.AsTime().Before(now) {
		t.ScheduleTime = timestamppb.New(now)
	} else if t.ScheduleTime.AsTime().Sub(now) > maxScheduleAhead {
		return nil, bad("schedule_time may be at most 30 days in the future")
	}
	t.CreateTime = timestamppb.New(now)
	t.DispatchCount, t.ResponseCount = 0, 0
	t.FirstAttempt, t.LastAttempt = nil, nil
	t.View = cloudtaskspb.Task_VIEW_UNSPECIFIED
	if proto.Size(t) > maxTaskSize {
		return nil, bad("task size %d bytes exceeds the maximum of %d bytes", proto.Size(t), maxTaskSize)
	}
	return t, nil
}
