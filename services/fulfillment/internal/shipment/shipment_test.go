package shipment

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/spanmart/spanmart/services/fulfillment/internal/inventory"
)

// legal is every allowed (from, to) pair, written out independently of the transitions table.
var legal = map[[2]Status]bool{
	{Pending, Shipped}:   true,
	{Pending, Cancelled}: true,
	{Pending, Failed}:    true,
}

func TestCanTransitionToEveryPair(t *testing.T) {
	for _, from := range Statuses() {
		for _, to := range Statuses() {
			t.Run(fmt.Sprintf("%s→%s", from, to), func(t *testing.T) {
				if got, want := from.CanTransitionTo(to), legal[[2]Status{from, to}]; got != want {
					t.Errorf("CanTransitionTo = %v, want %v", got, want)
				}
			})
		}
		if got, want := from.Terminal(), from != Pending; got != want {
			t.Errorf("%s.Terminal() = %v, want %v", from, got, want)
		}
	}
}

var lines = []inventory.Line{{SKU: "A1", Quantity: 2}}

// The accounts of two warehouses: a repeat by the other changes nothing either.
const (
	warehouse = "warehouse@p.iam.gserviceaccount.com"
	other     = "other-warehouse@p.iam.gserviceaccount.com"
)

// at returns a shipment in status s at version 3, with the details that status carries.
func at(t *testing.T, s Status) *Shipment {
	t.Helper()
	snap := Snapshot{ID: IDFor("o1"), OrderID: "o1", Status: s, Lines: lines, Version: 3}
	switch s {
	case Shipped:
		snap.Carrier, snap.TrackingNumber, snap.ShippedBy = "yamato", "T1", warehouse
	case Failed:
		snap.FailureReason, snap.FailedBy = ReasonCarrierRejected, warehouse
	}
	sh, err := Restore(snap)
	if err != nil {
		t.Fatal(err)
	}
	return sh
}

// TestTransitions calls every action from every status: a legal move changes the status and bumps
// the version by one; a repeat of the state the shipment is in (same details, by the same actor or
// another) changes nothing, the first actor included; a repeat with other details is ErrConflict;
// anything else is a TransitionError and changes nothing.
func TestTransitions(t *testing.T) {
	actions := []struct {
		name string
		call func(s *Shipment) (bool, error)
		to   Status
		// repeat is the status in which the action is a no-op; conflict the one in which it is
		// ErrConflict (the same action with other details).
		repeat, conflict []Status
	}{
		{"ship", func(s *Shipment) (bool, error) { return s.Ship("yamato", "T1", warehouse) }, Shipped, []Status{Shipped}, nil},
		{"ship, by another warehouse", func(s *Shipment) (bool, error) { return s.Ship("yamato", "T1", other) }, Shipped, []Status{Shipped}, nil},
		{"ship with another tracking number", func(s *Shipment) (bool, error) { return s.Ship("yamato", "T2", warehouse) }, Shipped, nil, []Status{Shipped}},
		{"ship with another carrier", func(s *Shipment) (bool, error) { return s.Ship("sagawa", "T1", warehouse) }, Shipped, nil, []Status{Shipped}},
		{"fail", func(s *Shipment) (bool, error) { return s.Fail(ReasonCarrierRejected, warehouse) }, Failed, []Status{Failed}, nil},
		{"fail, by another warehouse", func(s *Shipment) (bool, error) { return s.Fail(ReasonCarrierRejected, other) }, Failed, []Status{Failed}, nil},
		{"fail for another reason", func(s *Shipment) (bool, error) { return s.Fail(ReasonLostBeforeHandover, warehouse) }, Failed, nil, []Status{Failed}},
		// A shipment that never left stays as it is when its order is cancelled.
		{"cancel", (*Shipment).Cancel, Cancelled, []Status{Cancelled, Failed}, nil},
	}
	for _, a := range actions {
		for _, from := range Statuses() {
			t.Run(fmt.Sprintf("%s from %s", a.name, from), func(t *testing.T) {
				s := at(t, from)
				before := s.Snapshot()
				changed, err := a.call(s)
				switch {
				case contains(a.repeat, from):
					if err != nil || changed {
						t.Fatalf("= %v, %v; want no change and no error", changed, err)
					}
					if diff := cmp.Diff(before, s.Snapshot()); diff != "" {
						t.Errorf("a repeat changed the shipment (-before +after):\n%s", diff)
					}
				case contains(a.conflict, from):
					if !errors.Is(err, ErrConflict) || changed {
						t.Fatalf("= %v, %v; want ErrConflict", changed, err)
					}
					if diff := cmp.Diff(before, s.Snapshot()); diff != "" {
						t.Errorf("a conflict changed the shipment (-before +after):\n%s", diff)
					}
				case from.CanTransitionTo(a.to):
					if err != nil || !changed {
						t.Fatalf("= %v, %v; want a change", changed, err)
					}
					if s.Status() != a.to || s.Version() != before.Version+1 {
						t.Errorf("status %s, version %d; want %s, %d", s.Status(), s.Version(), a.to, before.Version+1)
					}
				default:
					var te *TransitionError
					if !errors.As(err, &te) || !errors.Is(err, ErrIllegalTransition) || changed {
						t.Fatalf("= %v, %v; want a TransitionError", changed, err)
					}
					if te.From != from || te.To != a.to {
						t.Errorf("TransitionError %s → %s, want %s → %s", te.From, te.To, from, a.to)
					}
					if diff := cmp.Diff(before, s.Snapshot()); diff != "" {
						t.Errorf("an illegal transition changed the shipment (-before +after):\n%s", diff)
					}
				}
			})
		}
	}
}

