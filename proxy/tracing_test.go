package proxy

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/kproxy/kproxy/tracing"
)

// newTestTracer returns a tracer that keeps spans in memory, and a func
// that flushes them and returns them.
func newTestTracer(t testing.TB, edit func(*tracing.Config)) (*tracing.Tracer, func() tracetest.SpanStubs) {
	t.Helper()
	c := tracing.Defaults()
	if edit != nil {
		edit(&c)
	}
	exp := tracetest.NewInMemoryExporter()
	reg := prometheus.NewRegistry()
	tr, err := tracing.NewWithExporter(c, "test", keepOnShutdown{exp}, reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Shutdown(context.Background()) })
	return tr, func() tracetest.SpanStubs {
		// A span ends just after its response is flushed to the client,
		// so the client may have its answer a moment before.
		waitFor(t, 10*time.Second, "every started span ended", func() bool {
			return counterValue(t, reg, "kproxy_trace_spans_started_total") == counterValue(t, reg, "kproxy_trace_spans_ended_total")
		})
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		return exp.GetSpans()
	}
}

// keepOnShutdown keeps the spans the in-memory exporter would forget when
// the tracer shuts down (which is how the test flushes).
type keepOnShutdown struct{ *tracetest.InMemoryExporter }

func (keepOnShutdown) Shutdown(context.Context) error { return nil }

func attrMap(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := make(map[attribute.Key]attribute.Value, len(s.Attributes))
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

func findSpan(t testing.TB, spans tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	var names []string
	for _, s := range spans {
		if s.Name == name {
			return s
		}
		names = append(names, s.Name)
	}
	t.Fatalf("no span %q among %v", name, names)
	return tracetest.SpanStub{}
}

// wantAttrs fails unless s carries every attribute in want (values compared
// as their string forms) and has every key in present.
func wantAttrs(t testing.TB, s tracetest.SpanStub, want map[string]string, present ...string) {
	t.Helper()
	m := attrMap(s)
	for k, v := range want {
		got, ok := m[attribute.Key(k)]
		if !ok || got.Emit() != v {
			t.Errorf("span %q: %s = %q, want %q", s.Name, k, got.Emit(), v)
		}
	}
	for _, k := range present {
		if _, ok := m[attribute.Key(k)]; !ok {
			t.Errorf("span %q: no attribute %s", s.Name, k)
		}
	}
}

// producerContext is a trace a producing application would have started.
func producerContext(i byte) trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0x50, 0x52, 0x4f, 0x58, 0x59, 1, 2, 3, 4, 5, 6, 7, 8, 9, i},
		SpanID:     trace.SpanID{0xaa, 0xbb, 0xcc, 0xdd, 1, 2, 3, i},
		TraceFlags: trace.FlagsSampled,
	})
}

func traceparent(sc trace.SpanContext) []byte {
	return []byte(fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID()))
}

