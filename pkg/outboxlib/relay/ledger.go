package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/spanner"
	"go.uber.org/zap"

	"github.com/spanmart/spanmart/gen/dao"
	"github.com/spanmart/spanmart/gen/dao/outboxdb"
	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/outboxlib/outboxapi"
)

// The delivery ledger accounts for every (event, subscriber) pair the relay published. Marking a
// row published records the subscribers whose tasks exist (PublishedTo) and puts the row in the
// sparse OutboxUnaudited index (AuditShard). An audit pass, run by the instance holding shard 0
// of the source every LedgerInterval (or on demand, Audit), reads the oldest unaudited rows
// published at least LedgerMinAge ago and asks each subscriber (its LedgerURL, with an ID token
// for its audience) which of them it applied or dead-lettered. A pair is then
//
//   - confirmed: applied or dead-lettered (the consumer's dead letters take it from there);
//   - missing: unknown to the subscriber although the subscriber queue's retry horizon (its
//     max_retry_duration, read with GetQueue) plus LedgerGrace has passed since publication: Cloud
//     Tasks gave up on the task (a consumer answering 401 for days, a queue's limits reached). It
//     is recorded in MissingDeliveries (metric outbox_ledger_missing_deliveries) until an operator
//     replays the event with ReplayMissing;
//   - unconfirmed: unknown, still within the horizon, or the subscriber could not be asked
//     (outbox_ledger_unconfirmed_deliveries and ..._oldest_unconfirmed_age_seconds: a consumer
//     that cannot take deliveries shows here within minutes, long before the horizon).
//
// A row leaves the index when every pair is confirmed or missing. Subscribers without a LedgerURL
// are not audited. Published rows live OutboxRetention (7 days), so CheckQueues refuses a horizon
// that leaves an operator less than a day to replay a missing event before its row is deleted.

// TokenSource mints the Google ID tokens the ledger presents to consumers
// (platform.MetadataIDTokens in production: the metadata server; locally the Tasks emulator).
type TokenSource interface {
	Token(ctx context.Context, audience string) (string, error)
}

// ErrNotMissing is returned by ReplayMissing for an event without an unreplayed missing delivery.
var ErrNotMissing = errors.New("relay: no missing delivery of the event")

// ledgerOperatorMargin is the least time left between a delivery being found missing and its
// outbox row's deletion, for an operator to replay it.
const ledgerOperatorMargin = 24 * time.Hour

// ledgerEnabled reports whether r audits anything.
func (r *Relay) ledgerEnabled() bool {
	if r.cfg.Tokens == nil {
		return false
	}
	for _, sub := range r.subscribers {
		if sub.LedgerURL != "" {
			return true
		}
	}
	return false
}

// audited reports whether a row published to subs enters the ledger.
func (r *Relay) audited(subs []string) bool {
	if r.cfg.Tokens == nil {
		return false
	}
	for _, name := range subs {
		if r.subscribers[name].LedgerURL != "" {
			return true
		}
	}
	return false
}

// Audit runs one audit pass on every source now (what the scheduled loop does), for operators and
// Cloud Scheduler. It returns what it found.
func (r *Relay) Audit(ctx context.Context) ([]outboxapi.LedgerAudit, error) {
	var out []outboxapi.LedgerAudit
	for _, s := range r.sources {
		res, err := s.audit(ctx, 0)
		if err != nil {
			return nil, err
		}
		out = append(out, res)
	}
	return out, nil
}

// ledgerLoop audits the source every LedgerInterval while this instance holds its shard 0 (one
// instance audits a source at a time), its passes paced over the interval.
func (s *source) ledgerLoop(ctx context.Context) {
	t := time.NewTicker(s.r.cfg.LedgerInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, ok := s.holds(0); !ok {
			continue
		}
		if _, err := s.audit(ctx, s.r.cfg.LedgerInterval/maxAuditPasses); err != nil && ctx.Err() == nil {
			s.log.Warn("delivery ledger audit failed", zap.Error(err))
		}
	}
}

// unauditedSQL reads the oldest published rows the ledger has not settled.
const unauditedSQL = `SELECT EventId, EventType, AggregateId, PublishedTo, PublishedAt, ReplayGeneration
FROM OutboxEvents@{FORCE_INDEX=OutboxUnaudited}
WHERE AuditShard IS NOT NULL AND PublishedAt <= @cutoff
ORDER BY PublishedAt
LIMIT @limit`

