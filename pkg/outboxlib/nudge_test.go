package outboxlib_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/pkg/outboxlib"
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
	relay := newRelayStub(t)
	const orderID = "5b0c1c9e-0000-4000-8000-000000000001"
	outboxlib.NewNudger(relay.srv.URL+"/", "orders").NudgeAggregate(context.Background(), orderID)
	want := []string{fmt.Sprintf("POST /nudge?source=orders&shard=%d", outboxlib.ShardOf(orderID))}
	if diff := cmp.Diff(want, relay.nudges()); diff != "" {
		t.Errorf("nudges (-want +got):\n%s", diff)
	}
	outboxlib.NewNudger(relay.srv.URL, "fulfillment").Nudge(context.Background(), 3, 1, 3)
	want = append(want, "POST /nudge?source=fulfillment&shard=1", "POST /nudge?source=fulfillment&shard=3")
	sort.Strings(want)
	if diff := cmp.Diff(want, relay.nudges()); diff != "" {
		t.Errorf("nudges of shards 3, 1, 3 (-want +got):\n%s", diff)
	}
}

func TestNudgerIsBestEffort(t *testing.T) {
	if outboxlib.NewNudger("", "orders") != nil {
		t.Error(`NewNudger("") is not nil`)
	}
	var n *outboxlib.Nudger
	n.NudgeAggregate(context.Background(), "o-1") // no relay configured: nothing happens

	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	outboxlib.NewNudger(dead.URL, "orders").NudgeAggregate(context.Background(), "o-1") // unreachable: logged, not returned

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	outboxlib.NewNudger("http://127.0.0.1:1", "orders").NudgeAggregate(ctx, "o-1") // a cancelled request context
}
