// Package tracing emits one OpenTelemetry span per Kafka request/response
// pair that kproxy relays, exported over OTLP.
//
// The relay asks Sample first: when tracing is off, or the request is not
// sampled, nothing is decoded and nothing is allocated. A sampled request's
// body is decoded once (framing.Body, shared with policies) for the topic,
// group and record facts the messaging conventions ask for; its response is
// decoded for error codes when the span ends. On the relay goroutine those
// facts only fill a pooled fixed record (Span); building the exported span
// happens off the relay path. Over OTLP (New), the lean exporter encodes
// records straight to OTLP protobuf and uploads batches through the
// OpenTelemetry OTLP clients; with an exporter of the caller's
// (NewWithExporter: tests, the demo's terminal) the record becomes an SDK
// span, and both send the same spans. Either way export is batched in the
// background with a bounded queue, so a slow or absent collector never
// blocks the relay: spans with no room are dropped and counted.
package tracing
