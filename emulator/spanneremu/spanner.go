package spanneremu

import (
	"context"
	"strings"
	"time"

	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/engine"
)

// spannerService implements google.spanner.v1.Spanner, the data API.
type spannerService struct {
	sppb.UnimplementedSpannerServer
	s *Server
}

// checkDatabase validates a database name and reports NOT_FOUND when it does not exist.
func (sp *spannerService) checkDatabase(name string) error {
	if _, err := splitDatabaseName(name); err != nil {
		return err
	}
	_, err := sp.s.eng.Database(name)
	return err
}

// session resolves a session name to the session and its open database.
func (sp *spannerService) session(name string) (*session, *engine.DB, error) {
	if _, err := splitSessionName(name); err != nil {
		return nil, nil, err
	}
	ss, err := sp.s.sessions.get(name)
	if err != nil {
		// Sessions die with their database: while it is gone, Spanner says so rather than
		// blaming the session (the client treats "Database not found" as fatal).
		db := name[:strings.Index(name, "/sessions/")]
		if _, dbErr := sp.s.eng.Database(db); dbErr != nil {
			return nil, nil, dbErr
		}
		return nil, nil, err
	}
	db, err := sp.s.eng.Database(ss.database)
	if err != nil {
		return nil, nil, err
	}
	ss.touch()
	return ss, db, nil
}

// outcome is the result of one SQL statement or read, ready to be sent as a ResultSet or as a
// stream of PartialResultSets.
type outcome struct {
	metadata *sppb.ResultSetMetadata
	rows     [][]*structpb.Value
	stats    *sppb.ResultSetStats
	token    *sppb.MultiplexedSessionPrecommitToken
}

func (o *outcome) resultSet() *sppb.ResultSet {
	rs := &sppb.ResultSet{Metadata: o.metadata, Stats: o.stats, PrecommitToken: o.token}
	for _, row := range o.rows {
		rs.Rows = append(rs.Rows, &structpb.ListValue{Values: row})
	}
	return rs
}

// newOutcome converts an engine result. begun, when set, tells the client which transaction
// the request began.
func newOutcome(res *engine.Result, begun *sppb.Transaction) *outcome {
	md := &sppb.ResultSetMetadata{RowType: &sppb.StructType{Fields: res.Fields}, Transaction: begun}
	if len(res.UndeclaredParams) > 0 {
		md.UndeclaredParameters = &sppb.StructType{Fields: res.UndeclaredParams}
	}
	o := &outcome{metadata: md, rows: res.Rows}
	if res.IsDML {
		o.stats = &sppb.ResultSetStats{RowCount: &sppb.ResultSetStats_RowCountExact{RowCountExact: res.RowCount}}
	}
	return o
}

// addModeStats fills the stats that the query mode asks for. The emulator has no real query
// plan; it returns a single node so that clients that require a plan (AnalyzeQuery) get one.
func addModeStats(o *outcome, mode sppb.ExecuteSqlRequest_QueryMode, sql string, elapsed time.Duration) {
	if mode == sppb.ExecuteSqlRequest_NORMAL {
		return
	}
	if o.stats == nil {
		o.stats = &sppb.ResultSetStats{}
	}
	if mode == sppb.ExecuteSqlRequest_PLAN || mode == sppb.ExecuteSqlRequest_PROFILE || mode == sppb.ExecuteSqlRequest_WITH_PLAN_AND_STATS {
		o.stats.QueryPlan = &sppb.QueryPlan{PlanNodes: []*sppb.PlanNode{{
			Index:       0,
			Kind:        sppb.PlanNode_RELATIONAL,
			DisplayName: "Emulator",
		}}}
	}
	if mode != sppb.ExecuteSqlRequest_PLAN {
		o.stats.QueryStats = &structpb.Struct{Fields: map[string]*structpb.Value{
			"query_text":    structpb.NewStringValue(sql),
			"rows_returned": structpb.NewStringValue(itoa(int64(len(o.rows)))),
			"elapsed_time":  structpb.NewStringValue(elapsed.String()),
		}}
	}
}

