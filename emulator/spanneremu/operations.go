package spanneremu

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sort"
	"strings"
	"sync"

	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/emptypb"
)

// maxOperations bounds the finished operations kept for GetOperation: every operation
// completes before the RPC that started it returns, so old ones only serve late polls.
const maxOperations = 4096

// operationStore keeps finished long-running operations by name, dropping the oldest beyond a
// limit.
type operationStore struct {
	limit int

	mu    sync.Mutex
	ops   map[string]*longrunningpb.Operation
	order []string // names, oldest first; may hold names already deleted
}

func newOperationStore(limit int) *operationStore {
	return &operationStore{limit: limit, ops: map[string]*longrunningpb.Operation{}}
}

// newOperationID returns a random id in the style of Spanner's ("_auto_op_<hex>").
func newOperationID() string {
	var b [8]byte
	rand.Read(b[:])
	return "_auto_op_" + hex.EncodeToString(b[:])
}

// finish records a completed operation named <parent>/operations/<id> whose outcome is resp
// (on success) or err (on failure), and returns it. id "" generates one; a given id that is
// already in use is ALREADY_EXISTS.
func (st *operationStore) finish(parent, id string, metadata proto.Message, resp proto.Message, opErr error) (*longrunningpb.Operation, error) {
	if id == "" {
		id = newOperationID()
	}
	op := &longrunningpb.Operation{Name: parent + "/operations/" + id, Done: true}
	if metadata != nil {
		md, err := anypb.New(metadata)
		if err != nil {
			return nil, errorf(codes.Internal, "encode operation metadata: %v", err)
		}
		op.Metadata = md
	}
	if opErr != nil {
		op.Result = &longrunningpb.Operation_Error{Error: status.Convert(grpcError(opErr)).Proto()}
	} else {
		if resp == nil {
			resp = &emptypb.Empty{}
		}
		r, err := anypb.New(resp)
		if err != nil {
			return nil, errorf(codes.Internal, "encode operation response: %v", err)
		}
		op.Result = &longrunningpb.Operation_Response{Response: r}
	}

	st.mu.Lock()
	defer st.mu.Unlock()
	if _, ok := st.ops[op.Name]; ok {
		return nil, errorf(codes.AlreadyExists, "Operation already exists: %s", op.Name)
	}
	st.ops[op.Name] = op
	st.order = append(st.order, op.Name)
	for len(st.ops) > st.limit && len(st.order) > 0 {
		delete(st.ops, st.order[0])
		st.order = st.order[1:]
	}
	// Compact the order slice once deleted names dominate it, so DeleteOperation-heavy use
	// does not grow it without bound.
	if len(st.order) > 2*st.limit {
		kept := st.order[:0]
		for _, n := range st.order {
			if _, ok := st.ops[n]; ok {
				kept = append(kept, n)
			}
		}
		st.order = kept
	}
	return op, nil
}

func (st *operationStore) get(name string) (*longrunningpb.Operation, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	op, ok := st.ops[name]
	if !ok {
		return nil, errorf(codes.NotFound, "Operation not found: %s", name)
	}
	return op, nil
}

func (st *operationStore) delete(name string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, ok := st.ops[name]; !ok {
		return errorf(codes.NotFound, "Operation not found: %s", name)
	}
	delete(st.ops, name)
	return nil
}

// list returns the operations whose name starts with prefix, sorted by name.
func (st *operationStore) list(prefix string) []*longrunningpb.Operation {
	st.mu.Lock()
	var out []*longrunningpb.Operation
	for name, op := range st.ops {
		if strings.HasPrefix(name, prefix) {
			out = append(out, op)
		}
	}
	st.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// operationsService implements google.longrunning.Operations over the operation store.
type operationsService struct {
	longrunningpb.UnimplementedOperationsServer
	s *Server
}

func (o *operationsService) GetOperation(_ context.Context, req *longrunningpb.GetOperationRequest) (*longrunningpb.Operation, error) {
	return o.s.ops.get(req.GetName())
}

// WaitOperation returns at once: every operation is already done.
func (o *operationsService) WaitOperation(_ context.Context, req *longrunningpb.WaitOperationRequest) (*longrunningpb.Operation, error) {
	return o.s.ops.get(req.GetName())
}

func (o *operationsService) ListOperations(_ context.Context, req *longrunningpb.ListOperationsRequest) (*longrunningpb.ListOperationsResponse, error) {
	ops := o.s.ops.list(req.GetName())
	start, end, next, err := page(len(ops), req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	return &longrunningpb.ListOperationsResponse{Operations: ops[start:end], NextPageToken: next}, nil
}

func (o *operationsService) DeleteOperation(_ context.Context, req *longrunningpb.DeleteOperationRequest) (*emptypb.Empty, error) {
	if err := o.s.ops.delete(req.GetName()); err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

// CancelOperation has nothing to cancel: operations are done before anyone can ask.
func (o *operationsService) CancelOperation(_ context.Context, req *longrunningpb.CancelOperationRequest) (*emptypb.Empty, error) {
	if _, err := o.s.ops.get(req.GetName()); err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}