type auditRow struct {
	id, typ, aggregateID string
	publishedTo          []string
	publishedAt          time.Time
	generation           int64
}

// maxAuditPasses bounds one audit: LedgerBatch rows a pass, so 25,000 rows of a source per
// LedgerInterval with the defaults. The scheduled audit paces its passes LedgerInterval /
// maxAuditPasses apart (1.2 s), so that even the most an audit can do spreads over the interval
// rather than coming as one burst of reads, consumer lookups and commits each minute.
const maxAuditPasses = 50

// settleRows is the most rows one settle transaction takes out of OutboxUnaudited. Each settle
// reads its rows and updates them (about 25 ms for 500 rows in the emulator, 4 ms for 50), and the
// emulator commits one transaction of a database at a time, so smaller transactions let the
// services' commits in between. Cloud Spanner locks only the rows, which nobody else writes a
// minute after publication, and 10 commits instead of one per pass are nothing beside the
// services' own.
const settleRows = 50

// audit settles the source's unaudited rows, oldest first, one batch a pass, until the rest fit
// one batch or a pass settles nothing (the oldest rows wait for their subscribers): a busy source
// publishes more than a batch per interval. Passes after the first wait pace (none for an audit
// asked for now), and a paced audit stops when this instance no longer holds shard 0 (the new
// holder audits from there). Rows, Confirmed and Missing add up over the passes; Unconfirmed and
// Errors are the last pass's, which saw what is still waiting at the head.
func (s *source) audit(ctx context.Context, pace time.Duration) (outboxapi.LedgerAudit, error) {
	total := outboxapi.LedgerAudit{Source: s.src.Name, Unconfirmed: map[string]outboxapi.Unconfirmed{}, Errors: map[string]string{}}
	if !s.r.ledgerEnabled() {
		return total, nil
	}
	for pass := range maxAuditPasses {
		if pass > 0 && pace > 0 {
			select {
			case <-ctx.Done():
				return total, ctx.Err()
			case <-time.After(pace):
			}
			if _, ok := s.holds(0); !ok {
				break
			}
		}
		res, settled, err := s.auditPass(ctx)
		if err != nil {
			return total, err
		}
		total.Rows += res.Rows
		total.Confirmed += res.Confirmed
		total.Missing += res.Missing
		total.Unconfirmed, total.Errors = res.Unconfirmed, res.Errors
		if res.Rows < s.r.cfg.LedgerBatch || settled == 0 {
			break
		}
	}
	return total, s.ledgerGauges(ctx, total)
}

