package tracing

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/trace"

	"github.com/kproxy/kproxy/internal/batchtest"
)

// Batches are built by internal/batchtest; these add trace context.

var (
	encodeRecords = batchtest.EncodeRecords
	makeBatch     = batchtest.MakeBatch
	plainBatch    = batchtest.PlainBatch
	hdrs          = batchtest.Headers
	gzipped       = batchtest.Gzipped
	snappyRaw     = batchtest.SnappyRaw
	xerial        = batchtest.Xerial
	lz4Framed     = batchtest.LZ4Framed
	zstdAll       = batchtest.ZstdAll
	zstdStream    = batchtest.ZstdStream
	concat        = batchtest.Concat
	sampleRecords = batchtest.SampleRecords
)

// Codec numbers as in the batch attributes.
const (
	codecGzip   = batchtest.Gzip
	codecSnappy = batchtest.Snappy
	codecLZ4    = batchtest.LZ4
	codecZstd   = batchtest.Zstd
)

// spanCtx is a producer's span context, distinct per trace byte.
func spanCtx(traceByte, spanByte byte, sampled bool) trace.SpanContext {
	var flags trace.TraceFlags
	if sampled {
		flags = trace.FlagsSampled
	}
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0xa1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, traceByte},
		SpanID:     trace.SpanID{0xb1, 2, 3, 4, 5, 6, 7, spanByte},
		TraceFlags: flags,
		Remote:     true,
	})
}

// traceparent is the W3C header value of sc.
func traceparent(sc trace.SpanContext) string {
	return fmt.Sprintf("00-%s-%s-%s", sc.TraceID(), sc.SpanID(), sc.TraceFlags())
}

// tracedRecord is a record carrying sc in a traceparent header among others.
func tracedRecord(sc trace.SpanContext) kmsg.Record {
	return kmsg.Record{Key: []byte("k"), Value: []byte("v"),
		Headers: hdrs("app", "x", "traceparent", traceparent(sc), "tracestate", "vendor=1")}
}
