// Package retry holds Cloud Tasks' retry and rate-limit rules as pure functions and a token bucket,
// so the dispatcher in tasksemu and its tests share one definition of "when may this task run next".
package retry

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Policy is a queue's retry_config. Fields hold the queue's effective values: an unset field in a
// CreateQueue request must be replaced by DefaultPolicy's before it reaches here (a zero
// MaxAttempts here means "no attempts allowed", not "default").
type Policy struct {
	MaxAttempts      int32         // -1 = unlimited
	MaxRetryDuration time.Duration // 0 = unlimited
	MinBackoff       time.Duration
	MaxBackoff       time.Duration
	MaxDoublings     int32
}

// DefaultPolicy is Cloud Tasks' default retry_config for a queue created without one.
var DefaultPolicy = Policy{
	MaxAttempts:      100,
	MaxRetryDuration: 0,
	MinBackoff:       100 * time.Millisecond,
	MaxBackoff:       3600 * time.Second,
	MaxDoublings:     16,
}

// Backoff is the gap before retry k (k = 1 is the first retry):
//
//	min(MaxBackoff, k-1 <= d ? MinBackoff*2^(k-1) : MinBackoff*2^d*(k-d)), d = MaxDoublings.
//
// The interval doubles d times and then grows linearly by MinBackoff*2^d per retry. Large k
// saturate at MaxBackoff instead of overflowing. k < 1 is treated as 1.
func (p Policy) Backoff(k int) time.Duration {
	if k < 1 {
		k = 1
	}
	lo, hi := max(p.MinBackoff, 0), max(p.MaxBackoff, 0)
	if lo == 0 || lo >= hi {
		return min(lo, hi)
	}
	d := int(max(p.MaxDoublings, 0))
	e := min(k-1, d)
	// lo < hi here, so lo<<e exceeds hi long before it could overflow: stop doubling at hi.
	b := lo
	for range e {
		if b > hi/2 {
			return hi
		}
		b *= 2
	}
	if k-1 > d {
		n := time.Duration(k - d)
		if b > hi/n {
			return hi
		}
		b *= n
	}
	return min(b, hi)
}

// Exhausted reports whether a task that has been attempted attempts times, first at firstAttempt,
// may not be retried at now.
//
// Cloud Tasks stops retrying only when max_attempts and max_retry_duration are both satisfied: the
// task has been attempted MaxAttempts times and MaxRetryDuration has passed since its first
// attempt. A limit the queue leaves unlimited (MaxAttempts -1, MaxRetryDuration 0) does not hold
// retrying back on its own, so the other limit alone decides: the default policy (100 attempts,
// no duration) gives up after 100 attempts, and 1h with unlimited attempts gives up after 1h. Only
// when both are unlimited is the task retried forever (in production, until the task retention
// limit; that is the dispatcher's business, not this function's).
func (p Policy) Exhausted(attempts int, firstAttempt, now time.Time) bool {
	limitAttempts := p.MaxAttempts >= 0
	limitDuration := p.MaxRetryDuration > 0
	if !limitAttempts && !limitDuration {
		return false
	}
	if limitAttempts && attempts < int(p.MaxAttempts) {
		return false
	}
	if limitDuration && now.Sub(firstAttempt) < p.MaxRetryDuration {
		return false
	}
	return true
}

// RetryAfter parses a Retry-After header value, either delay-seconds ("120") or an HTTP-date
// ("Wed, 21 Oct 2015 07:28:00 GMT"), into a delay relative to now. ok is false when the value is
// absent or invalid. A date in the past yields a zero delay.
func RetryAfter(header string, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(header)
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
				return math.MaxInt64, true
			}
			return 0, false
		}
		if n > uint64(math.MaxInt64/int64(time.Second)) {
			return math.MaxInt64, true
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

// MaxBurst is the largest max_burst_size Cloud Tasks reports for a queue.
const MaxBurst = 500

// DefaultBurst is the max_burst_size the emulator derives from max_dispatches_per_second.
//
// In Cloud Tasks v2, max_burst_size is output only: Cloud Tasks picks it from
// max_dispatches_per_second when the queue is created, and picks it again whenever UpdateQueue
// changes the rate (or touches a queue created from queue.yaml/xml, whose burst was bucket_size).
// The documentation gives no exact formula; it says the value is generally at least
// max_dispatches_per_second but may be higher to absorb bursts, and (in the v2beta docs) that the
// maximum is 500. The emulator therefore uses ceil(rate), at least 1 and at most MaxBurst: for
// the default 500 dispatches/s that is 500, i.e. one second's worth of dispatches.
func DefaultBurst(rate float64) int {
	if math.IsNaN(rate) || rate <= 1 {
		return 1
	}
	if rate >= MaxBurst {
		return MaxBurst
	}
	return int(math.Ceil(rate))
}

// Bucket is a token bucket: Rate tokens per second, capacity Burst. Safe for concurrent use.
// Time is passed in by the caller, so tests drive it with a fake clock.
type Bucket struct {
	mu     sync.Mutex
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

// NewBucket returns a full bucket.
func NewBucket(rate float64, burst int, now time.Time) *Bucket {
	b := &Bucket{last: now}
	b.set(rate, burst)
	b.tokens = b.burst
	return b
}

// Take takes one token at now if available (true), else returns false and how long until one is
// available. A zero or negative rate never refills the bucket; the wait is then math.MaxInt64.
func (b *Bucket) Take(now time.Time) (bool, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(now)
	// epsilon absorbs float rounding in refill (e.g. 3/s for 1/3 s earning 0.999...), which would
	// otherwise deny a token at the exact instant it is due and ask the caller to wait 1ns.
	const epsilon = 1e-9
	if b.tokens >= 1-epsilon {
		b.tokens = max(b.tokens-1, 0)
		return true, 0
	}
	if b.rate <= 0 {
		return false, math.MaxInt64
	}
	wait := math.Ceil((1 - b.tokens) / b.rate * float64(time.Second))
	if wait >= math.MaxInt64 {
		return false, math.MaxInt64
	}
	return false, time.Duration(wait)
}

// SetRate changes rate and burst (UpdateQueue), keeping the tokens it has (capped at the new burst).
func (b *Bucket) SetRate(rate float64, burst int, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(now)
	b.set(rate, burst)
	b.tokens = min(b.tokens, b.burst)
}

// set stores the limits. A burst below 1 would never let a token through, so it counts as 1;
// a NaN or negative rate counts as 0 (no refill).
func (b *Bucket) set(rate float64, burst int) {
	if !(rate > 0) {
		rate = 0
	}
	b.rate = rate
	b.burst = float64(max(burst, 1))
}

// refill adds the tokens earned since the last call. A clock that steps backwards earns nothing
// and does not move last back, so tokens are never earned twice for the same interval.
func (b *Bucket) refill(now time.Time) {
	if !now.After(b.last) {
		return
	}
	b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
}
