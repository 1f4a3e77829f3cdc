package retry

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestBackoff(t *testing.T) {
	s := time.Second
	tests := []struct {
		name   string
		policy Policy
		want   []time.Duration // want[i] is Backoff(i+1)
	}{
		{
			// The example in RetryConfig.max_doublings: double three times, then grow
			// linearly by 2^3 * 10s, then stay at max_backoff.
			name:   "documented example",
			policy: Policy{MinBackoff: 10 * s, MaxBackoff: 300 * s, MaxDoublings: 3},
			want:   []time.Duration{10 * s, 20 * s, 40 * s, 80 * s, 160 * s, 240 * s, 300 * s, 300 * s, 300 * s},
		},
		{
			name:   "default policy",
			policy: DefaultPolicy,
			want: []time.Duration{
				100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
				1600 * time.Millisecond, 3200 * time.Millisecond, 6400 * time.Millisecond, 12800 * time.Millisecond,
				25600 * time.Millisecond, 51200 * time.Millisecond, 102400 * time.Millisecond, 204800 * time.Millisecond,
				409600 * time.Millisecond, 819200 * time.Millisecond, 1638400 * time.Millisecond, 3276800 * time.Millisecond,
				3600 * s, 3600 * s,
			},
		},
		{
			name:   "no doublings grows linearly",
			policy: Policy{MinBackoff: s, MaxBackoff: 4 * s, MaxDoublings: 0},
			want:   []time.Duration{s, 2 * s, 3 * s, 4 * s, 4 * s},
		},
		{
			name:   "one doubling",
			policy: Policy{MinBackoff: s, MaxBackoff: 100 * s, MaxDoublings: 1},
			want:   []time.Duration{s, 2 * s, 4 * s, 6 * s, 8 * s},
		},
		{
			name:   "min equals max",
			policy: Policy{MinBackoff: 5 * s, MaxBackoff: 5 * s, MaxDoublings: 16},
			want:   []time.Duration{5 * s, 5 * s, 5 * s},
		},
		{
			name:   "min above max is capped",
			policy: Policy{MinBackoff: 10 * s, MaxBackoff: 5 * s, MaxDoublings: 16},
			want:   []time.Duration{5 * s, 5 * s},
		},
		{
			name:   "zero min backoff",
			policy: Policy{MinBackoff: 0, MaxBackoff: 5 * s, MaxDoublings: 16},
			want:   []time.Duration{0, 0, 0},
		},
		{
			name:   "negative doublings count as zero",
			policy: Policy{MinBackoff: s, MaxBackoff: 10 * s, MaxDoublings: -3},
			want:   []time.Duration{s, 2 * s, 3 * s},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []time.Duration
			for k := 1; k <= len(tt.want); k++ {
				got = append(got, tt.policy.Backoff(k))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Backoff(1..%d) mismatch (-want +got):\n%s", len(tt.want), diff)
			}
		})
	}
}

// TestBackoffSaturates checks that large k and large doubling counts reach MaxBackoff instead of
// overflowing into a negative or tiny duration.
func TestBackoffSaturates(t *testing.T) {
	tests := []struct {
		name   string
		policy Policy
		k      int
		want   time.Duration
	}{
		{"many doublings", Policy{MinBackoff: time.Second, MaxBackoff: time.Hour, MaxDoublings: math.MaxInt32}, 1000, time.Hour},
		{"huge k linear", Policy{MinBackoff: time.Second, MaxBackoff: time.Hour, MaxDoublings: 16}, math.MaxInt, time.Hour},
		{"huge k no doublings", Policy{MinBackoff: time.Second, MaxBackoff: time.Hour}, math.MaxInt, time.Hour},
		{"max duration ceiling", Policy{MinBackoff: time.Nanosecond, MaxBackoff: math.MaxInt64, MaxDoublings: 100}, 200, math.MaxInt64},
		{"max duration ceiling linear", Policy{MinBackoff: time.Second, MaxBackoff: math.MaxInt64, MaxDoublings: 2}, math.MaxInt, math.MaxInt64},
		{"k zero is the first retry", Policy{MinBackoff: time.Second, MaxBackoff: time.Hour, MaxDoublings: 16}, 0, time.Second},
		{"negative k is the first retry", Policy{MinBackoff: time.Second, MaxBackoff: time.Hour, MaxDoublings: 16}, -5, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.policy.Backoff(tt.k); got != tt.want {
				t.Errorf("Backoff(%d) = %v, want %v", tt.k, got, tt.want)
			}
		})
	}
}

