package tracing

import (
	"encoding/binary"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/kproxy/kproxy/framing"
)

var testPeer = NewPeer("10.1.2.3:50000", "broker-0:9092", nil)

// produceFrame is a Produce v9 to one partition of "orders" holding recs.
func produceFrame(corr int32, recs ...kmsg.Record) []byte {
	return requestFrame(produceReq(9, produceTopic("orders", [16]byte{}, plainBatch(recs...))), corr)
}

// produceRespFrame answers produceFrame with the given partition code.
func produceRespFrame(corr int32, code int16) []byte {
	r := kmsg.NewPtrProduceResponse()
	tp := kmsg.NewProduceResponseTopic()
	pp := kmsg.NewProduceResponseTopicPartition()
	pp.ErrorCode = code
	tp.Partitions = append(tp.Partitions, pp)
	r.Topics = append(r.Topics, tp)
	r.Version = 9
	return responseFrame(r, corr)
}

// When tracing is off, or the ratio is 0 with no parent to follow, Start
// returns nil and decodes nothing; End and Fail accept the nil span.
func TestStartNotTraced(t *testing.T) {
	var zero Tracer
	var nilTracer *Tracer
	ratio0, _ := newTestTracer(t, func(c *Config) { c.SampleRatio = ratioPtr(0) })
	for name, tr := range map[string]*Tracer{"zero": &zero, "nil": nilTracer, "ratio 0": ratio0} {
		body := bodyOf(t, produceFrame(1, tracedRecord(spanCtx(1, 1, true))))
		s := tr.Start(testPeer, body, 7, 100, time.Now())
		if s != nil {
			t.Errorf("%s: span started", name)
		}
		if body.Decoded() {
			t.Errorf("%s: body decoded for an untraced request", name)
		}
		tr.End(s, 0, 9, produceRespFrame(1, 0))
		tr.Fail(s, "x")
	}
	if zero.On() || nilTracer.On() || !ratio0.On() {
		t.Error("On is wrong")
	}
}

// A traced request gives one client span named by the conventions, with
// the request's own start time and the pair's facts.
func TestSpanFromRequest(t *testing.T) {
	tr, flush := newTestTracer(t, func(c *Config) { c.ServiceName = "kp" })
	start := time.Now().Add(-1500 * time.Millisecond).Round(0)
	frame := produceFrame(41, kmsg.Record{Value: []byte("a")}, kmsg.Record{Value: []byte("b")})
	s := tr.Start(testPeer, bodyOf(t, frame), 1041, len(frame), start)
	if s == nil {
		t.Fatal("not traced at ratio 1")
	}
	if got := testutil.ToFloat64(tr.m.started); got != 1 {
		t.Errorf("spans started %v", got)
	}
	resp := produceRespFrame(1041, 0)
	tr.End(s, framing.KeyProduce, 9, resp)
	span := onlySpan(t, flush())
	if span.Name != "Produce orders" || span.SpanKind != trace.SpanKindClient {
		t.Errorf("span %q kind %v", span.Name, span.SpanKind)
	}
	if !span.StartTime.Equal(start) {
		t.Errorf("start %v, want the request's %v", span.StartTime, start)
	}
	if span.Status.Code != codes.Unset {
		t.Errorf("status %v", span.Status)
	}
	for k, v := range map[string]string{
		"messaging.system": "kafka", "messaging.operation.name": "Produce", "messaging.operation.type": "send",
		"messaging.destination.name": "orders", "messaging.destination.partition.id": "0",
		"messaging.batch.message_count": "2", "messaging.client.id": "x",
		"server.address": "broker-0", "server.port": "9092", "network.peer.address": "10.1.2.3", "network.peer.port": "50000",
		"kproxy.api_key": "0", "kproxy.api_version": "9", "kproxy.correlation_id.client": "41",
		"kproxy.correlation_id.upstream": "1041", "kproxy.body_decoded": "true",
	} {
		wantAttr(t, span, k, v)
	}
	wantAttr(t, span, "kproxy.request_bytes", strconv.Itoa(len(frame)))
	wantAttr(t, span, "kproxy.response_bytes", strconv.Itoa(len(resp)))
	if _, ok := attr(span, "error.type"); ok {
		t.Error("error.type on a clean response")
	}
	if v, _ := span.Resource.Set().Value("service.name"); v.AsString() != "kp" {
		t.Errorf("service.name %q", v.AsString())
	}
}

// A non-zero code anywhere in the response marks the span an error typed
// by the Kafka error name.
func TestEndResponseError(t *testing.T) {
	tr, flush := newTestTracer(t, nil)
	s := tr.Start(testPeer, bodyOf(t, produceFrame(1, kmsg.Record{})), 2, 10, time.Now())
	tr.End(s, framing.KeyProduce, 9, produceRespFrame(2, 6))
	span := onlySpan(t, flush())
	if span.Status.Code != codes.Error || span.Status.Description != "NOT_LEADER_FOR_PARTITION" {
		t.Errorf("status %+v", span.Status)
	}
	wantAttr(t, span, "error.type", "NOT_LEADER_FOR_PARTITION")
}

