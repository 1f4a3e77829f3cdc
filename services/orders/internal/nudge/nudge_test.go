package nudge

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestNudge(t *testing.T) {
	got := make(chan string, 1)
	relay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Method + " " + r.URL.Path
	}))
	defer relay.Close()
	New(relay.URL + "/").Nudge(context.Background())
	if g := <-got; g != "POST /nudge" {
		t.Errorf("relay got %q, want POST /nudge", g)
	}
}

func TestNudgeIsBestEffort(t *testing.T) {
	if New("") != nil {
		t.Error(`New("") is not nil`)
	}
	var r *Relay
	r.Nudge(context.Background()) // no relay configured: nothing happens

	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	New(dead.URL).Nudge(context.Background()) // unreachable: logged, not returned, no panic

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	New("http://127.0.0.1:1").Nudge(ctx) // a cancelled request context
}
