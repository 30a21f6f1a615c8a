package policy

import (
	"fmt"
	"testing"
	"time"
)

// Float tokens become whole nanoseconds: allow a microsecond of rounding.
const tol = time.Microsecond

// A fresh bucket holds one second of burst, and the first token past it
// costs 1/rate of waiting.
func TestBucketBurstThenDebt(t *testing.T) {
	b := newBucket(100, t0)
	if d := b.take(100, t0); d != 0 {
		t.Fatalf("taking the whole burst: delay %v, want 0", d)
	}
	if d := b.take(1, t0); !near(d, 10*time.Millisecond, tol) {
		t.Fatalf("one token past the burst: delay %v, want 10ms", d)
	}
	if d := b.take(49, t0); !near(d, 500*time.Millisecond, tol) {
		t.Fatalf("50 tokens of debt at 100/s: delay %v, want 500ms", d)
	}
}

// Debt drains at the rate, and idle time never saves more than the burst.
func TestBucketDebtDrains(t *testing.T) {
	b := newBucket(100, t0)
	b.take(150, t0) // 50 tokens in debt: 500ms
	steps := []struct {
		after time.Duration
		want  time.Duration
	}{
		{250 * time.Millisecond, 250 * time.Millisecond},
		{400 * time.Millisecond, 100 * time.Millisecond},
		{500 * time.Millisecond, 0},
		{time.Hour, 0},
	}
	for _, s := range steps {
		if d := b.take(0, t0.Add(s.after)); !near(d, s.want, tol) {
			t.Fatalf("at +%v: delay %v, want %v", s.after, d, s.want)
		}
	}
	// An hour idle refills to the burst only: 101 tokens are 1 too many.
	if d := b.take(101, t0.Add(time.Hour)); !near(d, 10*time.Millisecond, tol) {
		t.Fatalf("after a long idle: delay %v, want 10ms (burst capped at one second)", d)
	}
}

// A clock that goes backwards neither refills nor empties the bucket.
func TestBucketClockBackwards(t *testing.T) {
	b := newBucket(10, t0)
	b.take(10, t0)
	if d := b.take(1, t0.Add(-time.Second)); !near(d, 100*time.Millisecond, tol) {
		t.Fatalf("earlier now: delay %v, want 100ms", d)
	}
}

// peek reports the wait that take would cause and leaves the tokens alone,
// so a refused request costs its client nothing.
func TestBucketPeekNeverConsumes(t *testing.T) {
	b := newBucket(100, t0)
	for i := 0; i < 3; i++ {
		if d := b.peek(100, t0); d != 0 {
			t.Fatalf("peek within the burst: %v, want 0", d)
		}
		// Larger than the whole burst: it may go from a full bucket,
		// or it could never go at all.
		if d := b.peek(150, t0); d != 0 {
			t.Fatalf("peek over the burst from a full bucket: %v, want 0", d)
		}
	}
	if d := b.take(100, t0); d != 0 {
		t.Fatalf("take after peeks: delay %v, want 0 (peek consumed tokens)", d)
	}
	// In debt, peek and take agree on the wait.
	b.take(20, t0)
	p := b.peek(30, t0)
	if d := b.take(30, t0); !near(p, d, tol) || !near(d, 500*time.Millisecond, tol) {
		t.Fatalf("in debt: peek %v, take %v, want both 500ms", p, d)
	}
}

// A request larger than the whole burst is charged, never refused: the
// client waits for the debt instead.
func TestBucketLargerThanBurst(t *testing.T) {
	b := newBucket(100, t0)
	if d := b.take(1000, t0); !near(d, 9*time.Second, tol) {
		t.Fatalf("10x the burst: delay %v, want 9s", d)
	}
	if d := b.take(0, t0.Add(9*time.Second)); d != 0 {
		t.Fatalf("after the delay: %v, want 0", d)
	}
}

// The delay is Kafka's quota delay (KIP-219): a client that sends at rate
// O for a window W against a target T waits X = (O - T) / T * W. The bytes
// are sent in small chunks across the window, as a client would.
func TestBucketMatchesKafkaQuotaFormula(t *testing.T) {
	cases := []struct {
		target, observed float64 // bytes per second
		window           time.Duration
	}{
		{1000, 3000, 10 * time.Second},
		{1 << 20, 1.5 * (1 << 20), 30 * time.Second},
		{500, 500, 5 * time.Second},
		{100, 1100, time.Second},
		{10_000, 12_000, 2 * time.Second},
	}
	for _, c := range cases {
		for _, drained := range []bool{true, false} {
			t.Run(fmt.Sprintf("T=%g/O=%g/W=%v/drained=%v", c.target, c.observed, c.window, drained), func(t *testing.T) {
				b := newBucket(c.target, t0)
				if drained {
					b.take(c.target, t0) // start from an empty bucket
				}
				const chunks = 1000
				step := c.window / chunks
				per := c.observed * c.window.Seconds() / chunks
				var d time.Duration
				for i := 1; i <= chunks; i++ {
					d = b.take(per, t0.Add(time.Duration(i)*step))
				}
				want := (c.observed - c.target) / c.target * c.window.Seconds()
				if !drained {
					// The saved second of burst is spent first; the first
					// step's refill is lost, the bucket being full.
					want -= 1 - step.Seconds()
				}
				wantD := time.Duration(max(want, 0) * float64(time.Second))
				if !near(d, wantD, time.Millisecond) {
					t.Fatalf("delay %v, want X = (O-T)/T*W = %v", d, wantD)
				}
			})
		}
	}
}
