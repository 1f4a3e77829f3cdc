package tasksemu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/spanmart/spanmart/emulator/tasksemu/retry"
)

// idleWait bounds how long a dispatcher sleeps when nothing is due; any change pokes it sooner.
const idleWait = time.Hour

// start launches the queue's dispatcher. s.mu may be held.
func (q *queue) start(s *Server) {
	q.ctx, q.cancel = context.WithCancel(context.Background())
	q.done = make(chan struct{})
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// Cloud Tasks sends exactly the task's headers; Go would otherwise add Accept-Encoding.
	tr.DisableCompression = true
	tr.MaxIdleConnsPerHost = 64
	q.client = &http.Client{
		Transport: tr,
		// A redirect is the target's answer, not something to follow: it is a non-2xx response.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	go q.loop(s)
}

// stopAndWait stops the dispatcher, cancels in-flight attempts (their tasks stay pending) and
// waits until every goroutine of the queue has returned. s.mu must not be held.
func (q *queue) stopAndWait() {
	if q.cancel == nil {
		return
	}
	q.cancel()
	<-q.done
	q.dispatch.Wait()
	q.client.CloseIdleConnections()
}

func (q *queue) loop(s *Server) {
	defer close(q.done)
	timer := time.NewTimer(idleWait)
	defer timer.Stop()
	for {
		s.mu.Lock()
		wait := q.dispatchReadyLocked(s, time.Now())
		s.mu.Unlock()
		timer.Reset(wait)
		select {
		case <-q.ctx.Done():
			return
		case <-q.wake:
		case <-timer.C:
		}
	}
}

// dispatchReadyLocked starts every due task the rate limits allow, oldest schedule_time first,
// and returns how long to wait before looking again. s.mu is held.
func (q *queue) dispatchReadyLocked(s *Server, now time.Time) time.Duration {
	rl := q.pb.GetRateLimits()
	if q.pb.State != cloudtaskspb.Queue_RUNNING || q.inflight >= int(rl.GetMaxConcurrentDispatches()) {
		// Resume, UpdateQueue and finished attempts poke the dispatcher.
		return idleWait
	}
	if now.Before(q.throttledUntil) {
		return q.throttledUntil.Sub(now) // system throttling (throttleLocked)
	}
	for {
		t := q.nextDueLocked()
		if t == nil {
			return idleWait
		}
		if d := t.dueAt.Sub(now); d > 0 {
			return d
		}
		if q.inflight >= int(rl.GetMaxConcurrentDispatches()) {
			return idleWait // a finished attempt pokes the dispatcher
		}
		ok, wait := q.bucket.Take(now)
		if !ok {
			return max(wait, time.Millisecond)
		}
		q.startLocked(s, t, now)
	}
}

// attempt is what one dispatch needs, copied under the lock.
type attempt struct {
	task       *task
	method     string
	url        string
	headers    map[string]string
	body       []byte
	deadline   time.Duration
	eta        time.Time
	retries    int32
	execs      int32
	prevCode   int
	prevReason string
	audience   string // OIDC audience; empty when the task has no oidc_token
	email      string
}

// startLocked starts one attempt of t. s.mu is held.
func (q *queue) startLocked(s *Server, t *task, now time.Time) {
	hr := t.pb.GetHttpRequest()
	a := attempt{
		task:       t,
		method:     hr.GetHttpMethod().String(),
		url:        hr.GetUrl(),
		headers:    maps.Clone(hr.GetHeaders()),
		body:       hr.GetBody(),
		deadline:   t.pb.GetDispatchDeadline().AsDuration(),
		eta:        t.pb.GetScheduleTime().AsTime(),
		retries:    t.pb.GetDispatchCount(),
		execs:      t.execs,
		prevCode:   t.prevCode,
		prevReason: t.prevReason,
	}
	if tok := hr.GetOidcToken(); tok != nil {
		a.audience = tok.GetAudience()
		if a.audience == "" {
			a.audience = hr.GetUrl()
		}
		a.email = tok.GetServiceAccountEmail()
		if a.email == "" {
			a.email = s.opts.ServiceAccount
		}
	}
	applyHTTPTarget(&a, q.pb.GetHttpTarget(), s.opts.ServiceAccount)
	t.running = true
	q.inflight++
	q.dispatch.Add(1)
	go q.run(s, a)
}

// outcome of one attempt.
type outcome struct {
	code       int // HTTP status; 0 when no response arrived
	timedOut   bool
	retryAfter string
	err        error
}

func (q *queue) run(s *Server, a attempt) {
	defer q.dispatch.Done()
	dispatched := time.Now()
	out := q.send(s, a)
	s.mu.Lock()
	defer s.mu.Unlock()
	q.inflight--
	q.poke()
	t := a.task
	if q.ctx.Err() != nil {
		// The queue is being deleted or the server closed: the attempt was cancelled and does not count.
		t.running = false
		q.scheduleLocked(t)
		return
	}
	if q.tasks[t.id()] != t {
		return // deleted or purged while in flight
	}
	t.running = false
	now := time.Now()
	pb := t.pb
	pb.DispatchCount++
	q.attempts[outcomeClass(out)]++
	q.throttleLocked(s, out, now)
	if out.code != 0 {
		pb.ResponseCount++
	}
	if pb.FirstAttempt == nil {
		pb.FirstAttempt = &cloudtaskspb.Attempt{ScheduleTime: timestamppb.New(a.eta), DispatchTime: timestamppb.New(dispatched)}
	}
	pb.LastAttempt = &cloudtaskspb.Attempt{
		ScheduleTime:   timestamppb.New(a.eta),
		DispatchTime:   timestamppb.New(dispatched),
		ResponseTime:   timestamppb.New(now),
		ResponseStatus: responseStatus(out),
	}
	if out.code >= 200 && out.code < 300 {
		delete(q.tasks, t.id())
		s.tombstoneTaskLocked(pb.Name, now)
		s.logLocked(mutation{kind: taskDeleted, name: pb.Name, at: now})
		s.opts.Logf("tasksemu: %s %s -> %d (done after %d attempts)", a.method, pb.Name, out.code, pb.DispatchCount)
		return
	}
	if out.code != 0 && out.code < 500 {
		t.execs++
	}
	p := q.policy()
	if p.Exhausted(int(pb.DispatchCount), pb.FirstAttempt.DispatchTime.AsTime(), now) {
		delete(q.tasks, t.id())
		s.tombstoneTaskLocked(pb.Name, now)
		s.logLocked(mutation{kind: taskDeleted, name: pb.Name, at: now})
		s.opts.Logf("tasksemu: %s %s -> %s (giving up after %d attempts)", a.method, pb.Name, describe(out), pb.DispatchCount)
		return
	}
	delay := p.Backoff(int(pb.DispatchCount))
	if out.code == http.StatusTooManyRequests || out.code == http.StatusServiceUnavailable {
		if d, ok := retry.RetryAfter(out.retryAfter, now); ok && d > delay {
			delay = d
		}
	}
	pb.ScheduleTime = timestamppb.New(now.Add(delay))
	q.scheduleLocked(t)
	switch {
	case out.timedOut:
		t.prevCode, t.prevReason = http.StatusGatewayTimeout, "DEADLINE_EXCEEDED"
	case out.code == 0:
		t.prevCode, t.prevReason = http.StatusBadGateway, "CONNECTION_ERROR"
	default:
		t.prevCode, t.prevReason = out.code, "HTTP_"+strconv.Itoa(out.code)
	}
	if s.queues[q.name()] == q {
		// Not for a queue DeleteQueue removed just before cancelling it: the log has already
		// dropped its tasks, and replay refuses a mutation of a task it does not know.
		s.logLocked(attemptedTask(t))
	}
	s.opts.Logf("tasksemu: %s %s -> %s (retry %d in %v)", a.method, pb.Name, describe(out), pb.DispatchCount, delay)
}

// outcomeClass labels an attempt for the attempts counter.
func outcomeClass(out outcome) string {
	switch {
	case out.timedOut:
		return "timeout"
	case out.code == 0:
		return "error"
	}
	return strconv.Itoa(out.code/100) + "xx"
}

func describe(out outcome) string {
	switch {
	case out.timedOut:
		return "dispatch deadline exceeded"
	case out.code == 0:
		return fmt.Sprintf("error: %v", out.err)
	}
	return strconv.Itoa(out.code)
}

// send makes the HTTP request of one attempt.
func (q *queue) send(s *Server, a attempt) outcome {
	ctx, cancel := context.WithTimeout(q.ctx, a.deadline)
	defer cancel()
	var body io.Reader
	if len(a.body) > 0 {
		body = bytes.NewReader(a.body)
	}
	req, err := http.NewRequestWithContext(ctx, a.method, a.url, body)
	if err != nil {
		return outcome{err: err}
	}
	for k, v := range a.headers {
		// Host and Content-Length are derived from the URL and the body, as in production.
		if !strings.EqualFold(k, "Host") && !strings.EqualFold(k, "Content-Length") {
			req.Header[http.CanonicalHeaderKey(k)] = []string{v}
		}
	}
	h := req.Header
	h.Set("User-Agent", "Google-Cloud-Tasks")
	h.Set("X-CloudTasks-QueueName", shortID(q.name()))
	h.Set("X-CloudTasks-TaskName", a.task.id())
	h.Set("X-CloudTasks-TaskRetryCount", strconv.Itoa(int(a.retries)))
	h.Set("X-CloudTasks-TaskExecutionCount", strconv.Itoa(int(a.execs)))
	h.Set("X-CloudTasks-TaskETA", strconv.FormatFloat(float64(a.eta.UnixNano())/1e9, 'f', 6, 64))
	if a.retries > 0 && a.prevCode != 0 {
		h.Set("X-CloudTasks-TaskPreviousResponse", strconv.Itoa(a.prevCode))
		h.Set("X-CloudTasks-TaskRetryReason", a.prevReason)
	}
	if a.audience != "" {
		tok, err := s.issuer.Token(a.audience, a.email, time.Now())
		if err != nil {
			return outcome{err: fmt.Errorf("mint OIDC token: %w", err)}
		}
		h.Set("Authorization", "Bearer "+tok)
	}
	resp, err := q.client.Do(req)
	if err != nil {
		return outcome{err: err, timedOut: errors.Is(ctx.Err(), context.DeadlineExceeded) && q.ctx.Err() == nil}
	}
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && q.ctx.Err() == nil {
		return outcome{err: err, timedOut: true}
	}
	return outcome{code: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
}

// responseStatus is the Attempt.response_status Cloud Tasks records for an outcome.
func responseStatus(out outcome) *spb.Status {
	c := codes.OK
	switch {
	case out.timedOut:
		c = codes.DeadlineExceeded
	case out.code == 0:
		c = codes.Unavailable
	case out.code >= 200 && out.code < 300:
		c = codes.OK
	case out.code == 400:
		c = codes.InvalidArgument
	case out.code == 401:
		c = codes.Unauthenticated
	case out.code == 403:
		c = codes.PermissionDenied
	case out.code == 404:
		c = codes.NotFound
	case out.code == 409:
		c = codes.Aborted
	case out.code == 429:
		c = codes.ResourceExhausted
	case out.code == 501:
		c = codes.Unimplemented
	case out.code == 503:
		c = codes.Unavailable
	case out.code == 504:
		c = codes.DeadlineExceeded
	case out.code < 500:
		c = codes.FailedPrecondition
	default:
		c = codes.Internal
	}
	st := &spb.Status{Code: int32(c)}
	if out.code != 0 {
		st.Message = http.StatusText(out.code)
	} else if out.err != nil {
		st.Message = out.err.Error()
	}
	return st
}

// throttleLocked is Cloud Tasks' system throttling, as the emulator models it. Production backs a
// whole queue off, beyond the failing task's own retry, when its target answers 429 (Too Many
// Requests) or 503 (Service Unavailable): "Cloud Tasks will use a higher backoff rate" for the
// queue, without saying how much. The model: the k-th 429 or 503 answer since the queue's last 2xx
// pauses every dispatch of the queue (RunTask excepted) for the queue's own back-off of retry k
// (min_backoff, doubling up to max_backoff); a 2xx answer starts the count again. Any other failure
// (a 500, a 409, a timeout, a refused connection) backs off only its own task. So a consumer that
// answers 503 for one task slows every task of its queue, which is why a consumer answers 503 only
// for a fault of its own (docs/architecture.md, "Delivery contract"). s.mu is held.
func (q *queue) throttleLocked(s *Server, out outcome, now time.Time) {
	switch {
	case out.code == http.StatusTooManyRequests || out.code == http.StatusServiceUnavailable:
		q.throttleSteps++
		pause := q.policy().Backoff(q.throttleSteps)
		if until := now.Add(pause); until.After(q.throttledUntil) {
			q.throttledUntil = until
			q.throttles++
			s.opts.Logf("tasksemu: queue %s throttled for %v (answer %d; %d of them since the last 2xx)", q.name(), pause, out.code, q.throttleSteps)
		}
	case out.code >= 200 && out.code < 300:
		q.throttleSteps = 0
	}
}
