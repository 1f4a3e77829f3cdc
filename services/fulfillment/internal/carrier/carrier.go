// Package carrier is the simulated carrier of the dev stack and the drills: a loop in the service
// that plays the warehouse, shipping PENDING shipments once they are older than a delay, so that
// orders complete without anyone calling POST /v1/shipments/{id}/ship. It goes through the same
// use cases as the HTTP actions (app.Service.Ship and Fail), so everything it does is what a
// warehouse could do. A shipment with a SKU listed in FailSKUs fails instead (reason
// carrier_rejected), which lets a drill or the demo make a shipment fail on purpose. The shipments
// it moves record Actor as who shipped or failed them: it acts as the service itself, with no
// request and so no verified account.
//
// It is off in production (CARRIER_SIMULATE_AFTER unset or 0).
package carrier

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/spanmart/spanmart/services/fulfillment/internal/shipment"
)

// Name is the carrier the simulator ships with.
const Name = "spanmart-sim"

// Actor is who the simulator is on the shipments it ships or fails (ShippedBy, FailedBy). It is no
// e-mail address, so no account allowed on the warehouse's API (WAREHOUSE_ALLOWED_EMAILS, which
// takes addresses only) can be recorded as it.
const Actor = "carrier-simulator"

// DefaultBatch is how many shipments one tick handles at most.
const DefaultBatch = 20

// actionTimeout bounds the ship or fail of one shipment.
const actionTimeout = 10 * time.Second

// Shipments is what the simulator needs of the use cases; *app.Service implements it.
type Shipments interface {
	PendingShipments(ctx context.Context, createdBefore time.Time, limit int) ([]*shipment.Shipment, error)
	Ship(ctx context.Context, id, carrier, trackingNumber, by string) (*shipment.Shipment, bool, error)
	Fail(ctx context.Context, id, reason, by string) (*shipment.Shipment, bool, error)
}

// Simulator ships PENDING shipments older than After.
type Simulator struct {
	Shipments Shipments
	// After is how old a PENDING shipment must be before the simulator handles it; it must be
	// positive.
	After time.Duration
	// FailSKUs: a shipment with one of these SKUs fails (carrier_rejected) instead of shipping.
	FailSKUs []string
	// Batch bounds the shipments of one tick; 0 means DefaultBatch.
	Batch int
	Log   *zap.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// TrackingNumber is the tracking number the simulator gives a shipment: derived from its id, so
// that a tick that runs again after a crash sends the same request (which the use case answers as
// a repeat) rather than a conflicting one.
func TrackingNumber(shipmentID string) string {
	hex := strings.ReplaceAll(shipmentID, "-", "")
	if len(hex) > 10 {
		hex = hex[:10]
	}
	return "SIM" + strings.ToUpper(hex)
}

// Interval is how often Run ticks for a delay of after: a quarter of it, between 10 ms and 5 s, so
// a shipment is handled soon after it is due without polling a slow delay often.
func Interval(after time.Duration) time.Duration {
	return min(max(after/4, 10*time.Millisecond), 5*time.Second)
}

// Run ticks until ctx is done, then returns once the shipment in hand (if any) is handled.
func (s *Simulator) Run(ctx context.Context) {
	log := s.log()
	log.Info("carrier simulation on", zap.Duration("after", s.After), zap.Strings("fail_skus", s.FailSKUs))
	t := time.NewTicker(Interval(s.After))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			log.Info("carrier simulation stopped")
			return
		case <-t.C:
		}
		if _, err := s.Tick(ctx); err != nil && ctx.Err() == nil { // a stop is no failure
			log.Warn("carrier simulation tick", zap.Error(err))
		}
	}
}

// Tick handles the PENDING shipments that are due, the oldest Batch of them, a few at once, and
// returns how many it moved. A shipment that moved on meanwhile (cancelled, or handled by the
// warehouse) is skipped; one that could not be handled is logged and tried again on the next
// tick. The error is that of reading the due shipments, or ctx's once it is done.
func (s *Simulator) Tick(ctx context.Context) (int, error) {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	batch := s.Batch
	if batch <= 0 {
		batch = DefaultBatch
	}
	due, err := s.Shipments.PendingShipments(ctx, now().Add(-s.After), batch)
	if err != nil {
		return 0, err
	}
	// The due shipments go concurrently, a few at a time, as a warehouse's packers would: one
	// after the other, a tick moved one shipment per transaction's latency, which under load
	// (about 100 ms each) capped shipping below the rate orders were confirmed at.
	var (
		moved atomic.Int64
		wg    sync.WaitGroup
		slots = make(chan struct{}, concurrency)
	)
	for _, sh := range due {
		if ctx.Err() != nil {
			break
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if s.handle(ctx, sh) {
				moved.Add(1)
			}
		})
	}
	wg.Wait()
	return int(moved.Load()), ctx.Err()
}

// concurrency bounds the shipments one tick handles at once.
const concurrency = 8

// handle ships (or fails) one due shipment and reports whether it changed.
func (s *Simulator) handle(ctx context.Context, sh *shipment.Shipment) bool {
	log := s.log()
	var (
		changed bool
		err     error
		fields  = []zap.Field{zap.String("shipment_id", sh.ID()), zap.String("order_id", sh.OrderID())}
	)
	// A stop lets the shipment in hand finish (and be logged) rather than cut it short.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), actionTimeout)
	defer cancel()
	if sku, fail := s.failing(sh); fail {
		_, changed, err = s.Shipments.Fail(actx, sh.ID(), shipment.ReasonCarrierRejected, Actor)
		fields = append(fields, zap.String("action", "fail"), zap.String("reason", shipment.ReasonCarrierRejected), zap.String("sku", sku))
	} else {
		tracking := TrackingNumber(sh.ID())
		_, changed, err = s.Shipments.Ship(actx, sh.ID(), Name, tracking, Actor)
		fields = append(fields, zap.String("action", "ship"), zap.String("carrier", Name), zap.String("tracking_number", tracking))
	}
	switch {
	case errors.Is(err, shipment.ErrIllegalTransition), errors.Is(err, shipment.ErrConflict), errors.Is(err, shipment.ErrNotFound):
		log.Info("carrier simulation: shipment moved on, skipped", append(fields, zap.Error(err))...)
	case err != nil:
		// Not the caller's doing, and perhaps this shipment's only: the others still go.
		log.Warn("carrier simulation: shipment not handled", append(fields, zap.Error(err))...)
	case changed:
		log.Info("carrier simulation", fields...)
		return true
	}
	return false
}

// failing reports whether sh has a SKU the simulated carrier rejects, and which.
func (s *Simulator) failing(sh *shipment.Shipment) (string, bool) {
	for _, l := range sh.Lines() {
		for _, sku := range s.FailSKUs {
			if l.SKU == sku {
				return sku, true
			}
		}
	}
	return "", false
}

func (s *Simulator) log() *zap.Logger {
	if s.Log == nil {
		return zap.NewNop()
	}
	return s.Log.Named("carrier")
}
