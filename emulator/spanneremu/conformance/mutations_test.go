package conformance

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
)

var mutationSchema = []string{
	`CREATE TABLE Accounts (
		Id INT64 NOT NULL,
		Name STRING(10) NOT NULL,
		Balance INT64,
		Ts TIMESTAMP OPTIONS (allow_commit_timestamp = true),
		Tag BYTES(4),
		Codes ARRAY<STRING(3)>,
		CONSTRAINT BalanceNonNegative CHECK (Balance >= 0),
	) PRIMARY KEY (Id)`,
	`CREATE UNIQUE INDEX AccountsByName ON Accounts(Name)`,
	`CREATE TABLE Parents (PId INT64 NOT NULL, V STRING(MAX)) PRIMARY KEY (PId)`,
	`CREATE TABLE Children (PId INT64 NOT NULL, CId INT64 NOT NULL, V STRING(MAX)) PRIMARY KEY (PId, CId),
		INTERLEAVE IN PARENT Parents ON DELETE CASCADE`,
	`CREATE TABLE Parents2 (PId INT64 NOT NULL) PRIMARY KEY (PId)`,
	`CREATE TABLE Children2 (PId INT64 NOT NULL, CId INT64 NOT NULL) PRIMARY KEY (PId, CId),
		INTERLEAVE IN PARENT Parents2 ON DELETE NO ACTION`,
	`CREATE TABLE Refs (Id INT64 NOT NULL, PId INT64,
		CONSTRAINT FK_RefsParents FOREIGN KEY (PId) REFERENCES Parents (PId),
	) PRIMARY KEY (Id)`,
}

var accountCols = []string{"Id", "Name", "Balance"}

func acct(id int64, name string, balance any) *spanner.Mutation {
	return spanner.Insert("Accounts", accountCols, []any{id, name, balance})
}

