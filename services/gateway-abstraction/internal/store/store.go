// Package store keeps the gateway's payments, provider call intents and provider events in its
// Spanner database (the generated DAO in gen/dao/paymentsdb) and appends the payments' events to
// its outbox in the same transactions. It implements app.Repository and, bound to one read-write
// transaction, app.Tx.
package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmart/spanmart/gen/dao"
	"github.com/spanmart/spanmart/gen/dao/paymentsdb"
	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/app"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/payment"
)

// Shards spread the sweep's two NULL_FILTERED indexes (PaymentsToCheck, ProviderRequestsToResume),
// whose second key part is a timestamp, over this many key ranges.
const Shards = 16

// Store is the Spanner repository.
type Store struct {
	client *spanner.Client
}

// New returns a store over the payments database.
func New(client *spanner.Client) *Store { return &Store{client: client} }

// Tx binds the repository to txn (the consumer's transaction).
func Tx(txn *spanner.ReadWriteTransaction) app.Tx { return &tx{txn: txn} }

type tx struct {
	txn *spanner.ReadWriteTransaction
}

// Update runs fn in a new read-write transaction.
func (s *Store) Update(ctx context.Context, fn func(ctx context.Context, tx app.Tx) error) error {
	_, err := s.client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		return fn(ctx, Tx(txn))
	})
	return err
}

// Payment reads the payment with an exclusive lock: every read-write transaction that reads a
// payment is about to write it, and a provider reports most outcomes twice at the same moment
// (its answer to the call and its webhook), so two transactions would otherwise both read the
// row, both want to write it, and one of them would be aborted (docs/architecture.md, "Local system").
// With the lock the second waits for the first to commit and reads what it wrote.
func (t *tx) Payment(ctx context.Context, id string) (*payment.Payment, error) {
	return readPayment(ctx, dao.Exclusive(t.txn), id)
}

func (s *Store) Payment(ctx context.Context, id string) (*payment.Payment, error) {
	return readPayment(ctx, s.client.Single(), id)
}

