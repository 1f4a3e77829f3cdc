package soak

import (
	"net/http"
	"testing"
	"time"

	"github.com/spanmart/spanmart/e2e/harness"
)

// A refused customer comes back after Retry-After, later with each refusal in a row (at most 32
// times it), jittered within ±20 %, so that customers turned away at once do not return at once.
func TestBackoffAfterRefusal(t *testing.T) {
	for _, c := range []struct {
		n    int
		want time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {6, 32 * time.Second}, {9, 32 * time.Second}} {
		seen := map[time.Duration]bool{}
		for range 50 {
			d := backoff(time.Second, c.n)
			if d < c.want*8/10 || d > c.want*12/10 {
				t.Fatalf("refusal %d: waited %s, want within 20 %% of %s", c.n, d, c.want)
			}
			seen[d] = true
		}
		if len(seen) < 2 {
			t.Errorf("refusal %d: 50 pauses all %v: no jitter", c.n, seen)
		}
	}
}

// Only admission control's refusal (503 with Retry-After) is shedding; a 503 without it is the
// service failing, which a customer retries at once.
func TestShedIsTheRefusalWithRetryAfter(t *testing.T) {
	refusal := &harness.Response{Status: http.StatusServiceUnavailable, Header: http.Header{"Retry-After": {"3"}}}
	if !shed(refusal) || shedRetryAfter(refusal) != 3*time.Second {
		t.Errorf("503 Retry-After 3: shed %v after %s, want shed after 3s", shed(refusal), shedRetryAfter(refusal))
	}
	for _, r := range []*harness.Response{
		{Status: http.StatusServiceUnavailable, Header: http.Header{}},
		{Status: http.StatusInternalServerError, Header: http.Header{"Retry-After": {"1"}}},
	} {
		if shed(r) {
			t.Errorf("%d %v: counted as shed", r.Status, r.Header)
		}
	}
	if d := shedRetryAfter(&harness.Response{Header: http.Header{"Retry-After": {"Fri, 04 Dec 2026 10:00:00 GMT"}}}); d != time.Second {
		t.Errorf("a Retry-After date: %s, want the 1s floor", d)
	}
}
