package tracing

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/internal/batchtest"
)

// BenchmarkInject is the cost of adding a traceparent to a sampled
// Produce's records (Tracer.Inject alone: decode, add the header, encode
// in the same codec, rebuild the frame) for batches of 1, 16 and 256
// records of 100-byte values, uncompressed, lz4 and zstd. ns/record is
// the cost per record; ns/op the cost per request.
func BenchmarkInject(b *testing.B) {
	for _, codec := range []string{"none", "lz4", "zstd"} {
		for _, n := range []int{1, 16, 256} {
			b.Run(fmt.Sprintf("%s/%d", codec, n), func(b *testing.B) {
				for _, k := range otelVars {
					b.Setenv(k, "")
				}
				c := Defaults()
				injectOn(&c)
				c.Links.MaxDecompressedBytesPerSecond = 0 // the process-wide rate would turn most iterations into skips
				tr, err := NewWithExporter(c, "bench", tracetest.NewNoopExporter(), prometheus.NewRegistry())
				if err != nil {
					b.Fatal(err)
				}
				defer tr.Shutdown(context.Background())
				recs := make([]kmsg.Record, n)
				for i := range recs {
					recs[i] = kmsg.Record{Key: fmt.Appendf(nil, "key-%d", i), Value: make([]byte, 100)}
				}
				raw := batchtest.EncodeRecords(recs...)
				var batch []byte
				switch codec {
				case "none":
					batch = batchtest.MakeBatch(0, n, raw)
				case "lz4":
					batch = batchtest.MakeBatch(batchtest.LZ4, n, batchtest.LZ4Framed(b, raw))
				case "zstd":
					batch = batchtest.MakeBatch(batchtest.Zstd, n, batchtest.ZstdStream(b, raw))
				}
				frame := requestFrame(produceReq(9, produceTopic("orders", [16]byte{}, batch)), 5)
				body := bodyOf(b, frame)
				s := tr.Start(testPeer, body, 9, len(frame), time.Now())
				if s == nil {
					b.Fatal("no span")
				}
				defer tr.End(s, framing.KeyProduce, 9, nil)
				h := body.Header()
				if out := tr.Inject(s, frame, h); len(out) == len(frame) {
					b.Fatal("nothing injected")
				}
				b.ReportAllocs()
				b.SetBytes(int64(len(frame)))
				for b.Loop() {
					tr.Inject(s, frame, h)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/record")
				if testutil.CollectAndCount(tr.m.skipped) > 0 {
					b.Fatalf("some of %d requests were left as they came (kproxy_records_skipped_total): the figures are not injection's", b.N)
				}
			})
		}
	}
}