// auditPass examines one batch of the oldest unaudited rows and settles what it can; settled is
// the number of rows it took out of the index.
func (s *source) auditPass(ctx context.Context) (res outboxapi.LedgerAudit, settled int, err error) {
	cfg := s.r.cfg
	now := time.Now()
	res = outboxapi.LedgerAudit{Source: s.src.Name, Unconfirmed: map[string]outboxapi.Unconfirmed{}, Errors: map[string]string{}}
	rows, err := s.unaudited(ctx, now.Add(-cfg.LedgerMinAge))
	if err != nil {
		return res, 0, err
	}
	res.Rows = len(rows)

	// Ask every audited subscriber about its events.
	ids := map[string][]string{}
	for _, row := range rows {
		for _, sub := range row.publishedTo {
			if s.r.subscribers[sub].LedgerURL != "" {
				ids[sub] = append(ids[sub], row.id)
			}
		}
	}
	answers := map[string]map[string]string{}
	horizons := map[string]time.Duration{}
	for sub, list := range ids {
		states, err := s.r.askLedger(ctx, s.r.subscribers[sub], list)
		if err != nil {
			res.Errors[sub] = err.Error()
			s.r.metrics.ledgerErrors.WithLabelValues(s.src.Name, sub).Inc()
			s.log.Warn("delivery ledger cannot ask a subscriber", zap.String("subscriber", sub), zap.Error(err))
			continue
		}
		answers[sub] = states
		if h, err := s.r.retryHorizon(ctx, s.r.subscribers[sub]); err == nil {
			horizons[sub] = h
		} else {
			s.log.Warn("delivery ledger cannot read a subscriber queue's retry horizon; nothing is declared missing", zap.String("subscriber", sub), zap.Error(err))
		}
	}

	// Classify each pair; a row is settled when none is unconfirmed.
	var done []auditRow
	var missing []outboxdb.MissingDelivery
	for _, row := range rows {
		complete := true
		var rowMissing []outboxdb.MissingDelivery
		for _, sub := range row.publishedTo {
			if s.r.subscribers[sub].LedgerURL == "" {
				continue // not audited (no ledger endpoint, or no longer routed)
			}
			state, asked := answers[sub][row.id]
			horizon, known := horizons[sub]
			switch {
			case asked && state != outboxlib.DeliveryUnknown:
				res.Confirmed++
			case asked && known && now.Sub(row.publishedAt) > horizon+cfg.LedgerGrace:
				rowMissing = append(rowMissing, outboxdb.MissingDelivery{
					EventId: row.id, Subscriber: sub, EventType: row.typ, AggregateId: row.aggregateID,
					ReplayGeneration: row.generation, PublishedAt: row.publishedAt, DetectedAt: spanner.CommitTimestamp,
				})
			default:
				complete = false
				u := res.Unconfirmed[sub]
				u.Count++
				u.OldestAgeSeconds = max(u.OldestAgeSeconds, now.Sub(row.publishedAt).Seconds())
				res.Unconfirmed[sub] = u
			}
		}
		if complete {
			done = append(done, row)
			missing = append(missing, rowMissing...)
		}
	}
	for start := 0; start < len(done); start += settleRows {
		chunk := done[start:min(start+settleRows, len(done))]
		chunkMissing := missingOf(chunk, missing)
		if err := s.settle(ctx, chunk, chunkMissing); err != nil {
			return res, start, err
		}
		res.Missing += len(chunkMissing)
		for _, m := range chunkMissing {
			s.log.Error("delivery missing: the subscriber never applied the event and its queue gave up",
				zap.String("event_id", m.EventId), zap.String("event_type", m.EventType), zap.String("subscriber", m.Subscriber),
				zap.Time("published_at", m.PublishedAt))
		}
	}
	return res, len(done), nil
}

// unaudited reads the oldest unsettled published rows committed before cutoff.
func (s *source) unaudited(ctx context.Context, cutoff time.Time) ([]auditRow, error) {
	stmt := spanner.Statement{SQL: unauditedSQL, Params: map[string]any{"cutoff": cutoff, "limit": int64(s.r.cfg.LedgerBatch)}}
	var rows []auditRow
	err := s.src.Client.Single().Query(ctx, stmt).Do(func(r *spanner.Row) error {
		var (
			row       auditRow
			published []spanner.NullString
		)
		if err := r.Columns(&row.id, &row.typ, &row.aggregateID, &published, &row.publishedAt, &row.generation); err != nil {
			return err
		}
		for _, p := range published {
			if p.Valid {
				row.publishedTo = append(row.publishedTo, p.StringVal)
			}
		}
		rows = append(rows, row)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("delivery ledger: read unaudited rows of %s: %w", s.src.Name, err)
	}
	return rows, nil
}

// missingOf returns the deliveries of missing that belong to rows.
func missingOf(rows []auditRow, missing []outboxdb.MissingDelivery) []outboxdb.MissingDelivery {
	in := map[string]bool{}
	for _, row := range rows {
		in[row.id] = true
	}
	var out []outboxdb.MissingDelivery
	for _, m := range missing {
		if in[m.EventId] {
			out = append(out, m)
		}
	}
	return out
}

// settle takes settled rows out of OutboxUnaudited and records their missing deliveries, in one
// transaction; a row replayed or re-published since the scan is left for the next pass.
func (s *source) settle(ctx context.Context, rows []auditRow, missing []outboxdb.MissingDelivery) error {
	if len(rows) == 0 {
		return nil
	}
	keys := spanner.KeySets()
	want := map[string]auditRow{}
	for _, row := range rows {
		keys = spanner.KeySets(keys, outboxdb.OutboxEventKey(row.id))
		want[row.id] = row
	}
	_, err := s.src.Client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		still := map[string]bool{}
		err := txn.Read(ctx, outboxdb.OutboxEventsTable, keys, []string{outboxdb.OutboxEventColEventId,
			outboxdb.OutboxEventColAuditShard, outboxdb.OutboxEventColReplayGeneration, outboxdb.OutboxEventColPublishedAt}).Do(func(r *spanner.Row) error {
			var (
				id        string
				audit     spanner.NullInt64
				gen       int64
				published spanner.NullTime
			)
			if err := r.Columns(&id, &audit, &gen, &published); err != nil {
				return err
			}
			w := want[id]
			still[id] = audit.Valid && gen == w.generation && published.Valid && published.Time.Equal(w.publishedAt)
			return nil
		})
		if err != nil {
			return err
		}
		var ms []*spanner.Mutation
		for _, row := range rows {
			if still[row.id] {
				ms = append(ms, spanner.Update(outboxdb.OutboxEventsTable,
					[]string{outboxdb.OutboxEventColEventId, outboxdb.OutboxEventColAuditShard}, []any{row.id, spanner.NullInt64{}}))
			}
		}
		for i := range missing {
			if still[missing[i].EventId] {
				ms = append(ms, missing[i].InsertOrUpdate())
			}
		}
		return txn.BufferWrite(ms)
	})
	if err != nil {
		return fmt.Errorf("delivery ledger: settle %d rows of %s: %w", len(rows), s.src.Name, err)
	}
	return nil
}

