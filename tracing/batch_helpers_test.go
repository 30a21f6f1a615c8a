package tracing

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/trace"
)

// Helpers that build magic-2 record batches the way a producer writes
// them, so the readers are checked against the wire format.

// encodeRecords writes records as a batch's records section, filling in
// the offset deltas and the varint lengths kmsg leaves to the caller.
func encodeRecords(recs ...kmsg.Record) []byte {
	var out []byte
	for i := range recs {
		r := recs[i]
		r.OffsetDelta = int32(i)
		r.Length = 0
		body := r.AppendTo(nil)[1:] // drop the one-byte placeholder length
		out = binary.AppendVarint(out, int64(len(body)))
		out = append(out, body...)
	}
	return out
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// makeBatch wraps a records section, already compressed for codec, in a
// batch header that claims count records.
func makeBatch(codec int16, count int, records []byte) []byte {
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: codec, LastOffsetDelta: int32(count - 1),
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(count), Records: records,
		Length: int32(batchHeaderSize - 12 + len(records)),
	}
	raw := b.AppendTo(nil)
	b.CRC = int32(crc32.Checksum(raw[21:], castagnoli))
	return b.AppendTo(nil)
}

// plainBatch is an uncompressed batch of recs.
func plainBatch(recs ...kmsg.Record) []byte { return makeBatch(0, len(recs), encodeRecords(recs...)) }

// hdrs builds record headers from key/value pairs.
func hdrs(kv ...string) []kmsg.Header {
	var h []kmsg.Header
	for i := 0; i+1 < len(kv); i += 2 {
		h = append(h, kmsg.Header{Key: kv[i], Value: []byte(kv[i+1])})
	}
	return h
}

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