func contains(ss []Status, s Status) bool {
	for _, v := range ss {
		if v == s {
			return true
		}
	}
	return false
}

func TestShipRecordsDetails(t *testing.T) {
	s := at(t, Pending)
	if _, err := s.Ship("yamato", "T1", other); err != nil {
		t.Fatal(err)
	}
	if s.Carrier() != "yamato" || s.TrackingNumber() != "T1" || s.ShippedBy() != other || s.FailureReason() != "" || s.FailedBy() != "" {
		t.Errorf("shipped shipment = %+v", s.Snapshot())
	}
	f := at(t, Pending)
	if _, err := f.Fail("dropped", other); err != nil {
		t.Fatal(err)
	}
	if f.FailureReason() != "dropped" || f.FailedBy() != other || f.Carrier() != "" || f.ShippedBy() != "" {
		t.Errorf("failed shipment = %+v", f.Snapshot())
	}
}

// TestCommittedTakesTheCommitTimestamps: the commit that shipped a shipment sets its UpdatedAt and
// ShippedAt, as the store writes them; a later commit (none moves a shipped shipment today) would
// move UpdatedAt only, and a commit that failed one sets no ShippedAt.
func TestCommittedTakesTheCommitTimestamps(t *testing.T) {
	t1, t2 := time.Date(2026, 12, 6, 21, 0, 0, 0, time.UTC), time.Date(2026, 12, 6, 22, 0, 0, 0, time.UTC)
	s := at(t, Pending)
	if _, err := s.Ship("yamato", "T1", warehouse); err != nil {
		t.Fatal(err)
	}
	s.Committed(t1)
	if !s.UpdatedAt().Equal(t1) || !s.ShippedAt().Equal(t1) {
		t.Errorf("shipped and committed at %v: updated %v, shipped %v", t1, s.UpdatedAt(), s.ShippedAt())
	}
	s.Committed(t2)
	if !s.UpdatedAt().Equal(t2) || !s.ShippedAt().Equal(t1) {
		t.Errorf("committed again at %v: updated %v, shipped %v; want shipped %v", t2, s.UpdatedAt(), s.ShippedAt(), t1)
	}
	f := at(t, Pending)
	if _, err := f.Fail(ReasonCarrierRejected, warehouse); err != nil {
		t.Fatal(err)
	}
	f.Committed(t1)
	if !f.UpdatedAt().Equal(t1) || !f.ShippedAt().IsZero() {
		t.Errorf("failed and committed at %v: updated %v, shipped %v", t1, f.UpdatedAt(), f.ShippedAt())
	}
}

