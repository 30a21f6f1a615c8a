package tracing

import (
	"sync"
	"time"
)

// inflateRate is tracing.links.max_decompressed_bytes_per_second: the bytes
// the whole process may inflate for links each second. The per-request
// budget bounds one bomb; this bounds a stream of them, which would
// otherwise keep an inflation slot, and so a CPU, busy for as long as the
// client keeps sending (they are small on the wire). Links are best
// effort, so what is over the rate is not read, never waited for. Unlike
// policy's quota buckets, which go into debt and make a client wait, this
// grants part of a request, never more than it holds, and takes back what
// a grant did not use; x/time/rate's limiter can neither grant part nor
// take back part.
type inflateRate struct {
	mu     sync.Mutex
	rate   float64 // bytes per second; the bucket holds one second's worth
	tokens float64
	last   time.Time
}

// minInflateGrant is the least a batch is opened for: below it the
// decoder's set-up costs more than what it would give.
const minInflateGrant = 4 << 10

func newInflateRate(perSecond int, now time.Time) *inflateRate {
	return &inflateRate{rate: float64(perSecond), tokens: float64(perSecond), last: now}
}

// take grants up to want bytes of inflation, or 0 when less than
// minInflateGrant (or less than want, if want is smaller) is left.
func (r *inflateRate) take(want int, now time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d := now.Sub(r.last); d > 0 {
		r.tokens = min(r.rate, r.tokens+d.Seconds()*r.rate)
		r.last = now
	}
	grant := min(want, int(r.tokens))
	if grant < min(want, minInflateGrant) {
		return 0
	}
	r.tokens -= float64(grant)
	return grant
}

// giveBack returns what a grant did not use.
func (r *inflateRate) giveBack(n int) {
	if n <= 0 {
		return
	}
	r.mu.Lock()
	r.tokens = min(r.rate, r.tokens+float64(n))
	r.mu.Unlock()
}
