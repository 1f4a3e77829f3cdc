package relay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/spanner"
	"github.com/googleapis/gax-go/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spanmart/spanmart/pkg/outboxlib"
)

// Source is one service database whose outbox the relay delivers.
type Source struct {
	Name     string // the service, e.g. "orders"; events carry ce-source "//spanmart/" + Name
	Client   *spanner.Client
	Database string // full database name, for logs and Status
}

// Subscriber is a consumer of events: its Cloud Tasks queues and one HTTP endpoint.
type Subscriber struct {
	Name string // e.g. "fulfillment"; part of the task names
	// Queues are the subscriber's own queues, projects/P/locations/L/queues/Q each: usually one.
	// A queue dispatches at most 500 tasks/s, so a subscriber that needs more spreads over several:
	// an event's task goes to the queue its aggregate id hashes to (QueueFor), so all of one
	// aggregate's events share a queue and a task recreated after a crash is the same task.
	Queues   []string
	URL      string // the consumer's event endpoint, e.g. https://fulfillment-xyz.a.run.app/events
	Audience string // the OIDC token's audience; default URL
	// LedgerURL is the consumer's ledger endpoint (outboxlib.PathLedger), asked by the delivery
	// ledger with an ID token for Audience; "" leaves the subscriber's deliveries unaudited.
	LedgerURL string
}

// QueueFor returns the queue of sub that takes the tasks of aggregateID's events.
func (sub Subscriber) QueueFor(aggregateID string) string {
	if len(sub.Queues) == 1 {
		return sub.Queues[0]
	}
	h := fnv.New32a()
	h.Write([]byte(aggregateID))
	return sub.Queues[h.Sum32()%uint32(len(sub.Queues))]
}

// Routes maps an event type to its subscribers. An event type without subscribers is published
// without tasks.
type Routes map[string][]Subscriber

// Tasks is the part of the Cloud Tasks API the relay uses. *cloudtasks.Client (apiv2) satisfies it.
type Tasks interface {
	CreateTask(ctx context.Context, req *cloudtaskspb.CreateTaskRequest, opts ...gax.CallOption) (*cloudtaskspb.Task, error)
	GetQueue(ctx context.Context, req *cloudtaskspb.GetQueueRequest, opts ...gax.CallOption) (*cloudtaskspb.Queue, error)
}

// Config configures New. Zero durations and counts take the defaults in brackets.
type Config struct {
	Sources        []Source
	Routes         Routes
	Tasks          Tasks
	ServiceAccount string // e-mail of the OIDC tokens of the tasks (required)

	Owner          string        // lease owner id [hostname + random suffix]
	LeaseDuration  time.Duration // [10 s]; renewed every third
	PollInterval   time.Duration // [150 ms] the first back-off after a failed batch
	MarkEvery      time.Duration // [100 ms] how often a source marks what it enqueued, all in one transaction (mark.go)
	MaxIdle        time.Duration // [1 s] between probes for due rows that no nudge announced; a failed batch's back-off cap
	BatchSize      int           // rows per scan [200]
	Parallelism    int           // concurrent CreateTask calls per source [32]
	MaxAttempts    int64         // failed enqueues before an event is quarantined [20]
	BaseBackoff    time.Duration // first per-event back-off [1 s]
	MaxBackoff     time.Duration // per-event back-off cap [5 min]
	TasksDownMax   time.Duration // cap of the whole-relay back-off while Cloud Tasks is unavailable [30 s]
	CallTimeout    time.Duration // per CreateTask call [10 s]
	StatusInterval time.Duration // refresh of the pending/oldest/quarantined gauges [5 s]
	// ReplayWindow is how long after publication an event may still be replayed [7 days, the
	// outbox TTL]; it counts towards the redelivery window checked at start-up.
	ReplayWindow time.Duration

	// The delivery ledger (ledger.go): on when Tokens is set and a subscriber has a LedgerURL.
	Tokens         TokenSource   // ID tokens for the consumers' ledger endpoints
	HTTPClient     *http.Client  // for the ledger's questions [a client with a 30 s timeout]
	LedgerInterval time.Duration // between audits of a source [1 min]
	LedgerMinAge   time.Duration // a delivery younger than this is not asked about yet [1 min]
	LedgerGrace    time.Duration // past a queue's retry horizon before a delivery is missing [10 min]
	LedgerBatch    int           // published rows per audit pass [500]
	// LedgerHorizon overrides the retry horizon read from each subscriber queue (for tests that
	// cannot wait for a queue's real one); 0 reads the queues.
	LedgerHorizon time.Duration

	Registerer prometheus.Registerer // metrics; nil registers nowhere
	Logger     *zap.Logger

	// BeforeMark, when set, runs for each shard of a batch after the batch's tasks were created and
	// before it is marked; an error abandons the batch unmarked, as if the relay had crashed there.
	// For tests.
	BeforeMark func(ctx context.Context, source string, shard int64, eventIDs []string) error
}

