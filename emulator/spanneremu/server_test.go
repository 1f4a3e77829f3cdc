package spanneremu

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	databasepb "cloud.google.com/go/spanner/admin/database/apiv1/databasepb"
	instancepb "cloud.google.com/go/spanner/admin/instance/apiv1/instancepb"
	"github.com/google/go-cmp/cmp"
	pprofile "github.com/google/pprof/profile"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

func TestCloseIsIdempotent(t *testing.T) {
	srv, err := Start(testContext(t), Options{})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	for i := range 2 {
		if err := srv.Close(); err != nil {
			t.Errorf("Close #%d: %v", i+1, err)
		}
	}
}

func TestUnknownRPCIsUnimplemented(t *testing.T) {
	ctx := testContext(t)
	da := newDatabaseAdmin(t, testServer.Addr())
	_, err := da.GetBackup(ctx, &databasepb.GetBackupRequest{Name: "projects/p/instances/i/backups/b"})
	if got, want := status.Code(err), codes.Unimplemented; got != want {
		t.Errorf("GetBackup code = %v, want %v (err %v)", got, want, err)
	}
}

func TestHealth(t *testing.T) {
	conn, err := grpc.NewClient("passthrough:///"+testServer.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(testContext(t), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if got, want := resp.Status, healthpb.HealthCheckResponse_SERVING; got != want {
		t.Errorf("health status = %v, want %v", got, want)
	}
}

// TestDataDirKeepsInstancesAndDatabases restarts an emulator on the same data directory.
func TestDataDirKeepsInstancesAndDatabases(t *testing.T) {
	ctx := testContext(t)
	dir := t.TempDir()
	first, err := Start(ctx, Options{DataDir: dir})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	inst := createInstance(t, first.Addr())
	da := newDatabaseAdmin(t, first.Addr())
	op, err := da.CreateDatabase(ctx, &databasepb.CreateDatabaseRequest{
		Parent:          inst,
		CreateStatement: "CREATE DATABASE kept",
		ExtraStatements: []string{"CREATE TABLE T (Id INT64 NOT NULL) PRIMARY KEY (Id)"},
	})
	if err != nil {
		t.Fatalf("CreateDatabase: %v", err)
	}
	if _, err := op.Wait(ctx); err != nil {
		t.Fatalf("CreateDatabase op.Wait: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	second, err := Start(ctx, Options{DataDir: dir})
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	defer second.Close()
	in, err := newInstanceAdmin(t, second.Addr()).GetInstance(ctx, &instancepb.GetInstanceRequest{Name: inst})
	if err != nil {
		t.Fatalf("GetInstance after restart: %v", err)
	}
	if in.State != instancepb.Instance_READY {
		t.Errorf("instance state after restart = %v, want READY", in.State)
	}
	resp, err := newDatabaseAdmin(t, second.Addr()).GetDatabaseDdl(ctx, &databasepb.GetDatabaseDdlRequest{Database: inst + "/databases/kept"})
	if err != nil {
		t.Fatalf("GetDatabaseDdl after restart: %v", err)
	}
	if len(resp.Statements) != 1 {
		t.Errorf("DDL after restart = %q, want the one CREATE TABLE", resp.Statements)
	}
	if _, err := os.Stat(filepath.Join(dir, instancesFile)); err != nil {
		t.Errorf("instances file: %v", err)
	}
}

// TestCommandReadyLine builds the binary, waits for its ready line and stops it with SIGTERM.
func TestCommandReadyLine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	ctx := testContext(t)
	bin := filepath.Join(t.TempDir(), "spanneremu")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/spanneremu")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	cmd := exec.CommandContext(ctx, bin, "-host", "127.0.0.1", "-port", "0", "-data-dir", t.TempDir())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()

	var line string
	select {
	case line = <-lines:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("no ready line within 30s")
	}
	m := regexp.MustCompile(`^spanneremu: ready on (127\.0\.0\.1:\d+)$`).FindStringSubmatch(line)
	if m == nil {
		cmd.Process.Kill()
		t.Fatalf("ready line = %q, want \"spanneremu: ready on 127.0.0.1:PORT\"", line)
	}

	// The address must serve the admin API.
	ia := newInstanceAdmin(t, m[1])
	if _, err := ia.GetInstanceConfig(ctx, &instancepb.GetInstanceConfigRequest{Name: instanceConfigName("p")}); err != nil {
		t.Errorf("GetInstanceConfig on the binary: %v", err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }()
	select {
	case err := <-waitErr:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v, want a clean exit", err)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("binary did not exit within 30s of SIGTERM")
	}
}

// TestStatsCountRPCs: Stats counts the data API's requests by database and method, unary and
// streaming alike, as the official client sends them.
func TestStatsCountRPCs(t *testing.T) {
	ctx := testContext(t)
	id := uniqueID("rpcs")
	db := createDatabaseIn(t, createInstance(t, testServer.Addr()), id, `CREATE TABLE T (K INT64 NOT NULL, V STRING(MAX)) PRIMARY KEY (K)`)
	client := newDataClient(t, db)
	if _, err := client.Apply(ctx, []*spanner.Mutation{spanner.Insert("T", []string{"K", "V"}, []any{1, "a"})}); err != nil {
		t.Fatal(err)
	}
	before := testServer.Stats().ByDatabase[id].RPCs
	_, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		if _, err := txn.ReadRow(ctx, "T", spanner.Key{1}, []string{"V"}); err != nil {
			return err
		}
		if _, err := txn.Query(ctx, spanner.NewStatement("SELECT V FROM T")).Next(); err != nil {
			return err
		}
		return txn.BufferWrite([]*spanner.Mutation{spanner.Update("T", []string{"K", "V"}, []any{1, "b"})})
	})
	if err != nil {
		t.Fatal(err)
	}
	after := testServer.Stats().ByDatabase[id].RPCs
	got := map[string]int64{}
	for method, n := range after {
		if d := n - before[method]; d != 0 {
			got[method] = d
		}
	}
	want := map[string]int64{"StreamingRead(T)": 1, "ExecuteStreamingSql": 1, "Commit": 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("RPCs of one read-write transaction (-want +got):\n%s", diff)
	}
}

// TestStatsCountStatements: with CountStatements, Stats counts the same requests by statement too:
// a query or DML by its SQL, white space collapsed; a batch by its statements; a commit by the
// tables its mutations write and how; a read by its table and index. Without it (the shared test
// server) there are no counts by statement.
func TestStatsCountStatements(t *testing.T) {
	ctx := testContext(t)
	srv, client := countingServer(t)
	if _, err := client.Apply(ctx, []*spanner.Mutation{spanner.Insert("T", []string{"K", "V"}, []any{1, "a"})}); err != nil {
		t.Fatal(err)
	}
	before := srv.Stats().ByDatabase["stmts"].Statements
	_, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		if _, err := txn.ReadRow(ctx, "T", spanner.Key{1}, []string{"V"}); err != nil {
			return err
		}
		if _, err := txn.ReadRowUsingIndex(ctx, "T", "TByV", spanner.Key{"a"}, []string{"V"}); err != nil {
			return err
		}
		if _, err := txn.Query(ctx, spanner.NewStatement("SELECT  V\n  FROM T")).Next(); err != nil {
			return err
		}
		if _, err := txn.BatchUpdate(ctx, []spanner.Statement{
			spanner.NewStatement("UPDATE T SET V = 'b' WHERE K = 1"), spanner.NewStatement("INSERT INTO T (K, V) VALUES (2, 'c')"),
		}); err != nil {
			return err
		}
		return txn.BufferWrite([]*spanner.Mutation{
			spanner.Update("T", []string{"K", "V"}, []any{1, "d"}), spanner.Insert("T", []string{"K", "V"}, []any{3, "e"}),
			spanner.Insert("T", []string{"K", "V"}, []any{4, "f"}),
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for stmt, n := range srv.Stats().ByDatabase["stmts"].Statements {
		if d := n - before[stmt]; d != 0 {
			got[stmt] = d
		}
	}
	want := map[string]int64{
		"StreamingRead(T)":                     1,
		"StreamingRead(T)@TByV":                1,
		"ExecuteStreamingSql: SELECT V FROM T": 1,
		"ExecuteBatchDml: UPDATE T SET V = 'b' WHERE K = 1; INSERT INTO T (K, V) VALUES (2, 'c')": 1,
		"Commit: insert T, update T": 1,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("statements of one read-write transaction (-want +got):\n%s", diff)
	}
	if got := testServer.rpcs.byStatement(); got != nil {
		t.Errorf("a server without CountStatements counts by statement: %v", got)
	}
}

// countingServer starts a server with CountStatements and a database "stmts" of a table T (K,
// V) with an index TByV, and returns it with a client of that database.
func countingServer(t *testing.T) (*Server, *spanner.Client) {
	t.Helper()
	ctx := testContext(t)
	srv, err := Start(ctx, Options{CountStatements: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	inst := createInstance(t, srv.Addr())
	op, err := newDatabaseAdmin(t, srv.Addr()).CreateDatabase(ctx, &databasepb.CreateDatabaseRequest{
		Parent: inst, CreateStatement: "CREATE DATABASE stmts",
		ExtraStatements: []string{`CREATE TABLE T (K INT64 NOT NULL, V STRING(MAX)) PRIMARY KEY (K)`, `CREATE INDEX TByV ON T (V)`},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := op.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	client, err := spanner.NewClient(ctx, inst+"/databases/stmts", clientOptions(srv.Addr())...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return srv, client
}

// TestStatementLabels: with CountStatements, the CPU a request's work takes carries its database
// and statement as profile labels, the same statement text as the counts, in streaming and unary
// requests alike: a profile of the process says what each statement costs.
func TestStatementLabels(t *testing.T) {
	ctx := testContext(t)
	srv, client := countingServer(t)
	var rows []*spanner.Mutation
	for k := range 150 {
		rows = append(rows, spanner.Insert("T", []string{"K", "V"}, []any{k, fmt.Sprint(k)}))
	}
	if _, err := client.Apply(ctx, rows); err != nil {
		t.Fatal(err)
	}
	// A query (a stream) and a DML statement (unary), each with its work in the emulator: a join
	// of 150 rows three times.
	const join = "SELECT COUNT(*) FROM T AS a JOIN T AS b ON a.V < b.V JOIN T AS c ON b.V < c.V"
	const dml = "UPDATE T SET V = V WHERE K = (" + join + ")"
	var profile bytes.Buffer
	if err := pprof.StartCPUProfile(&profile); err != nil {
		t.Fatalf("a CPU profile of the test process: %v", err)
	}
	for range 10 {
		var n int64
		if err := client.Single().Query(ctx, spanner.NewStatement(join)).Do(func(r *spanner.Row) error { return r.Column(0, &n) }); err != nil {
			pprof.StopCPUProfile()
			t.Fatal(err)
		}
		if _, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
			_, err := txn.Update(ctx, spanner.NewStatement(dml))
			return err
		}); err != nil {
			pprof.StopCPUProfile()
			t.Fatal(err)
		}
	}
	pprof.StopCPUProfile()
	p, err := pprofile.Parse(&profile)
	if err != nil {
		t.Fatal(err)
	}
	byStatement := map[string]int{}
	for _, s := range p.Sample {
		db, stmt := s.Label[DatabaseLabel], s.Label[StatementLabel]
		if len(db) != len(stmt) {
			t.Fatalf("a sample labelled %v: a statement comes with its database", s.Label)
		}
		if len(stmt) == 1 {
			byStatement[db[0]+": "+stmt[0]]++
		}
	}
	counted := srv.Stats().ByDatabase["stmts"].Statements
	for _, stmt := range []string{"ExecuteStreamingSql: " + join, "ExecuteSql: " + dml} {
		if byStatement["stmts: "+stmt] == 0 || counted[stmt] != 10 {
			t.Errorf("%s: %d samples labelled (want some), counted %d times (want 10); samples by label: %v", stmt, byStatement["stmts: "+stmt], counted[stmt], byStatement)
		}
	}
	for label := range byStatement {
		stmt, _ := strings.CutPrefix(label, "stmts: ")
		if counted[stmt] == 0 {
			t.Errorf("samples labelled %q, a statement never counted (counted: %v)", label, counted)
		}
	}
}
