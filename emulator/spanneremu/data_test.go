package spanneremu

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"cloud.google.com/go/spanner"
	databasepb "cloud.google.com/go/spanner/admin/database/apiv1/databasepb"
	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/iterator"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
)

const singersDDL = "CREATE TABLE Singers (SingerId INT64 NOT NULL, Name STRING(MAX)) PRIMARY KEY (SingerId)"

func TestSessions(t *testing.T) {
	ctx := testContext(t)
	db := createDatabase(t, singersDDL)
	sp := newRawSpanner(t, testServer.Addr())

	_, err := sp.CreateSession(ctx, &sppb.CreateSessionRequest{Database: db + "x"})
	if got, want := status.Code(err), codes.NotFound; got != want {
		t.Errorf("CreateSession(missing database) code = %v, want %v (err %v)", got, want, err)
	}

	mux, err := sp.CreateSession(ctx, &sppb.CreateSessionRequest{Database: db, Session: &sppb.Session{Multiplexed: true}})
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	if !mux.Multiplexed || !strings.HasPrefix(mux.Name, db+"/sessions/") {
		t.Errorf("CreateSession = %v, want a multiplexed session under %s", mux, db)
	}
	batch, err := sp.BatchCreateSessions(ctx, &sppb.BatchCreateSessionsRequest{Database: db, SessionCount: 3})
	if err != nil {
		t.Fatalf("BatchCreateSessions: %v", err)
	}
	if got := len(batch.Session); got != 3 {
		t.Errorf("BatchCreateSessions made %d sessions, want 3", got)
	}
	list, err := sp.ListSessions(ctx, &sppb.ListSessionsRequest{Database: db})
	if err != nil {
		t.Fatalf("ListSessions: %v", err)
	}
	if got := len(list.Sessions); got != 4 {
		t.Errorf("ListSessions returned %d sessions, want 4", got)
	}

	got, err := sp.GetSession(ctx, &sppb.GetSessionRequest{Name: mux.Name})
	if err != nil {
		t.Fatalf("GetSession: %v", err)
	}
	if got.Name != mux.Name {
		t.Errorf("GetSession name = %q, want %q", got.Name, mux.Name)
	}

	gone := batch.Session[0].Name
	if _, err := sp.DeleteSession(ctx, &sppb.DeleteSessionRequest{Name: gone}); err != nil {
		t.Fatalf("DeleteSession: %v", err)
	}
	_, err = sp.GetSession(ctx, &sppb.GetSessionRequest{Name: gone})
	st := status.Convert(err)
	if st.Code() != codes.NotFound || st.Message() != "Session not found: "+gone {
		t.Errorf("GetSession(deleted) = %v, want NOT_FOUND \"Session not found: %s\"", err, gone)
	}
	var info *errdetails.ResourceInfo
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.ResourceInfo); ok {
			info = ri
		}
	}
	if info.GetResourceType() != "type.googleapis.com/google.spanner.v1.Session" {
		t.Errorf("GetSession(deleted) ResourceInfo = %v, want the session resource type", info)
	}
}

