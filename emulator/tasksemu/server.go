// Package tasksemu is an in-process and standalone emulator of Google Cloud Tasks (API v2) for
// HTTP targets. Applications and tests talk to it with the official Go client
// (cloud.google.com/go/cloudtasks/apiv2) pointed at Addr() with option.WithEndpoint,
// option.WithoutAuthentication and insecure gRPC credentials.
//
// Unlike a mock, it dispatches tasks the way production does: at schedule_time, within the
// queue's rate limits, with the Cloud Tasks request headers, an OIDC token signed by a key
// published at HTTPAddr() (so receivers verify it exactly as they verify Google's), and with
// retries that follow the queue's retry_config. See README.md for what differs from production.
//
// The HTTP port also answers the metadata server's identity endpoints
// (/computeMetadata/v1/instance/service-accounts/{account}/identity and .../email), so a service
// run locally with GCE_METADATA_HOST=HTTPAddr() gets ID tokens for its own calls to other
// services from the same issuer, as it gets Google's from the metadata server on Cloud Run.
package tasksemu

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/spanmart/spanmart/emulator/oidc"
	"github.com/spanmart/spanmart/emulator/tasksemu/retry"
)

// DefaultServiceAccount is the e-mail put in OIDC tokens when a task names no service account,
// and the metadata server's "default" account, unless Options.ServiceAccount says otherwise.
const DefaultServiceAccount = "cloud-tasks-emulator@emulator.iam.gserviceaccount.com"

// QueueConfig describes a queue created when the emulator starts. Zero fields take Cloud Tasks'
// defaults. A queue that already exists (restored from DataDir) is left as it is.
type QueueConfig struct {
	Name                    string // projects/P/locations/L/queues/Q
	MaxDispatchesPerSecond  float64
	MaxBurstSize            int
	MaxConcurrentDispatches int
	Retry                   retry.Policy
}

// Options configures Start.
type Options struct {
	Host     string // default 127.0.0.1
	Port     int    // gRPC port; 0 picks a free one
	HTTPPort int    // OIDC discovery, JWKS, metadata identity endpoints and status page; 0 picks a free one
	// DataDir keeps queues, pending tasks and the OIDC signing key across restarts.
	// Empty means everything lives in memory.
	DataDir string
	Queues  []QueueConfig
	// NameReuseWindow is how long a task name stays taken after the task was deleted or
	// completed (production: about 1 h, the default).
	NameReuseWindow time.Duration
	// QueueReuseWindow is how long a deleted queue's name cannot be re-created
	// (production: up to 3 days, the default).
	QueueReuseWindow time.Duration
	// ServiceAccount is the e-mail in OIDC tokens of tasks that name none, and the account the
	// metadata endpoints call "default" (the service's own account on Cloud Run).
	ServiceAccount string
	// MaxDispatchRate is the highest max_dispatches_per_second a queue may be given: 500, as in
	// production, unless raised (for load tests of a single queue).
	MaxDispatchRate float64
	// IssuerURL is the "iss" of OIDC tokens; default "http://" + HTTPAddr(), where the
	// discovery document and JWKS are served. Set it when consumers reach the HTTP port
	// under another name (a container network, a proxy).
	IssuerURL string
	// SigningKey signs OIDC tokens; default: the key in DataDir/oidc-key.pem (created on first
	// use), or a fresh key per process without a DataDir.
	SigningKey *rsa.PrivateKey
	// Logf, if set, receives one line per dispatch and per notable event.
	Logf func(format string, args ...any)

	// tuning adjusts the data dir's compaction and lets this package's tests hold its writes.
	tuning storeTuning
}

// Server is a running emulator.
type Server struct {
	opts   Options
	issuer *oidc.Issuer

	grpcLis, httpLis net.Listener
	grpcSrv          *grpc.Server
	httpSrv          *http.Server
	store            *store

	mu        sync.Mutex
	queues    map[string]*queue
	queueTomb map[string]time.Time // deleted queue name -> deletion time
	taskTomb  map[string]time.Time // full task name -> time it was deleted or completed
	tombAdds  int
	closed    bool

	closeOnce sync.Once
	closeErr  error
}