func readPayment(ctx context.Context, r dao.Reader, id string) (*payment.Payment, error) {
	row, err := paymentsdb.ReadPayment(ctx, r, id)
	if errors.Is(err, dao.ErrNotFound) {
		return nil, fmt.Errorf("payment %s: %w", id, payment.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return restore(row)
}

func (t *tx) PaymentByProviderID(ctx context.Context, providerName, providerPaymentID string) (*payment.Payment, error) {
	row, err := paymentsdb.ReadPaymentsByProviderPayment(ctx, t.txn, providerName, providerPaymentID)
	if errors.Is(err, dao.ErrNotFound) {
		return nil, fmt.Errorf("%s payment %s: %w", providerName, providerPaymentID, payment.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return restore(row)
}

func (s *Store) PaymentsOfOrder(ctx context.Context, orderID string) ([]*payment.Payment, error) {
	txn := s.client.ReadOnlyTransaction() // an index read is two reads
	defer txn.Close()
	rows, err := paymentsdb.ReadPaymentsByOrder(ctx, txn, orderID)
	if err != nil {
		return nil, err
	}
	return restoreAll(rows)
}

func restoreAll(rows []*paymentsdb.Payment) ([]*payment.Payment, error) {
	out := make([]*payment.Payment, 0, len(rows))
	for _, r := range rows {
		p, err := restore(r)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func restore(r *paymentsdb.Payment) (*payment.Payment, error) {
	var slip json.RawMessage
	if r.Slip.Valid {
		b, err := json.Marshal(r.Slip.Value)
		if err != nil {
			return nil, fmt.Errorf("payment %s: slip: %w", r.PaymentId, err)
		}
		slip = b
	}
	return payment.Restore(payment.Snapshot{
		ID: r.PaymentId, OrderID: r.OrderId, CustomerID: r.CustomerId.StringVal, Method: payment.Method(r.Method),
		AmountMinor: r.AmountMinor, Currency: r.Currency, Status: payment.Status(r.Status),
		ProviderPaymentID: r.ProviderPaymentId.StringVal, FailureReason: payment.Reason(r.FailureReason.StringVal),
		ExpiresAt: r.ExpiresAt.Time, Slip: slip, CancelRequested: r.CancelRequested.Valid && r.CancelRequested.Bool, Version: r.Version,
	})
}

// paymentWithIntentSQL reads a payment and one of its intents with FOR UPDATE: both locked
// exclusively, as Payment's read locks the payment, in one round trip where two reads were.
var paymentWithIntentSQL = "SELECT p." + strings.Join(paymentsdb.PaymentColumns(), ", p.") +
	",\n  ARRAY(SELECT AS STRUCT r." + strings.Join(paymentsdb.ProviderRequestColumns(), ", r.") +
	" FROM ProviderRequests AS r WHERE r.IdempotencyKey = @key) AS Intent\nFROM Payments AS p WHERE p.PaymentId = @id\nFOR UPDATE"

// paymentWithIntent is a row of paymentWithIntentSQL.
type paymentWithIntent struct {
	paymentsdb.Payment
	Intent []*paymentsdb.ProviderRequest
}

func (t *tx) PaymentWithIntent(ctx context.Context, id, key string) (*payment.Payment, app.Intent, error) {
	var (
		row   paymentWithIntent
		found bool
	)
	stmt := spanner.Statement{SQL: paymentWithIntentSQL, Params: map[string]any{"id": id, "key": key}}
	err := t.txn.Query(ctx, stmt).Do(func(r *spanner.Row) error {
		found = true
		return r.ToStruct(&row)
	})
	switch {
	case err != nil:
		return nil, app.Intent{}, fmt.Errorf("read payment %s with intent %s: %w", id, key, err)
	case !found:
		return nil, app.Intent{}, fmt.Errorf("payment %s: %w", id, payment.ErrNotFound)
	case len(row.Intent) == 0:
		return nil, app.Intent{}, fmt.Errorf("intent %s: %w", key, payment.ErrNotFound)
	}
	p, err := restore(&row.Payment)
	if err != nil {
		return nil, app.Intent{}, err
	}
	in, err := intent(row.Intent[0])
	return p, in, err
}

func (s *Store) Intent(ctx context.Context, key string) (app.Intent, error) {
	return readIntent(ctx, s.client.Single(), key)
}

func (s *Store) Intents(ctx context.Context, keys []string) (map[string]app.Intent, error) {
	ks := make([]spanner.KeySet, len(keys))
	for i, k := range keys {
		ks[i] = paymentsdb.ProviderRequestKey(k)
	}
	rows, err := paymentsdb.ReadProviderRequestRows(ctx, s.client.Single(), spanner.KeySets(ks...))
	if err != nil {
		return nil, err
	}
	out := make(map[string]app.Intent, len(rows))
	for _, r := range rows {
		in, err := intent(r)
		if err != nil {
			return nil, err
		}
		out[in.Key] = in
	}
	return out, nil
}

func readIntent(ctx context.Context, r dao.Reader, key string) (app.Intent, error) {
	row, err := paymentsdb.ReadProviderRequest(ctx, r, key)
	if errors.Is(err, dao.ErrNotFound) {
		return app.Intent{}, fmt.Errorf("intent %s: %w", key, payment.ErrNotFound)
	}
	if err != nil {
		return app.Intent{}, err
	}
	return intent(row)
}

func intent(r *paymentsdb.ProviderRequest) (app.Intent, error) {
	in := app.Intent{
		Key: r.IdempotencyKey, PaymentID: r.PaymentId, Op: app.Operation(r.Operation), Status: app.IntentStatus(r.Status),
		Attempts: r.Attempts, LastError: r.LastError.StringVal, RetryAfter: r.RetryAfter.Time, CreatedAt: r.CreatedAt,
	}
	if r.Request.Valid {
		b, err := json.Marshal(r.Request.Value)
		if err != nil {
			return app.Intent{}, fmt.Errorf("intent %s: request: %w", r.IdempotencyKey, err)
		}
		in.Request = b
	}
	return in, nil
}

// EventKey is the ProviderEvents key of a provider's event: hex SHA-256 of provider + "\x00" + id
// (provider event ids are often sequential, which would make a hot spot as a key).
func EventKey(providerName, eventID string) string {
	sum := sha256.Sum256([]byte(providerName + "\x00" + eventID))
	return hex.EncodeToString(sum[:])
}

func (t *tx) RecordProviderEvent(ctx context.Context, e app.ProviderEvent) (bool, error) {
	var payload any
	if err := json.Unmarshal(e.Payload, &payload); err != nil {
		payload = map[string]string{"unparsed": string(e.Payload)}
	}
	n, err := t.txn.Update(ctx, paymentsdb.InsertOrIgnoreProviderEvent(
		EventKey(e.Provider, e.EventID), e.Provider, e.EventID,
		spanner.NullString{StringVal: e.PaymentID, Valid: e.PaymentID != ""}, e.EventType,
		spanner.NullJSON{Value: payload, Valid: true}))
	if err != nil {
		return false, fmt.Errorf("record %s event %s: %w", e.Provider, e.EventID, err)
	}
	return n == 1, nil
}

// Save writes p and its events.
func (t *tx) Save(ctx context.Context, p *payment.Payment, created bool, checkAfter time.Time) error {
	snap := p.Snapshot()
	row := &paymentsdb.Payment{
		PaymentId: snap.ID, OrderId: snap.OrderID, Provider: snap.Method.Provider(), Method: string(snap.Method),
		Status: string(snap.Status), AmountMinor: snap.AmountMinor, Currency: snap.Currency,
		ProviderPaymentId: nullString(snap.ProviderPaymentID), FailureReason: nullString(string(snap.FailureReason)),
		ExpiresAt: nullTime(snap.ExpiresAt), Version: snap.Version, CustomerId: nullString(snap.CustomerID),
		CheckAfter: nullTime(checkAfter), CancelRequested: nullBool(snap.CancelRequested), UpdatedAt: spanner.CommitTimestamp,
	}
	if !checkAfter.IsZero() {
		row.CheckShard = spanner.NullInt64{Int64: shardOf(snap.ID), Valid: true}
	}
	if len(snap.Slip) > 0 {
		var v any
		if err := json.Unmarshal(snap.Slip, &v); err != nil {
			return fmt.Errorf("payment %s: slip: %w", snap.ID, err)
		}
		row.Slip = spanner.NullJSON{Value: v, Valid: true}
	}
	var ms []*spanner.Mutation
	if created {
		row.CreatedAt = spanner.CommitTimestamp
		ms = append(ms, row.Insert())
	} else {
		m, err := row.UpdateColumns(paymentsdb.PaymentColStatus, paymentsdb.PaymentColProviderPaymentId,
			paymentsdb.PaymentColFailureReason, paymentsdb.PaymentColExpiresAt, paymentsdb.PaymentColVersion,
			paymentsdb.PaymentColSlip, paymentsdb.PaymentColCheckShard, paymentsdb.PaymentColCheckAfter,
			paymentsdb.PaymentColCancelRequested, paymentsdb.PaymentColUpdatedAt)
		if err != nil {
			return err
		}
		ms = append(ms, m)
	}
	if err := t.txn.BufferWrite(ms); err != nil {
		return err
	}
	var events []outboxlib.Event
	for _, em := range p.Emitted() {
		e, err := outboxlib.NewEvent(ctx, em.Type, payment.AggregateType, p.ID(), em.Version, payloadOf(p, em.Status))
		if err != nil {
			return err
		}
		events = append(events, e)
	}
	return outboxlib.Append(ctx, t.txn, events...)
}

// SaveIntent writes in; the request it carries is written once, when it is created.
func (t *tx) SaveIntent(ctx context.Context, in app.Intent, created bool) error {
	r := &paymentsdb.ProviderRequest{
		IdempotencyKey: in.Key, PaymentId: in.PaymentID, Operation: string(in.Op), Status: string(in.Status),
		Attempts: in.Attempts, LastError: nullString(in.LastError), RetryAfter: nullTime(in.RetryAfter),
		UpdatedAt: spanner.CommitTimestamp,
	}
	if !in.RetryAfter.IsZero() {
		r.RetryShard = spanner.NullInt64{Int64: shardOf(in.PaymentID), Valid: true}
	}
	if created {
		var v any
		if err := json.Unmarshal(in.Request, &v); err != nil {
			return fmt.Errorf("intent %s: request: %w", in.Key, err)
		}
		r.Request = spanner.NullJSON{Value: v, Valid: true}
		r.CreatedAt = spanner.CommitTimestamp
		return t.txn.BufferWrite([]*spanner.Mutation{r.Insert()})
	}
	m, err := r.UpdateColumns(paymentsdb.ProviderRequestColStatus, paymentsdb.ProviderRequestColAttempts,
		paymentsdb.ProviderRequestColLastError, paymentsdb.ProviderRequestColRetryAfter,
		paymentsdb.ProviderRequestColRetryShard, paymentsdb.ProviderRequestColUpdatedAt)
	if err != nil {
		return err
	}
	return t.txn.BufferWrite([]*spanner.Mutation{m})
}

// IntentsToResume reads the STARTED intents due at now, over every shard of
// ProviderRequestsToResume.
func (s *Store) IntentsToResume(ctx context.Context, now time.Time, limit int) ([]app.Intent, error) {
	txn := s.client.ReadOnlyTransaction()
	defer txn.Close()
	rows, err := paymentsdb.ReadProviderRequestsToResumeKeys(ctx, txn, dueRanges(now), limit)
	if err != nil {
		return nil, err
	}
	out := make([]app.Intent, 0, len(rows))
	for _, r := range rows {
		in, err := intent(r)
		if err != nil {
			return nil, err
		}
		if in.Status == app.IntentStarted {
			out = append(out, in)
		}
	}
	return out, nil
}

// PaymentsToCheck reads the payments due at now, over every shard of PaymentsToCheck.
func (s *Store) PaymentsToCheck(ctx context.Context, now time.Time, limit int) ([]*payment.Payment, error) {
	txn := s.client.ReadOnlyTransaction()
	defer txn.Close()
	rows, err := paymentsdb.ReadPaymentsToCheckKeys(ctx, txn, dueRanges(now), limit)
	if err != nil {
		return nil, err
	}
	return restoreAll(rows)
}

// dueRanges is every (shard, timestamp ≤ now) range of a sweep index.
func dueRanges(now time.Time) spanner.KeySet {
	ranges := make([]spanner.KeySet, Shards)
	for i := range ranges {
		ranges[i] = spanner.KeyRange{Start: spanner.Key{int64(i)}, End: spanner.Key{int64(i), now}, Kind: spanner.ClosedClosed}
	}
	return spanner.KeySets(ranges...)
}

func shardOf(id string) int64 {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int64(h.Sum32() % Shards)
}

func nullString(s string) spanner.NullString { return spanner.NullString{StringVal: s, Valid: s != ""} }

// nullBool writes false as NULL, as the column reads for payments recorded before it existed.
func nullBool(b bool) spanner.NullBool { return spanner.NullBool{Bool: b, Valid: b} }

func nullTime(t time.Time) spanner.NullTime { return spanner.NullTime{Time: t, Valid: !t.IsZero()} }