// runSQL runs an ExecuteSqlRequest, for ExecuteSql and ExecuteStreamingSql alike.
func (sp *spannerService) runSQL(ctx context.Context, req *sppb.ExecuteSqlRequest) (*outcome, error) {
	ss, db, err := sp.session(req.GetSession())
	if err != nil {
		return nil, err
	}
	run, err := sp.openTxn(db, ss.database, req.GetTransaction())
	if err != nil {
		return nil, err
	}
	if err := checkDirectedRead(run, req.GetDirectedReadOptions()); err != nil {
		return nil, err
	}
	st := engine.Statement{
		SQL:        req.GetSql(),
		Params:     req.GetParams(),
		ParamTypes: req.GetParamTypes(),
		PlanOnly:   req.GetQueryMode() == sppb.ExecuteSqlRequest_PLAN,
	}
	if run.pdml {
		n, err := db.ExecutePartitionedDML(ctx, st)
		if err != nil {
			return nil, err
		}
		return &outcome{
			metadata: &sppb.ResultSetMetadata{RowType: &sppb.StructType{}},
			stats:    &sppb.ResultSetStats{RowCount: &sppb.ResultSetStats_RowCountLowerBound{RowCountLowerBound: n}},
		}, nil
	}
	start := time.Now()
	res, err := run.txn.ExecuteSQL(ctx, st)
	run.end(err != nil)
	if err != nil {
		return nil, err
	}
	o := newOutcome(res, run.metadata())
	if st.PlanOnly {
		// Planned DML changed nothing, so it reports no row count.
		o.stats = nil
	}
	addModeStats(o, req.GetQueryMode(), req.GetSql(), time.Since(start))
	o.token = sp.token(ss, run)
	return o, nil
}

// checkDirectedRead rejects directed read options outside read-only transactions, as Spanner
// does (the emulator has one replica, so in read-only transactions they change nothing).
func checkDirectedRead(run *txnRun, d *sppb.DirectedReadOptions) error {
	if d == nil || !run.readWrite {
		return nil
	}
	run.end(true)
	return errorf(codes.InvalidArgument, "Directed reads can only be performed in a read-only transaction.")
}

// runRead runs a ReadRequest, for Read and StreamingRead alike.
func (sp *spannerService) runRead(ctx context.Context, req *sppb.ReadRequest) (*outcome, error) {
	ss, db, err := sp.session(req.GetSession())
	if err != nil {
		return nil, err
	}
	run, err := sp.openTxn(db, ss.database, req.GetTransaction())
	if err != nil {
		return nil, err
	}
	if run.pdml {
		return nil, errorf(codes.InvalidArgument, "Reads are not allowed in partitioned DML transactions")
	}
	if err := checkDirectedRead(run, req.GetDirectedReadOptions()); err != nil {
		return nil, err
	}
	res, err := run.txn.Read(ctx, engine.ReadRequest{
		Table:     req.GetTable(),
		Index:     req.GetIndex(),
		Columns:   req.GetColumns(),
		KeySet:    req.GetKeySet(),
		Limit:     req.GetLimit(),
		Exclusive: req.GetLockHint() == sppb.ReadRequest_LOCK_HINT_EXCLUSIVE,
	})
	run.end(err != nil)
	if err != nil {
		return nil, err
	}
	o := newOutcome(res, run.metadata())
	o.token = sp.token(ss, run)
	return o, nil
}

func (sp *spannerService) ExecuteSql(ctx context.Context, req *sppb.ExecuteSqlRequest) (*sppb.ResultSet, error) {
	o, err := sp.runSQL(ctx, req)
	if err != nil {
		return nil, err
	}
	return o.resultSet(), nil
}

func (sp *spannerService) ExecuteStreamingSql(req *sppb.ExecuteSqlRequest, stream sppb.Spanner_ExecuteStreamingSqlServer) error {
	o, err := sp.runSQL(stream.Context(), req)
	if err != nil {
		return err
	}
	return streamOutcome(o, stream.Send)
}

func (sp *spannerService) Read(ctx context.Context, req *sppb.ReadRequest) (*sppb.ResultSet, error) {
	o, err := sp.runRead(ctx, req)
	if err != nil {
		return nil, err
	}
	return o.resultSet(), nil
}

func (sp *spannerService) StreamingRead(req *sppb.ReadRequest, stream sppb.Spanner_StreamingReadServer) error {
	o, err := sp.runRead(stream.Context(), req)
	if err != nil {
		return err
	}
	return streamOutcome(o, stream.Send)
}

