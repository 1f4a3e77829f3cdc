// Package app holds the orders service's use cases: placing an order idempotently, reading an
// order with its timeline, listing the catalog, and applying the other services' events to orders
// (events.go). It declares what it needs from the outside (Repository, Nudger) and knows nothing of
// HTTP or Spanner.
//
// Two kinds of use case, two kinds of transaction. The request use cases (PlaceOrder, Order,
// Products) let the Repository open and commit its own transaction. The event use cases run inside
// a transaction somebody else opened: the event consumer's (pkg/outboxlib), which records the
// inbox row and the aggregate version in the same transaction, so the order's change, its outbox
// events and the "this event was applied" record commit together or not at all. Such a use case
// takes that transaction as a Txn, an opaque value it never looks into, and hands it back to
// Repository.UpdateInTxn, which knows what it is (the store: a *spanner.ReadWriteTransaction).
// This keeps the decisions (which transition an event means, when an order has moved on and the
// event is only noted) here, and the consumer's packages (internal/events) down to decoding
// payloads; nothing outside the store touches a transaction.
package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/spanmart/spanmart/services/orders/internal/order"
)

// Errors of the use cases (the domain's are in package order); test with errors.Is.
var (
	// ErrUnknownProduct: a line names a SKU that is not in the catalog or not active.
	ErrUnknownProduct = errors.New("unknown or inactive product")
	// ErrMixedCurrency: the lines' catalog prices are in more than one currency.
	ErrMixedCurrency = errors.New("products in more than one currency")
	// ErrPaymentCurrency: the payment method cannot pay in the order's currency.
	ErrPaymentCurrency = errors.New("payment method does not take the order's currency")
	// ErrIdempotencyConflict: an Idempotency-Key reused with a different request.
	ErrIdempotencyConflict = errors.New("idempotency key reused with a different request")
	// ErrOtherCustomer: the request's customer_id is not the signed-in customer's. It says nothing
	// about the other customer (whether it exists, what it ordered).
	ErrOtherCustomer = errors.New("customer_id must be the signed-in customer's id, or be left out")
)

// IdempotencyScope is the scope of the Idempotency-Key of POST /v1/orders.
const IdempotencyScope = "POST /v1/orders"

// MaxIdempotencyKeyLen is the longest accepted Idempotency-Key (IdempotencyKeys.ClientKey).
const MaxIdempotencyKeyLen = 255

// Product is an entry of the catalog.
type Product struct {
	SKU         string
	Name        string
	Description string
	PriceMinor  int64
	Currency    string
	Active      bool
}

// TimelineEntry is an event the service emitted or consumed for an order.
type TimelineEntry struct {
	Seq              int64
	Direction        string // DirectionEmitted or DirectionConsumed
	EventType        string
	EventID          string
	AggregateType    string
	AggregateVersion int64
	At               time.Time
}

// Directions of a timeline entry.
const (
	DirectionEmitted  = "emitted"
	DirectionConsumed = "consumed"
)

// Idempotency identifies one idempotent request.
type Idempotency struct {
	KeyHash     string // KeyHash(scope, customer, client key)
	Scope       string
	ClientKey   string
	RequestHash string // hex SHA-256 of the canonical request
}

// Response is a stored (or first) response of an idempotent request.
type Response struct {
	Status   int
	Body     json.RawMessage
	OrderID  string
	Replayed bool // served from the IdempotencyKeys row
}

// Placement is what Repository.PlaceOrder needs. Build and Render run inside the repository's
// transaction, which may be retried: they are pure.
type Placement struct {
	Key  Idempotency
	SKUs []string
	// Build makes the order from the catalog entries of SKUs found (active or not).
	Build func(catalog map[string]Product) (*order.Order, error)
	// Render is the response stored with the key and returned.
	Render func(o *order.Order) (status int, body []byte, err error)
}

// Change is what Repository.ChangeOrder needs: a customer's request that changes an order. Change
// and Render run inside the repository's transaction, which may be retried: they are pure.
type Change struct {
	Key     Idempotency
	OrderID string
	Change  func(o *order.Order) error
	Render  func(o *order.Order) (status int, body []byte, err error)
}

