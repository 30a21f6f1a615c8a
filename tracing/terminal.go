package tracing

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Terminal is a span exporter that prints one compact line per span to w,
// for `kproxy demo` when no OTLP endpoint is set: the same spans a
// collector would get, readable where kproxy runs.
func Terminal(w io.Writer) sdktrace.SpanExporter { return &terminal{w: w} }

type terminal struct {
	mu sync.Mutex
	w  io.Writer
}

func (t *terminal) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	var b strings.Builder
	for _, s := range spans {
		b.WriteString(SpanLine(s))
		b.WriteByte('\n')
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	_, err := io.WriteString(t.w, b.String())
	return err
}

func (t *terminal) Shutdown(context.Context) error { return nil }

// SpanLine is one span in a line: when, what, how long, and the
// attributes people look for first.
//
//	12:04:05.123 span  Produce demo            0.41ms  client=kgo partition=0 records=3 corr=7>12 id=4bf92f35/00f067aa
//
// A span is named by the first 8 hex digits of its trace id and of its
// span id, so a Fetch line's links= can be matched by eye to the Produce
// line whose records it returned.
func SpanLine(s sdktrace.ReadOnlySpan) string {
	attrs := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		attrs[kv.Key] = kv.Value
	}
	d := s.EndTime().Sub(s.StartTime())
	line := fmt.Sprintf("%s span  %-28s %7.2fms", s.StartTime().Format("15:04:05.000"), s.Name(), float64(d)/float64(time.Millisecond))
	for _, f := range []struct {
		label string
		key   attribute.Key
	}{
		{"client", semconv.MessagingClientIDKey},
		{"group", semconv.MessagingConsumerGroupNameKey},
		{"partition", semconv.MessagingDestinationPartitionIDKey},
		{"records", semconv.MessagingBatchMessageCountKey},
	} {
		if v, ok := attrs[f.key]; ok {
			line += fmt.Sprintf(" %s=%s", f.label, v.Emit())
		}
	}
	if c, ok := attrs[attrClientCorr]; ok {
		line += fmt.Sprintf(" corr=%d>%d", c.AsInt64(), attrs[attrUpstreamCorr].AsInt64())
	}
	line += " id=" + shortID(s.SpanContext())
	if links := s.Links(); len(links) > 0 {
		ids := make([]string, 0, 3)
		for i, l := range links {
			if i == 3 {
				ids = append(ids, fmt.Sprintf("+%d", len(links)-3))
				break
			}
			ids = append(ids, shortID(l.SpanContext))
		}
		line += " links=" + strings.Join(ids, ",")
	}
	if s.Status().Code == codes.Error {
		line += " ERROR " + s.Status().Description
	}
	return line
}

// shortID is a span context's trace and span id, each cut to 8 hex digits.
func shortID(sc trace.SpanContext) string {
	return sc.TraceID().String()[:8] + "/" + sc.SpanID().String()[:8]
}
