// Package inventory is fulfillment's stock domain: stock levels, the all-or-nothing reservation of
// an order's lines (Reserve) and the reservation aggregate that records what fulfillment decided
// for an order and what became of it (Reservation: held, rejected, released, shipped). Stock is
// held as a reservation (Reserved) and leaves OnHand only when it ships, so Available = OnHand -
// Reserved is what a new order may take. No I/O here; internal/store reads and writes the rows,
// internal/app decides which change an event or a request means.
package inventory

import (
	"errors"
	"fmt"
	"sort"
)

// Errors of the domain. ErrInvalid is a request that can never succeed (a bad order line).
var (
	ErrInvalid  = errors.New("invalid")
	ErrNotFound = errors.New("not found")
)

// Stock is the level of one SKU. The invariant of the Inventory table's CHECK holds for every value
// NewStock returns: 0 <= reserved <= onHand.
type Stock struct {
	sku      string
	onHand   int64
	reserved int64
}

// NewStock returns the stock of sku, or an error wrapping ErrInvalid when the levels break the
// invariant.
func NewStock(sku string, onHand, reserved int64) (Stock, error) {
	if sku == "" {
		return Stock{}, fmt.Errorf("stock: empty sku: %w", ErrInvalid)
	}
	if onHand < 0 || reserved < 0 || reserved > onHand {
		return Stock{}, fmt.Errorf("stock %s: on hand %d, reserved %d: %w", sku, onHand, reserved, ErrInvalid)
	}
	return Stock{sku: sku, onHand: onHand, reserved: reserved}, nil
}

// SKU returns the stock keeping unit.
func (s Stock) SKU() string { return s.sku }

// OnHand returns the units in the warehouse, reserved or not.
func (s Stock) OnHand() int64 { return s.onHand }

// Reserved returns the units held for orders that have not shipped.
func (s Stock) Reserved() int64 { return s.reserved }

// Available returns the units a new order may reserve.
func (s Stock) Available() int64 { return s.onHand - s.reserved }

// Release returns s with qty fewer units reserved (a cancelled order's hold).
func (s Stock) Release(qty int64) (Stock, error) {
	if qty <= 0 || qty > s.reserved {
		return s, fmt.Errorf("release %d of %s with %d reserved: %w", qty, s.sku, s.reserved, ErrInvalid)
	}
	s.reserved -= qty
	return s, nil
}

// Ship returns s with qty reserved units gone from the warehouse (a shipped order's hold): both
// OnHand and Reserved drop by qty.
func (s Stock) Ship(qty int64) (Stock, error) {
	if qty <= 0 || qty > s.reserved {
		return s, fmt.Errorf("ship %d of %s with %d reserved: %w", qty, s.sku, s.reserved, ErrInvalid)
	}
	s.onHand -= qty
	s.reserved -= qty
	return s, nil
}

// Line is one SKU of an order and the quantity it asks for.
type Line struct {
	SKU      string
	Quantity int64
}

// NormalizeLines validates lines and merges lines of the same SKU (a reservation is one row per
// order and SKU), sorted by SKU. An order without lines, an empty SKU or a quantity below 1 wraps
// ErrInvalid.
func NormalizeLines(lines []Line) ([]Line, error) {
	if len(lines) == 0 {
		return nil, fmt.Errorf("order has no lines: %w", ErrInvalid)
	}
	sum := map[string]int64{}
	for i, l := range lines {
		if l.SKU == "" {
			return nil, fmt.Errorf("line %d: empty sku: %w", i, ErrInvalid)
		}
		if l.Quantity <= 0 {
			return nil, fmt.Errorf("line %d (%s): quantity %d: %w", i, l.SKU, l.Quantity, ErrInvalid)
		}
		sum[l.SKU] += l.Quantity
	}
	out := make([]Line, 0, len(sum))
	for sku, q := range sum {
		out = append(out, Line{SKU: sku, Quantity: q})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].SKU < out[j].SKU })
	return out, nil
}

// Shortage is a line that does not fit: the units it asks for and the units available.
type Shortage struct {
	SKU       string
	Requested int64
	Available int64
}

// Outcome is the result of Reserve: either every line fits (Short is empty and Stock holds the
// new levels of every SKU of the order) or nothing is reserved (Short names every line that does
// not fit and Stock is empty).
type Outcome struct {
	Lines []Line     // the order's lines, normalized
	Stock []Stock    // new levels, in Lines order; only when OK
	Short []Shortage // in Lines order; only when not OK
}

// OK reports whether every line was reserved.
func (o Outcome) OK() bool { return len(o.Short) == 0 }

// Reserve reserves every line of an order against stock (the current levels of the order's SKUs;
// a SKU missing from stock is unknown and has nothing available) or none of them.
func Reserve(stock []Stock, lines []Line) (Outcome, error) {
	lines, err := NormalizeLines(lines)
	if err != nil {
		return Outcome{}, err
	}
	bySKU := make(map[string]Stock, len(stock))
	for _, s := range stock {
		bySKU[s.sku] = s
	}
	out := Outcome{Lines: lines}
	for _, l := range lines {
		s, ok := bySKU[l.SKU]
		if !ok || s.Available() < l.Quantity {
			out.Short = append(out.Short, Shortage{SKU: l.SKU, Requested: l.Quantity, Available: s.Available()})
			continue
		}
		s.reserved += l.Quantity
		out.Stock = append(out.Stock, s)
	}
	if !out.OK() {
		out.Stock = nil
	}
	return out, nil
}