func TestBackoffMonotonic(t *testing.T) {
	p := Policy{MinBackoff: 3 * time.Millisecond, MaxBackoff: 7 * time.Hour, MaxDoublings: 40}
	prev := time.Duration(0)
	for k := 1; k <= 10000; k++ {
		got := p.Backoff(k)
		if got < prev || got > p.MaxBackoff {
			t.Fatalf("Backoff(%d) = %v after %v; want non-decreasing and at most %v", k, got, prev, p.MaxBackoff)
		}
		prev = got
	}
}

func TestExhausted(t *testing.T) {
	first := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name     string
		policy   Policy
		attempts int
		elapsed  time.Duration
		want     bool
	}{
		{"default before max attempts", DefaultPolicy, 99, 1000 * time.Hour, false},
		{"default at max attempts", DefaultPolicy, 100, 0, true},
		{"attempts only, below", Policy{MaxAttempts: 3}, 2, 0, false},
		{"attempts only, reached", Policy{MaxAttempts: 3}, 3, 0, true},
		{"attempts only, beyond", Policy{MaxAttempts: 3}, 4, 0, true},
		{"both, attempts reached, duration not", Policy{MaxAttempts: 3, MaxRetryDuration: time.Hour}, 3, 59 * time.Minute, false},
		{"both, duration reached, attempts not", Policy{MaxAttempts: 3, MaxRetryDuration: time.Hour}, 2, 2 * time.Hour, false},
		{"both reached", Policy{MaxAttempts: 3, MaxRetryDuration: time.Hour}, 3, time.Hour, true},
		{"unlimited attempts, duration only, not reached", Policy{MaxAttempts: -1, MaxRetryDuration: time.Hour}, 1000, 59 * time.Minute, false},
		{"unlimited attempts, duration only, reached", Policy{MaxAttempts: -1, MaxRetryDuration: time.Hour}, 1, time.Hour, true},
		{"both unlimited", Policy{MaxAttempts: -1, MaxRetryDuration: 0}, 1 << 40, 10000 * time.Hour, false},
		{"max attempts 1", Policy{MaxAttempts: 1}, 1, 0, true},
		{"clock behind first attempt", Policy{MaxAttempts: 1, MaxRetryDuration: time.Minute}, 5, -time.Hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.policy.Exhausted(tt.attempts, first, first.Add(tt.elapsed)); got != tt.want {
				t.Errorf("%+v.Exhausted(%d, first, first+%v) = %v, want %v", tt.policy, tt.attempts, tt.elapsed, got, tt.want)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2015, 10, 21, 7, 28, 0, 0, time.UTC)
	tests := []struct {
		header string
		want   time.Duration
		wantOK bool
	}{
		{"", 0, false},
		{"   ", 0, false},
		{"0", 0, true},
		{"120", 120 * time.Second, true},
		{" 7 ", 7 * time.Second, true},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"12abc", 0, false},
		{"soon", 0, false},
		{"99999999999999999999999", math.MaxInt64, true},
		{"9223372036", 9223372036 * time.Second, true},
		{"9223372037", math.MaxInt64, true},
		{"Wed, 21 Oct 2015 07:30:00 GMT", 2 * time.Minute, true},      // IMF-fixdate
		{"Wednesday, 21-Oct-15 07:28:30 GMT", 30 * time.Second, true}, // RFC 850
		{"Wed Oct 21 07:29:00 2015", time.Minute, true},               // ANSI C asctime
		{"Wed, 21 Oct 2015 07:00:00 GMT", 0, true},                    // in the past
		{"Wed, 21 Oct 2015 07:30:00", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.header, func(t *testing.T) {
			got, ok := RetryAfter(tt.header, now)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("RetryAfter(%q) = %v, %v; want %v, %v", tt.header, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestDefaultBurst(t *testing.T) {
	tests := []struct {
		rate float64
		want int
	}{
		{math.NaN(), 1},
		{-1, 1},
		{0, 1},
		{0.1, 1},
		{1, 1},
		{1.2, 2},
		{10, 10},
		{499.5, 500},
		{500, 500},
		{math.Inf(1), 500},
	}
	for _, tt := range tests {
		if got := DefaultBurst(tt.rate); got != tt.want {
			t.Errorf("DefaultBurst(%v) = %d, want %d", tt.rate, got, tt.want)
		}
	}
}

// take is one step of a bucket scenario: at offset from the start, Take returns ok and wait.
type take struct {
	at   time.Duration
	ok   bool
	wait time.Duration
}

func runTakes(t *testing.T, b *Bucket, start time.Time, steps []take) {
	t.Helper()
	var got []take
	for _, s := range steps {
		ok, wait := b.Take(start.Add(s.at))
		got = append(got, take{s.at, ok, wait})
	}
	if diff := cmp.Diff(steps, got, cmp.AllowUnexported(take{})); diff != "" {
		t.Errorf("Take sequence mismatch (-want +got):\n%s", diff)
	}
}

func TestBucket(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name  string
		rate  float64
		burst int
		steps []take
	}{
		{
			name: "starts full, then refills at rate", rate: 10, burst: 3,
			steps: []take{
				{0, true, 0}, {0, true, 0}, {0, true, 0},
				{0, false, 100 * ms},
				{50 * ms, false, 50 * ms},
				{100 * ms, true, 0},
				{100 * ms, false, 100 * ms},
			},
		},
		{
			name: "refill is capped at burst", rate: 10, burst: 2,
			steps: []take{
				{0, true, 0}, {0, true, 0},
				{10 * time.Second, true, 0}, {10 * time.Second, true, 0},
				{10 * time.Second, false, 100 * ms},
			},
		},
		{
			name: "fractional rate", rate: 0.5, burst: 1,
			steps: []take{
				{0, true, 0},
				{0, false, 2 * time.Second},
				{1500 * ms, false, 500 * ms},
				{2 * time.Second, true, 0},
			},
		},
		{
			name: "rate with inexact float interval", rate: 3, burst: 1,
			steps: []take{
				{0, true, 0},
				{0, false, 333333334},
				{333333334, true, 0},
				{666666667, true, 0},
				{1 * time.Second, true, 0},
				{1 * time.Second, false, 333333334},
			},
		},
		{
			name: "zero burst counts as one", rate: 1, burst: 0,
			steps: []take{{0, true, 0}, {0, false, time.Second}, {time.Second, true, 0}},
		},
		{
			name: "zero rate never refills", rate: 0, burst: 2,
			steps: []take{{0, true, 0}, {0, true, 0}, {time.Hour, false, math.MaxInt64}},
		},
		{
			name: "clock stepping back earns nothing", rate: 1, burst: 1,
			steps: []take{
				{time.Second, true, 0},
				{0, false, time.Second}, // behind the last refill: nothing earned
				{1500 * ms, false, 500 * ms},
				{2 * time.Second, true, 0},
			},
		},
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runTakes(t, NewBucket(tt.rate, tt.burst, start), start, tt.steps)
		})
	}
}

func TestBucketSetRate(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := time.Second

	t.Run("lower burst caps the tokens it has", func(t *testing.T) {
		b := NewBucket(1, 10, start)
		b.SetRate(1, 2, start)
		runTakes(t, b, start, []take{{0, true, 0}, {0, true, 0}, {0, false, s}})
	})
	t.Run("higher burst keeps the tokens it has", func(t *testing.T) {
		b := NewBucket(1, 2, start)
		runTakes(t, b, start, []take{{0, true, 0}})
		b.SetRate(1, 10, start)
		runTakes(t, b, start, []take{{0, true, 0}, {0, false, s}, {20 * s, true, 0}})
		// 20s at 1/s refilled the 10-token bucket completely: 9 more tokens.
		var ok int
		for range 12 {
			if got, _ := b.Take(start.Add(20 * s)); got {
				ok++
			}
		}
		if ok != 9 {
			t.Errorf("took %d tokens after refilling to the new burst, want 9", ok)
		}
	})
	t.Run("time before the change is earned at the old rate", func(t *testing.T) {
		b := NewBucket(1, 5, start)
		for range 5 {
			b.Take(start)
		}
		// 2s at 1/s earns 2 tokens; afterwards the rate is 10/s.
		b.SetRate(10, 5, start.Add(2*s))
		runTakes(t, b, start, []take{
			{2 * s, true, 0}, {2 * s, true, 0},
			{2 * s, false, 100 * time.Millisecond},
			{2*s + 100*time.Millisecond, true, 0},
		})
	})
	t.Run("pause by zero rate and resume", func(t *testing.T) {
		b := NewBucket(2, 1, start)
		runTakes(t, b, start, []take{{0, true, 0}})
		b.SetRate(0, 1, start)
		runTakes(t, b, start, []take{{time.Hour, false, math.MaxInt64}})
		b.SetRate(2, 1, start.Add(time.Hour))
		runTakes(t, b, start, []take{
			{time.Hour, false, 500 * time.Millisecond},
			{time.Hour + 500*time.Millisecond, true, 0},
		})
	})
}

// TestBucketConcurrent checks, under the race detector, that concurrent takers at one instant
// get exactly the burst between them.
func TestBucketConcurrent(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := NewBucket(1, 50, now)
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		got int
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if ok, _ := b.Take(now); ok {
					mu.Lock()
					got++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if got != 50 {
		t.Errorf("concurrent takers got %d tokens, want 50", got)
	}
}