// Repository is the persistence the use cases need.
type Repository interface {
	// PlaceOrder, in one read-write transaction: returns the stored response if p.Key exists with
	// the same request hash (Replayed), ErrIdempotencyConflict if with another; otherwise builds
	// the order and saves it, its outbox events, its timeline and the key with the rendered
	// response.
	PlaceOrder(ctx context.Context, p Placement) (Response, error)
	// Order returns an order and its timeline; order.ErrNotFound if there is none.
	Order(ctx context.Context, id string) (*order.Order, []TimelineEntry, error)
	// ChangeOrder, in one read-write transaction: returns the stored response if c.Key exists with
	// the same request hash (Replayed), ErrIdempotencyConflict if with another; otherwise loads
	// order c.OrderID (order.ErrNotFound), runs c.Change on it (pure; its error is returned
	// unchanged and nothing is written), saves the order, its outbox events and their timeline
	// rows if it changed, and the key with the rendered response.
	ChangeOrder(ctx context.Context, c Change) (Response, error)
	// ActiveProducts returns the active catalog, by SKU.
	ActiveProducts(ctx context.Context) ([]Product, error)
	// UpdateInTxn, inside txn (which the caller commits): loads order id, runs change on it and
	// writes the consumed event's timeline row and, if change changed the order, its new state,
	// its outbox events and their timeline rows. change is pure (txn may be retried); its error is
	// returned unchanged and nothing is written. An unknown order is order.ErrNotFound.
	UpdateInTxn(ctx context.Context, txn Txn, id string, consumed Consumed, change func(*order.Order) error) error
	// OrdersByStatus, in one read-only transaction, returns at most limit orders in status whose
	// last change is at or after from (zero: any time) and before to, oldest change first, each
	// with the time of that change: the audit's read (stuck.go, reconcile.go).
	OrdersByStatus(ctx context.Context, status order.Status, from, to time.Time, limit int) ([]DatedOrder, error)
	// DatedOrder returns one order and when it last changed; order.ErrNotFound if there is none.
	DatedOrder(ctx context.Context, id string) (DatedOrder, error)
}

// Nudger tells the relay that new outbox rows are waiting; best effort.
type Nudger interface {
	NudgeAggregate(ctx context.Context, orderID string)
}

// Service runs the use cases.
type Service struct {
	repo  Repository
	nudge Nudger
}

// New returns a service; nudge may be nil.
func New(repo Repository, nudge Nudger) *Service { return &Service{repo: repo, nudge: nudge} }

// LineRequest is one requested line.
type LineRequest struct {
	SKU      string `json:"sku"`
	Quantity int64  `json:"quantity"`
}

// PlaceOrderRequest is the body of POST /v1/orders. Its JSON encoding is canonical (fixed field
// order, no insignificant whitespace) and is what the request hash covers, payment and e-mail
// included.
type PlaceOrderRequest struct {
	CustomerID string          `json:"customer_id"`
	Email      string          `json:"email,omitempty"`
	Language   string          `json:"language,omitempty"`
	Lines      []LineRequest   `json:"lines"`
	Payment    *PaymentRequest `json:"payment"`
}

// PaymentRequest is the payment object of POST /v1/orders: a method and the fields it takes
// ({"method": "card", "payment_method": "pm_card_visa"}, {"method": "konbini", "store": "lawson"},
// {"method": "wallet"}). It is decoded leniently so that validation (order.ParsePayment) can list
// every problem, an unknown field or a field of another method among them, rather than stop at the
// first; a known field that is not a string is malformed JSON for this API, as elsewhere.
type PaymentRequest struct {
	Method string
	// Fields holds every other member of the object by name: the method's detail, and whatever
	// else the client sent (the value of a field that is not a payment field is its raw JSON).
	Fields map[string]string
}

// UnmarshalJSON implements json.Unmarshaler. A JSON null member counts as absent.
func (p *PaymentRequest) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("payment: %w", err)
	}
	*p = PaymentRequest{}
	for name, v := range raw {
		if string(v) == "null" {
			continue
		}
		switch name {
		case order.FieldMethod, order.FieldPaymentMethod, order.FieldStore:
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return fmt.Errorf("payment.%s is not a string", name)
			}
			if name == order.FieldMethod {
				p.Method = s
				continue
			}
			if p.Fields == nil {
				p.Fields = map[string]string{}
			}
			p.Fields[name] = s
		default:
			if p.Fields == nil {
				p.Fields = map[string]string{}
			}
			p.Fields[name] = string(v)
		}
	}
	return nil
}

