package tracing

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/trace"
)

// mixedRecords carry two traces, a repeat of the first, an invalid
// traceparent and an untraced record.
func mixedRecords() (recs []kmsg.Record, a, b trace.SpanContext) {
	a, b = spanCtx(1, 1, true), spanCtx(2, 2, false)
	recs = []kmsg.Record{
		tracedRecord(a),
		{Value: []byte("untraced")},
		{Headers: hdrs("traceparent", "00-00000000000000000000000000000000-0000000000000000-01")},
		{Headers: hdrs("traceparent", "not a traceparent")},
		tracedRecord(a),
		tracedRecord(b),
	}
	return recs, a, b
}

// ample is a budget no ordinary test batch reaches.
func ample() *inflateBudget { return &inflateBudget{bytes: 1 << 30, batches: 1 << 20} }

func wantContexts(t *testing.T, got []trace.SpanContext, want ...trace.SpanContext) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d contexts %v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if !got[i].Equal(want[i]) {
			t.Errorf("context %d: %v, want %v", i, got[i], want[i])
		}
	}
}

// Distinct valid contexts are returned once each, in record order, across
// batches and partitions.
func TestRecordContexts(t *testing.T) {
	recs, a, b := mixedRecords()
	found, complete := recordContexts([][]byte{plainBatch(recs...)}, 16, nil)
	if !complete {
		t.Error("uncompressed batch reported incomplete")
	}
	wantContexts(t, found, a, b)
	if found[1].IsSampled() {
		t.Error("flags 00 read as sampled")
	}

	// Split over two batches of one partition and a second partition.
	c := spanCtx(3, 3, true)
	parts := [][]byte{concat(plainBatch(recs[:3]...), plainBatch(recs[3:]...)), plainBatch(tracedRecord(c), tracedRecord(a))}
	found, complete = recordContexts(parts, 16, nil)
	if !complete {
		t.Error("incomplete")
	}
	wantContexts(t, found, a, b, c)
}

// max bounds how many contexts are collected.
func TestRecordContextsMax(t *testing.T) {
	recs, a, _ := mixedRecords()
	found, _ := recordContexts([][]byte{plainBatch(recs...), plainBatch(tracedRecord(spanCtx(9, 9, true)))}, 1, nil)
	wantContexts(t, found, a)
}

// A compressed batch is skipped, and says so, unless inflating is allowed.
func TestRecordContextsCompressed(t *testing.T) {
	recs, a, b := mixedRecords()
	raw := encodeRecords(recs...)
	for name, data := range map[string][]byte{
		"gzip":   makeBatch(codecGzip, len(recs), gzipped(t, raw)),
		"snappy": makeBatch(codecSnappy, len(recs), xerial(raw, 100)),
		"lz4":    makeBatch(codecLZ4, len(recs), lz4Framed(t, raw)),
		"zstd":   makeBatch(codecZstd, len(recs), zstdStream(t, raw)),
	} {
		found, complete := recordContexts([][]byte{data}, 16, nil)
		if complete || len(found) != 0 {
			t.Errorf("%s, inflate off: complete=%v, %d contexts", name, complete, len(found))
		}
		found, complete = recordContexts([][]byte{data}, 16, ample())
		if !complete {
			t.Errorf("%s, inflate on: incomplete", name)
		}
		wantContexts(t, found, a, b)
	}
}

// Damaged batches make the answer incomplete but keep what was read.
func TestRecordContextsDamaged(t *testing.T) {
	recs, a, _ := mixedRecords()
	raw := encodeRecords(recs...)
	corrupt := makeBatch(codecGzip, len(recs), []byte("definitely not gzip"))
	cut := makeBatch(0, len(recs), raw[:len(raw)-3])
	for name, batches := range map[string][][]byte{
		"corrupt gzip":     {plainBatch(tracedRecord(a)), corrupt},
		"truncated record": {cut},
	} {
		found, complete := recordContexts(batches, 16, ample())
		if complete {
			t.Errorf("%s: complete", name)
		}
		if len(found) == 0 || !found[0].Equal(a) {
			t.Errorf("%s: contexts %v, want %v first", name, found, a)
		}
	}
}
