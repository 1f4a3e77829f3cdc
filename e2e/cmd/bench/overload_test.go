package main

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSearchCapacity(t *testing.T) {
	tests := []struct {
		name      string
		holdsTo   float64 // the targets hold up to this rate
		want      float64
		wantErr   bool
		wantTried []float64
	}{
		{name: "rises by the step until a rate fails", holdsTo: 27, want: 25, wantTried: []float64{10, 15, 20, 25, 30}},
		{name: "fails at the first step", holdsTo: 12, want: 10, wantTried: []float64{10, 15}},
		{name: "halves below the first rate", holdsTo: 3, want: 2.5, wantTried: []float64{10, 5, 2.5}},
		{name: "nothing holds", holdsTo: 0.5, wantErr: true, wantTried: []float64{10, 5, 2.5, 1.25}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tried []float64
			got, err := searchCapacity(10, 5, func(r float64) (bool, error) {
				tried = append(tried, r)
				return r <= tt.holdsTo, nil
			})
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want an error: %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("capacity = %v, want %v", got, tt.want)
			}
			if diff := cmp.Diff(tt.wantTried, tried); diff != "" {
				t.Errorf("rates tried (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSearchCapacityStopsOnError(t *testing.T) {
	boom := errors.New("stack down")
	n := 0
	_, err := searchCapacity(10, 5, func(float64) (bool, error) {
		n++
		if n == 2 {
			return false, boom
		}
		return true, nil
	})
	if !errors.Is(err, boom) || n != 2 {
		t.Errorf("err = %v after %d windows, want %v after 2", err, n, boom)
	}
}

func TestCompletedPerSec(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	a := endedCount{at: t0, accepted: 100, ended: 40}
	b := endedCount{at: t0.Add(20 * time.Second), accepted: 900, ended: 340}
	if got := completedPerSec(a, b); got != 15 {
		t.Errorf("completedPerSec = %v, want 15", got)
	}
	if got := completedPerSec(b, b); got != 0 {
		t.Errorf("completedPerSec over no time = %v, want 0", got)
	}
}

func TestBinAttempts(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	at := func(s float64, took time.Duration, o outcome) attempt {
		return attempt{sent: t0.Add(time.Duration(s * float64(time.Second))), took: took, outcome: o}
	}
	got := binAttempts([]attempt{
		at(0.5, 100*time.Millisecond, outAccepted),
		at(1, 30*time.Millisecond, outShed),
		at(4.9, 200*time.Millisecond, outAccepted),
		at(6, 40*time.Millisecond, outFailed),
		at(12, 20*time.Millisecond, outShed),
		at(-1, time.Second, outAccepted), // before the run: left out
	}, t0, 5*time.Second)
	want := []bin{
		{offered: 3, accepted: 2, acceptedP99: 200 * time.Millisecond, shedP99: 30 * time.Millisecond},
		{offered: 1},
		{offered: 1, shedP99: 20 * time.Millisecond},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(bin{})); diff != "" {
		t.Errorf("bins (-want +got):\n%s", diff)
	}
}
