package tracing

import (
	"context"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// metrics count spans through their life, so an operator can see spans
// dropped for a slow or absent collector.
type metrics struct {
	started  prometheus.Counter
	ended    prometheus.Counter
	exported prometheus.Counter
	dropped  prometheus.Counter
	failures prometheus.Counter

	inflated  prometheus.Counter     // bytes inflated to read record headers
	truncated *prometheus.CounterVec // requests whose records a limit cut short, by limit
	skipped   *prometheus.CounterVec // batches the record path left as they came, by use and reason
}

func newMetrics(reg prometheus.Registerer) *metrics {
	c := func(name, help string) prometheus.Counter {
		x := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		reg.MustRegister(x)
		return x
	}
	return &metrics{
		started:  c("kproxy_trace_spans_started_total", "Spans started for sampled requests."),
		ended:    c("kproxy_trace_spans_ended_total", "Spans ended (response relayed, or failed)."),
		exported: c("kproxy_trace_spans_exported_total", "Spans handed to the OTLP exporter."),
		dropped:  c("kproxy_trace_spans_dropped_total", "Spans dropped because the export queue was full."),
		failures: c("kproxy_trace_export_failures_total", "Export calls that failed."),
		inflated: c("kproxy_trace_links_inflated_bytes_total", "Bytes inflated from compressed batches to read trace contexts (tracing.links.decompress)."),
		truncated: func() *prometheus.CounterVec {
			v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_trace_links_truncated_total",
				Help: "Produce requests whose records were not all read for links because a limit was reached: " +
					"max_decompressed_bytes, max_decompressed_batches or decoders_busy."}, []string{"limit"})
			reg.MustRegister(v)
			return v
		}(),
		skipped: func() *prometheus.CounterVec {
			v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_records_skipped_total",
				Help: "Record batches the record path left as they came, by use (inject, produce_links, fetch_links) and reason " +
					"(malformed, control, max_batch_bytes, encode_failed, or the inflation limit that stopped it)."}, []string{"use", "reason"})
			reg.MustRegister(v)
			return v
		}(),
	}
}

// exportQueue counts the spans ended and not yet exported, up to max. The
// processor takes places, the exporter gives them back, and Tracer.Start
// builds no span while it is full.
type exportQueue struct {
	pending atomic.Int64
	max     int64
}

func (q *exportQueue) full() bool { return q.pending.Load() >= q.max }

// take reserves a place, or reports false when there is none.
func (q *exportQueue) take() bool {
	if q.pending.Add(1) > q.max {
		q.pending.Add(-1)
		return false
	}
	return true
}

func (q *exportQueue) give(n int) { q.pending.Add(-int64(n)) }

// boundedProcessor drops and counts spans the export queue has no place
// for, so ending a span never blocks the relay. (The SDK's batch processor
// also drops when full, but does not say so.)
type boundedProcessor struct {
	sdktrace.SpanProcessor
	q *exportQueue
	m *metrics
}

func (p boundedProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	if !p.q.take() {
		p.m.dropped.Inc()
		return
	}
	p.SpanProcessor.OnEnd(s)
}

// countingExporter gives queue places back as spans leave for the
// collector.
type countingExporter struct {
	sdktrace.SpanExporter
	q *exportQueue
	m *metrics
}

func (e countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	defer e.q.give(len(spans))
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if err != nil {
		e.m.failures.Inc()
	} else {
		e.m.exported.Add(float64(len(spans)))
	}
	return err
}
