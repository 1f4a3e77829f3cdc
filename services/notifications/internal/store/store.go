// Package store keeps the notifications service's order contacts and notifications in its Spanner
// database (the generated DAO in gen/dao/notificationsdb). It implements app.Repository: the event
// use cases' writes go into the consumer's read-write transaction (an app.Txn, which must be a
// *spanner.ReadWriteTransaction), the others open their own.
package store

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"
	"unicode/utf8"

	"cloud.google.com/go/spanner"

	"github.com/spanmart/spanmart/gen/dao"
	"github.com/spanmart/spanmart/gen/dao/notificationsdb"
	"github.com/spanmart/spanmart/services/notifications/internal/app"
	"github.com/spanmart/spanmart/services/notifications/internal/notification"
)

// Shards spread the sweep's NULL_FILTERED index NotificationsToResume, whose second key part is a
// timestamp, over this many key ranges.
const Shards = 16

// Store is the Spanner repository.
type Store struct {
	client *spanner.Client
}

// New returns a store over the notifications database.
func New(client *spanner.Client) *Store { return &Store{client: client} }

var _ app.Repository = (*Store)(nil)

func rw(t app.Txn) (*spanner.ReadWriteTransaction, error) {
	txn, ok := t.(*spanner.ReadWriteTransaction)
	if !ok || txn == nil {
		return nil, fmt.Errorf("store: the transaction is a %T, want a *spanner.ReadWriteTransaction", t)
	}
	return txn, nil
}

// RecordContact implements app.Repository.
func (s *Store) RecordContact(ctx context.Context, t app.Txn, c notification.Contact, eventID string) (bool, error) {
	txn, err := rw(t)
	if err != nil {
		return false, err
	}
	switch _, err := notificationsdb.ReadOrderContact(ctx, txn, c.OrderID); {
	case err == nil:
		return false, nil
	case !errors.Is(err, dao.ErrNotFound):
		return false, err
	}
	row := notificationsdb.OrderContact{
		OrderId: c.OrderID, CustomerId: c.CustomerID, Email: c.Email, Language: c.Language, EventId: eventID,
		CreatedAt: spanner.CommitTimestamp,
	}
	return true, txn.BufferWrite([]*spanner.Mutation{row.Insert()})
}

// contactSQL reads an order's contact and whether a notification is recorded, in one query (one
// round trip, where two reads were).
const contactSQL = `SELECT CustomerId, Email, Language,
  EXISTS(SELECT 1 FROM Notifications WHERE EventId = @eventId AND Template = @template) AS Recorded
FROM OrderContacts WHERE OrderId = @orderId`

// Contact implements app.Repository.
func (s *Store) Contact(ctx context.Context, t app.Txn, orderID, eventID, template string) (notification.Contact, bool, error) {
	txn, err := rw(t)
	if err != nil {
		return notification.Contact{}, false, err
	}
	c := notification.Contact{OrderID: orderID}
	var recorded, found bool
	stmt := spanner.Statement{SQL: contactSQL, Params: map[string]any{"orderId": orderID, "eventId": eventID, "template": template}}
	err = txn.Query(ctx, stmt).Do(func(r *spanner.Row) error {
		found = true
		return r.Columns(&c.CustomerID, &c.Email, &c.Language, &recorded)
	})
	switch {
	case err != nil:
		return notification.Contact{}, false, fmt.Errorf("contact of order %s: %w", orderID, err)
	case !found:
		return notification.Contact{}, false, fmt.Errorf("contact of order %s: %w", orderID, notification.ErrNotFound)
	}
	return c, recorded, nil
}

// AddNotification implements app.Repository.
func (s *Store) AddNotification(ctx context.Context, t app.Txn, n *notification.Notification) error {
	txn, err := rw(t)
	if err != nil {
		return err
	}
	row := toRow(n.Snapshot())
	row.SetCommitTimestamps()
	return txn.BufferWrite([]*spanner.Mutation{row.Insert()})
}

// NotificationsOfEvent implements app.Repository.
func (s *Store) NotificationsOfEvent(ctx context.Context, eventID string) ([]*notification.Notification, error) {
	rows, err := notificationsdb.ReadNotificationRows(ctx, s.client.Single(), spanner.Key{eventID}.AsPrefix())
	if err != nil {
		return nil, err
	}
	return restoreAll(rows)
}

// Update implements app.Repository: one read of every notification the changes name, then their
// writes, in one transaction.
func (s *Store) Update(ctx context.Context, changes ...app.Change) []error {
	errs := make([]error, len(changes))
	_, err := s.client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		clear(errs)
		keys := make([]spanner.KeySet, len(changes))
		for i, c := range changes {
			keys[i] = notificationsdb.NotificationKey(c.EventID, c.Template)
		}
		rows, err := notificationsdb.ReadNotificationRows(ctx, txn, spanner.KeySets(keys...))
		if err != nil {
			return err
		}
		byKey := make(map[[2]string]*notificationsdb.Notification, len(rows))
		for _, r := range rows {
			byKey[[2]string{r.EventId, r.Template}] = r
		}
		var ms []*spanner.Mutation
		for i, c := range changes {
			m, err := change(byKey[[2]string{c.EventID, c.Template}], c)
			if err != nil {
				errs[i] = err
				continue
			}
			if m != nil {
				ms = append(ms, m)
			}
		}
		if len(ms) == 0 {
			return nil
		}
		return txn.BufferWrite(ms)
	})
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}