// A request that will never be answered ends with the reason as its type.
func TestFail(t *testing.T) {
	tr, flush := newTestTracer(t, nil)
	s := tr.Start(testPeer, bodyOf(t, requestFrame(kmsg.NewPtrMetadataRequest(), 3)), 3, 10, time.Now())
	tr.Fail(s, "kproxy.connection_closed")
	span := onlySpan(t, flush())
	if span.Name != "Metadata" || span.Status.Code != codes.Error {
		t.Errorf("span %q status %+v", span.Name, span.Status)
	}
	wantAttr(t, span, "error.type", "kproxy.connection_closed")
	if _, ok := attr(span, "kproxy.response_bytes"); ok {
		t.Error("response bytes on a failed request")
	}
}

// A version kmsg does not know is relayed opaquely: it is still traced,
// from its header alone, and says its body was not decoded.
func TestStartUnknownVersion(t *testing.T) {
	tr, flush := newTestTracer(t, nil)
	frame := binary.BigEndian.AppendUint32(nil, 8+4)
	frame = binary.BigEndian.AppendUint16(frame, uint16(framing.KeyApiVersions))
	frame = binary.BigEndian.AppendUint16(frame, 999)
	frame = binary.BigEndian.AppendUint32(frame, 77)
	frame = append(frame, 0xde, 0xad, 0xbe, 0xef)
	s := tr.Start(testPeer, bodyOf(t, frame), 5, len(frame), time.Now())
	if s == nil {
		t.Fatal("unknown version not traced")
	}
	resp := binary.BigEndian.AppendUint32(nil, 4+3)
	resp = binary.BigEndian.AppendUint32(resp, 5)
	resp = append(resp, 1, 2, 3)
	tr.End(s, framing.KeyApiVersions, 999, resp)
	span := onlySpan(t, flush())
	if span.Name != "ApiVersions" || span.Status.Code == codes.Error {
		t.Errorf("span %q status %+v", span.Name, span.Status)
	}
	wantAttr(t, span, "kproxy.body_decoded", "false")
	wantAttr(t, span, "kproxy.api_version", "999")
	wantAttr(t, span, "kproxy.correlation_id.client", "77")
}

// With child_of_single_record and parent-based sampling, the record's
// parent decides: an unsampled parent suppresses the span even at ratio 1,
// a sampled one brings it even at ratio 0.
func TestChildOfSingleRecord(t *testing.T) {
	childOf := func(ratio float64) func(*Config) {
		return func(c *Config) { c.SampleRatio, c.Links.ChildOfSingleRecord = ratioPtr(ratio), true }
	}

	tr, flush := newTestTracer(t, childOf(1))
	s := tr.Start(testPeer, bodyOf(t, produceFrame(1, tracedRecord(spanCtx(1, 1, false)))), 1, 10, time.Now())
	if s != nil {
		tr.End(s, framing.KeyProduce, 9, produceRespFrame(1, 0))
		t.Errorf("span for a record whose parent is not sampled; %d exported", len(flush()))
	}

	tr, flush = newTestTracer(t, childOf(0))
	parent := spanCtx(2, 2, true)
	s = tr.Start(testPeer, bodyOf(t, produceFrame(1, tracedRecord(parent))), 1, 10, time.Now())
	if s == nil {
		t.Fatal("no span for a sampled record parent at ratio 0")
	}
	tr.End(s, framing.KeyProduce, 9, produceRespFrame(1, 0))
	span := onlySpan(t, flush())
	if span.Parent.TraceID() != parent.TraceID() || span.Parent.SpanID() != parent.SpanID() || !span.Parent.IsRemote() {
		t.Errorf("parent %v, want the record's %v", span.Parent, parent)
	}
	if span.SpanContext.TraceID() != parent.TraceID() || len(span.Links) != 0 {
		t.Errorf("trace %v links %d: want the record's trace and no link", span.SpanContext.TraceID(), len(span.Links))
	}

	// Two records, or a non-produce, have no single parent to follow.
	tr, flush = newTestTracer(t, childOf(0))
	two := produceFrame(1, tracedRecord(parent), tracedRecord(spanCtx(3, 3, true)))
	if tr.Start(testPeer, bodyOf(t, two), 1, 10, time.Now()) != nil {
		t.Error("span for a two-record produce at ratio 0")
	}
	if tr.Start(testPeer, bodyOf(t, requestFrame(kmsg.NewPtrMetadataRequest(), 1)), 1, 10, time.Now()) != nil {
		t.Error("span for a metadata request at ratio 0")
	}
	if n := len(flush()); n != 0 {
		t.Errorf("%d spans exported", n)
	}
}

// errorName uses Kafka's names, and the number for codes newer than kerr.
func TestErrorName(t *testing.T) {
	for code, want := range map[int16]string{6: "NOT_LEADER_FOR_PARTITION", -1: "UNKNOWN_SERVER_ERROR", 3: "UNKNOWN_TOPIC_OR_PARTITION", 9999: "9999"} {
		if got := errorName(code); got != want {
			t.Errorf("code %d: %q, want %q", code, got, want)
		}
	}
}

// A known version whose body does not decode is traced from its header
// and says its body was not read.
func TestStartMalformedBody(t *testing.T) {
	tr, flush := newTestTracer(t, nil)
	frame := produceFrame(1, kmsg.Record{Value: []byte("abc")})
	frame = frame[:len(frame)-20]
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	s := tr.Start(testPeer, bodyOf(t, frame), 1, len(frame), time.Now())
	tr.Fail(s, "kproxy.malformed_request")
	span := onlySpan(t, flush())
	if span.Name != "Produce" {
		t.Errorf("span %q", span.Name)
	}
	wantAttr(t, span, "kproxy.body_decoded", "false")
}
