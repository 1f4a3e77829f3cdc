// Package app holds the orders service's use cases: placing an order idempotently, reading an
// order with its timeline, and listing the catalog. It declares what it needs from the outside
// (Repository, Nudger) and knows nothing of HTTP or Spanner.
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
	// ErrIdempotencyConflict: an Idempotency-Key reused with a different request.
	ErrIdempotencyConflict = errors.New("idempotency key reused with a different request")
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
	KeyHash     string // hex SHA-256 of scope + "\x00" + client key
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

// Repository is the persistence the use cases need.
type Repository interface {
	// PlaceOrder, in one read-write transaction: returns the stored response if p.Key exists with
	// the same request hash (Replayed), ErrIdempotencyConflict if with another; otherwise builds
	// the order and saves it, its outbox events, its timeline and the key with the rendered
	// response.
	PlaceOrder(ctx context.Context, p Placement) (Response, error)
	// Order returns an order and its timeline; order.ErrNotFound if there is none.
	Order(ctx context.Context, id string) (*order.Order, []TimelineEntry, error)
	// ActiveProducts returns the active catalog, by SKU.
	ActiveProducts(ctx context.Context) ([]Product, error)
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
// order, no insignificant whitespace) and is what the request hash covers.
type PlaceOrderRequest struct {
	CustomerID string        `json:"customer_id"`
	Lines      []LineRequest `json:"lines"`
}

// KeyHash returns hex SHA-256 of scope + "\x00" + key.
func KeyHash(scope, key string) string {
	sum := sha256.Sum256([]byte(scope + "\x00" + key))
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

// PlaceOrder places an order once per idempotency key. It validates the request (order.ErrInvalid),
// prices the lines from the catalog (ErrUnknownProduct, ErrMixedCurrency) and saves everything in
// one transaction; render is the response stored for replays. After a commit that created an
// order it nudges the relay (best effort, on the request path).
func (s *Service) PlaceOrder(ctx context.Context, idempotencyKey string, req PlaceOrderRequest, render func(*order.Order) (int, []byte, error)) (Response, error) {
	lines := make([]order.Line, len(req.Lines))
	skus := make([]string, len(req.Lines))
	for i, l := range req.Lines {
		lines[i] = order.Line{SKU: l.SKU, Quantity: l.Quantity}
		skus[i] = l.SKU
	}
	problems := append(order.ValidateCustomer(req.CustomerID), order.ValidateLines(lines)...)
	if len(problems) > 0 {
		return Response{}, &order.ValidationError{Problems: problems}
	}
	reqHash, err := RequestHash(req)
	if err != nil {
		return Response{}, err
	}
	key := Idempotency{
		KeyHash: KeyHash(IdempotencyScope, idempotencyKey), Scope: IdempotencyScope,
		ClientKey: idempotencyKey, RequestHash: reqHash,
	}
	resp, err := s.repo.PlaceOrder(ctx, Placement{
		Key: key, SKUs: skus, Render: render,
		Build: func(catalog map[string]Product) (*order.Order, error) {
			return build(uuid.NewString(), req.CustomerID, lines, catalog)
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
func build(id, customerID string, lines []order.Line, catalog map[string]Product) (*order.Order, error) {
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
	return order.New(id, customerID, currency, priced)
}

// Order returns an order and its timeline.
func (s *Service) Order(ctx context.Context, id string) (*order.Order, []TimelineEntry, error) {
	if _, err := uuid.Parse(id); err != nil || len(id) != 36 {
		return nil, nil, &order.ValidationError{Problems: []string{fmt.Sprintf("order id %q is not a UUID", id)}}
	}
	return s.repo.Order(ctx, id)
}

// Products returns the active catalog.
func (s *Service) Products(ctx context.Context) ([]Product, error) {
	return s.repo.ActiveProducts(ctx)
}
