package conformance

import (
	"context"
	"sort"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
)

// TestClientFeatures covers the client entry points beyond plain transactions: each maps to a
// different RPC shape (single-use commits, BatchWrite, explicit BeginTransaction, partitions,
// request options) that a service may use.
func TestClientFeatures(t *testing.T) {
	t.Parallel()
	schema := []string{
		`CREATE TABLE T (K INT64 NOT NULL, V STRING(MAX), Ts TIMESTAMP OPTIONS (allow_commit_timestamp = true)) PRIMARY KEY (K)`,
	}

	t.Run("apply at least once", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, schema...)
		ts, err := client.Apply(testCtx(t), []*spanner.Mutation{
			spanner.Insert("T", []string{"K", "V", "Ts"}, []any{1, "a", spanner.CommitTimestamp}),
			spanner.Insert("T", []string{"K", "V", "Ts"}, []any{2, "b", spanner.CommitTimestamp}),
		}, spanner.ApplyAtLeastOnce())
		if err != nil {
			t.Fatalf("Apply: %v", err)
		}
		want := rows(row(int64(1), "a", ts), row(int64(2), "b", ts))
		if diff := cmp.Diff(want, readAll(t, client, "T", "K", "V", "Ts"), cmpOpts...); diff != "" {
			t.Errorf("T (-want +got):\n%s", diff)
		}
		_, err = client.Apply(testCtx(t), []*spanner.Mutation{spanner.Insert("T", []string{"K"}, []any{1})}, spanner.ApplyAtLeastOnce())
		checkErr(t, err, codes.AlreadyExists)
	})

	t.Run("batch write", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, schema...)
		mustApply(t, client, spanner.Insert("T", []string{"K", "V"}, []any{9, "old"}))
		groups := []*spanner.MutationGroup{
			{Mutations: []*spanner.Mutation{spanner.Insert("T", []string{"K", "V"}, []any{1, "a"}), spanner.Insert("T", []string{"K", "V"}, []any{2, "b"})}},
			{Mutations: []*spanner.Mutation{spanner.Insert("T", []string{"K", "V"}, []any{3, "c"}), spanner.Insert("T", []string{"K", "V"}, []any{9, "dup"})}},
		}
		// Each group commits atomically and independently; the response reports every group.
		statuses := map[int32]codes.Code{}
		err := client.BatchWrite(testCtx(t), groups).Do(func(r *sppb.BatchWriteResponse) error {
			for _, i := range r.GetIndexes() {
				statuses[i] = codes.Code(r.GetStatus().GetCode())
				if r.GetStatus().GetCode() == 0 && r.GetCommitTimestamp() == nil {
					t.Errorf("group %d committed without a commit timestamp", i)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("BatchWrite: %v", err)
		}
		if diff := cmp.Diff(map[int32]codes.Code{0: codes.OK, 1: codes.AlreadyExists}, statuses); diff != "" {
			t.Errorf("group statuses (-want +got):\n%s", diff)
		}
		want := rows(row(int64(1), "a"), row(int64(2), "b"), row(int64(9), "old"))
		if diff := cmp.Diff(want, readAll(t, client, "T", "K", "V")); diff != "" {
			t.Errorf("T (-want +got):\n%s", diff)
		}
	})

	t.Run("options are accepted", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, schema...)
		ctx := testCtx(t)
		delay := 10 * time.Millisecond
		_, err := client.ReadWriteTransactionWithOptions(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
			if _, err := tx.UpdateWithOptions(ctx, spanner.NewStatement(`INSERT INTO T (K, V) VALUES (1, 'a')`),
				spanner.QueryOptions{RequestTag: "insert-one", Priority: sppb.RequestOptions_PRIORITY_HIGH}); err != nil {
				return err
			}
			_, err := collect(tx.ReadWithOptions(ctx, "T", spanner.AllKeys(), []string{"K"}, &spanner.ReadOptions{RequestTag: "read-all", Priority: sppb.RequestOptions_PRIORITY_MEDIUM}))
			return err
		}, spanner.TransactionOptions{
			TransactionTag:         "conformance",
			CommitPriority:         sppb.RequestOptions_PRIORITY_LOW,
			CommitOptions:          spanner.CommitOptions{MaxCommitDelay: &delay},
			BeginTransactionOption: spanner.ExplicitBeginTransaction,
		})
		if err != nil {
			t.Fatalf("transaction: %v", err)
		}
		iter := client.Single().QueryWithOptions(ctx, spanner.NewStatement(`SELECT V FROM T`),
			spanner.QueryOptions{RequestTag: "select", Priority: sppb.RequestOptions_PRIORITY_LOW, Options: &sppb.ExecuteSqlRequest_QueryOptions{OptimizerVersion: "latest"}})
		res, err := collect(iter)
		if err != nil {
			t.Fatalf("query: %v", err)
		}
		if diff := cmp.Diff(rows(row("a")), res.Rows); diff != "" {
			t.Errorf("rows (-want +got):\n%s", diff)
		}
	})

	t.Run("explicit begin transaction", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, schema...)
		// With a separate BeginTransaction RPC instead of an inline begin, reads and DML
		// behave the same.
		for i := 0; i < 3; i++ {
			_, err := client.ReadWriteTransactionWithOptions(testCtx(t), func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
				res, err := tryQuery(ctx, tx, spanner.NewStatement(`SELECT COUNT(*) FROM T`))
				if err != nil {
					return err
				}
				_, err = tx.Update(ctx, spanner.Statement{SQL: `INSERT INTO T (K) VALUES (@k)`, Params: map[string]any{"k": res.Rows[0][0]}})
				return err
			}, spanner.TransactionOptions{BeginTransactionOption: spanner.ExplicitBeginTransaction})
			if err != nil {
				t.Fatalf("transaction %d: %v", i, err)
			}
		}
		if diff := cmp.Diff(rows(row(int64(0)), row(int64(1)), row(int64(2))), readAll(t, client, "T", "K")); diff != "" {
			t.Errorf("T (-want +got):\n%s", diff)
		}
	})

	t.Run("partitioned reads", func(t *testing.T) {
		t.Parallel()
		client := newDB(t, schema...)
		var ms []*spanner.Mutation
		var want []int64
		for k := int64(0); k < 50; k++ {
			ms = append(ms, spanner.Insert("T", []string{"K", "V"}, []any{k, "v"}))
			want = append(want, k)
		}
		mustApply(t, client, ms...)
		ctx := testCtx(t)
		txn, err := client.BatchReadOnlyTransaction(ctx, spanner.StrongRead())
		if err != nil {
			t.Fatalf("BatchReadOnlyTransaction: %v", err)
		}
		defer txn.Cleanup(ctx)
		collectKeys := func(ps []*spanner.Partition) []int64 {
			var got []int64
			for _, p := range ps {
				err := txn.Execute(ctx, p).Do(func(r *spanner.Row) error {
					var k int64
					if err := r.Columns(&k); err != nil {
						return err
					}
					got = append(got, k)
					return nil
				})
				if err != nil {
					t.Fatalf("Execute: %v", err)
				}
			}
			sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
			return got
		}
		qps, err := txn.PartitionQuery(ctx, spanner.NewStatement(`SELECT K FROM T`), spanner.PartitionOptions{})
		if err != nil {
			t.Fatalf("PartitionQuery: %v", err)
		}
		if diff := cmp.Diff(want, collectKeys(qps)); diff != "" {
			t.Errorf("PartitionQuery keys (-want +got):\n%s", diff)
		}
		rps, err := txn.PartitionRead(ctx, "T", spanner.AllKeys(), []string{"K"}, spanner.PartitionOptions{})
		if err != nil {
			t.Fatalf("PartitionRead: %v", err)
		}
		if diff := cmp.Diff(want, collectKeys(rps)); diff != "" {
			t.Errorf("PartitionRead keys (-want +got):\n%s", diff)
		}
	})
}
