package main

import (
	"math"
	"math/bits"
	"time"
)

// histogram records latencies in log-spaced buckets, HDR style: values
// below 128 ns are exact, larger ones keep 7 significant bits (under 0.8%
// error). Recording is an index computation and an increment, so it can sit
// in the request loop without allocating; histograms of several
// connections merge by adding counts.
type histogram struct {
	counts   [histBuckets]uint64
	total    uint64
	min, max int64
}

const (
	subBits     = 7
	subBuckets  = 1 << subBits
	histMaxBits = 40 // 2^40 ns is about 18 minutes; larger values are clamped
	histBuckets = (histMaxBits - subBits + 1) * subBuckets
)

func newHistogram() *histogram { return &histogram{min: math.MaxInt64} }

// bucket is the index of the bucket holding v (ns, at least 0).
func bucket(v int64) int {
	if v < subBuckets {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - subBits - 1
	return (shift+1)*subBuckets + int(uint64(v)>>shift) - subBuckets
}

// bucketRange is the smallest and largest value bucket i holds.
func bucketRange(i int) (lo, hi int64) {
	if i < subBuckets {
		return int64(i), int64(i)
	}
	shift := i/subBuckets - 1
	m := int64(i%subBuckets + subBuckets)
	lo = m << shift
	return lo, lo + 1<<shift - 1
}

// record adds one latency.
func (h *histogram) record(d time.Duration) {
	v := int64(d)
	v = min(max(v, 0), 1<<histMaxBits-1)
	h.counts[bucket(v)]++
	h.total++
	h.min = min(h.min, v)
	h.max = max(h.max, v)
}

// merge adds o's counts to h.
func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.total += o.total
	h.min = min(h.min, o.min)
	h.max = max(h.max, o.max)
}

// quantile is the latency at q (0..1): the middle of the bucket holding the
// ceil(q*n)-th smallest value, kept within the recorded min and max, which
// are exact and are what q=0 and q=1 return.
func (h *histogram) quantile(q float64) time.Duration {
	switch {
	case h.total == 0:
		return 0
	case q <= 0:
		return time.Duration(h.min)
	case q >= 1:
		return time.Duration(h.max)
	}
	rank := uint64(math.Ceil(q * float64(h.total)))
	rank = min(max(rank, 1), h.total)
	var seen uint64
	for i, c := range h.counts {
		if seen += c; seen >= rank {
			lo, hi := bucketRange(i)
			return time.Duration(min(max(lo+(hi-lo)/2, h.min), h.max))
		}
	}
	return time.Duration(h.max)
}
