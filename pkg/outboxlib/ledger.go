package outboxlib

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"cloud.google.com/go/spanner"
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/spanmart/spanmart/gen/dao/outboxdb"
	"github.com/spanmart/spanmart/pkg/platform"
)

// States of a delivery as a consumer reports it to the delivery ledger.
const (
	DeliveryApplied      = "applied"       // in the inbox (ProcessedEvents) and not a pending dead letter
	DeliveryDeadLettered = "dead_lettered" // parked in DeadLetters, not replayed yet
	DeliveryUnknown      = "unknown"       // never recorded: still on its way, or lost
)

// MaxLedgerLookup is the most event ids one ledger question may carry.
const MaxLedgerLookup = 500

// LedgerRequest is the body of POST /admin/ledger.
type LedgerRequest struct {
	EventIDs []string `json:"event_ids"`
}

// LedgerResponse is its answer: every asked id with its state.
type LedgerResponse struct {
	Consumer   string            `json:"consumer"`
	Deliveries map[string]string `json:"deliveries"`
}

// Lookup tells, for each event id, whether this consumer applied it, dead-lettered it or never
// recorded it, from one consistent snapshot of its inbox and dead letters (key reads only). It is
// the consumer's side of the delivery ledger: the relay asks, the consumer's database stays its own.
func (c *Consumer) Lookup(ctx context.Context, eventIDs []string) (map[string]string, error) {
	out := make(map[string]string, len(eventIDs))
	if len(eventIDs) == 0 {
		return out, nil
	}
	inbox, dead := spanner.KeySets(), spanner.KeySets()
	for _, id := range eventIDs {
		out[id] = DeliveryUnknown
		inbox = spanner.KeySets(inbox, outboxdb.ProcessedEventKey(id, c.cfg.Name))
		dead = spanner.KeySets(dead, outboxdb.DeadLetterKey(id, c.cfg.Name))
	}
	txn := c.cfg.Client.ReadOnlyTransaction()
	defer txn.Close()
	err := txn.Read(ctx, outboxdb.ProcessedEventsTable, inbox, []string{outboxdb.ProcessedEventColEventId}).Do(func(r *spanner.Row) error {
		var id string
		if err := r.Columns(&id); err != nil {
			return err
		}
		out[id] = DeliveryApplied
		return nil
	})
	if err == nil {
		err = txn.Read(ctx, outboxdb.DeadLettersTable, dead, []string{outboxdb.DeadLetterColEventId, outboxdb.DeadLetterColReplayedAt}).Do(func(r *spanner.Row) error {
			var (
				id       string
				replayed spanner.NullTime
			)
			if err := r.Columns(&id, &replayed); err != nil {
				return err
			}
			if !replayed.Valid {
				out[id] = DeliveryDeadLettered
			}
			return nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("ledger lookup of %d events in %s: %w", len(eventIDs), c.cfg.Name, err)
	}
	return out, nil
}

// serveLedger is POST /admin/ledger: authenticated like a delivery (the relay's OIDC token).
func (c *Consumer) serveLedger(ec echo.Context) error {
	log := platform.Logger(ec.Request().Context()).With(zap.String("consumer", c.cfg.Name))
	if err := c.verify(ec, log); err != nil {
		return err
	}
	var req LedgerRequest
	dec := json.NewDecoder(ec.Request().Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return err
		}
		return platform.NewProblem(http.StatusBadRequest, `body must be a JSON object {"event_ids": [...]}`).Wrap(err)
	}
	if len(req.EventIDs) > MaxLedgerLookup {
		return platform.NewProblem(http.StatusBadRequest, fmt.Sprintf("at most %d event ids per lookup, got %d", MaxLedgerLookup, len(req.EventIDs)))
	}
	for _, id := range req.EventIDs {
		if _, err := uuid.Parse(id); err != nil || len(id) != 36 {
			return platform.NewProblem(http.StatusBadRequest, fmt.Sprintf("event id %q is not a UUID", truncate(id, 64)))
		}
	}
	states, err := c.Lookup(ec.Request().Context(), req.EventIDs)
	if err != nil {
		return err
	}
	return ec.JSON(http.StatusOK, LedgerResponse{Consumer: c.cfg.Name, Deliveries: states})
}