// Start starts the emulator and returns once it accepts RPCs. ctx only bounds start-up.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.NameReuseWindow <= 0 {
		opts.NameReuseWindow = time.Hour
	}
	if opts.QueueReuseWindow <= 0 {
		opts.QueueReuseWindow = 72 * time.Hour
	}
	if opts.ServiceAccount == "" {
		opts.ServiceAccount = DefaultServiceAccount
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	s := &Server{
		opts:      opts,
		queues:    map[string]*queue{},
		queueTomb: map[string]time.Time{},
		taskTomb:  map[string]time.Time{},
	}
	key := opts.SigningKey
	var err error
	switch {
	case key != nil:
	case opts.DataDir != "":
		key, err = oidc.LoadOrCreateKey(filepath.Join(opts.DataDir, "oidc-key.pem"))
	default:
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	}
	if err != nil {
		return nil, fmt.Errorf("tasksemu: signing key: %w", err)
	}
	var lc net.ListenConfig
	s.grpcLis, err = lc.Listen(ctx, "tcp", net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)))
	if err != nil {
		return nil, fmt.Errorf("tasksemu: listen: %w", err)
	}
	s.httpLis, err = lc.Listen(ctx, "tcp", net.JoinHostPort(opts.Host, strconv.Itoa(opts.HTTPPort)))
	if err != nil {
		s.grpcLis.Close()
		return nil, fmt.Errorf("tasksemu: listen: %w", err)
	}
	s.issuer, err = oidc.NewIssuer(s.Issuer(), key)
	if err != nil {
		s.grpcLis.Close()
		s.httpLis.Close()
		return nil, fmt.Errorf("tasksemu: oidc issuer: %w", err)
	}
	if opts.DataDir != "" {
		s.store, err = openStore(opts.DataDir, opts.Logf, opts.tuning)
		if err == nil {
			err = s.store.load(s)
		}
		if err != nil {
			s.grpcLis.Close()
			s.httpLis.Close()
			return nil, fmt.Errorf("tasksemu: data dir: %w", err)
		}
	}
	for _, qc := range opts.Queues {
		if err := s.createConfigured(qc); err != nil {
			s.shutdown()
			return nil, fmt.Errorf("tasksemu: queue %s: %w", qc.Name, err)
		}
	}
	s.mu.Lock()
	for _, q := range s.queues {
		q.start(s)
	}
	s.mu.Unlock()

	// A fixed flow-control window turns off gRPC-Go's bandwidth-delay-product estimation, which
	// pings the client whenever a request arrives and no ping is out: a write and a read more on
	// each end per request (README, "Performance").
	s.grpcSrv = grpc.NewServer(grpc.MaxRecvMsgSize(8<<20),
		grpc.InitialWindowSize(1<<20), grpc.InitialConnWindowSize(1<<20),
		grpc.ChainUnaryInterceptor(s.durableInterceptor))
	cloudtaskspb.RegisterCloudTasksServer(s.grpcSrv, &service{s: s})
	go s.grpcSrv.Serve(s.grpcLis)
	s.httpSrv = &http.Server{Handler: s.httpHandler(), ReadHeaderTimeout: 10 * time.Second}
	go s.httpSrv.Serve(s.httpLis)
	if s.store != nil {
		s.store.startFlusher(s)
	}
	return s, nil
}

// Addr is the gRPC endpoint, host:port.
func (s *Server) Addr() string { return s.grpcLis.Addr().String() }

// ClientOptions point the official client at the emulator:
//
//	client, err := cloudtasks.NewClient(ctx, srv.ClientOptions()...)
func (s *Server) ClientOptions() []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(s.Addr()),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}
}

// HTTPAddr is the host:port of the OIDC discovery, JWKS, metadata and status endpoints; set
// GCE_METADATA_HOST to it to get ID tokens from the emulator through
// cloud.google.com/go/compute/metadata.
func (s *Server) HTTPAddr() string { return s.httpLis.Addr().String() }

// Issuer is the OIDC issuer URL put in the iss claim of tokens.
func (s *Server) Issuer() string {
	if s.opts.IssuerURL != "" {
		return s.opts.IssuerURL
	}
	return "http://" + s.HTTPAddr()
}

// IDToken returns an ID token of account for audience, signed like the tokens the emulator attaches
// to its tasks and answers its metadata identity endpoint with (for tests and tools in-process).
func (s *Server) IDToken(account, audience string) (string, error) {
	return s.issuer.Token(audience, account, time.Now())
}

// Close stops the servers and every dispatcher (in-flight requests are cancelled and their
// tasks stay pending) and, with a DataDir, writes the last changes to its log.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		if s.grpcSrv != nil {
			s.grpcSrv.Stop()
		}
		if s.httpSrv != nil {
			s.httpSrv.Close()
		}
		s.closeErr = s.shutdown()
	})
	return s.closeErr
}