func TestMutations(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup []*spanner.Mutation
		apply []*spanner.Mutation
		// wantCode is the error of applying apply; OK means success.
		wantCode codes.Code
		wantMsg  []string
		// table and want describe the table's full content (key order) afterwards.
		table string
		cols  []string
		want  [][]any
	}{
		{
			name:  "insert",
			apply: []*spanner.Mutation{acct(2, "b", 20), acct(1, "a", nil)},
			table: "Accounts", cols: accountCols,
			want: rows(row(int64(1), "a", nil), row(int64(2), "b", int64(20))),
		},
		{
			name:  "update changes only named columns",
			setup: []*spanner.Mutation{acct(1, "a", 10)},
			apply: []*spanner.Mutation{spanner.Update("Accounts", []string{"Id", "Balance"}, []any{1, 11})},
			table: "Accounts", cols: accountCols,
			want: rows(row(int64(1), "a", int64(11))),
		},
		{
			name:  "insert or update",
			setup: []*spanner.Mutation{acct(1, "a", 10)},
			apply: []*spanner.Mutation{
				spanner.InsertOrUpdate("Accounts", []string{"Id", "Balance"}, []any{1, 12}),
				spanner.InsertOrUpdate("Accounts", accountCols, []any{2, "b", 2}),
			},
			table: "Accounts", cols: accountCols,
			want: rows(row(int64(1), "a", int64(12)), row(int64(2), "b", int64(2))),
		},
		{
			name:  "replace nulls unnamed columns",
			setup: []*spanner.Mutation{acct(1, "a", 10)},
			apply: []*spanner.Mutation{spanner.Replace("Accounts", []string{"Id", "Name"}, []any{1, "z"})},
			table: "Accounts", cols: accountCols,
			want: rows(row(int64(1), "z", nil)),
		},
		{
			name:  "mutations apply in order",
			apply: []*spanner.Mutation{acct(1, "a", 1), spanner.Update("Accounts", []string{"Id", "Balance"}, []any{1, 2}), spanner.Delete("Accounts", spanner.Key{1}), acct(1, "c", 3)},
			table: "Accounts", cols: accountCols,
			want: rows(row(int64(1), "c", int64(3))),
		},
		{
			name:  "delete keys",
			setup: []*spanner.Mutation{acct(1, "a", 1), acct(2, "b", 2), acct(3, "c", 3)},
			apply: []*spanner.Mutation{spanner.Delete("Accounts", spanner.KeySets(spanner.Key{1}, spanner.Key{3}, spanner.Key{99}))},
			table: "Accounts", cols: accountCols,
			want: rows(row(int64(2), "b", int64(2))),
		},
		{
			name:  "delete range",
			setup: []*spanner.Mutation{acct(1, "a", 1), acct(2, "b", 2), acct(3, "c", 3), acct(4, "d", 4)},
			apply: []*spanner.Mutation{spanner.Delete("Accounts", spanner.KeyRange{Start: spanner.Key{2}, End: spanner.Key{4}, Kind: spanner.ClosedOpen})},
			table: "Accounts", cols: accountCols,
			want: rows(row(int64(1), "a", int64(1)), row(int64(4), "d", int64(4))),
		},
		{
			name:  "delete all",
			setup: []*spanner.Mutation{acct(1, "a", 1), acct(2, "b", 2)},
			apply: []*spanner.Mutation{spanner.Delete("Accounts", spanner.AllKeys())},
			table: "Accounts", cols: accountCols,
			want: nil,
		},
		{
			name:  "delete missing key is no error",
			apply: []*spanner.Mutation{spanner.Delete("Accounts", spanner.Key{42})},
			table: "Accounts", cols: accountCols,
			want: nil,
		},
		{
			name:     "duplicate insert",
			setup:    []*spanner.Mutation{acct(1, "a", 1)},
			apply:    []*spanner.Mutation{acct(1, "b", 2)},
			wantCode: codes.AlreadyExists, wantMsg: []string{"Accounts", "already exists"},
			table: "Accounts", cols: accountCols,
			want: rows(row(int64(1), "a", int64(1))),
		},
		{
			name:     "failed batch applies nothing",
			setup:    []*spanner.Mutation{acct(1, "a", 1)},
			apply:    []*spanner.Mutation{acct(2, "b", 2), acct(1, "c", 3)},
			wantCode: codes.AlreadyExists,
			table:    "Accounts", cols: accountCols,
			want: rows(row(int64(1), "a", int64(1))),
		},
		{
			name:     "update missing row",
			apply:    []*spanner.Mutation{spanner.Update("Accounts", []string{"Id", "Balance"}, []any{7, 1})},
			wantCode: codes.NotFound, wantMsg: []string{"Accounts", "not found"},
			table: "Accounts", cols: accountCols,
		},
		{
			name:     "null into not null",
			apply:    []*spanner.Mutation{spanner.Insert("Accounts", accountCols, []any{1, nil, 1})},
			wantCode: codes.FailedPrecondition, wantMsg: []string{"Name"},
			table: "Accounts", cols: accountCols,
		},
		{
			name:     "not null column omitted on insert",
			apply:    []*spanner.Mutation{spanner.Insert("Accounts", []string{"Id", "Balance"}, []any{1, 1})},
			wantCode: codes.FailedPrecondition, wantMsg: []string{"Name"},
			table: "Accounts", cols: accountCols,
		},
		{
			name:     "string too long",
			apply:    []*spanner.Mutation{acct(1, "abcdefghijk", 1)},
			wantCode: codes.FailedPrecondition, wantMsg: []string{"New value exceeds the maximum size limit for this column", "Name"},
			table: "Accounts", cols: accountCols,
		},
		{
			name:     "bytes too long",
			apply:    []*spanner.Mutation{spanner.Insert("Accounts", []string{"Id", "Name", "Tag"}, []any{1, "a", []byte{1, 2, 3, 4, 5}})},
			wantCode: codes.FailedPrecondition, wantMsg: []string{"New value exceeds the maximum size limit for this column", "Tag"},
			table: "Accounts", cols: accountCols,
		},
		{
			name:     "array element too long",
			apply:    []*spanner.Mutation{spanner.Insert("Accounts", []string{"Id", "Name", "Codes"}, []any{1, "a", []string{"ok", "toolong"}})},
			wantCode: codes.FailedPrecondition, wantMsg: []string{"Codes"},
			table: "Accounts", cols: accountCols,
		},
		{
			// STRING(N) counts characters, not bytes: ten two-byte characters fit.
			name:  "string length counts characters",
			apply: []*spanner.Mutation{acct(1, strings.Repeat("é", 10), 1)},
			table: "Accounts", cols: accountCols,
			want: rows(row(int64(1), strings.Repeat("é", 10), int64(1))),
		},
		{
			name:     "check constraint",
			apply:    []*spanner.Mutation{acct(1, "a", -1)},
			wantCode: codes.OutOfRange, wantMsg: []string{"Check constraint `Accounts`.`BalanceNonNegative` is violated"},
			table: "Accounts", cols: accountCols,
		},
		{
			name:  "check constraint passes on NULL",
			apply: []*spanner.Mutation{acct(1, "a", nil)},
			table: "Accounts", cols: accountCols,
			want: rows(row(int64(1), "a", nil)),
		},
		{
			name:     "unique index violation",
			setup:    []*spanner.Mutation{acct(1, "a", 1)},
			apply:    []*spanner.Mutation{acct(2, "a", 2)},
			wantCode: codes.AlreadyExists, wantMsg: []string{"AccountsByName"},
			table: "Accounts", cols: accountCols,
			want: rows(row(int64(1), "a", int64(1))),
		},
		{
			name:  "unique index allows moving a value",
			setup: []*spanner.Mutation{acct(1, "a", 1)},
			apply: []*spanner.Mutation{
				spanner.Update("Accounts", []string{"Id", "Name"}, []any{1, "b"}),
				acct(2, "a", 2),
			},
			table: "Accounts", cols: accountCols,
			want: rows(row(int64(1), "b", int64(1)), row(int64(2), "a", int64(2))),
		},
		{
			name:     "interleaved child without parent",
			apply:    []*spanner.Mutation{spanner.Insert("Children", []string{"PId", "CId"}, []any{1, 1})},
			wantCode: codes.NotFound, wantMsg: []string{"Parents"},
			table: "Children", cols: []string{"PId", "CId"},
		},
		{
			name:  "parent and child in one batch",
			apply: []*spanner.Mutation{spanner.Insert("Parents", []string{"PId"}, []any{1}), spanner.Insert("Children", []string{"PId", "CId"}, []any{1, 1})},
			table: "Children", cols: []string{"PId", "CId"},
			want: rows(row(int64(1), int64(1))),
		},
		{
			name: "on delete cascade",
			setup: []*spanner.Mutation{
				spanner.Insert("Parents", []string{"PId"}, []any{1}),
				spanner.Insert("Parents", []string{"PId"}, []any{2}),
				spanner.Insert("Children", []string{"PId", "CId"}, []any{1, 1}),
				spanner.Insert("Children", []string{"PId", "CId"}, []any{1, 2}),
				spanner.Insert("Children", []string{"PId", "CId"}, []any{2, 1}),
			},
			apply: []*spanner.Mutation{spanner.Delete("Parents", spanner.Key{1})},
			table: "Children", cols: []string{"PId", "CId"},
			want: rows(row(int64(2), int64(1))),
		},
		{
			name: "on delete no action with children",
			setup: []*spanner.Mutation{
				spanner.Insert("Parents2", []string{"PId"}, []any{1}),
				spanner.Insert("Children2", []string{"PId", "CId"}, []any{1, 1}),
			},
			apply:    []*spanner.Mutation{spanner.Delete("Parents2", spanner.Key{1})},
			wantCode: codes.FailedPrecondition,
			table:    "Parents2", cols: []string{"PId"},
			want: rows(row(int64(1))),
		},
		{
			// Replace deletes the old row first, so with ON DELETE CASCADE the children go too.
			name: "replace parent cascades",
			setup: []*spanner.Mutation{
				spanner.Insert("Parents", []string{"PId", "V"}, []any{1, "old"}),
				spanner.Insert("Children", []string{"PId", "CId"}, []any{1, 1}),
			},
			apply: []*spanner.Mutation{spanner.Replace("Parents", []string{"PId", "V"}, []any{1, "new"})},
			table: "Children", cols: []string{"PId", "CId"},
			want: nil,
		},
		{
			name: "replace parent with children and no cascade",
			setup: []*spanner.Mutation{
				spanner.Insert("Parents2", []string{"PId"}, []any{1}),
				spanner.Insert("Children2", []string{"PId", "CId"}, []any{1, 1}),
			},
			apply:    []*spanner.Mutation{spanner.Replace("Parents2", []string{"PId"}, []any{1})},
			wantCode: codes.FailedPrecondition,
			table:    "Children2", cols: []string{"PId", "CId"},
			want: rows(row(int64(1), int64(1))),
		},
		{
			name: "delete key prefix range",
			setup: []*spanner.Mutation{
				spanner.Insert("Parents", []string{"PId"}, []any{1}),
				spanner.Insert("Parents", []string{"PId"}, []any{2}),
				spanner.Insert("Children", []string{"PId", "CId"}, []any{1, 1}),
				spanner.Insert("Children", []string{"PId", "CId"}, []any{1, 2}),
				spanner.Insert("Children", []string{"PId", "CId"}, []any{2, 1}),
			},
			apply: []*spanner.Mutation{spanner.Delete("Children", spanner.Key{1}.AsPrefix())},
			table: "Children", cols: []string{"PId", "CId"},
			want: rows(row(int64(2), int64(1))),
		},
		{
			name:     "foreign key missing parent",
			apply:    []*spanner.Mutation{spanner.Insert("Refs", []string{"Id", "PId"}, []any{1, 5})},
			wantCode: codes.FailedPrecondition, wantMsg: []string{"FK_RefsParents"},
			table: "Refs", cols: []string{"Id", "PId"},
		},
		{
			name:  "foreign key NULL is not checked",
			apply: []*spanner.Mutation{spanner.Insert("Refs", []string{"Id", "PId"}, []any{1, nil})},
			table: "Refs", cols: []string{"Id", "PId"},
			want: rows(row(int64(1), nil)),
		},
		{
			name: "foreign key referenced row cannot be deleted",
			setup: []*spanner.Mutation{
				spanner.Insert("Parents", []string{"PId"}, []any{5}),
				spanner.Insert("Refs", []string{"Id", "PId"}, []any{1, 5}),
			},
			apply:    []*spanner.Mutation{spanner.Delete("Parents", spanner.Key{5})},
			wantCode: codes.FailedPrecondition, wantMsg: []string{"FK_RefsParents"},
			table: "Parents", cols: []string{"PId"},
			want: rows(row(int64(5))),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			client := newDB(t, mutationSchema...)
			if len(tt.setup) > 0 {
				mustApply(t, client, tt.setup...)
			}
			_, err := client.Apply(testCtx(t), tt.apply)
			if tt.wantCode == codes.OK {
				if err != nil {
					t.Fatalf("Apply: %v", err)
				}
			} else {
				checkErr(t, err, tt.wantCode, tt.wantMsg...)
			}
			got := readAll(t, client, tt.table, tt.cols...)
			if diff := cmp.Diff(tt.want, got, cmpOpts...); diff != "" {
				t.Errorf("%s after Apply (-want +got):\n%s", tt.table, diff)
			}
			if tt.table == "Accounts" {
				checkAccountsIndex(t, client, tt.want)
			}

			// The same mutations buffered in a read-write transaction behave the same: they
			// are checked when the transaction commits.
			t.Run("in transaction", func(t *testing.T) {
				client := newDB(t, mutationSchema...)
				if len(tt.setup) > 0 {
					mustApply(t, client, tt.setup...)
				}
				_, err := client.ReadWriteTransaction(testCtx(t), func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
					return tx.BufferWrite(tt.apply)
				})
				if tt.wantCode == codes.OK {
					if err != nil {
						t.Fatalf("commit: %v", err)
					}
				} else {
					checkErr(t, err, tt.wantCode, tt.wantMsg...)
				}
				got := readAll(t, client, tt.table, tt.cols...)
				if diff := cmp.Diff(tt.want, got, cmpOpts...); diff != "" {
					t.Errorf("%s after commit (-want +got):\n%s", tt.table, diff)
				}
				if tt.table == "Accounts" {
					checkAccountsIndex(t, client, tt.want)
				}
			})
		})
	}
}

