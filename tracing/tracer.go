// This file holds the Tracer: whether a request is traced (Start), and
// finishing its span with the response or a failure (End, Fail), handing
// it to whichever export path the Tracer was built with.

package tracing

import (
	"context"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/records"
)

// Tracer turns request/response pairs into spans. The zero Tracer is off.
type Tracer struct {
	on    bool
	s     settings
	tp    *sdktrace.TracerProvider
	tr    trace.Tracer
	m     *metrics
	queue *exportQueue // spans waiting for export
	// lean, when set, exports spans over OTLP straight from their
	// records; nil: through the SDK (tp, tr) to an exporter given to
	// NewWithExporter.
	lean *leanExporter
	res  *resource.Resource
	// inflateRate bounds the bytes inflated for links per second, process
	// wide (nil: unbounded).
	inflateRate *inflateRate
}

// On reports whether tracing is enabled at all.
func (t *Tracer) On() bool { return t != nil && t.on }

// InflatesRecords reports whether a Produce's batches may be
// decompressed or rewritten for it (tracing.links.decompress, or
// tracing.propagation.inject), which must then not run on the poller.
func (t *Tracer) InflatesRecords() bool {
	return t.On() && ((t.s.Links.Decompress && t.s.Links.Max > 0) || t.s.Propagation.Inject)
}

// InflatesFetches reports whether End may decompress a Fetch response's
// batches (tracing.links.fetch with links.decompress): responses must
// then not be relayed on the poller.
func (t *Tracer) InflatesFetches() bool {
	return t.On() && t.s.Links.Fetch && t.s.Links.Decompress && t.s.Links.Max > 0
}

// Start prepares the span of a request whose frame was read whole at
// start, or returns nil when the request is not traced. Only a traced
// request has its body decoded (through body, so the decode is shared).
func (t *Tracer) Start(p *Peer, body *framing.Body, upstreamID int32, reqBytes int, start time.Time) *Span {
	if !t.On() {
		return nil
	}
	h := body.Header()
	sampled := t.s.ratio >= 1 || (t.s.ratio > 0 && rand.Float64() < t.s.ratio)
	// A produce may carry a parent to follow instead of the ratio.
	mayFollow := t.s.Links.ChildOfSingleRecord && t.s.parentBased && h.APIKey == framing.KeyProduce && t.s.Links.Max > 0
	if !sampled && !mayFollow {
		return nil
	}
	if t.queue.full() {
		// The export queue is full, so this span would be dropped when it
		// ends: drop it now, before decoding the body and building it.
		// With the collector slower than the requests, building spans
		// only to drop them was most of tracing's cost.
		t.m.dropped.Inc()
		return nil
	}
	var f facts
	// Request has always run by now, so body.Decoded() would say true even
	// for a version relayed opaquely; say whether a body was read.
	decoded := false
	if req, err := body.Request(); err == nil && req != nil {
		f = requestFacts(req, p.ids)
		decoded = true
	}
	if !sampled && f.records != 1 {
		// Only a produce of one record may follow a parent: read no
		// records (and inflate nothing) for a request that stays unsampled.
		return nil
	}
	s := spanPool.Get().(*Span)
	s.peer, s.start = p, start
	if len(f.batches) > 0 && t.s.Links.Max > 0 {
		var b *inflateBudget
		if t.s.Links.Decompress {
			b = t.newBudget()
		}
		found, complete := recordContexts(f.batches, t.s.Links.Max, b)
		s.incomplete = !complete
		t.spentOn(s, b, useProduceLinks)
		if t.s.Links.ChildOfSingleRecord && f.records == 1 && len(found) == 1 {
			s.parent = found[0]
			if t.s.parentBased {
				sampled = found[0].IsSampled()
			}
		} else {
			for _, sc := range found {
				s.links = append(s.links, trace.Link{SpanContext: sc})
			}
		}
	}
	if !sampled {
		s.release()
		return nil
	}
	s.key, s.version = h.APIKey, h.APIVersion
	s.clientCorr, s.upstreamCorr = h.CorrelationID, upstreamID
	s.reqBytes, s.decoded = reqBytes, decoded
	if h.ClientID != nil {
		s.hasClientID, s.clientID = true, p.clientIDString(h.ClientID)
	}
	if len(f.topics) == 1 {
		s.topic = f.topics[0]
		s.hasPartition, s.partition = f.partitions == 1, f.partition
	}
	s.group, s.records = f.group, f.records
	t.m.started.Inc()
	return s
}

