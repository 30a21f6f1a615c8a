package tracing

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// scopeName is the instrumentation scope of kproxy's spans.
const scopeName = "github.com/kproxy/kproxy/tracing"

// The lean exporter's batching: spans go out when a batch holds
// leanBatchMax of them or leanBatchBytes of encoded spans, or
// leanBatchDelay after its first (the SDK's batch processor waits 5 s,
// with batches of 512).
const (
	leanBatchMax   = 2048
	leanBatchDelay = time.Second
	// leanBatchBytes also ends a batch: spans with many links are large,
	// and a collector's gRPC receiver refuses messages over 4 MiB by
	// default, which would lose whole batches.
	leanBatchBytes = 2 << 20
	// leanExportTimeout bounds one upload with its retries, as the SDK's
	// batch processor bounds an export.
	leanExportTimeout = 30 * time.Second
	// leanUploads is how many batches may be on their way at once. The
	// SDK's processor sends one at a time, so the collector's round trip
	// (decoding included) bounds the spans a second it can export; with a
	// few in flight the collector decodes them in parallel while the next
	// batch is encoded.
	leanUploads = 4
)

// leanExporter exports kproxy's spans over OTLP without an SDK span per
// request: the relay hands over the Span record, and one goroutine
// encodes records as OTLP protobuf (spanEncoder) into batches while
// another uploads the previous batch through the OTLP client
// (otlptracehttp or otlptracegrpc, with their endpoint, headers,
// compression, TLS and retries). The bounded queue (exportQueue) is the
// same as the SDK path's: a span with no place is dropped and counted.
type leanExporter struct {
	client otlptrace.Client
	queue  *exportQueue
	m      *metrics
	res    *resourcepb.Resource
	resURL string

	in      chan *Span     // ended spans; room for every place of queue
	batches chan leanBatch // encoded batches for the uploaders
	free    chan []byte    // buffers of batches sent, for reuse
	stop    chan struct{}  // closed by shutdown
	done    chan struct{}  // closed once the uploaders have finished
	once    sync.Once
	stopErr error
}

// leanBatch is the encoded spans field of one ScopeSpans, and how many
// spans it holds.
type leanBatch struct {
	spans []byte
	n     int
}

func newLeanExporter(client otlptrace.Client, res *resource.Resource, q *exportQueue, m *metrics) (*leanExporter, error) {
	if err := client.Start(context.Background()); err != nil {
		return nil, err
	}
	e := &leanExporter{client: client, queue: q, m: m, res: resourceProto(res), resURL: res.SchemaURL(),
		in: make(chan *Span, q.max), batches: make(chan leanBatch, 1), free: make(chan []byte, leanUploads+1),
		stop: make(chan struct{}), done: make(chan struct{})}
	go e.encode()
	var wg sync.WaitGroup
	for range leanUploads {
		wg.Go(e.upload)
	}
	go func() {
		wg.Wait()
		close(e.done)
	}()
	return e, nil
}

// enqueue takes an ended span for export, or drops and counts it when the
// queue is full. It never blocks: the channel has room for every place.
func (e *leanExporter) enqueue(s *Span) {
	if !e.queue.take() {
		e.m.dropped.Inc()
		s.release()
		return
	}
	e.in <- s
}

// encode turns spans into batches until shutdown, then flushes what is
// left (spans already queued included) and closes batches.
func (e *leanExporter) encode() {
	defer close(e.batches)
	var enc spanEncoder
	var cur []byte
	n := 0
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	flush := func() {
		if n > 0 {
			e.batches <- leanBatch{cur, n}
			cur, n = nil, 0
		}
		timer.Stop()
	}
	add := func(s *Span) {
		if n == 0 {
			timer.Reset(leanBatchDelay)
			if cur == nil {
				select {
				case cur = <-e.free:
				default:
					cur = make([]byte, 0, 1024*leanBatchMax)
				}
			}
		}
		cur = enc.appendSpan(cur, s)
		s.release()
		n++
		if n >= leanBatchMax || len(cur) >= leanBatchBytes {
			flush()
		}
	}
	for {
		select {
		case s := <-e.in:
			add(s)
		case <-timer.C:
			flush()
		case <-e.stop:
			for {
				select {
				case s := <-e.in:
					add(s)
				default:
					flush()
					return
				}
			}
		}
	}
}

