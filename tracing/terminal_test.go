package tracing

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// A span built by the SDK prints as one line with its name, duration and
// the attributes kproxy sets.
func TestTerminalLine(t *testing.T) {
	var out bytes.Buffer
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(Terminal(&out)))
	start := time.Date(2026, 12, 1, 12, 4, 5, 123e6, time.UTC)
	_, s := tp.Tracer("t").Start(context.Background(), "Produce demo", trace.WithTimestamp(start))
	s.SetAttributes(semconv.MessagingClientID("kgo"), semconv.MessagingDestinationPartitionID("0"),
		semconv.MessagingBatchMessageCount(3), attrClientCorr.Int(7), attrUpstreamCorr.Int(12))
	linked := spanCtx(0x4b, 0x07, true)
	s.AddLink(trace.Link{SpanContext: linked})
	s.SetStatus(codes.Error, "NOT_LEADER_OR_FOLLOWER")
	s.End(trace.WithTimestamp(start.Add(410 * time.Microsecond)))
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := strings.TrimSpace(out.String())
	for _, want := range []string{"12:04:05.123 span  Produce demo", "0.41ms", "client=kgo", "partition=0",
		"records=3", "corr=7>12", "ERROR NOT_LEADER_OR_FOLLOWER",
		" id=" + shortID(s.SpanContext()), " links=" + linked.TraceID().String()[:8] + "/" + linked.SpanID().String()[:8]} {
		if !strings.Contains(got, want) {
			t.Errorf("line %q lacks %q", got, want)
		}
	}
	if strings.Count(out.String(), "\n") != 1 {
		t.Errorf("want one line, got %q", out.String())
	}
}