// fetchLinks links a Fetch span to the distinct contexts in its returned
// records' traceparent headers (OpenTelemetry's messaging conventions: a
// batch receive links to the creation contexts, it is not their child),
// and counts the records returned.
func (t *Tracer) fetchLinks(s *Span, fr *kmsg.FetchResponse) {
	var batches [][]byte
	n := 0
	for ti := range fr.Topics {
		for pi := range fr.Topics[ti].Partitions {
			if rb := fr.Topics[ti].Partitions[pi].RecordBatches; len(rb) > 0 {
				batches = append(batches, rb)
				n += records.RecordCount(rb)
			}
		}
	}
	s.fetched, s.records = true, n
	if len(batches) == 0 {
		return
	}
	var b *inflateBudget
	if t.s.Links.Decompress {
		b = t.newBudget()
	}
	found, complete := recordContexts(batches, t.s.Links.Max, b)
	s.incomplete = s.incomplete || !complete
	t.spentOn(s, b, useFetchLinks)
	for _, sc := range found {
		s.links = append(s.links, trace.Link{SpanContext: sc})
	}
}

// spentOn counts what reading records for links inflated under b (nil:
// nothing), and the limit that cut it short, if one did.
func (t *Tracer) spentOn(s *Span, b *inflateBudget, use string) {
	if b == nil {
		return
	}
	t.m.inflated.Add(float64(b.inflated))
	if b.cut != "" {
		s.cut = true
		t.m.truncated.WithLabelValues(string(b.cut)).Inc()
		t.m.skipped.WithLabelValues(use, string(b.cut)).Inc()
	}
}

// End emits a span with its response frame (nil when the request gets no
// response, as acks=0 Produce), marking it an error when the response
// carries a non-zero error code anywhere.
func (t *Tracer) End(s *Span, key, version int16, resp []byte) {
	if s == nil {
		return
	}
	if resp != nil {
		s.hasResp, s.respBytes = true, len(resp)
		if r, err := framing.DecodeResponse(resp, key, version); err == nil && r != nil {
			if code := framing.FirstError(r); code != 0 {
				s.failure = errorName(code)
			}
			if fr, ok := r.(*kmsg.FetchResponse); ok && t.s.Links.Fetch && t.s.Links.Max > 0 {
				t.fetchLinks(s, fr)
			}
		}
	}
	t.emit(s)
}

// Fail emits the span of a request whose response will never come, with
// reason as its error type.
func (t *Tracer) Fail(s *Span, reason string) {
	if s != nil {
		s.failure = reason
		t.emit(s)
	}
}

// emit hands the finished span to the lean OTLP exporter, or builds it
// through the SDK for an exporter given to NewWithExporter. The span is
// counted ended only once handed over, so a Shutdown that follows a count
// of started == ended flushes every one of them.
func (t *Tracer) emit(s *Span) {
	s.end = time.Now()
	if t.lean != nil {
		t.lean.enqueue(s)
		t.m.ended.Inc()
		return
	}
	t.emitSDK(s)
	s.release()
	t.m.ended.Inc()
}

// errorName is the Kafka name of an error code (UNKNOWN_TOPIC_OR_PARTITION).
func errorName(code int16) string {
	// ErrorForCode answers UnknownServerError (-1) for codes it does not
	// know; those keep their number instead.
	if ke, ok := kerr.ErrorForCode(code).(*kerr.Error); ok && ke.Code == code {
		return ke.Message
	}
	return strconv.Itoa(int(code))
}

// Shutdown flushes spans still queued.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if !t.On() {
		return nil
	}
	if t.lean != nil {
		return t.lean.shutdown(ctx)
	}
	return t.tp.Shutdown(ctx)
}
