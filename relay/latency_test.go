package relay

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/kproxy/kproxy/framing"
)

// The latency series a session adds in runs gives the same buckets, count
// and sum as a prometheus histogram with the same buckets observing each
// response on its own, including runs broken by another API or another
// duration, values on a bucket's bound and past the last bound.
func TestLatencyRunsMatchAPrometheusHistogram(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	ref := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ref", Buckets: latencyBuckets}, []string{"api"})
	produce, fetch := m.api(framing.KeyProduce), m.api(framing.KeyFetch)
	steps := []struct {
		a *apiMetrics
		d time.Duration
		n int
	}{
		{produce, 50 * time.Microsecond, 64}, {produce, 100 * time.Microsecond, 3}, {fetch, 100 * time.Microsecond, 2},
		{produce, 101 * time.Microsecond, 1}, {produce, 50 * time.Microsecond, 5}, {fetch, 30 * time.Second, 4},
		{produce, 26214400 * time.Microsecond, 7},
	}
	tl := tally{responses: true}
	for i, st := range steps {
		for range st.n {
			tl.observe(st.a, st.d)
			ref.WithLabelValues(st.a.Latency.api).Observe(st.d.Seconds())
		}
		if i == 3 {
			tl.drop() // an undelivered batch still leaves the table: its latency counts
		}
	}
	tl.endLatency()
	for _, api := range []string{"Produce", "Fetch"} {
		var got, want dto.Metric
		if err := m.Latency.WithLabelValues(api).(prometheus.Metric).Write(&got); err != nil {
			t.Fatal(err)
		}
		if err := ref.WithLabelValues(api).(prometheus.Metric).Write(&want); err != nil {
			t.Fatal(err)
		}
		g, w := got.GetHistogram(), want.GetHistogram()
		if g.GetSampleCount() != w.GetSampleCount() || math.Abs(g.GetSampleSum()-w.GetSampleSum()) > 1e-9*w.GetSampleSum() {
			t.Errorf("%s: count %d sum %v, want %d, %v", api, g.GetSampleCount(), g.GetSampleSum(), w.GetSampleCount(), w.GetSampleSum())
		}
		if len(g.GetBucket()) != len(w.GetBucket()) {
			t.Fatalf("%s: %d buckets, want %d", api, len(g.GetBucket()), len(w.GetBucket()))
		}
		for i, b := range w.GetBucket() {
			if gb := g.GetBucket()[i]; gb.GetUpperBound() != b.GetUpperBound() || gb.GetCumulativeCount() != b.GetCumulativeCount() {
				t.Errorf("%s: bucket le=%v holds %d, want le=%v %d", api, gb.GetUpperBound(), gb.GetCumulativeCount(), b.GetUpperBound(), b.GetCumulativeCount())
			}
		}
	}
}

// The sum keeps growing past what an int64 of nanoseconds holds (about 292
// years in all, days of long-poll Fetches on a busy proxy): it never wraps
// negative, which rate() would read as a counter reset.
func TestLatencySumDoesNotWrap(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	l := m.api(framing.KeyFetch).Latency
	const n = 4_000_000
	for range 3 {
		l.add(time.Hour, n) // 3 x 4e6 hours: past math.MaxInt64 nanoseconds
	}
	var out dto.Metric
	if err := l.Write(&out); err != nil {
		t.Fatal(err)
	}
	want := 3 * n * time.Hour.Seconds()
	if got := out.GetHistogram().GetSampleSum(); math.Abs(got-want) > want*1e-9 {
		t.Fatalf("sum = %g s, want %g s", got, want)
	}
	if got := out.GetHistogram().GetSampleCount(); got != 3*n {
		t.Fatalf("count = %d, want %d", got, 3*n)
	}
}
