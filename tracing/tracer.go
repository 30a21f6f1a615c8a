package tracing

import (
	"context"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/kproxy/kproxy/framing"
)

// Tracer turns request/response pairs into spans. The zero Tracer is off.
type Tracer struct {
	on    bool
	s     settings
	tp    *sdktrace.TracerProvider
	tr    trace.Tracer
	m     *metrics
	queue *exportQueue // spans waiting for export
	// lean, when set, exports spans over OTLP straight from their
	// records; nil: through the SDK (tp, tr) to an exporter given to
	// NewWithExporter.
	lean *leanExporter
	res  *resource.Resource
	// inflateRate bounds the bytes inflated for links per second, process
	// wide (nil: unbounded).
	inflateRate *inflateRate
}

// On reports whether tracing is enabled at all.
func (t *Tracer) On() bool { return t != nil && t.on }

// InflatesRecords reports whether Start may decompress a Produce's batches
// (tracing.links.decompress), which must then not run on the poller.
func (t *Tracer) InflatesRecords() bool {
	return t.On() && t.s.Links.Decompress && t.s.Links.Max > 0
}

// Attribute keys kproxy adds under its own prefix.
const (
	attrAPIKey       = attribute.Key("kproxy.api_key")
	attrAPIVersion   = attribute.Key("kproxy.api_version")
	attrClientCorr   = attribute.Key("kproxy.correlation_id.client")
	attrUpstreamCorr = attribute.Key("kproxy.correlation_id.upstream")
	attrReqBytes     = attribute.Key("kproxy.request_bytes")
	attrRespBytes    = attribute.Key("kproxy.response_bytes")
	attrDecoded      = attribute.Key("kproxy.body_decoded")
	attrLinksPartial = attribute.Key("kproxy.links_incomplete")
	attrLinksCut     = attribute.Key("kproxy.links_truncated")
)

// Peer holds what every span of one client/upstream pair shares, built once
// when the pair opens.
type Peer struct {
	attrs    []attribute.KeyValue
	ids      *framing.TopicIDs
	clientID string // the last client id seen; a client keeps one
	// encoded is attrs as OTLP span attributes, written by the lean
	// exporter at the pair's first span and reused for the rest.
	encoded atomic.Pointer[[]byte]
}

// clientIDString returns id as a string, reusing the last one when equal.
// Only the pair's request goroutine calls it.
func (p *Peer) clientIDString(id []byte) string {
	if string(id) != p.clientID {
		p.clientID = string(id)
	}
	return p.clientID
}

// NewPeer describes a pair: client is the client's address, upstream the
// broker's HOST:PORT, ids the topic names learnt from Metadata.
func NewPeer(client, upstream string, ids *framing.TopicIDs) *Peer {
	p := &Peer{attrs: []attribute.KeyValue{semconv.MessagingSystemKafka}, ids: ids}
	if h, port, err := net.SplitHostPort(upstream); err == nil {
		n, _ := strconv.Atoi(port)
		p.attrs = append(p.attrs, semconv.ServerAddress(h), semconv.ServerPort(n))
	}
	if h, port, err := net.SplitHostPort(client); err == nil {
		n, _ := strconv.Atoi(port)
		p.attrs = append(p.attrs, semconv.NetworkPeerAddress(h), semconv.NetworkPeerPort(n))
	}
	return p
}

// PrincipalKey is the span attribute naming the client's proven identity
// (the first of tlsconf.Identities: a SPIFFE ID or a certificate CN).
const PrincipalKey = attribute.Key("kproxy.principal")

// SetPrincipal adds the client's proven identity to every span of the
// pair; nil-safe. Call it before the pair's first request.
func (p *Peer) SetPrincipal(name string) {
	if p != nil && name != "" {
		p.attrs = append(p.attrs, PrincipalKey.String(name))
	}
}

// UpstreamPrincipalKey is the span attribute naming the principal kproxy
// authenticated as to the broker (sasl.upstream): the username, or the
// token's subject.
const UpstreamPrincipalKey = attribute.Key("kproxy.upstream.principal")

// SetUpstreamPrincipal adds the principal kproxy authenticated as to the
// broker to every span of the pair; nil-safe. Call it before the pair's
// first request.
func (p *Peer) SetUpstreamPrincipal(name string) {
	if p != nil && name != "" {
		p.attrs = append(p.attrs, UpstreamPrincipalKey.String(name))
	}
}

// Span is a traced request waiting for its response: the pair's facts in
// a fixed record, filled on the relay path without building attributes.
// The exported span is made from it only when the pair completes, off the
// relay path when exporting over OTLP (see leanExporter), and with its
// start time set back to the request's: nothing half-made if the pair
// never completes. The relay must not touch a Span after End or Fail.
type Span struct {
	peer   *Peer
	parent trace.SpanContext // a produced record's context, when the span is its child
	links  []trace.Link
	events []event
	start  time.Time
	end    time.Time

	key, version             int16
	clientCorr, upstreamCorr int32
	partition                int32
	reqBytes, respBytes      int
	records                  int
	clientID                 string // "" and hasClientID false: the header had none
	topic                    string // the request's one topic, if it names exactly one
	group                    string
	failure                  string // error.type; "" for a success

	hasClientID, hasPartition, hasResp, decoded bool
	incomplete, cut                             bool
}

