package tracing

import (
	"context"
	"encoding/binary"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// recordContexts returns up to max distinct span contexts found in the
// traceparent headers of the produced batches, and whether every traced
// record was read (false when a compressed batch was skipped or a record
// was malformed).
func recordContexts(batches [][]byte, max int, inflate bool) (found []trace.SpanContext, complete bool) {
	complete = true
	prop := propagation.TraceContext{}
	for _, records := range batches {
		eachBatch(records, func(batch []byte) bool {
			codec := compression(batch)
			if codec != 0 && !inflate {
				complete = false
				return true
			}
			body, err := decompress(codec, batch[batchHeaderSize:])
			if err != nil {
				complete = false
				return true
			}
			count := int(int32(binary.BigEndian.Uint32(batch[batchCountOff:])))
			err = eachHeader(body, count, "traceparent", func(_ int, v []byte) bool {
				ctx := prop.Extract(context.Background(), propagation.MapCarrier{"traceparent": string(v)})
				if sc := trace.SpanContextFromContext(ctx); sc.IsValid() && !hasTrace(found, sc) {
					found = append(found, sc)
				}
				return len(found) < max
			})
			if err != nil {
				complete = false
			}
			return len(found) < max
		})
		if len(found) >= max {
			break
		}
	}
	return found, complete
}

func hasTrace(s []trace.SpanContext, sc trace.SpanContext) bool {
	for _, x := range s {
		if x.Equal(sc) {
			return true
		}
	}
	return false
}
