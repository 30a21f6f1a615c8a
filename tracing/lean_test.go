package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/kproxy/kproxy/framing"
)

// otlpReceiver is an in-process OTLP/HTTP collector keeping every
// export, decoded.
type otlpReceiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []*coltrace.ExportTraceServiceRequest
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		var m coltrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &m)
		}
		if err != nil {
			t.Errorf("export does not decode: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.got = append(r.got, &m)
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// resourceSpans are every export's ResourceSpans, spans in the order sent.
func (r *otlpReceiver) resourceSpans() []*tracepb.ResourceSpans {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*tracepb.ResourceSpans
	for _, m := range r.got {
		out = append(out, m.ResourceSpans...)
	}
	return out
}

// traffic drives the same pairs through tr: every kind of span kproxy
// makes (each attribute, links, a parent from a record, policy events,
// error statuses from a response and from a failure), with fixed start
// times.
func traffic(t *testing.T, tr *Tracer) {
	t.Helper()
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	peer := NewPeer("10.1.2.3:50000", "broker-0:9092", learnt(t, map[string][16]byte{"ids": topicID(7)}))
	peer.SetPrincipal("spiffe://example.org/app")
	peer.SetUpstreamPrincipal("kproxy-user")
	n := int32(0)
	pair := func(frame []byte, resp func(corr int32) []byte, fail string, edit func(*Span)) {
		t.Helper()
		n++
		s := tr.Start(peer, bodyOf(t, frame), 1000+n, len(frame), base.Add(time.Duration(n)*time.Millisecond))
		if s == nil {
			t.Fatalf("pair %d not traced", n)
		}
		if edit != nil {
			edit(s)
		}
		h, _ := framing.ParseRequestHeader(frame)
		switch {
		case fail != "":
			tr.Fail(s, fail)
		case resp == nil:
			tr.End(s, h.APIKey, h.APIVersion, nil)
		default:
			tr.End(s, h.APIKey, h.APIVersion, resp(1000+n))
		}
	}
	ok := func(corr int32) []byte { return produceRespFrame(corr, 0) }
	pair(produceFrame(1, kmsg.Record{Value: []byte("a")}, kmsg.Record{Value: []byte("b")}), ok, "", nil)
	pair(produceFrame(2, kmsg.Record{Value: []byte("a")}), func(c int32) []byte { return produceRespFrame(c, 3) }, "", nil)
	pair(produceFrame(3, tracedRecord(spanCtx(1, 1, true)), tracedRecord(spanCtx(2, 2, true))), ok, "", nil)
	pair(produceFrame(4, tracedRecord(spanCtx(3, 3, true))), ok, "", nil) // child of the record
	pair(produceFrame(5), nil, "", func(s *Span) {
		s.Policy("big", "throttle", "over 1 MB/s")
		s.Policy("deny", "reject", "topic orders")
	})
	pair(produceFrame(6), nil, "kproxy.connection_closed", nil)
	pair(requestFrame(fetchReq(12, "orders", [16]byte{}, 0, 1), 7), nil, "", nil)
	pair(requestFrame(fetchReq(13, "", topicID(7), 2), 8), nil, "", nil)
	pair(requestFrame(offsetCommitReq(8, "g1", map[string][]int32{"orders": {0}, "other": {1}}), 9), nil, "", nil)
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 12
	pair(requestFrame(meta, 10), nil, "", nil)
	noID := kmsg.NewRequestFormatter(kmsg.FormatterClientID("")).AppendRequest(nil, meta, 11)
	pair(noID, nil, "", nil)
}

// normalized sorts the spans of the exports by their start, and replaces
// what is random or read from the clock: the ids of spans without a
// parent (a child's trace id must be its parent's), and end times (which
// must not precede the start), and event times.
func normalized(t *testing.T, rs []*tracepb.ResourceSpans) (*tracepb.ResourceSpans, []*tracepb.Span) {
	t.Helper()
	if len(rs) == 0 {
		t.Fatal("nothing exported")
	}
	var spans []*tracepb.Span
	first := proto.Clone(rs[0]).(*tracepb.ResourceSpans)
	for _, r := range rs {
		for _, ss := range r.ScopeSpans {
			spans = append(spans, ss.Spans...)
		}
		if !proto.Equal(r.Resource, first.Resource) || r.SchemaUrl != first.SchemaUrl {
			t.Errorf("exports disagree on the resource")
		}
	}
	for _, ss := range first.ScopeSpans {
		ss.Spans = nil
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].StartTimeUnixNano < spans[j].StartTimeUnixNano })
	for _, s := range spans {
		if len(s.TraceId) != 16 || len(s.SpanId) != 8 {
			t.Errorf("%s: trace id %x, span id %x", s.Name, s.TraceId, s.SpanId)
		}
		if s.EndTimeUnixNano < s.StartTimeUnixNano {
			t.Errorf("%s ends before it starts", s.Name)
		}
		s.EndTimeUnixNano = 0
		for _, e := range s.Events {
			if e.TimeUnixNano == 0 {
				t.Errorf("%s: event %s has no time", s.Name, e.Name)
			}
			e.TimeUnixNano = 0
		}
		s.SpanId = nil
		if len(s.ParentSpanId) == 0 {
			s.TraceId = nil
		}
	}
	return first, spans
}