func (s *Server) shutdown() error {
	s.mu.Lock()
	s.closed = true
	qs := make([]*queue, 0, len(s.queues))
	for _, q := range s.queues {
		qs = append(qs, q)
	}
	s.mu.Unlock()
	for _, q := range qs {
		q.stopAndWait()
	}
	s.grpcLis.Close()
	s.httpLis.Close()
	if s.store != nil {
		return s.store.close(s)
	}
	return nil
}

// createConfigured creates a queue from Options.Queues unless it exists already.
func (s *Server) createConfigured(qc QueueConfig) error {
	if _, err := parseQueueName(qc.Name); err != nil {
		return err
	}
	pb := defaultQueue(qc.Name)
	rl, rc := pb.RateLimits, pb.RetryConfig
	if qc.MaxDispatchesPerSecond > 0 {
		rl.MaxDispatchesPerSecond = qc.MaxDispatchesPerSecond
		rl.MaxBurstSize = int32(retry.DefaultBurst(qc.MaxDispatchesPerSecond))
	}
	if qc.MaxBurstSize > 0 {
		rl.MaxBurstSize = int32(qc.MaxBurstSize)
	}
	if qc.MaxConcurrentDispatches > 0 {
		rl.MaxConcurrentDispatches = int32(qc.MaxConcurrentDispatches)
	}
	p := qc.Retry
	if p != (retry.Policy{}) {
		if p.MaxAttempts != 0 {
			rc.MaxAttempts = p.MaxAttempts
		}
		rc.MaxRetryDuration = durOrNil(p.MaxRetryDuration)
		if p.MinBackoff > 0 {
			rc.MinBackoff = durOrNil(p.MinBackoff)
		}
		if p.MaxBackoff > 0 {
			rc.MaxBackoff = durOrNil(p.MaxBackoff)
		}
		if p.MaxDoublings > 0 {
			rc.MaxDoublings = p.MaxDoublings
		}
	}
	if err := s.validateQueue(pb); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.queues[qc.Name]; ok {
		return nil
	}
	q := newQueue(pb, time.Now())
	s.queues[qc.Name] = q
	s.logLocked(putQueue(q))
	return nil
}

// validateQueue checks a queue's settings, including the rate cap of this server.
func (s *Server) validateQueue(q *cloudtaskspb.Queue) error {
	if err := validateQueue(q); err != nil {
		return err
	}
	limit := s.opts.MaxDispatchRate
	if limit <= 0 {
		limit = maxRate
	}
	if r := q.GetRateLimits().GetMaxDispatchesPerSecond(); r > limit {
		return status.Errorf(codes.InvalidArgument, "rate_limits.max_dispatches_per_second must be in (0, %v], got %v", limit, r)
	}
	return nil
}

// durableInterceptor makes every successful mutating RPC wait until the data dir holds its
// change: a task CreateTask acknowledged survives a crash of the emulator, as it survives one
// of Cloud Tasks (the relay marks events published once CreateTask succeeded).
func (s *Server) durableInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if err != nil || s.store == nil || isReadOnlyRPC(info.FullMethod) {
		return resp, err
	}
	select {
	case werr := <-s.store.durable():
		if werr != nil {
			return nil, status.Errorf(codes.Unavailable, "the change could not be saved to the data dir: %v", werr)
		}
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return resp, nil
}

func isReadOnlyRPC(method string) bool {
	name := method[strings.LastIndex(method, "/")+1:]
	return strings.HasPrefix(name, "Get") || strings.HasPrefix(name, "List") || name == "TestIamPermissions"
}

// logLocked records a change of the state in the data dir's log (mutation.go); the RPC that
// made it waits for it in durableInterceptor. s.mu is held, so the log's order is the order of
// the changes.
func (s *Server) logLocked(m mutation) {
	if s.store != nil {
		s.store.append(m)
	}
}

// tombstoneTaskLocked keeps a finished task's name taken for NameReuseWindow.
func (s *Server) tombstoneTaskLocked(name string, now time.Time) {
	s.taskTomb[name] = now
	s.tombAdds++
	if s.tombAdds >= 1024 {
		s.tombAdds = 0
		for n, t := range s.taskTomb {
			if now.Sub(t) >= s.opts.NameReuseWindow {
				delete(s.taskTomb, n)
			}
		}
	}
}

var errClosed = errors.New("tasksemu: server closed")
