package policy

import (
	"sync"
	"time"
)

// meter is the request-rate and byte-rate buckets one key counts against,
// behind one lock: a request looks at both and takes from both at once.
type meter struct {
	mu sync.Mutex
	b  [2]*bucket // requests, bytes; nil when the rule sets no such rate
	// exempt is a connection's ceiling on the exempt APIs (exemptOver);
	// nil until one is sent.
	exempt *bucket
}

// bucket is a token bucket that, like a Kafka quota, never refuses: a
// request takes its tokens even when that puts the bucket in debt, and the
// debt is the time the client must wait. (x/time/rate refuses a request
// larger than its burst, which a quota must not do.) Its meter's lock
// guards it.
type bucket struct {
	rate   float64 // tokens per second
	burst  float64 // most tokens saved up: one second's worth
	tokens float64
	last   int64 // unix nanoseconds of the last refill
}

func newBucket(rate float64, now time.Time) *bucket {
	return &bucket{rate: rate, burst: rate, tokens: rate, last: now.UnixNano()}
}

// take charges n tokens at now and returns how long the client must wait
// for the bucket to be out of debt (0 when it is not in debt).
func (b *bucket) take(n float64, now time.Time) time.Duration {
	b.refill(now)
	b.tokens -= n
	return b.debt()
}

// peek returns the wait that taking n tokens would cause, without taking
// them: a rejected request costs nothing.
func (b *bucket) peek(n float64, now time.Time) time.Duration {
	b.refill(now)
	if b.tokens-n >= 0 || (n > b.burst && b.tokens >= b.burst) {
		return 0 // a request larger than the whole burst goes from a full bucket, into debt
	}
	return time.Duration((n - b.tokens) / b.rate * float64(time.Second))
}

func (b *bucket) refill(now time.Time) {
	if t := now.UnixNano(); t > b.last {
		b.tokens = min(b.burst, b.tokens+float64(t-b.last)/1e9*b.rate)
		b.last = t
	}
}

func (b *bucket) debt() time.Duration {
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.rate * float64(time.Second))
}

// fullAt is when, in unix nanoseconds, the bucket holds its whole burst
// again if nothing more is taken from it.
func (b *bucket) fullAt() float64 {
	return float64(b.last) + max(0, b.burst-b.tokens)/b.rate*1e9
}