// Defaults of the per-event back-off (Config).
const (
	defaultMaxAttempts = 20
	defaultBaseBackoff = time.Second
	defaultMaxBackoff  = 5 * time.Minute
)

// Errors of the operator functions.
var (
	ErrUnknownSource = errors.New("relay: unknown source")
	ErrEventNotFound = errors.New("relay: event not found")
	ErrNoReason      = errors.New("relay: a replay needs a reason")
)

// Relay delivers the outboxes of its sources. Create it with New, then Run it.
type Relay struct {
	cfg         Config
	log         *zap.Logger
	metrics     *metrics
	sources     []*source
	subscribers map[string]Subscriber // every routed subscriber by name

	nudgeMu sync.Mutex
	nudgeCh chan struct{} // closed and replaced by Nudge

	downMu    sync.Mutex
	downUntil time.Time     // Cloud Tasks unavailable: no CreateTask before this
	downFor   time.Duration // the current whole-relay back-off
	probing   bool          // a batch is probing Cloud Tasks after the back-off
}

// New checks cfg and returns a relay.
func New(cfg Config) (*Relay, error) {
	var problems []error
	if len(cfg.Sources) == 0 {
		problems = append(problems, errors.New("no sources"))
	}
	if cfg.Tasks == nil {
		problems = append(problems, errors.New("no Cloud Tasks client"))
	}
	if cfg.ServiceAccount == "" {
		problems = append(problems, errors.New("no service account for the OIDC tokens"))
	}
	seen := map[string]bool{}
	for _, s := range cfg.Sources {
		if s.Name == "" || s.Client == nil {
			problems = append(problems, fmt.Errorf("source %q: name and client are required", s.Database))
		}
		if seen[s.Name] {
			problems = append(problems, fmt.Errorf("source %q twice", s.Name))
		}
		seen[s.Name] = true
	}
	routes := Routes{}
	for typ, subs := range cfg.Routes {
		for _, sub := range subs {
			if sub.Name == "" || len(sub.Queues) == 0 || slices.Contains(sub.Queues, "") || sub.URL == "" {
				problems = append(problems, fmt.Errorf("route %s: subscriber %q needs a name, a queue and a URL", typ, sub.Name))
			}
			if sub.Audience == "" {
				sub.Audience = sub.URL
			}
			routes[typ] = append(routes[typ], sub)
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("relay: %w", errors.Join(problems...))
	}
	cfg.Routes = routes
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.LeaseDuration, 10*time.Second)
	def(&cfg.PollInterval, 150*time.Millisecond)
	def(&cfg.MarkEvery, 100*time.Millisecond)
	def(&cfg.MaxIdle, time.Second)
	def(&cfg.BaseBackoff, defaultBaseBackoff)
	def(&cfg.MaxBackoff, defaultMaxBackoff)
	def(&cfg.TasksDownMax, 30*time.Second)
	def(&cfg.CallTimeout, 10*time.Second)
	def(&cfg.StatusInterval, 5*time.Second)
	def(&cfg.ReplayWindow, outboxlib.OutboxRetention)
	def(&cfg.LedgerInterval, time.Minute)
	def(&cfg.LedgerMinAge, time.Minute)
	def(&cfg.LedgerGrace, 10*time.Minute)
	if cfg.LedgerBatch <= 0 {
		cfg.LedgerBatch = 500
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 200
	}
	if cfg.Parallelism <= 0 {
		cfg.Parallelism = 32
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = defaultMaxAttempts
	}
	if h := cfg.QuarantineHorizon(); h >= outboxlib.DefaultEarlyPatience {
		return nil, fmt.Errorf("relay: an event may back off for %s before it is quarantined, as long as a consumer's patience with its successors (%s): lower MaxAttempts or MaxBackoff", h.Round(time.Second), outboxlib.DefaultEarlyPatience)
	}
	if cfg.Owner == "" {
		host, _ := os.Hostname()
		var b [4]byte
		rand.Read(b[:])
		cfg.Owner = host + "-" + hex.EncodeToString(b[:])
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	r := &Relay{cfg: cfg, log: cfg.Logger.With(zap.String("owner", cfg.Owner)), nudgeCh: make(chan struct{}), subscribers: map[string]Subscriber{}}
	for _, subs := range cfg.Routes {
		for _, sub := range subs {
			r.subscribers[sub.Name] = sub
		}
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	r.metrics = m
	for _, s := range cfg.Sources {
		r.sources = append(r.sources, newSource(r, s))
	}
	return r, nil
}

// QuarantineHorizon is the longest an event may back off in the relay before it is quarantined:
// the back-offs after its first MaxAttempts-1 failed enqueues, at their jitter's longest (+20 %).
// About 70 minutes with the defaults. A consumer defers the event's successors meanwhile, so New
// refuses a configuration whose horizon reaches outboxlib.DefaultEarlyPatience.
func (cfg Config) QuarantineHorizon() time.Duration {
	base, maxB, attempts := cfg.BaseBackoff, cfg.MaxBackoff, cfg.MaxAttempts
	if base <= 0 {
		base = defaultBaseBackoff
	}
	if maxB <= 0 {
		maxB = defaultMaxBackoff
	}
	if attempts <= 0 {
		attempts = defaultMaxAttempts
	}
	var total time.Duration
	for n := int64(1); n < attempts; n++ {
		d := maxB
		if n-1 < 32 {
			d = min(base<<(n-1), maxB)
		}
		total += d + d/5
		if total > 365*24*time.Hour {
			break
		}
	}
	return total
}

// SourceNames returns the names of r's sources, in configuration order.
func (r *Relay) SourceNames() []string {
	names := make([]string, 0, len(r.sources))
	for _, s := range r.sources {
		names = append(names, s.src.Name)
	}
	return names
}

// Owner returns the lease owner id of r.
func (r *Relay) Owner() string { return r.cfg.Owner }

// Nudge makes every shard due at once: services call it (POST /nudge) after committing events,
// so delivery does not wait for the idle back-off.
func (r *Relay) Nudge() {
	r.nudgeMu.Lock()
	close(r.nudgeCh)
	r.nudgeCh = make(chan struct{})
	r.nudgeMu.Unlock()
}

// NudgeShards wakes only the loops of some shards of one source: what a service that has just
// committed events knows (its source and outboxlib.ShardOf of each aggregate). Waking every loop
// of every source for each commit costs a scan per loop; at tens of commits per second that is most
// of the relay's CPU. It reports false for an unknown source or shard (nothing is woken).
func (r *Relay) NudgeShards(source string, shards ...int64) bool {
	for _, shard := range shards {
		if shard < 0 || shard >= outboxlib.Shards {
			return false
		}
	}
	for _, s := range r.sources {
		if s.src.Name == source {
			for _, shard := range shards {
				s.wakeShard(shard)
			}
			return true
		}
	}
	return false
}

func (r *Relay) nudged() <-chan struct{} {
	r.nudgeMu.Lock()
	defer r.nudgeMu.Unlock()
	return r.nudgeCh
}

// Run checks the subscriber queues' retry configuration, then delivers every source until ctx is
// done; then it stops the scan loops and releases its leases. It returns nil after a clean stop.
func (r *Relay) Run(ctx context.Context) error {
	if err := r.CheckQueues(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while waiting for Cloud Tasks
		}
		return err
	}
	var wg sync.WaitGroup
	for _, s := range r.sources {
		wg.Go(func() { s.run(ctx) })
	}
	wg.Wait()
	return nil
}

// CheckQueues reads the retry configuration of every subscriber queue and refuses (an error) when
// the longest redelivery window, max_retry_duration plus the replay window, reaches the
// ProcessedEvents retention. A queue that does not exist yet is logged and skipped: it cannot
// redeliver anything, and enqueueing to it fails (and backs off) until it is created. While Cloud
// Tasks is unavailable it retries until ctx is done.
func (r *Relay) CheckQueues(ctx context.Context) error {
	queues := map[string]bool{}
	for _, subs := range r.cfg.Routes {
		for _, s := range subs {
			for _, q := range s.Queues {
				queues[q] = true
			}
		}
	}
	names := make([]string, 0, len(queues))
	for q := range queues {
		names = append(names, q)
	}
	sort.Strings(names)
	for _, name := range names {
		var q *cloudtaskspb.Queue
		for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
			var err error
			cctx, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout)
			q, err = r.cfg.Tasks.GetQueue(cctx, &cloudtaskspb.GetQueueRequest{Name: name})
			cancel()
			if err == nil {
				break
			}
			switch status.Code(err) {
			case codes.NotFound:
				r.log.Warn("subscriber queue does not exist; its retry configuration is not checked", zap.String("queue", name))
			case codes.Unavailable, codes.DeadlineExceeded:
				r.log.Warn("Cloud Tasks unavailable at start-up; retrying", zap.String("queue", name), zap.Error(err))
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(wait):
				}
				continue
			default:
				return fmt.Errorf("relay: get queue %s: %w", name, err)
			}
			break
		}
		if q == nil {
			continue
		}
		if err := outboxlib.CheckRetention(redeliveryWindow(q.GetRetryConfig()), r.cfg.ReplayWindow); err != nil {
			return fmt.Errorf("relay: queue %s: %w", name, err)
		}
		if err := r.checkLedgerHorizon(name, q.GetRetryConfig()); err != nil {
			return err
		}
	}
	return nil
}

