package tracing

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// The bucket grants what it holds, refuses grants too small to be worth a
// decoder, refills at its rate up to one second's worth, and takes back
// what a grant did not use.
func TestInflateRateGrants(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := newInflateRate(1<<20, t0)
	if got := r.take(600<<10, t0); got != 600<<10 {
		t.Fatalf("first grant %d, want all 600 KiB", got)
	}
	if got := r.take(600<<10, t0); got != 424<<10 {
		t.Fatalf("second grant %d, want the 424 KiB left", got)
	}
	if got := r.take(600<<10, t0); got != 0 {
		t.Fatalf("grant from an empty bucket: %d", got)
	}
	r.giveBack(2 << 10) // less than a decoder's worth
	if got := r.take(600<<10, t0); got != 0 {
		t.Fatalf("granted %d, under the %d-byte minimum", got, minInflateGrant)
	}
	if got := r.take(1<<10, t0); got != 1<<10 {
		t.Fatalf("a small request for what is there got %d", got)
	}
	if got := r.take(4<<20, t0.Add(time.Minute)); got != 1<<20 {
		t.Fatalf("after a minute idle: %d, want one second's worth", got)
	}
	if got := r.take(4<<20, t0.Add(time.Minute+time.Second/4)); got != 256<<10 {
		t.Fatalf("a quarter second later: %d, want a quarter of the rate", got)
	}
}

// A stream of bombs, each within the per-request budget, is bounded
// together by max_decompressed_bytes_per_second: past it batches are not
// opened, the spans say so and the counter names the limit. Without the
// bound, ten bombs inflate ten budgets' worth.
func TestBombStreamStaysInTheRate(t *testing.T) {
	tr, reg, flush := tracerWithRegistry(t, func(c *Config) {
		c.Links.Decompress = true
		c.Links.MaxDecompressedBytesPerSecond = 2 << 20 // two requests' budget
	})
	frame := bombProduce(t, 8)
	for i := range 10 {
		s := tr.Start(testPeer, bodyOf(t, frame), int32(i), len(frame), time.Now())
		tr.End(s, 0, 9, produceRespFrame(5, 0))
	}
	spans := flush()
	if len(spans) != 10 {
		t.Fatalf("%d spans, want 10", len(spans))
	}
	for _, s := range spans {
		wantAttr(t, s, "kproxy.links_truncated", "true")
	}
	inflated, _ := counter(t, reg, "kproxy_trace_links_inflated_bytes_total")
	// Ten requests at a 1 MiB budget each: the rate (2 MiB, plus what it
	// refilled while they ran) lets about two through.
	if inflated > 4<<20 {
		t.Errorf("ten bombs inflated %.1f MiB, want about the 2 MiB a second allows", inflated/(1<<20))
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var byRate float64
	for _, mf := range mfs {
		if mf.GetName() == "kproxy_trace_links_truncated_total" {
			for _, m := range mf.GetMetric() {
				if label(m, "limit") == string(cutRate) {
					byRate += counterOf(m)
				}
			}
		}
	}
	if byRate < 5 {
		t.Errorf("%v requests cut by the rate, want most of the ten", byRate)
	}
	t.Logf("inflated %.1f MiB for ten bombs; %v cut by the rate", inflated/(1<<20), byRate)
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
