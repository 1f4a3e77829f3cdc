// Package events applies other services' events to orders. It is registered with the outboxlib
// consumer (POST /events, consumer name "orders"), which verifies the caller, de-duplicates
// deliveries (ProcessedEvents) and tracks per-aggregate versions in one read-write transaction
// around the handlers below.
//
// A handler only decodes: it reads the payload (fulfillment's and the gateway's published
// contracts; unknown fields are ignored) and calls the use case of package app that the event
// means, passing the consumer's transaction along as an app.Txn. The app layer decides the
// transition and whether the order has moved on, and reaches the store through its Repository
// with that same transaction, so the order's change, its outbox events, its timeline and the
// consumer's inbox row commit together. This package never touches the store.
//
// Errors: an unreadable payload, an unknown order or a change the order can never take (e.g. an
// authorization for another amount) is permanent (outboxlib.Permanent: dead-lettered at once, for
// an operator), since orders created every order it is told about and waiting cannot help; any
// other error is transient and the queue redelivers the event.
package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/services/orders/internal/app"
	"github.com/spanmart/spanmart/services/orders/internal/order"
)

// ConsumerName is the name of this consumer in ProcessedEvents, ConsumerVersions and DeadLetters.
const ConsumerName = "orders"

// Event types consumed: fulfillment's (aggregates "reservation", id = the order id, and
// "shipment", id = the shipment id) and the gateway's (aggregate "payment", id = the gateway's
// payment id); the order is in every payload.
const (
	InventoryReserved      = "inventory.reserved"
	InventoryRejected      = "inventory.rejected"
	InventoryReleased      = "inventory.released"
	InventoryReleaseFailed = "inventory.release_failed"
	PaymentAuthorized      = "payment.authorized"
	PaymentPending         = "payment.pending"
	PaymentFailed          = "payment.failed"
	PaymentExpired         = "payment.expired"
	PaymentCaptured        = "payment.captured"
	PaymentCaptureFailed   = "payment.capture_failed"
	PaymentVoided          = "payment.voided"
	PaymentRefunded        = "payment.refunded"
	PaymentVoidFailed      = "payment.void_failed"
	PaymentRefundFailed    = "payment.refund_failed"
	ShipmentShipped        = "shipment.shipped"
	ShipmentFailed         = "shipment.failed"
)

// Handlers returns the handler of every consumed event type, applying them through svc.
func Handlers(svc *app.Service) map[string]outboxlib.HandlerFunc {
	h := &handlers{svc: svc}
	return map[string]outboxlib.HandlerFunc{
		InventoryReserved:      h.inventoryReserved,
		InventoryRejected:      h.inventoryRejected,
		InventoryReleased:      h.inventoryReleased,
		InventoryReleaseFailed: h.compensationFailed(order.CompensateStock),
		PaymentAuthorized:      h.paymentAuthorized,
		PaymentPending:         h.paymentPending,
		PaymentFailed:          h.paymentFailed,
		PaymentExpired:         h.paymentExpired,
		PaymentCaptured:        h.paymentCaptured,
		PaymentCaptureFailed:   h.paymentCaptureFailed,
		PaymentVoided:          h.paymentReleased(order.PaymentVoided),
		PaymentRefunded:        h.paymentReleased(order.PaymentRefunded),
		PaymentVoidFailed:      h.compensationFailed(order.CompensatePayment),
		PaymentRefundFailed:    h.compensationFailed(order.CompensatePayment),
		ShipmentShipped:        h.shipmentShipped,
		ShipmentFailed:         h.shipmentFailed,
	}
}

// Register adds every handler to c, in the library's default order per aggregate: a payment's
// payment.authorized after its payment.pending, a reservation's inventory.released after its
// inventory.reserved.
func Register(c outboxlib.Registrar, svc *app.Service) {
	for typ, h := range Handlers(svc) {
		c.Handle(typ, h)
	}
}

type handlers struct {
	svc *app.Service
}

// inventoryPayload is what orders reads of inventory.* payloads.
type inventoryPayload struct {
	OrderID string `json:"order_id"`
	Reason  string `json:"reason"`
}

