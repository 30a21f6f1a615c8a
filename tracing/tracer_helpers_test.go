package tracing

import (
	"context"
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// otelVars are the variables resolve and the exporters read.
var otelVars = []string{
	"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
	"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
	"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_SERVICE_NAME",
	"OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG", "OTEL_RESOURCE_ATTRIBUTES",
}

// clearOTEL unsets the OTEL_* environment for the test, so a developer's
// shell cannot change what is tested.
func clearOTEL(t *testing.T) {
	t.Helper()
	for _, k := range otelVars {
		t.Setenv(k, "") // restores the old value afterwards
		os.Unsetenv(k)
	}
}

// keep stops the tracer's Shutdown from clearing the in-memory spans, since
// Shutdown is how the test flushes them.
type keep struct{ *tracetest.InMemoryExporter }

func (keep) Shutdown(context.Context) error { return nil }

// newTestTracer is an enabled tracer writing to memory; flush ends it and
// returns its spans.
func newTestTracer(t *testing.T, edit func(*Config)) (*Tracer, func() tracetest.SpanStubs) {
	t.Helper()
	clearOTEL(t)
	c := Defaults()
	if edit != nil {
		edit(&c)
	}
	exp := tracetest.NewInMemoryExporter()
	tr, err := NewWithExporter(c, "test", keep{exp}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Shutdown(context.Background()) })
	return tr, func() tracetest.SpanStubs {
		t.Helper()
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		return exp.GetSpans()
	}
}

// onlySpan fails unless exactly one span was exported.
func onlySpan(t *testing.T, spans tracetest.SpanStubs) tracetest.SpanStub {
	t.Helper()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	return spans[0]
}

// attr returns a span attribute in its string form, and whether it is set.
func attr(s tracetest.SpanStub, key string) (string, bool) {
	for _, kv := range s.Attributes {
		if kv.Key == attribute.Key(key) {
			return kv.Value.Emit(), true
		}
	}
	return "", false
}

func wantAttr(t *testing.T, s tracetest.SpanStub, key, want string) {
	t.Helper()
	if got, ok := attr(s, key); !ok || got != want {
		t.Errorf("%s = %q (set %v), want %q", key, got, ok, want)
	}
}