// checkAccountsIndex asserts that the AccountsByName index holds exactly the table's rows
// (given as Id, Name, Balance in key order), in index order: a mutation that updates the table
// but not its index leaves stale or missing entries.
func checkAccountsIndex(t *testing.T, client *spanner.Client, table [][]any) {
	t.Helper()
	want := [][]any{}
	for _, r := range table {
		want = append(want, []any{r[1], r[0]})
	}
	sort.Slice(want, func(i, j int) bool { return want[i][0].(string) < want[j][0].(string) })
	res, err := collect(client.Single().ReadUsingIndex(testCtx(t), "Accounts", "AccountsByName", spanner.AllKeys(), []string{"Name", "Id"}))
	if err != nil {
		t.Fatalf("ReadUsingIndex: %v", err)
	}
	got := res.Rows
	if got == nil {
		got = [][]any{}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("AccountsByName index (-want +got):\n%s", diff)
	}
}

func TestCommitTimestampMutation(t *testing.T) {
	t.Parallel()
	client := newDB(t, mutationSchema...)

	t.Run("Apply", func(t *testing.T) {
		commitTs := mustApply(t, client, spanner.Insert("Accounts", []string{"Id", "Name", "Ts"}, []any{1, "a", spanner.CommitTimestamp}))
		got := readAll(t, client, "Accounts", "Ts")
		if diff := cmp.Diff(rows(row(commitTs)), got, cmpOpts...); diff != "" {
			t.Errorf("Ts column vs Apply's commit timestamp (-want +got):\n%s", diff)
		}
	})

	t.Run("ReadWriteTransaction", func(t *testing.T) {
		resp, err := client.ReadWriteTransactionWithOptions(testCtx(t), func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
			return tx.BufferWrite([]*spanner.Mutation{
				spanner.InsertOrUpdate("Accounts", []string{"Id", "Name", "Ts"}, []any{2, "b", spanner.CommitTimestamp}),
				spanner.InsertOrUpdate("Accounts", []string{"Id", "Name", "Ts"}, []any{3, "c", spanner.CommitTimestamp}),
			})
		}, spanner.TransactionOptions{CommitOptions: spanner.CommitOptions{ReturnCommitStats: true}})
		if err != nil {
			t.Fatalf("ReadWriteTransaction: %v", err)
		}
		var got []time.Time
		iter := client.Single().Read(testCtx(t), "Accounts", spanner.KeySets(spanner.Key{2}, spanner.Key{3}), []string{"Ts"})
		err = iter.Do(func(r *spanner.Row) error {
			var v time.Time
			got = append(got, v)
			return r.Columns(&got[len(got)-1])
		})
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if diff := cmp.Diff([]time.Time{resp.CommitTs, resp.CommitTs}, got, cmpOpts...); diff != "" {
			t.Errorf("Ts columns vs CommitResponse timestamp (-want +got):\n%s", diff)
		}
		if got := resp.CommitStats.GetMutationCount(); got == 0 {
			t.Errorf("CommitStats.MutationCount = 0, want > 0 when requested")
		}
	})

	t.Run("future timestamp rejected", func(t *testing.T) {
		// A column that allows commit timestamps refuses explicit values in the future: they
		// would break the ordering the commit timestamp promises.
		_, err := client.Apply(testCtx(t), []*spanner.Mutation{
			spanner.Insert("Accounts", []string{"Id", "Name", "Ts"}, []any{9, "z", time.Now().Add(time.Hour)}),
		})
		checkErr(t, err, codes.FailedPrecondition)
	})
}

