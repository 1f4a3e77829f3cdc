package nudge

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/spanmart/spanmart/pkg/outboxlib"
)

func TestNudge(t *testing.T) {
	got := make(chan string, 1)
	relay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Method + " " + r.URL.RequestURI()
	}))
	defer relay.Close()
	const orderID = "5b0c1c9e-0000-4000-8000-000000000001"
	New(relay.URL+"/").Nudge(context.Background(), orderID)
	want := fmt.Sprintf("POST /nudge?source=orders&shard=%d", outboxlib.ShardOf(orderID))
	if g := <-got; g != want {
		t.Errorf("relay got %q, want %q", g, want)
	}
}

func TestNudgeIsBestEffort(t *testing.T) {
	if New("") != nil {
		t.Error(`New("") is not nil`)
	}
	var r *Relay
	r.Nudge(context.Background(), "o-1") // no relay configured: nothing happens

	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	New(dead.URL).Nudge(context.Background(), "o-1") // unreachable: logged, not returned, no panic

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	New("http://127.0.0.1:1").Nudge(ctx, "o-1") // a cancelled request context
}
