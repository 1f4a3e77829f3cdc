// Package engine runs Spanner databases on SQLite: it owns the databases of one emulator
// process, their schemas, their transactions (locking, snapshots, commit timestamps) and the
// execution of queries, DML, reads and mutations. The gRPC layer (package spanneremu) maps RPCs
// onto this API and never touches SQLite itself.
//
// All errors returned by this package are gRPC status errors (status.FromError works) with the
// codes Spanner uses.
package engine

import (
	"time"

	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
	"google.golang.org/protobuf/types/known/structpb"
)

// Options configure an Engine.
type Options struct {
	// DataDir keeps databases across restarts when set; "" keeps them in a temporary directory
	// removed by Close.
	DataDir string
	// LockWait is how long a read-write transaction waits for the write lock while another one
	// holds it across its requests before it is aborted (ABORTED, which the client retries; a
	// wait behind other commits is not bounded: see lockValidated), and how long a commit waits
	// for older readers of what it writes before it goes ahead (readers.go). Default 2s.
	LockWait time.Duration
	// IdleTimeout aborts a transaction that has seen no request for this long, releasing its
	// locks. Default 10s.
	IdleTimeout time.Duration
	// SnapshotIdle releases the pinned snapshot of a read-only transaction that has been idle
	// this long (read-only transactions have no end the server hears of). It can still read
	// afterwards as long as nothing has been committed since its snapshot. Default 5s.
	SnapshotIdle time.Duration
	// TTLSweepInterval is the period of the ROW DELETION POLICY sweeper. Default 1 minute;
	// negative disables it.
	TTLSweepInterval time.Duration
	// NoHistory keeps no versions for exact-timestamp reads (ReadTimestamp, ExactStaleness):
	// such a read then succeeds only when nothing was committed after its timestamp. Kept
	// versions are pinned SQLite readers, one per commit, and under hundreds of commits per
	// second they cost a tenth of the engine's CPU and long latency spikes (see the README).
	NoHistory bool
	// Logf receives diagnostic log lines; nil discards them.
	Logf func(format string, args ...any)
}

// DatabaseInfo describes a database for ListDatabases.
type DatabaseInfo struct {
	Name       string // projects/p/instances/i/databases/d
	CreateTime time.Time
}

// Mode is a transaction's kind.
type Mode int

// Transaction kinds.
const (
	ReadWrite Mode = iota
	ReadOnly
	PartitionedDML
)

// TxnOptions describe a transaction to begin.
type TxnOptions struct {
	Mode Mode
	// ReadOnly is the read-only options from the request (timestamp bound); nil means strong.
	ReadOnly *sppb.TransactionOptions_ReadOnly
	// SingleUse marks a read-only transaction that runs one read and is then rolled back: it
	// needs no pinned snapshot (one SQLite statement is consistent by itself).
	SingleUse bool
}

// Statement is one SQL statement with its parameters, as ExecuteSqlRequest carries them.
type Statement struct {
	SQL        string
	Params     *structpb.Struct
	ParamTypes map[string]*sppb.Type
	// PlanOnly is QueryMode PLAN: analyse, return metadata (including undeclared parameter
	// types) and no rows.
	PlanOnly bool
}

// ReadRequest is a Read/StreamingRead.
type ReadRequest struct {
	Table   string
	Index   string
	Columns []string
	KeySet  *sppb.KeySet
	Limit   int64
	// Exclusive is LOCK_HINT_EXCLUSIVE: in a read-write transaction, lock the keys read
	// exclusively until the transaction ends (locks.go).
	Exclusive bool
}

// Result is the outcome of a query, read or DML statement.
type Result struct {
	// Fields is the row type (empty for DML without THEN RETURN).
	Fields []*sppb.StructType_Field
	Rows   [][]*structpb.Value
	// IsDML marks a DML statement; RowCount is then its exact row count.
	IsDML    bool
	RowCount int64
	// UndeclaredParams is filled in PlanOnly mode with the inferred types of parameters that
	// the request did not type.
	UndeclaredParams []*sppb.StructType_Field
}