// missingCountSQL counts the unreplayed missing deliveries per subscriber.
const missingCountSQL = `SELECT Subscriber, COUNT(*) FROM MissingDeliveries WHERE ReplayedAt IS NULL GROUP BY Subscriber`

// ledgerGauges sets the ledger's gauges of the source from a pass and MissingDeliveries.
func (s *source) ledgerGauges(ctx context.Context, res outboxapi.LedgerAudit) error {
	m := s.r.metrics
	missing := map[string]int64{}
	err := s.src.Client.Single().Query(ctx, spanner.Statement{SQL: missingCountSQL}).Do(func(r *spanner.Row) error {
		var (
			sub string
			n   int64
		)
		if err := r.Columns(&sub, &n); err != nil {
			return err
		}
		missing[sub] = n
		return nil
	})
	if err != nil {
		return fmt.Errorf("delivery ledger: count missing deliveries of %s: %w", s.src.Name, err)
	}
	for name, sub := range s.r.subscribers {
		if sub.LedgerURL == "" {
			continue
		}
		u := res.Unconfirmed[name]
		m.ledgerUnconfirmed.WithLabelValues(s.src.Name, name).Set(float64(u.Count))
		m.ledgerOldest.WithLabelValues(s.src.Name, name).Set(u.OldestAgeSeconds)
		m.ledgerMissing.WithLabelValues(s.src.Name, name).Set(float64(missing[name]))
	}
	return nil
}