// ExecuteBatchDml runs the statements in order and stops at the first failure. The RPC
// succeeds either way: the response holds the results of the statements that succeeded and
// the status of the one that failed.
func (sp *spannerService) ExecuteBatchDml(ctx context.Context, req *sppb.ExecuteBatchDmlRequest) (*sppb.ExecuteBatchDmlResponse, error) {
	ss, db, err := sp.session(req.GetSession())
	if err != nil {
		return nil, err
	}
	if len(req.GetStatements()) == 0 {
		return nil, errorf(codes.InvalidArgument, "No statements in batch DML request")
	}
	switch req.GetTransaction().GetSelector().(type) {
	case *sppb.TransactionSelector_Id, *sppb.TransactionSelector_Begin:
	default:
		return nil, errorf(codes.InvalidArgument, "ExecuteBatchDml requires a read-write transaction")
	}
	run, err := sp.openTxn(db, ss.database, req.GetTransaction())
	if err != nil {
		return nil, err
	}
	if run.pdml || !run.readWrite {
		run.end(true)
		return nil, errorf(codes.InvalidArgument, "ExecuteBatchDml requires a read-write transaction")
	}
	sts := make([]engine.Statement, len(req.GetStatements()))
	for i, s := range req.GetStatements() {
		sts[i] = engine.Statement{SQL: s.GetSql(), Params: s.GetParams(), ParamTypes: s.GetParamTypes()}
	}
	results, batchErr := run.txn.BatchDML(ctx, sts)
	// Spanner only hands out an inline-begun transaction once a statement succeeded.
	run.end(len(results) == 0)
	resp := &sppb.ExecuteBatchDmlResponse{Status: status.Convert(grpcError(batchErr)).Proto()}
	for i, res := range results {
		var begun *sppb.Transaction
		if i == 0 {
			begun = run.begun
		}
		resp.ResultSets = append(resp.ResultSets, newOutcome(res, begun).resultSet())
	}
	if len(results) > 0 {
		resp.PrecommitToken = sp.token(ss, run)
	}
	return resp, nil
}

func (sp *spannerService) BeginTransaction(_ context.Context, req *sppb.BeginTransactionRequest) (*sppb.Transaction, error) {
	ss, db, err := sp.session(req.GetSession())
	if err != nil {
		return nil, err
	}
	opts, err := txnOptions(req.GetOptions())
	if err != nil {
		return nil, err
	}
	if opts.Mode == engine.PartitionedDML {
		return &sppb.Transaction{Id: sp.s.txns.beginPDML(ss.database)}, nil
	}
	// mutation_key lets Spanner pick a split for a mutation-only transaction; the emulator
	// has nothing to pick, so it is ignored.
	txn, err := db.Begin(opts)
	if err != nil {
		return nil, err
	}
	t := &sppb.Transaction{Id: txn.ID()}
	switch opts.Mode {
	case engine.ReadOnly:
		t.ReadTimestamp = timestamppb.New(txn.ReadTimestamp())
	case engine.ReadWrite:
		if ss.multiplexed {
			t.PrecommitToken = sp.s.txns.precommitToken(txn.ID())
		}
	}
	return t, nil
}

func (sp *spannerService) Commit(ctx context.Context, req *sppb.CommitRequest) (*sppb.CommitResponse, error) {
	ss, db, err := sp.session(req.GetSession())
	if err != nil {
		return nil, err
	}
	var txn *engine.Txn
	switch t := req.GetTransaction().(type) {
	case *sppb.CommitRequest_TransactionId:
		if sp.s.txns.takePDML(ss.database, t.TransactionId) {
			return nil, errorf(codes.FailedPrecondition, "Cannot commit a partitioned DML transaction")
		}
		txn, err = db.Txn(t.TransactionId)
	case *sppb.CommitRequest_SingleUseTransaction:
		if t.SingleUseTransaction.GetReadWrite() == nil {
			return nil, errorf(codes.InvalidArgument, "Commit of a single-use transaction requires read_write options")
		}
		txn, err = db.Begin(engine.TxnOptions{Mode: engine.ReadWrite})
	default:
		return nil, errorf(codes.InvalidArgument, "Commit requires a transaction_id or single_use_transaction")
	}
	if err != nil {
		return nil, err
	}
	ts, err := txn.Commit(ctx, req.GetMutations())
	if err != nil {
		// A failed commit ends the transaction in Spanner; releasing it here frees its locks
		// at once instead of at the idle timeout.
		txn.Rollback()
		return nil, err
	}
	resp := &sppb.CommitResponse{CommitTimestamp: timestamppb.New(ts)}
	if req.GetReturnCommitStats() {
		resp.CommitStats = &sppb.CommitResponse_CommitStats{MutationCount: db.MutationCount(req.GetMutations())}
	}
	return resp, nil
}