// paymentPayload is what orders reads of payment.* payloads.
type paymentPayload struct {
	OrderID     string    `json:"order_id"`
	Method      string    `json:"method"`
	AmountMinor int64     `json:"amount_minor"`
	Currency    string    `json:"currency"`
	Reason      string    `json:"reason"`
	Slip        *slipJSON `json:"slip"`
}

type slipJSON struct {
	Method           string    `json:"method"`
	Store            string    `json:"store"`
	PaymentCode      string    `json:"payment_code"`
	ConfirmationCode string    `json:"confirmation_code"`
	InstructionsURL  string    `json:"instructions_url"`
	Bank             *bankJSON `json:"bank"`
	ExpiresAt        time.Time `json:"expires_at"`
}

type bankJSON struct {
	BankName      string `json:"bank_name"`
	BranchName    string `json:"branch_name"`
	AccountType   string `json:"account_type"`
	AccountNumber string `json:"account_number"`
	AccountHolder string `json:"account_holder"`
}

func (h *handlers) inventoryReserved(ctx context.Context, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
	var p inventoryPayload
	if err := decode(d, &p, &p.OrderID); err != nil {
		return err
	}
	out, err := h.svc.MarkStockReserved(ctx, txn, consumed(d), p.OrderID)
	return finish(ctx, out, err)
}

func (h *handlers) inventoryRejected(ctx context.Context, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
	var p inventoryPayload
	if err := decode(d, &p, &p.OrderID); err != nil {
		return err
	}
	out, err := h.svc.RejectForStock(ctx, txn, consumed(d), p.OrderID, p.Reason)
	return finish(ctx, out, err)
}

func (h *handlers) inventoryReleased(ctx context.Context, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
	var p inventoryPayload
	if err := decode(d, &p, &p.OrderID); err != nil {
		return err
	}
	out, err := h.svc.CompleteCancellation(ctx, txn, consumed(d), p.OrderID)
	return finish(ctx, out, err)
}

func (h *handlers) paymentAuthorized(ctx context.Context, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
	var p paymentPayload
	if err := decode(d, &p, &p.OrderID); err != nil {
		return err
	}
	a := app.PaymentAuthorization{AmountMinor: p.AmountMinor, Currency: p.Currency}
	out, err := h.svc.ConfirmPayment(ctx, txn, consumed(d), p.OrderID, a)
	return finish(ctx, out, err)
}

func (h *handlers) paymentPending(ctx context.Context, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
	var p paymentPayload
	if err := decode(d, &p, &p.OrderID); err != nil {
		return err
	}
	if p.Slip == nil {
		return outboxlib.Permanent(fmt.Errorf("%s %s: payload has no slip", d.Type, d.ID))
	}
	// The payment's method is the contract's ("konbini", "bank_transfer"); the slip's own may be
	// spelled in the gateway's vocabulary ("KONBINI"), so it only fills in for a missing one.
	method := p.Method
	if method == "" {
		method = strings.ToLower(p.Slip.Method)
	}
	slip := order.PaymentInstructions{
		Method: order.PaymentMethod(method), Store: p.Slip.Store, PaymentCode: p.Slip.PaymentCode,
		ConfirmationCode: p.Slip.ConfirmationCode, InstructionsURL: p.Slip.InstructionsURL, ExpiresAt: p.Slip.ExpiresAt,
	}
	if b := p.Slip.Bank; b != nil {
		slip.Bank = &order.BankAccount{
			BankName: b.BankName, BranchName: b.BranchName, AccountType: b.AccountType,
			AccountNumber: b.AccountNumber, AccountHolder: b.AccountHolder,
		}
	}
	out, err := h.svc.RecordPaymentSlip(ctx, txn, consumed(d), p.OrderID, slip)
	return finish(ctx, out, err)
}

// paymentFailed handles payment.failed.
func (h *handlers) paymentFailed(ctx context.Context, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
	var p paymentPayload
	if err := decode(d, &p, &p.OrderID); err != nil {
		return err
	}
	out, err := h.svc.FailPayment(ctx, txn, consumed(d), p.OrderID, p.Reason)
	return finish(ctx, out, err)
}