// askLedger asks sub which of ids it applied or dead-lettered (outboxlib.PathLedger).
func (r *Relay) askLedger(ctx context.Context, sub Subscriber, ids []string) (map[string]string, error) {
	out := map[string]string{}
	for start := 0; start < len(ids); start += outboxlib.MaxLedgerLookup {
		chunk := ids[start:min(start+outboxlib.MaxLedgerLookup, len(ids))]
		body, err := json.Marshal(outboxlib.LedgerRequest{EventIDs: chunk})
		if err != nil {
			return nil, err
		}
		token, err := r.cfg.Tokens.Token(ctx, sub.Audience)
		if err != nil {
			return nil, fmt.Errorf("id token for %s: %w", sub.Audience, err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, sub.LedgerURL, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := r.cfg.HTTPClient.Do(req)
		if err != nil {
			return nil, fmt.Errorf("ask %s: %w", sub.LedgerURL, err)
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("ask %s: %w", sub.LedgerURL, err)
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("ask %s: %s: %.200s", sub.LedgerURL, resp.Status, data)
		}
		var answer outboxlib.LedgerResponse
		if err := json.Unmarshal(data, &answer); err != nil {
			return nil, fmt.Errorf("ask %s: answer: %w", sub.LedgerURL, err)
		}
		for _, id := range chunk {
			state, ok := answer.Deliveries[id]
			if !ok {
				return nil, fmt.Errorf("ask %s: no answer about %s", sub.LedgerURL, id)
			}
			out[id] = state
		}
	}
	return out, nil
}

// retryHorizon is how long the longest of sub's queues may go on retrying a task (LedgerHorizon when
// set): a delivery is missing only once every queue it could be in would have given up.
func (r *Relay) retryHorizon(ctx context.Context, sub Subscriber) (time.Duration, error) {
	if r.cfg.LedgerHorizon > 0 {
		return r.cfg.LedgerHorizon, nil
	}
	var longest time.Duration
	for _, queue := range sub.Queues {
		cctx, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout)
		q, err := r.cfg.Tasks.GetQueue(cctx, &cloudtaskspb.GetQueueRequest{Name: queue})
		cancel()
		if err != nil {
			return 0, err
		}
		longest = max(longest, redeliveryWindow(q.GetRetryConfig()))
	}
	return longest, nil
}

// checkLedgerHorizon refuses a queue whose deliveries the ledger would find missing too late for
// an operator to replay them before the outbox TTL deletes their rows.
func (r *Relay) checkLedgerHorizon(queue string, rc *cloudtaskspb.RetryConfig) error {
	if !r.ledgerEnabled() {
		return nil
	}
	h := redeliveryWindow(rc)
	if r.cfg.LedgerHorizon > 0 {
		h = r.cfg.LedgerHorizon
	}
	latest := h + r.cfg.LedgerGrace + r.cfg.LedgerMinAge + r.cfg.LedgerInterval
	if latest+ledgerOperatorMargin > outboxlib.OutboxRetention {
		return fmt.Errorf("relay: queue %s: the delivery ledger would find a lost delivery %s after publication, less than %s before the outbox deletes the row (%s)",
			queue, latest, ledgerOperatorMargin, outboxlib.OutboxRetention)
	}
	return nil
}

// Missing lists the missing deliveries of source, newest first: only those not replayed unless
// all; at most limit (default and cap 1000).
func (r *Relay) Missing(ctx context.Context, sourceName string, all bool, limit int) ([]outboxapi.MissingDelivery, error) {
	s, err := r.source(sourceName)
	if err != nil {
		return nil, err
	}
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	sql := "SELECT * FROM MissingDeliveries"
	if !all {
		sql += " WHERE ReplayedAt IS NULL"
	}
	sql += " ORDER BY DetectedAt DESC, EventId, Subscriber LIMIT @limit"
	out := []outboxapi.MissingDelivery{}
	err = s.src.Client.Single().Query(ctx, spanner.Statement{SQL: sql, Params: map[string]any{"limit": int64(limit)}}).Do(func(row *spanner.Row) error {
		var m outboxdb.MissingDelivery
		if err := row.ToStruct(&m); err != nil {
			return err
		}
		md := outboxapi.MissingDelivery{
			Source: sourceName, EventID: m.EventId, Subscriber: m.Subscriber, EventType: m.EventType, AggregateID: m.AggregateId,
			ReplayGeneration: m.ReplayGeneration, PublishedAt: m.PublishedAt, DetectedAt: m.DetectedAt, ReplayReason: m.ReplayReason.StringVal,
		}
		if m.ReplayedAt.Valid {
			t := m.ReplayedAt.Time
			md.ReplayedAt = &t
		}
		out = append(out, md)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("relay: missing deliveries of %s: %w", sourceName, err)
	}
	return out, nil
}

// ReplayMissing replays an event the ledger found missing (Replay: the outbox row is queued again
// under its id, to every subscriber of its type; those that applied it already get a duplicate,
// which their inbox absorbs) and marks its missing deliveries replayed with reason, in the same
// transaction. ErrNotMissing when the event has no unreplayed missing delivery.
func (r *Relay) ReplayMissing(ctx context.Context, sourceName, eventID, reason string) error {
	return r.replay(ctx, sourceName, eventID, reason, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		rows, err := outboxdb.ReadMissingDeliveryRows(ctx, txn, spanner.Key{eventID}.AsPrefix())
		if err != nil && !errors.Is(err, dao.ErrNotFound) {
			return err
		}
		var ms []*spanner.Mutation
		for _, m := range rows {
			if m.ReplayedAt.Valid {
				continue
			}
			m.ReplayedAt = dao.NullCommitTimestamp
			m.ReplayReason = spanner.NullString{StringVal: reason, Valid: true}
			who := outboxlib.OperatorOf(ctx)
			m.ReplayedBy = spanner.NullString{StringVal: who, Valid: who != ""}
			mut, err := m.UpdateColumns(outboxdb.MissingDeliveryColReplayedAt, outboxdb.MissingDeliveryColReplayReason, outboxdb.MissingDeliveryColReplayedBy)
			if err != nil {
				return err
			}
			ms = append(ms, mut)
		}
		if len(ms) == 0 {
			return fmt.Errorf("%w %s in %s", ErrNotMissing, eventID, sourceName)
		}
		return txn.BufferWrite(ms)
	})
}
