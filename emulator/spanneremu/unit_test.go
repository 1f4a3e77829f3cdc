package spanneremu

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestPage(t *testing.T) {
	type bounds struct {
		Start, End int
		Next       string
	}
	tests := []struct {
		name     string
		n        int
		pageSize int32
		token    string
		want     bounds
	}{
		{"no page size", 5, 0, "", bounds{0, 5, ""}},
		{"first page", 5, 2, "", bounds{0, 2, "2"}},
		{"middle page", 5, 2, "2", bounds{2, 4, "4"}},
		{"last page", 5, 2, "4", bounds{4, 5, ""}},
		{"exact fit", 4, 2, "2", bounds{2, 4, ""}},
		{"token past end", 3, 2, "7", bounds{3, 3, ""}},
		{"empty", 0, 10, "", bounds{0, 0, ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start, end, next, err := page(tc.n, tc.pageSize, tc.token)
			if err != nil {
				t.Fatalf("page: %v", err)
			}
			if diff := cmp.Diff(tc.want, bounds{start, end, next}); diff != "" {
				t.Errorf("page(%d, %d, %q) (-want +got):\n%s", tc.n, tc.pageSize, tc.token, diff)
			}
		})
	}
	if _, _, _, err := page(3, 1, "x"); status.Code(err) != codes.InvalidArgument {
		t.Errorf("page with a bad token: err = %v, want INVALID_ARGUMENT", err)
	}
}

func TestGrpcError(t *testing.T) {
	tests := []struct {
		name          string
		err           error
		wantCode      codes.Code
		wantRetryInfo bool
	}{
		{"status passes through", status.Error(codes.AlreadyExists, "Table T: Row [1] already exists."), codes.AlreadyExists, false},
		{"aborted gets retry info", status.Error(codes.Aborted, "Transaction was aborted."), codes.Aborted, true},
		{"plain error is internal", errors.New("boom"), codes.Internal, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := status.Convert(grpcError(tc.err))
			if st.Code() != tc.wantCode {
				t.Errorf("code = %v, want %v", st.Code(), tc.wantCode)
			}
			if got := hasRetryInfo(st); got != tc.wantRetryInfo {
				t.Errorf("has RetryInfo = %v, want %v", got, tc.wantRetryInfo)
			}
			if st.Message() != status.Convert(tc.err).Message() {
				t.Errorf("message = %q, want it unchanged (%q)", st.Message(), status.Convert(tc.err).Message())
			}
		})
	}
}

func TestSessionNotFoundDetail(t *testing.T) {
	name := "projects/p/instances/i/databases/d/sessions/s"
	st := status.Convert(sessionNotFound(name))
	want := []any{&errdetails.ResourceInfo{ResourceType: "type.googleapis.com/google.spanner.v1.Session", ResourceName: name}}
	if diff := cmp.Diff(want, st.Details(), protocmp.Transform()); diff != "" {
		t.Errorf("details (-want +got):\n%s", diff)
	}
	if got, want := st.Message(), "Session not found: "+name; got != want {
		t.Errorf("message = %q, want %q", got, want)
	}
}