// Rollback releases a transaction. Rolling back one that was already aborted succeeds: the
// client rolls back after errors and expects no second error.
func (sp *spannerService) Rollback(_ context.Context, req *sppb.RollbackRequest) (*emptypb.Empty, error) {
	ss, db, err := sp.session(req.GetSession())
	if err != nil {
		return nil, err
	}
	if sp.s.txns.takePDML(ss.database, req.GetTransactionId()) {
		return &emptypb.Empty{}, nil
	}
	txn, err := db.Txn(req.GetTransactionId())
	if status.Code(err) == codes.Aborted {
		return &emptypb.Empty{}, nil
	}
	if err != nil {
		return nil, err
	}
	txn.Rollback()
	return &emptypb.Empty{}, nil
}

// partitionToken marks a request as one partition of a partitioned query or read. The emulator
// makes a single partition that covers everything, so the token carries no information.
var partitionToken = []byte("spanneremu:whole")

// partition answers PartitionQuery and PartitionRead: partitions need a read-only
// transaction, which may be begun by the request itself.
func (sp *spannerService) partition(sessionName string, sel *sppb.TransactionSelector) (*sppb.PartitionResponse, error) {
	ss, db, err := sp.session(sessionName)
	if err != nil {
		return nil, err
	}
	switch s := sel.GetSelector().(type) {
	case *sppb.TransactionSelector_SingleUse:
		return nil, errorf(codes.InvalidArgument, "Partitioned reads and queries cannot use single-use transactions")
	case *sppb.TransactionSelector_Begin:
		if s.Begin.GetReadOnly() == nil {
			return nil, errorf(codes.InvalidArgument, "Partitioned reads and queries require a read-only transaction")
		}
	case nil:
		return nil, errorf(codes.InvalidArgument, "Partitioned reads and queries require a read-only transaction")
	}
	run, err := sp.openTxn(db, ss.database, sel)
	if err != nil {
		return nil, err
	}
	if run.pdml {
		return nil, errorf(codes.InvalidArgument, "Partitioned reads and queries require a read-only transaction")
	}
	return &sppb.PartitionResponse{
		Partitions:  []*sppb.Partition{{PartitionToken: partitionToken}},
		Transaction: run.begun,
	}, nil
}

func (sp *spannerService) PartitionQuery(_ context.Context, req *sppb.PartitionQueryRequest) (*sppb.PartitionResponse, error) {
	if req.GetSql() == "" {
		return nil, errorf(codes.InvalidArgument, "Missing SQL in PartitionQuery")
	}
	return sp.partition(req.GetSession(), req.GetTransaction())
}

func (sp *spannerService) PartitionRead(_ context.Context, req *sppb.PartitionReadRequest) (*sppb.PartitionResponse, error) {
	if req.GetTable() == "" {
		return nil, errorf(codes.InvalidArgument, "Missing table in PartitionRead")
	}
	return sp.partition(req.GetSession(), req.GetTransaction())
}

// BatchWrite applies each mutation group in its own transaction and reports each group's
// outcome; one group failing does not stop the others.
func (sp *spannerService) BatchWrite(req *sppb.BatchWriteRequest, stream sppb.Spanner_BatchWriteServer) error {
	_, db, err := sp.session(req.GetSession())
	if err != nil {
		return err
	}
	ctx := stream.Context()
	for i, group := range req.GetMutationGroups() {
		resp := &sppb.BatchWriteResponse{Indexes: []int32{int32(i)}}
		ts, err := commitGroup(ctx, db, group.GetMutations())
		resp.Status = status.Convert(grpcError(err)).Proto()
		if err == nil {
			resp.CommitTimestamp = timestamppb.New(ts)
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
	return nil
}

func commitGroup(ctx context.Context, db *engine.DB, muts []*sppb.Mutation) (time.Time, error) {
	txn, err := db.Begin(engine.TxnOptions{Mode: engine.ReadWrite})
	if err != nil {
		return time.Time{}, err
	}
	ts, err := txn.Commit(ctx, muts)
	if err != nil {
		txn.Rollback()
	}
	return ts, err
}
