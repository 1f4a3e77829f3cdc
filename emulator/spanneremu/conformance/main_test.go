package conformance

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"math"
	"math/big"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/civil"
	"cloud.google.com/go/spanner"
	database "cloud.google.com/go/spanner/admin/database/apiv1"
	"cloud.google.com/go/spanner/admin/database/apiv1/databasepb"
	instance "cloud.google.com/go/spanner/admin/instance/apiv1"
	"cloud.google.com/go/spanner/admin/instance/apiv1/instancepb"
	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/spanmart/spanmart/emulator/spanneremu"
)

const (
	projectID    = "conformance"
	instanceID   = "test"
	instanceName = "projects/" + projectID + "/instances/" + instanceID
)

var (
	// external is true when the suite runs against SPANNER_EMULATOR_HOST rather than an
	// in-process spanneremu.
	external bool
	// emu is the in-process spanneremu (nil when external), for the few assertions about its
	// own counters.
	emu *spanneremu.Server

	instanceAdmin *instance.InstanceAdminClient
	databaseAdmin *database.DatabaseAdminClient
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	ctx := context.Background()
	if host := os.Getenv("SPANNER_EMULATOR_HOST"); host != "" {
		external = true
		log.Printf("conformance: running against SPANNER_EMULATOR_HOST=%s", host)
	} else {
		srv, err := spanneremu.Start(ctx, spanneremu.Options{})
		if err != nil {
			log.Printf("conformance: start emulator: %v", err)
			return 1
		}
		defer srv.Close()
		emu = srv
		// The official clients read this variable at construction: it switches them to
		// plaintext gRPC without credentials.
		os.Setenv("SPANNER_EMULATOR_HOST", srv.Addr())
	}

	var err error
	instanceAdmin, err = instance.NewInstanceAdminClient(ctx)
	if err != nil {
		log.Printf("conformance: instance admin client: %v", err)
		return 1
	}
	defer instanceAdmin.Close()
	databaseAdmin, err = database.NewDatabaseAdminClient(ctx)
	if err != nil {
		log.Printf("conformance: database admin client: %v", err)
		return 1
	}
	defer databaseAdmin.Close()

	if err := createInstance(ctx, instanceAdmin); err != nil {
		log.Printf("conformance: %v", err)
		return 1
	}
	defer func() {
		if err := instanceAdmin.DeleteInstance(ctx, &instancepb.DeleteInstanceRequest{Name: instanceName}); err != nil {
			log.Printf("conformance: delete instance: %v", err)
		}
	}()
	return m.Run()
}

// createInstance creates the suite's instance on the first config the endpoint lists, as the
// client library's own integration tests do, so the suite needs no knowledge of config names.
func createInstance(ctx context.Context, instanceAdmin *instance.InstanceAdminClient) error {
	it := instanceAdmin.ListInstanceConfigs(ctx, &instancepb.ListInstanceConfigsRequest{Parent: "projects/" + projectID})
	cfg, err := it.Next()
	if err != nil {
		return fmt.Errorf("list instance configs: %w", err)
	}
	op, err := instanceAdmin.CreateInstance(ctx, &instancepb.CreateInstanceRequest{
		Parent:     "projects/" + projectID,
		InstanceId: instanceID,
		Instance: &instancepb.Instance{
			Config:      cfg.Name,
			DisplayName: "conformance",
			NodeCount:   1,
		},
	})
	if err == nil {
		_, err = op.Wait(ctx)
	}
	// A previous run against a long-lived endpoint may have left the instance behind.
	if err != nil && spanner.ErrCode(err) != codes.AlreadyExists {
		return fmt.Errorf("create instance: %w", err)
	}
	return nil
}

// testCtx returns a context that ends with the test, bounded so a hung server fails the test
// instead of the whole run.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newDatabaseID returns an id matching [a-z][a-z0-9_-]*[a-z0-9], 2-30 characters.
func newDatabaseID() string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return "t" + hex.EncodeToString(b)
}

