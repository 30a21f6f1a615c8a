package telemetry

import (
	"testing"

	"github.com/kproxy/kproxy/framing"
)

// The cost of lag on a Fetch: one request and its response walked and
// measured, for a consumer of 1 and of 100 partitions.
func benchLag(b *testing.B, parts int) {
	l, _ := newTestLag(10_000)
	s := l.NewSession(framing.NewTopicIDs())
	offsets := map[int32]int64{}
	var resp []part
	for p := range int32(parts) {
		offsets[p] = 10
		resp = append(resp, part{topic: "orders", partition: p, hw: 100, lso: 100, ts: 1})
	}
	req := fetchReq(12, 0, 0, map[string]map[int32]int64{"orders": offsets}, nil)
	h, _ := framing.ParseRequestHeader(req)
	frame := fetchResp(12, resp...)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		s.Request(req, h, "app")
		s.Response(frame, 12, l.now())
	}
}

func BenchmarkLagFetch1(b *testing.B)   { benchLag(b, 1) }
func BenchmarkLagFetch100(b *testing.B) { benchLag(b, 100) }
