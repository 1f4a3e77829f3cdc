package engine

// This file lists the engine's exported methods with their contracts. The implementations live
// in the other files of the package.
//
//	func New(opts Options) (*Engine, error)
//	func (e *Engine) Close() error
//
//	// Databases. name is the full resource name projects/P/instances/I/databases/D. Errors:
//	// ALREADY_EXISTS, NOT_FOUND, INVALID_ARGUMENT (bad DDL, with memefish's message),
//	// FAILED_PRECONDITION (DDL that existing data violates).
//	func (e *Engine) CreateDatabase(ctx context.Context, name string, ddl []string) error
//	func (e *Engine) UpdateDDL(ctx context.Context, name string, stmts []string) error
//	func (e *Engine) DDL(name string) ([]string, error)
//	func (e *Engine) DropDatabase(name string) error
//	func (e *Engine) ListDatabases(instance string) []DatabaseInfo   // instance = projects/P/instances/I
//	func (e *Engine) DropInstanceDatabases(instance string)
//	func (e *Engine) Database(name string) (*DB, error)               // NOT_FOUND when missing
//
//	// Transactions. Begin never blocks; locks are taken by the operations.
//	func (db *DB) Begin(opts TxnOptions) (*Txn, error)
//	func (db *DB) Txn(id []byte) (*Txn, error) // NOT_FOUND unknown id; ABORTED if it was aborted
//	func (t *Txn) ID() []byte
//	func (t *Txn) ReadTimestamp() time.Time      // the snapshot time (read-only), or begin time
//	func (t *Txn) ExecuteSQL(ctx context.Context, st Statement) (*Result, error)
//	func (t *Txn) Read(ctx context.Context, r ReadRequest) (*Result, error)
//	// BatchDML runs statements in order and stops at the first failure: it returns the results
//	// of the statements that succeeded and the error of the one that failed (nil if none).
//	func (t *Txn) BatchDML(ctx context.Context, sts []Statement) ([]*Result, error)
//	func (t *Txn) Commit(ctx context.Context, muts []*sppb.Mutation) (time.Time, error)
//	func (t *Txn) Rollback()
//	// ExecutePartitionedDML runs one DML statement outside any user transaction and returns
//	// the number of rows it changed.
//	func (db *DB) ExecutePartitionedDML(ctx context.Context, st Statement) (int64, error)