// change applies c to the stored row (nil: there is none) and returns the write, nil if c changed
// nothing.
func change(row *notificationsdb.Notification, c app.Change) (*spanner.Mutation, error) {
	if row == nil {
		return nil, fmt.Errorf("notification %s/%s: %w", c.EventID, c.Template, notification.ErrNotFound)
	}
	n, err := restore(row)
	if err != nil {
		return nil, err
	}
	if err := c.Apply(n); err != nil || !n.Changed() {
		return nil, err
	}
	upd := toRow(n.Snapshot())
	upd.UpdatedAt = spanner.CommitTimestamp
	return upd.UpdateColumns(notificationsdb.NotificationColStatus, notificationsdb.NotificationColAttempts,
		notificationsdb.NotificationColLastError, notificationsdb.NotificationColProviderMessageId,
		notificationsdb.NotificationColSentAt, notificationsdb.NotificationColNextAttemptAt,
		notificationsdb.NotificationColRetryShard, notificationsdb.NotificationColUpdatedAt)
}

// Due implements app.Repository: it reads every shard of NotificationsToResume up to now.
func (s *Store) Due(ctx context.Context, now time.Time, limit int) ([]*notification.Notification, error) {
	txn := s.client.ReadOnlyTransaction() // an index read is two reads
	defer txn.Close()
	ranges := make([]spanner.KeySet, Shards)
	for i := range ranges {
		ranges[i] = spanner.KeyRange{Start: spanner.Key{int64(i)}, End: spanner.Key{int64(i), now}, Kind: spanner.ClosedClosed}
	}
	rows, err := notificationsdb.ReadNotificationsToResumeKeys(ctx, txn, spanner.KeySets(ranges...), limit)
	if err != nil {
		return nil, err
	}
	ns, err := restoreAll(rows)
	if err != nil {
		return nil, err
	}
	due := ns[:0]
	for _, n := range ns {
		if n.Status() == notification.Pending {
			due = append(due, n)
		}
	}
	return due, nil
}

// NotificationsOfOrder implements app.Repository.
func (s *Store) NotificationsOfOrder(ctx context.Context, orderID string) ([]*notification.Notification, error) {
	txn := s.client.ReadOnlyTransaction() // an index read is two reads
	defer txn.Close()
	rows, err := notificationsdb.ReadNotificationsByOrder(ctx, txn, orderID)
	if err != nil {
		return nil, err
	}
	return restoreAll(rows)
}

// Column limits: the server's reply goes to ProviderMessageId STRING(128); an error is kept short.
const (
	maxReply = 128
	maxError = 2000
)

func toRow(s notification.Snapshot) *notificationsdb.Notification {
	row := &notificationsdb.Notification{
		EventId: s.EventID, Template: s.Template, OrderId: s.OrderID, Recipient: s.Recipient,
		Subject: s.Content.Subject, Body: s.Content.Text, HtmlBody: nullString(s.Content.HTML),
		Status: string(s.Status), Attempts: s.Attempts, LastError: nullString(truncate(s.LastError, maxError)),
		ProviderMessageId: nullString(truncate(s.ServerReply, maxReply)), SentAt: nullTime(s.SentAt),
		EventType: nullString(s.EventType), Language: nullString(string(s.Language)),
		MessageId: nullString(notification.MessageID(s.EventID, s.Template)), NextAttemptAt: nullTime(s.NextAttemptAt),
	}
	if !s.NextAttemptAt.IsZero() {
		row.RetryShard = spanner.NullInt64{Int64: shardOf(s.EventID), Valid: true}
	}
	return row
}

func restoreAll(rows []*notificationsdb.Notification) ([]*notification.Notification, error) {
	out := make([]*notification.Notification, 0, len(rows))
	for _, r := range rows {
		n, err := restore(r)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

func restore(r *notificationsdb.Notification) (*notification.Notification, error) {
	return notification.Restore(notification.Snapshot{
		EventID: r.EventId, EventType: r.EventType.StringVal, Template: r.Template, OrderID: r.OrderId, Recipient: r.Recipient,
		Language: notification.Language(r.Language.StringVal),
		Content:  notification.Content{Subject: r.Subject, Text: r.Body, HTML: r.HtmlBody.StringVal},
		Status:   notification.Status(r.Status), Attempts: r.Attempts, LastError: r.LastError.StringVal,
		ServerReply: r.ProviderMessageId.StringVal, CreatedAt: r.CreatedAt, SentAt: r.SentAt.Time, NextAttemptAt: r.NextAttemptAt.Time,
	})
}

func shardOf(id string) int64 {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int64(h.Sum32() % Shards)
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func nullString(s string) spanner.NullString { return spanner.NullString{StringVal: s, Valid: s != ""} }

func nullTime(t time.Time) spanner.NullTime { return spanner.NullTime{Time: t, Valid: !t.IsZero()} }
