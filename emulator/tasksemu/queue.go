package tasksemu

import (
	"context"
	"net/http"
	"sync"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/spanmart/spanmart/emulator/tasksemu/retry"
)

// Limits Cloud Tasks enforces on queue settings.
const (
	defaultRate        = 500.0
	maxRate            = 500.0
	defaultConcurrency = 1000
	maxConcurrency     = 5000
)

// queue is one queue's configuration, its pending tasks and its dispatcher. All fields are
// guarded by Server.mu except the ones noted.
type queue struct {
	pb       *cloudtaskspb.Queue // name, rate limits, retry config, state, purge time
	tasks    map[string]*task    // by short id
	due      dueHeap             // pending tasks by due time (see due.go)
	bucket   *retry.Bucket       // safe for concurrent use
	inflight int
	attempts map[string]int64 // finished attempts by outcome class (2xx, 4xx, 5xx, timeout, error), for /metrics
	// System throttling (throttleLocked): no dispatch before throttledUntil; throttleSteps counts the
	// 429 and 503 answers since the last 2xx.
	throttledUntil time.Time
	throttleSteps  int
	throttles      int64 // pauses started, for /metrics

	// Set by start; wake is buffered so a signal is never lost while the dispatcher is busy.
	wake     chan struct{}
	ctx      context.Context // cancelled when the queue is deleted or the server closes
	cancel   context.CancelFunc
	done     chan struct{}  // closed when the dispatcher loop has returned
	dispatch sync.WaitGroup // in-flight HTTP requests
	client   *http.Client
}

func newQueue(pb *cloudtaskspb.Queue, now time.Time) *queue {
	rl := pb.GetRateLimits()
	return &queue{
		pb:       pb,
		tasks:    map[string]*task{},
		attempts: map[string]int64{},
		bucket:   retry.NewBucket(rl.GetMaxDispatchesPerSecond(), int(rl.GetMaxBurstSize()), now),
		wake:     make(chan struct{}, 1),
	}
}

func (q *queue) name() string { return q.pb.GetName() }

func (q *queue) policy() retry.Policy {
	rc := q.pb.GetRetryConfig()
	return retry.Policy{
		MaxAttempts:      rc.GetMaxAttempts(),
		MaxRetryDuration: rc.GetMaxRetryDuration().AsDuration(),
		MinBackoff:       rc.GetMinBackoff().AsDuration(),
		MaxBackoff:       rc.GetMaxBackoff().AsDuration(),
		MaxDoublings:     rc.GetMaxDoublings(),
	}
}

// poke wakes the dispatcher without blocking.
func (q *queue) poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func durOrNil(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}

// defaultQueue is a RUNNING queue with Cloud Tasks' defaults.
func defaultQueue(name string) *cloudtaskspb.Queue {
	p := retry.DefaultPolicy
	return &cloudtaskspb.Queue{
		Name:  name,
		State: cloudtaskspb.Queue_RUNNING,
		RateLimits: &cloudtaskspb.RateLimits{
			MaxDispatchesPerSecond:  defaultRate,
			MaxBurstSize:            int32(retry.DefaultBurst(defaultRate)),
			MaxConcurrentDispatches: defaultConcurrency,
		},
		RetryConfig: &cloudtaskspb.RetryConfig{
			MaxAttempts:      p.MaxAttempts,
			MaxRetryDuration: durOrNil(p.MaxRetryDuration),
			MinBackoff:       durationpb.New(p.MinBackoff),
			MaxBackoff:       durationpb.New(p.MaxBackoff),
			MaxDoublings:     p.MaxDoublings,
		},
	}
}

// queueFields are the update_mask paths UpdateQueue accepts.
var queueFields = map[string]bool{
	"rate_limits": true, "rate_limits.max_dispatches_per_second": true,
	"rate_limits.max_concurrent_dispatches": true, "rate_limits.max_burst_size": true,
	"retry_config": true, "retry_config.max_attempts": true, "retry_config.max_retry_duration": true,
	"retry_config.min_backoff": true, "retry_config.max_backoff": true, "retry_config.max_doublings": true,
	"http_target": true, "app_engine_routing_override": true,
	"stackdriver_logging_config": true, "stackdriver_logging_config.sampling_ratio": true,
}

var allQueueFields = []string{"rate_limits", "retry_config", "http_target", "app_engine_routing_override", "stackdriver_logging_config"}

