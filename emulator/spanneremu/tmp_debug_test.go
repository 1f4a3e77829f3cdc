package spanneremu

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
)

func BenchmarkTmpTransfer(b *testing.B) {
	client := benchClient(b)
	ids := seedAccounts(b, client)
	ctx := context.Background()
	transfer := func() {
		start := time.Now()
		before := testServer.eng.Stats()
		_, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
			r1, err := tx.ReadRow(ctx, "Accounts", spanner.Key{ids[0]}, []string{"Balance"})
			if err != nil {
				return err
			}
			var bal int64
			r1.Columns(&bal)
			return tx.BufferWrite([]*spanner.Mutation{spanner.Update("Accounts", []string{"Id", "Balance"}, []any{ids[0], bal - 1})})
		})
		b.Logf("transfer %v err %v stats %+v -> %+v", time.Since(start), err, before, testServer.eng.Stats())
	}
	audit := func() {
		start := time.Now()
		ro := client.ReadOnlyTransaction()
		var sum int64
		err := ro.Query(ctx, spanner.NewStatement(`SELECT SUM(Balance) FROM Accounts`)).Do(func(r *spanner.Row) error { return r.Columns(&sum) })
		ro.Close()
		b.Logf("audit %v err %v", time.Since(start), err)
	}
	dml := func() {
		start := time.Now()
		_, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
			_, err := tx.Update(ctx, spanner.Statement{SQL: `UPDATE Accounts SET Balance = Balance + 1 WHERE Id = @id`, Params: map[string]any{"id": ids[5]}})
			return err
		})
		b.Logf("dml %v err %v", time.Since(start), err)
	}
	transfer()
	audit()
	transfer()
	dml()
	transfer()
	audit()
	dml()
	transfer()
}
