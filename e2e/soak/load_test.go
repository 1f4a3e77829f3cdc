package soak

import (
	"testing"
	"time"
)

// A customer who waited for CONFIRMED and next saw the order shipped had no chance to cancel only
// if none of its reads was answered while the order was CONFIRMED; a read answered then that did
// not show CONFIRMED was stale, and the wait's failure stands.
func TestMissed(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 20, 1, 21, 0, time.UTC)
	var got customerOrder
	for _, e := range []struct {
		typ string
		at  time.Duration
	}{{"order.created", 0}, {"order.confirmed", 100 * time.Millisecond}, {"order.shipped", 4500 * time.Millisecond}, {"order.completed", 4600 * time.Millisecond}} {
		got.Timeline = append(got.Timeline, struct {
			EventType string    `json:"event_type"`
			At        time.Time `json:"at"`
		}{e.typ, t0.Add(e.at)})
	}
	for _, c := range []struct {
		name  string
		reads []time.Duration
		want  bool
	}{
		{"no read while confirmed (orders was down)", []time.Duration{50 * time.Millisecond, 5 * time.Second}, true},
		{"a read answered while confirmed", []time.Duration{50 * time.Millisecond, time.Second, 5 * time.Second}, false},
		{"a read answered at the confirmation", []time.Duration{100 * time.Millisecond, 5 * time.Second}, false},
	} {
		o := &Order{}
		for _, r := range c.reads {
			o.reads = append(o.reads, t0.Add(r))
		}
		if m := o.missed(got, "order.confirmed", "order.shipped"); m != c.want {
			t.Errorf("%s: missed = %v, want %v", c.name, m, c.want)
		}
	}
	if (&Order{}).missed(customerOrder{}, "order.confirmed", "order.shipped") {
		t.Error("an order without a timeline: missed, want not (nothing shows it was ever confirmed)")
	}
}
