// Package events applies orders' and the gateway's events to notifications. It is registered with
// the outboxlib consumer (POST /events, consumer name "notifications"), which verifies the caller,
// de-duplicates deliveries and orders them per aggregate in the same read-write transaction as the
// handlers below.
//
// A handler only decodes: it reads the payload (the published contracts of orders and of the
// gateway; unknown fields are ignored) and calls the use case of package app the event means,
// passing the consumer's transaction along as an app.Txn:
//
//	order.created     app.RecordContact: the order's address and language (no e-mail)
//	order.confirmed   order_confirmed       (the lines, the total)
//	payment.pending   payment_instructions  (the konbini slip or the bank account, the amount)
//	order.shipped     order_shipped         (carrier, tracking number)
//	order.cancelled   order_cancelled       (the reason, in the customer's words)
//	payment.refunded  payment_refunded      (the amount)
//
// Every e-mail event is registered with outboxlib.After(app.Deliver): the e-mail recorded in the
// transaction, handed to the effect (outboxlib.HandToAfter), is sent after the commit without
// being read back, and again on a redelivery while it is unsent.
//
// Errors: an event whose order has no contact yet is early (outboxlib.ErrEarly: the queue delivers
// it again later). The relay delivers an order's events after its order.created, so for order.*
// events that is only a safety net; payment.* events belong to another aggregate (the payment),
// which is not ordered against the order's, so a payment.pending may well arrive first. An
// unreadable payload or an e-mail that cannot be rendered is permanent (dead-lettered at once);
// anything else is transient.
package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/services/notifications/internal/app"
	"github.com/spanmart/spanmart/services/notifications/internal/notification"
	"github.com/spanmart/spanmart/services/notifications/internal/templates"
)

// ConsumerName is the name of this consumer in ProcessedEvents, ConsumerVersions and DeadLetters.
const ConsumerName = "notifications"

// Event types consumed: orders' (aggregate "order", id = the order id) and the gateway's
// (aggregate "payment", id = the payment id; the order is in the payload).
const (
	OrderCreated    = "order.created"
	OrderConfirmed  = "order.confirmed"
	OrderShipped    = "order.shipped"
	OrderCancelled  = "order.cancelled"
	PaymentPending  = "payment.pending"
	PaymentRefunded = "payment.refunded"
)

// orderPayload is what the service reads of order.* events (orders' contract).
type orderPayload struct {
	OrderID    string `json:"order_id"`
	CustomerID string `json:"customer_id"`
	Currency   string `json:"currency"`
	TotalMinor int64  `json:"total_minor"`
	Email      string `json:"email"`
	Language   string `json:"language"`
	Lines      []struct {
		SKU            string `json:"sku"`
		Quantity       int64  `json:"quantity"`
		UnitPriceMinor int64  `json:"unit_price_minor"`
	} `json:"lines"`
	Shipment struct {
		ShipmentID     string `json:"shipment_id"`
		Carrier        string `json:"carrier"`
		TrackingNumber string `json:"tracking_number"`
	} `json:"shipment"`
	Reason string `json:"reason"`
}

// paymentPayload is what the service reads of payment.* events (the gateway's contract).
type paymentPayload struct {
	PaymentID   string `json:"payment_id"`
	OrderID     string `json:"order_id"`
	Method      string `json:"method"`
	AmountMinor int64  `json:"amount_minor"`
	Currency    string `json:"currency"`
	Slip        *struct {
		Method           string `json:"method"`
		Store            string `json:"store"`
		PaymentCode      string `json:"payment_code"`
		ConfirmationCode string `json:"confirmation_code"`
		InstructionsURL  string `json:"instructions_url"`
		Bank             *struct {
			BankName      string `json:"bank_name"`
			BranchName    string `json:"branch_name"`
			AccountType   string `json:"account_type"`
			AccountNumber string `json:"account_number"`
			AccountHolder string `json:"account_holder"`
		} `json:"bank"`
		ExpiresAt time.Time `json:"expires_at"`
	} `json:"slip"`
}