// Every API of a produce/consume-by-group round trip gets its span, named
// and attributed by the messaging conventions, with links to the traces
// carried in the produced records.
func TestTracingClientAPIs(t *testing.T) {
	tr, flush := newTestTracer(t, nil)
	env := startTracedKfake(t, []kfake.Opt{kfake.SeedTopics(1, "orders")}, tr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.ClientID("tracing-test"),
		kgo.ConsumerGroup("g1"), kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	a, b := producerContext(1), producerContext(2)
	var recs []*kgo.Record
	for i, sc := range []trace.SpanContext{a, b, a} {
		recs = append(recs, &kgo.Record{Topic: "orders", Key: keyOf(i), Value: valueOf(i),
			Headers: []kgo.RecordHeader{{Key: "traceparent", Value: traceparent(sc)}}})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for got := 0; got < 3; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	spans := flush()

	produce := findSpan(t, spans, "Produce orders")
	if produce.SpanKind != trace.SpanKindClient {
		t.Errorf("produce span kind %v, want client", produce.SpanKind)
	}
	wantAttrs(t, produce, map[string]string{
		"messaging.system": "kafka", "messaging.operation.name": "Produce", "messaging.operation.type": "send",
		"messaging.destination.name": "orders", "messaging.destination.partition.id": "0",
		"messaging.batch.message_count": "3", "messaging.client.id": "tracing-test",
		"kproxy.api_key": "0", "kproxy.body_decoded": "true", "server.address": "127.0.0.1",
		"network.peer.address": "127.0.0.1",
	}, "server.port", "network.peer.port", "kproxy.api_version", "kproxy.correlation_id.client",
		"kproxy.correlation_id.upstream", "kproxy.request_bytes", "kproxy.response_bytes")
	if produce.Status.Code == codes.Error {
		t.Errorf("produce span has error status %v", produce.Status)
	}
	linked := map[trace.TraceID]bool{}
	for _, l := range produce.Links {
		linked[l.SpanContext.TraceID()] = true
	}
	if len(produce.Links) != 2 || !linked[a.TraceID()] || !linked[b.TraceID()] {
		t.Errorf("produce links %v, want the two producer traces", produce.Links)
	}

	fetch := findSpan(t, spans, "Fetch orders")
	wantAttrs(t, fetch, map[string]string{"messaging.operation.type": "receive", "messaging.destination.name": "orders"})
	join := findSpan(t, spans, "JoinGroup")
	wantAttrs(t, join, map[string]string{"messaging.consumer.group.name": "g1", "messaging.operation.name": "JoinGroup"})
	commit := findSpan(t, spans, "OffsetCommit orders")
	wantAttrs(t, commit, map[string]string{"messaging.consumer.group.name": "g1", "messaging.operation.type": "settle"})
	md := spans[0]
	for _, s := range spans {
		if strings.HasPrefix(s.Name, "Metadata") {
			md = s
		}
	}
	wantAttrs(t, md, map[string]string{"messaging.operation.name": "Metadata", "kproxy.api_key": "3"})
	if got, want := len(spans), int(totalRequests(t, env)); got != want {
		t.Errorf("%d spans for %d requests relayed", got, want)
	}
}

// totalRequests sums kproxy's request counter over every API.
func totalRequests(t testing.TB, env *testEnv) float64 {
	return counterValue(t, env.reg, "kproxy_requests_total")
}

// counterValue sums a counter over all its label values.
func counterValue(t testing.TB, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// A per-partition error in a response marks the span an error, with the
// Kafka error name as error.type.
func TestTracingPartitionError(t *testing.T) {
	tr, flush := newTestTracer(t, nil)
	env := startTracedKfake(t, nil, tr)
	c := dialRaw(t, env.addr)
	c.Write(encodeRequest(produceRequest(7, -1, "missing"), 9))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := readFrame(c); err != nil {
		t.Fatal(err)
	}
	s := findSpan(t, flush(), "Produce missing")
	if s.Status.Code != codes.Error {
		t.Fatalf("status %v, want error", s.Status)
	}
	wantAttrs(t, s, map[string]string{"error.type": "UNKNOWN_TOPIC_OR_PARTITION"})
}

// An acks=0 produce has no response; its span ends when it is forwarded.
func TestTracingAcksZeroSpanEnds(t *testing.T) {
	tr, flush := newTestTracer(t, nil)
	env := startTracedKfake(t, []kfake.Opt{kfake.SeedTopics(1, "t")}, tr)
	c := dialRaw(t, env.addr)
	c.Write(append(encodeRequest(produceRequest(9, 0, "t"), 1), apiVersionsV0(2)...))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := readFrame(c); err != nil {
		t.Fatal(err)
	}
	s := findSpan(t, flush(), "Produce t")
	if _, ok := attrMap(s)["kproxy.response_bytes"]; ok {
		t.Error("acks=0 span claims a response")
	}
	if s.Status.Code == codes.Error {
		t.Errorf("acks=0 span status %v", s.Status)
	}
}

// A request whose upstream dies before answering has its span ended with
// an error, not left open.
func TestTracingUpstreamDiesMidRequest(t *testing.T) {
	tr, flush := newTestTracer(t, nil)
	var up *fakeUpstream
	up = startFakeUpstream(t, func(net.Conn, []byte) { go up.close() })
	env := startTracedProxy(t, up.addr(), tr)
	c := dialRaw(t, env.addr)
	c.Write(apiVersionsV0(3))
	expectClosed(t, c, 10*time.Second)
	waitFor(t, 10*time.Second, "pair closed", func() bool { return testutil.ToFloat64(env.m.Open) == 0 })
	s := findSpan(t, flush(), "ApiVersions")
	if s.Status.Code != codes.Error {
		t.Fatalf("status %v, want error", s.Status)
	}
	wantAttrs(t, s, map[string]string{"error.type": "kproxy.connection_closed"})
}

// sample_ratio is honoured: about that share of requests get spans.
func TestTracingSampleRatio(t *testing.T) {
	tr, flush := newTestTracer(t, func(c *tracing.Config) { r := 0.25; c.SampleRatio = &r })
	up := startFakeUpstream(t, func(c net.Conn, f []byte) { echoResponse(c, f, []byte{0, 0}) })
	env := startTracedProxy(t, up.addr(), tr)
	c := dialRaw(t, env.addr)
	const n = 2000
	var batch []byte
	for i := 0; i < n; i++ {
		batch = append(batch, apiVersionsV0(int32(i))...)
	}
	c.Write(batch)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for i := 0; i < n; i++ {
		if _, err := readFrame(c); err != nil {
			t.Fatal(err)
		}
	}
	// 2000 draws at p=0.25: mean 500, sd ~19; +-100 is over 5 sd.
	if got := len(flush()); got < 400 || got > 600 {
		t.Fatalf("%d spans for %d requests at ratio 0.25", got, n)
	}
}

// With child_of_single_record, a produce of one traced record becomes a
// child of that record's span, and compressed batches are read when
// decompression is on.
func TestTracingRecordContexts(t *testing.T) {
	codecs := map[string]kgo.CompressionCodec{"gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()}
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			tr, flush := newTestTracer(t, func(c *tracing.Config) {
				c.Links.Decompress, c.Links.ChildOfSingleRecord = true, true
			})
			env := startTracedKfake(t, []kfake.Opt{kfake.SeedTopics(1, "c")}, tr)
			cl, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.ProducerBatchCompression(codec))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			parent := producerContext(7)
			value := []byte(strings.Repeat("compressible ", 50))
			err = cl.ProduceSync(context.Background(), &kgo.Record{Topic: "c", Value: value,
				Headers: []kgo.RecordHeader{{Key: "traceparent", Value: traceparent(parent)}}}).FirstErr()
			if err != nil {
				t.Fatal(err)
			}
			cl.Close()
			s := findSpan(t, flush(), "Produce c")
			if s.Parent.TraceID() != parent.TraceID() || s.Parent.SpanID() != parent.SpanID() {
				t.Fatalf("span parent %v, want the record's %v", s.Parent, parent)
			}
			if _, ok := attrMap(s)["kproxy.links_incomplete"]; ok {
				t.Fatal("records were not all read")
			}
		})
	}
}
