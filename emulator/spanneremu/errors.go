package spanneremu

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// abortedRetryDelay is the RetryInfo delay attached to ABORTED errors. The client waits this
// long before retrying a transaction; without the detail it backs off for much longer.
const abortedRetryDelay = 2 * time.Millisecond

func errorf(code codes.Code, format string, args ...any) error {
	return status.Error(code, fmt.Sprintf(format, args...))
}

// sessionNotFound is the error Spanner returns for an unknown or deleted session. The client
// recognises it by the ResourceInfo detail and replaces the session.
func sessionNotFound(name string) error {
	st := status.New(codes.NotFound, "Session not found: "+name)
	if withDetail, err := st.WithDetails(&errdetails.ResourceInfo{
		ResourceType: "type.googleapis.com/google.spanner.v1.Session",
		ResourceName: name,
	}); err == nil {
		st = withDetail
	}
	return st.Err()
}

// grpcError turns any error into the status error the client should see: engine errors are
// already status errors and pass through; context errors become CANCELLED or
// DEADLINE_EXCEEDED; ABORTED gains a short RetryInfo so the client retries at once.
func grpcError(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			st = status.FromContextError(err)
		} else {
			st = status.New(codes.Internal, err.Error())
		}
	}
	if st.Code() == codes.Aborted && !hasRetryInfo(st) {
		if withDetail, err := st.WithDetails(&errdetails.RetryInfo{
			RetryDelay: durationpb.New(abortedRetryDelay),
		}); err == nil {
			st = withDetail
		}
	}
	return st.Err()
}

func hasRetryInfo(st *status.Status) bool {
	for _, d := range st.Details() {
		if _, ok := d.(*errdetails.RetryInfo); ok {
			return true
		}
	}
	return false
}

// unaryInterceptor and streamInterceptor count the data API's RPCs (rpcs.go), apply grpcError to
// every RPC's error, and log the errors that point at a bug in the emulator rather than at the
// request. The data API's handlers run on goroutines with grown stacks (stacks.go): its unary
// methods are there already (onStackWorkers, from before their requests are decoded), and the
// stream interceptor puts its streaming methods there.
func (s *Server) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	labels := s.rpcs.count(info.FullMethod, req)
	var resp any
	var err error
	labelled(ctx, labels, func() { resp, err = handler(ctx, req) })
	if err != nil {
		return nil, s.rpcError(info.FullMethod, err)
	}
	return resp, nil
}

func (s *Server) streamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	var err error
	if strings.HasPrefix(info.FullMethod, dataAPI) {
		cs := &countingStream{ServerStream: ss, rpcs: &s.rpcs, method: info.FullMethod}
		s.stacks.run(func() {
			err = handler(srv, cs)
			if cs.labelled {
				pprof.SetGoroutineLabels(context.Background())
			}
		})
	} else {
		err = handler(srv, ss)
	}
	if err != nil {
		return s.rpcError(info.FullMethod, err)
	}
	return nil
}

func (s *Server) rpcError(method string, err error) error {
	err = grpcError(err)
	if code := status.Code(err); code == codes.Internal || code == codes.Unknown {
		s.logf("spanneremu: %s: %v", method, err)
	}
	return err
}