// emails maps each e-mail event to the data of its template; the payload is already decoded into
// whichever of the two payload types the event has.
var emails = map[string]func(d outboxlib.Delivery) (orderID string, data templates.Data, err error){
	OrderConfirmed: func(d outboxlib.Delivery) (string, templates.Data, error) {
		p, err := decode[orderPayload](d)
		if err != nil {
			return "", nil, err
		}
		data := templates.OrderConfirmed{OrderID: p.OrderID, Total: templates.Money{Minor: p.TotalMinor, Currency: p.Currency}}
		for _, l := range p.Lines {
			data.Lines = append(data.Lines, templates.Line{SKU: l.SKU, Quantity: l.Quantity,
				UnitPrice: templates.Money{Minor: l.UnitPriceMinor, Currency: p.Currency}})
		}
		return p.OrderID, data, nil
	},
	OrderShipped: func(d outboxlib.Delivery) (string, templates.Data, error) {
		p, err := decode[orderPayload](d)
		if err != nil {
			return "", nil, err
		}
		return p.OrderID, templates.OrderShipped{OrderID: p.OrderID, Carrier: p.Shipment.Carrier, TrackingNumber: p.Shipment.TrackingNumber}, nil
	},
	OrderCancelled: func(d outboxlib.Delivery) (string, templates.Data, error) {
		p, err := decode[orderPayload](d)
		if err != nil {
			return "", nil, err
		}
		return p.OrderID, templates.OrderCancelled{OrderID: p.OrderID, Reason: p.Reason}, nil
	},
	PaymentPending: func(d outboxlib.Delivery) (string, templates.Data, error) {
		p, err := decode[paymentPayload](d)
		if err != nil {
			return "", nil, err
		}
		if p.Slip == nil {
			return "", nil, outboxlib.Permanent(fmt.Errorf("%s %s: payment %s is pending without a slip", d.Type, d.ID, p.PaymentID))
		}
		data := templates.PaymentInstructions{
			OrderID: p.OrderID, Amount: templates.Money{Minor: p.AmountMinor, Currency: p.Currency},
			Method: p.Slip.Method, Store: p.Slip.Store, PaymentCode: p.Slip.PaymentCode, ConfirmationCode: p.Slip.ConfirmationCode,
			InstructionsURL: p.Slip.InstructionsURL, ExpiresAt: p.Slip.ExpiresAt,
		}
		if data.Method == "" {
			data.Method = p.Method
		}
		if b := p.Slip.Bank; b != nil {
			data.Bank = &templates.BankAccount{BankName: b.BankName, BranchName: b.BranchName, AccountType: b.AccountType,
				AccountNumber: b.AccountNumber, AccountHolder: b.AccountHolder}
		}
		return p.OrderID, data, nil
	},
	PaymentRefunded: func(d outboxlib.Delivery) (string, templates.Data, error) {
		p, err := decode[paymentPayload](d)
		if err != nil {
			return "", nil, err
		}
		return p.OrderID, templates.PaymentRefunded{OrderID: p.OrderID, Amount: templates.Money{Minor: p.AmountMinor, Currency: p.Currency}}, nil
	},
}

// Register adds every handler to c, in the library's default order per aggregate (an order's
// e-mails after its order.created; a payment's refund after its slip).
func Register(c outboxlib.Registrar, svc *app.Service) {
	c.Handle(OrderCreated, func(ctx context.Context, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
		p, err := decode[orderPayload](d)
		if err != nil {
			return err
		}
		out, err := svc.RecordContact(ctx, txn, app.Event{ID: d.ID, Type: d.Type},
			notification.Contact{OrderID: p.OrderID, CustomerID: p.CustomerID, Email: p.Email, Language: p.Language})
		if err != nil {
			return classify(d, err)
		}
		outboxlib.Note(ctx, out.Note)
		return nil
	})
	deliver := outboxlib.After(func(ctx context.Context, d outboxlib.Delivery) error { return svc.Deliver(ctx, d.ID, recorded(d)) })
	for typ, dataOf := range emails {
		c.Handle(typ, func(ctx context.Context, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
			orderID, data, err := dataOf(d)
			if err != nil {
				return err
			}
			out, err := svc.Notify(ctx, txn, app.Event{ID: d.ID, Type: d.Type}, orderID, data)
			if err != nil {
				return classify(d, err)
			}
			outboxlib.Note(ctx, out.Note)
			if out.Created != nil {
				outboxlib.HandToAfter(ctx, out.Created)
			}
			return nil
		}, deliver)
	}
}

// recorded is what the delivery's own transaction recorded, for app.Deliver: nil for a duplicate.
func recorded(d outboxlib.Delivery) *app.Recorded {
	if d.Duplicate {
		return nil
	}
	rec := &app.Recorded{At: d.AppliedAt}
	for _, v := range d.Handed {
		if n, ok := v.(*notification.Notification); ok {
			rec.Notifications = append(rec.Notifications, n)
		}
	}
	return rec
}

// classify maps a use case's error to the consumer's vocabulary.
func classify(d outboxlib.Delivery, err error) error {
	switch {
	case errors.Is(err, app.ErrNoContact):
		return fmt.Errorf("%w: %s %s: %w", outboxlib.ErrEarly, d.Type, d.ID, err)
	case errors.Is(err, app.ErrTemplate), errors.Is(err, notification.ErrInvalid):
		return outboxlib.Permanent(fmt.Errorf("%s %s: %w", d.Type, d.ID, err))
	}
	return fmt.Errorf("%s %s: %w", d.Type, d.ID, err)
}

func (p orderPayload) orderID() string   { return p.OrderID }
func (p paymentPayload) orderID() string { return p.OrderID }

// decode reads d's payload; an unreadable one, or one naming no order, can never be applied.
func decode[P interface{ orderID() string }](d outboxlib.Delivery) (P, error) {
	var p P
	if err := json.Unmarshal(d.Payload, &p); err != nil {
		return p, outboxlib.Permanent(fmt.Errorf("%s %s: payload: %w", d.Type, d.ID, err))
	}
	if p.orderID() == "" {
		return p, outboxlib.Permanent(fmt.Errorf("%s %s: payload has no order_id", d.Type, d.ID))
	}
	return p, nil
}