// name is the span's name: the API, and its topic when it has one.
func (s *Span) name() string {
	if s.topic != "" {
		return framing.Name(s.key) + " " + s.topic
	}
	return framing.Name(s.key)
}

// appendAttrs appends the span's attributes to dst in the order both
// export paths give them: the pair's, the request's, then the response's.
// Building them allocates nothing but dst's growth.
func (s *Span) appendAttrs(dst []attribute.KeyValue) []attribute.KeyValue {
	return s.appendOwnAttrs(append(dst, s.peer.attrs...))
}

// appendOwnAttrs appends the attributes after the pair's.
func (s *Span) appendOwnAttrs(dst []attribute.KeyValue) []attribute.KeyValue {
	dst = append(dst,
		semconv.MessagingOperationName(framing.Name(s.key)),
		attrAPIKey.Int(int(s.key)),
		attrAPIVersion.Int(int(s.version)),
		attrClientCorr.Int(int(s.clientCorr)),
		attrUpstreamCorr.Int(int(s.upstreamCorr)),
		attrReqBytes.Int(s.reqBytes),
		attrDecoded.Bool(s.decoded),
	)
	if op := operationType(s.key); op != "" {
		dst = append(dst, semconv.MessagingOperationTypeKey.String(op))
	}
	if s.hasClientID {
		dst = append(dst, semconv.MessagingClientID(s.clientID))
	}
	if s.topic != "" {
		dst = append(dst, semconv.MessagingDestinationName(s.topic))
		if s.hasPartition {
			dst = append(dst, semconv.MessagingDestinationPartitionID(strconv.Itoa(int(s.partition))))
		}
	}
	if s.group != "" {
		dst = append(dst, semconv.MessagingConsumerGroupName(s.group))
	}
	if s.key == framing.KeyProduce && s.decoded { // no count from a body never read
		dst = append(dst, semconv.MessagingBatchMessageCount(s.records))
	}
	if s.incomplete {
		dst = append(dst, attrLinksPartial.Bool(true))
	}
	if s.cut {
		dst = append(dst, attrLinksCut.Bool(true))
	}
	if s.hasResp {
		dst = append(dst, attrRespBytes.Int(s.respBytes))
	}
	if s.failure != "" {
		dst = append(dst, semconv.ErrorTypeKey.String(s.failure))
	}
	return dst
}

// event is a policy decision to show on the span.
type event struct {
	at                   time.Time
	rule, action, reason string
}

// Policy records a policy decision (throttled or rejected, by which rule,
// why) as an event of the span; nil-safe.
func (s *Span) Policy(rule, action, reason string) {
	if s != nil {
		s.events = append(s.events, event{time.Now(), rule, action, reason})
	}
}

// respAttrs is how many attributes End may add.
const respAttrs = 2

// Start prepares the span of a request whose frame was read whole at
// start, or returns nil when the request is not traced. Only a traced
// request has its body decoded (through body, so the decode is shared).
func (t *Tracer) Start(p *Peer, body *framing.Body, upstreamID int32, reqBytes int, start time.Time) *Span {
	if !t.On() {
		return nil
	}
	h := body.Header()
	sampled := t.s.ratio >= 1 || (t.s.ratio > 0 && rand.Float64() < t.s.ratio)
	// A produce may carry a parent to follow instead of the ratio.
	mayFollow := t.s.Links.ChildOfSingleRecord && t.s.parentBased && h.APIKey == framing.KeyProduce && t.s.Links.Max > 0
	if !sampled && !mayFollow {
		return nil
	}
	if t.queue.full() {
		// The export queue is full, so this span would be dropped when it
		// ends: drop it now, before decoding the body and building it.
		// With the collector slower than the requests, building spans
		// only to drop them was most of tracing's cost.
		t.m.dropped.Inc()
		return nil
	}
	var f facts
	// Request has always run by now, so body.Decoded() would say true even
	// for a version relayed opaquely; say whether a body was read.
	decoded := false
	if req, err := body.Request(); err == nil && req != nil {
		f = requestFacts(req, p.ids)
		decoded = true
	}
	if !sampled && f.records != 1 {
		// Only a produce of one record may follow a parent: read no
		// records (and inflate nothing) for a request that stays unsampled.
		return nil
	}
	s := spanPool.Get().(*Span)
	s.peer, s.start = p, start
	if len(f.batches) > 0 && t.s.Links.Max > 0 {
		var b *inflateBudget
		if t.s.Links.Decompress {
			b = &inflateBudget{bytes: t.s.Links.MaxDecompressedBytes, batches: t.s.Links.MaxDecompressedBatches, rate: t.inflateRate}
		}
		found, complete := recordContexts(f.batches, t.s.Links.Max, b)
		s.incomplete = !complete
		if b != nil {
			t.m.inflated.Add(float64(b.inflated))
			if b.cut != "" {
				s.cut = true
				t.m.truncated.WithLabelValues(string(b.cut)).Inc()
			}
		}
		if t.s.Links.ChildOfSingleRecord && f.records == 1 && len(found) == 1 {
			s.parent = found[0]
			if t.s.parentBased {
				sampled = found[0].IsSampled()
			}
		} else {
			for _, sc := range found {
				s.links = append(s.links, trace.Link{SpanContext: sc})
			}
		}
	}
	if !sampled {
		s.release()
		return nil
	}
	s.key, s.version = h.APIKey, h.APIVersion
	s.clientCorr, s.upstreamCorr = h.CorrelationID, upstreamID
	s.reqBytes, s.decoded = reqBytes, decoded
	if h.ClientID != nil {
		s.hasClientID, s.clientID = true, p.clientIDString(h.ClientID)
	}
	if len(f.topics) == 1 {
		s.topic = f.topics[0]
		s.hasPartition, s.partition = f.partitions == 1, f.partition
	}
	s.group, s.records = f.group, f.records
	t.m.started.Inc()
	return s
}