// applyQueue copies the fields named by paths from src into dst. A field that src leaves unset
// takes its default, as in CreateQueue. max_burst_size is output only: it follows the rate.
func applyQueue(dst, src *cloudtaskspb.Queue, paths []string) error {
	def := defaultQueue(dst.Name)
	srl, src_rc := src.GetRateLimits(), src.GetRetryConfig()
	drl, drc := dst.RateLimits, dst.RetryConfig
	for _, p := range paths {
		if !queueFields[p] {
			return status.Errorf(codes.InvalidArgument, "update_mask path %q is not an updatable Queue field", p)
		}
		all := func(prefix string) bool { return p == prefix }
		if all("rate_limits") || p == "rate_limits.max_dispatches_per_second" {
			drl.MaxDispatchesPerSecond = srl.GetMaxDispatchesPerSecond()
			if drl.MaxDispatchesPerSecond == 0 {
				drl.MaxDispatchesPerSecond = def.RateLimits.MaxDispatchesPerSecond
			}
			drl.MaxBurstSize = int32(retry.DefaultBurst(drl.MaxDispatchesPerSecond))
		}
		if all("rate_limits") || p == "rate_limits.max_concurrent_dispatches" {
			drl.MaxConcurrentDispatches = srl.GetMaxConcurrentDispatches()
			if drl.MaxConcurrentDispatches == 0 {
				drl.MaxConcurrentDispatches = def.RateLimits.MaxConcurrentDispatches
			}
		}
		if all("retry_config") || p == "retry_config.max_attempts" {
			drc.MaxAttempts = src_rc.GetMaxAttempts()
			if drc.MaxAttempts == 0 {
				drc.MaxAttempts = def.RetryConfig.MaxAttempts
			}
		}
		if all("retry_config") || p == "retry_config.max_retry_duration" {
			drc.MaxRetryDuration = src_rc.GetMaxRetryDuration()
		}
		if all("retry_config") || p == "retry_config.min_backoff" {
			drc.MinBackoff = src_rc.GetMinBackoff()
			if drc.MinBackoff == nil {
				drc.MinBackoff = def.RetryConfig.MinBackoff
			}
		}
		if all("retry_config") || p == "retry_config.max_backoff" {
			drc.MaxBackoff = src_rc.GetMaxBackoff()
			if drc.MaxBackoff == nil {
				drc.MaxBackoff = def.RetryConfig.MaxBackoff
			}
		}
		if all("retry_config") || p == "retry_config.max_doublings" {
			drc.MaxDoublings = src_rc.GetMaxDoublings()
			if drc.MaxDoublings == 0 {
				drc.MaxDoublings = def.RetryConfig.MaxDoublings
			}
		}
		switch p {
		case "http_target":
			dst.HttpTarget = src.GetHttpTarget()
		case "app_engine_routing_override":
			dst.AppEngineRoutingOverride = src.GetAppEngineRoutingOverride()
		case "stackdriver_logging_config", "stackdriver_logging_config.sampling_ratio":
			dst.StackdriverLoggingConfig = src.GetStackdriverLoggingConfig()
		}
	}
	return validateQueue(dst)
}

func validateQueue(q *cloudtaskspb.Queue) error {
	rl, rc := q.GetRateLimits(), q.GetRetryConfig()
	bad := func(format string, args ...any) error {
		return status.Errorf(codes.InvalidArgument, format, args...)
	}
	switch {
	case rl.GetMaxDispatchesPerSecond() <= 0:
		return bad("rate_limits.max_dispatches_per_second must be positive, got %v", rl.GetMaxDispatchesPerSecond())
	case rl.GetMaxConcurrentDispatches() < 1 || rl.GetMaxConcurrentDispatches() > maxConcurrency:
		return bad("rate_limits.max_concurrent_dispatches must be in [1, %d], got %d", maxConcurrency, rl.GetMaxConcurrentDispatches())
	case rc.GetMaxAttempts() < -1:
		return bad("retry_config.max_attempts must be -1 (unlimited) or more, got %d", rc.GetMaxAttempts())
	case rc.GetMaxRetryDuration().AsDuration() < 0:
		return bad("retry_config.max_retry_duration must not be negative")
	case rc.GetMinBackoff().AsDuration() < 0 || rc.GetMaxBackoff().AsDuration() < 0:
		return bad("retry_config backoffs must not be negative")
	case rc.GetMinBackoff().AsDuration() > rc.GetMaxBackoff().AsDuration():
		return bad("retry_config.min_backoff (%v) must not exceed max_backoff (%v)", rc.GetMinBackoff().AsDuration(), rc.GetMaxBackoff().AsDuration())
	case rc.GetMaxDoublings() < 0:
		return bad("retry_config.max_doublings must not be negative")
	}
	if uo := q.GetHttpTarget().GetUriOverride(); uo != nil {
		if uo.Host != nil && uo.GetHost() == "" {
			return bad("http_target.uri_override.host must not be empty")
		}
		if uo.GetPort() < 0 || uo.GetPort() > 65535 {
			return bad("http_target.uri_override.port must be in [0, 65535]")
		}
	}
	return nil
}

// queueView is the Queue returned to clients.
func (q *queue) view() *cloudtaskspb.Queue { return proto.Clone(q.pb).(*cloudtaskspb.Queue) }