// paymentExpired handles payment.expired: an unpaid slip, or an authorization that lapsed.
func (h *handlers) paymentExpired(ctx context.Context, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
	var p paymentPayload
	if err := decode(d, &p, &p.OrderID); err != nil {
		return err
	}
	out, err := h.svc.ExpirePayment(ctx, txn, consumed(d), p.OrderID)
	return finish(ctx, out, err)
}

func (h *handlers) paymentCaptured(ctx context.Context, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
	var p paymentPayload
	if err := decode(d, &p, &p.OrderID); err != nil {
		return err
	}
	out, err := h.svc.CompleteOrder(ctx, txn, consumed(d), p.OrderID)
	return finish(ctx, out, err)
}

func (h *handlers) paymentCaptureFailed(ctx context.Context, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
	var p paymentPayload
	if err := decode(d, &p, &p.OrderID); err != nil {
		return err
	}
	out, err := h.svc.FailCapture(ctx, txn, consumed(d), p.OrderID, p.Reason)
	return finish(ctx, out, err)
}

// paymentReleased handles payment.voided and payment.refunded: the money is given back.
func (h *handlers) paymentReleased(outcome string) outboxlib.HandlerFunc {
	return func(ctx context.Context, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
		var p paymentPayload
		if err := decode(d, &p, &p.OrderID); err != nil {
			return err
		}
		out, err := h.svc.ReleasePayment(ctx, txn, consumed(d), p.OrderID, outcome)
		return finish(ctx, out, err)
	}
}

// compensationFailed handles inventory.release_failed, payment.void_failed and
// payment.refund_failed: the compensation of kind failed for good. Both payloads name the reason.
func (h *handlers) compensationFailed(kind order.CompensationKind) outboxlib.HandlerFunc {
	return func(ctx context.Context, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
		var p inventoryPayload // {order_id, reason}: what orders reads of both
		if err := decode(d, &p, &p.OrderID); err != nil {
			return err
		}
		out, err := h.svc.FailCompensation(ctx, txn, consumed(d), p.OrderID, kind, p.Reason)
		return finish(ctx, out, err)
	}
}

// shipmentPayload is what orders reads of shipment.* payloads.
type shipmentPayload struct {
	ShipmentID     string `json:"shipment_id"`
	OrderID        string `json:"order_id"`
	Carrier        string `json:"carrier"`
	TrackingNumber string `json:"tracking_number"`
	Reason         string `json:"reason"`
}

func (h *handlers) shipmentShipped(ctx context.Context, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
	var p shipmentPayload
	if err := decode(d, &p, &p.OrderID); err != nil {
		return err
	}
	id := p.ShipmentID
	if id == "" {
		id = d.AggregateID
	}
	sh := order.Shipment{ID: id, Carrier: p.Carrier, TrackingNumber: p.TrackingNumber}
	out, err := h.svc.ShipOrder(ctx, txn, consumed(d), p.OrderID, sh)
	return finish(ctx, out, err)
}

func (h *handlers) shipmentFailed(ctx context.Context, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
	var p shipmentPayload
	if err := decode(d, &p, &p.OrderID); err != nil {
		return err
	}
	out, err := h.svc.FailShipment(ctx, txn, consumed(d), p.OrderID)
	return finish(ctx, out, err)
}

// decode reads d's payload into v and checks that it names an order (*orderID).
func decode(d outboxlib.Delivery, v any, orderID *string) error {
	if err := json.Unmarshal(d.Payload, v); err != nil {
		return outboxlib.Permanent(fmt.Errorf("%s %s: payload: %w", d.Type, d.ID, err))
	}
	if *orderID == "" {
		return outboxlib.Permanent(fmt.Errorf("%s %s: payload has no order_id", d.Type, d.ID))
	}
	return nil
}

func consumed(d outboxlib.Delivery) app.Consumed {
	return app.Consumed{Type: d.Type, ID: d.ID, AggregateType: d.AggregateType, AggregateVersion: d.AggregateVersion}
}

// finish turns a use case's answer into the handler's: the note for the consumer's log line, and
// the error classified for the queue.
func finish(ctx context.Context, out app.Outcome, err error) error {
	switch {
	case errors.Is(err, order.ErrNotFound), errors.Is(err, order.ErrInvalid):
		return outboxlib.Permanent(err)
	case err != nil:
		return err
	}
	outboxlib.Note(ctx, out.Note)
	return nil
}