// spanPool recycles Span records: the lean exporter gives one back once
// it has encoded it.
var spanPool = sync.Pool{New: func() any { return new(Span) }}

// release clears s and gives it back to the pool.
func (s *Span) release() {
	clear(s.links)
	links, events := s.links[:0], s.events[:0]
	clear(s.events)
	*s = Span{links: links, events: events}
	spanPool.Put(s)
}

// End emits a span with its response frame (nil when the request gets no
// response, as acks=0 Produce), marking it an error when the response
// carries a non-zero error code anywhere.
func (t *Tracer) End(s *Span, key, version int16, resp []byte) {
	if s == nil {
		return
	}
	if resp != nil {
		s.hasResp, s.respBytes = true, len(resp)
		if r, err := framing.DecodeResponse(resp, key, version); err == nil && r != nil {
			if code := framing.FirstError(r); code != 0 {
				s.failure = errorName(code)
			}
		}
	}
	t.emit(s)
}

// Fail emits the span of a request whose response will never come, with
// reason as its error type.
func (t *Tracer) Fail(s *Span, reason string) {
	if s != nil {
		s.failure = reason
		t.emit(s)
	}
}

// emit hands the finished span to the lean OTLP exporter, or builds it
// through the SDK for an exporter given to NewWithExporter. The span is
// counted ended only once handed over, so a Shutdown that follows a count
// of started == ended flushes every one of them.
func (t *Tracer) emit(s *Span) {
	s.end = time.Now()
	if t.lean != nil {
		t.lean.enqueue(s)
		t.m.ended.Inc()
		return
	}
	t.emitSDK(s)
	s.release()
	t.m.ended.Inc()
}

// emitSDK builds s as an OpenTelemetry SDK span and ends it, for the SDK
// pipeline (its batch processor and the given exporter).
func (t *Tracer) emitSDK(s *Span) {
	ctx := context.Background()
	if s.parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, s.parent)
	}
	opts := [...]trace.SpanStartOption{clientKind, trace.WithTimestamp(s.start), nil}
	n := 2
	if len(s.links) > 0 {
		opts[n] = trace.WithLinks(s.links...)
		n++
	}
	_, span := t.tr.Start(ctx, s.name(), opts[:n]...)
	// Set after Start rather than passed to it: the start options would
	// copy the attributes once more before the span copies them itself.
	// The SDK samples everything (provider.go: AlwaysSample; the ratio is
	// applied in Start), so nothing needs the attributes at start.
	span.SetAttributes(s.appendAttrs(make([]attribute.KeyValue, 0, len(s.peer.attrs)+16+respAttrs))...)
	if s.failure != "" {
		span.SetStatus(codes.Error, s.failure)
	}
	for _, e := range s.events {
		span.AddEvent(policyEvent, trace.WithTimestamp(e.at), trace.WithAttributes(e.attrs()...))
	}
	span.End(trace.WithTimestamp(s.end))
}

// policyEvent is the name of a policy decision's span event.
const policyEvent = "kproxy.policy"

// attrs are a policy event's attributes, in the order both export paths
// give them.
func (e event) attrs() []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("kproxy.policy.rule", e.rule),
		attribute.String("kproxy.policy.action", e.action),
		attribute.String("kproxy.policy.reason", e.reason)}
}

var clientKind = trace.WithSpanKind(trace.SpanKindClient)

// errorName is the Kafka name of an error code (UNKNOWN_TOPIC_OR_PARTITION).
func errorName(code int16) string {
	// ErrorForCode answers UnknownServerError (-1) for codes it does not
	// know; those keep their number instead.
	if ke, ok := kerr.ErrorForCode(code).(*kerr.Error); ok && ke.Code == code {
		return ke.Message
	}
	return strconv.Itoa(int(code))
}

// Shutdown flushes spans still queued.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if !t.On() {
		return nil
	}
	if t.lean != nil {
		return t.lean.shutdown(ctx)
	}
	return t.tp.Shutdown(ctx)
}