// TestActorIsRequired: an action without a proper actor changes nothing and is no ErrInvalid:
// who acts comes from the verified identity, so a bad one is the service's fault, not the caller's.
func TestActorIsRequired(t *testing.T) {
	for name, by := range map[string]string{
		"empty":             "",
		"blank":             " ",
		"too long":          strings.Repeat("a", MaxActorLen-12) + "@example.com" + "x",
		"control character": "ops\n@example.com",
		"not UTF-8":         "ops\xff@example.com",
	} {
		t.Run(name, func(t *testing.T) {
			s := at(t, Pending)
			before := s.Snapshot()
			if changed, err := s.Ship("yamato", "T1", by); err == nil || changed || errors.Is(err, ErrInvalid) {
				t.Errorf("Ship by %q = %v, %v; want an error that is not ErrInvalid", by, changed, err)
			}
			if changed, err := s.Fail(ReasonCarrierRejected, by); err == nil || changed || errors.Is(err, ErrInvalid) {
				t.Errorf("Fail by %q = %v, %v; want an error that is not ErrInvalid", by, changed, err)
			}
			if diff := cmp.Diff(before, s.Snapshot()); diff != "" {
				t.Errorf("the shipment changed (-before +after):\n%s", diff)
			}
		})
	}
	s := at(t, Pending)
	if _, err := s.Ship("yamato", "T1", strings.Repeat("配", MaxActorLen)); err != nil {
		t.Errorf("Ship by %d characters: %v", MaxActorLen, err)
	}
}

func TestValidation(t *testing.T) {
	long := strings.Repeat("x", MaxDetailLen+1)
	runes := strings.Repeat("配", MaxDetailLen) // 64 characters, 192 bytes: fits STRING(64)
	for _, tt := range []struct {
		name               string
		carrier, tracking  string
		reason             string
		wantShip, wantFail int // number of problems
	}{
		{"fine", "yamato", "T1", ReasonCarrierRejected, 0, 0},
		{"any reason", "yamato", "T1", "forklift accident", 0, 0},
		{"64 multi-byte characters", runes, runes, runes, 0, 0},
		{"empty", "", "", "", 2, 1},
		{"blank", " ", "\t", "  ", 2, 1},
		{"too long", long, long, long, 2, 1},
		{"control character", "yam\nato", "T1", "a\x00b", 1, 1},
		{"not UTF-8", "\xff", "T1", "\xfe", 1, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := ValidateShip(tt.carrier, tt.tracking); len(got) != tt.wantShip {
				t.Errorf("ValidateShip = %q, want %d problems", got, tt.wantShip)
			}
			if got := ValidateFailure(tt.reason); len(got) != tt.wantFail {
				t.Errorf("ValidateFailure = %q, want %d problems", got, tt.wantFail)
			}
			s := at(t, Pending)
			if _, err := s.Ship(tt.carrier, tt.tracking, warehouse); (err != nil) != (tt.wantShip > 0) || (err != nil && !errors.Is(err, ErrInvalid)) {
				t.Errorf("Ship = %v", err)
			}
			s = at(t, Pending)
			if _, err := s.Fail(tt.reason, warehouse); (err != nil) != (tt.wantFail > 0) || (err != nil && !errors.Is(err, ErrInvalid)) {
				t.Errorf("Fail = %v", err)
			}
		})
	}
}

