package outboxlib

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// FuzzParseDelivery: whatever ce-* headers and body a delivery to POST /events carries, the two
// functions the consumer turns it into a Delivery with (ParseRequest, then predecessorOf) never
// panic and refuse only with ErrMalformed (a 400). An event they accept satisfies every invariant
// of an event on the wire (validate), travels unchanged through its own headers (Headers, as the
// relay sends it), and has a predecessor version in 0..version-1.
func FuzzParseDelivery(f *testing.F) {
	committed := time.Date(2026, 12, 1, 9, 30, 0, 123456789, time.UTC)
	good := Event{
		ID: "0b7c3f5e-2f44-4c8e-9a51-4f1f8e3d2a10", Type: "order.created", Source: "//spanmart/orders",
		AggregateType: "order", AggregateID: "7d1f0c4e-8a2b-4b7e-9f00-1234567890ab", AggregateVersion: 3,
		SchemaVersion: 1, OccurredAt: committed.Add(-time.Millisecond), CommittedAt: committed,
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		Payload:     []byte(`{"order_id":"7d1f0c4e-8a2b-4b7e-9f00-1234567890ab","lines":[{"sku":"A1","quantity":2}]}`),
	}
	add := func(e Event, predecessor string, mutate func(map[string]string)) {
		h := e.Headers()
		if mutate != nil {
			mutate(h)
		}
		f.Add(h[HeaderSpecVersion], h[HeaderID], h[HeaderSource], h[HeaderType], h[HeaderSubject],
			h[HeaderAggregateType], h[HeaderAggregateVersion], h[HeaderSchemaVersion], h[HeaderTime],
			h[HeaderCommitTime], h[HeaderTraceParent], h["Content-Type"], predecessor, []byte(e.Payload))
	}
	add(good, "", nil)
	add(good, "1", nil)
	add(good, "3", nil)
	add(good, "-1", nil)
	add(good, "0x2", nil)
	first := good
	first.AggregateVersion, first.CommittedAt, first.TraceParent = 1, time.Time{}, ""
	add(first, "0", nil)
	add(good, "", func(h map[string]string) { h[HeaderSpecVersion] = "0.3" })
	add(good, "", func(h map[string]string) { h[HeaderID] = "0B7C3F5E2F444C8E9A514F1F8E3D2A10" })
	add(good, "", func(h map[string]string) { h[HeaderID] = "{0b7c3f5e-2f44-4c8e-9a51-4f1f8e3d2a10}" })
	add(good, "", func(h map[string]string) { h[HeaderAggregateVersion] = "9223372036854775808" })
	add(good, "", func(h map[string]string) { h[HeaderSchemaVersion] = "0" })
	add(good, "", func(h map[string]string) { h[HeaderTime] = "2026-12-01 09:30:00" })
	add(good, "", func(h map[string]string) { h[HeaderCommitTime] = "2026-12-01T09:30:00+25:00" })
	add(good, "", func(h map[string]string) { h["Content-Type"] = "text/plain" })
	add(good, "", func(h map[string]string) { h[HeaderType] = "" })
	bad := good
	bad.Payload = []byte(`{"order_id":`)
	add(bad, "", nil)
	bad.Payload = nil
	add(bad, "", nil)

	f.Fuzz(func(t *testing.T, specVersion, id, source, typ, subject, aggregateType, aggregateVersion, schemaVersion,
		occurred, committed, traceParent, contentType, predecessor string, body []byte) {
		h := http.Header{}
		for name, v := range map[string]string{
			HeaderSpecVersion: specVersion, HeaderID: id, HeaderSource: source, HeaderType: typ,
			HeaderSubject: subject, HeaderAggregateType: aggregateType, HeaderAggregateVersion: aggregateVersion,
			HeaderSchemaVersion: schemaVersion, HeaderTime: occurred, HeaderCommitTime: committed,
			HeaderTraceParent: traceParent, "Content-Type": contentType, HeaderPredecessorVersion: predecessor,
		} {
			if v != "" { // "" stands for a header the delivery does not carry
				h.Set(name, v)
			}
		}
		ev, err := ParseRequest(h, body)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("ParseRequest: %v, want ErrMalformed", err)
			}
			return
		}
		if err := ev.validate(true); err != nil {
			t.Fatalf("ParseRequest accepted an invalid event: %v", err)
		}
		again := http.Header{}
		for name, v := range ev.Headers() {
			again.Set(name, v)
		}
		round, err := ParseRequest(again, ev.Payload)
		if err != nil {
			t.Fatalf("the event's own headers %v: %v", again, err)
		}
		if diff := cmp.Diff(ev, round, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
			t.Fatalf("the event changed on its way through its headers (-first +again):\n%s", diff)
		}
		pred, err := predecessorOf(h, ev.AggregateVersion)
		switch {
		case err != nil && !errors.Is(err, ErrMalformed):
			t.Fatalf("predecessorOf(%q, %d): %v, want ErrMalformed", predecessor, ev.AggregateVersion, err)
		case err == nil && (pred < 0 || pred >= ev.AggregateVersion):
			t.Fatalf("predecessorOf(%q, %d) = %d, not a version below it", predecessor, ev.AggregateVersion, pred)
		case err == nil && predecessor == "" && pred != ev.AggregateVersion-1:
			t.Fatalf("without ce-predecessorversion the predecessor of %d is %d, want %d", ev.AggregateVersion, pred, ev.AggregateVersion-1)
		}
	})
}
