package tracing

import (
	"math"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/kproxy/kproxy/framing"
)

// The OTLP field numbers the encoder writes (opentelemetry-proto,
// trace/v1/trace.proto and common/v1/common.proto).
const (
	fieldScopeSpansSpans = 2

	fieldSpanTraceID      = 1
	fieldSpanSpanID       = 2
	fieldSpanTraceState   = 3
	fieldSpanParentSpanID = 4
	fieldSpanName         = 5
	fieldSpanKind         = 6
	fieldSpanStart        = 7
	fieldSpanEnd          = 8
	fieldSpanAttributes   = 9
	fieldSpanEvents       = 11
	fieldSpanLinks        = 13
	fieldSpanStatus       = 15
	fieldSpanFlags        = 16

	fieldEventTime       = 1
	fieldEventName       = 2
	fieldEventAttributes = 3

	fieldLinkTraceID    = 1
	fieldLinkSpanID     = 2
	fieldLinkTraceState = 3
	fieldLinkFlags      = 6

	fieldStatusMessage = 2
	fieldStatusCode    = 3

	fieldKeyValueKey   = 1
	fieldKeyValueValue = 2

	fieldAnyString = 1
	fieldAnyBool   = 2
	fieldAnyInt    = 3
	fieldAnyDouble = 4
	fieldAnyArray  = 5

	fieldArrayValues = 1
)

// spanEncoder writes spans as OTLP protobuf, the bytes the SDK's exporter
// would send for the same span (its tracetransform and proto.Marshal),
// straight from kproxy's record. It is used by one goroutine; its buffers
// are reused span after span, so encoding allocates nothing once warm.
type spanEncoder struct {
	attrs []attribute.KeyValue // the span's attributes, rebuilt per span
	msg   []byte               // the span message being written
	sub   []byte               // a nested message being written
	sub2  []byte               // a message nested in sub
	ids   idSource
}

// appendSpan appends s to dst as one entry of ScopeSpans.spans.
func (e *spanEncoder) appendSpan(dst []byte, s *Span) []byte {
	tid, sid := s.tid, s.sid
	if !sid.IsValid() {
		tid, sid = e.ids.newIDs()
	}
	parentRemote := false
	var traceState string
	if s.parent.IsValid() {
		tid = s.parent.TraceID()
		parentRemote = s.parent.IsRemote()
		traceState = s.parent.TraceState().String()
	}
	b := e.msg[:0]
	b = protowire.AppendTag(b, fieldSpanTraceID, protowire.BytesType)
	b = protowire.AppendBytes(b, tid[:])
	b = protowire.AppendTag(b, fieldSpanSpanID, protowire.BytesType)
	b = protowire.AppendBytes(b, sid[:])
	b = appendString(b, fieldSpanTraceState, traceState)
	if s.parent.IsValid() {
		psid := s.parent.SpanID()
		b = protowire.AppendTag(b, fieldSpanParentSpanID, protowire.BytesType)
		b = protowire.AppendBytes(b, psid[:])
	}
	// The name without a concatenated string: the API, then its topic.
	b = protowire.AppendTag(b, fieldSpanName, protowire.BytesType)
	api := framing.Name(s.key)
	if s.topic != "" {
		topic := validUTF8(s.topic)
		b = protowire.AppendVarint(b, uint64(len(api)+1+len(topic)))
		b = append(b, api...)
		b = append(b, ' ')
		b = append(b, topic...)
	} else {
		b = protowire.AppendString(b, api)
	}
	b = protowire.AppendTag(b, fieldSpanKind, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(tracepb.Span_SPAN_KIND_CLIENT))
	b = appendFixed64(b, fieldSpanStart, unixNano(s.start.UnixNano()))
	b = appendFixed64(b, fieldSpanEnd, unixNano(s.end.UnixNano()))
	b = append(b, e.peerAttrs(s.peer)...)
	e.attrs = s.appendOwnAttrs(e.attrs[:0])
	for _, kv := range e.attrs {
		b = e.appendKeyValue(b, fieldSpanAttributes, kv)
	}
	for _, ev := range s.events {
		b = e.appendEvent(b, ev)
	}
	for _, l := range s.links {
		b = e.appendLink(b, l.SpanContext)
	}
	// The SDK always sends a status, empty when unset.
	st := e.sub[:0]
	if s.failure != "" {
		st = appendString(st, fieldStatusMessage, s.failure)
		st = protowire.AppendTag(st, fieldStatusCode, protowire.VarintType)
		st = protowire.AppendVarint(st, uint64(tracepb.Status_STATUS_CODE_ERROR))
	}
	b = protowire.AppendTag(b, fieldSpanStatus, protowire.BytesType)
	b = protowire.AppendBytes(b, st)
	e.sub = st
	// The sampled flag, and that whether the parent is remote is known.
	flags := uint32(trace.FlagsSampled) | uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)
	if parentRemote {
		flags |= uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK)
	}
	b = protowire.AppendTag(b, fieldSpanFlags, protowire.Fixed32Type)
	b = protowire.AppendFixed32(b, flags)
	e.msg = b
	dst = protowire.AppendTag(dst, fieldScopeSpansSpans, protowire.BytesType)
	return protowire.AppendBytes(dst, b)
}

