package outboxlib_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/pkg/platform/platformtest"
)

// relayStub records the nudges it gets.
type relayStub struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []string
}

func newRelayStub(t *testing.T) *relayStub {
	r := &relayStub{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.got = append(r.got, req.Method+" "+req.URL.RequestURI())
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *relayStub) nudges() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := append([]string(nil), r.got...)
	sort.Strings(out)
	return out
}

func TestNudger(t *testing.T) {
	ctx := context.Background()
	relay := newRelayStub(t)
	const orderID = "5b0c1c9e-0000-4000-8000-000000000001"
	orders := outboxlib.NewNudger(relay.srv.URL+"/", "orders")
	orders.NudgeAggregate(ctx, orderID)
	if err := orders.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{fmt.Sprintf("POST /nudge?source=orders&shard=%d", outboxlib.ShardOf(orderID))}
	if diff := cmp.Diff(want, relay.nudges()); diff != "" {
		t.Errorf("nudges (-want +got):\n%s", diff)
	}
	fulfillment := outboxlib.NewNudger(relay.srv.URL, "fulfillment")
	fulfillment.Nudge(ctx, 3, 1, 3)
	if err := fulfillment.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	want = append(want, "POST /nudge?source=fulfillment&shard=1&shard=3")
	sort.Strings(want)
	if diff := cmp.Diff(want, relay.nudges()); diff != "" {
		t.Errorf("nudges of shards 3, 1, 3 (-want +got):\n%s", diff)
	}
}

// TestNudgerGathersNudges: the nudges made while one is on its way, or within its interval, go
// in one request after it, with each shard once, and no sooner than DefaultNudgeEvery after it.
func TestNudgerGathersNudges(t *testing.T) {
	ctx := context.Background()
	arrived, release := make(chan time.Time, 4), make(chan struct{})
	var mu sync.Mutex
	var got []string
	relay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		arrived <- time.Now()
		mu.Lock()
		got = append(got, req.URL.RawQuery)
		first := len(got) == 1
		mu.Unlock()
		if first {
			<-release
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer relay.Close()

	n := outboxlib.NewNudger(relay.URL, "orders")
	n.Nudge(ctx, 7)
	<-arrived // the first request is on its way, held by the relay
	n.Nudge(ctx, 2)
	n.Nudge(ctx, 5, 2)
	n.Nudge(ctx, 7)
	answered := time.Now()
	close(release)
	if err := n.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	second := <-arrived
	mu.Lock()
	defer mu.Unlock()
	want := []string{"source=orders&shard=7", "source=orders&shard=2&shard=5&shard=7"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if gap := second.Sub(answered); gap < outboxlib.DefaultNudgeEvery {
		t.Errorf("the second request came %v after the first was answered, want at least DefaultNudgeEvery (%v)", gap, outboxlib.DefaultNudgeEvery)
	}
}

func TestNudgerIsBestEffort(t *testing.T) {
	ctx := context.Background()
	if outboxlib.NewNudger("", "orders") != nil {
		t.Error(`NewNudger("") is not nil`)
	}
	var n *outboxlib.Nudger
	n.NudgeAggregate(ctx, "o-1") // no relay configured: nothing happens
	if err := n.Flush(ctx); err != nil {
		t.Errorf("a nil Nudger's Flush: %v", err)
	}

	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	unreachable := outboxlib.NewNudger(dead.URL, "orders")
	unreachable.NudgeAggregate(ctx, "o-1") // logged, not returned
	if err := unreachable.Flush(ctx); err != nil {
		t.Errorf("Flush after a failed nudge: %v", err)
	}

	// A nudge outlives the request that made it: it goes after the request's context is done.
	relay := newRelayStub(t)
	done, cancel := context.WithCancel(ctx)
	cancel()
	late := outboxlib.NewNudger(relay.srv.URL, "orders")
	late.NudgeAggregate(done, "o-1")
	if err := late.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := relay.nudges(); len(got) != 1 {
		t.Errorf("nudges after the request's context was cancelled: %v, want one", got)
	}

	// Flush gives up when its own context does.
	held := make(chan struct{})
	stuck := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-held }))
	defer stuck.Close()
	defer close(held) // before Close, which waits for the handler
	slow := outboxlib.NewNudger(stuck.URL, "orders")
	slow.NudgeAggregate(ctx, "o-1")
	if err := slow.Flush(done); err != context.Canceled {
		t.Errorf("Flush with a done context = %v, want context.Canceled", err)
	}
}

// RELAY_NUDGE_EVERY sets the nudger's interval: DefaultNudgeEvery when unset, 0 allowed, at most
// a second.
func TestNudgeEveryFromTheEnvironment(t *testing.T) {
	for _, tt := range []struct {
		value string
		want  time.Duration
		bad   bool
	}{
		{"", outboxlib.DefaultNudgeEvery, false},
		{"0s", 0, false},
		{"200ms", 200 * time.Millisecond, false},
		{"2s", outboxlib.DefaultNudgeEvery, true},
		{"-1ms", outboxlib.DefaultNudgeEvery, true},
		{"soon", outboxlib.DefaultNudgeEvery, true},
	} {
		env := platform.NewEnv(platformtest.Getenv(map[string]string{
			"OIDC_AUDIENCE": "https://orders.test", "OIDC_ALLOWED_EMAILS": "relay@spanmart.test",
			"RELAY_URL": "http://relay.test", "RELAY_NUDGE_EVERY": tt.value,
		}))
		ce := outboxlib.LoadConsumerEnv(env)
		if err := env.Err(); (err != nil) != tt.bad || ce.NudgeEvery != tt.want {
			t.Errorf("RELAY_NUDGE_EVERY=%q: %v, error %v; want %v, an error: %t", tt.value, ce.NudgeEvery, err, tt.want, tt.bad)
		}
	}
}

// Stop sends what is pending at once, without waiting for the rest of the interval (here an
// hour), and returns once it went: a service stopping does not leave its last nudges to the
// relay's probe. A nil Nudger's Stop does nothing.
func TestNudgerStopSendsWhatIsPending(t *testing.T) {
	ctx := context.Background()
	relay := newRelayStub(t)
	n := outboxlib.NewNudger(relay.srv.URL, "orders").Every(time.Hour)
	n.Nudge(ctx, 3)
	if err := n.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	n.Nudge(ctx, 5) // waits an hour for its turn
	n.Stop()
	want := []string{"POST /nudge?source=orders&shard=3", "POST /nudge?source=orders&shard=5"}
	if diff := cmp.Diff(want, relay.nudges()); diff != "" {
		t.Errorf("nudges once stopped (-want +got):\n%s", diff)
	}
	var none *outboxlib.Nudger
	none.Stop()
}