func TestStreamOutcome(t *testing.T) {
	row := func(i int) []*structpb.Value {
		return []*structpb.Value{structpb.NewStringValue(itoa(int64(i))), structpb.NewNullValue()}
	}
	md := &sppb.ResultSetMetadata{RowType: &sppb.StructType{}}
	stats := &sppb.ResultSetStats{RowCount: &sppb.ResultSetStats_RowCountExact{RowCountExact: 3}}
	token := &sppb.MultiplexedSessionPrecommitToken{PrecommitToken: []byte("t"), SeqNum: 7}

	tests := []struct {
		name string
		rows int
		// wantValues is the number of values in each message.
		wantValues []int
	}{
		{"no rows", 0, []int{0}},
		{"one message", 3, []int{6}},
		{"split at the value limit, rows kept whole", 1001, []int{1000, 1000, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := &outcome{metadata: md, stats: stats, token: token}
			for i := range tc.rows {
				o.rows = append(o.rows, row(i))
			}
			var msgs []*sppb.PartialResultSet
			err := streamOutcome(o, func(m *sppb.PartialResultSet) error {
				msgs = append(msgs, m)
				return nil
			})
			if err != nil {
				t.Fatalf("streamOutcome: %v", err)
			}
			var gotValues []int
			var all []*structpb.Value
			for i, m := range msgs {
				gotValues = append(gotValues, len(m.Values))
				all = append(all, m.Values...)
				first, last := i == 0, i == len(msgs)-1
				if (m.Metadata != nil) != first {
					t.Errorf("message %d has metadata = %v, want %v", i, m.Metadata != nil, first)
				}
				if (m.Stats != nil) != last || (m.PrecommitToken != nil) != last || m.Last != last {
					t.Errorf("message %d: stats %v, token %v, last %v; want all %v", i, m.Stats != nil, m.PrecommitToken != nil, m.Last, last)
				}
			}
			if diff := cmp.Diff(tc.wantValues, gotValues); diff != "" {
				t.Errorf("values per message (-want +got):\n%s", diff)
			}
			var want []*structpb.Value
			for _, r := range o.rows {
				want = append(want, r...)
			}
			if diff := cmp.Diff(want, all, protocmp.Transform()); diff != "" {
				t.Errorf("streamed values (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOperationStoreBound(t *testing.T) {
	st := newOperationStore(3)
	var names []string
	for range 5 {
		op, err := st.finish("projects/p/instances/i", "", nil, nil, nil)
		if err != nil {
			t.Fatalf("finish: %v", err)
		}
		names = append(names, op.Name)
	}
	for i, name := range names {
		_, err := st.get(name)
		if kept := i >= 2; kept != (err == nil) {
			t.Errorf("operation %d kept = %v, want %v (err %v)", i, err == nil, kept, err)
		}
	}
	if _, err := st.finish("projects/p/instances/i", "fixed", nil, nil, nil); err != nil {
		t.Fatalf("finish with id: %v", err)
	}
	if _, err := st.finish("projects/p/instances/i", "fixed", nil, nil, nil); status.Code(err) != codes.AlreadyExists {
		t.Errorf("finish with a used id: err = %v, want ALREADY_EXISTS", err)
	}
}

func TestNames(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"projects/p/instances/ab", true},
		{"projects/p/instances/a-b-9", true},
		{"projects/p/instances/a", false},
		{"projects/p/instances/9a", false},
		{"projects/p/instances/ab-", false},
		{"projects/p/instances/AB", false},
		{"projects/p/instances/ab/x", false},
		{"projects//instances/ab", false},
	}
	for _, tc := range tests {
		if _, err := checkInstanceName(tc.name); (err == nil) != tc.ok {
			t.Errorf("checkInstanceName(%q) = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
	if got, err := splitDatabaseName("projects/p/instances/ab/databases/my_db-1"); err != nil || got != "projects/p/instances/ab" {
		t.Errorf("splitDatabaseName = %q, %v", got, err)
	}
	if _, err := splitDatabaseName("projects/p/instances/ab/databases/" + strings.Repeat("a", 31)); err == nil {
		t.Error("splitDatabaseName accepted a 31-character id")
	}
}

// splitSessionName accepts exactly the names Spanner's pattern does, and returns the database.
func TestSplitSessionName(t *testing.T) {
	pattern := regexp.MustCompile(`^(projects/[^/]+/instances/[^/]+/databases/[^/]+)/sessions/([^/]+)$`)
	for _, name := range []string{
		"projects/p/instances/i/databases/d/sessions/s",
		"projects/sessions/instances/sessions/databases/sessions/sessions/sessions",
		"projects/p/instances/i/databases/d/sessions/s/sessions/t",
		"projects/p/instances/i/databases/d/sessions/",
		"projects/p/instances/i/databases/d/sessions",
		"projects/p/instances/i/databases//sessions/s",
		"projects//instances/i/databases/d/sessions/s",
		"projects/p/instances/i/databases/d/x/sessions/s",
		"project/p/instances/i/databases/d/sessions/s",
		"projects/p/instance/i/databases/d/sessions/s",
		"projects/p/instances/i/database/d/sessions/s",
		"/projects/p/instances/i/databases/d/sessions/s",
		"projects/p/instances/i/databases/d/sessions/s/",
		"",
	} {
		m := pattern.FindStringSubmatch(name)
		db, err := splitSessionName(name)
		switch {
		case m == nil && status.Code(err) != codes.InvalidArgument:
			t.Errorf("%q: %q, %v; want INVALID_ARGUMENT", name, db, err)
		case m != nil && (err != nil || db != m[1]):
			t.Errorf("%q: %q, %v; want %q", name, db, err, m[1])
		}
	}
}