// redeliveryWindow is how long a queue may go on redelivering a task: max_retry_duration, or when
// that is unlimited (0), max_attempts times max_backoff, or unlimited when both are.
func redeliveryWindow(rc *cloudtaskspb.RetryConfig) time.Duration {
	if d := rc.GetMaxRetryDuration().AsDuration(); d > 0 {
		return d
	}
	if n := rc.GetMaxAttempts(); n > 0 {
		return time.Duration(n) * rc.GetMaxBackoff().AsDuration()
	}
	return time.Duration(math.MaxInt64 / 4)
}

// tasksDown records that Cloud Tasks answered UNAVAILABLE or DEADLINE_EXCEEDED: no batch
// calls it again before the back-off has passed, and the back-off doubles up to TasksDownMax.
func (r *Relay) tasksDown(err error) {
	r.downMu.Lock()
	defer r.downMu.Unlock()
	now := time.Now()
	if now.Before(r.downUntil) {
		return
	}
	r.probing = false
	r.downFor = min(max(2*r.downFor, r.cfg.PollInterval), r.cfg.TasksDownMax)
	r.downUntil = now.Add(r.downFor)
	r.log.Warn("Cloud Tasks unavailable; backing off", zap.Stringer("backoff", r.downFor), zap.Error(err))
}

