// Package tracing emits one OpenTelemetry span per Kafka request/response
// pair that kproxy relays, exported over OTLP.
//
// The relay asks Sample first: when tracing is off, or the request is not
// sampled, nothing is decoded and nothing is allocated. A sampled request's
// body is decoded once (framing.Body, shared with policies) for the topic,
// group and record facts the messaging conventions ask for; its response is
// decoded for error codes when the span ends. All span work happens on the
// relay goroutine of the pair, and export is batched in the background with
// a bounded queue, so a slow or absent collector never blocks the relay.
package tracing