// The lean exporter sends the spans the SDK pipeline sends for the same
// pairs: the same resource, scope, names, kinds, attributes in the same
// order, statuses, events, links, parents and flags, once decoded from
// OTLP. Both go through the real OTLP/HTTP client to a collector.
func TestLeanExportMatchesSDK(t *testing.T) {
	clearOTEL(t)
	sdkRecv, leanRecv := newOTLPReceiver(t), newOTLPReceiver(t)
	conf := func(url string) Config {
		c := Defaults()
		c.Enabled, c.Endpoint, c.Protocol = true, url, "http/protobuf"
		c.ResourceAttributes = map[string]string{"deployment.environment.name": "test"}
		c.Links.ChildOfSingleRecord = true
		return c
	}
	s, err := resolve(conf(sdkRecv.srv.URL), osGetenv)
	if err != nil {
		t.Fatal(err)
	}
	sdk, err := NewWithExporter(conf(sdkRecv.srv.URL), "v1", otlptrace.NewUnstarted(newClient(s)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	lean, err := New(conf(leanRecv.srv.URL), "v1", prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if lean.lean == nil || sdk.lean != nil {
		t.Fatal("New should export through the lean exporter, NewWithExporter through the SDK")
	}
	traffic(t, sdk)
	traffic(t, lean)
	for _, tr := range []*Tracer{sdk, lean} {
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	wantRes, want := normalized(t, sdkRecv.resourceSpans())
	gotRes, got := normalized(t, leanRecv.resourceSpans())
	if len(want) != 11 {
		t.Fatalf("the SDK exported %d spans, want 11", len(want))
	}
	if !proto.Equal(wantRes, gotRes) {
		t.Errorf("resource and scope differ:\nSDK:  %s\nlean: %s", prototext.Format(wantRes), prototext.Format(gotRes))
	}
	if len(got) != len(want) {
		t.Errorf("lean exported %d spans, the SDK %d", len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		if !proto.Equal(want[i], got[i]) {
			t.Errorf("span %d differs:\nSDK:  %s\nlean: %s", i, prototext.Format(want[i]), prototext.Format(got[i]))
		}
	}
	if n := testutil.ToFloat64(lean.m.exported); n != 11 {
		t.Errorf("lean exporter counted %v spans exported, want 11", n)
	}
}

// leanTracer is a tracer exporting through the lean exporter over
// OTLP/HTTP to url.
func leanTracer(t *testing.T, url string, edit func(*Config)) *Tracer {
	t.Helper()
	clearOTEL(t)
	c := Defaults()
	c.Enabled, c.Endpoint, c.Protocol = true, url, "http/protobuf"
	if edit != nil {
		edit(&c)
	}
	tr, err := New(c, "test", prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if tr.lean == nil {
		t.Fatal("New did not set up the lean exporter")
	}
	return tr
}

// A client id that is not UTF-8 is sent with its bad bytes replaced, so
// the collector can decode the export (it refuses the whole export
// otherwise; the receiver fails the test on an export it cannot decode).
func TestLeanExportInvalidUTF8(t *testing.T) {
	recv := newOTLPReceiver(t)
	tr := leanTracer(t, recv.srv.URL, nil)
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("ab\xffc")).AppendRequest(nil, fetchReq(12, "orders", [16]byte{}, 0), 1)
	s := tr.Start(testPeer, bodyOf(t, frame), 5, len(frame), time.Now())
	tr.End(s, framing.KeyFetch, 12, nil)
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, spans := normalized(t, recv.resourceSpans())
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	for _, kv := range spans[0].Attributes {
		if kv.Key == "messaging.client.id" && kv.Value.GetStringValue() != "ab\uFFFDc" {
			t.Errorf("client id %q", kv.Value.GetStringValue())
		}
	}
}

// With the collector not answering, the lean exporter keeps at most
// max_queue_size spans, drops and counts the rest without blocking the
// relay, and once the collector answers every span kept is exported:
// exported + dropped = all.
func TestLeanExportDropsAtAFullQueue(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	recv := newOTLPReceiver(t)
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		recv.srv.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(stuck.Close)
	t.Cleanup(open) // runs before the server closes: a failed test must not hold it
	tr := leanTracer(t, stuck.URL, func(c *Config) { c.MaxQueueSize = 8 })
	const n = 100
	for i := range n {
		s := tr.Start(testPeer, bodyOf(t, produceFrame(int32(i))), 1, 10, time.Now())
		tr.End(s, framing.KeyProduce, 9, produceRespFrame(int32(i), 0)) // nil-safe when shed
	}
	dropped := testutil.ToFloat64(tr.m.dropped)
	if dropped < n-8 {
		t.Errorf("%v spans dropped with a queue of 8 and the collector stuck, want at least %d", dropped, n-8)
	}
	open()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	exported := testutil.ToFloat64(tr.m.exported)
	_, spans := normalized(t, recv.resourceSpans())
	if exported != float64(len(spans)) || exported+dropped != n {
		t.Errorf("exported %v (the collector got %d), dropped %v, of %d", exported, len(spans), dropped, n)
	}
}

// Large spans end a batch by its encoded size, not only its count: a
// collector's gRPC receiver refuses messages over 4 MiB by default, and a
// refused batch loses every span in it. Every export stays within
// leanBatchBytes plus one span, and none is lost.
func TestLeanExportBoundsBatchBytes(t *testing.T) {
	recv := newOTLPReceiver(t)
	tr := leanTracer(t, recv.srv.URL, nil)
	client := strings.Repeat("c", 8<<10) // each span carries it as an attribute
	const n = 600                        // about 5 MB in all, well under leanBatchMax spans
	for i := range n {
		frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID(client)).AppendRequest(nil, fetchReq(12, "orders", [16]byte{}, 0), int32(i))
		s := tr.Start(testPeer, bodyOf(t, frame), int32(i), len(frame), time.Now())
		tr.End(s, framing.KeyFetch, 12, nil)
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	spans := 0
	for _, m := range recv.got {
		if size := proto.Size(m); size > leanBatchBytes+16<<10 {
			t.Errorf("an export of %d bytes, over %d", size, leanBatchBytes+16<<10)
		}
		for _, rs := range m.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				spans += len(ss.Spans)
			}
		}
	}
	if spans != n || len(recv.got) < 2 {
		t.Errorf("%d spans in %d exports, want %d in at least 2", spans, len(recv.got), n)
	}
}
