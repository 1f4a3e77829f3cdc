package outboxlib_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/pkg/platform/platformtest"
)

// delivery is a POST /events sent directly (not through a queue), so that its answer is read
// synchronously.
type delivery struct {
	name   string
	auth   string                          // the Authorization header; "" sends none
	change func(h map[string]string)       // alters the event's headers
	body   func(ev outboxlib.Event) string // the body; nil sends the event's payload
	// shortBy declares a Content-Length this much longer than the body, then stops sending.
	shortBy int
	status  int
	detail  string
	// recorded: the consumer counts the answer in DeliveryFailures (a malformed delivery with a
	// usable event id, so that it is dead-lettered on the MaxAttempts-th), and nothing else.
	recorded bool
}

// TestConsumerRefusesHostileDeliveries: POST /events without a valid token of the relay (none,
// forged with another key, expired, for another audience, of another account), or with a missing
// or broken ce-* attribute, bad JSON, a huge or a short body, gets a 4xx problem, and the consumer
// stores nothing of it: no inbox row, no change by the handler, no dead letter. The one trace a
// malformed delivery with a usable id leaves is its failure count (DeliveryFailures), which is
// how it is dead-lettered for a person to look at if it keeps arriving.
func TestConsumerRefusesHostileDeliveries(t *testing.T) {
	f := newFixture(t, 10)
	audience := f.url + outboxlib.PathEvents
	relay := "Bearer " + idToken(t, relaySA, audience)
	forged := "Bearer " + forgedToken(t, audience)
	tests := []delivery{
		{name: "no token", status: 401},
		{name: "a token signed with another key", auth: forged, status: 401},
		{name: "a token for another audience", auth: "Bearer " + idToken(t, relaySA, "https://someone-else.example.com/events"), status: 401},
		{name: "another account's token", auth: "Bearer " + idToken(t, operator, audience), status: 401},
		{name: "an empty bearer token", auth: "Bearer ", status: 401},
		{name: "no ce-specversion", auth: relay, change: without(outboxlib.HeaderSpecVersion), status: 400, detail: "ce-specversion", recorded: true},
		{name: "ce-specversion 0.3", auth: relay, change: set(outboxlib.HeaderSpecVersion, "0.3"), status: 400, detail: "want 1.0", recorded: true},
		{name: "no ce-id", auth: relay, change: without(outboxlib.HeaderID), status: 400, detail: "is not a UUID"},
		{name: "a ce-id that is no UUID", auth: relay, change: set(outboxlib.HeaderID, "../../etc/passwd"), status: 400, detail: "is not a UUID"},
		{name: "no ce-type", auth: relay, change: without(outboxlib.HeaderType), status: 400, detail: "type must be", recorded: true},
		{name: "no ce-source", auth: relay, change: without(outboxlib.HeaderSource), status: 400, detail: "source is missing", recorded: true},
		{name: "no ce-subject", auth: relay, change: without(outboxlib.HeaderSubject), status: 400, detail: "subject", recorded: true},
		{name: "no ce-time", auth: relay, change: without(outboxlib.HeaderTime), status: 400, detail: "ce-time", recorded: true},
		{name: "no ce-aggregatetype", auth: relay, change: without(outboxlib.HeaderAggregateType), status: 400, detail: "aggregate type", recorded: true},
		{name: "ce-aggregateversion not a number", auth: relay, change: set(outboxlib.HeaderAggregateVersion, "1e3"), status: 400, detail: "is not an integer", recorded: true},
		{name: "ce-aggregateversion 0", auth: relay, change: set(outboxlib.HeaderAggregateVersion, "0"), status: 400, detail: "must be positive", recorded: true},
		{name: "ce-schemaversion overflowing", auth: relay, change: set(outboxlib.HeaderSchemaVersion, "9223372036854775808"), status: 400, detail: "is not an integer", recorded: true},
		{name: "ce-predecessorversion not below the version", auth: relay, change: set(outboxlib.HeaderPredecessorVersion, "1"), status: 400, detail: "ce-predecessorversion", recorded: true},
		{name: "ce-committime not RFC 3339", auth: relay, change: set(outboxlib.HeaderCommitTime, "yesterday"), status: 400, detail: "ce-committime", recorded: true},
		{name: "a text/plain body", auth: relay, change: set("Content-Type", "text/plain"), status: 400, detail: "content type", recorded: true},
		{name: "bad JSON", auth: relay, body: func(outboxlib.Event) string { return `{"qty":` }, status: 400, detail: "payload is not valid JSON", recorded: true},
		{name: "an empty body", auth: relay, body: func(outboxlib.Event) string { return "" }, status: 400, detail: "payload is not valid JSON", recorded: true},
		{name: "a huge body", auth: relay, body: func(outboxlib.Event) string {
			return `{"qty":1,"pad":"` + strings.Repeat("x", platform.DefaultMaxBodyBytes) + `"}`
		}, status: 413, detail: "request body exceeds"},
		{name: "a body shorter than its Content-Length", auth: relay, shortBy: 10, status: 400, detail: "the request body could not be read"},
	}
	var ids, skus []string
	recorded := map[string]bool{}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := stockEvent(t, fmt.Sprintf("sku-hostile-%d", i), 1, 1, "")
			ids, skus = append(ids, ev.ID), append(skus, ev.AggregateID)
			if tt.recorded {
				recorded[ev.ID] = true
			}
			h := ev.Headers()
			if tt.change != nil {
				tt.change(h)
			}
			if tt.auth != "" {
				h["Authorization"] = tt.auth
			}
			body := string(ev.Payload)
			if tt.body != nil {
				body = tt.body(ev)
			}
			platformtest.Refuse(t, f.url, platformtest.Hostile{Name: tt.name, Path: outboxlib.PathEvents, Header: h, Body: body, ShortBy: tt.shortBy, Status: tt.status, Detail: tt.detail})
		})
	}
	for i, id := range ids {
		if f.processed(t, id) {
			t.Errorf("%s: in ProcessedEvents", tests[i].name)
		}
		if n := f.onHand(t, skus[i]); n != 0 {
			t.Errorf("%s: the handler ran (on hand %d)", tests[i].name, n)
		}
	}
	if dl, err := f.consumer.DeadLetters(context.Background(), true, 0); err != nil || len(dl) != 0 {
		t.Errorf("dead letters %v (%v), want none", dl, err)
	}
	failures := map[string]int64{}
	err := f.client.Single().Query(context.Background(), spanner.Statement{
		SQL:    "SELECT EventId, Failures FROM DeliveryFailures WHERE EventId IN UNNEST(@ids)",
		Params: map[string]any{"ids": ids},
	}).Do(func(r *spanner.Row) error {
		var id string
		var n int64
		err := r.Columns(&id, &n)
		failures[id] = n
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		want := int64(0)
		if recorded[id] {
			want = 1
		}
		if failures[id] != want {
			t.Errorf("%s: %d failures recorded, want %d", tests[i].name, failures[id], want)
		}
	}

	// An expired token: the verifier's clock two hours on, past the token's hour.
	outboxlib.SetVerifierClock(f.verifier, func() time.Time { return time.Now().Add(2 * time.Hour) })
	t.Cleanup(func() { outboxlib.SetVerifierClock(f.verifier, time.Now) })
	ev := stockEvent(t, "sku-hostile-expired", 1, 1, "")
	h := ev.Headers()
	h["Authorization"] = relay
	expired := platformtest.Hostile{Name: "an expired token", Path: outboxlib.PathEvents, Header: h, Body: string(ev.Payload), Status: http.StatusUnauthorized}
	t.Run(expired.Name, func(t *testing.T) { platformtest.Refuse(t, f.url, expired) })
	if f.processed(t, ev.ID) || f.onHand(t, ev.AggregateID) != 0 {
		t.Error("a delivery with an expired token was applied")
	}
}

func without(name string) func(map[string]string) {
	return func(h map[string]string) { delete(h, name) }
}

func set(name, value string) func(map[string]string) {
	return func(h map[string]string) { h[name] = value }
}

// forgedToken is an ID token with every claim the relay's real token has, signed with a key the
// issuer never published.
func forgedToken(t *testing.T, audience string) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "forged"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := jwt.Signed(signer).Claims(jwt.Claims{
		Issuer: tasks.Issuer(), Subject: relaySA, Audience: jwt.Audience{audience},
		IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Hour)),
	}).Claims(map[string]any{"email": relaySA, "email_verified": true}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
