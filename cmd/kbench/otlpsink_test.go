package main

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The sink decodes what the real OTLP/HTTP exporter sends and counts each
// span once.
func TestOTLPSinkCountsExportedSpans(t *testing.T) {
	for _, walk := range []bool{false, true} {
		t.Run(map[bool]string{false: "decode", true: "walk"}[walk], func(t *testing.T) { testOTLPSinkCounts(t, walk) })
	}
}

func testOTLPSinkCounts(t *testing.T, walk bool) {
	sink, err := startOTLPSink(walk)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.close()
	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(sink.URL()+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	tr := tp.Tracer("kbench-test")
	for range 25 {
		_, s := tr.Start(ctx, "Produce kbench")
		s.End()
	}
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatalf("export to the sink: %v", err)
	}
	if got := sink.spans.Load(); got != 25 || sink.bad.Load() != 0 {
		t.Fatalf("sink counted %d spans (%d bad exports), want 25", got, sink.bad.Load())
	}
	if cfg := tracedConfig(sink, 0.5, true); !strings.Contains(cfg, "sample_ratio: 0.5") || !strings.Contains(cfg, sink.URL()) || !strings.Contains(cfg, "inject: true") {
		t.Fatalf("traced config:\n%s", cfg)
	}
}

// The walking sink refuses an export that is not well-formed protobuf.
func TestOTLPSinkWalkRefusesGarbage(t *testing.T) {
	s := &otlpSink{walk: true}
	if _, err := s.count([]byte{0x0a, 0x05, 0x12, 0x09}); err == nil {
		t.Fatal("a truncated export was counted")
	}
}
