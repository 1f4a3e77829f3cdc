package spanneremu

import (
	"crypto/rand"
	"sync"
	"sync/atomic"
	"time"

	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/engine"
)

// txnTracker holds what the gRPC layer itself must know about transactions: partitioned DML
// transactions (which the engine runs statement by statement, without a transaction object)
// and the sequence of precommit tokens.
type txnTracker struct {
	seq atomic.Int32

	mu   sync.Mutex
	pdml map[string]pdmlTxn // by transaction id
}

type pdmlTxn struct {
	database string
	begun    time.Time
}

// pdmlLifetime is how long an unused partitioned DML transaction id stays valid. The client
// uses it right after BeginTransaction; the limit only reclaims abandoned ones.
const pdmlLifetime = time.Hour

func newTxnTracker() *txnTracker {
	return &txnTracker{pdml: map[string]pdmlTxn{}}
}

func (tt *txnTracker) beginPDML(database string) []byte {
	id := make([]byte, 16)
	rand.Read(id)
	now := time.Now()
	tt.mu.Lock()
	defer tt.mu.Unlock()
	for k, t := range tt.pdml {
		if now.Sub(t.begun) > pdmlLifetime {
			delete(tt.pdml, k)
		}
	}
	tt.pdml[string(id)] = pdmlTxn{database: database, begun: now}
	return id
}

// takePDML consumes a partitioned DML transaction of the database, reporting whether id is
// one: each runs exactly one statement. Ids it does not know are the engine's.
func (tt *txnTracker) takePDML(database string, id []byte) bool {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	t, ok := tt.pdml[string(id)]
	if !ok || t.database != database {
		return false
	}
	delete(tt.pdml, string(id))
	return true
}

// precommitToken returns a token for a read-write transaction on a multiplexed session. The
// client sends the one with the highest sequence number back with Commit; the emulator does
// not check it, since its transactions never move between servers.
func (tt *txnTracker) precommitToken(txnID []byte) *sppb.MultiplexedSessionPrecommitToken {
	return &sppb.MultiplexedSessionPrecommitToken{PrecommitToken: txnID, SeqNum: tt.seq.Add(1)}
}

// txnOptions maps request options onto the engine's.
func txnOptions(o *sppb.TransactionOptions) (engine.TxnOptions, error) {
	switch m := o.GetMode().(type) {
	case *sppb.TransactionOptions_ReadWrite_:
		return engine.TxnOptions{Mode: engine.ReadWrite}, nil
	case *sppb.TransactionOptions_ReadOnly_:
		return engine.TxnOptions{Mode: engine.ReadOnly, ReadOnly: m.ReadOnly}, nil
	case *sppb.TransactionOptions_PartitionedDml_:
		return engine.TxnOptions{Mode: engine.PartitionedDML}, nil
	default:
		return engine.TxnOptions{}, errorf(codes.InvalidArgument, "Transaction options must set a mode (read_write, read_only or partitioned_dml)")
	}
}

// txnRun is the transaction one data request runs in, chosen by its TransactionSelector.
type txnRun struct {
	txn *engine.Txn
	// pdml is set, instead of txn, for a partitioned DML transaction.
	pdml bool
	// singleUse transactions end with the request.
	singleUse bool
	// inlineBegun transactions were begun by this request; they are rolled back if it fails,
	// as Spanner never hands out the id of a transaction whose first statement failed.
	inlineBegun bool
	// readWrite transactions on multiplexed sessions get precommit tokens. Transactions
	// chosen by id are assumed read-write: the client ignores tokens in read-only ones.
	readWrite bool
	// begun describes an inline-begun transaction for the response's metadata; wantReadTS is
	// true for a single-use read that asked for its read timestamp (see metadata).
	begun      *sppb.Transaction
	wantReadTS bool
}

// openTxn resolves a request's transaction selector. No selector means a single-use strong
// read-only transaction, as Spanner defines it. Single-use read-write transactions are
// refused: Spanner allows them only for Commit, to avoid replaying DML.
func (sp *spannerService) openTxn(db *engine.DB, database string, sel *sppb.TransactionSelector) (*txnRun, error) {
	switch s := sel.GetSelector().(type) {
	case nil:
		return sp.beginSingleUse(db, &sppb.TransactionOptions{Mode: &sppb.TransactionOptions_ReadOnly_{
			ReadOnly: &sppb.TransactionOptions_ReadOnly{TimestampBound: &sppb.TransactionOptions_ReadOnly_Strong{Strong: true}},
		}})
	case *sppb.TransactionSelector_SingleUse:
		return sp.beginSingleUse(db, s.SingleUse)
	case *sppb.TransactionSelector_Id:
		if sp.s.txns.takePDML(database, s.Id) {
			return &txnRun{pdml: true}, nil
		}
		txn, err := db.Txn(s.Id)
		if err != nil {
			return nil, err
		}
		return &txnRun{txn: txn, readWrite: txn.Mode() == engine.ReadWrite}, nil
	case *sppb.TransactionSelector_Begin:
		opts, err := txnOptions(s.Begin)
		if err != nil {
			return nil, err
		}
		if opts.Mode == engine.PartitionedDML {
			return nil, errorf(codes.InvalidArgument, "Partitioned DML transactions must be begun with BeginTransaction")
		}
		txn, err := db.Begin(opts)
		if err != nil {
			return nil, err
		}
		run := &txnRun{txn: txn, inlineBegun: true, readWrite: opts.Mode == engine.ReadWrite}
		run.begun = &sppb.Transaction{Id: txn.ID()}
		if opts.Mode == engine.ReadOnly {
			run.begun.ReadTimestamp = timestamppb.New(txn.ReadTimestamp())
		}
		return run, nil
	default:
		return nil, errorf(codes.InvalidArgument, "Unsupported transaction selector %T", s)
	}
}

func (sp *spannerService) beginSingleUse(db *engine.DB, o *sppb.TransactionOptions) (*txnRun, error) {
	ro := o.GetReadOnly()
	if ro == nil {
		return nil, errorf(codes.InvalidArgument, "DML statements may not be performed in single-use transactions, to avoid replay; single-use transactions must be read-only")
	}
	txn, err := db.Begin(engine.TxnOptions{Mode: engine.ReadOnly, ReadOnly: ro, SingleUse: true})
	if err != nil {
		return nil, err
	}
	// The read timestamp is known once the read has run (engine.Txn.ReadTimestamp).
	return &txnRun{txn: txn, singleUse: true, wantReadTS: ro.GetReturnReadTimestamp()}, nil
}

// metadata is the transaction to describe in a response's metadata, nil for none: an inline-begun
// transaction, or the read timestamp of a single-use read that asked for it.
func (r *txnRun) metadata() *sppb.Transaction {
	if r.wantReadTS {
		return &sppb.Transaction{ReadTimestamp: timestamppb.New(r.txn.ReadTimestamp())}
	}
	return r.begun
}

// end finishes the request's part of the transaction: single-use transactions are released,
// and an inline-begun one is rolled back when its first request failed (failed reports that).
func (r *txnRun) end(failed bool) {
	if r.txn == nil {
		return
	}
	if r.singleUse || (r.inlineBegun && failed) {
		r.txn.Rollback()
	}
}

// token is the precommit token to attach to a response, or nil.
func (sp *spannerService) token(ss *session, r *txnRun) *sppb.MultiplexedSessionPrecommitToken {
	if !ss.multiplexed || !r.readWrite || r.txn == nil {
		return nil
	}
	return sp.s.txns.precommitToken(r.txn.ID())
}
