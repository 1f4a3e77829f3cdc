package inventory

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func stock(t *testing.T, sku string, onHand, reserved int64) Stock {
	t.Helper()
	s, err := NewStock(sku, onHand, reserved)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// level is a comparable view of a Stock.
type level struct {
	SKU                         string
	OnHand, Reserved, Available int64
}

func levels(ss []Stock) []level {
	var out []level
	for _, s := range ss {
		out = append(out, level{s.SKU(), s.OnHand(), s.Reserved(), s.Available()})
	}
	return out
}

func TestReserve(t *testing.T) {
	tests := []struct {
		name      string
		stock     []Stock
		lines     []Line
		wantStock []level
		wantShort []Shortage
	}{
		{
			name:      "fits",
			stock:     []Stock{stock(t, "A1", 5, 0)},
			lines:     []Line{{"A1", 2}},
			wantStock: []level{{"A1", 5, 2, 3}},
		},
		{
			name:      "exact fit",
			stock:     []Stock{stock(t, "A1", 5, 2)},
			lines:     []Line{{"A1", 3}},
			wantStock: []level{{"A1", 5, 5, 0}},
		},
		{
			name:      "one line short",
			stock:     []Stock{stock(t, "A1", 5, 0)},
			lines:     []Line{{"A1", 10}},
			wantShort: []Shortage{{"A1", 10, 5}},
		},
		{
			name:      "unknown sku is short with nothing available",
			stock:     nil,
			lines:     []Line{{"ZZ", 1}},
			wantShort: []Shortage{{"ZZ", 1, 0}},
		},
		{
			name:      "reserved units are not available",
			stock:     []Stock{stock(t, "A1", 5, 4)},
			lines:     []Line{{"A1", 2}},
			wantShort: []Shortage{{"A1", 2, 1}},
		},
		{
			name:      "several lines, one short: nothing reserved",
			stock:     []Stock{stock(t, "A1", 5, 0), stock(t, "B2", 1, 0), stock(t, "C3", 9, 0)},
			lines:     []Line{{"C3", 1}, {"B2", 2}, {"A1", 1}},
			wantShort: []Shortage{{"B2", 2, 1}},
		},
		{
			name:      "several lines, every one short and one unknown",
			stock:     []Stock{stock(t, "A1", 1, 1), stock(t, "B2", 1, 0)},
			lines:     []Line{{"A1", 1}, {"B2", 2}, {"C3", 1}},
			wantShort: []Shortage{{"A1", 1, 0}, {"B2", 2, 1}, {"C3", 1, 0}},
		},
		{
			name:      "several lines fit, in sku order",
			stock:     []Stock{stock(t, "A1", 5, 0), stock(t, "B2", 1, 0)},
			lines:     []Line{{"B2", 1}, {"A1", 5}},
			wantStock: []level{{"A1", 5, 5, 0}, {"B2", 1, 1, 0}},
		},
		{
			name:      "lines of one sku are merged before checking",
			stock:     []Stock{stock(t, "A1", 5, 0)},
			lines:     []Line{{"A1", 3}, {"A1", 3}},
			wantShort: []Shortage{{"A1", 6, 5}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Reserve(tt.stock, tt.lines)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantStock, levels(got.Stock)); diff != "" {
				t.Errorf("stock (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantShort, got.Short); diff != "" {
				t.Errorf("short (-want +got):\n%s", diff)
			}
			if got.OK() != (len(tt.wantShort) == 0) {
				t.Errorf("OK() = %v with short %v", got.OK(), got.Short)
			}
		})
	}
}

func TestReserveInvalid(t *testing.T) {
	for name, lines := range map[string][]Line{
		"no lines":      nil,
		"empty sku":     {{"", 1}},
		"zero quantity": {{"A1", 0}},
		"negative":      {{"A1", -1}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Reserve(nil, lines); !errors.Is(err, ErrInvalid) {
				t.Errorf("Reserve = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestNewStock(t *testing.T) {
	tests := []struct {
		name             string
		sku              string
		onHand, reserved int64
		ok               bool
	}{
		{"empty", "A1", 0, 0, true},
		{"all reserved", "A1", 3, 3, true},
		{"no sku", "", 1, 0, false},
		{"negative on hand", "A1", -1, 0, false},
		{"negative reserved", "A1", 1, -1, false},
		{"reserved above on hand", "A1", 1, 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewStock(tt.sku, tt.onHand, tt.reserved)
			if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
				t.Errorf("NewStock = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

func TestReleaseStock(t *testing.T) {
	s := stock(t, "A1", 5, 3)
	got, err := s.Release(2)
	if err != nil || got.Reserved() != 1 || got.OnHand() != 5 {
		t.Errorf("Release(2) = %+v, %v; want reserved 1, on hand 5", levels([]Stock{got}), err)
	}
	for _, q := range []int64{0, -1, 4} {
		if _, err := s.Release(q); !errors.Is(err, ErrInvalid) {
			t.Errorf("Release(%d) = %v, want ErrInvalid", q, err)
		}
	}
}