// appendEvent appends a policy event (Span.events) to the span message b.
func (e *spanEncoder) appendEvent(b []byte, ev event) []byte {
	m := e.sub[:0]
	m = appendFixed64(m, fieldEventTime, unixNano(ev.at.UnixNano()))
	m = appendString(m, fieldEventName, policyEvent)
	for _, kv := range ev.attrs() {
		m = e.appendKeyValue(m, fieldEventAttributes, kv)
	}
	e.sub = m
	b = protowire.AppendTag(b, fieldSpanEvents, protowire.BytesType)
	return protowire.AppendBytes(b, m)
}

// appendLink appends a link to a produced record's context.
func (e *spanEncoder) appendLink(b []byte, sc trace.SpanContext) []byte {
	tid, sid := sc.TraceID(), sc.SpanID()
	m := e.sub[:0]
	m = protowire.AppendTag(m, fieldLinkTraceID, protowire.BytesType)
	m = protowire.AppendBytes(m, tid[:])
	m = protowire.AppendTag(m, fieldLinkSpanID, protowire.BytesType)
	m = protowire.AppendBytes(m, sid[:])
	m = appendString(m, fieldLinkTraceState, sc.TraceState().String())
	flags := uint32(sc.TraceFlags()) | uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)
	if sc.IsRemote() {
		flags |= uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK)
	}
	m = protowire.AppendTag(m, fieldLinkFlags, protowire.Fixed32Type)
	m = protowire.AppendFixed32(m, flags)
	e.sub = m
	b = protowire.AppendTag(b, fieldSpanLinks, protowire.BytesType)
	return protowire.AppendBytes(b, m)
}

// peerAttrs are the pair's attributes as span attribute fields: encoded
// at the pair's first span, then reused.
func (e *spanEncoder) peerAttrs(p *Peer) []byte {
	if enc := p.encoded.Load(); enc != nil {
		return *enc
	}
	var enc []byte
	for _, kv := range p.attrs {
		enc = e.appendKeyValue(enc, fieldSpanAttributes, kv)
	}
	p.encoded.Store(&enc)
	return enc
}

