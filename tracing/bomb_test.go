package tracing

import (
	"bytes"
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/kproxy/kproxy/records"
)

// bombBatch is a zstd batch of one record whose 16 MiB value (zeros)
// compresses to a few hundred bytes; the record's traceparent comes after
// the value, as headers do. Built once: encoding 16 MiB is the slow part.
var bombBatch = sync.OnceValue(func() []byte {
	rec := tracedRecord(spanCtx(0xbb, 1, true))
	rec.Value = make([]byte, 16<<20)
	raw := encodeRecords(rec)
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
	if err != nil {
		panic(err)
	}
	w.Write(raw)
	w.Close()
	return makeBatch(codecZstd, 1, buf.Bytes())
})

// bombProduce is a Produce whose first partition holds a small zstd batch
// with a traced record, then n partitions each holding bombBatch: under
// 64 KiB on the wire for n up to ~100, ~16 MiB each inflated.
func bombProduce(t *testing.T, n int) []byte {
	first := makeBatch(codecZstd, 1, zstdStream(t, encodeRecords(tracedRecord(spanCtx(0xaa, 1, true)))))
	parts := [][]byte{first}
	for range n {
		parts = append(parts, bombBatch())
	}
	frame := requestFrame(produceReq(9, produceTopic("orders", [16]byte{}, parts...)), 5)
	if len(frame) > 64<<10 {
		t.Fatalf("bomb frame is %d bytes; the test wants a small one", len(frame))
	}
	return frame
}

// tracerWithRegistry is newTestTracer with the registry its counters are in.
func tracerWithRegistry(t *testing.T, edit func(*Config)) (*Tracer, *prometheus.Registry, func() tracetest.SpanStubs) {
	t.Helper()
	clearOTEL(t)
	c := Defaults()
	edit(&c)
	exp := tracetest.NewInMemoryExporter()
	reg := prometheus.NewRegistry()
	tr, err := NewWithExporter(c, "test", keep{exp}, reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Shutdown(context.Background()) })
	return tr, reg, func() tracetest.SpanStubs {
		tr.Shutdown(context.Background())
		return exp.GetSpans()
	}
}

// counter is a counter's value, labels ignored (summed), and whether the
// registry has it.
func counter(t *testing.T, reg *prometheus.Registry, name string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			var v float64
			for _, m := range mf.GetMetric() {
				v += counterOf(m)
			}
			return v, true
		}
	}
	return 0, false
}

func counterOf(m *dto.Metric) float64 { return m.GetCounter().GetValue() }

// allocated runs f and returns the bytes the process allocated meanwhile.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// With tracing.links.decompress on, a 64 KiB Produce of zstd batches that
// each inflate to 16 MiB costs at most the default budget of inflation
// (1 MiB, counted as the decoders hand it out) and about that much memory;
// the links read before the budget are kept and the span says the rest
// were not read. Before, every batch was inflated whole: 32 x 16 MiB.
func TestDecompressionBombStaysInBudget(t *testing.T) {
	tr, reg, flush := tracerWithRegistry(t, func(c *Config) { c.Links.Decompress = true })
	frame := bombProduce(t, 32)
	var s *Span
	alloc := allocated(func() { s = tr.Start(testPeer, bodyOf(t, frame), 7, len(frame), time.Now()) })
	if s == nil {
		t.Fatal("not traced")
	}
	tr.End(s, 0, 9, produceRespFrame(5, 0))
	span := onlySpan(t, flush())
	wantAttr(t, span, "kproxy.links_incomplete", "true")
	wantAttr(t, span, "kproxy.links_truncated", "true")
	if len(span.Links) != 1 || span.Links[0].SpanContext.TraceID() != spanCtx(0xaa, 1, true).TraceID() {
		t.Errorf("links %v, want the first batch's trace only", span.Links)
	}
	inflated, ok := counter(t, reg, "kproxy_trace_links_inflated_bytes_total")
	if !ok || inflated > 1<<20 || inflated < 1<<19 {
		t.Errorf("inflated %v bytes (counter present: %v), want up to the 1 MiB budget", inflated, ok)
	}
	if cut, _ := counter(t, reg, "kproxy_trace_links_truncated_total"); cut != 1 {
		t.Errorf("truncated counter %v, want 1", cut)
	}
	// The budget, a zstd window and the output buffer's growth, with room
	// to spare; inflating every batch allocates 512 MiB.
	if alloc > 32<<20 {
		t.Errorf("Start allocated %d MiB for a 64 KiB request", alloc>>20)
	}
	t.Logf("inflated %v bytes, allocated %.1f MiB", inflated, float64(alloc)/(1<<20))
}