// tasksUp resets the whole-relay back-off after a successful call.
func (r *Relay) tasksUp() {
	r.downMu.Lock()
	defer r.downMu.Unlock()
	if r.downFor > 0 {
		r.log.Info("Cloud Tasks available again")
	}
	r.downFor, r.probing = 0, false
}

// tasksGate says whether a batch may call Cloud Tasks now (else how long to wait). While Cloud
// Tasks is down, one batch at a time probes it, one call at a time, once the back-off has passed;
// the others wait, so an outage costs a trickle of calls, not one per shard and poll. A prober
// reports back with tasksDown, tasksUp or, when it made no call, probeDone.
func (r *Relay) tasksGate() (wait time.Duration, probe, ok bool) {
	r.downMu.Lock()
	defer r.downMu.Unlock()
	if r.downFor == 0 {
		return 0, false, true
	}
	if d := time.Until(r.downUntil); d > 0 {
		return d, false, false
	}
	if r.probing {
		return r.cfg.PollInterval, false, false
	}
	r.probing = true
	return 0, true, true
}

// probeDone ends a probe that made no call.
func (r *Relay) probeDone() {
	r.downMu.Lock()
	r.probing = false
	r.downMu.Unlock()
}

func (r *Relay) source(name string) (*source, error) {
	for _, s := range r.sources {
		if s.src.Name == name {
			return s, nil
		}
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownSource, name)
}