// TestDMLConstraints checks that DML enforces the same constraints, with the same codes, as
// mutations: the two write paths must not disagree.
func TestDMLConstraints(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		sql      string
		wantCode codes.Code
		wantMsg  []string
	}{
		{"duplicate key", `INSERT INTO Accounts (Id, Name) VALUES (1, 'x')`, codes.AlreadyExists, []string{"Accounts"}},
		{"update missing row is no error", `UPDATE Accounts SET Balance = 1 WHERE Id = 99`, codes.OK, nil},
		{"null into not null", `UPDATE Accounts SET Name = NULL WHERE Id = 1`, codes.FailedPrecondition, []string{"Name"}},
		{"string too long", `UPDATE Accounts SET Name = 'abcdefghijk' WHERE Id = 1`, codes.FailedPrecondition, []string{"Name"}},
		{"bytes too long", `UPDATE Accounts SET Tag = b'12345' WHERE Id = 1`, codes.FailedPrecondition, []string{"Tag"}},
		{"array element too long", `UPDATE Accounts SET Codes = ['ok', 'toolong'] WHERE Id = 1`, codes.FailedPrecondition, []string{"Codes"}},
		{"check constraint", `UPDATE Accounts SET Balance = -5 WHERE Id = 1`, codes.OutOfRange, []string{"BalanceNonNegative"}},
		{"unique index", `INSERT INTO Accounts (Id, Name) VALUES (2, 'a')`, codes.AlreadyExists, []string{"AccountsByName"}},
		{"interleaved child without parent", `INSERT INTO Children (PId, CId) VALUES (9, 1)`, codes.NotFound, nil},
		{"foreign key missing parent", `INSERT INTO Refs (Id, PId) VALUES (1, 9)`, codes.FailedPrecondition, []string{"FK_RefsParents"}},
		{"foreign key referenced row deleted", `DELETE FROM Parents WHERE PId = 5`, codes.FailedPrecondition, []string{"FK_RefsParents"}},
		{"delete parent with children and no cascade", `DELETE FROM Parents2 WHERE PId = 1`, codes.FailedPrecondition, nil},
		{"commit timestamp in the future", `UPDATE Accounts SET Ts = TIMESTAMP_ADD(CURRENT_TIMESTAMP(), INTERVAL 1 HOUR) WHERE Id = 1`, codes.FailedPrecondition, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			client := newDB(t, mutationSchema...)
			mustApply(t, client,
				acct(1, "a", 10),
				spanner.Insert("Parents", []string{"PId"}, []any{5}),
				spanner.Insert("Refs", []string{"Id", "PId"}, []any{5, 5}),
				spanner.Insert("Parents2", []string{"PId"}, []any{1}),
				spanner.Insert("Children2", []string{"PId", "CId"}, []any{1, 1}),
			)
			_, err := client.ReadWriteTransaction(testCtx(t), func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
				_, err := tx.Update(ctx, spanner.NewStatement(tt.sql))
				return err
			})
			if tt.wantCode == codes.OK {
				if err != nil {
					t.Fatalf("Update: %v", err)
				}
			} else {
				checkErr(t, err, tt.wantCode, tt.wantMsg...)
			}
			// Nothing of a failed statement remains.
			want := rows(row(int64(1), "a", int64(10)))
			if diff := cmp.Diff(want, readAll(t, client, "Accounts", accountCols...)); diff != "" {
				t.Errorf("Accounts (-want +got):\n%s", diff)
			}
		})
	}
}
