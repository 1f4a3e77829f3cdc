// Package app holds the fulfillment service's use cases: deciding an order's stock (reserve all
// lines or none), answering its cancellation (release the stock, cancel a pending shipment, or
// report that it already shipped), creating the shipment of a confirmed order, the warehouse's
// actions on a shipment (ship, fail), and the reads behind the public API. It declares what it
// needs from the outside (Repository, Tx, Nudger) and knows nothing of HTTP or Spanner; the
// events it publishes and their payloads are in published.go.
//
// Two kinds of use case, two kinds of transaction, as in the orders service. The warehouse's
// actions (Ship, Fail) let the Repository open and commit a transaction of their own, then nudge
// the relay. The event use cases (Reserve, Cancel, CreateShipment) run inside the transaction the
// event consumer (pkg/outboxlib) opened, which also records the inbox row and the aggregate
// version, so fulfillment's change, its outbox events and the "this event was applied" record
// commit together or not at all. Such a use case takes that transaction as a Txn, an opaque value
// it never looks into, and hands it back to Repository.UpdateInTxn, which knows what it is (the
// store: a *spanner.ReadWriteTransaction). Either way the decisions are made in a closure over a
// Tx (the repository bound to that one transaction); the client may run the closure more than
// once, so it only reads and buffers writes, and what it decided (notes, metrics) is published
// only after the commit.
package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/spanmart/spanmart/services/fulfillment/internal/inventory"
	"github.com/spanmart/spanmart/services/fulfillment/internal/shipment"
)

// MaxOrderIDLen is the longest order id (OrderReservations.OrderId is STRING(36)).
const MaxOrderIDLen = 36

// Txn is a read-write transaction that the caller opened and will commit: the event consumer's,
// in which it also records the inbox row. The use cases never look inside it; they pass it to
// Repository.UpdateInTxn, whose implementation knows its type (the store takes a
// *spanner.ReadWriteTransaction and refuses anything else). It is an empty interface so that this
// package needs no Spanner import.
type Txn any

// Tx is the repository bound to one read-write transaction. Reads lock what they read until the
// commit, so two transactions deciding about the same rows serialize; writes are buffered and
// commit with the transaction.
type Tx interface {
	// Reservation returns an order's reservation and its shipment (nil while it has none), read at
	// once; inventory.ErrNotFound if the order was never decided (its order.created has not been
	// applied).
	Reservation(ctx context.Context, orderID string) (*inventory.Reservation, *shipment.Shipment, error)
	// Stock returns the stock of the SKUs that exist among skus, in SKU order.
	Stock(ctx context.Context, skus []string) ([]inventory.Stock, error)
	// StockUnlessDecided reports whether the order was decided (it has a reservation) and, if not,
	// returns what Stock returns for skus: both in one read, the stock locked as Stock locks it.
	StockUnlessDecided(ctx context.Context, orderID string, skus []string) (decided bool, stock []inventory.Stock, err error)
	// Shipment returns a shipment with its lines and its order's reservation (nil if there is
	// none), read at once; shipment.ErrNotFound if there is no such shipment.
	Shipment(ctx context.Context, id string) (*shipment.Shipment, *inventory.Reservation, error)
	// SaveReservation writes r (inserted with its lines when created; otherwise its status and
	// version, and its lines' status when that changed).
	SaveReservation(ctx context.Context, r *inventory.Reservation, created bool) error
	// SaveStock writes the levels of stock (OnHand and Reserved).
	SaveStock(ctx context.Context, stock ...inventory.Stock) error
	// SaveShipment writes s (inserted when created); the commit timestamp becomes its
	// CreatedAt, UpdatedAt and, when it becomes SHIPPED, ShippedAt.
	SaveShipment(ctx context.Context, s *shipment.Shipment, created bool) error
	// Append adds events to the outbox.
	Append(ctx context.Context, events ...Event) error
}

// Repository is the persistence the use cases need.
type Repository interface {
	// Update runs fn in a new read-write transaction, commits it and returns its commit
	// timestamp. fn may run more than once (the client retries aborted transactions): it must have
	// no effect outside tx. Its error is returned unchanged (wrapped) and nothing is written.
	Update(ctx context.Context, fn func(ctx context.Context, tx Tx) error) (time.Time, error)
	// UpdateInTxn runs fn inside txn, which the caller commits; the same rules hold for fn.
	UpdateInTxn(ctx context.Context, txn Txn, fn func(ctx context.Context, tx Tx) error) error

	// ListStock returns the stock of every SKU, in SKU order.
	ListStock(ctx context.Context) ([]inventory.Stock, error)
	// Stock returns the stock of one SKU; inventory.ErrNotFound for an unknown one.
	Stock(ctx context.Context, sku string) (inventory.Stock, error)
	// Reservation returns an order's reservation as the API shows it; inventory.ErrNotFound if
	// the order was never decided.
	Reservation(ctx context.Context, orderID string) (Reservation, error)
	// Shipment returns a shipment with its lines and timestamps; shipment.ErrNotFound if none.
	Shipment(ctx context.Context, id string) (*shipment.Shipment, error)
	// ShipmentsOfOrder returns an order's shipments (none or one).
	ShipmentsOfOrder(ctx context.Context, orderID string) ([]*shipment.Shipment, error)
	// PendingShipments returns up to limit PENDING shipments created at or before createdBefore,
	// oldest first.
	PendingShipments(ctx context.Context, createdBefore time.Time, limit int) ([]*shipment.Shipment, error)
}

// Nudger tells the relay that an aggregate's events were just committed; best effort.
type Nudger interface {
	NudgeAggregate(ctx context.Context, aggregateID string)
}