// With child_of_single_record and no sampling, a produce of many records
// cannot follow a parent, so none of its records are read; one of a single
// record is read within the budget.
func TestUnsampledBombInflatesNothing(t *testing.T) {
	tr, reg, _ := tracerWithRegistry(t, func(c *Config) {
		c.Links.Decompress, c.Links.ChildOfSingleRecord = true, true
		r := 0.0
		c.SampleRatio = &r
	})
	frame := bombProduce(t, 32)
	alloc := allocated(func() {
		if tr.Start(testPeer, bodyOf(t, frame), 7, len(frame), time.Now()) != nil {
			t.Error("unsampled produce traced")
		}
	})
	if inflated, ok := counter(t, reg, "kproxy_trace_links_inflated_bytes_total"); !ok || inflated != 0 {
		t.Errorf("inflated %v bytes (counter present: %v) for a request that stays unsampled", inflated, ok)
	}
	if alloc > 8<<20 {
		t.Errorf("Start allocated %d MiB", alloc>>20)
	}

	one := requestFrame(produceReq(9, produceTopic("orders", [16]byte{}, bombBatch())), 6)
	tr.Start(testPeer, bodyOf(t, one), 8, len(one), time.Now())
	if inflated, _ := counter(t, reg, "kproxy_trace_links_inflated_bytes_total"); inflated > 1<<20 {
		t.Errorf("inflated %v bytes, over the budget", inflated)
	}
}

// recordContexts stops inflating at the budget, counted as the decoders
// hand bytes out: at most max_decompressed_bytes whatever the batches
// hold. Uncompressed batches after the cut are still read.
func TestRecordContextsBudget(t *testing.T) {
	a, c := spanCtx(0xaa, 1, true), spanCtx(0xcc, 1, true)
	small := makeBatch(codecZstd, 1, zstdStream(t, encodeRecords(tracedRecord(a))))
	batches := [][]byte{small}
	for range 20 {
		batches = append(batches, bombBatch())
	}
	batches = append(batches, plainBatch(tracedRecord(c)))
	const budget = 300 << 10
	b := &inflateBudget{bytes: budget, batches: 64}
	found, complete := recordContexts(batches, 16, b)
	if complete || b.cut != cutBytes {
		t.Errorf("complete %v, cut %q, want incomplete by %s", complete, b.cut, cutBytes)
	}
	if b.inflated > budget {
		t.Errorf("inflated %d bytes, budget %d", b.inflated, budget)
	}
	if b.batches != 64-2 {
		t.Errorf("%d compressed batches opened, want 2 (the last to the budget)", 64-b.batches)
	}
	wantContexts(t, found, a, c)
}

// max_decompressed_batches bounds the compressed batches opened, even
// when each inflates to almost nothing.
func TestRecordContextsBatchCap(t *testing.T) {
	tiny := makeBatch(codecZstd, 1, zstdStream(t, encodeRecords(kmsg.Record{Value: []byte("x")})))
	var batches [][]byte
	for range 200 {
		batches = append(batches, tiny)
	}
	b := &inflateBudget{bytes: 1 << 20, batches: 10}
	_, complete := recordContexts(batches, 16, b)
	if complete || b.cut != cutBatches || b.batches != 0 {
		t.Errorf("complete %v, cut %q, %d batches left; want cut by %s after 10", complete, b.cut, b.batches, cutBatches)
	}
	if b.inflated > 10*64 {
		t.Errorf("inflated %d bytes from 10 tiny batches", b.inflated)
	}
}

// When every inflation slot is taken, a batch is skipped at once (links
// incomplete, counted as decoders_busy), never waited for.
func TestInflationSlotsNeverWait(t *testing.T) {
	taken := 0
	for records.TakeSlot() {
		taken++
	}
	defer func() {
		for range taken {
			records.GiveSlot()
		}
	}()
	a := spanCtx(0xaa, 1, true)
	batch := makeBatch(codecZstd, 1, zstdStream(t, encodeRecords(tracedRecord(a))))
	b := &inflateBudget{bytes: 1 << 20, batches: 64}
	found, complete := recordContexts([][]byte{batch, plainBatch(tracedRecord(a))}, 16, b)
	if complete || b.cut != cutBusy || b.inflated != 0 {
		t.Errorf("complete %v, cut %q, inflated %d; want skipped as %s", complete, b.cut, b.inflated, cutBusy)
	}
	wantContexts(t, found, a) // from the uncompressed batch
}