// appendKeyValue appends kv as a KeyValue message in the given field of
// b. Attribute keys are kproxy's own constants, valid UTF-8.
func (e *spanEncoder) appendKeyValue(b []byte, field protowire.Number, kv attribute.KeyValue) []byte {
	v := kv.Value
	if v.Type() == attribute.STRING {
		if str := v.AsString(); !utf8.ValidString(str) {
			v = attribute.StringValue(validUTF8(str))
		}
	}
	size, ok := anyValueSize(v)
	var value []byte
	if !ok { // a slice: written out first to learn its size
		value = appendAnyValue(e.sub2[:0], v)
		e.sub2 = value
		size = len(value)
	}
	kvSize := protowire.SizeTag(fieldKeyValueValue) + protowire.SizeBytes(size)
	if kv.Key != "" {
		kvSize += protowire.SizeTag(fieldKeyValueKey) + protowire.SizeBytes(len(kv.Key))
	}
	b = protowire.AppendTag(b, field, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(kvSize))
	if kv.Key != "" {
		b = protowire.AppendTag(b, fieldKeyValueKey, protowire.BytesType)
		b = protowire.AppendString(b, string(kv.Key))
	}
	b = protowire.AppendTag(b, fieldKeyValueValue, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	if !ok {
		return append(b, value...)
	}
	return appendAnyValue(b, v)
}

// anyValueSize is the size of the AnyValue message appendAnyValue writes
// for a scalar v; ok is false for a slice.
func anyValueSize(v attribute.Value) (size int, ok bool) {
	switch v.Type() {
	case attribute.STRING:
		return 1 + protowire.SizeBytes(len(v.AsString())), true
	case attribute.BOOL:
		return 2, true
	case attribute.INT64:
		return 1 + protowire.SizeVarint(uint64(v.AsInt64())), true
	case attribute.FLOAT64:
		return 1 + 8, true
	}
	return 0, false
}

// appendAnyValue appends the content of an AnyValue holding v, as the
// SDK's transform makes it: a oneof, so a zero value is still written.
func appendAnyValue(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.STRING:
		b = protowire.AppendTag(b, fieldAnyString, protowire.BytesType)
		return protowire.AppendString(b, v.AsString()) // made valid by appendKeyValue
	case attribute.BOOL:
		b = protowire.AppendTag(b, fieldAnyBool, protowire.VarintType)
		return protowire.AppendVarint(b, protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		b = protowire.AppendTag(b, fieldAnyInt, protowire.VarintType)
		return protowire.AppendVarint(b, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		b = protowire.AppendTag(b, fieldAnyDouble, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, math.Float64bits(v.AsFloat64()))
	}
	// Slices (no span attribute kproxy sets is one): through the proto
	// types, once per value.
	av := anyValue(v)
	if av == nil || av.GetArrayValue() == nil {
		return b
	}
	var arr []byte
	for _, x := range av.GetArrayValue().Values {
		el := appendProtoAny(nil, x)
		arr = protowire.AppendTag(arr, fieldArrayValues, protowire.BytesType)
		arr = protowire.AppendBytes(arr, el)
	}
	b = protowire.AppendTag(b, fieldAnyArray, protowire.BytesType)
	return protowire.AppendBytes(b, arr)
}

// appendProtoAny appends a scalar AnyValue message's content.
func appendProtoAny(b []byte, x *commonpb.AnyValue) []byte {
	switch y := x.Value.(type) {
	case *commonpb.AnyValue_StringValue:
		return appendAnyValue(b, attribute.StringValue(y.StringValue))
	case *commonpb.AnyValue_BoolValue:
		return appendAnyValue(b, attribute.BoolValue(y.BoolValue))
	case *commonpb.AnyValue_IntValue:
		return appendAnyValue(b, attribute.Int64Value(y.IntValue))
	case *commonpb.AnyValue_DoubleValue:
		return appendAnyValue(b, attribute.Float64Value(y.DoubleValue))
	}
	return b
}

// appendString appends a string field, leaving it out when empty as
// proto3 does.
func appendString(b []byte, field protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, field, protowire.BytesType)
	return protowire.AppendString(b, validUTF8(s))
}

// validUTF8 returns s, or s with invalid bytes replaced: OTLP strings
// must be UTF-8 and a receiver refuses a whole export holding one that
// is not (the SDK's exporter fails to marshal such a batch). A client id
// is whatever bytes the client sent.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

func appendFixed64(b []byte, field protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, field, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, v)
}

// unixNano clamps a time before 1970 to 0, as the SDK's transform does.
func unixNano(n int64) uint64 { return uint64(max(0, n)) }
