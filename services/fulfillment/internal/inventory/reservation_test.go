package inventory

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// state is a comparable view of a Reservation.
type state struct {
	Status  ReservationStatus
	Version int64
	Lines   []Line
}

func stateOf(r *Reservation) state { return state{r.Status(), r.Version(), r.Lines()} }

var held = []Line{{"A1", 2}, {"B2", 1}}

func reservation(t *testing.T, status ReservationStatus, version int64) *Reservation {
	t.Helper()
	lines := held
	if status == Rejected {
		lines = nil
	}
	r, err := RestoreReservation("o1", status, version, lines)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestReleaseReservation answers a cancellation from every state a reservation can be in.
func TestReleaseReservation(t *testing.T) {
	tests := []struct {
		status  ReservationStatus
		version int64
		want    Release
		after   state
	}{
		{Held, 1, ReleasedNow, state{Released, 2, held}},
		{Rejected, 1, ReleasedNow, state{Rejected, 2, nil}},
		{Rejected, 2, AlreadyAnswered, state{Rejected, 2, nil}},
		{Released, 2, AlreadyAnswered, state{Released, 2, held}},
		{Shipped, 1, ReleaseFailed, state{Shipped, 2, held}},
		{Shipped, 2, AlreadyAnswered, state{Shipped, 2, held}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s at %d", tt.status, tt.version), func(t *testing.T) {
			r := reservation(t, tt.status, tt.version)
			if got := r.Release(); got != tt.want {
				t.Errorf("Release() = %d, want %d", got, tt.want)
			}
			if diff := cmp.Diff(tt.after, stateOf(r)); diff != "" {
				t.Errorf("after Release (-want +got):\n%s", diff)
			}
			if r.LinesChanged() != (tt.after.Status != tt.status) {
				t.Errorf("LinesChanged() = %v", r.LinesChanged())
			}
		})
	}
}

func TestShipReservation(t *testing.T) {
	for _, tt := range []struct {
		status  ReservationStatus
		version int64
		ok      bool
	}{
		{Held, 1, true},
		{Rejected, 1, false},
		{Released, 2, false},
		{Shipped, 1, false},
	} {
		t.Run(string(tt.status), func(t *testing.T) {
			r := reservation(t, tt.status, tt.version)
			before := stateOf(r)
			err := r.Ship()
			if !tt.ok {
				if !errors.Is(err, ErrIllegalTransition) {
					t.Fatalf("Ship() = %v, want ErrIllegalTransition", err)
				}
				if diff := cmp.Diff(before, stateOf(r)); diff != "" {
					t.Errorf("a refused Ship changed the reservation (-before +after):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// The version stays: shipping emits the shipment's event, not an inventory.* one.
			if diff := cmp.Diff(state{Shipped, 1, held}, stateOf(r)); diff != "" {
				t.Errorf("after Ship (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	ok, err := Reserve([]Stock{stock(t, "A1", 5, 0)}, []Line{{"A1", 2}})
	if err != nil {
		t.Fatal(err)
	}
	if got := stateOf(Decide("o1", ok)); cmp.Diff(state{Held, 1, []Line{{"A1", 2}}}, got) != "" {
		t.Errorf("Decide(fits) = %+v", got)
	}
	short, err := Reserve(nil, []Line{{"A1", 2}})
	if err != nil {
		t.Fatal(err)
	}
	if got := stateOf(Decide("o1", short)); cmp.Diff(state{Rejected, 1, nil}, got) != "" {
		t.Errorf("Decide(short) = %+v", got)
	}
}

func TestRestoreReservationRefusesImpossibleStates(t *testing.T) {
	for name, r := range map[string]struct {
		orderID string
		status  ReservationStatus
		version int64
		lines   []Line
	}{
		"no order":            {"", Held, 1, held},
		"unknown status":      {"o1", "LOST", 1, held},
		"version 0":           {"o1", Held, 0, held},
		"rejected with lines": {"o1", Rejected, 1, held},
	} {
		if _, err := RestoreReservation(r.orderID, r.status, r.version, r.lines); !errors.Is(err, ErrInvalid) {
			t.Errorf("RestoreReservation(%s) = %v, want ErrInvalid", name, err)
		}
	}
}

func TestShipStock(t *testing.T) {
	s := stock(t, "A1", 5, 3)
	got, err := s.Ship(2)
	if err != nil || got.OnHand() != 3 || got.Reserved() != 1 {
		t.Errorf("Ship(2) = %+v, %v; want on hand 3, reserved 1", levels([]Stock{got}), err)
	}
	for _, q := range []int64{0, -1, 4} {
		if _, err := s.Ship(q); !errors.Is(err, ErrInvalid) {
			t.Errorf("Ship(%d) = %v, want ErrInvalid", q, err)
		}
	}
}
