// This file holds the Span record: the fixed, pooled record a traced
// request fills on the relay path, and the attributes and policy events
// both export paths make from it, in the same order.

package tracing

import (
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/kproxy/kproxy/framing"
)

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
	attrInjected     = attribute.Key("kproxy.traceparent_injected")
)

// Span is a traced request waiting for its response: the pair's facts in
// a fixed record, filled on the relay path without building attributes.
// The exported span is made from it only when the pair completes, off the
// relay path when exporting over OTLP (see leanExporter), and with its
// start time set back to the request's: nothing half-made if the pair
// never completes. The relay must not touch a Span after End or Fail.
type Span struct {
	peer   *Peer
	parent trace.SpanContext // a produced record's context, when the span is its child
	// tid and sid are the span's ids when fixed before it ended (fixIDs:
	// a traceparent injected into records names them); zero otherwise,
	// and the exporter makes them.
	tid    trace.TraceID
	sid    trace.SpanID
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
	// injected is how many records got a traceparent naming this span;
	// fetched says records counts a Fetch's returned records.
	injected int
	fetched  bool
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
	if (s.key == framing.KeyProduce && s.decoded) || s.fetched { // no count from a body never read
		dst = append(dst, semconv.MessagingBatchMessageCount(s.records))
	}
	if s.injected > 0 {
		dst = append(dst, attrInjected.Int(s.injected))
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
const respAttrs = 4

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