// MarshalJSON implements json.Marshaler: one object with the method and the fields, keys sorted
// (canonical, for the request hash).
func (p PaymentRequest) MarshalJSON() ([]byte, error) {
	m := make(map[string]string, len(p.Fields)+1)
	for k, v := range p.Fields {
		m[k] = v
	}
	m[order.FieldMethod] = p.Method
	return json.Marshal(m)
}

// KeyHash returns hex SHA-256 of scope + "\x00" + customer + "\x00" + key: an Idempotency-Key is
// the customer's own, so another customer who sends the same key (guessed, leaked, or a client
// library's counter) makes a request of its own and never gets the first customer's response
// back. A customer id holds no NUL (order.ValidateCustomer), so no two (customer, key) pairs
// hash the same input.
func KeyHash(scope, customer, key string) string {
	sum := sha256.Sum256([]byte(scope + "\x00" + customer + "\x00" + key))
	return hex.EncodeToString(sum[:])
}

// RequestHash returns hex SHA-256 of the canonical JSON of r.
func RequestHash(r PlaceOrderRequest) (string, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("request hash: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// PlaceOrder places an order of customer (the signed-in customer: the ID token's subject) once per
// customer and idempotency key. The order is the customer's: a request without customer_id is
// the customer's, one naming another customer is ErrOtherCustomer. It validates the request
// (order.ErrInvalid), prices the lines from the catalog (ErrUnknownProduct, ErrMixedCurrency) and
// saves everything in one transaction; render is the response stored for replays. After a commit
// that created an order it nudges the relay (best effort; the nudger sends it from its own goroutine).
func (s *Service) PlaceOrder(ctx context.Context, customer, idempotencyKey string, req PlaceOrderRequest, render func(*order.Order) (int, []byte, error)) (Response, error) {
	// Filled in before the request hash: the same order with and without customer_id is the same
	// request.
	if req.CustomerID == "" {
		req.CustomerID = customer
	}
	lines := make([]order.Line, len(req.Lines))
	skus := make([]string, len(req.Lines))
	for i, l := range req.Lines {
		lines[i] = order.Line{SKU: l.SKU, Quantity: l.Quantity}
		skus[i] = l.SKU
	}
	problems := append(order.ValidateCustomer(req.CustomerID), order.ValidateLines(lines)...)
	var payment order.Payment
	if req.Payment == nil {
		problems = append(problems, "payment is required")
	} else {
		var pp []string
		payment, pp = order.ParsePayment(req.Payment.Method, req.Payment.Fields)
		problems = append(problems, pp...)
	}
	problems = append(problems, order.ValidateEmail(req.Email, payment.Method)...)
	language, lp := order.ParseLanguage(req.Language)
	problems = append(problems, lp...)
	if len(problems) > 0 {
		return Response{}, &order.ValidationError{Problems: problems}
	}
	if req.CustomerID != customer {
		return Response{}, ErrOtherCustomer
	}
	reqHash, err := RequestHash(req)
	if err != nil {
		return Response{}, err
	}
	key := Idempotency{
		KeyHash: KeyHash(IdempotencyScope, customer, idempotencyKey), Scope: IdempotencyScope,
		ClientKey: idempotencyKey, RequestHash: reqHash,
	}
	resp, err := s.repo.PlaceOrder(ctx, Placement{
		Key: key, SKUs: skus, Render: render,
		Build: func(catalog map[string]Product) (*order.Order, error) {
			return build(uuid.NewString(), req.CustomerID, lines, payment, order.Contact{Email: req.Email, Language: language}, catalog)
		},
	})
	if err != nil {
		return Response{}, err
	}
	if !resp.Replayed && s.nudge != nil {
		s.nudge.NudgeAggregate(ctx, resp.OrderID)
	}
	return resp, nil
}

// build prices lines from the catalog: every SKU must be active and every price in one currency.
func build(id, customerID string, lines []order.Line, payment order.Payment, contact order.Contact, catalog map[string]Product) (*order.Order, error) {
	priced := make([]order.Line, len(lines))
	currency := ""
	for i, l := range lines {
		p, ok := catalog[l.SKU]
		if !ok || !p.Active {
			return nil, fmt.Errorf("lines[%d]: sku %q: %w", i, l.SKU, ErrUnknownProduct)
		}
		if currency == "" {
			currency = p.Currency
		} else if p.Currency != currency {
			return nil, fmt.Errorf("lines[%d]: sku %q is priced in %s, earlier lines in %s: %w", i, l.SKU, p.Currency, currency, ErrMixedCurrency)
		}
		priced[i] = order.Line{SKU: l.SKU, Quantity: l.Quantity, UnitPriceMinor: p.PriceMinor}
	}
	if !payment.IsZero() && !payment.Method.Accepts(currency) {
		return nil, fmt.Errorf("payment method %s takes JPY only; the order is priced in %s: %w", payment.Method, currency, ErrPaymentCurrency)
	}
	return order.New(id, customerID, currency, priced, payment, contact)
}

// CancelScope is the scope of the Idempotency-Key of POST /v1/orders/{id}/cancel.
const CancelScope = "POST /v1/orders/{id}/cancel"

// CancelOrder is customer's cancellation of its order id, once per customer and idempotency key:
// an order that has not shipped becomes CANCELLING (order.cancelled) and waits for its
// compensations; one that is already cancelling or cancelled is answered as it is; a shipped or
// finished one is order.ErrIllegalTransition (nothing is stored under the key, so the answer stays
// the same). Another customer's order is order.ErrNotFound, worded as for an order that does not
// exist, before its state is looked at. render is the response stored for replays.
func (s *Service) CancelOrder(ctx context.Context, customer, idempotencyKey, id string, render func(*order.Order) (int, []byte, error)) (Response, error) {
	if err := checkID(id); err != nil {
		return Response{}, err
	}
	// The request is the order id: the key's hash covers it, so a key reused for another order
	// is a conflict.
	sum := sha256.Sum256([]byte(id))
	key := Idempotency{
		KeyHash: KeyHash(CancelScope, customer, idempotencyKey), Scope: CancelScope, ClientKey: idempotencyKey,
		RequestHash: hex.EncodeToString(sum[:]),
	}
	resp, err := s.repo.ChangeOrder(ctx, Change{
		Key: key, OrderID: id, Render: render,
		Change: func(o *order.Order) error {
			if o.CustomerID() != customer {
				return notFound(id)
			}
			_, err := o.Cancel()
			return err
		},
	})
	if err != nil {
		return Response{}, err
	}
	if !resp.Replayed && s.nudge != nil {
		s.nudge.NudgeAggregate(ctx, id)
	}
	return resp, nil
}

func checkID(id string) error {
	if _, err := uuid.Parse(id); err != nil || len(id) != 36 {
		return &order.ValidationError{Problems: []string{fmt.Sprintf("order id %q is not a UUID", id)}}
	}
	return nil
}

// notFound is the error of an order that is not there for the caller: the Repository's words for
// an unknown order (store.readOrder), so that another customer's order reads exactly like one.
func notFound(id string) error { return fmt.Errorf("order %s: %w", id, order.ErrNotFound) }

// Order returns an order and its timeline, whoever's it is: the operators' read.
func (s *Service) Order(ctx context.Context, id string) (*order.Order, []TimelineEntry, error) {
	if err := checkID(id); err != nil {
		return nil, nil, err
	}
	return s.repo.Order(ctx, id)
}

// CustomerOrder returns customer's order id and its timeline. Another customer's order is
// order.ErrNotFound with the words of an unknown order: a customer learns nothing of the orders of
// others, not even that they exist.
func (s *Service) CustomerOrder(ctx context.Context, customer, id string) (*order.Order, []TimelineEntry, error) {
	o, timeline, err := s.Order(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if o.CustomerID() != customer {
		return nil, nil, notFound(id)
	}
	return o, timeline, nil
}

// Products returns the active catalog.
func (s *Service) Products(ctx context.Context) ([]Product, error) {
	return s.repo.ActiveProducts(ctx)
}
