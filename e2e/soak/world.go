package soak

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmart/spanmart/e2e/harness"
	"github.com/spanmart/spanmart/internal/mailtest"
	"github.com/spanmart/spanmart/internal/topology"
)

// world is everything the checker reads once the system has drained: every row of every table it
// checks, read straight from the four databases with the Spanner client, the sandbox's read-back
// of what the providers hold, and every e-mail the mail server accepted.
type world struct {
	orders            map[string]*dbOrder
	placements        map[string]string // Idempotency-Key of a POST /v1/orders → the order it made
	orderReservations map[string]string // order id → OrderReservations.Status
	reservations      map[string][]dbReservation
	shipments         map[string]dbShipment // by order id
	stock             map[string]dbStock    // by SKU
	payments          map[string][]dbPayment
	paymentOrder      map[string]string // payment id → order id
	mails             map[string][]dbMail
	outbox            map[string][]outboxRow // by database
	processed         map[string]map[string]bool
	failures          dbFailures
	missing           int64 // MissingDeliveries not replayed, every database

	intents []sandboxIntent
	komoju  []sandboxKomoju
	refunds []sandboxRefund
	smtp    []mailtest.Message
}

type dbOrder struct {
	ID, Customer, Status, CancelReason, AttentionReason, Method, Currency string
	TotalMinor                                                            int64
	Items                                                                 []Line
}

// state is the order's status with its reason, as Order.Expect lists them.
func (o *dbOrder) state() string {
	switch {
	case o.Status == "NEEDS_ATTENTION" && o.AttentionReason != "":
		return o.Status + " " + o.AttentionReason
	case o.CancelReason != "" && o.Status != "NEEDS_ATTENTION":
		return o.Status + " " + o.CancelReason
	}
	return o.Status
}

type dbReservation struct {
	SKU      string
	Quantity int64
	Status   string
}

type dbShipment struct{ ID, Status string }

type dbStock struct{ OnHand, Reserved int64 }

type dbPayment struct {
	ID, OrderID, Provider, Method, Status, ProviderID, FailureReason string
	AmountMinor                                                      int64
}

type dbMail struct{ EventID, Template, Status, MessageID string }

type outboxRow struct {
	EventID, Type, AggregateType, AggregateID string
	Version                                   int64
	Published, Unaudited                      bool
	PublishedTo                               []string
}

// dbFailures sums the DeliveryFailures rows: the failed answers (503, 400) and deferrals (409) the
// consumers gave, each one a redelivery.
type dbFailures struct{ Failures, Deferrals int64 }

type sandboxIntent struct {
	ID                 string            `json:"id"`
	Status             string            `json:"status"`
	Amount             int64             `json:"amount"`
	AmountReceived     int64             `json:"amount_received"`
	CancellationReason *string           `json:"cancellation_reason"`
	Metadata           map[string]string `json:"metadata"`
}

type sandboxKomoju struct {
	ID               string         `json:"id"`
	Status           string         `json:"status"`
	Amount           int64          `json:"amount"`
	AmountRefunded   int64          `json:"amount_refunded"`
	ExternalOrderNum *string        `json:"external_order_num"`
	Metadata         map[string]any `json:"metadata"`
	Refunds          []struct {
		ID     string `json:"id"`
		Amount int64  `json:"amount"`
	} `json:"refunds"`
}

type sandboxRefund struct {
	ID            string `json:"id"`
	Amount        int64  `json:"amount"`
	PaymentIntent string `json:"payment_intent"`
	Status        string `json:"status"`
}