// newDBNamed creates a fresh database with the given DDL and returns its name and a client for
// it; both are dropped when the test ends.
func newDBNamed(t *testing.T, ddl ...string) (string, *spanner.Client) {
	t.Helper()
	ctx := testCtx(t)
	id := newDatabaseID()
	op, err := databaseAdmin.CreateDatabase(ctx, &databasepb.CreateDatabaseRequest{
		Parent:          instanceName,
		CreateStatement: "CREATE DATABASE `" + id + "`",
		ExtraStatements: ddl,
	})
	if err != nil {
		t.Fatalf("CreateDatabase: %v", err)
	}
	db, err := op.Wait(ctx)
	if err != nil {
		t.Fatalf("CreateDatabase wait: %v", err)
	}
	name := instanceName + "/databases/" + id
	if db.GetName() != name {
		t.Errorf("CreateDatabase returned name %q, want %q", db.GetName(), name)
	}
	// Registered before the client so that it runs after the client is closed (cleanups run
	// last-in first-out).
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := databaseAdmin.DropDatabase(ctx, &databasepb.DropDatabaseRequest{Database: name}); err != nil {
			t.Logf("DropDatabase %s: %v", name, err)
		}
	})
	client := newClient(t, name)
	return name, client
}

// newDB creates a fresh database with the given DDL; see newDBNamed.
func newDB(t *testing.T, ddl ...string) *spanner.Client {
	t.Helper()
	_, client := newDBNamed(t, ddl...)
	return client
}

// newClient opens a data client on an existing database, closed when the test ends.
func newClient(t *testing.T, name string) *spanner.Client {
	t.Helper()
	client, err := spanner.NewClientWithConfig(testCtx(t), name, spanner.ClientConfig{DisableNativeMetrics: true})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(client.Close)
	return client
}

// mustApply applies mutations and fails the test on error.
func mustApply(t *testing.T, client *spanner.Client, ms ...*spanner.Mutation) time.Time {
	t.Helper()
	ts, err := client.Apply(testCtx(t), ms)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return ts
}

// mustUpdate runs DML statements in one read-write transaction.
func mustUpdate(t *testing.T, client *spanner.Client, sql ...string) {
	t.Helper()
	_, err := client.ReadWriteTransaction(testCtx(t), func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
		for _, s := range sql {
			if _, err := tx.Update(ctx, spanner.NewStatement(s)); err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
}

// checkErr asserts err carries the gRPC code (as spanner.ErrCode reports it) and that its
// message contains every part.
func checkErr(t *testing.T, err error, code codes.Code, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", code)
	}
	if got := spanner.ErrCode(err); got != code {
		t.Errorf("error code = %v, want %v (error: %v)", got, code, err)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not contain %q", err.Error(), p)
		}
	}
}

// querier is what single-use, read-only and read-write transactions have in common.
type querier interface {
	Query(ctx context.Context, stmt spanner.Statement) *spanner.RowIterator
}

// result is a query result decoded into plain Go values (see decode) plus its column types.
type result struct {
	Types []string
	Rows  [][]any
}

// query runs stmt and decodes every row; it fails the test on error.
func query(t *testing.T, q querier, stmt spanner.Statement) result {
	t.Helper()
	res, err := tryQuery(testCtx(t), q, stmt)
	if err != nil {
		t.Fatalf("query %q: %v", stmt.SQL, err)
	}
	return res
}

// tryQuery runs stmt and decodes every row.
func tryQuery(ctx context.Context, q querier, stmt spanner.Statement) (result, error) {
	iter := q.Query(ctx, stmt)
	defer iter.Stop()
	return collect(iter)
}

// collect drains a row iterator into a result.
func collect(iter *spanner.RowIterator) (result, error) {
	var res result
	for {
		row, err := iter.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return res, err
		}
		var vals []any
		for i := 0; i < row.Size(); i++ {
			var gcv spanner.GenericColumnValue
			if err := row.Column(i, &gcv); err != nil {
				return res, err
			}
			vals = append(vals, decode(gcv.Type, gcv.Value))
		}
		res.Rows = append(res.Rows, vals)
	}
	if iter.Metadata != nil {
		for _, f := range iter.Metadata.GetRowType().GetFields() {
			res.Types = append(res.Types, typeString(f.GetType()))
		}
	}
	return res, nil
}

