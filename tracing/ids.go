package tracing

import (
	"context"

	"go.opentelemetry.io/otel/trace"
)

// fixIDs gives the span its trace and span ids now, before it ends, and
// returns them: a traceparent written into records names the span before
// it is exported, so both export paths must then use these ids rather
// than make their own. A child keeps its parent's trace id.
func (s *Span) fixIDs() (trace.TraceID, trace.SpanID) {
	if !s.sid.IsValid() {
		s.tid, s.sid = idSource{}.newIDs()
		if s.parent.IsValid() {
			s.tid = s.parent.TraceID()
		}
	}
	return s.tid, s.sid
}

// presetIDs is the SDK's id generator: the span's fixed ids when it has
// them (carried in the start context), random ones as the SDK's default
// generator makes otherwise.
type presetIDs struct{}

// presetKey carries a *Span with fixed ids in a span's start context.
type presetKey struct{}

func (presetIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if s, ok := ctx.Value(presetKey{}).(*Span); ok && s.sid.IsValid() {
		return s.tid, s.sid
	}
	return idSource{}.newIDs()
}

func (presetIDs) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if s, ok := ctx.Value(presetKey{}).(*Span); ok && s.sid.IsValid() {
		return s.sid
	}
	_, sid := idSource{}.newIDs()
	return sid
}