func TestNew(t *testing.T) {
	s, err := New("o1", lines)
	if err != nil {
		t.Fatal(err)
	}
	want := Snapshot{ID: IDFor("o1"), OrderID: "o1", Status: Pending, Lines: lines, Version: 1}
	if diff := cmp.Diff(want, s.Snapshot()); diff != "" {
		t.Errorf("New (-want +got):\n%s", diff)
	}
	for name, args := range map[string]struct {
		orderID string
		lines   []inventory.Line
	}{
		"no order":      {"", lines},
		"no lines":      {"o1", nil},
		"a zero line":   {"o1", []inventory.Line{{SKU: "A1"}}},
		"a line no sku": {"o1", []inventory.Line{{Quantity: 1}}},
	} {
		if _, err := New(args.orderID, args.lines); !errors.Is(err, ErrInvalid) {
			t.Errorf("New with %s = %v, want ErrInvalid", name, err)
		}
	}
}

func TestIDFor(t *testing.T) {
	id := IDFor("5f1c0b9e-4a7f-4b6e-9d3c-2a1e0f9b8c7d")
	u, err := uuid.Parse(id)
	if err != nil || u.Version() != 5 || u.String() != id {
		t.Fatalf("IDFor = %q (%v): want a canonical UUIDv5", id, err)
	}
	if again := IDFor("5f1c0b9e-4a7f-4b6e-9d3c-2a1e0f9b8c7d"); again != id {
		t.Errorf("IDFor is not deterministic: %s, then %s", id, again)
	}
	if other := IDFor("another order"); other == id {
		t.Errorf("two orders share shipment id %s", id)
	}
	// The namespace is part of every stored shipment id: changing it would orphan them.
	if got := IDFor("o-1"); got != "82aa86e8-02a9-5e0d-a765-2cfe9ae0dee3" {
		t.Errorf(`IDFor("o-1") = %s: the namespace changed`, got)
	}
}

func TestRestoreRefusesImpossibleStates(t *testing.T) {
	for name, snap := range map[string]Snapshot{
		"no id":                   {OrderID: "o1", Status: Pending, Version: 1},
		"unknown status":          {ID: "s", OrderID: "o1", Status: "LOST", Version: 1},
		"version 0":               {ID: "s", OrderID: "o1", Status: Pending},
		"shipped without carrier": {ID: "s", OrderID: "o1", Status: Shipped, TrackingNumber: "T1", Version: 2},
		"failed without a reason": {ID: "s", OrderID: "o1", Status: Failed, Version: 2},
		"pending, shipped by":     {ID: "s", OrderID: "o1", Status: Pending, ShippedBy: warehouse, Version: 1},
		"shipped, failed by": {ID: "s", OrderID: "o1", Status: Shipped, Carrier: "yamato", TrackingNumber: "T1",
			ShippedBy: warehouse, FailedBy: warehouse, Version: 2},
		"cancelled, failed by": {ID: "s", OrderID: "o1", Status: Cancelled, FailedBy: warehouse, Version: 2},
	} {
		if _, err := Restore(snap); err == nil || errors.Is(err, ErrInvalid) {
			t.Errorf("Restore(%s) = %v, want an error that is not the caller's (ErrInvalid)", name, err)
		}
	}
}

// TestRestoreWithoutActor: a shipment shipped or failed before fulfillment recorded who did it has
// no actor, and is still a shipment.
func TestRestoreWithoutActor(t *testing.T) {
	for _, snap := range []Snapshot{
		{ID: "s", OrderID: "o1", Status: Shipped, Carrier: "yamato", TrackingNumber: "T1", Version: 2},
		{ID: "s", OrderID: "o1", Status: Failed, FailureReason: ReasonCarrierRejected, Version: 2},
	} {
		if s, err := Restore(snap); err != nil || s.ShippedBy() != "" || s.FailedBy() != "" {
			t.Errorf("Restore(%s without an actor) = %v, %v", snap.Status, s, err)
		}
	}
}
