// Package tracing owns kproxy's OpenTelemetry tracing: one span per Kafka
// request/response pair that kproxy relays, exported over OTLP, and the
// `tracing:` section of kproxy.yaml (with the OTEL_* environment it
// honours). It exists so that a pair shows up in a trace as the client's
// call to the broker, with the messaging conventions' attributes, without
// slowing the relay.
//
// The relay calls Tracer.Start for each request, and End or Fail with
// what Start returned (nil-safe). Start returns nil, having decoded
// nothing, when tracing is off, when the export queue is full, or when
// the ratio does not sample the request and it is not a produce that may
// follow the sampling of its one record's parent
// (tracing.links.child_of_single_record). Otherwise the request's body is
// decoded once (framing.Body, shared with policies) for the topic, group
// and record facts the messaging conventions ask for, and a Produce's
// record batches may be read (within bounds, inflated if
// tracing.links.decompress) for the trace contexts to link to; the
// response is decoded for error codes when End is called.
//
// On the relay goroutine those facts only fill a pooled fixed record
// (Span, with the pair's shared Peer); building the exported span happens
// off the relay path. Over OTLP (New), the lean exporter encodes records
// straight to OTLP protobuf and uploads batches through the OpenTelemetry
// OTLP clients; with an exporter of the caller's (NewWithExporter: tests,
// the demo's terminal) the record becomes an SDK span, and both send the
// same spans. Either way export is batched in the background with a
// bounded queue, so a slow or absent collector never blocks the relay:
// spans with no room are dropped and counted.
package tracing
