package relay

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/kproxy/kproxy/framing"
)

// latencyBuckets are kproxy_request_duration_seconds' upper bounds:
// 100 µs × 4^i.
var latencyBuckets = prometheus.ExponentialBuckets(0.0001, 4, 10)

// latencyBounds are latencyBuckets as durations, compared without floats.
var latencyBounds = func() (b [10]time.Duration) {
	for i, s := range latencyBuckets {
		b[i] = time.Duration(s * float64(time.Second))
	}
	return b
}()

// LatencyVec is kproxy_request_duration_seconds by API: the same series a
// prometheus.HistogramVec with latencyBuckets gives, but a session adds a
// run of equal durations (the responses of one batch to the requests of
// one batch share both clock reads) with one atomic add per bucket, where
// a prometheus histogram takes three atomic operations per observation on
// cache lines every connection writes.
type LatencyVec struct {
	desc *prometheus.Desc
	m    *Metrics
}

// WithLabelValues returns the series of one API, by name.
func (v *LatencyVec) WithLabelValues(api string) prometheus.Observer {
	for k := range framing.MaxKey + 1 {
		if framing.Name(int16(k)) == api {
			return v.m.api(int16(k)).Latency
		}
	}
	return v.m.api(-1).Latency
}

// Describe implements prometheus.Collector.
func (v *LatencyVec) Describe(ch chan<- *prometheus.Desc) { ch <- v.desc }

// Collect implements prometheus.Collector.
func (v *LatencyVec) Collect(ch chan<- prometheus.Metric) {
	for i := range v.m.perAPI {
		if a := v.m.perAPI[i].Load(); a != nil {
			ch <- a.Latency
		}
	}
}

// latency is one API's series.
type latency struct {
	desc    *prometheus.Desc
	api     string
	buckets [len(latencyBounds) + 1]atomic.Uint64 // the last is +Inf
	// sumBits is the sum in seconds, a float64's bits: an int64 of
	// nanoseconds would wrap within days on long-polling traffic.
	sumBits atomic.Uint64
}

// add records n requests that each took d.
func (l *latency) add(d time.Duration, n uint64) {
	i := 0
	for i < len(latencyBounds) && d > latencyBounds[i] {
		i++
	}
	l.buckets[i].Add(n)
	add := d.Seconds() * float64(n)
	for {
		old := l.sumBits.Load()
		if l.sumBits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+add)) {
			return
		}
	}
}

// Observe implements prometheus.Observer, in seconds.
func (l *latency) Observe(s float64) { l.add(time.Duration(s*float64(time.Second)), 1) }

// Desc implements prometheus.Metric.
func (l *latency) Desc() *prometheus.Desc { return l.desc }

// Write implements prometheus.Metric. The count is the buckets' total, so
// the two always agree; the sum may trail them by a batch being added.
func (l *latency) Write(out *dto.Metric) error {
	cum := make(map[float64]uint64, len(latencyBounds))
	var n uint64
	for i, ub := range latencyBuckets {
		n += l.buckets[i].Load()
		cum[ub] = n
	}
	n += l.buckets[len(latencyBounds)].Load()
	h, err := prometheus.NewConstHistogram(l.desc, n, math.Float64frombits(l.sumBits.Load()), cum, l.api)
	if err != nil {
		return err
	}
	return h.Write(out)
}