// TestClientRoundTrip drives the main paths of the official client: mutations, reads,
// inline-begun read-write transactions with DML and batch DML, single-use queries, read-only
// transactions, partitioned DML and errors.
func TestClientRoundTrip(t *testing.T) {
	ctx := testContext(t)
	client := newDataClient(t, createDatabase(t, singersDDL))

	_, err := client.Apply(ctx, []*spanner.Mutation{
		spanner.Insert("Singers", []string{"SingerId", "Name"}, []any{int64(1), "Marc"}),
		spanner.Insert("Singers", []string{"SingerId", "Name"}, []any{int64(2), "Catalina"}),
	})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	row, err := client.Single().ReadRow(ctx, "Singers", spanner.Key{int64(1)}, []string{"Name"})
	if err != nil {
		t.Fatalf("ReadRow: %v", err)
	}
	var name string
	if err := row.Columns(&name); err != nil || name != "Marc" {
		t.Errorf("ReadRow name = %q, %v; want Marc", name, err)
	}

	resp, err := client.ReadWriteTransactionWithOptions(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
		n, err := tx.Update(ctx, spanner.Statement{
			SQL:    "UPDATE Singers SET Name = @name WHERE SingerId = 1",
			Params: map[string]any{"name": "Marcel"},
		})
		if err != nil {
			return err
		}
		if n != 1 {
			t.Errorf("Update count = %d, want 1", n)
		}
		// The transaction sees its own write.
		row, err := tx.ReadRow(ctx, "Singers", spanner.Key{int64(1)}, []string{"Name"})
		if err != nil {
			return err
		}
		var got string
		if err := row.Columns(&got); err != nil || got != "Marcel" {
			t.Errorf("ReadRow in transaction = %q, %v; want Marcel", got, err)
		}
		counts, err := tx.BatchUpdate(ctx, []spanner.Statement{
			{SQL: "INSERT INTO Singers (SingerId, Name) VALUES (3, 'Alice')"},
			{SQL: "UPDATE Singers SET Name = 'Bob' WHERE SingerId > 1"},
		})
		if err != nil {
			return err
		}
		if diff := cmp.Diff([]int64{1, 2}, counts); diff != "" {
			t.Errorf("BatchUpdate counts (-want +got):\n%s", diff)
		}
		tx.BufferWrite([]*spanner.Mutation{spanner.Insert("Singers", []string{"SingerId", "Name"}, []any{int64(4), "Dan"})})
		return nil
	}, spanner.TransactionOptions{CommitOptions: spanner.CommitOptions{ReturnCommitStats: true}})
	if err != nil {
		t.Fatalf("ReadWriteTransaction: %v", err)
	}
	if resp.CommitTs.IsZero() {
		t.Error("ReadWriteTransaction returned no commit timestamp")
	}
	if got, want := resp.CommitStats.GetMutationCount(), int64(2); got != want {
		t.Errorf("commit stats mutation count = %d, want %d", got, want)
	}

	want := []string{"1:Marcel", "2:Bob", "3:Bob", "4:Dan"}
	if diff := cmp.Diff(want, querySingers(t, client.Single())); diff != "" {
		t.Errorf("singers after transaction (-want +got):\n%s", diff)
	}

	// An error from the transaction function rolls its DML back.
	errStop := errors.New("stop")
	_, err = client.ReadWriteTransaction(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
		if _, err := tx.Update(ctx, spanner.NewStatement("DELETE FROM Singers WHERE true")); err != nil {
			return err
		}
		return errStop
	})
	if !errors.Is(err, errStop) {
		t.Errorf("ReadWriteTransaction error = %v, want %v", err, errStop)
	}
	if diff := cmp.Diff(want, querySingers(t, client.Single())); diff != "" {
		t.Errorf("singers after rolled back transaction (-want +got):\n%s", diff)
	}

	// Engine errors reach the client with their codes.
	_, err = client.Apply(ctx, []*spanner.Mutation{spanner.Insert("Singers", []string{"SingerId", "Name"}, []any{int64(1), "Again"})})
	if got, want := spanner.ErrCode(err), codes.AlreadyExists; got != want {
		t.Errorf("duplicate insert code = %v, want %v (err %v)", got, want, err)
	}
	_, err = client.ReadWriteTransaction(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
		_, err := tx.Update(ctx, spanner.NewStatement("UPDATE NoSuchTable SET X = 1 WHERE true"))
		return err
	})
	if code := spanner.ErrCode(err); code != codes.InvalidArgument && code != codes.NotFound {
		t.Errorf("DML on a missing table code = %v, want INVALID_ARGUMENT or NOT_FOUND (err %v)", code, err)
	}

	ro := client.ReadOnlyTransaction()
	defer ro.Close()
	first := querySingers(t, ro)
	if _, err := client.Apply(ctx, []*spanner.Mutation{spanner.Delete("Singers", spanner.Key{int64(4)})}); err != nil {
		t.Fatalf("Apply delete: %v", err)
	}
	if diff := cmp.Diff(first, querySingers(t, ro)); diff != "" {
		t.Errorf("read-only transaction saw a later commit (-first +second):\n%s", diff)
	}

	n, err := client.PartitionedUpdate(ctx, spanner.NewStatement("UPDATE Singers SET Name = 'X' WHERE SingerId >= 2"))
	if err != nil {
		t.Fatalf("PartitionedUpdate: %v", err)
	}
	if n != 2 {
		t.Errorf("PartitionedUpdate count = %d, want 2", n)
	}
	if diff := cmp.Diff([]string{"1:Marcel", "2:X", "3:X"}, querySingers(t, client.Single())); diff != "" {
		t.Errorf("singers after partitioned update (-want +got):\n%s", diff)
	}
}