// decode turns a wire value into a plain Go value so tests can state expectations literally:
// NULL → nil, BOOL → bool, INT64 → int64, FLOAT64 → float64, STRING/NUMERIC/JSON → string (as
// sent on the wire), BYTES → []byte, DATE → civil.Date, TIMESTAMP → time.Time, ARRAY and
// STRUCT → []any.
func decode(t *sppb.Type, v *structpb.Value) any {
	if _, ok := v.GetKind().(*structpb.Value_NullValue); ok {
		return nil
	}
	switch t.GetCode() {
	case sppb.TypeCode_BOOL:
		return v.GetBoolValue()
	case sppb.TypeCode_INT64, sppb.TypeCode_ENUM:
		n, err := strconv.ParseInt(v.GetStringValue(), 10, 64)
		if err != nil {
			return fmt.Sprintf("bad INT64 %v", v)
		}
		return n
	case sppb.TypeCode_FLOAT64, sppb.TypeCode_FLOAT32:
		if s, ok := v.GetKind().(*structpb.Value_StringValue); ok {
			switch s.StringValue {
			case "NaN":
				return math.NaN()
			case "Infinity":
				return math.Inf(1)
			case "-Infinity":
				return math.Inf(-1)
			}
			return fmt.Sprintf("bad FLOAT64 %v", v)
		}
		return v.GetNumberValue()
	case sppb.TypeCode_BYTES, sppb.TypeCode_PROTO:
		b, err := base64.StdEncoding.DecodeString(v.GetStringValue())
		if err != nil {
			return fmt.Sprintf("bad BYTES %v", v)
		}
		return b
	case sppb.TypeCode_DATE:
		d, err := civil.ParseDate(v.GetStringValue())
		if err != nil {
			return fmt.Sprintf("bad DATE %v", v)
		}
		return d
	case sppb.TypeCode_TIMESTAMP:
		ts, err := time.Parse(time.RFC3339Nano, v.GetStringValue())
		if err != nil {
			return fmt.Sprintf("bad TIMESTAMP %v", v)
		}
		return ts.UTC()
	case sppb.TypeCode_ARRAY:
		out := []any{}
		for _, e := range v.GetListValue().GetValues() {
			out = append(out, decode(t.GetArrayElementType(), e))
		}
		return out
	case sppb.TypeCode_STRUCT:
		out := []any{}
		fields := t.GetStructType().GetFields()
		for i, e := range v.GetListValue().GetValues() {
			if i < len(fields) {
				out = append(out, decode(fields[i].GetType(), e))
			}
		}
		return out
	default:
		return v.GetStringValue()
	}
}

// typeString renders a type in GoogleSQL syntax: INT64, ARRAY<STRING>, STRUCT<a INT64, STRING>.
func typeString(t *sppb.Type) string {
	switch t.GetCode() {
	case sppb.TypeCode_ARRAY:
		return "ARRAY<" + typeString(t.GetArrayElementType()) + ">"
	case sppb.TypeCode_STRUCT:
		var fs []string
		for _, f := range t.GetStructType().GetFields() {
			s := typeString(f.GetType())
			if f.GetName() != "" {
				s = f.GetName() + " " + s
			}
			fs = append(fs, s)
		}
		return "STRUCT<" + strings.Join(fs, ", ") + ">"
	default:
		return t.GetCode().String()
	}
}

// cmpOpts compares decoded values: NaN equals NaN, big.Rat by value, times by instant.
var cmpOpts = []cmp.Option{
	cmpopts.EquateNaNs(),
	cmp.Comparer(func(a, b *big.Rat) bool {
		if a == nil || b == nil {
			return a == b
		}
		return a.Cmp(b) == 0
	}),
	cmp.Comparer(func(a, b big.Rat) bool { return a.Cmp(&b) == 0 }),
	cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }),
}

// readAll reads every row of table in key order, decoded like query results.
func readAll(t *testing.T, client *spanner.Client, table string, cols ...string) [][]any {
	t.Helper()
	iter := client.Single().Read(testCtx(t), table, spanner.AllKeys(), cols)
	defer iter.Stop()
	res, err := collect(iter)
	if err != nil {
		t.Fatalf("read %s: %v", table, err)
	}
	return res.Rows
}

// rows is shorthand for a literal result.
func rows(rs ...[]any) [][]any { return rs }

// row is shorthand for one literal row.
func row(vs ...any) []any { return vs }

// ts parses an RFC 3339 timestamp for expectations.
func ts(s string) time.Time {
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return v
}

// date parses a civil date for expectations.
func date(s string) civil.Date {
	d, err := civil.ParseDate(s)
	if err != nil {
		panic(err)
	}
	return d
}

// eventually polls cond until it returns true or the deadline passes; cond's last error is
// reported. It exists because some effects (stale reads, sweeps, lock timeouts) are
// asynchronous by design, and sleeping a fixed time would make tests both slow and flaky.
func eventually(t *testing.T, timeout time.Duration, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var lastErr error
	for {
		ok, err := cond()
		if ok {
			return
		}
		lastErr = err
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v (last error: %v)", timeout, lastErr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
