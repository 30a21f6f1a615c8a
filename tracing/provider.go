package tracing

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// New builds the tracer the section and the environment ask for. When
// tracing is off it returns a Tracer whose Start always returns nil.
func New(c Config, version string, reg prometheus.Registerer) (*Tracer, error) {
	s, err := resolve(c, osGetenv)
	if err != nil {
		return nil, err
	}
	if !s.Enabled {
		// Off, it still holds the record path's bounds: policy's record
		// conditions read batches within them (RecordBudget).
		t := &Tracer{s: s}
		if n := s.Links.MaxDecompressedBytesPerSecond; n > 0 {
			t.inflateRate = newInflateRate(n, time.Now())
		}
		return t, nil
	}
	t, err := newTracer(s, version, nil, reg)
	if err != nil {
		return nil, err
	}
	// Spans go out through the lean exporter, encoded from kproxy's
	// records, not through an SDK span each: see docs/benchmarks/round-2.md, "Tracing cost".
	if t.lean, err = newLeanExporter(newClient(s), t.res, t.queue, t.m); err != nil {
		return nil, fmt.Errorf("tracing exporter: %w", err)
	}
	return t, nil
}

// NewWithExporter builds an enabled tracer that sends spans to exp, for
// tests and for other exporters than OTLP.
func NewWithExporter(c Config, version string, exp sdktrace.SpanExporter, reg prometheus.Registerer) (*Tracer, error) {
	s, err := resolve(c, osGetenv)
	if err != nil {
		return nil, err
	}
	s.Enabled = true
	return newTracer(s, version, exp, reg)
}

func newTracer(s settings, version string, exp sdktrace.SpanExporter, reg prometheus.Registerer) (*Tracer, error) {
	res, err := newResource(s, version)
	if err != nil {
		return nil, err
	}
	m := newMetrics(reg)
	q := &exportQueue{max: int64(s.MaxQueueSize)}
	t := &Tracer{on: true, s: s, m: m, queue: q, res: res}
	if n := s.Links.MaxDecompressedBytesPerSecond; n > 0 {
		t.inflateRate = newInflateRate(n, time.Now())
	}
	if exp == nil {
		return t, nil // the caller sets the lean exporter
	}
	bsp := sdktrace.NewBatchSpanProcessor(countingExporter{exp, q, m},
		sdktrace.WithMaxQueueSize(2*s.MaxQueueSize))
	t.tp = sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		// kproxy decides sampling itself (Tracer.Start) before any work is
		// done, so the SDK records what it is given.
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithIDGenerator(presetIDs{}),
		sdktrace.WithSpanProcessor(boundedProcessor{bsp, q, m}),
	)
	t.tr = t.tp.Tracer(scopeName)
	return t, nil
}

// newClient is the OTLP client the section asks for: it holds the
// endpoint, the OTEL_EXPORTER_OTLP_* headers, compression, TLS and
// timeout, and retries a failed upload with backoff.
func newClient(s settings) otlptrace.Client {
	if s.Protocol == "http/protobuf" {
		var opts []otlptracehttp.Option
		if s.Endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(s.Endpoint))
			// WithEndpointURL posts to the URL's path as is, "/" when it
			// has none, where collectors serve nothing: a base URL gets
			// the OTLP traces path, as OTEL_EXPORTER_OTLP_ENDPOINT does.
			if u, err := url.Parse(s.Endpoint); err == nil && (u.Path == "" || u.Path == "/") {
				opts = append(opts, otlptracehttp.WithURLPath("/v1/traces"))
			}
		}
		return otlptracehttp.NewClient(opts...)
	}
	var opts []otlptracegrpc.Option
	if s.Endpoint != "" {
		opts = append(opts, otlptracegrpc.WithEndpointURL(s.Endpoint))
	}
	return otlptracegrpc.NewClient(opts...)
}

// newResource describes this kproxy: service, host, and the Kubernetes pod,
// namespace and node when the downward API passes them in. The
// environment's OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win.
func newResource(s settings, version string) (*resource.Resource, error) {
	attrs := []attribute.KeyValue{semconv.ServiceName(s.ServiceName), semconv.ServiceVersion(version)}
	for k, v := range s.ResourceAttributes {
		attrs = append(attrs, attribute.String(k, v))
	}
	for _, e := range []struct {
		kv   func(string) attribute.KeyValue
		vars []string
	}{
		{semconv.K8SPodName, []string{"K8S_POD_NAME", "POD_NAME"}},
		{semconv.K8SNamespaceName, []string{"K8S_NAMESPACE_NAME", "POD_NAMESPACE"}},
		{semconv.K8SNodeName, []string{"K8S_NODE_NAME", "NODE_NAME"}},
	} {
		for _, name := range e.vars {
			if v := os.Getenv(name); v != "" {
				attrs = append(attrs, e.kv(v))
				break
			}
		}
	}
	return resource.New(context.Background(),
		resource.WithSchemaURL(semconv.SchemaURL),
		resource.WithAttributes(attrs...),
		resource.WithHost(),
		resource.WithFromEnv())
}