func TestBatchReadAndWrite(t *testing.T) {
	ctx := testContext(t)
	client := newDataClient(t, createDatabase(t, singersDDL))

	var groups []*spanner.MutationGroup
	for i := range 3 {
		groups = append(groups, &spanner.MutationGroup{Mutations: []*spanner.Mutation{
			spanner.Insert("Singers", []string{"SingerId", "Name"}, []any{int64(i % 2), "S"}),
		}})
	}
	// Groups 0 and 2 insert the same key: the second of them fails, the others commit.
	var codesByGroup [3]codes.Code
	err := client.BatchWrite(ctx, groups).Do(func(r *sppb.BatchWriteResponse) error {
		for _, i := range r.Indexes {
			codesByGroup[i] = codes.Code(r.GetStatus().GetCode())
			if r.GetStatus().GetCode() == 0 && r.CommitTimestamp == nil {
				t.Errorf("group %d committed without a timestamp", i)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("BatchWrite: %v", err)
	}
	if diff := cmp.Diff([3]codes.Code{codes.OK, codes.OK, codes.AlreadyExists}, codesByGroup); diff != "" {
		t.Errorf("BatchWrite statuses (-want +got):\n%s", diff)
	}

	txn, err := client.BatchReadOnlyTransaction(ctx, spanner.StrongRead())
	if err != nil {
		t.Fatalf("BatchReadOnlyTransaction: %v", err)
	}
	defer txn.Close()
	parts, err := txn.PartitionQuery(ctx, spanner.NewStatement("SELECT SingerId FROM Singers"), spanner.PartitionOptions{})
	if err != nil {
		t.Fatalf("PartitionQuery: %v", err)
	}
	var ids []int64
	for _, p := range parts {
		err := txn.Execute(ctx, p).Do(func(r *spanner.Row) error {
			var id int64
			if err := r.Columns(&id); err != nil {
				return err
			}
			ids = append(ids, id)
			return nil
		})
		if err != nil {
			t.Fatalf("Execute partition: %v", err)
		}
	}
	slices.Sort(ids)
	if diff := cmp.Diff([]int64{0, 1}, ids); diff != "" {
		t.Errorf("partitioned query rows (-want +got):\n%s", diff)
	}

	plan, err := client.Single().AnalyzeQuery(ctx, spanner.NewStatement("SELECT SingerId FROM Singers"))
	if err != nil {
		t.Fatalf("AnalyzeQuery: %v", err)
	}
	if len(plan.GetPlanNodes()) == 0 {
		t.Error("AnalyzeQuery returned an empty plan")
	}
}

type querier interface {
	Query(ctx context.Context, st spanner.Statement) *spanner.RowIterator
}

// querySingers returns the singers as "id:name", by id.
func querySingers(t *testing.T, q querier) []string {
	t.Helper()
	var out []string
	err := q.Query(testContext(t), spanner.NewStatement("SELECT SingerId, Name FROM Singers ORDER BY SingerId")).Do(func(r *spanner.Row) error {
		var id int64
		var name spanner.NullString
		if err := r.Columns(&id, &name); err != nil {
			return err
		}
		out = append(out, itoa(id)+":"+name.StringVal)
		return nil
	})
	if err != nil && err != iterator.Done {
		t.Fatalf("query singers: %v", err)
	}
	return out
}

// TestConcurrentIncrements runs conflicting read-modify-write transactions on the client's
// multiplexed session: the ones that lose the lock are aborted and retried, and no increment
// is lost.
func TestConcurrentIncrements(t *testing.T) {
	ctx := testContext(t)
	client := newDataClient(t, createDatabase(t, "CREATE TABLE Counters (Id INT64 NOT NULL, N INT64 NOT NULL) PRIMARY KEY (Id)"))
	if _, err := client.Apply(ctx, []*spanner.Mutation{spanner.Insert("Counters", []string{"Id", "N"}, []any{int64(1), int64(0)})}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	const workers, perWorker = 4, 5
	errs := make(chan error, workers)
	for range workers {
		go func() {
			for range perWorker {
				_, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
					row, err := tx.ReadRow(ctx, "Counters", spanner.Key{int64(1)}, []string{"N"})
					if err != nil {
						return err
					}
					var n int64
					if err := row.Columns(&n); err != nil {
						return err
					}
					_, err = tx.Update(ctx, spanner.Statement{
						SQL:    "UPDATE Counters SET N = @n WHERE Id = 1",
						Params: map[string]any{"n": n + 1},
					})
					return err
				})
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatalf("increment: %v", err)
		}
	}
	row, err := client.Single().ReadRow(ctx, "Counters", spanner.Key{int64(1)}, []string{"N"})
	if err != nil {
		t.Fatalf("ReadRow: %v", err)
	}
	var n int64
	if err := row.Columns(&n); err != nil {
		t.Fatal(err)
	}
	if n != workers*perWorker {
		t.Errorf("counter = %d, want %d", n, workers*perWorker)
	}
}

// TestFailedFirstStatement checks that a transaction whose inline-begun first statement fails
// reports the statement's error and leaves nothing locked.
func TestFailedFirstStatement(t *testing.T) {
	ctx := testContext(t)
	client := newDataClient(t, createDatabase(t, singersDDL))
	_, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
		_, err := tx.Update(ctx, spanner.NewStatement("UPDATE Singers SET Name = 'x' WHERE Nope = 1"))
		return err
	})
	if code := spanner.ErrCode(err); code != codes.InvalidArgument && code != codes.NotFound {
		t.Errorf("bad first statement code = %v, want INVALID_ARGUMENT or NOT_FOUND (err %v)", code, err)
	}
	_, err = client.ReadWriteTransaction(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
		counts, err := tx.BatchUpdate(ctx, []spanner.Statement{
			spanner.NewStatement("INSERT INTO Singers (SingerId) VALUES (1)"),
			spanner.NewStatement("INSERT INTO Singers (SingerId) VALUES (1)"),
		})
		if len(counts) != 1 {
			t.Errorf("BatchUpdate counts = %v, want one count before the failure", counts)
		}
		return err
	})
	if got, want := spanner.ErrCode(err), codes.AlreadyExists; got != want {
		t.Errorf("BatchUpdate duplicate code = %v, want %v (err %v)", got, want, err)
	}
	// The database is not left locked: a new write commits at once.
	if _, err := client.Apply(ctx, []*spanner.Mutation{spanner.Insert("Singers", []string{"SingerId"}, []any{int64(7)})}); err != nil {
		t.Errorf("Apply after failed transactions: %v", err)
	}
}

