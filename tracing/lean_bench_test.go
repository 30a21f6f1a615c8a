package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/kproxy/kproxy/framing"
)

// BenchmarkSpan is one traced Produce pair, Start to End, through each
// export path: the SDK (to a no-op exporter, so only building the span
// counts) and the lean exporter (encoding and uploading to a collector
// that reads and discards, so the export work counts too). Allocations
// include the exporter's goroutines.
func BenchmarkSpan(b *testing.B) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}))
	defer sink.Close()
	for _, path := range []string{"sdk", "lean"} {
		b.Run(path, func(b *testing.B) {
			for _, k := range otelVars {
				b.Setenv(k, "")
			}
			c := Defaults()
			c.Enabled, c.Endpoint, c.Protocol, c.MaxQueueSize = true, sink.URL, "http/protobuf", 1<<20
			var tr *Tracer
			var err error
			if path == "sdk" {
				tr, err = NewWithExporter(c, "bench", tracetest.NewNoopExporter(), prometheus.NewRegistry())
			} else {
				tr, err = New(c, "bench", prometheus.NewRegistry())
			}
			if err != nil {
				b.Fatal(err)
			}
			defer tr.Shutdown(context.Background())
			frame := produceFrame(1, kmsg.Record{Value: []byte("a")})
			resp := produceRespFrame(1, 0)
			h, _ := framing.ParseRequestHeader(frame)
			b.ReportAllocs()
			for b.Loop() {
				body := framing.NewBody(h, frame)
				s := tr.Start(testPeer, &body, 7, len(frame), time.Now())
				tr.End(s, framing.KeyProduce, 9, resp)
			}
			// A span shed at a full queue would make a path look cheaper.
			b.ReportMetric(testutil.ToFloat64(tr.m.dropped)/float64(b.N), "dropped/op")
		})
	}
}