// Service runs the use cases.
type Service struct {
	repo    Repository
	nudge   Nudger
	metrics *Metrics
}

// New returns a service; nudge may be nil (nothing is nudged), and so may metrics (nothing is
// registered).
func New(repo Repository, nudge Nudger, metrics *Metrics) *Service {
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	return &Service{repo: repo, nudge: nudge, metrics: metrics}
}

// Reservation is an order's reservation as the API shows it.
type Reservation struct {
	OrderID   string
	Status    inventory.ReservationStatus
	Version   int64
	Lines     []ReservationLine // SKU order; none for a rejected order
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ReservationLine is one reserved SKU of an order and its status (that of the reservation:
// HELD, RELEASED or SHIPPED).
type ReservationLine struct {
	SKU      string
	Quantity int64
	Status   string
}

// ListStock returns the stock of every SKU.
func (s *Service) ListStock(ctx context.Context) ([]inventory.Stock, error) {
	return s.repo.ListStock(ctx)
}

// Stock returns the stock of sku; an unknown (or impossible) SKU is inventory.ErrNotFound.
func (s *Service) Stock(ctx context.Context, sku string) (inventory.Stock, error) {
	if sku == "" || len(sku) > 64 {
		return inventory.Stock{}, fmt.Errorf("sku %q: %w", sku, inventory.ErrNotFound)
	}
	return s.repo.Stock(ctx, sku)
}

// Reservation returns the reservation of an order; an order never decided is inventory.ErrNotFound.
func (s *Service) Reservation(ctx context.Context, orderID string) (Reservation, error) {
	if orderID == "" || len(orderID) > MaxOrderIDLen {
		return Reservation{}, fmt.Errorf("reservation of order %q: %w", orderID, inventory.ErrNotFound)
	}
	return s.repo.Reservation(ctx, orderID)
}

// Shipment returns a shipment; an unknown id (or one that is no shipment id) is shipment.ErrNotFound.
func (s *Service) Shipment(ctx context.Context, id string) (*shipment.Shipment, error) {
	if !isShipmentID(id) {
		return nil, fmt.Errorf("shipment %q: %w", id, shipment.ErrNotFound)
	}
	return s.repo.Shipment(ctx, id)
}

// ShipmentsOfOrder returns the shipments of an order (none or one); an order id that cannot be one
// is shipment.ErrInvalid.
func (s *Service) ShipmentsOfOrder(ctx context.Context, orderID string) ([]*shipment.Shipment, error) {
	if orderID == "" || len(orderID) > MaxOrderIDLen {
		return nil, &shipment.ValidationError{Problems: []string{fmt.Sprintf("order_id must be 1 to %d characters", MaxOrderIDLen)}}
	}
	return s.repo.ShipmentsOfOrder(ctx, orderID)
}

// PendingShipments returns up to limit PENDING shipments created at or before createdBefore,
// oldest first.
func (s *Service) PendingShipments(ctx context.Context, createdBefore time.Time, limit int) ([]*shipment.Shipment, error) {
	return s.repo.PendingShipments(ctx, createdBefore, limit)
}

// isShipmentID: shipment ids are UUIDs in their canonical form (shipment.IDFor).
func isShipmentID(id string) bool {
	u, err := uuid.Parse(id)
	return err == nil && u.String() == id
}

// Outcome is what an event use case decided, for the consumer's log line and the metrics.
type Outcome struct {
	// Applied is false when the event changed nothing (a replay, or an order that has moved on).
	Applied bool
	// Note says what was decided (outboxlib.Note).
	Note string
	// Transitions are the statuses shipments reached; Committed counts them once the consumer's
	// transaction has committed.
	Transitions []shipment.Status
}

// Committed records in the metrics what a committed event use case did. The consumer may run a
// use case more than once (an aborted transaction is retried), so its caller calls this once, for
// the outcome of the attempt that committed.
func (s *Service) Committed(out Outcome) {
	for _, st := range out.Transitions {
		s.metrics.shipments.WithLabelValues(string(st)).Inc()
	}
}

// skus returns the SKUs of lines.
func skus(lines []inventory.Line) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.SKU
	}
	return out
}

// errInconsistent marks a state a transaction read that breaks an invariant of the service (a
// pending shipment whose reservation is not held, a held line without its stock). Read-write
// transactions see one consistent state (Spanner's locks, and the emulator's validation of every
// read, see docs/architecture.md), so this is a bug or a hand-edited row: never the caller's
// mistake (a 500, not a 4xx), never retried, and logged as an error with the state it found.
var errInconsistent = errors.New("inconsistent state")

// inconsistent returns an error wrapping errInconsistent, and no other sentinel of the message's
// causes.
func inconsistent(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errInconsistent, fmt.Sprintf(format, args...))
}

// stockBySKU reads the stock of lines' SKUs; a SKU without an Inventory row is inconsistent (a
// held or shipped line always has one).
func stockBySKU(ctx context.Context, tx Tx, lines []inventory.Line) (map[string]inventory.Stock, error) {
	stock, err := tx.Stock(ctx, skus(lines))
	if err != nil {
		return nil, err
	}
	out := make(map[string]inventory.Stock, len(stock))
	for _, st := range stock {
		out[st.SKU()] = st
	}
	for _, l := range lines {
		if _, ok := out[l.SKU]; !ok {
			return nil, inconsistent("sku %s has no inventory row", l.SKU)
		}
	}
	return out, nil
}

// values returns the stock of m in lines' order.
func values(m map[string]inventory.Stock, lines []inventory.Line) []inventory.Stock {
	out := make([]inventory.Stock, 0, len(lines))
	for _, l := range lines {
		out = append(out, m[l.SKU])
	}
	return out
}