// TestStreamedResults reads more values than fit in one PartialResultSet, and no rows at all.
func TestStreamedResults(t *testing.T) {
	ctx := testContext(t)
	client := newDataClient(t, createDatabase(t, singersDDL))
	const rows = 1200
	var muts []*spanner.Mutation
	for i := range rows {
		muts = append(muts, spanner.Insert("Singers", []string{"SingerId", "Name"}, []any{int64(i), strings.Repeat("n", i%50)}))
	}
	if _, err := client.Apply(ctx, muts); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if got := len(querySingers(t, client.Single())); got != rows {
		t.Errorf("query returned %d rows, want %d", got, rows)
	}
	n := 0
	err := client.Single().Read(ctx, "Singers", spanner.AllKeys(), []string{"SingerId", "Name"}).Do(func(*spanner.Row) error {
		n++
		return nil
	})
	if err != nil || n != rows {
		t.Errorf("read returned %d rows, %v; want %d", n, err, rows)
	}
	it := client.Single().Query(ctx, spanner.NewStatement("SELECT SingerId FROM Singers WHERE SingerId < 0"))
	if _, err := it.Next(); err != iterator.Done {
		t.Errorf("empty query Next = %v, want iterator.Done", err)
	}
	it.Stop()
}

// TestQueryModes runs a query in PLAN mode, which returns the row type, the inferred types of
// untyped parameters and a plan but no rows, and in PROFILE mode, which also returns stats.
func TestQueryModes(t *testing.T) {
	ctx := testContext(t)
	db := createDatabase(t, singersDDL)
	sp := newRawSpanner(t, testServer.Addr())
	ss, err := sp.CreateSession(ctx, &sppb.CreateSessionRequest{Database: db, Session: &sppb.Session{Multiplexed: true}})
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}

	plan, err := sp.ExecuteSql(ctx, &sppb.ExecuteSqlRequest{
		Session:   ss.Name,
		Sql:       "SELECT Name FROM Singers WHERE SingerId = @id",
		QueryMode: sppb.ExecuteSqlRequest_PLAN,
	})
	if err != nil {
		t.Fatalf("ExecuteSql(PLAN): %v", err)
	}
	want := &sppb.ResultSetMetadata{
		RowType:              &sppb.StructType{Fields: []*sppb.StructType_Field{{Name: "Name", Type: &sppb.Type{Code: sppb.TypeCode_STRING}}}},
		UndeclaredParameters: &sppb.StructType{Fields: []*sppb.StructType_Field{{Name: "id", Type: &sppb.Type{Code: sppb.TypeCode_INT64}}}},
	}
	if diff := cmp.Diff(want, plan.Metadata, protocmp.Transform()); diff != "" {
		t.Errorf("PLAN metadata (-want +got):\n%s", diff)
	}
	if len(plan.Rows) != 0 || plan.GetStats().GetQueryPlan() == nil {
		t.Errorf("PLAN result = %v, want no rows and a query plan", plan)
	}

	profile, err := sp.ExecuteSql(ctx, &sppb.ExecuteSqlRequest{
		Session:   ss.Name,
		Sql:       "SELECT 1",
		QueryMode: sppb.ExecuteSqlRequest_PROFILE,
	})
	if err != nil {
		t.Fatalf("ExecuteSql(PROFILE): %v", err)
	}
	if len(profile.Rows) != 1 || profile.GetStats().GetQueryStats() == nil {
		t.Errorf("PROFILE result = %v, want one row and query stats", profile)
	}
}

