package outboxlib

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/labstack/echo/v4"
	"go.uber.org/zap"
	"google.golang.org/api/iterator"

	"github.com/spanmart/spanmart/gen/dao"
	"github.com/spanmart/spanmart/gen/dao/outboxdb"
	"github.com/spanmart/spanmart/pkg/outboxlib/outboxapi"
	"github.com/spanmart/spanmart/pkg/platform"
)

func deadLetterFromRow(r *outboxdb.DeadLetter) outboxapi.DeadLetter {
	d := outboxapi.DeadLetter{
		EventID: r.EventId, EventType: r.EventType, Source: r.Source, Attempts: r.Attempts,
		LastError: r.LastError, DeadAt: r.DeadAt, ReplayReason: r.ReplayReason.StringVal,
		ReplayedBy: r.ReplayedBy.StringVal,
	}
	d.Attributes, _ = attributesOf(r)
	if json.Valid(r.Body) {
		d.Body = json.RawMessage(r.Body)
	} else {
		d.BodyBytes = r.Body
	}
	if r.ReplayedAt.Valid {
		t := r.ReplayedAt.Time
		d.ReplayedAt = &t
	}
	return d
}

// attributesOf decodes the Attributes column (a JSON object of strings).
func attributesOf(r *outboxdb.DeadLetter) (map[string]string, error) {
	var raw []byte
	switch v := r.Attributes.Value.(type) {
	case json.RawMessage:
		raw = v
	case []byte:
		raw = v
	case string:
		raw = []byte(v)
	default:
		var err error
		if raw, err = json.Marshal(v); err != nil {
			return nil, err
		}
	}
	m := map[string]string{}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("dead letter %s: attributes: %w", r.EventId, err)
	}
	return m, nil
}

// DeadLetters lists this consumer's dead letters, newest first: only those not yet replayed unless
// includeReplayed; at most limit (default and cap outboxapi.MaxDeadLettersListed).
func (c *Consumer) DeadLetters(ctx context.Context, includeReplayed bool, limit int) ([]outboxapi.DeadLetter, error) {
	if limit <= 0 || limit > outboxapi.MaxDeadLettersListed {
		limit = outboxapi.MaxDeadLettersListed
	}
	sql := "SELECT " + strings.Join(outboxdb.DeadLetterColumns(), ", ") + " FROM " + outboxdb.DeadLettersTable +
		" WHERE Consumer = @consumer"
	if !includeReplayed {
		sql += " AND ReplayedAt IS NULL"
	}
	sql += " ORDER BY DeadAt DESC, EventId LIMIT @limit"
	it := c.cfg.Client.Single().Query(ctx, spanner.Statement{SQL: sql, Params: map[string]any{"consumer": c.cfg.Name, "limit": int64(limit)}})
	defer it.Stop()
	out := []outboxapi.DeadLetter{}
	for {
		row, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list dead letters of %s: %w", c.cfg.Name, err)
		}
		var r outboxdb.DeadLetter
		if err := row.ToStruct(&r); err != nil {
			return nil, fmt.Errorf("list dead letters of %s: %w", c.cfg.Name, err)
		}
		out = append(out, deadLetterFromRow(&r))
	}
}

// ReplayDeadLetter runs the handler on a dead-lettered event, once its cause is fixed, and marks
// the dead letter replayed with the reason and who asked, all in one read-write transaction: the
// handler's writes, the aggregate's new version, a refreshed ProcessedEvents row and the
// ReplayedAt/ReplayReason/ReplayedBy columns commit together or not at all. The version check
// applies as for a delivery: if a later version of the aggregate was applied meanwhile, the handler
// is skipped (the replay still counts as done, reported as stale). A handler error is returned
// (wrapping ErrEarly or a Permanent error as the handler made it) and nothing changes; a second
// replay of the same dead letter is ErrAlreadyReplayed.
func (c *Consumer) ReplayDeadLetter(ctx context.Context, eventID, reason, by string) error {
	_, err := c.replay(ctx, eventID, reason, by)
	return err
}

