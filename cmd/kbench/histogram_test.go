package main

import (
	"testing"
	"time"
)

// within checks got is within rel of want.
func within(t *testing.T, what string, got, want time.Duration, rel float64) {
	t.Helper()
	if diff := float64(got - want); diff > rel*float64(want) || -diff > rel*float64(want) {
		t.Errorf("%s = %v, want %v ±%.1f%%", what, got, want, 100*rel)
	}
}

func TestHistogramUniform(t *testing.T) {
	h := newHistogram()
	for i := 1; i <= 100_000; i++ { // 1µs .. 100ms
		h.record(time.Duration(i) * time.Microsecond)
	}
	within(t, "p50", h.quantile(0.50), 50*time.Millisecond, 0.008)
	within(t, "p99", h.quantile(0.99), 99*time.Millisecond, 0.008)
	within(t, "p999", h.quantile(0.999), 99900*time.Microsecond, 0.008)
	if got := h.quantile(1); got != 100*time.Millisecond {
		t.Errorf("p100 = %v, want the max", got)
	}
	if got := h.quantile(0); got != time.Microsecond {
		t.Errorf("p0 = %v, want the min", got)
	}
}

func TestHistogramSmallValuesExact(t *testing.T) {
	h := newHistogram()
	for v := range 100 { // 0..99 ns, each once
		h.record(time.Duration(v))
	}
	if got := h.quantile(0.5); got != 49 {
		t.Errorf("p50 = %v, want 49ns", got)
	}
	if got := h.quantile(0.99); got != 98 {
		t.Errorf("p99 = %v, want 98ns", got)
	}
}

func TestHistogramTail(t *testing.T) {
	// 990 fast requests and 10 slow ones: p99 is still fast, p999 slow.
	h := newHistogram()
	for range 990 {
		h.record(20 * time.Microsecond)
	}
	for range 10 {
		h.record(5 * time.Millisecond)
	}
	within(t, "p50", h.quantile(0.5), 20*time.Microsecond, 0.008)
	within(t, "p99", h.quantile(0.99), 20*time.Microsecond, 0.008)
	within(t, "p999", h.quantile(0.999), 5*time.Millisecond, 0.008)
}

func TestHistogramMergeAndClamp(t *testing.T) {
	a, b := newHistogram(), newHistogram()
	a.record(time.Microsecond)
	b.record(time.Hour) // beyond the range: clamped, not lost
	b.record(-time.Second)
	a.merge(b)
	if a.total != 3 || a.min != 0 || a.max != 1<<histMaxBits-1 {
		t.Errorf("merged total %d min %d max %d", a.total, a.min, a.max)
	}
	if newHistogram().quantile(0.5) != 0 {
		t.Error("empty histogram has a non-zero quantile")
	}
}

func TestHistogramBucketsContiguous(t *testing.T) {
	prevHi := int64(-1)
	for i := range histBuckets {
		lo, hi := bucketRange(i)
		if lo != prevHi+1 || hi < lo || bucket(lo) != i || bucket(hi) != i {
			t.Fatalf("bucket %d = [%d, %d] after %d", i, lo, hi, prevHi)
		}
		prevHi = hi
	}
	if prevHi != 1<<histMaxBits-1 {
		t.Fatalf("last bucket ends at %d", prevHi)
	}
}

func TestHistogramRecordDoesNotAllocate(t *testing.T) {
	h := newHistogram()
	if n := testing.AllocsPerRun(1000, func() { h.record(123 * time.Microsecond) }); n != 0 {
		t.Errorf("record allocates %v times", n)
	}
}