// upload sends batches until encode closes batches, giving each one's
// queue places back once sent (or failed) and its buffer for reuse.
func (e *leanExporter) upload() {
	for b := range e.batches {
		ctx, cancel := context.WithTimeout(context.Background(), leanExportTimeout)
		err := e.client.UploadTraces(ctx, e.request(b.spans))
		cancel()
		e.queue.give(b.n)
		if err != nil {
			e.m.failures.Inc()
		} else {
			e.m.exported.Add(float64(b.n))
		}
		select {
		case e.free <- b.spans[:0]:
		default:
		}
	}
}

// request wraps encoded spans in the one ResourceSpans and ScopeSpans
// kproxy exports. The spans ride as the ScopeSpans message's unknown
// fields: they are encoded already (field 2, spans), and protobuf writes
// unknown fields back as they are, so the client's marshal copies them
// into the request instead of encoding span objects itself.
func (e *leanExporter) request(spans []byte) []*tracepb.ResourceSpans {
	ss := &tracepb.ScopeSpans{Scope: &commonpb.InstrumentationScope{Name: scopeName}}
	ss.ProtoReflect().SetUnknown(spans)
	return []*tracepb.ResourceSpans{{Resource: e.res, ScopeSpans: []*tracepb.ScopeSpans{ss}, SchemaUrl: e.resURL}}
}

// shutdown exports what is queued and stops the client, within ctx.
func (e *leanExporter) shutdown(ctx context.Context) error {
	e.once.Do(func() {
		close(e.stop)
		select {
		case <-e.done:
		case <-ctx.Done():
			e.stopErr = errors.Join(errors.New("tracing: spans still unexported at shutdown"), ctx.Err())
		}
		e.stopErr = errors.Join(e.stopErr, e.client.Stop(ctx))
	})
	return e.stopErr
}

// idSource makes span and trace ids as the SDK's default generator does:
// random, never all zero.
type idSource struct{}

func (idSource) newIDs() (trace.TraceID, trace.SpanID) {
	var tid trace.TraceID
	var sid trace.SpanID
	for !tid.IsValid() {
		binary.NativeEndian.PutUint64(tid[:8], rand.Uint64())
		binary.NativeEndian.PutUint64(tid[8:], rand.Uint64())
	}
	for !sid.IsValid() {
		binary.NativeEndian.PutUint64(sid[:], rand.Uint64())
	}
	return tid, sid
}

// resourceProto is the resource as the SDK's exporter sends it: its
// attributes in the resource's (sorted) order.
func resourceProto(r *resource.Resource) *resourcepb.Resource {
	if r == nil {
		return nil
	}
	var kvs []*commonpb.KeyValue
	for it := r.Iter(); it.Next(); {
		kv := it.Attribute()
		kvs = append(kvs, &commonpb.KeyValue{Key: string(kv.Key), Value: anyValue(kv.Value)})
	}
	return &resourcepb.Resource{Attributes: kvs}
}

// anyValue converts an attribute value to its OTLP form.
func anyValue(v attribute.Value) *commonpb.AnyValue {
	av := new(commonpb.AnyValue)
	switch v.Type() {
	case attribute.BOOL:
		av.Value = &commonpb.AnyValue_BoolValue{BoolValue: v.AsBool()}
	case attribute.INT64:
		av.Value = &commonpb.AnyValue_IntValue{IntValue: v.AsInt64()}
	case attribute.FLOAT64:
		av.Value = &commonpb.AnyValue_DoubleValue{DoubleValue: v.AsFloat64()}
	case attribute.STRING:
		av.Value = &commonpb.AnyValue_StringValue{StringValue: v.AsString()}
	case attribute.BOOLSLICE:
		av.Value = arrayOf(v.AsBoolSlice(), func(x bool) *commonpb.AnyValue { return anyValue(attribute.BoolValue(x)) })
	case attribute.INT64SLICE:
		av.Value = arrayOf(v.AsInt64Slice(), func(x int64) *commonpb.AnyValue { return anyValue(attribute.Int64Value(x)) })
	case attribute.FLOAT64SLICE:
		av.Value = arrayOf(v.AsFloat64Slice(), func(x float64) *commonpb.AnyValue { return anyValue(attribute.Float64Value(x)) })
	case attribute.STRINGSLICE:
		av.Value = arrayOf(v.AsStringSlice(), func(x string) *commonpb.AnyValue { return anyValue(attribute.StringValue(x)) })
	default:
		av.Value = &commonpb.AnyValue_StringValue{StringValue: "INVALID"}
	}
	return av
}

func arrayOf[T any](xs []T, conv func(T) *commonpb.AnyValue) *commonpb.AnyValue_ArrayValue {
	vals := make([]*commonpb.AnyValue, len(xs))
	for i, x := range xs {
		vals[i] = conv(x)
	}
	return &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vals}}
}