func (c *Consumer) replay(ctx context.Context, eventID, reason, by string) (string, error) {
	if strings.TrimSpace(reason) == "" {
		return "", errors.New("outboxlib: a replay needs a reason")
	}
	log := platform.Logger(ctx).With(zap.String("consumer", c.cfg.Name), zap.String("event_id", eventID),
		zap.String("replayed_by", by))
	var (
		outcome string
		d       Delivery
		spec    handlerSpec
	)
	commitTS, rec, err := c.handlerTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		row, err := outboxdb.ReadDeadLetter(ctx, txn, eventID, c.cfg.Name)
		if errors.Is(err, dao.ErrNotFound) {
			return fmt.Errorf("%w: %s", ErrDeadLetterNotFound, eventID)
		}
		if err != nil {
			return err
		}
		if row.ReplayedAt.Valid {
			return fmt.Errorf("%w: %s at %s by %s", ErrAlreadyReplayed, eventID, row.ReplayedAt.Time.Format(time.RFC3339), row.ReplayedBy.StringVal)
		}
		attrs, err := attributesOf(row)
		if err != nil {
			return err
		}
		h := http.Header{}
		for k, v := range attrs {
			h.Set(k, v)
		}
		ev, err := ParseRequest(h, row.Body)
		if err != nil {
			return Permanent(err)
		}
		handler, ok := c.handlers[ev.Type]
		if !ok {
			return fmt.Errorf("%w: consumer %s has no handler for %q", ErrNoHandler, c.cfg.Name, ev.Type)
		}
		spec = handler
		pred, err := predecessorOf(h, ev.AggregateVersion)
		if err != nil {
			return Permanent(err)
		}
		d = Delivery{Event: ev, Attempt: int(row.Attempts), Predecessor: pred}
		// The dead letter wrote the inbox row; a replay is the one sanctioned second application.
		// Rewrite it (a fresh ProcessedAt also restarts its retention) rather than insert-or-ignore.
		inbox := outboxdb.ProcessedEvent{EventId: ev.ID, Consumer: c.cfg.Name, ProcessedAt: spanner.CommitTimestamp}
		if outcome, err = c.applyRecorded(ctx, txn, handler, d); err != nil {
			return err
		}
		row.ReplayedAt = dao.NullCommitTimestamp
		row.ReplayReason = spanner.NullString{StringVal: reason, Valid: true}
		row.ReplayedBy = spanner.NullString{StringVal: by, Valid: by != ""}
		mark, err := row.UpdateColumns(outboxdb.DeadLetterColReplayedAt, outboxdb.DeadLetterColReplayReason, outboxdb.DeadLetterColReplayedBy)
		if err != nil {
			return err
		}
		return txn.BufferWrite([]*spanner.Mutation{inbox.InsertOrUpdate(), mark})
	})
	if err != nil {
		log.Warn("dead letter replay failed", zap.Error(err))
		return "", err
	}
	rec.committed()
	if len(rec.notes) > 0 {
		log = log.With(zap.Strings("notes", rec.notes))
	}
	c.cfg.Nudger.Nudge(ctx, rec.shards...)
	log.Info("dead letter replayed", zap.String("outcome", outcome), zap.String("event_type", d.Type),
		zap.String("aggregate_id", d.AggregateID), zap.String("replay_reason", reason))
	c.metrics.replays.WithLabelValues(c.cfg.Name, d.Type, outcome).Inc()
	if outcome == OutcomeApplied {
		c.metrics.lag.WithLabelValues(c.cfg.Name, d.Type).Observe(commitTS.Sub(d.committed()).Seconds())
	}
	// The handler's side effect (After) runs now as it would have after a delivery; the replay is
	// done either way: an unfinished effect is left to its owner's sweep, as after a delivery the
	// queue gave up on.
	if spec.after != nil && (outcome == OutcomeApplied || outcome == OutcomeDuplicate) {
		if err := spec.after(ctx, rec.forAfter(d, outcome, commitTS)); err != nil {
			c.metrics.effects.WithLabelValues(c.cfg.Name, d.Type, "failed").Inc()
			log.Warn("dead letter replayed; its side effect is not finished (the owner's sweep resumes it)", zap.Error(err))
		} else {
			c.metrics.effects.WithLabelValues(c.cfg.Name, d.Type, "done").Inc()
		}
	}
	return outcome, nil
}

func (c *Consumer) serveDeadLetters(ec echo.Context) error {
	all, _ := strconv.ParseBool(ec.QueryParam("all"))
	limit, _ := strconv.Atoi(ec.QueryParam("limit"))
	list, err := c.DeadLetters(ec.Request().Context(), all, limit)
	if err != nil {
		return err
	}
	return ec.JSON(http.StatusOK, outboxapi.DeadLetterList{DeadLetters: list})
}

// serveReplay is POST /admin/deadletters/:id/replay, body outboxapi.ReplayRequest. Who replays is
// the operator whose token the request carries.
func (c *Consumer) serveReplay(ec echo.Context) error {
	var body outboxapi.ReplayRequest
	dec := json.NewDecoder(ec.Request().Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		return platform.NewProblem(http.StatusBadRequest, "body must be a JSON object {\"reason\": \"...\"}").Wrap(err)
	}
	if strings.TrimSpace(body.Reason) == "" {
		return platform.NewProblem(http.StatusBadRequest, "reason is required")
	}
	by := OperatorOf(ec.Request().Context())
	outcome, err := c.replay(ec.Request().Context(), ec.Param("id"), body.Reason, truncate(by, 128))
	switch {
	case err == nil:
		return ec.JSON(http.StatusOK, outboxapi.ReplayOutcome{Outcome: outcome})
	case errors.Is(err, ErrDeadLetterNotFound):
		return platform.NewProblem(http.StatusNotFound, err.Error())
	case errors.Is(err, ErrAlreadyReplayed), errors.Is(err, ErrEarly), errors.Is(err, ErrNoHandler):
		return platform.NewProblem(http.StatusConflict, err.Error())
	case IsPermanent(err):
		return platform.NewProblem(http.StatusUnprocessableEntity, err.Error())
	default:
		return err
	}
}