func TestSingleUseReadTimestamp(t *testing.T) {
	ctx := testContext(t)
	client := newDataClient(t, createDatabase(t, singersDDL))
	ro := client.Single()
	if err := ro.Query(ctx, spanner.NewStatement("SELECT 1")).Do(func(*spanner.Row) error { return nil }); err != nil {
		t.Fatalf("Query: %v", err)
	}
	ts, err := ro.Timestamp()
	if err != nil || ts.IsZero() {
		t.Errorf("single-use read timestamp = %v, %v; want a timestamp", ts, err)
	}
}

func TestSessionsOfDroppedDatabase(t *testing.T) {
	ctx := testContext(t)
	db := createDatabase(t, singersDDL)
	sp := newRawSpanner(t, testServer.Addr())
	ss, err := sp.CreateSession(ctx, &sppb.CreateSessionRequest{Database: db})
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	if err := newDatabaseAdmin(t, testServer.Addr()).DropDatabase(ctx, &databasepb.DropDatabaseRequest{Database: db}); err != nil {
		t.Fatalf("DropDatabase: %v", err)
	}
	_, err = sp.ExecuteSql(ctx, &sppb.ExecuteSqlRequest{Session: ss.Name, Sql: "SELECT 1"})
	if got, want := status.Code(err), codes.NotFound; got != want {
		t.Errorf("ExecuteSql on a dropped database's session code = %v, want %v (err %v)", got, want, err)
	}
}

// TestDMLThenReturn streams the rows of a DML statement with THEN RETURN and its row count.
func TestDMLThenReturn(t *testing.T) {
	ctx := testContext(t)
	client := newDataClient(t, createDatabase(t, singersDDL))
	var names []string
	_, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
		names = nil
		it := tx.Query(ctx, spanner.NewStatement("INSERT INTO Singers (SingerId, Name) VALUES (1, 'a'), (2, 'b') THEN RETURN Name"))
		err := it.Do(func(r *spanner.Row) error {
			var n string
			if err := r.Columns(&n); err != nil {
				return err
			}
			names = append(names, n)
			return nil
		})
		if err != nil {
			return err
		}
		if it.RowCount != 2 {
			t.Errorf("THEN RETURN row count = %d, want 2", it.RowCount)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("ReadWriteTransaction: %v", err)
	}
	slices.Sort(names)
	if diff := cmp.Diff([]string{"a", "b"}, names); diff != "" {
		t.Errorf("returned names (-want +got):\n%s", diff)
	}
}
