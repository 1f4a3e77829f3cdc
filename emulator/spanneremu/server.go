// Package spanneremu is a Cloud Spanner emulator written in Go. It serves the Spanner data API,
// the instance and database admin APIs and the long-running operations API over insecure gRPC,
// so the official clients work against it unchanged (set SPANNER_EMULATOR_HOST to Server.Addr).
//
// This package is the gRPC layer: it owns sessions, instances, operations and the mapping of
// RPCs onto the storage and transaction engine (internal/engine), which owns databases,
// transactions, SQL and mutations.
package spanneremu

import (
	"context"
	"errors"
	"fmt"
	_ "google.golang.org/grpc/encoding/gzip" // the client may compress requests with gzip
	"net"
	"strconv"
	"sync"
	"time"

	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	databasepb "cloud.google.com/go/spanner/admin/database/apiv1/databasepb"
	instancepb "cloud.google.com/go/spanner/admin/instance/apiv1/instancepb"
	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/engine"
)

// Options configure a Server.
type Options struct {
	// Host is the interface to listen on; default "127.0.0.1".
	Host string
	// Port is the TCP port; 0 picks a free one.
	Port int
	// DataDir keeps databases and instances across restarts; "" keeps everything in memory
	// (a temporary directory removed by Close).
	DataDir string
	// LockWait, IdleTimeout and TTLSweepInterval are passed to the engine (zero = engine
	// defaults).
	LockWait, IdleTimeout, TTLSweepInterval time.Duration
	// NoHistory keeps no versions for exact-timestamp reads (see engine.Options.NoHistory).
	NoHistory bool
	// CountStatements counts the data API's requests by statement as well as by method
	// (DatabaseStats.Statements): which queries, batches and commits an application's requests
	// are, and labels each request's work in CPU profiles with its database and statement
	// (DatabaseLabel, StatementLabel): what each costs. It costs a string per request; the
	// bench's -statements turns it on.
	CountStatements bool
	// Logf receives diagnostic log lines; nil discards them.
	Logf func(format string, args ...any)
}

// Server is a running emulator.
type Server struct {
	lis  net.Listener
	grpc *grpc.Server
	eng  *engine.Engine
	logf func(format string, args ...any)

	sessions  *sessionStore
	instances *instanceStore
	ops       *operationStore
	txns      *txnTracker
	rpcs      rpcCounts
	stacks    *stackWorkers // where the data API's handlers run (stacks.go)

	// adminMu serializes database creation and deletion so that the existence check before
	// CreateDatabase and the creation itself cannot interleave with another admin call.
	adminMu sync.Mutex

	// dropProtection holds the databases with drop protection enabled (UpdateDatabase). It is
	// not persisted: it only guards against accidents within one emulator run.
	dropProtectionMu sync.Mutex
	dropProtection   map[string]bool

	closeOnce sync.Once
	closeErr  error
	served    chan struct{}
}

// maxMessageSize is the largest request or response the server accepts: Spanner allows
// commits of up to 100 MB, far above gRPC's 4 MB default.
const maxMessageSize = 128 << 20

// flowWindow is the fixed HTTP/2 flow-control window of each stream and of each connection. A
// fixed window turns off gRPC-Go's bandwidth-delay-product estimation, which pings the peer
// whenever data arrives and no ping is out: one PING and its ack per request, each a write and a
// read on both ends, as many syscalls as the request itself. The clients of pkg/platform fix
// theirs too (README, "Performance"). 1 MiB is 16 times gRPC's initial window.
const flowWindow = 1 << 20

// Start starts an emulator and returns once it is listening.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	instances, err := openInstanceStore(opts.DataDir)
	if err != nil {
		return nil, err
	}
	eng, err := engine.New(engine.Options{
		DataDir:          opts.DataDir,
		LockWait:         opts.LockWait,
		IdleTimeout:      opts.IdleTimeout,
		TTLSweepInterval: opts.TTLSweepInterval,
		NoHistory:        opts.NoHistory,
		Logf:             opts.Logf,
	})
	if err != nil {
		return nil, fmt.Errorf("start engine: %w", err)
	}
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)))
	if err != nil {
		eng.Close()
		return nil, fmt.Errorf("listen: %w", err)
	}
	s := &Server{
		lis:       lis,
		eng:       eng,
		logf:      logf,
		sessions:  newSessionStore(),
		instances: instances,
		ops:       newOperationStore(maxOperations),
		txns:      newTxnTracker(),

		dropProtection: map[string]bool{},
		served:         make(chan struct{}),
		stacks:         newStackWorkers(),
	}
	s.rpcs.statements = opts.CountStatements
	s.grpc = grpc.NewServer(
		grpc.MaxRecvMsgSize(maxMessageSize),
		grpc.MaxSendMsgSize(maxMessageSize),
		grpc.InitialWindowSize(flowWindow),
		grpc.InitialConnWindowSize(flowWindow),
		// The Spanner client pings every 2 minutes (every 2 seconds on routed endpoints);
		// gRPC's default policy would answer pings that frequent with GOAWAY, failing RPCs.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: time.Second, PermitWithoutStream: true}),
		grpc.ChainUnaryInterceptor(s.unaryInterceptor),
		grpc.ChainStreamInterceptor(s.streamInterceptor),
	)
	s.grpc.RegisterService(s.stacks.onStackWorkers(&sppb.Spanner_ServiceDesc), &spannerService{s: s})
	instancepb.RegisterInstanceAdminServer(s.grpc, &instanceAdminService{s: s})
	databasepb.RegisterDatabaseAdminServer(s.grpc, &databaseAdminService{s: s})
	longrunningpb.RegisterOperationsServer(s.grpc, &operationsService{s: s})
	healthpb.RegisterHealthServer(s.grpc, health.NewServer())

	go func() {
		defer close(s.served)
		if err := s.grpc.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			logf("spanneremu: serve: %v", err)
		}
	}()
	return s, nil
}

// Stats are counters of the engine's transaction outcomes since the server started: commits,
// and aborts by cause (lock wait timed out, optimistic read invalidated, idle transaction).
type Stats = engine.Stats

// DatabaseStats are one database's counters in Stats.
type DatabaseStats = engine.DatabaseStats

// Stats returns the server's transaction and RPC counters.
func (s *Server) Stats() Stats {
	st := s.eng.Stats()
	for db, byMethod := range s.rpcs.byDatabase() {
		ds := st.ByDatabase[db]
		ds.RPCs = byMethod
		st.ByDatabase[db] = ds
	}
	for db, byStmt := range s.rpcs.byStatement() {
		ds := st.ByDatabase[db]
		ds.Statements = byStmt
		st.ByDatabase[db] = ds
	}
	return st
}

// Addr is the "host:port" the server listens on, usable as SPANNER_EMULATOR_HOST.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// Close stops serving and closes the engine. Calls after the first return the first result.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		// Stop rather than GracefulStop: open streams of abandoned clients would otherwise keep
		// Close waiting forever, and every RPC here is short.
		s.grpc.Stop()
		<-s.served
		s.stacks.close()
		s.closeErr = s.eng.Close()
	})
	return s.closeErr
}