// readWorld reads it all.
func readWorld(ctx context.Context, s *harness.Stack) (*world, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	w := &world{
		orders: map[string]*dbOrder{}, placements: map[string]string{}, orderReservations: map[string]string{}, reservations: map[string][]dbReservation{},
		shipments: map[string]dbShipment{}, stock: map[string]dbStock{}, payments: map[string][]dbPayment{},
		paymentOrder: map[string]string{}, mails: map[string][]dbMail{}, outbox: map[string][]outboxRow{},
		processed: map[string]map[string]bool{},
	}
	q := func(db, sql string, row func(r *spanner.Row) error) error {
		if err := s.DB(db).Single().Query(ctx, spanner.Statement{SQL: sql}).Do(row); err != nil {
			return fmt.Errorf("%s: %s: %w", db, sql, err)
		}
		return nil
	}
	err := q("orders", `SELECT OrderId, CustomerId, Status, IFNULL(CancelReason, ''), IFNULL(AttentionReason, ''),
		IFNULL(PaymentMethod, ''), Currency, TotalMinor FROM Orders`, func(r *spanner.Row) error {
		o := &dbOrder{}
		if err := r.Columns(&o.ID, &o.Customer, &o.Status, &o.CancelReason, &o.AttentionReason, &o.Method, &o.Currency, &o.TotalMinor); err != nil {
			return err
		}
		w.orders[o.ID] = o
		return nil
	})
	if err == nil {
		// The scope is orders' (app.IdempotencyScope): the placements, not the cancels.
		err = q("orders", `SELECT ClientKey, IFNULL(OrderId, '') FROM IdempotencyKeys WHERE Scope = 'POST /v1/orders'`, func(r *spanner.Row) error {
			var key, id string
			if err := r.Columns(&key, &id); err != nil {
				return err
			}
			w.placements[key] = id
			return nil
		})
	}
	if err == nil {
		err = q("orders", `SELECT OrderId, Sku, Quantity FROM OrderItems`, func(r *spanner.Row) error {
			var id string
			var ln Line
			if err := r.Columns(&id, &ln.SKU, &ln.Quantity); err != nil {
				return err
			}
			if o := w.orders[id]; o != nil {
				o.Items = append(o.Items, ln)
			}
			return nil
		})
	}
	if err == nil {
		err = q("fulfillment", `SELECT OrderId, Status FROM OrderReservations`, func(r *spanner.Row) error {
			var id, st string
			if err := r.Columns(&id, &st); err != nil {
				return err
			}
			w.orderReservations[id] = st
			return nil
		})
	}
	if err == nil {
		err = q("fulfillment", `SELECT OrderId, Sku, Quantity, Status FROM Reservations`, func(r *spanner.Row) error {
			var id string
			var rs dbReservation
			if err := r.Columns(&id, &rs.SKU, &rs.Quantity, &rs.Status); err != nil {
				return err
			}
			w.reservations[id] = append(w.reservations[id], rs)
			return nil
		})
	}
	if err == nil {
		err = q("fulfillment", `SELECT OrderId, ShipmentId, Status FROM Shipments`, func(r *spanner.Row) error {
			var id string
			var sh dbShipment
			if err := r.Columns(&id, &sh.ID, &sh.Status); err != nil {
				return err
			}
			w.shipments[id] = sh
			return nil
		})
	}
	if err == nil {
		err = q("fulfillment", `SELECT Sku, OnHand, Reserved FROM Inventory`, func(r *spanner.Row) error {
			var sku string
			var st dbStock
			if err := r.Columns(&sku, &st.OnHand, &st.Reserved); err != nil {
				return err
			}
			w.stock[sku] = st
			return nil
		})
	}
	if err == nil {
		err = q("payments", `SELECT PaymentId, OrderId, Provider, Method, Status, IFNULL(ProviderPaymentId, ''),
			IFNULL(FailureReason, ''), AmountMinor FROM Payments`, func(r *spanner.Row) error {
			var p dbPayment
			if err := r.Columns(&p.ID, &p.OrderID, &p.Provider, &p.Method, &p.Status, &p.ProviderID, &p.FailureReason, &p.AmountMinor); err != nil {
				return err
			}
			w.payments[p.OrderID] = append(w.payments[p.OrderID], p)
			w.paymentOrder[p.ID] = p.OrderID
			return nil
		})
	}
	if err == nil {
		err = q("notifications", `SELECT OrderId, EventId, Template, Status, IFNULL(MessageId, '') FROM Notifications`, func(r *spanner.Row) error {
			var id string
			var m dbMail
			if err := r.Columns(&id, &m.EventID, &m.Template, &m.Status, &m.MessageID); err != nil {
				return err
			}
			w.mails[id] = append(w.mails[id], m)
			return nil
		})
	}
	for _, db := range topology.Databases() {
		if err != nil {
			break
		}
		w.processed[db] = map[string]bool{}
		err = q(db, `SELECT EventId, EventType, AggregateType, AggregateId, AggregateVersion, PublishedAt IS NOT NULL,
			AuditShard IS NOT NULL, PublishedTo FROM OutboxEvents`, func(r *spanner.Row) error {
			var e outboxRow
			var to []spanner.NullString
			if err := r.Columns(&e.EventID, &e.Type, &e.AggregateType, &e.AggregateID, &e.Version, &e.Published, &e.Unaudited, &to); err != nil {
				return err
			}
			for _, t := range to {
				e.PublishedTo = append(e.PublishedTo, t.StringVal)
			}
			w.outbox[db] = append(w.outbox[db], e)
			return nil
		})
		if err == nil {
			err = q(db, `SELECT EventId, Consumer FROM ProcessedEvents`, func(r *spanner.Row) error {
				var id, consumer string
				if err := r.Columns(&id, &consumer); err != nil {
					return err
				}
				w.processed[db][id+"/"+consumer] = true
				return nil
			})
		}
		if err == nil {
			err = q(db, `SELECT IFNULL(SUM(Failures), 0), IFNULL(SUM(Deferrals), 0) FROM DeliveryFailures`, func(r *spanner.Row) error {
				var f dbFailures
				if err := r.Columns(&f.Failures, &f.Deferrals); err != nil {
					return err
				}
				w.failures.Failures += f.Failures
				w.failures.Deferrals += f.Deferrals
				return nil
			})
		}
		if err == nil {
			err = q(db, `SELECT COUNT(*) FROM MissingDeliveries WHERE ReplayedAt IS NULL`, func(r *spanner.Row) error {
				var n int64
				err := r.Column(0, &n)
				w.missing += n
				return err
			})
		}
	}
	if err != nil {
		return nil, err
	}
	var intents struct{ Data []sandboxIntent }
	var komoju struct{ Data []sandboxKomoju }
	var refunds struct{ Data []sandboxRefund }
	for path, v := range map[string]any{"/_sandbox/payment_intents": &intents, "/_sandbox/komoju/payments": &komoju, "/_sandbox/refunds": &refunds} {
		if err := sandboxGet(ctx, s, path, v); err != nil {
			return nil, err
		}
	}
	w.intents, w.komoju, w.refunds = intents.Data, komoju.Data, refunds.Data
	w.smtp = s.Mail.Messages()
	return w, nil
}
