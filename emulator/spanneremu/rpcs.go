package spanneremu

import (
	"context"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
	"google.golang.org/grpc"
)

// rpcCounts counts the data API's RPCs (google.spanner.v1.Spanner) by database and method, reads
// by table too ("StreamingRead(Orders)"), for Stats: what a client's work costs in round trips,
// which commits alone do not show.
type rpcCounts struct {
	m sync.Map // rpcKey → *atomic.Int64
	// statements, when set, counts the requests by statement too (Options.CountStatements).
	statements bool
	byStmt     sync.Map // rpcKey{database, statementOf(method, req)} → *atomic.Int64
}

type rpcKey struct{ database, method string }

const dataAPI = "/google.spanner.v1.Spanner/"

// count counts one RPC of fullMethod on the database that req names (by its session or
// database), if it is a data API request. When statements are counted it returns the profile
// labels the request's work is to carry (DatabaseLabel, StatementLabel), else nil.
func (c *rpcCounts) count(fullMethod string, req any) *pprof.LabelSet {
	method, ok := strings.CutPrefix(fullMethod, dataAPI)
	if !ok {
		return nil
	}
	var name string
	switch r := req.(type) {
	case interface{ GetSession() string }:
		name = r.GetSession()
	case interface{ GetDatabase() string }:
		name = r.GetDatabase()
	}
	db := databaseID(name)
	if db == "" {
		return nil
	}
	if r, ok := req.(interface{ GetTable() string }); ok {
		method += "(" + r.GetTable() + ")"
	}
	add(&c.m, rpcKey{db, method})
	if !c.statements {
		return nil
	}
	stmt := statementOf(method, req)
	add(&c.byStmt, rpcKey{db, stmt})
	labels := pprof.Labels(DatabaseLabel, db, StatementLabel, stmt)
	return &labels
}

// DatabaseLabel and StatementLabel are the CPU profile labels that the work of a data API request
// carries when statements are counted (Options.CountStatements): its database id and its
// statement as DatabaseStats.Statements names it, so that a profile of the emulator's process
// says which statements its CPU goes to (go tool pprof -tags; the bench's -statements).
const (
	DatabaseLabel  = "spanner-database"
	StatementLabel = "spanner-statement"
)

// labelled runs f with the goroutine's profile labels set to labels (none when nil) and then
// cleared: f runs on a stack worker, whose next request is another's.
func labelled(ctx context.Context, labels *pprof.LabelSet, f func()) {
	if labels == nil {
		f()
		return
	}
	pprof.SetGoroutineLabels(pprof.WithLabels(ctx, *labels))
	defer pprof.SetGoroutineLabels(context.Background())
	f()
}

func add(m *sync.Map, k rpcKey) {
	n, ok := m.Load(k)
	if !ok {
		n, _ = m.LoadOrStore(k, new(atomic.Int64))
	}
	n.(*atomic.Int64).Add(1)
}

// statementOf is what a request of method (a read: with its table) does, for the counts by
// statement: a query or DML statement by its SQL (white space collapsed), a batch by its
// statements' SQL, a commit by the tables its mutations write and how ("Commit: insert
// OutboxEvents, update Orders"; a commit of DML alone writes none), a read by its table and index.
func statementOf(method string, req any) string {
	switch r := req.(type) {
	case *sppb.ExecuteSqlRequest:
		return method + ": " + strings.Join(strings.Fields(r.GetSql()), " ")
	case *sppb.ExecuteBatchDmlRequest:
		sqls := make([]string, len(r.GetStatements()))
		for i, st := range r.GetStatements() {
			sqls[i] = strings.Join(strings.Fields(st.GetSql()), " ")
		}
		return method + ": " + strings.Join(sqls, "; ")
	case *sppb.CommitRequest:
		var writes []string
		for _, m := range r.GetMutations() {
			var w string
			switch o := m.GetOperation().(type) {
			case *sppb.Mutation_Insert:
				w = "insert " + o.Insert.GetTable()
			case *sppb.Mutation_Update:
				w = "update " + o.Update.GetTable()
			case *sppb.Mutation_InsertOrUpdate:
				w = "insert or update " + o.InsertOrUpdate.GetTable()
			case *sppb.Mutation_Replace:
				w = "replace " + o.Replace.GetTable()
			case *sppb.Mutation_Delete_:
				w = "delete " + o.Delete.GetTable()
			}
			if !slices.Contains(writes, w) {
				writes = append(writes, w)
			}
		}
		if len(writes) == 0 {
			return method + ": no mutations"
		}
		slices.Sort(writes)
		return method + ": " + strings.Join(writes, ", ")
	case *sppb.ReadRequest:
		if r.GetIndex() != "" {
			return method + "@" + r.GetIndex()
		}
	}
	return method
}

// byDatabase returns the counts by database id and method.
func (c *rpcCounts) byDatabase() map[string]map[string]int64 {
	return countsByDatabase(&c.m)
}

// byStatement returns the counts by database id and statement (statementOf); nil unless
// statements are counted.
func (c *rpcCounts) byStatement() map[string]map[string]int64 {
	if !c.statements {
		return nil
	}
	return countsByDatabase(&c.byStmt)
}

func countsByDatabase(m *sync.Map) map[string]map[string]int64 {
	out := map[string]map[string]int64{}
	m.Range(func(k, v any) bool {
		key := k.(rpcKey)
		if out[key.database] == nil {
			out[key.database] = map[string]int64{}
		}
		out[key.database][key.method] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

// databaseID is the database id in a database or session name
// (projects/P/instances/I/databases/D[/sessions/S]), or "".
func databaseID(name string) string {
	_, rest, ok := strings.Cut(name, "/databases/")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, "/")
	return id
}

// countingStream counts a streaming RPC when its request arrives, and then labels the goroutine
// receiving it (the handler's) as count says.
type countingStream struct {
	grpc.ServerStream
	rpcs     *rpcCounts
	method   string
	counted  bool
	labelled bool // the goroutine's labels were set: the interceptor clears them
}

func (s *countingStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if err == nil && !s.counted {
		s.counted = true
		if labels := s.rpcs.count(s.method, m); labels != nil {
			pprof.SetGoroutineLabels(pprof.WithLabels(s.Context(), *labels))
			s.labelled = true
		}
	}
	return err
}
