// This file holds the SDK export path: building a finished Span record
// as an OpenTelemetry SDK span, for an exporter given to NewWithExporter
// (tests, the demo's terminal). Over OTLP the lean exporter
// (lean_export.go) encodes records itself instead.

package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// emitSDK builds s as an OpenTelemetry SDK span and ends it, for the SDK
// pipeline (its batch processor and the given exporter).
func (t *Tracer) emitSDK(s *Span) {
	ctx := context.Background()
	if s.sid.IsValid() {
		ctx = context.WithValue(ctx, presetKey{}, s) // presetIDs gives the fixed ids
	}
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

var clientKind = trace.WithSpanKind(trace.SpanKindClient)
